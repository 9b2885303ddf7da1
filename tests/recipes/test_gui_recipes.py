"""The GUI recipes gui_r1 and se_gui (recipes/gui.py): components and sourced defaults,
`policylab describe`, and a two-step `policylab train` on gui_text from a fresh clone."""

from __future__ import annotations

import json

import pytest

from policylab import recipes
from policylab.cli import main


def test_gui_recipes_are_grpo_with_a_k3_kl_in_the_loss():
    gui_r1, se_gui = recipes.get("gui_r1"), recipes.get("se_gui")
    assert (gui_r1.advantage, gui_r1.loss, se_gui.advantage, se_gui.loss) == (
        "grpo",
        "ppo_clip",
        "grpo",
        "ppo_clip",
    )
    assert gui_r1.kl == "k3_low_var in the loss, β=0.01"
    assert se_gui.kl == "k3 in the loss, β=0.004"
    assert gui_r1.defaults["training.samples_per_prompt"] == 5
    assert se_gui.defaults["training.samples_per_prompt"] == 8
    for recipe in (gui_r1, se_gui):
        assert all(source.startswith("[") for source in recipe.citations.values())


def test_describe_says_how_to_choose_the_reward(capsys):
    assert main(["describe", "se_gui"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "rewards={se_gui_point: 1}" in out
    assert "attention" in out  # the part not built, said in the notes


@pytest.mark.slow
def test_train_gui_r1_on_gui_text_logs_both_reward_parts(tmp_path):
    run = tmp_path / "run"
    argv = [
        "train",
        "--algo",
        "gui_r1",
        "--task",
        "gui_text",
        "steps=2",
        "prompts_per_step=2",
        "samples_per_prompt=5",
        "train_pool=16",
        "eval_n=4",
        "rewards={gui/format: 0.2, gui/acc: 0.8}",
        "task_knobs={mode: action}",
        f"run_dir={run}",
        "progress=false",
    ]
    assert main(argv) == 0
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in rows if r.get("kind") == "train"]
    assert len(train) == 2
    for row in train:
        total = 0.2 * row["reward/gui/format"] + 0.8 * row["reward/gui/acc"]
        assert row["reward/mean"] == pytest.approx(total, abs=1e-6)
        assert row["budget/samples"] in (10, 20)
