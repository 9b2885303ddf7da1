"""Offline data (BCPG-NSA, papers/seed_llm_algorithms.md §15.3): a training set sampled
once from the initial policy, verified, filtered to mixed-outcome prompts, and drawn from
for the whole run; plus the step labels BCPG-NSA weights by.

With `offline_prompts` = N > 0 the language-model trainer samples G completions for N
prompts before its first step (the initial policy is the behaviour and the reference
model), keeps the groups whose accuracy is not all equal (the paper drops all-right and
all-wrong questions; the same test as DAPO's filter), saves the set in the run folder
(`offline.pt`, so a resumed run trains on the same data) and then draws
`prompts_per_step` of its groups per step, in seeded epochs. Only the sampling pass is
charged to the sample budget.
"""

from __future__ import annotations

import dataclasses
import logging
import pickle
from dataclasses import dataclass
from pathlib import Path

import torch

from policylab.algebra.bcpg import STEP_LABELS
from policylab.algebra.selection import DynamicSamplingOptions, dynamic_sampling
from policylab.rollouts import Rollouts
from policylab.workflows.single_turn import RolloutInfo

log = logging.getLogger(__name__)

FILE = "offline.pt"


@dataclass
class OfflineSet:
    batch: Rollouts  # the kept groups, ids 0..K−1; extras hold each row's prompt/completion
    samples: int  # samples generated to build it (kept or not)
    tokens: int
    built_now: bool = False  # sampled by this process (not read back from the run folder)
    prompts: list[str] | None = None  # the prompts it was sampled for, in order

    @property
    def groups(self) -> int:
        return int(self.batch.group_ids.max()) + 1 if len(self.batch) else 0

    def draw(self, groups: list[int]) -> tuple[list[int], Rollouts, RolloutInfo]:
        """A generation round's worth of stored groups (ids renumbered 0..n−1 in the
        order asked), with an info that charges nothing."""
        rows = torch.cat([(self.batch.group_ids == g).nonzero(as_tuple=True)[0] for g in groups])
        batch = self.batch.select(rows)
        _, local = torch.unique_consecutive(batch.group_ids, return_inverse=True)
        batch = batch.replace(group_ids=local)
        info = RolloutInfo(
            list(batch.extras["completion"]), list(batch.extras["prompt"]), {}, 0, 0.0, 0.0
        )
        return groups, batch, info

    def save(self, folder: Path) -> None:
        """offline.pt: the batch's fields, the counts and the prompts, as tensors and plain
        values (read back with `weights_only=True`)."""
        batch = {f.name: getattr(self.batch, f.name) for f in dataclasses.fields(Rollouts)}
        state = {"batch": batch, "samples": self.samples, "tokens": self.tokens}
        torch.save({**state, "prompts": self.prompts}, Path(folder) / FILE)

    @classmethod
    def load(cls, folder: Path) -> OfflineSet | None:
        path = Path(folder) / FILE
        if not path.exists():
            return None
        try:
            state = torch.load(path, weights_only=True)
        except pickle.UnpicklingError:
            raise ValueError(
                f"{path}: refused to load: it holds Python objects, not only tensors and "
                "plain values as the offline sets policylab writes; loading it could run "
                "code. Delete it to sample the set again, if you trust the run folder"
            ) from None
        batch = Rollouts(**state["batch"])
        return cls(batch, state["samples"], state["tokens"], prompts=state.get("prompts"))


def build_offline_set(rounds: list[tuple[Rollouts, RolloutInfo]]) -> OfflineSet:
    """The mixed-outcome groups of `rounds` (each round's groups numbered from 0), one
    set with ids 0..K−1 in order."""
    kept, samples, tokens, offset = [], 0, 0, 0
    for batch, info in rounds:
        samples += len(batch)
        tokens += info.generated_tokens
        batch = batch.replace(
            extras={**batch.extras, "completion": info.completions, "prompt": info.prompts}
        )
        chosen = dynamic_sampling(batch, None, DynamicSamplingOptions())
        batch = chosen.apply(batch)
        if len(batch):
            _, local = torch.unique_consecutive(batch.group_ids, return_inverse=True)
            kept.append(batch.replace(group_ids=local + offset))
            offset += int(local.max()) + 1
    if not kept:
        raise ValueError(
            "offline data: every sampled prompt was all right or all wrong, so no group has "
            "a learning signal; raise offline_prompts or change the task's difficulty"
        )
    log.info("offline set: %d of the sampled groups have mixed outcomes", offset)
    return OfflineSet(Rollouts.concat(kept), samples, tokens)


def label_steps(batch: Rollouts, examples: list[dict], tokenizer, judge) -> Rollouts:
    """BCPG-NSA's step labels: `judge(pieces, example) -> (labels, token step ids)` per
    row (rows prompt-major, len(batch) / len(examples) per example); sets
    `segment_ids` (−1 outside any step) and `extras["step_correct"]`. `judge` None (a
    task without a step judge): no steps, every token keeps weight 1 (plain BCPG)."""
    n = len(batch) // max(len(examples), 1)
    seg = torch.full_like(batch.response_ids, -1)
    labels: list[list[bool]] = []
    for i, (ids, mask) in enumerate(zip(batch.response_ids, batch.response_mask, strict=True)):
        if judge is None:
            labels.append([])
            continue
        tokens = ids[mask > 0].tolist()
        pieces = [tokenizer.decode([t], skip_special_tokens=True) for t in tokens]
        row_labels, row_seg = judge(pieces, examples[i // n])
        labels.append(list(row_labels))
        seg[i, : len(row_seg)] = torch.tensor(row_seg, dtype=seg.dtype)
    return batch.replace(segment_ids=seg, extras={**batch.extras, STEP_LABELS: labels})


def offline_set(prompts: int, per_round: int, folder, pool, sample_round) -> OfflineSet:
    """The run's offline data: read back from the run folder, or sampled now from the
    initial policy (`sample_round(examples) -> (Rollouts, RolloutInfo)`, `per_round`
    prompts a call) over the first `prompts` prompts of the pool and saved; `built_now`
    says which (only a set built now is charged to the budget)."""
    chosen = pool[:prompts]
    texts = [str(example["prompt"]) for example in chosen]
    stored = OfflineSet.load(folder)
    if stored is not None:
        if stored.prompts is not None and stored.prompts != texts:
            raise ValueError(
                f"{Path(folder) / FILE} was sampled for other prompts ({len(stored.prompts)} "
                f"stored, {len(texts)} asked for by offline_prompts and the task): use a new "
                "run_dir, or delete the file to sample the set again"
            )
        return stored
    chunks = range(0, len(chosen), per_round)
    built = build_offline_set([sample_round(chosen[i : i + per_round]) for i in chunks])
    built.prompts, built.built_now = texts, True
    built.save(folder)
    return built
