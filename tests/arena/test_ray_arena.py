"""The arena on Ray (arena/ray_backend.py): on a local Ray cluster an arena gives the same
runs, curves and table as the local arena; a run whose worker is killed after a
checkpoint is retried by Ray and resumed, ending with the numbers of an uninterrupted
run; without Ray installed the error names the extra to install."""

import dataclasses
import os
import sys
import textwrap
import time
from pathlib import Path

import pytest

from policylab.arena import arena
from policylab.arena.ray_backend import gpus_for
from policylab.cli import main
from policylab.trainers.run import read_metrics

ray = pytest.importorskip("ray")

# CartPole runs of 2 iterations of 4 × 32 steps, evaluated and checkpointed after each
CONTROL = dict(num_envs=4, num_steps=32, minibatch_size=64, epochs=2, eval_every=1)
CONTROL.update(eval_episodes=2, save_every=1)
BUDGET = 256

# Imported by every Python process of the test cluster (its folder is on PYTHONPATH). Once
# armed, the first `policylab train` to write a checkpoint disarms it and SIGKILLs its
# parent, the Ray worker; its parent-death signal (SIGTERM) then ends it, as it would end
# the training process of a worker lost to a machine failure.
KILLER = """
import os, signal, sys, time

ARMED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "armed")
if "policylab.cli" in sys.orig_argv and os.path.exists(ARMED):
    from policylab.callbacks import Callbacks

    heard = Callbacks.on_checkpoint

    def on_checkpoint(self, step, path):
        heard(self, step, path)
        try:
            os.remove(ARMED)
        except FileNotFoundError:  # another run was killed already
            return
        os.kill(os.getppid(), signal.SIGKILL)
        time.sleep(60)

    Callbacks.on_checkpoint = on_checkpoint
"""


@pytest.fixture(scope="module")
def killer(tmp_path_factory):
    folder = tmp_path_factory.mktemp("killer")
    (folder / "sitecustomize.py").write_text(textwrap.dedent(KILLER))
    return folder


@pytest.fixture(scope="module")
def cluster(killer):
    """A local Ray cluster of 2 CPUs whose processes import the killer."""
    path = os.pathsep.join(p for p in [str(killer), os.environ.get("PYTHONPATH", "")] if p)
    with pytest.MonkeyPatch.context() as env:
        env.setenv("PYTHONPATH", path)  # the raylet and its workers inherit it
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def local(tmp_path_factory):
    """The reference: the same arena without Ray."""
    return control_arena(tmp_path_factory.mktemp("local") / "a", "ppo", [0, 1])


def control_arena(out, algos, seeds, **kwargs):
    return arena(
        "CartPole-v1",
        algos,
        seeds,
        budget=BUDGET,
        jobs=2,
        overrides=CONTROL,
        out_dir=out,
        progress=False,
        **kwargs,
    )


def numbers(rows):
    """A run's logged metrics without its timings."""
    return [{k: v for k, v in r.items() if not k.startswith(("time/", "perf/"))} for r in rows]


def table(result):
    """The records and the table's rows, without wall-clock seconds."""
    records = [(r.algo, r.seed, r.status, r.curve) for r in result.records]
    rows = [dataclasses.replace(s, seconds=0.0) for s in result.summaries]
    return records, rows


@pytest.mark.slow
def test_an_arena_on_ray_gives_the_local_arenas_table(tmp_path, cluster, local):
    result = control_arena(tmp_path / "a", "ppo", [0, 1], ray=True)
    assert all(r.status == "done" for r in result.records), [r.error for r in result.records]
    assert table(result) == table(local)
    assert [x for x, _ in result.records[0].curve] == [0, 128, 256]
    for ours, theirs in zip(result.records, local.records, strict=True):  # every logged number
        assert numbers(read_metrics(ours.run_dir)) == numbers(read_metrics(theirs.run_dir))
    # the same folders: config, log and done marker of every run, as without Ray
    for name in ("ppo-s0", "ppo-s1"):
        assert (tmp_path / "a" / "configs" / f"{name}.yaml").is_file()
        assert "train --config" in (tmp_path / "a" / "logs" / f"{name}.log").read_text()
        assert (tmp_path / "a" / "runs" / name / "arena_done.json").is_file()
    assert sorted(result.trained) == ["ppo-s0", "ppo-s1"]
    # a finished arena is read back, not run again
    assert control_arena(tmp_path / "a", "ppo", [0, 1], ray=True).trained == []


