"""A run folder under interruption, a second process and untrusted files (issue #24):
checkpoints load with weights_only=True (a pickle payload is refused, not run), control
environments come back from plain data, one live process owns a folder, a resume drops
the rows its checkpoint does not cover, a torn last metrics line is tolerated, a full
disk spares the previous checkpoint, and a resume keeps its task, algo, seed and model."""

import errno
import fcntl
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from policylab import routing
from policylab.cli import main
from policylab.config import ControlConfig, load
from policylab.trainers import run as run_module
from policylab.trainers.control import load_policy, train
from policylab.trainers.run import Run, read_metrics
from policylab.trainers.run_safety import RunFolderError, RunFolderInUse
from policylab.workflows.episodes import EpisodeCollector
from policylab.workflows.offline import OfflineSet
from run_testing import assert_same_metrics

# a control run of a few seconds: 2 iterations of 2 × 16 CartPole steps
TINY = dict(
    task="CartPole-v1",
    num_envs=2,
    num_steps=16,
    minibatch_size=16,
    epochs=1,
    hidden=[8],
    eval_episodes=2,
    total_steps=2 * 32,
    progress=False,
)


class Payload:
    """Unpickling this creates the file `marker`: what a hostile state.pt would do."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_a_pickle_payload_in_a_checkpoint_is_refused_not_run(tmp_path):
    marker = tmp_path / "pwned"
    run = Run(tmp_path / "r", {})
    run.save_checkpoint(1, {"step": 1, "x": Payload(marker)})
    run.close()
    resumed = Run(tmp_path / "r", {}, resume=True)
    with pytest.raises(ValueError, match=r"state\.pt: refused to load"):
        resumed.load_checkpoint()
    with pytest.raises(ValueError, match=r"step_1/state\.pt: refused to load"):
        load_policy(tmp_path / "r")
    torch.save({"batch": Payload(marker)}, tmp_path / "offline.pt")
    with pytest.raises(ValueError, match=r"offline\.pt: refused to load"):
        OfflineSet.load(tmp_path)
    assert not marker.exists()
    # numbers in numpy arrays (a sampler's statistics) are plain data; objects in them not
    run = Run(tmp_path / "n", {})
    run.save_checkpoint(1, {"step": 1, "alpha": np.ones(3), "seen": np.zeros(2, dtype=bool)})
    assert Run(tmp_path / "n", {}, resume=True).load_checkpoint()[1]["alpha"].sum() == 3
    run.save_checkpoint(2, {"step": 2, "x": np.array([print], dtype=object)})
    with pytest.raises(ValueError, match=r"step_2/state\.pt: refused to load"):
        Run(tmp_path / "n", {}, resume=True).load_checkpoint()


@pytest.fixture
def one_thread():
    """Tiny tensors: more torch threads only wait on each other."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_environments_resume_from_plain_data_step_for_step(tmp_path, one_thread):
    """A collector's state survives torch.save / weights_only=True and a fresh collector
    (same id and seed) with it steps exactly like the original."""
    from policylab.policies import ActorCritic

    torch.manual_seed(0)
    policy = ActorCritic(4, 2, discrete=True)
    original = EpisodeCollector("CartPole-v1", 2, seed=5, reward_gamma=0.99)
    original.collect(policy, 40, torch.Generator().manual_seed(1))  # some episodes end
    torch.save(original.state_dict(), tmp_path / "collector.pt")
    state = torch.load(tmp_path / "collector.pt", weights_only=True)
    rebuilt = EpisodeCollector("CartPole-v1", 2, seed=5, reward_gamma=0.99)
    rebuilt.load_state_dict(state)
    a = original.collect(policy, 60, torch.Generator().manual_seed(2))
    b = rebuilt.collect(policy, 60, torch.Generator().manual_seed(2))
    assert torch.equal(a.obs, b.obs) and torch.equal(a.rewards, b.rewards)
    assert a.episode_returns == b.episode_returns and a.episode_returns  # episodes ended
    fresh = EpisodeCollector("CartPole-v1", 2, seed=5, reward_gamma=0.99)
    c = fresh.collect(policy, 60, torch.Generator().manual_seed(2))
    assert not torch.equal(a.obs, c.obs)  # the restored state is what made them agree


