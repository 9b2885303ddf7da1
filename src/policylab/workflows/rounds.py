"""Generation rounds: the rollouts of one training step, refilled until enough groups pass
the selection (DAPO's dynamic sampling, papers/seed_llm_algorithms.md §6; arXiv:2503.14476
§3.2 and Algorithm 1; code verl recipe/dapo/src/dapo_ray_trainer.py).

Each round draws prompts, generates and scores G samples each, and selects; the surviving
groups join a buffer until it holds `groups` of them. The step keeps the first `groups` in
arrival order (rounds in order, groups within a round by group id) and discards the
surplus [code `batch[:traj_bsz]`]. With a selection that keeps everything, one round is
the whole step.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import torch

from policylab.algebra.selection import Selection
from policylab.rollouts import Rollouts
from policylab.workflows.single_turn import RolloutInfo

ON_EXHAUST = ("raise", "train_partial")

# one round: the prompt indices drawn, their scored rollouts (group ids 0..n−1), and info
Round = tuple[list[int], Rollouts, RolloutInfo]


class RoundsExhausted(RuntimeError):
    """`max_rounds` rounds kept fewer groups than a step needs (on_exhaust="raise")."""


@dataclass
class Collected:
    batch: Rollouts  # the kept groups trained on, group ids 0..k−1 in arrival order
    info: RolloutInfo  # every generated row of every round
    indices: list[int]  # every prompt drawn, in order
    outcomes: torch.Tensor  # [rows generated] the reward of every generated row
    rounds: int
    metrics: dict[str, float]

    @property
    def samples(self) -> int:
        """Samples generated in all rounds, kept or not (what the step is charged): one per
        generated row, or the workflow's count when some turns are not rows."""
        if self.info.generated_samples is None:
            return len(self.outcomes)
        return self.info.samples


def collect_groups(
    generate_round: Callable[[], Round],
    select: Callable[[Rollouts], Selection],
    groups: int,
    *,
    max_rounds: int = 10,
    on_exhaust: str = "raise",
) -> Collected:
    """Rounds of `generate_round()` → `select` until `groups` groups are kept.

    `max_rounds` 0 = unlimited [code verl max_num_gen_batches ≤ 0]. When the rounds run out
    short, `on_exhaust` "raise" raises RoundsExhausted [code]; "train_partial" returns the
    groups kept so far (possibly none) [ours]. A round that keeps nothing still counts.

    Metrics: `ds/num_gen_rounds`; the selection's own counts summed over the rounds
    (`ds/drop_all_correct`, `ds/drop_all_wrong`); `ds/kept_groups` (groups that passed,
    surplus included) and `ds/kept_frac` (of the groups generated); `ds/trained_groups`;
    `ds/extra_samples` = samples generated beyond the first round."""
    if on_exhaust not in ON_EXHAUST:
        raise ValueError(f"on_exhaust = {on_exhaust!r} is not valid; choices: {ON_EXHAUST}")
    buffer: list[Rollouts] = []
    infos: list[RolloutInfo] = []
    indices: list[int] = []
    outcomes: list[torch.Tensor] = []
    counts: Counter[str] = Counter()
    kept = generated = rounds = 0
    while kept < groups:
        if max_rounds and rounds == max_rounds:
            if on_exhaust == "raise":
                raise RoundsExhausted(_exhausted(rounds, kept, groups, generated, counts))
            break
        drawn, batch, info = generate_round()
        rounds += 1
        indices += drawn
        infos.append(info)
        outcomes.append(batch.rewards)
        _, local = torch.unique(batch.group_ids, return_inverse=True)
        batch = batch.replace(group_ids=local + generated)  # ids unique across rounds
        chosen = select(batch)
        buffer.append(chosen.apply(batch))
        generated += int(local.max()) + 1 if len(local) else 0
        kept += len(torch.unique(batch.group_ids[chosen.row_keep]))
        counts.update(chosen.metrics)
    trained = _first_groups(Rollouts.concat(buffer), groups)
    first_round = len(outcomes[0])
    metrics = {
        **counts,
        "ds/num_gen_rounds": float(rounds),
        # recounted here: a fraction does not sum over rounds
        "ds/kept_groups": float(kept),
        "ds/kept_frac": kept / generated if generated else 0.0,
        "ds/trained_groups": float(len(torch.unique(trained.group_ids))),
        "ds/extra_samples": float(sum(len(o) for o in outcomes) - first_round),
    }
    return Collected(
        trained, RolloutInfo.concat(infos), indices, torch.cat(outcomes), rounds, metrics
    )


def _first_groups(batch: Rollouts, n: int) -> Rollouts:
    """The rows of the first `n` groups (ids ascending = arrival order), ids renumbered."""
    first = torch.unique(batch.group_ids)[:n]
    batch = batch.select(torch.isin(batch.group_ids, first))
    _, renumbered = torch.unique(batch.group_ids, return_inverse=True)
    return batch.replace(group_ids=renumbered)