@pytest.mark.slow
def test_a_run_whose_worker_is_killed_resumes_on_retry(tmp_path, cluster, killer, local):
    (killer / "armed").touch()
    result = control_arena(tmp_path / "a", "ppo", [0], ray=True)
    assert not (killer / "armed").exists()  # the worker was killed after a checkpoint ...
    log = (tmp_path / "a" / "logs" / "ppo-s0.log").read_text()
    attempts = [line for line in log.splitlines() if line.startswith("$ ")]
    assert len(attempts) == 2 and "--resume" in attempts[1] and "--resume" not in attempts[0]
    # ... and the retry resumed it: the numbers of the uninterrupted run
    assert result.records[0].status == "done"
    assert table(result)[0] == table(local)[0][:1]
    assert numbers(read_metrics(result.records[0].run_dir)) == numbers(
        read_metrics(local.records[0].run_dir)
    )


@pytest.mark.slow
def test_ctrl_c_cancels_the_ray_runs_and_ends_their_processes(tmp_path, cluster, monkeypatch):
    from policylab.arena import runner

    out = tmp_path / "a"
    log = out / "logs" / "ppo-s0.log"

    def ctrl_c_once_started(run_dir, spec):  # the progress bar's poll, in the driver
        if _processes_under(out):  # the training process runs on its worker
            raise KeyboardInterrupt
        return 0.0, None

    monkeypatch.setattr(runner, "_latest", ctrl_c_once_started)
    with pytest.raises(KeyboardInterrupt):
        arena("CartPole-v1", "ppo", [0], budget=128 * 100, overrides=CONTROL, out_dir=out,
              progress=False, ray=True)  # fmt: skip
    deadline = time.monotonic() + 30
    while _processes_under(out) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _processes_under(out)  # the worker was ended, its training process with it
    # an interrupted run is neither done nor failed: a re-run resumes or restarts it
    assert not log.with_suffix(".failed").exists()
    assert not (out / "runs" / "ppo-s0" / "arena_done.json").exists()


def _processes_under(folder):
    """Processes whose command line names `folder` (the training processes)."""
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if str(folder) in (proc / "cmdline").read_bytes().decode(errors="replace"):
                found.append(int(proc.name))
        except OSError:  # a process that just ended
            pass
    return found


def test_the_cli_passes_ray_and_gives_back_a_field_it_swallowed(monkeypatch, tmp_path):
    seen = {}

    def fake_arena(task, algos, seeds, **settings):
        seen.update(settings)
        raise KeyboardInterrupt  # stop before any work

    monkeypatch.setattr("policylab.arena.arena", fake_arena)
    base = ["arena", "--task", "CartPole-v1", "--algos", "ppo", "--out", str(tmp_path)]
    assert main([*base, "--ray"]) == 130
    assert seen["ray"] is True
    assert main([*base, "--ray", "ray://head:10001"]) == 130
    assert seen["ray"] == "ray://head:10001"
    assert main([*base, "--ray", "num_envs=4", "epochs=2"]) == 130
    assert seen["ray"] is True and seen["overrides"] == {"num_envs": 4, "epochs": 2}
    assert main(base) == 130
    assert seen["ray"] is False


def test_without_ray_the_error_names_the_extra(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray raises ImportError
    with pytest.raises(ImportError, match=r'pip install "policylab\[ray\]"'):
        arena("CartPole-v1", "ppo", 1, ray=True, out_dir=tmp_path / "a", progress=False)
    assert not (tmp_path / "a").exists()  # before any work
    with pytest.raises(ValueError, match="ray=''"):
        arena("CartPole-v1", "ppo", 1, ray="", out_dir=tmp_path / "a", progress=False)


def test_a_run_asks_ray_for_a_gpu_when_its_device_is_cuda():
    cuda, auto = (dataclasses.make_dataclass("C", [("device", str)])(d) for d in ("cuda:1", "auto"))
    assert gpus_for(cuda, cluster_gpus=0) == 1
    assert (gpus_for(auto, cluster_gpus=2), gpus_for(auto, cluster_gpus=0)) == (1, 0)
    assert gpus_for(object(), cluster_gpus=4) == 0  # control and tabular runs: CPU
