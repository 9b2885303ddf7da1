"""Bad reward functions never pass silently: non-finite values, exits and hangs are caught
and counted per function, and a run whose rewards score nothing warns, then stops."""

import logging
import math
import sys
import threading
import time

import pytest

from policylab import rewards
from policylab.config import TrainConfig, load
from policylab.trainers.llm import train
from policylab.trainers.run import read_metrics
from run_testing import FAST_LLM

P = ["p"] * 3


def test_non_finite_and_huge_values_are_counted_and_left_out():
    def wild(prompts, completions, **kw):
        return [math.inf, -math.inf, math.nan, 1e39, 2.0, None]  # 1e39 > float32's max

    result = rewards.combine({wild: 1.0})(["p"] * 6, list("abcdef"))
    assert [math.isnan(v) for v in result.total] == [True] * 4 + [False, True]
    assert result.total[4] == 2.0
    assert result.counts.nonfinite == {"wild": 4}
    assert result.counts.missing == {"wild": 1}
    assert result.counts.scored == 1
    metrics = result.counts.metrics()
    assert metrics["reward/nonfinite/wild"] == 4.0
    assert metrics["reward/failed/wild"] == 0.0
    assert metrics["reward/scored_frac"] == pytest.approx(1 / 6)


def test_a_weight_that_overflows_float32_is_counted_too():
    def big(prompts, completions, **kw):
        return [1e30, 1.0, 1.0]  # × 1e10 is beyond float32 (3.4e38)

    result = rewards.combine({big: 1e10})(P, ["a", "b", "c"])
    assert math.isnan(result.total[0]) and result.total[1:] == [1e10, 1e10]
    assert result.counts.nonfinite == {"big": 1}


@pytest.mark.parametrize("error", [SystemExit, GeneratorExit, BaseException])
def test_base_exceptions_are_caught_per_sample(error, caplog):
    def quits(prompts, completions, **kw):
        if any(c == "b" for c in completions):
            raise error("bye")
        return [1.0] * len(completions)

    combined = rewards.combine({quits: 1.0}, failure_reward=-1.0)
    first = combined(P, ["a", "b", "c"])
    second = combined(P, ["a", "b", "c"])
    assert first.parts["quits"] == second.parts["quits"] == [1.0, -1.0, 1.0]
    assert first.counts.failed == {"quits": 1}
    assert first.counts.scored == 2  # row 1 got only the failure reward: not scored
    assert caplog.text.count("Traceback") == 1  # the first traceback, logged once


def test_keyboard_interrupt_is_not_swallowed():
    def interrupted(prompts, completions, **kw):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        rewards.combine({interrupted: 1.0})(P, ["a", "b", "c"])


def test_a_hung_reward_times_out_and_its_samples_fail(caplog):
    release = threading.Event()

    def hangs(prompts, completions, **kw):
        release.wait(5)  # blocks until the test ends: a hang no exception can stop
        return [1.0] * len(completions)

    def fine(prompts, completions, **kw):
        return [0.5] * len(completions)

    combined = rewards.combine({hangs: 1.0, fine: 1.0}, failure_reward=-1.0, timeout_s=0.05)
    try:
        result = combined(P, ["a", "b", "c"])
    finally:
        release.set()
    assert result.parts["hangs"] == [-1.0] * 3
    assert result.total == [-0.5] * 3
    assert result.counts.failed == {"hangs": 3}
    assert "reward 'hangs' did not return within 0.05 s (reward_timeout_s)" in caplog.text


def test_a_sample_that_hangs_fails_with_the_rest_after_it():
    release = threading.Event()
    calls = []

    def picky(prompts, completions, **kw):
        calls.append(list(completions))
        if len(completions) > 1:
            raise ValueError("one at a time")  # the batch call fails: retried per sample
        if completions == ["b"]:
            release.wait(5)
        return [1.0]

    combined = rewards.combine({picky: 1.0}, failure_reward=-1.0, timeout_s=0.05)
    try:
        result = combined(P, ["a", "b", "c"])
    finally:
        release.set()
    assert result.parts["picky"] == [1.0, -1.0, -1.0]
    assert calls == [["a", "b", "c"], ["a"], ["b"]]  # "c" not tried: at most one timeout
    assert result.counts.failed == {"picky": 2}


