"""RL-Struct from the command line (seed_agents.md §A8): `policylab train --algo
rl_struct_provisional --task json_extract` with the multi reward logs every part, and
`policylab describe` says why the recipe is provisional."""

from __future__ import annotations

import json

import pytest
import torch

from policylab import models, recipes
from policylab.cli import main
from policylab.config import TrainConfig
from policylab.trainers.llm import compose
from policylab.trainers.run import read_metrics

MULTI = (
    "rewards={json_valid: 1, json_struct: 1, json_format: 1, json_content: 2, json_length: -0.5}"
)


def test_recipe_is_grpo_with_ppo_clip_and_g_8():
    recipe = recipes.get("rl_struct_provisional")
    assert (recipe.advantage, recipe.loss) == ("grpo", "ppo_clip")
    assert recipe.training["samples_per_prompt"].value == 8
    for key, source in recipe.citations.items():
        assert source.startswith(("[paper", "[code", "[ours")), (key, source)


def test_describe_says_why_provisional(capsys):
    assert main(["describe", "rl_struct_provisional"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "Provisional" in out and "training code were not available" in out


@pytest.mark.slow
def test_train_from_the_cli_logs_every_reward_part(tmp_path, capsys):
    torch.set_num_threads(1)
    run_dir = tmp_path / "struct"
    code = main(
        ["train", "--algo", "rl_struct_provisional", "--task", "json_extract", MULTI,
         "steps=2", "prompts_per_step=2", "samples_per_prompt=2", "max_new_tokens=8",
         "eval_n=4", "eval_every=0", "save_every=0", "progress=false", f"run_dir={run_dir}"]
    )  # fmt: skip
    assert code == 0
    rows = read_metrics(str(run_dir), kind="train")
    assert len(rows) == 2
    for part in ("json_valid", "json_struct", "json_format", "json_content", "json_length"):
        assert 0.0 <= rows[-1][f"reward/{part}"] <= 1.0
    # the untrained tiny model writes no JSON in 8 tokens: every part 0, R = 0
    assert rows[0]["reward/json_valid"] == 0.0


def test_a_bad_json_extraction_file_fails_before_any_model_loads(tmp_path, monkeypatch):
    rows = [{"prompt": f"p{i}", "schema": {"n": "str"}, "gold": {"n": "Ann"}} for i in range(4)]
    rows[1]["gold"] = {"n": 7}
    path = tmp_path / "people.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))

    def no_model(*args, **kwargs):
        raise AssertionError("a model was loaded")

    monkeypatch.setattr(models, "load_model", no_model)
    cfg = TrainConfig(task=str(path), rewards={"json_valid": 1.0}, run_dir=str(tmp_path / "r"))
    with pytest.raises(ValueError, match="line 2: field 'gold' 'n' = 7"):
        compose(cfg)