def test_a_second_process_is_refused_and_the_lock_goes_with_it(tmp_path, caplog):
    folder = tmp_path / "r"
    folder.mkdir()
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from pathlib import Path; "
            "from policylab.trainers.run_safety import acquire_lock; "
            f"acquire_lock(Path({str(folder)!r})); print('locked', flush=True); "
            "sys.stdin.read(); raise KeyboardInterrupt",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    try:
        assert child.stdout.readline().strip() == "locked"
        with pytest.raises(RunFolderInUse, match=rf"{folder} is in use by process {child.pid}"):
            Run(folder, {"task": "CartPole-v1"})
        assert not (folder / "config.yaml").exists()
    finally:
        child.stdin.close()
        child.wait(timeout=60)
    assert child.returncode != 0  # it ended by KeyboardInterrupt, releasing its lock
    with caplog.at_level(logging.WARNING):
        Run(folder, {"task": "CartPole-v1"}).close()
    assert "stale" not in caplog.text


def test_a_stale_lock_is_taken_over_with_a_warning_and_close_releases(tmp_path, caplog):
    folder = tmp_path / "r"
    folder.mkdir()
    # a process killed with -9 leaves its record, but the kernel dropped its flock
    (folder / ".lock").write_text(json.dumps({"pid": 4242424, "host": "elsewhere"}))
    with caplog.at_level(logging.WARNING):
        run = Run(folder, {})
    assert "stale lock of process 4242424 on elsewhere" in caplog.text
    assert json.loads((folder / ".lock").read_text())["pid"] == os.getpid()
    run.close()
    fd = os.open(folder / ".lock", os.O_RDWR)
    try:  # a new descriptor could not lock it if this process still held it
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        os.close(fd)
    assert (folder / ".lock").read_text() == ""


def test_a_kill_before_the_first_checkpoint_leaves_no_duplicate_rows(tmp_path, monkeypatch):
    """save_every=0: the only checkpoint is the last. A kill before it, then --resume,
    gives the rows of an uninterrupted run, each (step, kind) once."""
    straight = load(ControlConfig, None, dict(TINY, run_dir=str(tmp_path / "a")))
    train(straight)
    killed = straight.model_copy(update={"run_dir": str(tmp_path / "b")})

    def kill(*args, **kwargs):
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(Run, "save_checkpoint", kill)
        with pytest.raises(KeyboardInterrupt):
            train(killed)
    (tmp_path / "b" / "samples.jsonl").write_text('{"step": 1}\n')
    assert len(read_metrics(killed.run_dir)) == 4  # eval 0, train 1, train 2, eval 2
    train(killed, resume=True)
    rows = assert_same_metrics(straight.run_dir, killed.run_dir)
    assert len({(r["step"], r["kind"]) for r in rows}) == len(rows) == 4
    assert not (tmp_path / "b" / "samples.jsonl").exists()


def test_a_torn_last_line_is_dropped_and_a_corrupt_one_named(tmp_path, caplog):
    run = Run(tmp_path, {})
    for step in range(3):
        run.log(step, {"x": float(step)})
    run.save_checkpoint(1, {"step": 1})
    run.close()
    path = tmp_path / "metrics.jsonl"
    with open(path, "a") as f:
        f.write('{"step": 3, "kind": "tr')  # killed in the middle of a write
    with caplog.at_level(logging.WARNING):
        assert [r["step"] for r in read_metrics(tmp_path)] == [0, 1, 2]
    assert "metrics.jsonl: dropped its torn last line 4" in caplog.text
    Run(tmp_path, {}, resume=True).load_checkpoint()  # keeps what step 1 covers
    assert [r["step"] for r in read_metrics(tmp_path)] == [0, 1]
    lines = path.read_text().splitlines()
    path.write_text("\n".join([lines[0], "{not json", lines[1]]) + "\n")
    with pytest.raises(ValueError, match=r"metrics\.jsonl, line 2: not a JSON object"):
        read_metrics(tmp_path)


