"""The language-model trainer on multi-turn tasks: AT-GRPO (shared and per-role), LaMer
and StepTool runs end to end, per-agent metrics, and resume reproducing a run."""

from __future__ import annotations

import pytest
import torch

from policylab.config import ConfigError, TrainConfig
from policylab.trainers.llm import compose, train
from policylab.trainers.run import read_metrics
from run_testing import assert_same_metrics

FAST_AGENT = dict(
    prompts_per_step=2,
    samples_per_prompt=2,
    eval_n=4,
    eval_every=0,
    save_every=0,
    progress=False,
    lr=1e-4,
)


def run(tmp_path, name, **fields):
    cfg = TrainConfig(**{**FAST_AGENT, **fields, "run_dir": str(tmp_path / name)})
    return train(cfg), cfg


def test_at_grpo_groups_by_instance_turn_and_agent(tmp_path):
    torch.set_num_threads(1)
    result, _ = run(tmp_path, "at", algo="at_grpo", task="plan_path_moves", steps=2)
    rows = read_metrics(result.run_dir)
    train_rows = [r for r in rows if r.get("kind") != "eval"]
    assert len(train_rows) == 2
    keys = ("agent/success", "agent/r_mean/planner", "agent/r_mean/executor", "at/groups")
    for key in (*keys, "agent/r_mean/turn0", "agent/live_frac/turn0"):
        assert key in train_rows[-1], key
    evals = [r for r in rows if r.get("kind") == "eval"]
    assert {"eval/greedy_accuracy", "eval/turns_mean"} <= set(evals[-1])


def test_per_role_policies_train_separately_and_resume_exactly(tmp_path):
    """Per-role policies log p0/ and p1/ metrics; 2 steps, then a resume to 4, equals 4
    steps straight (policies, optimisers, environment seeds and stages restored)."""
    torch.set_num_threads(1)
    fields = dict(algo="at_grpo_per_role", task="plan_path_moves", eval_every=2)
    whole, _ = run(tmp_path, "whole", steps=4, **fields)
    rows = [r for r in read_metrics(whole.run_dir) if r.get("kind") != "eval"]
    assert any(k.startswith("p0/") for k in rows[-1]) and any(k.startswith("p1/") for k in rows[-1])
    _, first = run(tmp_path, "cut", steps=2, **fields)
    train(first.model_copy(update={"steps": 4}), resume=True)
    assert_same_metrics(whole.run_dir, first.run_dir)


def test_lamer_plays_attempts_with_reflections(tmp_path):
    torch.set_num_threads(1)
    result, _ = run(tmp_path, "lamer", algo="lamer", task="plan_path_fog", steps=1)
    row = [r for r in read_metrics(result.run_dir) if r.get("kind") != "eval"][-1]
    assert "gigpo/step_group_size_mean" in row
    assert "agent/pass@3" in row or row["agent/success"] == 1.0


def test_steptool_trains_a_value_head_and_resumes_exactly(tmp_path):
    """One row per episode (tool text as observation tokens), GAE on the value head's
    values with a KL to the reference in the reward; 1 + 1 steps resumed equal 2."""
    torch.set_num_threads(1)
    fields = dict(algo="steptool", task="countdown_calc", eval_every=1)
    whole, _ = run(tmp_path, "whole", steps=2, **fields)
    row = [r for r in read_metrics(whole.run_dir) if r.get("kind") != "eval"][-1]
    assert row["agent/obs_token_frac"] > 0
    assert {"vf/loss", "vf/explained_var", "vf/value_mean"} <= set(row)
    _, first = run(tmp_path, "cut", steps=1, **fields)
    train(first.model_copy(update={"steps": 2}), resume=True)
    assert_same_metrics(whole.run_dir, first.run_dir)


def test_steptool_without_a_critic(tmp_path):
    torch.set_num_threads(1)
    result, _ = run(tmp_path, "rpp", algo="steptool_rpp", task="countdown_calc", steps=1)
    row = [r for r in read_metrics(result.run_dir) if r.get("kind") != "eval"][-1]
    assert "vf/loss" not in row and row["agent/obs_token_frac"] > 0


def test_agent_options_are_checked_before_any_model_loads():
    with pytest.raises((ConfigError, ValueError), match="regime"):
        compose(TrainConfig(algo="at_grpo", task="plan_path_moves", agent={"regime": "solo"}))
    with pytest.raises(ConfigError, match="single-turn"):
        compose(TrainConfig(algo="grpo", task="arithmetic", agent={"regime": "shared"}))
    with pytest.raises(ConfigError, match="plan_path_moves.*single-turn"):
        compose(TrainConfig(algo="at_grpo", task="arithmetic"))


class _Flaky:
    """An environment that raises on its second step for odd secrets, and hangs for
    secrets divisible by 4 (a user's bug): those episodes end, training goes on."""

    roles, max_turns, stop, max_segment, reflect_cue = ("agent",), 3, ";", 3, "?"

    def reset(self, example, seed):
        self.example, self.steps = example, 0
        return example["prompt"] + "G"

    def step(self, role, action):
        import time

        from policylab.envs.text import Step

        self.steps += 1
        if self.steps == 2 and self.example["secret"] % 2:
            raise RuntimeError("the simulator crashed")
        if self.steps == 2 and self.example["secret"] % 4 == 0:
            time.sleep(5)
        return Step("=;G", 0.5, False, {"valid": True})

    def snapshot(self):
        return self.steps

    def restore(self, snap):
        self.steps = snap

    def restart(self):
        return self.reset(self.example, 0)

    def state_key(self):
        return str(self.steps)


def test_a_faulty_environment_ends_episodes_not_the_run(tmp_path):
    import random
    from dataclasses import dataclass

    from policylab import tasks

    @dataclass(frozen=True)
    class Knobs:
        pass

    class Flaky(tasks.Task):
        name, knobs_class, columns, chars = "flaky", Knobs, ("secret",), "+:0123456789"

        def _sample(self, rng: random.Random) -> dict:
            a, b = rng.randrange(30), rng.randrange(30)
            return {"prompt": f"{a}+{b}:", "secret": a + b}

        def _answer(self, example):
            return str(example["secret"])

        def _score(self, text, example):
            return 0.0

        def env(self, example):
            return _Flaky()

    torch.set_num_threads(1)
    tasks.task_classes.add("flaky", Flaky)
    try:
        result, _ = run(
            tmp_path,
            "flaky",
            algo="mt_grpo",
            task="flaky",
            steps=2,
            train_pool=32,
            prompts_per_step=4,
            agent={"step_timeout_s": 0.5},
        )
    finally:
        tasks.task_classes._entries.pop("flaky", None)
    rows = [r for r in read_metrics(result.run_dir) if r.get("kind") != "eval"]
    assert len(rows) == 2
    assert max(r["agent/ended_abnormally_frac"] for r in rows) > 0
    assert sum(r["reward/failures"] for r in rows) > 0
