"""The arena against hostile input and unlucky ends (issue #24): its printed command is
shell-quoted and reproduces the arena, its training children die with it, and bad
budgets, seeds and job counts fail before any work."""

import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import policylab.arena
from policylab.arena import arena, make_spec
from policylab.arena.runner import command_line, split_algos
from policylab.cli import main
from policylab.config import ControlConfig, parse_overrides

SRC = Path(__file__).resolve().parents[2] / "src"


def cli_spec(argv: list[str], monkeypatch) -> dict:
    """The arguments `policylab arena ARGV` hands to policylab.arena.arena."""
    seen = {}

    def fake_arena(*args, **kwargs):
        seen.update(args=args, kwargs=kwargs)
        raise KeyboardInterrupt  # stop before any work; the CLI answers 130

    monkeypatch.setattr(policylab.arena, "arena", fake_arena)
    assert main(argv) == 130
    return seen


def test_printed_command_is_shell_quoted_and_reproduces_the_arena(tmp_path, monkeypatch):
    hostile = 'grpo@stop_strings=["$(touch X)", "a b"]'
    out = tmp_path / "out $(touch Y) `touch Z`"
    spec = make_spec(
        "arithmetic",
        ["grpo", hostile],
        2,
        budget=256,
        overrides={"max_new_tokens": 8, "stop_strings": ["; touch W", "it's"]},
        threshold=0.1234567891,
    )
    command = command_line(out, spec)
    args = shlex.split(command)
    assert args[:2] == ["policylab", "arena"]
    assert args[args.index("--algos") + 1] == f"grpo,{hostile}"
    assert args[args.index("--out") + 1] == str(out)
    # pasted into a shell (printf in place of policylab), every argument arrives as
    # printed and nothing runs
    shell = subprocess.run(
        ["bash", "-c", "printf '%s\\0' " + command.removeprefix("policylab arena ")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    assert shell.stdout.split("\0")[:-1] == args[2:]
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no X, Y, Z or W
    # and the CLI reads it back to the same arena
    seen = cli_spec(args[1:], monkeypatch)
    kwargs = seen["kwargs"]
    again = make_spec(
        *seen["args"],
        budget=kwargs["budget"],
        overrides=kwargs["overrides"],
        baseline=kwargs["baseline"],
        threshold=kwargs["threshold"],
    )
    assert again == spec
    assert kwargs["out_dir"] == str(out)


def test_algos_split_at_top_level_commas_only():
    assert split_algos("ppo, ppo@clip_schedule=linear") == ["ppo", "ppo@clip_schedule=linear"]
    assert split_algos('grpo,grpo@stop_strings=["a,b", c]@k={x: 1, y: 2},rloo') == [
        "grpo",
        'grpo@stop_strings=["a,b", c]@k={x: 1, y: 2}',
        "rloo",
    ]
    # the entry's value is read as YAML, whole
    assert parse_overrides(['stop_strings=["a,b", c]']) == {"stop_strings": ["a,b", "c"]}


def test_entries_that_would_share_a_run_folder_are_refused():
    with pytest.raises(ValueError, match="share the run folder name 'ppo@clip_schedule=a_b-s0'"):
        make_spec("CartPole-v1", ["ppo@clip_schedule=a b", "ppo@clip_schedule=a_b"])


def test_override_values_are_printed_so_that_they_read_back_the_same(tmp_path):
    overrides = {"eval_episodes": 2, "ent_coef": 0.01, "clip_schedule": "linear"}
    spec = make_spec("CartPole-v1", "ppo", 1, budget=256, overrides=overrides)
    spec.overrides.update(name="true", note=None)  # strings YAML would read as bool / None
    command = command_line(tmp_path, spec)
    fields = [a for a in shlex.split(command) if "=" in a and not a.startswith("--")]
    assert parse_overrides(fields) == spec.overrides


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"budget": 0}, "--budget 0: expected a positive whole number"),
        ({"budget": -256}, "--budget -256: expected a positive whole number"),
        ({"budget": 2.5}, "--budget 2.5"),
        ({"seeds": 0}, "--seeds 0: an arena needs at least one seed"),
        ({"seeds": -2}, "--seeds -2"),
        ({"seeds": [0, 0]}, "a seed appears twice"),
        ({"seeds": [-1]}, "non-negative"),
        ({"confidence": 1.5}, "confidence 1.5"),
        ({"threshold": float("nan")}, "--threshold nan"),
    ],
)
def test_bad_budget_and_seeds_fail_before_any_work(settings, message):
    settings = {"seeds": 1, **settings}
    with pytest.raises(ValueError, match=message):
        make_spec("CartPole-v1", "ppo", settings.pop("seeds"), **settings)


