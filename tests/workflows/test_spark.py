"""SPARK's recycled data (seed_agents.md §A7 tests 1–4) and the recycle hook: group rewards
(1, 0, 0, 1) unless stated, random draws injected in call order."""

import random

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from policylab.rewards import get as reward
from policylab.rollouts import Rollouts
from policylab.workflows.rounds import Collected, RecycleBuffer, Recycling
from policylab.workflows.single_turn import RolloutInfo
from policylab.workflows.spark import (
    Group,
    RecycleOptions,
    SparkBuilder,
    build_items,
    groups_of,
    judge_item,
    reflection_items,
)

OPTIONS = RecycleOptions()


class Scripted:
    """Draws in call order: random() and randrange(n) each take the next value."""

    def __init__(self, values):
        self.values = list(values)

    def random(self) -> float:
        return self.values.pop(0)

    def randrange(self, n: int) -> int:
        value = self.values.pop(0)
        assert 0 <= value < n, (value, n)
        return value


def group(correct, answers=("42", "43", "44", "42")) -> Group:
    texts = [a if a is None else f"<answer>{a}</answer>" for a in answers]
    texts = ["no tag" if t is None else t for t in texts]
    return Group("17+25=", "42", texts, [bool(c) for c in correct])


def test_1_mixed_group_pairwise_negative_first_is_label_2():
    # u = 0.5 ≥ 0.3 → pairwise; correct {0, 3}: draw 1 → index 3; wrong {1, 2}: draw 0 →
    # index 1; order 0.7 ≥ 0.5 → negative first → "43|42", label 2 (code: "B")
    rng = Scripted([0.5, 1, 0, 0.7])
    item = judge_item(group((1, 0, 0, 1)), rng, OPTIONS)
    assert item == {"prompt": "17+25=43|42?", "answer": "2", "kind": "pairwise"}
    assert rng.values == []  # exactly four draws


def test_1b_positive_first_is_label_1():
    item = judge_item(group((1, 0, 0, 1)), Scripted([0.5, 0, 1, 0.2]), OPTIONS)
    assert item == {"prompt": "17+25=42|44?", "answer": "1", "kind": "pairwise"}


def test_2_mixed_group_pointwise_wrong_class_is_label_N():
    # u = 0.2 < 0.3 → pointwise; class draw 0 → the wrong answers {1, 2}; member 1 → index 2
    item = judge_item(group((1, 0, 0, 1)), Scripted([0.2, 0, 1]), OPTIONS)
    assert item == {"prompt": "17+25=44?", "answer": "N", "kind": "pointwise"}
    right = judge_item(group((1, 0, 0, 1)), Scripted([0.2, 1, 1]), OPTIONS)
    assert right == {"prompt": "17+25=42?", "answer": "Y", "kind": "pointwise"}


def test_3_uniform_groups_give_one_pointwise_item_on_answer_0_without_draws():
    rng = Scripted([])  # any draw would fail
    ones = build_items([group((1, 1, 1, 1), ("42",) * 4)], rng, OPTIONS)
    assert ones.items[:1] == [{"prompt": "17+25=42?", "answer": "Y", "kind": "pointwise"}]
    zeros = build_items([group((0, 0, 0, 0), ("7", "8", "9", "1"))], Scripted([0]), OPTIONS)
    judged = [i for i in zeros.items if i["kind"] == "pointwise"]
    assert judged == [{"prompt": "17+25=7?", "answer": "N", "kind": "pointwise"}]
    assert (ones.pointwise, ones.pairwise, zeros.pointwise) == (1, 0, 1)


def test_4_reflection_keeps_32_of_64_half_cot_half_ans():
    groups = [group((1, 0, 0, 1)) for _ in range(64)]
    no_cap = reflection_items(groups, random.Random(0), RecycleOptions(reflect_max=64))
    kinds = [i["kind"] for i in no_cap]
    assert kinds == ["reflect_cot"] * 32 + ["reflect_ans"] * 32  # groups 0–31 cot, 32–63 ans
    kept = reflection_items(groups, random.Random(0), OPTIONS)
    assert len(kept) == 32
    cot = next(i for i in no_cap if i["kind"] == "reflect_cot")
    ans = next(i for i in no_cap if i["kind"] == "reflect_ans")
    assert cot["prompt"] in ("17+25=<answer>43</answer>!", "17+25=<answer>44</answer>!")
    assert ans["prompt"] in ("17+25=43!", "17+25=44!") and ans["answer"] == "42"


def test_a_missing_answer_is_replaced_by_a_wrong_one_and_unshowable_groups_are_skipped():
    # answer 0 has no tag (all wrong): replaced by a random wrong non-missing one, draw 1 → "9"
    g = group((0, 0, 0, 0), (None, "8", "9", None))
    item = judge_item(g, Scripted([1]), OPTIONS)
    assert item == {"prompt": "17+25=9?", "answer": "N", "kind": "pointwise"}
    nothing = group((0, 0), (None, "4|2"))  # a separator cannot be shown
    built = build_items([nothing], Scripted([]), RecycleOptions(reflection=False))
    assert built.items == [] and built.skipped == 1


