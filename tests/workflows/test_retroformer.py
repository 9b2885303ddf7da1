"""Retroformer (papers/seed_agents.md §A4): the rating and its RM label, GRPO over the
G reflections of one failure, reflection branches each with its own retry, a frozen
actor playing the act turns, and the warm-start rows of plan_path_fog."""

from __future__ import annotations

import re

import pytest
import torch

import policylab.tasks as tasks
from policylab.algebra.grouping import group_by
from policylab.engines import Sampling
from policylab.models import build_model, build_tokenizer
from policylab.policies.language_model import LanguageModelPolicy
from policylab.recipes.compose import components
from policylab.rollouts import Rollouts
from policylab.tasks.fog_memos import hidden_walls
from policylab.workflows.agents import AgentOptions, MultiTurn
from policylab.workflows.multi_turn import EpisodeSettings, rollout_episodes
from policylab.workflows.retro import (
    attempt_returns,
    parameter_hash,
    ratings,
    reflection_ratings,
    rm_labels,
)

# true grid .##./.#.s/..g#/....  shown ..../.#.s/..g./....: hidden walls (0,1) (0,2) (2,3)
EXAMPLE = {"grid": ".##./.#.s/..g#/....", "shown": "..../.#.s/..g./...."}


def test_ratings_and_reward_model_labels():
    """Spec test 1: r = G_{i+1} − G_i; label 1 iff r > 0.25."""
    prev, nxt = torch.tensor([0.0, 0.5, 0.0, 1.0]), torch.tensor([1.0, 0.5, 0.5, 0.0])
    r = ratings(prev, nxt)
    assert r.tolist() == [1.0, 0.0, 0.5, -1.0]
    assert rm_labels(r).tolist() == [1.0, 0.0, 1.0, 0.0]


def test_grpo_over_four_reflections_of_one_failure():
    """Spec test 2: next-attempt returns (1, 0, 0.5, 0), G_prev 0 → ratings (1, 0, 0.5, 0);
    mean 0.375, unbiased std sqrt(0.6875 / 3) = 0.478714 →
    A = (0.625, −0.375, 0.125, −0.375) / 0.478714."""
    r = ratings(torch.zeros(4), torch.tensor([1.0, 0.0, 0.5, 0.0]))
    assert r.tolist() == [1.0, 0.0, 0.5, 0.0]
    batch = Rollouts(
        rewards=r.float(),
        response_mask=torch.ones(4, 2),
        group_ids=torch.zeros(4, dtype=torch.long),
        extras={"instance": torch.tensor([3, 3, 3, 3]), "attempt": torch.tensor([0, 0, 0, 0])},
    )
    batch = batch.replace(group_ids=group_by(batch, "instance,attempt"))
    parts = components("retroformer_online", max_new_tokens=6)
    A = parts.advantage.estimate(batch).advantages[:, 0]
    expected = [1.3055797, -0.7833478, 0.2611159, -0.7833478]
    assert A.tolist() == pytest.approx(expected, abs=1e-6)


def test_recipe_defaults():
    parts = components("retroformer_online", max_new_tokens=6)
    assert parts.loss.options.kl_coef == 0.2 and parts.loss.options.kl_estimator == "k1"
    options = parts.recipe.component_defaults("workflow")
    assert options["grouping"] == "instance,attempt" and options["reflections"] == 4
    assert options["train_phase"] == "reflect" and options["row_reward"] == "rating"


def test_reflection_ratings_read_the_attempt_after_the_reflection():
    """Trajectory 0: attempt 0 fails, reflect, attempt 1 wins → +1; trajectory 1: both
    fail → 0; act rows get 0. The shaped return (summed rewards) gives −0.1 → 1.0: 1.1."""
    table = {
        "traj": torch.tensor([0, 0, 0, 1, 1, 1]),
        "attempt": torch.tensor([0, 0, 1, 0, 0, 1]),
        "phase": ["act", "reflect", "act", "act", "reflect", "act"],
        "attempt_score": torch.tensor([-0.1, 0.0, 1.0, -0.1, 0.0, -0.2], dtype=torch.float64),
    }

    class T:
        def __init__(self, successes):
            self.successes = successes

    trajs = [T([False, True]), T([False, False])]
    success = reflection_ratings(table, attempt_returns(trajs, table, "success"))
    assert success.tolist() == [0.0, 1.0, 0.0, 0.0, 0.0, 0.0]
    shaped = reflection_ratings(table, attempt_returns(trajs, table, "reward"))
    assert shaped.tolist() == pytest.approx([0.0, 1.1, 0.0, 0.0, -0.1, 0.0])


