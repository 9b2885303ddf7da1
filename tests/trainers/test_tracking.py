"""Trackers, callbacks, checkpoint retention and the best model (trainers/run.py,
trackers.py, callbacks.py). wandb, mlflow and trackio are not installed here: each is a
stand-in module in sys.modules that records the calls the real API would receive."""

import json
import sys
import types

import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

import policylab
from policylab import trackers
from policylab.callbacks import Callback, Callbacks, StopTraining
from policylab.config import ConfigError, ControlConfig, TrainConfig, load
from policylab.models import load_model
from policylab.trainers import llm
from policylab.trainers.run import Run, read_metrics
from run_testing import FAST_LLM


class Table:
    """wandb.Table / trackio.Table: columns and row-oriented data."""

    def __init__(self, columns=None, data=None):
        self.columns, self.data = columns, data


def fake_module(name: str, functions: tuple[str, ...]) -> types.ModuleType:
    """A module whose functions append (function, args, kwargs) to `module.calls`."""
    module = types.ModuleType(name)
    module.calls = []
    for fn in functions:
        setattr(
            module,
            fn,
            lambda *args, _fn=fn, **kwargs: module.calls.append((_fn, args, kwargs)),
        )
    module.Table = Table
    return module


def fake_wandb():
    return fake_module("wandb", ("init", "log", "finish"))


def fake_mlflow():
    return fake_module("mlflow", ("start_run", "log_params", "log_metrics", "log_text", "end_run"))


def fake_trackio():
    return fake_module("trackio", ("init", "log", "finish"))


def tiny_cfg(small_model_dir, run_dir, **fields):
    return load(
        TrainConfig, None, {**FAST_LLM, "model": small_model_dir, "run_dir": str(run_dir), **fields}
    )


def scalar_tags(run_dir) -> list[str]:
    events = EventAccumulator(str(run_dir))
    events.Reload()
    return events.Tags()["scalars"]


class Recorder(Callback):
    def __init__(self):
        self.calls = []

    def on_step(self, step, metrics):
        self.calls.append(("step", step))

    def on_eval(self, step, metrics):
        self.calls.append(("eval", step))

    def on_checkpoint(self, step, path):
        self.calls.append(("checkpoint", step, path.name))


# ---- names -------------------------------------------------------------------------------
def test_metric_names_carry_the_eval_prefix_once():
    assert trackers.metric_name("eval", "eval/greedy_accuracy") == "eval/greedy_accuracy"
    assert trackers.metric_name("eval", "env_steps") == "eval/env_steps"
    assert trackers.metric_name("train", "reward/mean") == "reward/mean"


def test_flat_config_keeps_numbers_and_writes_the_rest_as_json():
    flat = trackers.flat_config(
        {"lr": 0.1, "algo": "grpo", "loss": {"kl_coef": 0.0}, "stop": ["\n"], "sel": None}
    )
    assert flat == {
        "lr": 0.1,
        "algo": "grpo",
        "loss.kl_coef": 0.0,
        "stop": '["\\n"]',
        "sel": "null",
    }


def test_unknown_tracker_name_is_a_config_error():
    with pytest.raises(ConfigError, match="unknown tracker 'wandbb'; choices: tensorboard, wandb"):
        load(TrainConfig, None, {"report_to": ["wandbb"]})
    with pytest.raises(ConfigError, match="unknown tracker"):
        load(ControlConfig, None, {"report_to": "tensorboard,nope"})


def test_a_tracker_that_is_not_installed_fails_before_any_model_loads(
    small_model_dir, tmp_path, monkeypatch
):
    monkeypatch.setitem(sys.modules, "mlflow", None)  # import mlflow fails, as uninstalled

    def no_model(*args, **kwargs):
        raise AssertionError("a model was loaded")

    monkeypatch.setattr(llm, "load_model", no_model)
    cfg = tiny_cfg(small_model_dir, tmp_path / "run", report_to=["tensorboard", "mlflow"])
    with pytest.raises(ValueError, match="mlflow, which is not installed: pip install mlflow"):
        llm.train(cfg)
    assert not (tmp_path / "run").exists()