def test_reflection_false_builds_judge_items_only():
    built = build_items([group((1, 0, 0, 1))], Scripted([0.5, 1, 0, 0.7]), RecycleOptions(False))
    assert [i["kind"] for i in built.items] == ["pairwise"] and built.reflect == 0


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.lists(st.booleans(), min_size=1, max_size=6), min_size=1, max_size=20),
    st.integers(0, 10**6),
)
def test_labels_are_always_right(outcomes, seed):
    """Property: every judge label agrees with the verifier, every reflection label is gold."""
    groups = [
        Group("3+4=", "7", [f"<answer>{7 if c else 10 + k}</answer>" for k, c in enumerate(g)], g)
        for g in outcomes
    ]
    built = build_items(groups, random.Random(seed), OPTIONS)
    assert built.pointwise + built.pairwise == len(groups)  # one judge item per group
    for item in built.items:
        shown = item["prompt"][len("3+4=") : -1]
        if item["kind"] == "pointwise":
            assert item["answer"] == ("Y" if shown == "7" else "N")
        elif item["kind"] == "pairwise":
            first, second = shown.split("|")
            assert {first, second} != {"7"} and item["answer"] == ("1" if first == "7" else "2")
        else:
            assert item["answer"] == "7"


def test_judge_label_is_an_exact_label_match():
    fn = reward("judge_label")
    got = fn(
        ["p"] * 4,
        ["<answer>Y</answer>", "<answer> 2 </answer>", "Y", "<answer>y</answer>"],
        answer=["Y", "2", "Y", "Y"],
    )
    assert got == [1.0, 1.0, 0.0, 0.0]


def test_options_refuse_bad_values():
    with pytest.raises(ValueError, match="pointwise_prob"):
        RecycleOptions(pointwise_prob=1.5)
    with pytest.raises(ValueError, match="reflect_max"):
        RecycleOptions(reflect_max=-1)


def test_buffer_is_fifo_bounded_and_round_trips():
    buffer = RecycleBuffer(capacity=3)
    buffer.add([{"prompt": str(i)} for i in range(4)])  # 0 dropped at capacity
    assert [i["prompt"] for i in buffer.take(2)] == ["1", "2"] and buffer.dropped == 1
    again = RecycleBuffer(3)
    again.load_state_dict(buffer.state_dict())
    assert again.items == [{"prompt": "3"}] and again.dropped == 1


def _collected(outcomes, completions, indices):
    n = len(outcomes)
    batch = Rollouts(rewards=torch.tensor(outcomes), response_mask=torch.ones(n, 1))
    info = RolloutInfo(completions, ["p"] * n, {}, 2 * n, 0.0, 0.0)
    return Collected(batch, info, indices, torch.tensor(outcomes), 1, {})


def test_groups_of_reads_prompt_major_rows_and_leaves_out_unscored_ones():
    pool = [{"prompt": "1+1=", "answer": "2"}, {"prompt": "2+2=", "answer": "4"}]
    done = _collected([1.0, 0.0, float("nan"), 1.0], ["a", "b", "c", "d"], [1, 0])
    groups = groups_of(done, pool)
    assert groups[0] == Group("2+2=", "4", ["a", "b"], [True, False])
    assert groups[1] == Group("1+1=", "2", ["d"], [True])


def test_correctness_comes_from_the_task_verifier_not_the_run_reward():
    # a right answer without the format bonus (reward 0.9 under {exact: 0.9, format: 0.1})
    # is right; a wrong one padded to a reward ≥ 1 (a multi-part reward) is wrong
    import policylab.tasks as tasks

    pool = [{"prompt": "2+2=", "answer": "4"}]
    done = _collected([0.9, 1.5], ["<answer>4</answer>", "<answer>5</answer>"], [0])
    (group,) = groups_of(done, pool, tasks.get("arithmetic").verify)
    assert group.correct == [True, False]
    (by_reward,) = groups_of(done, pool)
    assert by_reward.correct == [False, True]


class FakeSource:
    def __init__(self):
        self.updates = 0

    def next(self):
        texts = ["<answer>2</answer>", "<answer>3</answer>"]
        return _collected([1.0, 0.0], texts, [0])

    def update(self, collected):
        self.updates += 1


def test_recycling_alternates_periods_and_charges_reward_periods():
    from policylab.stages import Budget

    pool = [{"prompt": "1+1=", "answer": "2"}]
    seen = []

    def reward_workflow(examples):
        seen.append([e["kind"] for e in examples])
        n = 2 * len(examples)  # G = 2
        batch = Rollouts(
            rewards=torch.tensor([1.0, 0.0] * len(examples)), response_mask=torch.ones(n, 1)
        )
        return batch, RolloutInfo(["x"] * n, ["p"] * n, {}, 3 * n, 0.0, 0.0)

    budget, source = Budget(), FakeSource()
    builder = SparkBuilder(pool, OPTIONS, seed=0)
    recycler = Recycling(source, builder, reward_workflow, 2, budget, RecycleBuffer())
    periods = []
    for _ in range(3):
        collected = recycler.next()
        recycler.update(collected)
        periods.append(recycler.metrics())
    # step 1 (infer): 1 judge + 1 reflection item → cache 2 = batch → step 2 is a reward
    # period on both; step 3 infers again
    assert [p["spark/period"] for p in periods] == [0.0, 1.0, 0.0]
    assert periods[0]["spark/cache_size"] == 2 and periods[1]["spark/cache_size"] == 0
    assert periods[0]["spark/reflect_items"] == 1 and periods[1]["spark/judge_acc"] == 0.5
    assert source.updates == 2 and len(seen) == 1 and seen[0][1] == "reflect_ans"
    assert (budget.samples, budget.tokens) == (4, 12)  # the reward period's 2 × G, 3 each
    restored = Recycling(
        source, SparkBuilder(pool, OPTIONS, 0), reward_workflow, 2, Budget(), RecycleBuffer()
    )
    restored.load_state_dict(recycler.state_dict())
    assert restored.buffer.items == recycler.buffer.items and restored.due == recycler.due
    assert restored.builder.rng.random() == recycler.builder.rng.random()
