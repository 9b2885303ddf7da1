"""A recipe's own training rewards (Recipe.rewards): used when a run names none and the
data has the columns they read; else the task's verifier, with the missing columns
logged; a run's rewards= always wins."""

from __future__ import annotations

import logging

import pytest

import policylab.tasks as tasks
from policylab import recipes
from policylab.config import TrainConfig
from policylab.recipes.compose import recipe_rewards
from policylab.rewards.json_struct import MULTI
from policylab.trainers.llm import compose


def example(task: str) -> dict:
    return tasks.get(task).examples("train", 1, seed=0)[0]


def test_gui_r1_trains_on_its_two_parts_when_the_data_has_the_columns():
    assert recipe_rewards(recipes.get("gui_r1"), example("gui_text")) == {
        "gui/format": 0.2,
        "gui/acc": 0.8,
    }
    assert recipe_rewards(recipes.get("se_gui"), example("gui_text")) == {"se_gui_point": 1.0}


def test_data_without_the_columns_falls_back_to_the_verifier_and_says_which(caplog):
    with caplog.at_level(logging.WARNING, logger="policylab.recipes.compose"):
        assert recipe_rewards(recipes.get("rl_struct_provisional"), example("arithmetic")) == {}
    assert "schema, gold" in caplog.text and "rl_struct_provisional" in caplog.text


def test_a_recipe_without_rewards_gives_none():
    assert recipe_rewards(recipes.get("grpo"), example("gui_text")) == {}


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ({}, MULTI),  # the recipe's multi reward, every part a logged function
        ({"json_exact": 1.0}, {"json_exact": 1.0}),  # the run's rewards replace it
    ],
)
def test_compose_uses_the_recipe_rewards_unless_the_run_names_its_own(given, expected):
    cfg = TrainConfig(algo="rl_struct_provisional", task="json_extract", rewards=given)
    plan = compose(cfg)
    assert plan.resolved["rewards"] == expected
    assert list(plan.reward_fn.functions) == list(expected)


def test_compose_records_the_task_verifier_when_nothing_else_applies():
    plan = compose(TrainConfig(algo="grpo", task="arithmetic"))
    assert plan.resolved["rewards"] == {"arithmetic": 1.0}
