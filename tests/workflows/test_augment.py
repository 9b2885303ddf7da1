"""Difficulty-aware augmentation (spec §5.2, T5.3; arXiv 2506.07464 Eq. 9): hand-computed
ΔR, sides and levels of a plan, the empty buffer, the window, uniform-only groups, metrics,
exact resume, and the replacement of planned examples by the task's variants."""

from __future__ import annotations

import math
import random

import pytest

import policylab.tasks as tasks
from policylab.tasks.base import split_of
from policylab.workflows.augment import DifficultyAugmenter, augment_examples

NOT_UNIFORM = [False, False, False]


def primed(buffer: list[float], **options) -> DifficultyAugmenter:
    """An augmenter whose buffer holds `buffer` (pushed by one plan, which plans nothing)."""
    aug = DifficultyAugmenter(**options)
    assert aug.plan(buffer, [False] * len(buffer)) == []  # empty buffer: no augmentation
    return aug


def test_plan_by_hand():
    # buffer mean 0.5; ΔR = 0.5 − R̄: −0.5 (harder, ℓ 0.5), +0.5 (easier, ℓ 0.5), 0 (none)
    aug = primed([0.5, 0.5])
    assert aug.plan([1.0, 0.0, 0.5], NOT_UNIFORM) == [(0, True, 0.5), (1, False, 0.5)]


def test_plan_spec_t5_3():
    # buffer [0.5, 1.0, 1.5] → reference 1.0; reward range 2 (format + accuracy)
    # [2,2,2,2]: ΔR = −1.0 → harder, ℓ 0.5; [0,0,1,0]: ΔR = +0.75 → easier, ℓ 0.375;
    # [1,1,1,1]: ΔR = 0 → nothing (strict inequality with tol 0)
    aug = primed([0.5, 1.0, 1.5], reward_range=2.0)
    assert aug.plan([2.0, 0.25, 1.0], [True, False, True]) == [(0, True, 0.5), (1, False, 0.375)]


def test_level_is_clipped_and_tol_is_strict():
    # reference 0.5, range 0.25: |ΔR| = 0.5 → ℓ = min(2, 1) = 1; |ΔR| = 0.1 ≤ tol 0.1 → none
    aug = primed([0.5], reward_range=0.25, tol=0.1)
    assert aug.plan([1.0, 0.4, 0.0], NOT_UNIFORM) == [(0, True, 1.0), (2, False, 1.0)]


def test_window_evicts_the_oldest_groups():
    aug = primed([0.0, 0.0, 1.0], window=3)
    # push [1.0, 1.0]: the buffer keeps the last 3 means [1.0, 1.0, 1.0], mean 1
    aug.plan([1.0, 1.0], [True, True])
    assert list(aug.buffer) == [1.0, 1.0, 1.0]
    # a group at 1.0 now matches the reference; with window 100 the reference would be 0.6
    assert aug.plan([1.0], [True]) == []


def test_means_join_the_buffer_after_the_plan():
    aug = primed([0.0])
    # both groups are judged against [0.0] alone, not against each other
    assert aug.plan([1.0, 1.0], [True, True]) == [(0, True, 1.0), (1, True, 1.0)]
    assert list(aug.buffer) == [0.0, 1.0, 1.0]


def test_only_uniform_groups():
    aug = primed([0.5, 0.5], only_uniform_groups=True)
    # group 0 (all right) and 1 (all wrong) are uniform; group 2 (mean 0.75) is mixed
    assert aug.plan([1.0, 0.0, 0.75], [True, True, False]) == [(0, True, 0.5), (1, False, 0.5)]
    assert list(aug.buffer) == [0.5, 0.5, 1.0, 0.0, 0.75]  # every group joins the buffer


def test_unscored_groups_are_skipped():
    aug = primed([0.5])
    assert aug.plan([math.nan, 0.0], [False, True]) == [(1, False, 0.5)]
    assert list(aug.buffer) == [0.5, 0.0]


def test_metrics_of_the_last_plan():
    aug = DifficultyAugmenter()
    assert aug.metrics() == {}
    aug.plan([0.5, 0.5], [True, True])
    # reference 0.5: group 0 harder ℓ 0.5, group 1 easier ℓ 0.25, group 2, 3 none
    aug.plan([1.0, 0.25, 0.5, 0.5], [True, False, True, True])
    assert aug.metrics() == {
        "aug/frac_harder": 0.25,
        "aug/frac_easier": 0.25,
        "aug/level_mean": 0.375,
        "aug/buffer_mean": 3.25 / 6,  # (0.5 + 0.5 + 1.0 + 0.25 + 0.5 + 0.5) / 6
    }


def test_state_roundtrip_resumes_exactly():
    options = {"window": 4, "seed": 7}
    history = [[0.2, 0.9], [0.5, 0.5, 0.1], [1.0, 0.0]]
    future = [[0.7, 0.3, 0.4], [0.0, 1.0]]
    a = DifficultyAugmenter(**options)
    for means in history:
        a.plan(means, [False] * len(means))
    a.rng.random()  # the generator has been used for variants
    b = DifficultyAugmenter(**options)
    b.load_state_dict(a.state_dict())
    assert b.metrics() == a.metrics()
    for means in future:
        flags = [False] * len(means)
        assert b.plan(means, flags) == a.plan(means, flags)
        assert b.rng.random() == a.rng.random()
    assert list(b.buffer) == list(a.buffer)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"window": 0}, "window=0"),
        ({"tol": -0.1}, "tol=-0.1"),
        ({"reward_range": 0}, "reward_range=0"),
    ],
)
def test_bad_options_name_the_field(options, message):
    with pytest.raises(ValueError, match=message):
        DifficultyAugmenter(**options)


def test_plan_needs_a_flag_per_group():
    with pytest.raises(ValueError, match="2 group means but 1 uniform flags"):
        DifficultyAugmenter().plan([0.0, 1.0], [True])


def test_augment_examples_replaces_the_planned_ones():
    task = tasks.get("sudoku4", blanks=6)
    examples = task.examples("train", 4, seed=0)
    plan = [(0, True, 0.5), (2, False, 1.0)]
    out, replaced = augment_examples(examples, plan, task, random.Random(0))
    assert replaced == [0, 2]
    assert out[1] is examples[1] and out[3] is examples[3]
    # harder: 6 + ⌊0.5·11 + ½⌋ = 12 blanks; easier at ℓ 1: the ladder's end, 1 blank
    assert [out[0]["puzzle"].count("."), out[2]["puzzle"].count(".")] == [12, 1]
    for example in out:
        assert split_of("sudoku4", example["prompt"]) == "train"
        assert task.verify(example["completion"], example) == 1.0
    again, _ = augment_examples(examples, plan, task, random.Random(0))
    assert again == out  # seeded


def test_augment_examples_keeps_what_cannot_vary():
    task = tasks.get("countdown", n_numbers=5)
    examples = task.examples("train", 2, seed=0)
    out, replaced = augment_examples(examples, [(1, True, 1.0)], task, random.Random(0))
    assert (out, replaced) == (examples, [])  # n_numbers is already at its maximum


def test_augment_examples_needs_a_task_that_varies():
    with pytest.raises(TypeError, match="'problems' has no vary"):
        augment_examples([{"prompt": "?"}], [(0, True, 0.5)], "problems", random.Random(0))
