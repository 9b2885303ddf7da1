"""A reward function that fails (raises or times out) on more than `failure_limit` of a
batch stops the run with its traceback; 1.0 keeps going with today's counts. None and
non-finite values are not failures (TRL's "not applicable"; max_unscored_steps watches
them)."""

import math
import sys
import time

import pytest

from policylab import rewards
from policylab.config import TrainConfig, load
from policylab.rewards import RewardFailureError
from policylab.trainers.llm import train
from policylab.trainers.run import read_metrics
from run_testing import FAST_LLM


def fails_unless(ok: set[str]):
    """A reward raising KeyError on every completion not in `ok`."""

    def flaky(prompts, completions, **kw):
        return [1.0 if c in ok else {}["missing " + c] for c in completions]

    return flaky


def test_failing_on_3_of_4_samples_stops_with_the_functions_traceback():
    combined = rewards.combine({fails_unless({"a"}): 1.0}, failure_limit=0.5)
    with pytest.raises(RewardFailureError) as stopped:
        combined(["p"] * 4, ["a", "b", "c", "d"])
    message = str(stopped.value)
    assert "reward function 'flaky' failed (raised or timed out) on 3 of 4 samples (75%)" in message
    assert "more than the limit of 50% (reward_failure_limit)" in message
    assert "KeyError: 'missing b'" in message  # the first failure's traceback
    assert "in flaky" in message
    assert isinstance(stopped.value.__cause__, KeyError)  # chained: Python prints it too


def test_half_is_not_more_than_half():
    combined = rewards.combine({fails_unless({"a", "b"}): 1.0}, failure_limit=0.5)
    result = combined(["p"] * 4, ["a", "b", "c", "d"])
    assert result.failures == {"flaky": 2}


def test_a_limit_of_one_keeps_going_and_counts_as_before():
    combined = rewards.combine({fails_unless({"a"}): 1.0}, failure_reward=-1.0, failure_limit=1.0)
    result = combined(["p"] * 4, ["a", "b", "c", "d"])
    assert result.total == [1.0, -1.0, -1.0, -1.0]
    assert result.counts.metrics()["reward/failed/flaky"] == 3.0


def test_none_and_nan_are_not_failures():
    def unsure(prompts, completions, **kw):
        return [None, math.nan, math.inf, 1.0]

    result = rewards.combine({unsure: 1.0}, failure_limit=0.0)(["p"] * 4, list("abcd"))
    assert result.total[3] == 1.0 and all(math.isnan(t) for t in result.total[:3])
    assert (result.counts.missing["unsure"], result.counts.nonfinite["unsure"]) == (1, 2)


def test_a_reward_that_hangs_on_every_sample_stops_naming_the_timeout():
    def hangs(prompts, completions, **kw):
        time.sleep(5)

    combined = rewards.combine({hangs: 1.0}, timeout_s=0.05, failure_limit=0.5)
    with pytest.raises(RewardFailureError, match="did not return within 0.05 s"):
        combined(["p"] * 2, ["a", "b"])


def _config(small_model_dir, tmp_path, monkeypatch, **fields):
    """A run whose reward raises on 3 of every 4 calls (the batch call, then one call per
    sample: 12 of its 16 samples fail)."""
    (tmp_path / "flaky_rewards.py").write_text(
        "calls = 0\n\n"
        "def flaky(prompts, completions, **kw):\n"
        "    global calls\n"
        "    calls += 1\n"
        "    if calls % 4:\n"
        "        raise ZeroDivisionError('flaky reward, call %d' % calls)\n"
        "    return [1.0] * len(completions)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("flaky_rewards", None)
    overrides = {"rewards": {"flaky_rewards:flaky": 1.0}, "run_dir": str(tmp_path / "run")}
    return load(TrainConfig, None, {**FAST_LLM, "model": small_model_dir, **overrides, **fields})


def test_a_run_whose_reward_fails_on_most_samples_stops(small_model_dir, tmp_path, monkeypatch):
    cfg = _config(small_model_dir, tmp_path, monkeypatch, steps=2)
    with pytest.raises(RewardFailureError) as stopped:
        train(cfg)
    message = str(stopped.value)
    assert "'flaky_rewards:flaky' failed (raised or timed out) on 12 of 16 samples" in message
    assert "ZeroDivisionError: flaky reward, call 2" in message  # call 1: the whole batch
    assert not [r for r in read_metrics(cfg.run_dir) if r["kind"] == "train"]


def test_with_the_option_the_run_keeps_going(small_model_dir, tmp_path, monkeypatch):
    cfg = _config(small_model_dir, tmp_path, monkeypatch, steps=2, reward_failure_limit=1.0)
    train(cfg)
    rows = [r for r in read_metrics(cfg.run_dir) if r["kind"] == "train"]
    assert [r["reward/failed/flaky_rewards:flaky"] for r in rows] == [12.0, 12.0]


@pytest.mark.parametrize("value", [-0.5, 2.0])
def test_the_config_option_is_a_fraction(value):
    with pytest.raises(ValueError, match="reward_failure_limit"):
        load(TrainConfig, None, {"reward_failure_limit": value})