def _exhausted(rounds: int, kept: int, groups: int, generated: int, counts: Counter) -> str:
    return (
        f"dynamic sampling: {rounds} generation round(s) kept {kept} of the {groups} groups "
        f"a step needs ({generated} groups generated: {counts['ds/drop_all_correct']:.0f} "
        f"all correct, {counts['ds/drop_all_wrong']:.0f} all wrong, dropped). Raise "
        "max_gen_rounds (0 = unlimited), set on_exhaust=train_partial to train on the groups "
        "kept, or change the task's difficulty"
    )


class RecycleBuffer:
    """A FIFO cache of recycled examples (SPARK, arXiv:2509.22624; seed_agents.md §A7):
    after each step the recycle hook's `builder(collected) -> (examples, metrics)` turns
    the step's rollouts into new verifiable examples (`prompt`, `answer`, `kind`; the
    builder draws from its own checkpointed RNG), `add` appends them, and once
    the cache holds a batch, `take(n)` hands out the oldest n for a reward period [code
    Spark ppo_trainer.fit: cache appended, 64 popped from the front]. `capacity` bounds the
    cache by dropping the oldest (0: unbounded) [ours]. Checkpointed with the run."""

    def __init__(self, capacity: int = 0) -> None:
        self.capacity = capacity
        self.items: list[dict] = []
        self.dropped = 0  # examples dropped at capacity, over the run

    def __len__(self) -> int:
        return len(self.items)

    def add(self, items: list[dict]) -> None:
        self.items += items
        over = len(self.items) - self.capacity if self.capacity else 0
        if over > 0:
            self.items, self.dropped = self.items[over:], self.dropped + over

    def take(self, n: int) -> list[dict]:
        """The oldest `n` examples (all of them when fewer), removed from the cache."""
        taken, self.items = self.items[:n], self.items[n:]
        return taken

    def state_dict(self) -> dict:
        return {"items": [dict(item) for item in self.items], "dropped": self.dropped}

    def load_state_dict(self, state: dict) -> None:
        self.items = [dict(item) for item in state["items"]]
        self.dropped = int(state["dropped"])


class Recycling:
    """The `recycle(builder)` hook: a rollout source whose steps alternate between an
    *infer period* (the inner source's step on the task's prompts) and, whenever the
    cache holds a batch after one, a *reward period*: `batch` cached examples rolled out
    by `reward_workflow` (the same policy, scored by the recycled labels) [code Spark
    ppo_trainer.fit]. After each infer period `builder(collected) -> (examples, metrics)`
    recycles the step's groups into the cache. Reward periods charge their samples and
    tokens to `budget` like any other; the inner source learns only from infer periods.

    Metrics: `spark/period` (0 infer, 1 reward), `spark/cache_size` (after the step),
    `spark/judge_acc` (a reward period's mean reward), and the builder's own."""

    def __init__(self, source, builder, reward_workflow, batch: int, budget, buffer) -> None:
        self.source, self.builder, self.reward_workflow = source, builder, reward_workflow
        self.batch, self.budget, self.buffer = batch, budget, buffer
        self.due = False  # the next step is a reward period
        self.rewarding = False  # the step in progress is one
        self.last: dict[str, float] = {}

    def next(self) -> Collected:
        self.rewarding = self.due
        if not self.rewarding:
            return self.source.next()
        examples = self.buffer.take(self.batch)
        batch, info = self.reward_workflow(examples)
        self.budget.charge(len(batch), info.generated_tokens)
        return Collected(batch, info, [], batch.rewards, 1, {})

    def update(self, collected: Collected) -> None:
        if self.rewarding:
            finite = collected.outcomes[torch.isfinite(collected.outcomes)]
            accuracy = float(finite.mean()) if len(finite) else math.nan
            self.last = {"spark/period": 1.0, "spark/judge_acc": accuracy}
            self.due = False
        else:
            self.source.update(collected)
            examples, metrics = self.builder(collected)
            self.buffer.add(examples)
            self.last = {"spark/period": 0.0, **metrics}
            self.due = len(self.buffer) >= self.batch
        self.last["spark/cache_size"] = float(len(self.buffer))

    def metrics(self) -> dict[str, float]:
        return dict(self.last)

    def state_dict(self) -> dict:
        state = getattr(self.builder, "state_dict", dict)()
        return {"buffer": self.buffer.state_dict(), "due": self.due, "builder": state}

    def load_state_dict(self, state: dict) -> None:
        self.buffer.load_state_dict(state["buffer"])
        self.due = bool(state["due"])
        if hasattr(self.builder, "load_state_dict"):
            self.builder.load_state_dict(state["builder"])
