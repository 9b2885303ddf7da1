"""Custom environments (envs/user.py): `--task module:EnvId` and `module:EnvClass` from the
command line, an environment or a factory given to `policylab.train` in Python, and the
errors for what cannot work (an unknown module or name, an object in a subprocess)."""

import sys

import gymnasium as gym
import pytest
import user_env_module
import yaml

import policylab
from policylab.cli import main
from policylab.config import ControlConfig, is_gym_task
from policylab.envs.user import (
    gym_id,
    is_object_id,
    is_user_env,
    make_env,
    register_object,
    warn_without_time_limit,
)
from policylab.routing import run_config
from policylab.trainers.run import read_metrics

MOD = "user_env_module"
TINY = dict(
    total_steps=64, num_envs=2, num_steps=32, minibatch_size=32, epochs=1, progress=False,
    report_to=[], eval_episodes=2,
)  # fmt: skip


def test_module_colon_id_is_gymnasiums_syntax():
    task = f"{MOD}:{user_env_module.ENV_ID}"
    assert is_user_env(task) and is_gym_task(task)
    assert gym_id(task) == user_env_module.ENV_ID
    env = make_env(task)
    assert isinstance(env.unwrapped, user_env_module.Countdown)
    assert isinstance(run_config(None, {"task": task}), ControlConfig)


def test_module_colon_class_or_function_is_registered_under_policylab_user():
    assert gym_id(f"{MOD}:Countdown") == f"policylab-user/{MOD}.Countdown-v0"
    assert f"policylab-user/{MOD}.Countdown-v0" in gym.registry
    assert make_env(f"{MOD}:Countdown").unwrapped.length == 5
    # a function returning an environment: make_countdown builds length 3
    assert make_env(f"{MOD}:make_countdown").unwrapped.length == 3
    assert gym_id(f"{MOD}:Countdown") == gym_id(f"{MOD}:Countdown")  # registered once


@pytest.mark.parametrize(
    ("task", "names"),
    [
        ("no_such_module_xyz:Env-v0", ["'no_such_module_xyz'", "module:EnvClass"]),
        (f"{MOD}:Nope-v0", [f"'{MOD}'", "'Nope-v0'", "module:EnvId"]),
        (f"{MOD}:NOT_AN_ENV", ["NOT_AN_ENV", "int", "module:EnvClass"]),
    ],
)
def test_a_custom_environment_that_cannot_be_found_names_module_name_and_forms(task, names):
    with pytest.raises(ValueError) as err:
        gym_id(task)
    for name in names:
        assert name in str(err.value)


def test_what_is_not_a_custom_environment(tmp_path):
    assert not is_user_env("rg:countdown")  # a reasoning-gym language task
    assert not is_user_env("countdown") and not is_user_env("CartPole-v1")
    assert not is_user_env("a:b:c") and not is_user_env("not a module:X")
    data = tmp_path / "rows:v2.jsonl"
    data.write_text("{}\n")
    assert not is_user_env(str(data))  # a data file whose name has a colon


def test_a_module_in_the_current_folder_is_found_as_python_m_would(tmp_path, monkeypatch):
    (tmp_path / "here_env_mod.py").write_text(
        "from user_env_module import Countdown\n\nclass Here(Countdown):\n    pass\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    monkeypatch.delitem(sys.modules, "here_env_mod", raising=False)
    assert type(make_env("here_env_mod:Here").unwrapped).__name__ == "Here"


def test_cli_trains_a_module_class_and_load_policy_reads_it(tmp_path):
    run_dir = tmp_path / "r"
    args = [f"{k}={v}" for k, v in TINY.items() if k != "report_to"]
    code = main(
        ["train", "--task", f"{MOD}:Countdown", *args, "report_to=[]", f"run_dir={run_dir}"]
    )
    assert code == 0
    assert yaml.safe_load((run_dir / "config.yaml").read_text())["task"] == f"{MOD}:Countdown"
    policy = policylab.load_policy(run_dir)
    action, state = policy.predict([3.0], deterministic=True)
    assert state is None and action.shape == () and int(action) in (0, 1)


def test_train_takes_a_factory_or_an_environment(tmp_path):
    result = policylab.train(
        task=user_env_module.make_countdown, run_dir=str(tmp_path / "f"), **TINY
    )
    cfg = yaml.safe_load((tmp_path / "f" / "config.yaml").read_text())
    assert cfg["task"] == "policylab-object/make_countdown-v0" and is_object_id(cfg["task"])
    assert result.env_steps == 64
    env = user_env_module.Countdown(length=4)
    result = policylab.train(task=env, run_dir=str(tmp_path / "e"), **TINY)
    assert result.env_steps == 64
    assert env.left == 4  # the object itself was copied, never stepped


def test_an_object_run_refuses_what_needs_another_process(tmp_path):
    with pytest.raises(ValueError, match="vector='async'"):
        policylab.train(
            task=user_env_module.make_countdown, vector="async", run_dir=str(tmp_path / "a"), **TINY
        )
    assert not (tmp_path / "a").exists()  # refused before the run folder was made
    policylab.train(task=user_env_module.Countdown, run_dir=str(tmp_path / "b"), **TINY)
    env_id = "policylab-object/Countdown-v0"
    del gym.registry[env_id]  # as in a new process, which never registered it
    with pytest.raises(ValueError, match=r"policylab.train\(task=<the same environment"):
        policylab.train(task=env_id, resume=True, run_dir=str(tmp_path / "b"), **TINY)
    # the policy loads without the environment: the checkpoint holds the spaces
    policy = policylab.load_policy(tmp_path / "b")
    assert policy.observation_space == user_env_module.Countdown.observation_space


@pytest.mark.parametrize(
    ("task", "message"),
    [
        (lambda: user_env_module.SHARED, "same environment object twice"),
        (lambda: 3, "not a gymnasium.Env"),
        (gym.vector.SyncVectorEnv([user_env_module.make_countdown]), "builds num_envs copies"),
    ],
)
def test_objects_that_cannot_be_an_environment_are_refused(task, message):
    user_env_module.SHARED = user_env_module.Countdown()
    with pytest.raises(ValueError, match=message):
        register_object(task)


def test_max_episode_steps_bounds_an_environment_without_an_end(tmp_path, caplog):
    task = f"{MOD}:Endless"
    with caplog.at_level("WARNING"):
        result = policylab.train(
            task=task, max_episode_steps=7, run_dir=str(tmp_path / "r"), **TINY
        )
    assert "no time limit" not in caplog.text
    assert [e["eval/length_mean"] for e in result.evals] == [7.0, 7.0]
    rows = read_metrics(tmp_path / "r", kind="train")
    assert rows[0]["rollout/episode_length"] == 7.0  # 2 envs × 32 steps: 8 episodes of 7
    assert rows[0]["rollout/episodes"] == 8
    warn_without_time_limit(task, None)
    assert "has no time limit" in caplog.text and "max_episode_steps=N" in caplog.text


def test_no_warning_when_the_factory_sets_its_own_time_limit(caplog):
    task = register_object(lambda: gym.wrappers.TimeLimit(user_env_module.Endless(), 9))
    assert task == "policylab-object/lambda-v0"
    with caplog.at_level("WARNING"):
        warn_without_time_limit(task, None)  # the factory's own TimeLimit: no warning
        warn_without_time_limit(f"{MOD}:{user_env_module.ENV_ID}", None)  # registered without
    assert caplog.text.count("has no time limit") == 1
    assert user_env_module.ENV_ID in caplog.text
