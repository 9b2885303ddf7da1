"""lab/digits_personal and the methods dpg_t2i, dpg_t2i_similarity, dreambooth
(papers/seed_generative.md G5): the sks condition leaves the base model unchanged, the
subjects are 5 class-3 images, each method learns through `policylab train`, a run
resumes exactly, bad options and knobs are errors before any work."""

from __future__ import annotations

import pytest
import torch

import policylab
from policylab.lab import dpg_t2i
from policylab.lab.catalogue import build, lab_methods

# tiny models (built in about a second), cached in a temporary folder
KNOBS = {"base_steps": 30, "classifier_steps": 30, "eval_samples": 32}
METHODS = ("dpg_t2i", "dpg_t2i_similarity", "dreambooth")


@pytest.fixture(autouse=True, scope="module")
def _cache(tmp_path_factory):
    """One cache for the module: the tiny models are built once."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("POLICYLAB_CACHE", str(tmp_path_factory.mktemp("cache")))
        yield


def test_sks_column_is_zero_so_the_base_is_unchanged():
    from policylab.lab.digits import base_digits_flow

    base = base_digits_flow(0, 30)
    problem = build("lab/digits_personal", 0, **KNOBS)
    g = torch.Generator().manual_seed(0)
    x, tau = torch.randn(6, 64, generator=g), torch.rand(6, 1, generator=g)
    labels = torch.nn.functional.one_hot(torch.arange(6), 10).float()
    for sks in (0.0, 1.0):  # zero column: the label path and "sks" both give the base
        c11 = torch.cat([labels, torch.full((6, 1), sks)], 1)
        assert torch.equal(problem.mdp.velocity(x, tau, c11), base.velocity(x, tau, labels))
    first = problem.mdp.velocity_net[0].weight
    assert first.shape[1] == base.velocity_net[0].weight.shape[1] + 1
    assert torch.equal(first[:, dpg_t2i.SKS], torch.zeros(first.shape[0]))
    assert problem.mdp.reference is not None


def test_subjects_are_five_class_3_training_images_around_distinct_exemplars():
    from policylab.lab.digits_data import load_digits_split

    data = load_digits_split()
    threes = data.x_train[data.y_train == 3]
    subjects = [dpg_t2i.subject_images(k) for k in range(3)]
    for refs in subjects:
        assert refs.shape == (5, 64)
        assert torch.cdist(refs, threes).min(-1).values.max() == 0  # all are training 3s
        d = torch.cdist(refs[:1], threes)[0].sort().values
        assert torch.allclose(torch.cdist(refs[:1], refs)[0].sort().values, d[:5])
    assert torch.equal(subjects[0][0], threes[0])  # subject 0's exemplar: the first 3
    assert not torch.equal(subjects[1][0], subjects[2][0])


def test_task_metrics_and_value():
    problem = build("lab/digits_personal", 0, **KNOBS)
    m = problem.extras["metrics"](problem.mdp)
    assert set(m) == {
        "fid/subject", "align/p3", "div/pair_dist", "copy/nn_ref", "prior/p3", "prior/pair_dist"
    }  # fmt: skip
    assert problem.value(problem.mdp) == pytest.approx(m["fid/subject"])
    assert -1.0 <= m["fid/subject"] <= 1.0 and 0.0 <= m["align/p3"] <= 1.0
    assert problem.extras["prior_images"].shape == (8, 64)
    assert problem.budget_unit == "training rows"


def test_copying_is_zero_on_the_references_and_fidelity_is_high():
    problem = build("lab/digits_personal", 0, **KNOBS)
    refs = problem.extras["refs"]
    a, b = problem.extras["classifiers"]
    m = dpg_t2i.personal_metrics(refs, refs, refs, a, b)
    assert m["copy/nn_ref"] == 0.0
    other = torch.randn(5, 64).clamp(-1, 1)
    assert m["fid/subject"] > dpg_t2i.personal_metrics(other, other, refs, a, b)["fid/subject"]


def test_bad_knob_and_option_are_named():
    with pytest.raises(ValueError, match="subject"):
        build("lab/digits_personal", 0, subject=3)
    with pytest.raises(ValueError, match="prior_images = 0"):
        build("lab/digits_personal", 0, prior_images=0)
    with pytest.raises(ValueError, match="dpg_t2i.*gamma"):
        lab_methods.get("dpg_t2i").build_options({"gamma": 1.5})
    with pytest.raises(ValueError, match="dreambooth.*batch"):
        lab_methods.get("dreambooth").build_options({"batch": 0})
    with pytest.raises(ValueError, match="critic_lr"):
        lab_methods.get("dreambooth").build_options({"critic_lr": 0.1})


@pytest.mark.parametrize("algo", METHODS)
def test_one_step_moves_the_generator_and_the_critic(algo):
    problem = build("lab/digits_personal", 0, **KNOBS)
    method = lab_methods.get(algo)
    options = method.build_options({})
    g = torch.Generator().manual_seed(0)
    state = method.init(problem, options, g)
    before = [p.detach().clone() for p in state["policy"].trainable()]
    critic = [p.detach().clone() for p in state["critic"].parameters()] if "critic" in state else []
    state, metrics = method.step(problem, state, options, g)
    assert metrics["cost"] == 10
    for b, p in zip(before, state["policy"].trainable(), strict=True):
        assert not torch.equal(b, p)
    if "critic" in state:  # one SGD step of the critic after the actor's
        for b, p in zip(critic, state["critic"].parameters(), strict=True):
            assert not torch.equal(b, p)
    for r, b in zip(state["policy"].reference.parameters(), before, strict=True):
        assert torch.equal(r, b)


def test_dpg_critic_target_is_the_look_forward_cost_or_the_negative_similarity():
    problem = build("lab/digits_personal", 0, **KNOBS)
    out = {}
    for algo in ("dpg_t2i", "dpg_t2i_similarity"):
        method = lab_methods.get(algo)
        options = method.build_options({})
        state = method.init(problem, options, torch.Generator().manual_seed(0))
        _, out[algo] = method.step(problem, state, options, torch.Generator().manual_seed(1))
    assert out["dpg_t2i"]["dpg/target"] == pytest.approx(out["dpg_t2i"]["dpg/rec"])
    assert -1.0 <= out["dpg_t2i_similarity"]["dpg/target"] <= 1.0
    assert out["dpg_t2i_similarity"]["dpg/target"] != out["dpg_t2i"]["dpg/target"]


def test_dpg_without_prior_and_with_a_zero_critic_does_not_move():
    """w_prior = 0 and Q_φ ≡ 0 in θ leave no gradient: the generator learns only through
    the critic (G5.1)."""
    problem = build("lab/digits_personal", 0, **KNOBS)
    method = lab_methods.get("dpg_t2i")
    options = method.build_options({"prior_weight": 0.0, "weight_decay": 0.0})
    state = method.init(problem, options, torch.Generator().manual_seed(0))
    with torch.no_grad():
        for p in state["critic"].parameters():
            p.zero_()
    before = [p.detach().clone() for p in state["policy"].trainable()]
    method.step(problem, state, options, torch.Generator().manual_seed(0))
    for b, p in zip(before, state["policy"].trainable(), strict=True):
        assert torch.equal(b, p)


@pytest.mark.parametrize("algo", ["dpg_t2i", "dreambooth"])
def test_train_and_resume_is_exact(tmp_path, algo):
    common = {
        "task": "lab/digits_personal",
        "algo": algo,
        "eval_every": 2,
        "progress": False,
        "knobs": KNOBS,
    }
    straight = policylab.train(**common, budget=10 * 8, run_dir=str(tmp_path / "a"))
    policylab.train(**common, budget=10 * 4, save_every=1, run_dir=str(tmp_path / "b"))
    resumed = policylab.train(**common, budget=10 * 8, run_dir=str(tmp_path / "b"), resume=True)
    values = [e["oracle/value"] for e in straight.evals]
    assert [e["oracle/value"] for e in resumed.evals] == values
    assert values[-1] != values[0]