def test_all_means_every_installed_tracker(monkeypatch):
    monkeypatch.setitem(sys.modules, "wandb", fake_wandb())
    monkeypatch.setitem(sys.modules, "mlflow", None)
    monkeypatch.setitem(sys.modules, "trackio", None)
    assert trackers.resolve(["all"]) == ["tensorboard", "wandb"]
    assert trackers.resolve(["wandb", "all"]) == ["wandb", "tensorboard"]
    assert trackers.resolve([]) == []


# ---- adapters, against stand-ins of the real APIs ------------------------------------------
def log_a_little(run: Run) -> None:
    run.log(0, {"eval/greedy_accuracy": 0.25, "env_steps": 4, "note": "x"}, kind="eval")
    run.log(1, {"reward/mean": 0.5, "loss": torch.tensor(2.0)})
    run.log_samples(1, [{"prompt": "1+1=", "completion": "2", "reward": 1.0}])
    run.close()


CONFIG = {"algo": "grpo", "lr": 0.001, "loss": {"kl_coef": 0.0}}


def test_wandb_receives_init_log_and_finish(tmp_path, monkeypatch):
    wandb = fake_wandb()
    monkeypatch.setitem(sys.modules, "wandb", wandb)
    monkeypatch.delenv("WANDB_PROJECT", raising=False)
    log_a_little(Run(tmp_path / "my-run", CONFIG, report_to=["wandb"]))
    (init, *logs, finish) = wandb.calls
    assert init == (
        "init",
        (),
        {
            "project": "policylab",
            "name": "my-run",
            "config": CONFIG,
            "dir": str(tmp_path / "my-run"),
        },
    )
    # eval metrics under eval/ once, text metrics left out, tensors as numbers
    assert logs[0] == ("log", ({"eval/greedy_accuracy": 0.25, "eval/env_steps": 4},), {"step": 0})
    assert logs[1] == ("log", ({"reward/mean": 0.5, "loss": 2.0},), {"step": 1})
    (table,), kwargs = logs[2][1], logs[2][2]
    assert kwargs == {"step": 1} and list(table) == ["samples"]
    assert table["samples"].columns == ["prompt", "completion", "reward"]
    assert table["samples"].data == [["1+1=", "2", 1.0]]
    assert finish == ("finish", (), {})


def test_mlflow_receives_a_run_params_metrics_and_samples(tmp_path, monkeypatch):
    mlflow = fake_mlflow()
    monkeypatch.setitem(sys.modules, "mlflow", mlflow)
    log_a_little(Run(tmp_path / "my-run", CONFIG, report_to=["mlflow"]))
    assert [c[0] for c in mlflow.calls] == [
        "start_run",
        "log_params",
        "log_metrics",
        "log_metrics",
        "log_text",
        "end_run",
    ]
    assert mlflow.calls[0][2] == {"run_name": "my-run"}
    assert mlflow.calls[1][1] == ({"algo": "grpo", "lr": 0.001, "loss.kl_coef": 0.0},)
    assert mlflow.calls[2][1:] == (
        ({"eval/greedy_accuracy": 0.25, "eval/env_steps": 4},),
        {"step": 0},
    )
    assert mlflow.calls[3][1:] == (({"reward/mean": 0.5, "loss": 2.0},), {"step": 1})
    text, artifact = mlflow.calls[4][1]
    assert artifact == "samples/step_000001.md"
    assert text.splitlines() == [
        "| prompt | completion | reward |",
        "|---|---|---|",
        "| 1+1= | 2 | 1 |",
    ]


def test_trackio_receives_init_log_and_finish(tmp_path, monkeypatch):
    trackio = fake_trackio()
    monkeypatch.setitem(sys.modules, "trackio", trackio)
    monkeypatch.setenv("TRACKIO_PROJECT", "mine")
    log_a_little(Run(tmp_path / "my-run", CONFIG, report_to=["trackio"]))
    assert trackio.calls[0] == ("init", (), {"project": "mine", "name": "my-run", "config": CONFIG})
    assert [(c[0], c[2]) for c in trackio.calls[1:]] == [
        ("log", {"step": 0}),
        ("log", {"step": 1}),
        ("log", {"step": 1}),
        ("finish", {}),
    ]
    assert trackio.calls[2][1] == ({"reward/mean": 0.5, "loss": 2.0},)
    assert trackio.calls[3][1][0]["samples"].data == [["1+1=", "2", 1.0]]