def test_a_full_disk_spares_the_previous_checkpoint(tmp_path, monkeypatch, caplog):
    run = Run(tmp_path, {})
    first = run.save_checkpoint(1, {"step": 1})

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(run_module.torch, "save", full)
    with caplog.at_level(logging.WARNING):
        assert run.save_checkpoint(2, {"step": 2}) is None  # training goes on
    assert "could not write checkpoint" in caplog.text and "No space left" in caplog.text
    assert str(tmp_path / "checkpoints" / "step_2") in caplog.text
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["latest", "step_1"]
    assert run.latest_checkpoint() == first
    with pytest.raises(RunFolderError, match=r"last checkpoint \(step 2\) could not be written"):
        run.close()  # the run's last checkpoint failed: it ends with an error, not silently


def test_metrics_that_cannot_be_written_stop_the_run_with_the_file_named(tmp_path, monkeypatch):
    run = Run(tmp_path, {})
    run.log(0, {"x": 1.0})
    real_open = os.open

    def read_only(path, flags, *args):
        if str(path).endswith("metrics.jsonl"):
            raise OSError(errno.EROFS, "Read-only file system")
        return real_open(path, flags, *args)

    monkeypatch.setattr(os, "open", read_only)
    with pytest.raises(RunFolderError, match=r"cannot write .*metrics\.jsonl: .*Read-only"):
        run.log(1, {"x": 2.0})


def test_a_resume_keeps_task_algo_seed_and_writes_its_config_once_it_runs(tmp_path, capsys):
    folder = tmp_path / "r"
    saved = load(ControlConfig, None, dict(TINY, run_dir=str(folder))).model_dump()
    Run(folder, saved).close()
    before = (folder / "config.yaml").read_text()
    for override in ("task=Pendulum-v1", "algo=fpo", "seed=7", "task=countdown"):
        assert main(["train", "--resume", str(folder), override]) == 2
        out = capsys.readouterr().out
        assert "cannot resume" in out and override.split("=")[0] in out, out
    assert (folder / "config.yaml").read_text() == before
    config = {k: v for k, v in yaml.safe_load(before).items() if k != "provenance"}
    assert routing.run_config(None, {"total_steps": 128}, saved=config).total_steps == 128
    with pytest.raises(ValueError, match="cannot resume .* with task='countdown'"):
        Run(folder, {**saved, "task": "countdown"}, resume=True)  # the API's path too
    # an allowed change reaches config.yaml only once the resumed run logs a row
    run = Run(folder, {**saved, "total_steps": 128}, resume=True)
    assert (folder / "config.yaml").read_text() == before
    run.log(0, {"x": 1.0})
    assert yaml.safe_load((folder / "config.yaml").read_text())["total_steps"] == 128
    run.close()


def test_a_control_resume_keeps_the_shape_of_its_networks():
    from policylab.trainers.run_safety import check_keeps

    saved = {"task": "Pendulum-v1", "algo": "ppo", "use_sde": False, "normalize_obs": True}
    # a gSDE policy's log_std is [64, 1], a Gaussian's [1]: refused by name, before a
    # load_state_dict size mismatch
    with pytest.raises(ValueError, match="cannot resume .* with use_sde=True"):
        check_keeps(saved, {**saved, "use_sde": True}, "runs/x")
    with pytest.raises(ValueError, match="with normalize_obs=False"):
        check_keeps(saved, {**saved, "normalize_obs": False}, "runs/x")
    check_keeps(saved, {**saved, "total_steps": 200_000}, "runs/x")
