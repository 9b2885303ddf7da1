"""The control trainer (trainers/control.py): a short seeded CartPole run learns, resume
3 + 3 equals 6, checkpoint contents, config errors, `policylab train` routing."""

import shutil

import pytest
import torch

from policylab.cli import main
from policylab.config import ConfigError, ControlConfig, load, load_control
from policylab.trainers.control import train
from policylab.trainers.run import read_metrics
from run_testing import assert_same_metrics

FAST = dict(num_envs=4, num_steps=32, minibatch_size=64, epochs=4, progress=False)


def test_short_cartpole_run_beats_a_random_policy(tmp_path):
    # a random policy scores about 22 on CartPole-v1; the tuned defaults get far past it
    cfg = load_control(
        None, {"task": "CartPole-v1", "total_steps": 7680, "run_dir": str(tmp_path / "r")}
    )
    cfg.progress = False
    result = train(cfg)
    assert result.evals[0]["eval/return_mean"] < 50
    assert result.evals[-1]["eval/return_mean"] > 100  # measured 143.8 at seed 0
    assert result.env_steps == 7680


def test_resume_3_plus_3_equals_6(tmp_path):
    fields = dict(FAST, task="CartPole-v1", schedule="constant", eval_every=3, seed=3)
    straight = load(
        ControlConfig, None, dict(fields, total_steps=6 * 128, run_dir=str(tmp_path / "a"))
    )
    train(straight)
    first = load(
        ControlConfig, None, dict(fields, total_steps=3 * 128, run_dir=str(tmp_path / "b"))
    )
    train(first)
    train(first.model_copy(update={"total_steps": 6 * 128}), resume=True)
    a = assert_same_metrics(straight.run_dir, first.run_dir)
    assert len([r for r in a if r["kind"] == "train"]) == 6


def test_checkpoint_contents(tmp_path):
    cfg = load(
        ControlConfig,
        None,
        dict(FAST, task="Pendulum-v1", total_steps=256, normalize_obs=True, run_dir=str(tmp_path)),
    )
    train(cfg)
    names = {p.name for p in tmp_path.iterdir()}
    assert {"config.yaml", "metrics.jsonl", "curves.png", "summary.md", "checkpoints"} <= names
    state = torch.load(tmp_path / "checkpoints" / "step_2" / "state.pt", weights_only=False)
    assert state["step"] == 2 and state["env_steps"] == 256
    assert {"policy", "optimizer", "scheduler", "generator", "collector", "evals"} <= state.keys()
    assert "log_std" in state["policy"] and "obs_norm.mean" in state["policy"]
    assert float(state["policy"]["obs_norm.count"]) == pytest.approx(256, abs=1)
    assert state["config"]["task"] == "Pendulum-v1"


def test_every_parameter_changes(tmp_path):
    cfg = load(
        ControlConfig, None, dict(FAST, task="CartPole-v1", total_steps=128, run_dir=str(tmp_path))
    )
    torch.manual_seed(cfg.seed)
    from policylab.policies import ActorCritic

    before = ActorCritic(4, 2, discrete=True).state_dict()
    train(cfg)
    after = torch.load(tmp_path / "checkpoints" / "step_1" / "state.pt", weights_only=False)[
        "policy"
    ]
    for name, value in before.items():
        assert not torch.equal(value, after[name]), name


def test_bad_configs_fail_before_any_work():
    with pytest.raises(ConfigError, match="minibatch_size=100 must divide"):
        load(ControlConfig, None, {"num_envs": 4, "num_steps": 32, "minibatch_size": 100})
    with pytest.raises(ConfigError, match="has no critic"):
        load(ControlConfig, None, {"algo": "grpo"})


def test_tuned_defaults_sit_under_the_users_fields():
    cfg = load_control(None, {"task": "CartPole-v1", "lr": 5e-4})
    assert (cfg.num_envs, cfg.gamma, cfg.lr) == (8, 0.98, 5e-4)
    assert load_control(None, {"task": "Pendulum-v1"}).normalize_obs is True


def test_cli_routes_gymnasium_ids_to_the_control_trainer(tmp_path, capsys):
    code = main(
        ["train", "--task", "CartPole-v1", "total_steps=256", "progress=false",
         f"run_dir={tmp_path}"]
    )  # fmt: skip
    assert code == 0
    assert "evaluation return" in capsys.readouterr().out
    assert (tmp_path / "checkpoints" / "latest").is_file()