def test_tensorboard_writes_scalars_text_and_hparams_without_eval_eval(tmp_path):
    log_a_little(Run(tmp_path, CONFIG))
    events = EventAccumulator(str(tmp_path))
    events.Reload()
    tags = events.Tags()
    assert sorted(tags["scalars"]) == [
        "eval/env_steps",
        "eval/greedy_accuracy",
        "loss",
        "reward/mean",
    ]
    assert [e.step for e in events.Scalars("eval/greedy_accuracy")] == [0]
    assert tags["tensors"] == ["samples/text_summary"]  # add_text: a string tensor
    text = events.Tensors("samples/text_summary")[0].tensor_proto.string_val[0].decode()
    assert "| 1+1= | 2 | 1 |" in text
    assert "_hparams_/experiment" in events.PluginTagToContent("hparams")


# ---- retention and the best model -------------------------------------------------------------
@pytest.mark.parametrize(("keep", "kept"), [(3, [3, 4, 5]), (1, [5]), (0, [1, 2, 3, 4, 5])])
def test_retention_keeps_the_newest_n_checkpoints(tmp_path, keep, kept):
    run = Run(tmp_path, {}, keep_checkpoints=keep, report_to=[])
    for step in range(1, 6):
        run.save_checkpoint(step, {"step": step})
    run.close()
    names = sorted(int(p.name.split("_")[1]) for p in (tmp_path / "checkpoints").glob("step_*"))
    assert names == kept
    assert run.latest_checkpoint().name == "step_5"


def test_the_best_folder_holds_the_best_evaluation(tmp_path):
    run = Run(tmp_path, {}, save_best="eval/greedy_accuracy", report_to=[])
    # step 0 (before training) never counts; a tie keeps the earlier step
    for step, value in [(0, 0.9), (1, 0.2), (2, 0.6), (3, 0.4), (4, 0.6)]:
        run.save_best(step, {"eval/greedy_accuracy": value}, {"step": step})
    run.close()
    assert json.loads((tmp_path / "best" / "best.json").read_text()) == {
        "metric": "eval/greedy_accuracy",
        "value": 0.6,
        "step": 2,
    }
    assert torch.load(tmp_path / "best" / "state.pt", weights_only=True) == {"step": 2}
    assert sorted(p.name for p in tmp_path.iterdir() if "best" in p.name) == ["best"]


def test_save_best_names_a_metric_the_evaluation_has(tmp_path):
    run = Run(tmp_path, {}, save_best="eval/greedy_acc", report_to=[])
    with pytest.raises(ValueError, match="'eval/greedy_acc' is not .* choices: eval/greedy_acc"):
        run.save_best(0, {"eval/greedy_accuracy": 0.1}, {"step": 0})
    with pytest.raises(ConfigError, match="save_best compares evaluations"):
        load(TrainConfig, None, {"save_best": "reward/mean"})


# ---- callbacks -----------------------------------------------------------------------------
def test_an_object_without_hooks_is_not_a_callback():
    with pytest.raises(TypeError, match=r"callbacks\[1\] = 3 has none of the hooks"):
        Callbacks([Recorder(), 3])
    one = Recorder()
    assert Callbacks(one).callbacks == [one]  # a single callback, not in a list


