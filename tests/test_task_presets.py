"""Task presets (tasks/presets.py): a preset name works wherever a task name does, is its
base task with the preset's knobs, and knobs given with it override the preset's."""

from __future__ import annotations

import pytest

import policylab.tasks as tasks
from policylab.tasks.presets import PRESETS

EXPECTED = {
    "arithmetic_mixed": ("arithmetic", {"digits": 2, "ops": "+-*", "n_operands": 2}),
    "countdown25": ("countdown", {"n_numbers": 3, "max_number": 25, "max_target": 100}),
    "sudoku4_hard": ("sudoku4", {"blanks": 12, "partial_credit": False}),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_preset_is_its_base_task_with_its_knobs(name):
    base, knobs = EXPECTED[name]
    task = tasks.get(name)
    assert task.name == base
    assert {k: getattr(task.knobs, k) for k in knobs} == knobs


def test_every_preset_is_tested_and_named_apart_from_the_tasks():
    assert set(PRESETS) == set(EXPECTED)
    assert not set(PRESETS) & set(tasks.task_classes.names())


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_preset_gives_the_base_tasks_examples(name):
    # same prompts, answers and columns as the base task with the same knobs and seed: the
    # split hashes the base task's name, so a preset's test prompts are that setting's
    base, knobs = EXPECTED[name]
    for split in ("train", "test"):
        assert tasks.get(name).examples(split, 20, seed=3) == tasks.get(base, **knobs).examples(
            split, 20, seed=3
        )
    # and not the default task's: the preset changes the draw
    assert tasks.get(name).examples("test", 20, seed=3) != tasks.get(base).examples(
        "test", 20, seed=3
    )


def test_given_knobs_override_the_presets():
    task = tasks.get("countdown25", max_number=20, n_numbers=4)
    assert (task.knobs.n_numbers, task.knobs.max_number) == (4, 20)
    assert tasks.get("sudoku4_hard", blanks=11).knobs.blanks == 11
    # the override does not leak into the preset
    assert tasks.get("countdown25").knobs.max_number == 25


def test_presets_appear_in_names_and_in_the_listing():
    names = tasks.names()
    assert names == sorted(names)
    assert set(EXPECTED) <= set(names)
    assert set(tasks.task_classes.names()) <= set(names)
    listing = tasks.presets()
    assert list(listing) == sorted(EXPECTED)
    assert listing["countdown25"].startswith("countdown max_number=25: ")


def test_unknown_knob_on_a_preset_names_the_knob_and_the_choices():
    with pytest.raises(ValueError, match="countdown has no knob 'blanks' .*knobs: n_numbers"):
        tasks.get("countdown25", blanks=3)


def test_bad_value_on_a_preset_names_the_knob_and_the_range():
    with pytest.raises(ValueError, match="blanks=13 is invalid; accepted: an integer from 1"):
        tasks.get("sudoku4_hard", blanks=13)


def test_unknown_name_lists_tasks_and_presets():
    with pytest.raises(ValueError, match="unknown task 'countdown9'.*arithmetic, countdown.*"):
        tasks.get("countdown9")
    with pytest.raises(ValueError, match="presets: arithmetic_mixed, countdown25, sudoku4_hard"):
        tasks.get("countdown9")


def test_a_preset_routes_to_the_language_model_trainer():
    from policylab.config import TrainConfig
    from policylab.routing import run_config

    cfg = run_config(None, {"task": "sudoku4_hard", "algo": "grpo", "task_knobs": {"blanks": 10}})
    assert isinstance(cfg, TrainConfig)
    assert (cfg.task, cfg.task_knobs) == ("sudoku4_hard", {"blanks": 10})


def test_an_arena_on_a_preset_is_a_language_model_arena():
    from policylab.arena.runner import make_spec

    spec = make_spec("countdown25", "grpo,dr_grpo", seeds=2, budget=1280)
    assert (spec.kind, spec.budget_unit, spec.budget_value) == ("llm", "generated samples", 10)


def test_a_preset_is_a_reward_name_with_the_base_verifier():
    from policylab import rewards

    reward = rewards.get("arithmetic_mixed")
    assert reward(
        ["2*3=", "2*3="], ["<answer>6</answer>", "<answer>5</answer>"], answer=["6", "6"]
    ) == [
        1.0,
        0.0,
    ]
