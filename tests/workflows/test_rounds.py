"""Generation rounds (spec §6, T6.3) with a scripted generator and scorer: the buffer
fills in arrival order, the surplus is cut, the rounds are capped, an exhausted step
raises or trains on what it kept, and every generated sample is charged."""

from __future__ import annotations

import pytest
import torch

from policylab import Rollouts
from policylab.algebra.options import build_options
from policylab.algebra.selection import selections
from policylab.api import SelectionRule
from policylab.workflows.rounds import RoundsExhausted, collect_groups
from policylab.workflows.single_turn import RolloutInfo

G = 2  # samples per prompt
N = 3  # groups per step
# accuracy of each scripted group's G samples: mixed groups pass, agreeing ones do not
MIXED, ALL_RIGHT, ALL_WRONG = [1.0, 0.0], [1.0, 1.0], [0.0, 0.0]


def rule(name: str) -> SelectionRule:
    entry = selections.entry(name)
    return SelectionRule(name, entry, build_options(entry.config, {}, where=name))


class Script:
    """A fake generator + scorer: round k returns the named groups of `rounds[k]`, each
    with its scripted accuracies, T = 3 tokens per sample (T = 4 in odd rounds)."""

    def __init__(self, *rounds: list[tuple[str, list[float]]]) -> None:
        self.rounds, self.calls, self.next_prompt = list(rounds), 0, 0

    def __call__(self):
        groups = self.rounds[self.calls]
        width = 3 + self.calls % 2
        self.calls += 1
        rows = len(groups) * G
        names = [name for name, _ in groups for _ in range(G)]
        batch = Rollouts(
            rewards=torch.tensor([a for _, accs in groups for a in accs]),
            response_mask=torch.ones(rows, width),
            group_ids=torch.arange(len(groups)).repeat_interleave(G),
            extras={"name": names},
        )
        info = RolloutInfo(names, names, {}, rows * width, 0.0, 0.0)
        drawn = list(range(self.next_prompt, self.next_prompt + len(groups)))
        self.next_prompt += len(groups)
        return drawn, batch, info


def t6_3_script() -> Script:
    # round 1 keeps {a, b}, round 2 keeps {c, d}
    return Script(
        [("a", MIXED), ("x", ALL_RIGHT), ("b", MIXED)],
        [("c", MIXED), ("d", MIXED), ("y", ALL_WRONG)],
        [("never", MIXED)] * 3,
    )


def test_t6_3_two_rounds_fill_three_groups_in_arrival_order():
    script = t6_3_script()
    got = collect_groups(script, rule("dynamic_sampling"), N, max_rounds=10)
    assert script.calls == 2
    assert got.rounds == 2
    assert got.batch.extras["name"] == ["a", "a", "b", "b", "c", "c"]  # d is surplus
    assert got.batch.group_ids.tolist() == [0, 0, 1, 1, 2, 2]
    assert got.batch.response_mask.shape == (6, 4)  # round 2 is one token wider
    assert got.batch.response_mask.sum(-1).tolist() == [3, 3, 3, 3, 4, 4]
    # charged for everything generated: 2 rounds × 3 prompts × G = 12 samples
    assert got.samples == 12
    assert got.indices == [0, 1, 2, 3, 4, 5]
    assert len(got.outcomes) == 12 and got.info.generated_tokens == 6 * 3 + 6 * 4
    assert got.info.completions[:2] == ["a", "a"] and len(got.info.completions) == 12
    assert got.metrics == {
        "ds/num_gen_rounds": 2.0,
        "ds/kept_groups": 4.0,  # a, b, c, d passed; d is cut
        "ds/drop_all_correct": 1.0,  # x
        "ds/drop_all_wrong": 1.0,  # y
        "ds/kept_frac": 4 / 6,
        "ds/trained_groups": 3.0,
        "ds/extra_samples": 6.0,  # the second round
    }


def test_t6_3_one_round_allowed_raises_after_round_one():
    script = t6_3_script()
    with pytest.raises(RoundsExhausted, match="kept 2 of the 3 groups.*max_gen_rounds"):
        collect_groups(script, rule("dynamic_sampling"), N, max_rounds=1)
    assert script.calls == 1


def test_t6_3_one_round_allowed_with_train_partial_trains_on_what_was_kept():
    script = t6_3_script()
    got = collect_groups(
        script, rule("dynamic_sampling"), N, max_rounds=1, on_exhaust="train_partial"
    )
    assert script.calls == 1
    assert got.batch.extras["name"] == ["a", "a", "b", "b"]
    assert got.metrics["ds/trained_groups"] == 2
    assert got.samples == 6


def test_a_round_that_keeps_nothing_still_counts():
    script = Script(
        [("x", ALL_RIGHT), ("y", ALL_WRONG), ("z", ALL_RIGHT)],
        [("a", MIXED), ("b", MIXED), ("c", MIXED)],
    )
    got = collect_groups(script, rule("dynamic_sampling"), N, max_rounds=2)
    assert got.rounds == 2
    assert got.batch.extras["name"] == ["a", "a", "b", "b", "c", "c"]
    assert got.metrics["ds/drop_all_correct"] == 2 and got.metrics["ds/drop_all_wrong"] == 1


def test_zero_max_rounds_is_unlimited():
    script = Script(*[[("x", ALL_WRONG)] * 3] * 11, [("a", MIXED)] * 3)
    got = collect_groups(script, rule("dynamic_sampling"), N, max_rounds=0)
    assert got.rounds == 12 and got.metrics["ds/trained_groups"] == 3


def test_a_step_that_kept_nothing_returns_an_empty_batch():
    script = Script([("x", ALL_WRONG)] * 3, [("y", ALL_RIGHT)] * 3)
    got = collect_groups(
        script, rule("dynamic_sampling"), N, max_rounds=2, on_exhaust="train_partial"
    )
    assert len(got.batch) == 0 and got.samples == 12
    assert got.metrics["ds/kept_frac"] == 0.0


def test_keeping_everything_is_one_round_and_the_batch_unchanged():
    script = Script([("a", ALL_RIGHT), ("b", MIXED), ("c", ALL_WRONG)])
    got = collect_groups(script, rule("all"), N)
    _, expected, _ = Script([("a", ALL_RIGHT), ("b", MIXED), ("c", ALL_WRONG)])()
    assert got.rounds == 1
    for name in ("rewards", "response_mask", "group_ids"):
        assert torch.equal(getattr(got.batch, name), getattr(expected, name))
    assert got.batch.extras == expected.extras
