"""One rule routes a run to its trainer (routing.py), for `policylab.train` and the CLI: a
gymnasium id is a control run, any other task a language-model run."""

import pytest
import yaml

import policylab
from policylab import routing
from policylab.cli import main
from policylab.config import ControlConfig, TrainConfig
from policylab.trainers.control import ControlResult


def test_gymnasium_ids_give_control_configs_with_their_tuned_defaults():
    cfg = routing.run_config(None, {"task": "CartPole-v1"})
    assert isinstance(cfg, ControlConfig)
    assert (cfg.num_envs, cfg.gamma) == (8, 0.98)  # CONTROL_DEFAULTS["CartPole-v1"]
    assert isinstance(routing.run_config({"task": "Pendulum-v1"}), ControlConfig)


def test_other_tasks_give_language_model_configs():
    assert isinstance(routing.run_config(None, {"task": "arithmetic"}), TrainConfig)
    assert isinstance(routing.run_config(), TrainConfig)  # TrainConfig's default task
    yaml_file = "examples/demo.yaml"
    assert routing.run_config(yaml_file, {"steps": 3}).steps == 3


def test_the_fields_name_the_task_before_the_config():
    cfg = routing.run_config(TrainConfig(task="arithmetic"), {"task": "CartPole-v1"})
    assert isinstance(cfg, ControlConfig) and cfg.task == "CartPole-v1"


def test_a_model_for_a_control_task_is_an_error():
    with pytest.raises(ValueError, match="model='tiny' is for language models"):
        routing.run_config(None, {"task": "CartPole-v1", "model": "tiny"})


def test_policylab_train_runs_a_control_task(tmp_path):
    # CartPole's tuned defaults: 8 envs × 32 steps = 256 env steps per iteration, so 256
    # steps is one iteration, evaluated before and after.
    result = policylab.train(
        task="CartPole-v1", total_steps=256, progress=False, run_dir=str(tmp_path / "run")
    )
    assert isinstance(result, ControlResult)
    assert result.env_steps == 256
    assert [e["env_steps"] for e in result.evals][-1] == 256


def test_the_cli_routes_through_the_same_rule(tmp_path, capsys, monkeypatch):
    seen = []
    real = routing.run_config

    def spy(*args, **kwargs):
        cfg = real(*args, **kwargs)
        seen.append(cfg)
        return cfg

    monkeypatch.setattr(routing, "run_config", spy)
    code = main(
        ["train", "--task", "CartPole-v1", "total_steps=256", "progress=false",
         f"run_dir={tmp_path}"]
    )  # fmt: skip
    assert code == 0
    assert len(seen) == 1 and isinstance(seen[0], ControlConfig)
    assert "evaluation return" in capsys.readouterr().out


def test_a_config_object_is_taken_as_it_is():
    # its own defaults, not the environment's tuned ones (which only fill unset fields of
    # configs given as fields or files)
    given = ControlConfig(task="CartPole-v1")
    assert routing.run_config(given) == given
    assert routing.run_config(given, {"seed": 3}).model_dump() == {
        **given.model_dump(),
        "seed": 3,
    }


def test_the_python_api_resumes_with_the_fields_the_run_started_with(tmp_path):
    # as `policylab train --resume`: hidden=[16] need not be given again (before, the
    # API rebuilt the config from the task's defaults: a [64, 64] network for a [16] one)
    import policylab

    fields = dict(task="CartPole-v1", num_envs=2, num_steps=16, minibatch_size=16, progress=False)
    run = str(tmp_path / "r")
    first = policylab.train(**fields, hidden=[16], total_steps=32, run_dir=run, report_to=[])
    again = policylab.train(**fields, total_steps=64, run_dir=run, report_to=[], resume=True)
    assert first.env_steps == 32 and again.env_steps == 64
    config = yaml.safe_load((tmp_path / "r" / "config.yaml").read_text())
    assert config["hidden"] == [16]