@pytest.fixture(scope="module")
def models():
    """Two different, freshly initialised tiny models: M_r and the actor."""
    tokenizer = build_tokenizer()
    retro = LanguageModelPolicy(
        build_model(tokenizer, seed=0), tokenizer, sampling=Sampling(temperature=1.0)
    )
    actor = LanguageModelPolicy(
        build_model(tokenizer, seed=1), tokenizer, sampling=Sampling(temperature=0.0)
    )
    return retro, actor


class Pair:
    """A policy set with a frozen actor: role 0 → M_r, act turns → the actor."""

    def __init__(self, retro, actor=None):
        self.retro, self.actor = retro, actor

    def __call__(self, role):
        return self.retro


def fog_env(example):
    return tasks.get("plan_path_fog", attempts=2).env(example)


def test_each_reflection_gets_its_own_retry(models):
    """G = 3: one failed first attempt becomes 3 trajectories sharing the attempt-0 turns
    (the same objects), each with its own reflection and its own attempt 1."""
    retro, actor = models
    settings = EpisodeSettings(attempts=2, reflect=True, reflections=3, temperature=1.0)
    trajs, _ = rollout_episodes(
        [EXAMPLE],
        fog_env,
        Pair(retro, actor),
        retro.tokenizer,
        settings,
        copies=5,  # ignored with reflections > 1: one first attempt per example
        generator=torch.Generator().manual_seed(0),
    )
    assert not trajs[0].successes[0]  # an untrained actor does not reach the goal
    assert len(trajs) == 3 and [t.branch for t in trajs] == [0, 1, 2]
    firsts = [[t for t in traj.turns if t.attempt == 0 and t.phase == "act"] for traj in trajs]
    assert all(
        len(f) > 0 and all(a is b for a, b in zip(f, firsts[0], strict=True)) for f in firsts
    )
    reflections = [[t for t in traj.turns if t.phase == "reflect"] for traj in trajs]
    assert [len(r) for r in reflections] == [1, 1, 1]
    assert len({id(r[0]) for r in reflections}) == 3
    for traj, (r,) in zip(trajs, reflections, strict=True):
        retry = [t for t in traj.turns if t.attempt == 1]
        assert len(traj.successes) == 2 and retry
        # the retry's context: memory ("?" + this branch's reflection), then the grid
        memo = retro.tokenizer("?", add_special_tokens=False)["input_ids"] + r.gen_ids
        assert retry[0].context_ids[: len(memo)] == memo


def test_a_frozen_actor_plays_the_act_turns(models):
    """With `policies.actor` the act turns are the actor's greedy continuation and the
    reflections M_r's; without it both come from M_r."""
    retro, actor = models
    settings = EpisodeSettings(attempts=2, reflect=True, temperature=1.0, actor_temperature=0.0)
    trajs, _ = rollout_episodes(
        [EXAMPLE], fog_env, Pair(retro, actor), retro.tokenizer, settings,
        generator=torch.Generator().manual_seed(0),
    )  # fmt: skip
    acts = [t for t in trajs[0].turns if t.phase == "act"]
    greedy = Sampling(temperature=0.0, max_new_tokens=6, stop_strings=(";",))
    for t in acts:
        out = actor.sample([t.context_ids], n=1, sampling=greedy)
        assert out.actions[0][out.mask[0] > 0].tolist() == t.gen_ids
    (r,) = [t for t in trajs[0].turns if t.phase == "reflect"]
    with torch.no_grad():
        own = retro.evaluate(
            [r.context_ids], torch.tensor([r.gen_ids]), mask=torch.ones(1, len(r.gen_ids))
        )
    assert own.logprobs[0].tolist() == pytest.approx(r.gen_logprobs, abs=1e-5)