def test_no_budget_is_the_trainers_default():
    assert make_spec("CartPole-v1", "ppo", 1).budget == ControlConfig().total_steps


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--budget", "0"], "--budget 0: expected a positive whole number"),
        (["--budget", "-256"], "--budget -256: expected a positive whole number"),
        (["--seeds", "0"], "--seeds 0: an arena needs at least one seed"),
        (["--jobs", "0"], "--jobs 0: expected the number of runs in parallel, 1 or more"),
    ],
)
def test_the_cli_refuses_bad_numbers_before_making_the_folder(tmp_path, capsys, flags, message):
    out = tmp_path / "a"
    argv = ["arena", "--task", "CartPole-v1", "--algos", "ppo", "--out", str(out), *flags]
    assert main(argv) == 2
    assert message in capsys.readouterr().out.replace("\n", "")
    assert not out.exists()


def test_an_interrupted_arena_ends_its_children_and_waits_for_them(tmp_path, monkeypatch):
    from policylab.arena import runner

    # the run's process writes its pid, then would sleep for a minute
    pid_file = tmp_path / "child.pid"
    script = f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid()))"
    script += "; time.sleep(60)"
    monkeypatch.setattr(runner, "run_command", lambda *a: [sys.executable, "-c", script])

    def progress_then_ctrl_c(run_dir, spec):  # Ctrl-C once the child runs
        if pid_file.is_file() and pid_file.read_text():
            raise KeyboardInterrupt
        return 0.0, None

    monkeypatch.setattr(runner, "_latest", progress_then_ctrl_c)
    spec = make_spec("CartPole-v1", "ppo", 1, budget=256)
    begun = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        runner._run_all(tmp_path / "a", spec, 1, progress=False)
    assert time.monotonic() - begun < 30  # the child was ended, not waited out
    assert not _alive(int(pid_file.read_text()))
    # an interrupted run is neither done nor failed: a re-run resumes or restarts it
    assert not (tmp_path / "a" / "logs" / "ppo-s0.failed").exists()
    assert not (tmp_path / "a" / "runs" / "ppo-s0" / "arena_done.json").exists()


def _children_of(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            found += [int(c) for c in (task / "children").read_text().split()]
        except FileNotFoundError:  # a thread that just ended
            pass
    return found


def _alive(pid: int) -> bool:
    """Running, not gone and not a zombie waiting to be reaped."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_training_children_die_with_a_killed_arena(tmp_path):
    # a tabular run of 100,000 gradient evaluations trains for minutes: still running
    # when its arena is killed with SIGKILL (no handler, no cleanup in the arena)
    argv = ["arena", "--task", "tabular/robust_garnet", "--algos", "drpg", "--seeds", "1"]
    argv += ["--budget", "100000", "--out", str(tmp_path / "a")]
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    parent = subprocess.Popen(
        [sys.executable, "-m", "policylab.cli", *argv],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    child = None
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and child is None:
            time.sleep(0.1)
            assert parent.poll() is None, "the arena ended before its run started"
            for pid in _children_of(parent.pid):
                # exec'd into the trainer: the child's set-up (preexec) is complete
                if b"train" in Path(f"/proc/{pid}/cmdline").read_bytes():
                    child = pid
        assert child is not None, "no training child started"
        assert _alive(child)
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + 5
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(child), "the training child outlived its arena"
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        if child is not None and _alive(child):
            os.kill(child, signal.SIGKILL)


def test_jobs_must_be_positive_in_the_python_api(tmp_path):
    with pytest.raises(ValueError, match="--jobs -1"):
        arena("CartPole-v1", "ppo", 1, jobs=-1, out_dir=tmp_path / "a", progress=False)
    assert not (tmp_path / "a").exists()
