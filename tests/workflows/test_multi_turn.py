"""The multi-turn workflow: token in / token out, the observation mask, the packers."""

from __future__ import annotations

import pytest
import torch

from policylab.engines import Sampling
from policylab.models import build_model, build_tokenizer
from policylab.policies.language_model import LanguageModelPolicy
from policylab.workflows.multi_turn import EpisodeSettings, rollout_episodes
from policylab.workflows.packing import pack_trajectories, pack_turns, turn_table
from toy_envs import Counter

EXAMPLES = [{"prompt": "ab"}, {"prompt": "cde"}]


@pytest.fixture(scope="module")
def policy():
    """A freshly initialised tiny model: it seldom writes the end token, so episodes run
    several turns (the shipped model ends them at once on these made-up prompts)."""
    tokenizer = build_tokenizer()
    model = build_model(tokenizer, seed=0)
    return LanguageModelPolicy(model, tokenizer, sampling=Sampling(temperature=1.0))


def play(policy, settings, roles=("agent",), copies=2, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return rollout_episodes(
        EXAMPLES,
        lambda ex: Counter(roles),
        lambda role: policy,
        policy.tokenizer,
        settings,
        copies=copies,
        generator=generator,
    )[0]


def test_tokens_trained_on_are_the_tokens_sampled(policy):
    """TITO: every context is the previous context + the sampled ids + the observation's
    ids, bit for bit, and the packed row holds exactly the engine's ids and log-probs."""
    trajs = play(policy, EpisodeSettings(), roles=("planner", "executor"))
    tok = policy.tokenizer
    for traj in trajs:
        turns = traj.played
        assert turns[0].context_ids == traj.prompt_ids
        for a, b in zip(turns, turns[1:], strict=False):
            assert b.context_ids == a.context_ids + a.gen_ids + a.obs_ids
        for t in turns:  # observations tokenised once, from the env's text
            assert t.obs_ids == tok(tok.decode(t.obs_ids), add_special_tokens=False)["input_ids"]
    table = turn_table(trajs)
    batch = pack_turns(trajs, table["reward"])
    rows = [t for traj in trajs for t in traj.turns]
    for r, t in enumerate(rows):
        n = len(t.gen_ids)
        assert batch.response_ids[r, :n].tolist() == t.gen_ids
        assert batch.logprobs[r, :n].tolist() == pytest.approx(t.gen_logprobs, abs=0)
        assert batch.extras["prompt_ids"][r] == t.context_ids


def test_packed_trajectory_logprobs_match_the_engine(policy):
    """T-A0.5: recomputed log-probs of pack_trajectories rows equal the engine's (ratio 1
    before the first update) — fails if observation tokens are not attended or positions
    shift."""
    trajs = play(policy, EpisodeSettings(), roles=("agent",))
    credits = [[t.reward for t in traj.played] for traj in trajs]
    batch = pack_trajectories(trajs, 0, credits)
    assert batch.observation_mask.sum() > 0
    with torch.no_grad():
        out = policy.evaluate(
            batch.extras["prompt_ids"],
            batch.response_ids,
            mask=batch.response_mask,
            observation_mask=batch.observation_mask,
        )
    valid = batch.response_mask > 0
    assert torch.allclose(out.logprobs[valid], batch.logprobs[valid], atol=1e-5)
    # without attending the observations the log-probs after the first turn differ
    with torch.no_grad():
        blind = policy.evaluate(
            batch.extras["prompt_ids"], batch.response_ids, mask=batch.response_mask
        )
    assert (blind.logprobs[valid] - batch.logprobs[valid]).abs().max() > 1e-3


def test_observation_tokens_get_no_gradient_but_change_logits(policy):
    """Environment tokens: their positions are not scored, so no gradient flows from them
    into the parameters, yet changing them changes the log-probs of later segments."""
    trajs = play(policy, EpisodeSettings(), roles=("agent",), copies=4)
    trajs = [t for t in trajs if len(t.played) > 1]
    assert trajs, "need episodes of two turns or more"
    batch = pack_trajectories(trajs, 0, [[0.0] * len(t.played) for t in trajs])
    obs = batch.observation_mask > 0
    out = policy.evaluate(
        batch.extras["prompt_ids"],
        batch.response_ids,
        mask=batch.response_mask,
        observation_mask=batch.observation_mask,
    )
    assert (out.logprobs[obs] == 0).all()
    params = [p for p in policy.model.parameters() if p.requires_grad]
    grads = torch.autograd.grad(out.logprobs[obs].sum(), params, allow_unused=True)
    assert all(g is None or float(g.abs().sum()) == 0.0 for g in grads)
    changed = batch.response_ids.clone()
    changed[obs] = policy.tokenizer.convert_tokens_to_ids("9")
    with torch.no_grad():
        other = policy.evaluate(
            batch.extras["prompt_ids"],
            changed,
            mask=batch.response_mask,
            observation_mask=batch.observation_mask,
        )
    after_obs = (obs.long().cumsum(-1) > 0) & (batch.response_mask > 0)
    assert after_obs.any()
    assert (other.logprobs - out.logprobs.detach())[after_obs].abs().max() > 1e-4
    before = (obs.long().cumsum(-1) == 0) & (batch.response_mask > 0)
    assert torch.equal(other.logprobs[before], out.logprobs.detach()[before])


def test_layout_of_a_packed_trajectory():
    """T-A0.1: generated lengths (2, 1), observation lengths (3, 0)."""
    from policylab.workflows.multi_turn import Trajectory, Turn

    t0 = Turn(0, 0, 0, "act", [5, 6], [10, 11], [-0.1, -0.2], [0.0, 0.0], [20, 21, 22], 1.0, False)
    t1 = Turn(0, 1, 0, "act", [5, 6, 10, 11, 20, 21, 22], [12], [-0.3], [0.0], [], 0.5, True)
    traj = Trajectory(0, 0, [5, 6], [t0, t1], success=True)
    batch = pack_trajectories([traj], 0, [[1.0, 0.5]])
    assert batch.response_mask[0].tolist() == [1, 1, 0, 0, 0, 1]
    assert batch.observation_mask[0].tolist() == [0, 0, 1, 1, 1, 0]
    assert batch.segment_ids[0].tolist() == [0, 0, 0, 0, 0, 1]
    assert batch.token_rewards[0].tolist() == [0, 1.0, 0, 0, 0, 0.5]
    assert batch.response_ids[0].tolist() == [10, 11, 20, 21, 22, 12]


def test_tree_sampling_plays_the_best_candidate(policy):
    settings = EpisodeSettings(branching="tree", branches=4)
    trajs = play(policy, settings, roles=("planner", "executor"))
    assert len(trajs) == len(EXAMPLES)
    for traj in trajs:
        nodes = {}
        for t in traj.turns:
            nodes.setdefault((t.attempt, t.turn, t.role), []).append(t)
        for cands in nodes.values():
            assert len(cands) == 4 and sum(c.played for c in cands) == 1
            best = max(c.reward for c in cands)
            chosen = next(c for c in cands if c.played)
            assert chosen.reward == best
            assert chosen is next(c for c in cands if c.reward == best)  # first on ties
            assert len({tuple(c.context_ids) for c in cands}) == 1


def test_attempts_with_reflection_build_the_memory(policy):
    settings = EpisodeSettings(attempts=3, reflect=True)
    trajs = play(policy, settings, roles=("agent",), copies=3)
    tok = policy.tokenizer
    for traj in trajs:
        reflections = [t for t in traj.turns if t.phase == "reflect"]
        assert len(reflections) == max(a for a in [t.attempt for t in traj.turns])
        memory = []
        for r in reflections:
            assert tok.decode(r.context_ids).endswith("?")
            memory += tok("?", add_special_tokens=False)["input_ids"] + r.gen_ids
            first = next(t for t in traj.turns if t.attempt == r.attempt + 1)
            assert first.context_ids[: len(memory)] == memory
        if traj.success:
            assert traj.successes[-1] and not any(traj.successes[:-1])


def test_same_seed_same_episodes(policy):
    a = play(policy, EpisodeSettings(), seed=3)
    b = play(policy, EpisodeSettings(), seed=3)
    assert [[t.gen_ids for t in x.turns] for x in a] == [[t.gen_ids for t in x.turns] for x in b]


class Scripted:
    """A policy that writes what a scripted `act(role, context)` says, token by token (so
    the token workflow can be compared with `play_text` on the same decisions)."""

    def __init__(self, tokenizer, act, role, cue):
        self.tokenizer, self.act, self.role, self.cue = tokenizer, act, role, cue

    def sample(self, contexts, *, generator=None, n=1, sampling=None):
        from policylab.policies.base import Sample

        texts, rows = [], []
        for ids in contexts:
            text = self.tokenizer.decode(ids)
            role = "reflect" if text.endswith(self.cue) else self.role
            for _ in range(n):
                segment = self.act(role, text)
                texts.append(segment)
                rows.append(self.tokenizer(segment, add_special_tokens=False)["input_ids"])
        T = max(len(r) for r in rows)
        actions = torch.zeros((len(rows), T), dtype=torch.long)
        mask = torch.zeros((len(rows), T))
        for i, r in enumerate(rows):
            actions[i, : len(r)] = torch.tensor(r)
            mask[i, : len(r)] = 1
        extras = {"texts": texts, "finish_reason": ["stop"] * len(rows)}
        return Sample(actions, torch.zeros_like(mask), mask=mask, entropy=None, extras=extras)


@pytest.mark.parametrize(
    ("task_name", "attempts"), [("plan_path_moves", 1), ("countdown_calc", 1), ("plan_path_fog", 3)]
)
def test_token_workflow_reproduces_play_text(task_name, attempts):
    """The token-level loop builds exactly the contexts of envs/text.py's play_text (the
    reference definition), turn by turn, with the same rewards and outcome."""
    import random

    from policylab import tasks
    from policylab.envs.text import play_text
    from policylab.models import load_model

    task = tasks.get(task_name)
    tokenizer = load_model("tiny")[1]
    for example in task.examples("train", 6, seed=1):
        env = task.env(example)
        act_a = task.demonstrator(example, 0.5, random.Random(7))
        reference = play_text(env, example, 0, act_a, attempts=attempts, reflect=attempts > 1)
        act_b = task.demonstrator(example, 0.5, random.Random(7))
        policies = [Scripted(tokenizer, act_b, r, env.reflect_cue) for r in env.roles]
        settings = EpisodeSettings(attempts=attempts, reflect=attempts > 1)
        (traj,), _ = rollout_episodes(
            [example], task.env, policies.__getitem__, tokenizer, settings, seed=0
        )
        assert [tokenizer.decode(t.context_ids) for t in traj.turns] == [
            t.context for t in reference.turns
        ]
        assert [t.text for t in traj.turns] == [t.segment for t in reference.turns]
        assert [t.reward for t in traj.turns] == [t.reward for t in reference.turns]
        assert traj.success == reference.success
        assert traj.successes == reference.successes_by_attempt


class OneStep:
    """A task as a one-step environment: the completion is the only action (T-A0.4)."""

    roles, max_turns, stop, reflect_cue = ("agent",), 1, "", "?"

    def __init__(self, task, max_segment):
        self.task, self.max_segment = task, max_segment

    def reset(self, example, seed):
        self.example = example
        return example["prompt"]

    def step(self, role, action):
        from policylab.envs.text import Step

        columns = {k: [v] for k, v in self.example.items() if k not in ("prompt", "completion")}
        reward = self.task.reward([self.example["prompt"]], [action], **columns)[0]
        return Step("", reward, True, {"success": reward >= 1.0})

    def snapshot(self):
        return None

    def restore(self, snap):
        pass

    def restart(self):
        return self.reset(self.example, 0)

    def state_key(self):
        return ""


def test_a_one_step_env_reproduces_the_single_turn_rollout():
    """T-A0.4: max_turns 1, no observation: rows equal single_turn.rollout's (ids, masks,
    log-probs, rewards, groups) under the same generator."""
    from policylab import rewards, tasks
    from policylab.models import load_model
    from policylab.workflows.single_turn import rollout

    task = tasks.get("arithmetic")
    model, tokenizer = load_model("tiny")
    sampling = Sampling(temperature=1.0, max_new_tokens=8)
    policy = LanguageModelPolicy(model, tokenizer, sampling=sampling)
    examples = task.examples("train", 3, seed=0)
    reward_fn = rewards.combine({task.name: 1.0}, functions={task.name: task.reward})
    single, _ = rollout(examples, policy, 4, reward_fn, generator=torch.Generator().manual_seed(5))
    trajs, _ = rollout_episodes(
        examples,
        lambda ex: OneStep(task, 8),
        lambda role: policy,
        tokenizer,
        EpisodeSettings(),
        copies=4,
        generator=torch.Generator().manual_seed(5),
    )
    multi = pack_turns(trajs, turn_table(trajs)["reward"])
    assert torch.equal(multi.response_mask, single.response_mask)
    generated = single.response_ids * single.response_mask.long()  # padding ids aside
    assert torch.equal(multi.response_ids, generated)
    assert torch.allclose(multi.logprobs, single.logprobs, atol=1e-6)
    assert torch.equal(multi.rewards, single.rewards)
    assert torch.equal(multi.group_ids, single.group_ids)
    assert multi.extras["prompt_ids"] == single.extras["prompt_ids"]


def test_an_environment_whose_reset_fails_ends_that_episode_only(policy):
    from policylab.envs.text import GuardedEnv

    class BrokenReset(Counter):
        def reset(self, example, seed):
            if example["prompt"] == "ab":
                raise OSError("the simulator did not start")
            return super().reset(example, seed)

    trajs, _ = rollout_episodes(
        EXAMPLES,
        lambda ex: GuardedEnv(BrokenReset(), step_timeout_s=None),
        lambda role: policy,
        policy.tokenizer,
        EpisodeSettings(),
        copies=2,
        generator=torch.Generator().manual_seed(0),
    )
    broken = [t for t in trajs if t.instance == 0]
    assert all(t.ended.startswith("reset:") and not t.turns for t in broken)
    assert all(t.turns and not t.ended.startswith("reset") for t in trajs if t.instance == 1)