def test_workflow_keeps_reflect_rows_rated_and_counts_shared_tokens_once(models):
    retro, actor = models
    options = AgentOptions(
        attempts=2, reflect=True, reflections=4, train_phase="reflect", row_reward="rating",
        grouping="instance,attempt",
    )  # fmt: skip
    task = tasks.get("plan_path_fog", attempts=2)
    workflow = MultiTurn(Pair(retro, actor), task, options, 1, torch.Generator().manual_seed(0))
    batch, info = workflow([EXAMPLE, EXAMPLE])
    assert len(batch) == 8 and set(batch.extras["phase"]) == {"reflect"}
    assert len(info.completions) == 8
    trajs_tokens = info.generated_tokens
    assert trajs_tokens < 8 * 6 * 2 * 6  # the shared first attempts are counted once
    assert info.metrics["retro/rows"] == 8.0
    assert info.metrics["retro/actor_hash"] == float(int(parameter_hash(actor.model)[:8], 16))
    assert torch.equal(group_by(batch, "instance,attempt"), torch.tensor([0] * 4 + [1] * 4))


def test_agent_options_refuse_branches_trained_on_shared_turns():
    with pytest.raises(ValueError, match="train_phase"):
        AgentOptions(attempts=2, reflect=True, reflections=4)
    with pytest.raises(ValueError, match="train_phase"):
        AgentOptions(train_phase="acts")
    with pytest.raises(ValueError, match="reflect = true"):
        AgentOptions(row_reward="rating")
    # later reflections' branches share the earlier reflection turn (8 rows for 6 turns)
    with pytest.raises(ValueError, match="attempts ≤ 2"):
        AgentOptions(attempts=3, reflect=True, reflections=2, train_phase="reflect")
    # a frozen actor's turns carry its log-probs, not the policy's: never rows
    for bad in ({}, {"attempts": 2, "reflect": True}, {"train_phase": "reflect"}):
        with pytest.raises(ValueError, match="agent.actor = 'tiny'"):
            AgentOptions(actor="tiny", **bad)
    AgentOptions(actor="tiny", train_phase="none")
    AgentOptions(actor="tiny", attempts=2, reflect=True, train_phase="reflect")


def test_actor_memo_rows_start_with_a_hidden_wall_and_avoid_it():
    task = tasks.get("plan_path_fog", demo_rows="actor_memo", demo_noise=0.0)
    rows = task.demonstrations(40, seed=0)
    examples = task.examples("train", 40, seed=0)
    starts = [r for r in rows if r["prompt"].endswith(":E")]
    with_memo = [r for r in starts if r["prompt"].startswith("?#")]
    assert 0 < len(with_memo) < len(starts) == 40
    for r in with_memo:
        cell = tuple(int(x) for x in re.match(r"\?#(\d+),(\d+);", r["prompt"]).groups())
        shown = r["prompt"].split(";", 1)[1].rsplit(":", 1)[0]
        (example,) = [e for e in examples if e["shown"] == shown][:1]
        assert cell in hidden_walls(example)
    for r in rows:  # never a bump into the wall the memo names
        m = re.match(r"\?(#\d+,\d+);", r["prompt"])
        if m:
            assert "x" + m.group(1) not in r["prompt"]


def test_retro_memo_rows_are_failed_attempts_with_a_wellformed_memo():
    task = tasks.get("plan_path_fog", demo_rows="retro_memo")
    rows = task.demonstrations(30, seed=1)
    assert 0 < len(rows) <= 30
    for r in rows:
        assert r["prompt"].endswith("?") and re.fullmatch(r"#[0-3],[0-3];", r["completion"])
        assert "x" in r["prompt"] or r["prompt"].count("@") >= 1
    assert len({r["completion"] for r in rows}) > 3  # random, not one fixed memo


def test_demo_rows_knob_is_checked():
    with pytest.raises(ValueError, match="demo_rows='memo'.*trial, actor_memo, retro_memo"):
        tasks.get("plan_path_fog", demo_rows="memo")
