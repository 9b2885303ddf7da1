"""The `rank_items` annotator: Rank-GRPO's items and rank rewards for a completion that is
a ranked list, one item per line (papers/seed_llm_algorithms.md §19.2).

- `segment_ids` [B, T]: the item (line) of each token, a newline belonging to the item it
  ends [code yaochenzhu/Rank-GRPO libs/trl/rank_grpo_trainer.py:_segment_items_from_tokens;
  ours: a run of newlines opens no empty item, where the code advances by each newline].
- `extras["rank_rewards"]` [B, N]: the task's per-rank relevance `task.relevance(text,
  example)` turned into rank rewards (exp_inf or log_decay, algebra/rank.py)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from policylab.algebra.empg import segment_ids_from_newlines
from policylab.algebra.options import check_choice, option
from policylab.algebra.rank import RANK_REWARD_KINDS, RANK_REWARDS, rank_rewards
from policylab.rollouts import Rollouts
from policylab.stages.base import Stage, StageContext, register
from policylab.workflows.single_turn import RolloutInfo, newline_ids


@dataclass(frozen=True)
class RankItemsOptions:
    reward: str = option("exp_inf", "rank reward: exp_inf (own item) or log_decay (causal DCG)")

    def __post_init__(self) -> None:
        check_choice("rank_items", "reward", self.reward, RANK_REWARD_KINDS)


@register
class RankItems(Stage):
    name = "rank_items"
    kind = "annotate"
    Options = RankItemsOptions
    provides = ("segment_ids", RANK_REWARDS)

    def setup(self, ctx: StageContext) -> None:
        task = getattr(ctx.workflow, "task", None)  # the bandit's table has none
        if not callable(getattr(task, "relevance", None)):
            raise ValueError(
                f"stage 'rank_items' needs a task with relevance(completion, example) -> "
                f"per-rank values (e.g. ranked_list); {task or 'this run'!r} has none"
            )

    def annotate(
        self, batch: Rollouts, examples: list[dict], info: RolloutInfo, workflow
    ) -> Rollouts:
        breaks = newline_ids(workflow.tokenizer)
        seg = segment_ids_from_newlines(batch.response_ids, breaks)
        n = len(info.completions) // max(len(examples), 1)  # rows are prompt-major
        rel = torch.tensor(
            [
                workflow.task.relevance(text, examples[i // n])
                for i, text in enumerate(info.completions)
            ],
            dtype=torch.float64,
        )
        extras = {**batch.extras, RANK_REWARDS: rank_rewards(rel, self.options.reward)}
        return batch.replace(segment_ids=seg, extras=extras)
