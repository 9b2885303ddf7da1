"""Thread defaults (trainers/run.py): `auto_threads` maps cores and load to a count,
`threads` in both configs reaches torch during a run and is restored after it."""

import pytest
import torch

from policylab.callbacks import Callback
from policylab.config import ControlConfig, TrainConfig
from policylab.trainers import run as run_module
from policylab.trainers.control import CONTROL_MAX_THREADS
from policylab.trainers.control import train as train_control
from policylab.trainers.run import auto_threads, resolve_threads, torch_threads


@pytest.mark.parametrize(
    ("cpus", "load", "limit", "expected"),
    [
        (2, 0.0, 2, 2),  # idle: every core
        (2, 0.4, 2, 2),  # round(2 − 0.4) = round(1.6) = 2
        (2, 0.6, 2, 1),  # round(1.4) = 1
        (2, 6.0, 2, 1),  # loaded beyond the cores: one thread, never 0
        (16, 4.0, 16, 12),  # 12 cores free
        (16, 4.0, 8, 8),  # the cap wins: torch's own count (OMP_NUM_THREADS)
        (16, 0.0, 1, 1),  # control's cap
        (8, 7.5, 8, 1),  # round(0.5) = 1 (halves round up)
    ],
)
def test_auto_threads_is_the_free_cores_between_1_and_the_cap(cpus, load, limit, expected):
    assert auto_threads(cpus, load, limit) == expected


def test_auto_threads_never_rises_with_load():
    counts = [auto_threads(8, load / 4, 8) for load in range(0, 60)]
    assert counts == sorted(counts, reverse=True)
    assert counts[0] == 8 and counts[-1] == 1


def test_resolve_threads_reads_cores_and_load(monkeypatch):
    monkeypatch.setattr(run_module.os, "cpu_count", lambda: 4)
    monkeypatch.setattr(run_module.os, "getloadavg", lambda: (2.2, 0.0, 0.0))
    assert resolve_threads("auto", limit=4) == 2  # round(4 − 2.2) = 2
    assert resolve_threads("auto", limit=1) == 1
    assert resolve_threads(3) == 3
    assert resolve_threads(0) == torch.get_num_threads()  # torch's own count, untouched
    with pytest.raises(ValueError, match="threads=-1"):
        resolve_threads(-1)


def test_torch_threads_sets_and_restores():
    before = torch.get_num_threads()
    with torch_threads(before + 1) as chosen:
        assert chosen == before + 1 == torch.get_num_threads()
    assert torch.get_num_threads() == before
    with pytest.raises(RuntimeError), torch_threads(before + 2):
        raise RuntimeError("a failing run")
    assert torch.get_num_threads() == before


def test_threads_field_follows_seed_in_both_configs():
    for config in (TrainConfig, ControlConfig):
        names = list(config.model_fields)
        assert names[names.index("seed") + 1] == "threads"
        assert config().threads == "auto"
        assert config(threads=2).threads == 2
        with pytest.raises(ValueError, match="threads='two'"):
            config(threads="two")
        with pytest.raises(ValueError, match="threads=-1"):
            config(threads=-1)


def test_control_reads_torch_threads_the_older_name():
    assert ControlConfig(torch_threads=1).threads == 1
    assert ControlConfig(torch_threads=0).threads == 0
    with pytest.raises(ValueError, match="disagree"):
        ControlConfig(torch_threads=1, threads=2)


class _Threads(Callback):
    def __init__(self):
        self.seen = []

    def on_step(self, step, metrics):
        self.seen.append(torch.get_num_threads())


@pytest.mark.parametrize(("threads", "expected"), [(2, 2), ("auto", CONTROL_MAX_THREADS)])
def test_control_run_trains_on_its_threads_and_restores_them(tmp_path, threads, expected):
    before = torch.get_num_threads()
    spy = _Threads()
    cfg = ControlConfig(
        task="CartPole-v1",
        total_steps=32,  # one iteration: two threads on a busy machine are slow
        num_envs=2,
        num_steps=16,
        minibatch_size=32,
        epochs=1,
        eval_every=0,
        eval_episodes=1,
        threads=threads,
        progress=False,
        report_to=[],
        run_dir=str(tmp_path / "r"),
    )
    train_control(cfg, callbacks=[spy])
    assert spy.seen == [expected]
    assert torch.get_num_threads() == before


@pytest.mark.slow
def test_language_model_run_trains_on_its_threads_and_restores_them(tmp_path):
    from policylab.trainers.llm import train as train_llm

    before = torch.get_num_threads()
    spy = _Threads()
    cfg = TrainConfig(
        model="tiny", task="arithmetic", steps=1, prompts_per_step=2, samples_per_prompt=2,
        max_new_tokens=4, train_pool=8, eval_n=2, eval_every=0, save_every=0, threads=2,
        progress=False, report_to=[], run_dir=str(tmp_path / "r"),
    )  # fmt: skip
    train_llm(cfg, callbacks=[spy])
    assert spy.seen == [2]
    assert torch.get_num_threads() == before