@pytest.fixture(scope="module")
def three_steps(small_model_dir, tmp_path_factory):
    """One tiny 3-step run: evaluation every 2 steps, a checkpoint every step (2 kept),
    the best greedy reward kept, TensorBoard and a stand-in wandb, a recording callback."""
    wandb, recorder = fake_wandb(), Recorder()
    run_dir = tmp_path_factory.mktemp("three") / "run"
    cfg = tiny_cfg(
        small_model_dir,
        run_dir,
        steps=3,
        eval_every=2,
        save_every=1,
        report_to=["tensorboard", "wandb"],
        save_best="eval/greedy_reward",
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(sys.modules, "wandb", wandb)
        result = llm.train(cfg, callbacks=[recorder])
    return result, run_dir, wandb, recorder


def test_callbacks_are_called_in_order_with_their_steps(three_steps):
    _, _, _, recorder = three_steps
    assert recorder.calls == [
        ("eval", 0),
        ("step", 1),
        ("checkpoint", 1, "step_1"),
        ("step", 2),
        ("eval", 2),
        ("checkpoint", 2, "step_2"),
        ("step", 3),
        ("eval", 3),
        ("checkpoint", 3, "step_3"),
    ]


def test_trackers_receive_every_row_at_its_step(three_steps):
    _, run_dir, wandb, _ = three_steps
    logged = [(c[2]["step"], sorted(c[1][0])) for c in wandb.calls if c[0] == "log"]
    rows = read_metrics(run_dir)
    expected = []
    for row in rows:
        names = [k for k in row if k not in ("step", "kind")]
        if row["kind"] == "eval":  # budget/samples → eval/budget/samples, eval/... as is
            names = [k if k.startswith("eval/") else f"eval/{k}" for k in names]
        expected.append((row["step"], sorted(names)))
        if row["kind"] == "train":
            expected.append((row["step"], ["samples"]))
    assert logged == expected
    assert [c[0] for c in wandb.calls][:1] == ["init"] and wandb.calls[-1][0] == "finish"


def test_the_real_run_keeps_two_checkpoints_and_its_best_model(three_steps):
    _, run_dir, _, _ = three_steps
    assert sorted(p.name for p in (run_dir / "checkpoints").glob("step_*")) == ["step_2", "step_3"]
    evals = read_metrics(run_dir, kind="eval")
    trained = [(e["eval/greedy_reward"], -e["step"]) for e in evals if e["step"] > 0]
    value, step = max(trained)
    best = json.loads((run_dir / "best" / "best.json").read_text())
    assert best == {"metric": "eval/greedy_reward", "value": value, "step": -step}
    load_model(str(run_dir / "best" / "model"))


def test_the_real_runs_tensorboard_tags_have_no_eval_eval(three_steps):
    _, run_dir, _, _ = three_steps
    tags = scalar_tags(run_dir)
    assert "eval/greedy_accuracy" in tags and "reward/mean" in tags
    assert not [t for t in tags if t.startswith("eval/eval/")]


class StopAt(Callback):
    def __init__(self, hook: str, step: int):
        self.hook, self.step = hook, step

    def on_step(self, step, metrics):
        if self.hook == "on_step" and step == self.step:
            raise StopTraining("enough")

    def on_eval(self, step, metrics):
        if self.hook == "on_eval" and step == self.step:
            raise StopTraining


def test_stop_training_ends_a_language_model_run_with_a_checkpoint(small_model_dir, tmp_path):
    cfg = tiny_cfg(small_model_dir, tmp_path / "run", steps=5, report_to=[])
    recorder = Recorder()
    result = policylab.train(cfg, callbacks=[StopAt("on_step", 2), recorder])
    assert result.steps == 2 and result.after["step"] == 2  # evaluated where it stopped
    assert [r["step"] for r in read_metrics(cfg.run_dir, kind="train")] == [1, 2]
    assert Run(cfg.run_dir, {}, resume=True, report_to=[]).latest_checkpoint().name == "step_2"
    assert recorder.calls[-2:] == [("eval", 2), ("checkpoint", 2, "step_2")]


def test_stop_training_from_an_evaluation_ends_a_control_run(tmp_path):
    fields = dict(
        task="CartPole-v1",
        num_envs=4,
        num_steps=32,
        minibatch_size=64,
        epochs=1,
        total_steps=5 * 128,
        eval_every=1,
        eval_episodes=1,
        report_to=[],
        progress=False,
        run_dir=str(tmp_path / "run"),
    )
    result = policylab.train(fields, callbacks=[StopAt("on_eval", 2)])
    assert [e["step"] for e in result.evals] == [0, 1, 2]
    assert [r["step"] for r in read_metrics(tmp_path / "run", kind="train")] == [1, 2]
    assert Run(tmp_path / "run", {}, resume=True, report_to=[]).latest_checkpoint().name == "step_2"