def test_linear_clip_schedule_anneals_epsilon_per_iteration(tmp_path):
    cfg = load(
        ControlConfig,
        None,
        dict(FAST, total_steps=3 * 128, clip_schedule="linear", run_dir=str(tmp_path / "r")),
    )
    train(cfg)
    clips = [row["clip"] for row in read_metrics(cfg.folder, kind="train")]
    assert clips == pytest.approx([0.2, 0.2 * 2 / 3, 0.2 / 3])


def test_async_run_checkpoints_and_resumes(tmp_path):
    fields = dict(FAST, vector="async", eval_every=0, run_dir=str(tmp_path / "r"))
    cfg = load(ControlConfig, None, dict(fields, total_steps=2 * 128))
    train(cfg)
    state = torch.load(tmp_path / "r/checkpoints/step_2/state.pt", weights_only=False)
    assert state["collector"] is None  # subprocesses cannot be pickled
    result = train(cfg.model_copy(update={"total_steps": 3 * 128}), resume=True)
    assert result.env_steps == 3 * 128


def test_reward_normalisation_trains(tmp_path):
    cfg = load(
        ControlConfig,
        None,
        dict(FAST, total_steps=2 * 128, normalize_reward=True, run_dir=str(tmp_path / "r")),
    )
    train(cfg)
    rows = read_metrics(cfg.folder, kind="train")
    # CartPole pays 1 per step; scaled by the return's std the learning reward is below 1
    assert all(0 < row["rollout/reward_mean"] < 1 for row in rows)


def test_load_policy_gives_back_the_trained_policy(tmp_path):
    from policylab.trainers.control import load_policy
    from policylab.workflows.episodes import evaluate_policy

    cfg = load(ControlConfig, None, dict(FAST, total_steps=128, run_dir=str(tmp_path / "r")))
    result = train(cfg)
    policy = load_policy(result.run_dir)
    # the same evaluation episodes give the same return as the run's last evaluation
    again = evaluate_policy(policy, cfg.task, cfg.eval_episodes, cfg.eval_seed)
    assert again["eval/return_mean"] == result.evals[-1]["eval/return_mean"]
    with pytest.raises(FileNotFoundError, match="no checkpoint"):
        load_policy(tmp_path)


def test_an_advantage_time_stage_runs_on_control_time_steps_and_resumes(tmp_path):
    """The control trainer runs the same stages: D³S keeps the transitions whose
    advantages vary most (half at the start) and, among them, the top |A|·H tokens."""
    fields = dict(FAST, task="CartPole-v1", selection="d3s", eval_every=2, save_every=2, seed=1)
    straight = load(
        ControlConfig, None, dict(fields, total_steps=4 * 128, run_dir=str(tmp_path / "a"))
    )
    train(straight)
    rows = read_metrics(straight.run_dir, kind="train")
    assert [r["d3s/sample_keep_frac"] for r in rows] == pytest.approx([0.5, 0.625, 0.75, 0.875])
    plain = load(
        ControlConfig,
        None,
        dict(fields, selection=None, total_steps=128, run_dir=str(tmp_path / "p")),
    )
    train(plain)
    assert rows[0]["loss"] != read_metrics(plain.run_dir, kind="train")[0]["loss"]
    # resumed from its step-2 checkpoint, the run logs iterations 3 and 4 again exactly
    resumed = tmp_path / "c"
    shutil.copytree(straight.run_dir, resumed)
    shutil.rmtree(resumed / "checkpoints" / "step_4")
    (resumed / "checkpoints" / "latest").write_text("step_2\n")
    train(straight.model_copy(update={"run_dir": str(resumed)}), resume=True)
    assert_same_metrics(straight.run_dir, resumed)


def test_a_selection_that_needs_prompt_groups_is_refused_on_control(tmp_path):
    cfg = load(ControlConfig, None, dict(FAST, selection="dynamic_sampling", run_dir=str(tmp_path)))
    with pytest.raises(ValueError, match="only an advantage-time selection applies.*d3s"):
        train(cfg)
    assert not (tmp_path / "metrics.jsonl").exists()