def test_a_spinning_reward_is_stopped_after_its_timeout():
    def spins(prompts, completions, **kw):
        end = time.monotonic() + 5
        while time.monotonic() < end:  # pure Python: the timeout stops it at its next bytecode
            pass
        return [1.0] * len(completions)

    result = rewards.combine({spins: 1.0}, timeout_s=0.05)(P, ["a", "b", "c"])
    assert result.counts.failed == {"spins": 3}
    workers = [t for t in threading.enumerate() if t.name == "reward spins"]
    for worker in workers:
        worker.join(10)
    assert not any(t.is_alive() for t in workers)


def test_without_a_timeout_rewards_run_in_the_calling_thread():
    threads = []

    def where(prompts, completions, **kw):
        threads.append(threading.current_thread())
        return [1.0] * len(completions)

    rewards.combine({where: 1.0}, timeout_s=0)(P, ["a", "b", "c"])
    rewards.combine({where: 1.0}, timeout_s=5)(P, ["a", "b", "c"])
    assert threads[0] is threading.main_thread()
    assert threads[1] is not threading.main_thread()


def test_math_verify_works_under_a_timeout():
    # math-verify times itself with signal.alarm, which only the main thread may use
    combined = rewards.combine({"math_verify": 1.0}, timeout_s=30)
    result = combined(["p"] * 2, ["<answer>1/2</answer>", "<answer>3</answer>"], answer=["0.5"] * 2)
    assert result.total == [1.0, 0.0]
    assert result.counts.failed == {}


# --- a run whose rewards score nothing --------------------------------------------------


def _run(small_model_dir, tmp_path, monkeypatch, body: str, **fields):
    (tmp_path / "bad_rewards.py").write_text(
        f"import math\n\ndef bad(prompts, completions, **kw):\n    {body}\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("bad_rewards", None)
    overrides = {"rewards": {"bad_rewards:bad": 1.0}, "run_dir": str(tmp_path / "run")}
    cfg = load(TrainConfig, None, {**FAST_LLM, "model": small_model_dir, **overrides, **fields})
    return cfg


def test_a_run_whose_rewards_never_score_warns_then_stops(
    small_model_dir, tmp_path, monkeypatch, caplog
):
    cfg = _run(
        small_model_dir,
        tmp_path,
        monkeypatch,
        "return [math.nan] * len(completions)",
        steps=5,
        max_unscored_steps=2,
    )
    with caplog.at_level(logging.WARNING), pytest.raises(ValueError) as stopped:
        train(cfg)
    message = str(stopped.value)
    assert "no sample got a valid reward in 2 consecutive steps (steps 1-2)" in message
    assert "'bad_rewards:bad' returned a non-finite value for 16 of 16" in message
    assert "max_unscored_steps" in message
    assert "step 1: no sample got a valid reward" in caplog.text
    rows = [r for r in read_metrics(cfg.run_dir) if r["kind"] == "train"]
    assert [r["step"] for r in rows] == [1, 2]  # both steps logged before the stop
    assert [r["reward/nonfinite/bad_rewards:bad"] for r in rows] == [16.0, 16.0]
    assert [r["reward/scored_frac"] for r in rows] == [0.0, 0.0]


def test_a_reward_that_exits_does_not_end_the_run(small_model_dir, tmp_path, monkeypatch):
    cfg = _run(
        small_model_dir,
        tmp_path,
        monkeypatch,
        "raise SystemExit(1)",
        steps=1,
        max_unscored_steps=0,  # 0: warn only, never stop
        reward_failure_limit=1.0,  # keep going though it fails on every sample
    )
    train(cfg)
    rows = [r for r in read_metrics(cfg.run_dir) if r["kind"] == "train"]
    assert [r["reward/failed/bad_rewards:bad"] for r in rows] == [16.0]
