"""The masked-diffusion-LM trainer (papers/seed_generative.md G1.3, G1.7): a tiny MDM
folder trained by `policylab train --algo diffu_grpo|d2_stepmerge|d2_exact`, the ratio
is 1 at θ_old, every parameter moves, and resume is exact."""

import json

import pytest
import torch

from policylab import recipes
from policylab.api import train
from policylab.config import ConfigError
from policylab.policies.masked_lm import MaskedDiffusionLM, MDMConfig


@pytest.fixture(scope="module")
def mdm_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("mdm") / "tiny"
    torch.manual_seed(0)
    MaskedDiffusionLM(MDMConfig(d_model=32, n_layers=1, n_heads=2, d_ff=64)).save(folder)
    return folder


def fields(mdm_dir, run_dir, **kw):
    base = dict(
        task="arithmetic",
        model=str(mdm_dir),
        steps=2,
        prompts_per_step=3,
        eval_n=6,
        train_pool=40,
        run_dir=str(run_dir),
        progress=False,
        report_to=[],
        lr=1e-3,
    )
    return {**base, **kw}


def rows(run_dir, kind="train"):
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["kind"] == kind]


@pytest.mark.parametrize("algo,passes", [("diffu_grpo", 1), ("d2_stepmerge", 2), ("d2_exact", 6)])
def test_train_moves_every_parameter_with_ratio_one_at_theta_old(mdm_dir, tmp_path, algo, passes):
    result = train(algo=algo, **fields(mdm_dir, tmp_path / algo, epochs=1))
    first = rows(tmp_path / algo)[0]
    # one inner iteration: the loss is scored at θ_old with the old log-probs' mask seed
    assert first["pg/ratio_mean"] == pytest.approx(1.0, abs=1e-6)
    assert first["pg/ratio_max"] == pytest.approx(1.0, abs=1e-6)
    assert first["estimator/passes_per_row"] == passes
    assert first["estimator/gap"] > 0  # the one-step estimate is not the per-step value
    before = MaskedDiffusionLM.load(mdm_dir)
    after = MaskedDiffusionLM.load(tmp_path / algo / "model")
    unchanged = [
        n
        for (n, a), b in zip(before.named_parameters(), after.parameters(), strict=True)
        if torch.equal(a, b)
    ]
    assert not unchanged
    assert set(result.after) >= {"eval/greedy_accuracy", "eval/sampled_reward"}


def test_config_fields_are_the_run_s(mdm_dir, tmp_path):
    train(algo="diffu_grpo", **fields(mdm_dir, tmp_path / "b", steps=1, samples_per_prompt=2))
    first = rows(tmp_path / "b")[0]
    assert first["budget/samples"] == 3 * 2
    assert first["lr"] == pytest.approx(1e-3)


def test_resume_is_exact(mdm_dir, tmp_path):
    straight = fields(mdm_dir, tmp_path / "a", steps=4, epochs=2, save_every=2)
    train(algo="diffu_grpo", **straight)
    halves = fields(mdm_dir, tmp_path / "b", steps=2, epochs=2, save_every=2)
    train(algo="diffu_grpo", **halves)
    train(algo="diffu_grpo", resume=True, **{**halves, "steps": 4})
    a, b = rows(tmp_path / "a"), rows(tmp_path / "b")
    drop = ("time/rollout_s", "time/score_s", "time/learn_s")
    assert [{k: v for k, v in r.items() if k not in drop} for r in a] == [
        {k: v for k, v in r.items() if k not in drop} for r in b
    ]
    wa = MaskedDiffusionLM.load(tmp_path / "a" / "model").state_dict()
    wb = MaskedDiffusionLM.load(tmp_path / "b" / "model").state_dict()
    assert all(torch.equal(wa[k], wb[k]) for k in wa)


def test_a_language_model_recipe_on_an_mdm_is_refused_before_training(mdm_dir, tmp_path):
    with pytest.raises(ConfigError, match="diffu_grpo"):
        train(algo="grpo", **fields(mdm_dir, tmp_path / "x"))
    assert not (tmp_path / "x").exists()


def test_the_three_recipes_differ_only_in_the_estimator():
    tables = [recipes.get(n) for n in ("diffu_grpo", "d2_stepmerge", "d2_exact")]
    estimators = [r.training["estimator"].value for r in tables]
    assert estimators == ["one_step", "step_merge", "exact_steps"]
    assert len({(r.advantage, r.loss, str(r.loss_options)) for r in tables}) == 1


def test_an_mdm_recipe_on_a_causal_model_is_refused():
    with pytest.raises(ValueError, match="'diffu_grpo' trains a masked diffusion LM.*pretrain_mdm"):
        train(algo="diffu_grpo", task="arithmetic", steps=1, progress=False)


def test_a_field_the_mdm_trainer_does_not_read_is_refused(mdm_dir, tmp_path):
    with pytest.raises(ConfigError, match="does not use selection"):
        train(algo="diffu_grpo", **fields(mdm_dir, tmp_path / "r", selection="dynamic_sampling"))
    assert not (tmp_path / "r").exists()


def test_evaluations_carry_the_arena_s_budget(mdm_dir, tmp_path):
    train(algo="diffu_grpo", **fields(mdm_dir, tmp_path / "r"))
    evals = rows(tmp_path / "r", kind="eval")
    last_train = rows(tmp_path / "r")[-1]["budget/samples"]  # 2 steps × 3 prompts × G
    assert [e["budget/samples"] for e in evals] == [0, last_train] and last_train > 0
    assert all(e["time/elapsed_s"] >= 0 for e in evals)


def test_max_samples_ends_the_run_at_the_arena_s_budget(mdm_dir, tmp_path):
    result = train(algo="diffu_grpo", **fields(mdm_dir, tmp_path / "r", steps=50, max_samples=30))
    assert result.steps * 3 * 8 >= 30 > (result.steps - 1) * 3 * 8


def test_a_resume_needs_the_weights_the_run_started_from(mdm_dir, tmp_path):
    import shutil

    model = tmp_path / "model"
    shutil.copytree(mdm_dir, model)
    run = tmp_path / "r"
    train(algo="diffu_grpo", **{**fields(model, run), "model": str(model), "steps": 1})
    torch.manual_seed(1)
    MaskedDiffusionLM(MDMConfig(d_model=32, n_layers=1, n_heads=2, d_ff=64)).save(model)
    with pytest.raises(ValueError, match="holds other weights than the run started from"):
        train(algo="diffu_grpo", **{**fields(model, run), "model": str(model)}, resume=True)


def test_d1_is_an_alias_of_diffu_grpo():
    d1, diffu = recipes.get("d1"), recipes.get("diffu_grpo")
    assert "alias of diffu_grpo" in d1.title
    assert d1.defaults == diffu.defaults
    assert (d1.advantage, d1.loss, d1.training) == (diffu.advantage, diffu.loss, diffu.training)


def test_keep_checkpoints_is_read_by_the_mdm_run(mdm_dir, tmp_path):
    # the run folder (trainers/run.py run_options) prunes by keep_checkpoints for every
    # trainer, so the MDM trainer must not refuse it as unread
    run_dir = tmp_path / "k"
    train(algo="d1", **fields(mdm_dir, run_dir, steps=3, save_every=1, keep_checkpoints=1))
    kept = sorted(p.name for p in (run_dir / "checkpoints").glob("step_*"))
    assert kept == ["step_3"]
