"""lab/digits and its models (papers/seed_generative.md G0.6–G0.8, G2.2 testbed (b)): tiny
classifiers beat chance, label noise lowers the flow's class accuracy, the cache rebuilds an
unreadable file, the task's knobs are checked before any work, the three continuous-generator
methods learn on it and a run resumes exactly."""

from __future__ import annotations

import builtins

import pytest
import torch

import policylab
from policylab.lab import digits_models as dm
from policylab.lab.catalogue import build, lab_methods
from policylab.lab.digits_data import load_digits_split

# tiny models: built in seconds
KNOBS = {"base_steps": 200, "classifier_steps": 200, "eval_samples": 100}
METHODS = ("dgpo", "orw_cfm_w2", "flow_grpo_sde")


@pytest.fixture(scope="module", autouse=True)
def _module_cache(tmp_path_factory):
    """One cache folder for the module: the tiny models are built once."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("POLICYLAB_CACHE", str(tmp_path_factory.mktemp("cache")))
        dm._classifier.cache_clear()  # in-memory copies of another cache folder
        yield
        dm._classifier.cache_clear()


@pytest.fixture
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("POLICYLAB_CACHE", str(tmp_path / "cache"))
    dm._classifier.cache_clear()
    yield tmp_path / "cache"
    dm._classifier.cache_clear()


def test_tiny_classifiers_beat_chance_and_differ():
    data = load_digits_split()
    a, b = dm.classifier_a(0, steps=200), dm.classifier_b(0, steps=200)
    assert dm.accuracy(a, data.x_test, data.y_test) > 0.8  # chance 0.1
    assert dm.accuracy(b, data.x_test, data.y_test) > 0.5
    assert sum(p.numel() for p in a.parameters()) == 9610  # 64·128 + 128 + 128·10 + 10
    assert a.features(data.x_test[:3]).shape == (3, 128)
    assert not any(p.requires_grad for p in a.parameters())


def test_label_noise_lowers_the_flows_class_accuracy():
    """A clean-label flow follows its label; with every label replaced at random the label
    carries no information and p_A(c|x) falls towards 1/10 (G0.7)."""
    clf = dm.classifier_a(0, steps=200)
    labels = torch.arange(300) % 10
    noise = torch.randn(300, 64, generator=torch.Generator().manual_seed(3))
    acc = {}
    for label_noise in (0.0, 0.5):
        flow = dm.base_digits_flow(0, steps=200, label_noise=label_noise)
        x = flow.sample("ode_euler", 300, x_noise=noise, cond=dm.one_hot(labels)).sample
        acc[label_noise] = dm.accuracy(clf, x.clamp(-1, 1), labels)
    assert acc[0.0] > acc[0.5] + 0.1


def test_an_unreadable_cache_is_rebuilt(own_cache):
    first = dm.base_digits_flow(0, steps=5)
    clf = dm.classifier_a(0, steps=5)
    files = sorted(own_cache.glob("digits_*.pt"))
    assert [f.name.split("_")[1] for f in files] == ["flow", "mlp"]
    for f in files:
        f.write_bytes(b"torn")
    dm._classifier.cache_clear()
    again, clf2 = dm.base_digits_flow(0, steps=5), dm.classifier_a(0, steps=5)
    for x, y in zip(first.trainable(), again.trainable(), strict=True):
        assert torch.equal(x, y)
    for x, y in zip(clf.parameters(), clf2.parameters(), strict=True):
        assert torch.equal(x, y)
    # and the rebuilt files are readable again
    assert all(f.stat().st_size > 100 for f in files)


@pytest.mark.parametrize(
    ("knob", "value", "message"),
    [
        ("base_steps", 0, "lab/digits knob base_steps = 0"),
        ("classifier_steps", 1.5, "lab/digits knob classifier_steps = 1.5"),
        ("eval_samples", 0, "lab/digits knob eval_samples = 0"),
        ("label_noise", 1.5, r"lab/digits.label_noise = 1.5 is out of range"),
        ("base_seed", -1, r"lab/digits.base_seed = -1 is out of range"),
    ],
)
def test_bad_knobs_are_refused_before_any_work(own_cache, knob, value, message):
    with pytest.raises(ValueError, match=message):
        build("lab/digits", 0, **{**KNOBS, knob: value})
    assert not own_cache.exists()  # nothing was built


def test_the_missing_scikit_learn_names_the_extra(monkeypatch):
    real_import = builtins.__import__

    def no_sklearn(name, *args, **kwargs):
        if name.startswith("sklearn"):
            raise ImportError("No module named 'sklearn'")
        return real_import(name, *args, **kwargs)

    load_digits_split.cache_clear()
    monkeypatch.setattr(builtins, "__import__", no_sklearn)
    try:
        with pytest.raises(ImportError, match=r"pip install 'policylab\[generative\]'"):
            load_digits_split()
    finally:
        monkeypatch.undo()
        load_digits_split.cache_clear()


def test_the_task_draws_one_label_per_group_and_reports_both_classifiers():
    problem = build("lab/digits", 0, **KNOBS)
    task = problem.extras["generator"]
    cond = task.group_conditions(3, 4, torch.Generator().manual_seed(0))
    assert cond.shape == (12, 10) and torch.equal(cond.sum(-1), torch.ones(12))
    assert torch.equal(cond[0], cond[3]) and cond.argmax(-1).unique().numel() <= 3
    assert problem.optimum == 1.0 and 0.0 < problem.initial < 1.0
    assert sum(p.numel() for p in problem.mdp.trainable()) == 169_536  # G0.7
    m = problem.extras["metrics"](problem.mdp)
    assert m["reward/mean"] == pytest.approx(problem.initial, abs=1e-6)
    assert m["reward/gap"] == pytest.approx(m["reward/mean"] - m["reward/heldout"], abs=1e-9)
    assert m["div/pair_dist"] > 0 and m["fid/nn_dist"] > 0
    assert 0 < task.differentiable_reward(problem.extras["eval_noise"][:4], cond[:4]).sum()


@pytest.mark.parametrize("algo", METHODS)
def test_one_step_moves_every_weight(algo):
    problem = build("lab/digits", 0, **KNOBS)
    method = lab_methods.get(algo)
    options = method.build_options({})
    g = torch.Generator().manual_seed(0)
    state = method.init(problem, options, g)
    before = [p.detach().clone() for p in state["policy"].trainable()]
    state, metrics = method.step(problem, state, options, g)
    for b, p in zip(before, state["policy"].trainable(), strict=True):
        assert not torch.equal(b, p)
    assert metrics["cost"] == 128
    for key in ("reward/mean", "reward/heldout", "div/pair_dist", "fid/nn_dist", "ref/drift"):
        assert torch.isfinite(torch.tensor(metrics[key]))


def test_train_and_resume_is_exact(tmp_path):
    common = {
        "task": "lab/digits",
        "algo": "dgpo",
        "eval_every": 2,
        "progress": False,
        "knobs": KNOBS,
    }
    straight = policylab.train(**common, budget=128 * 6, run_dir=str(tmp_path / "a"))
    policylab.train(**common, budget=128 * 4, save_every=1, run_dir=str(tmp_path / "b"))
    resumed = policylab.train(**common, budget=128 * 6, run_dir=str(tmp_path / "b"), resume=True)
    values = [e["oracle/value"] for e in straight.evals]
    assert [e["oracle/value"] for e in resumed.evals] == values
    assert values[-1] != values[0]


def test_arena_spec_accepts_the_digits():
    from policylab.arena.runner import make_spec

    spec = make_spec(
        "lab/digits",
        "dgpo,orw_cfm_w2,flow_grpo_sde",
        seeds=5,
        budget=38400,
        overrides={"knobs": KNOBS},
    )
    assert spec.budget_unit == "generated samples"


def test_the_flow_cache_file_does_not_depend_on_how_label_noise_is_spelled():
    """`policylab pretrain digits_flow label_noise=0` (an int from the command line) must
    fill the file `lab/digits` (which passes float(label_noise)) reads."""
    from policylab.lab.digits_models import digits_flow_path

    assert digits_flow_path(0, 10, 0) == digits_flow_path(0, 10, 0.0)
    assert digits_flow_path(0, 10, 1) == digits_flow_path(0, 10, 1.0)
    assert digits_flow_path(0, 10, 0.5) != digits_flow_path(0, 10, 0.25)


def test_the_generator_tasks_share_one_evaluation_sampler_and_problem_builder():
    """One home (lab/generator_task.py) for the fixed-noise ODE evaluation sampler and the
    Problem every continuous-generator task returns."""
    from policylab.lab import digits, dpg_t2i, generator_task, ring

    for module in (ring, digits, dpg_t2i):
        assert module.ode_samples is generator_task.ode_samples
    for module in (ring, digits):
        assert module.generator_problem is generator_task.generator_problem
