"""ac_flow_provisional (papers/seed_generative.md G3): the weights by hand beyond F1/F2
(which live in tests/algebra/test_generative.py), the shaping, the ORW special case one
step against `orw_cfm_w2` weight for weight, the warm-up switch, option errors, exact
resume (critic and its optimiser included), a conditional task, and the CLI on lab/ring."""

from __future__ import annotations

import math

import pytest
import torch

import policylab
from policylab.algebra import generative as gen
from policylab.lab.ac_flow import ACFlowOptions, shaped_rewards
from policylab.lab.catalogue import build, lab_methods
from policylab.lab.generator_task import GeneratorTask
from policylab.policies.diffusion import DiffusionPolicy
from policylab.tabular.methods import Problem

KNOBS = {"base_steps": 300, "eval_samples": 256}  # a rough base model, built in < 1 s
NAME = "ac_flow_provisional"
D = torch.float64


def t(*values):
    return torch.tensor(values, dtype=D)


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("POLICYLAB_CACHE", str(tmp_path / "cache"))


# ---- the pieces by hand -----------------------------------------------------------------------
def test_weight_functions_and_clip_by_hand():
    # F2's R̃ = [1, 0, −1], V = [0.5, 0.2, −1.5] → A = [0.5, −0.2, 0.5]; β·A = [0.25, −0.1, 0.25]
    shaped, values = t(1, 0, -1), t(0.5, 0.2, -1.5)
    soft = gen.ac_flow_weights(shaped, values, clip=2.0, beta=0.5, f="softplus")
    # softplus(0.25) = ln(1 + e^0.25) = 0.8259394, softplus(−0.1) = 0.6443967
    assert torch.allclose(soft.double(), t(0.8259394, 0.6443967, 0.8259394), atol=1e-6)
    relu1 = gen.ac_flow_weights(shaped, values, clip=2.0, beta=0.5, f="relu1")
    assert relu1.tolist() == [1.25, 1.0, 1.25]  # relu(β·A) + 1
    # c_A = 0.3 clips A to [0.3, −0.2, 0.3]: w = [e^0.15, e^−0.1, e^0.15]
    clipped = gen.ac_flow_weights(shaped, values, clip=0.3, beta=0.5)
    assert torch.allclose(clipped.double(), t(1.1618342, 0.9048374, 1.1618342), atol=1e-6)
    # no clip: a large gap passes whole (e^{0.5·100} = e^50, finite in float32)
    big = gen.ac_flow_weights(t(100.0), t(0.0), clip=math.inf, beta=0.5)
    assert big.dtype == torch.float32 and big.item() == pytest.approx(math.exp(50), rel=1e-6)


def test_shaping_by_group_by_batch_and_flat_groups():
    ids = torch.tensor([0, 0, 0])
    # F2: R = [1, 0, −1]: mean 0, Bessel std 1 → R̃ = R
    assert shaped_rewards(t(1, 0, -1), ids, "group").tolist() == [1.0, 0.0, -1.0]
    two = torch.tensor([0, 0, 1, 1])
    # groups [1, 0] and [3, 2]: each centred ±0.5, Bessel std √0.5 → ±0.7071068
    g = shaped_rewards(t(1, 0, 3, 2), two, "group")
    assert torch.allclose(g, t(1, -1, 1, -1) / 2**0.5, atol=1e-12)
    # the batch: mean 1.5, Bessel std √(5/3) = 1.2909944
    b = shaped_rewards(t(1, 0, 3, 2), two, "batch")
    assert torch.allclose(b, t(-0.3872983, -1.1618950, 1.1618950, 0.3872983), atol=1e-7)
    # std = 0 → R̃ = 0 (a flat group carries no signal), the other group unchanged
    flat = shaped_rewards(t(0.4, 0.4, 3, 2), two, "group")
    assert flat[:2].tolist() == [0.0, 0.0] and flat[2].item() == pytest.approx(2**-0.5)
    assert shaped_rewards(t(0.2, 0.7), torch.tensor([0, 0]), "none").tolist() == [0.2, 0.7]


# ---- the method on lab/ring ---------------------------------------------------------------------
def _run(algo, overrides, steps, problem=None):
    problem = problem or build("lab/ring", 0, **KNOBS)
    method = lab_methods.get(algo)
    options = method.build_options(overrides)
    g = torch.Generator().manual_seed(0)
    state = method.init(problem, options, g)
    rows = []
    for _ in range(steps):
        state, metrics = method.step(problem, state, options, g)
        rows.append(metrics)
    return state, rows


ORW_CASE = {"shaping": "none", "clip": math.inf, "critic_lr": 0.0}


@pytest.mark.parametrize("warmup", [0, 5], ids=["critic-weights", "warm-up-weights"])
def test_special_case_equals_orw_cfm_w2_weight_for_weight(warmup):
    """V ≡ 0 (zero head, critic_lr 0), no clip, R̃ := R: w = exp(β·R), ORW's (G3.3); in
    the warm-up ORW's weights are used by construction. Same samples, same update."""
    orw, orw_rows = _run("orw_cfm_w2", {}, 2)
    acf, acf_rows = _run(NAME, {**ORW_CASE, "warmup": warmup}, 2)
    for a, b in zip(orw["policy"].trainable(), acf["policy"].trainable(), strict=True):
        assert torch.equal(a, b)
    assert [r["orw/w_mean"] for r in orw_rows] == [r["acflow/w_mean"] for r in acf_rows]
    assert [r["loss"] for r in orw_rows] == [r["loss"] for r in acf_rows]


def test_warmup_switches_the_weights_and_the_critic_trains_throughout():
    state, rows = _run(NAME, {"warmup": 2}, 4)
    assert [r["acflow/warmup"] for r in rows] == [1.0, 1.0, 0.0, 0.0]
    assert all(r["critic/loss"] > 0 for r in rows)
    assert any(p.abs().sum() > 0 for p in state["critic"].net[-1].parameters())  # V moved
    # in the warm-up the mean weight is ORW's on R̃: w = exp(β·R̃), β = 0.5
    problem = build("lab/ring", 0, **KNOBS)
    _, first = _run(NAME, {"warmup": 2, "critic_lr": 0.0}, 1, problem)
    _, same = _run(NAME, {"warmup": 0, "critic_lr": 0.0, "clip": math.inf}, 1, problem)
    assert first[0]["acflow/w_mean"] == pytest.approx(same[0]["acflow/w_mean"], rel=1e-6)


@pytest.mark.parametrize(
    "overrides", [{}, {"weight": "softplus"}, {"weight": "relu1"}, {"clip": "inf", "warmup": 0}]
)
def test_one_step_moves_every_weight_and_logs_the_metrics(overrides):
    state, (metrics,) = _run(NAME, overrides, 1)
    base = build("lab/ring", 0, **KNOBS).mdp
    for b, p in zip(base.trainable(), state["policy"].trainable(), strict=True):
        assert not torch.equal(b, p)
    for r, b in zip(state["policy"].reference.parameters(), base.trainable(), strict=True):
        assert torch.equal(r, b)  # the frozen reference did not move
    assert metrics["cost"] == 128
    for key in ("reward/mean", "div/mode_entropy", "ref/drift", "critic/loss", "critic/ev"):
        assert key in metrics


def test_options_are_checked_with_clear_errors():
    assert ACFlowOptions(clip="inf").clip == math.inf  # `clip: inf` in a config
    assert ACFlowOptions(clip=None).clip == math.inf
    assert ACFlowOptions(clip=math.inf, warmup=0).warmup == 0
    cases = [
        ({"clip": 0.0}, "ac_flow_provisional.clip = 0.0; it must be > 0"),
        ({"clip": float("nan")}, "clip = nan"),
        ({"weight": "tanh"}, "weight = 'tanh' is not valid; choices: 'exp', 'softplus'"),
        ({"shaping": "rank"}, "shaping = 'rank' is not valid"),
        ({"group_size": 1}, "group_size = 1 with shaping = 'group'"),
        ({"warmup": -1}, "warmup = -1; it must be a whole number >= 0"),
        ({"warmup": 2.5}, "warmup = 2.5"),
        ({"beta": 0.0}, "beta = 0.0 is out of range"),
        ({"critic_lr": -1e-3}, "critic_lr = -0.001 is out of range"),
        ({"alpha": -1.0}, "alpha = -1.0 is out of range"),
    ]
    for overrides, message in cases:
        with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(".", r"\.")):
            lab_methods.get(NAME).build_options(overrides)
    assert ACFlowOptions(group_size=1, shaping="batch").group_size == 1
    with pytest.raises(ValueError, match="unknown option.*critic_lrr"):
        lab_methods.get(NAME).build_options({"critic_lrr": 1e-3})


def test_resume_is_exact_with_the_critic_and_its_optimiser():
    """N steps straight = k steps, checkpoint, restore, N − k steps (policy, critic, metrics)."""
    method = lab_methods.get(NAME)
    problem = build("lab/ring", 0, **KNOBS)
    options = method.build_options({"warmup": 2})
    g = torch.Generator().manual_seed(3)
    straight = method.init(problem, options, g)
    rows = []
    for _ in range(5):
        straight, m = method.step(problem, straight, options, g)
        rows.append(m)
    g = torch.Generator().manual_seed(3)
    part = method.init(problem, options, g)
    for _ in range(3):
        part, _ = method.step(problem, part, options, g)
    saved, g_state = method.checkpoint(part), g.get_state()
    del part
    resumed = method.restore(problem, options, saved)
    g = torch.Generator().manual_seed(99)
    g.set_state(g_state)
    tail = []
    for _ in range(2):
        resumed, m = method.step(problem, resumed, options, g)
        tail.append(m)
    assert tail == rows[3:]
    for key in ("policy", "critic"):
        for a, b in zip(straight[key].parameters(), resumed[key].parameters(), strict=True):
            assert torch.equal(a, b)


def test_train_and_resume_through_policylab_train(tmp_path):
    common = {"task": "lab/ring", "algo": NAME, "eval_every": 2, "progress": False}
    common |= {"knobs": KNOBS, "options": {"warmup": 3}}
    straight = policylab.train(**common, budget=128 * 6, run_dir=str(tmp_path / "a"))
    policylab.train(**common, budget=128 * 4, save_every=1, run_dir=str(tmp_path / "b"))
    resumed = policylab.train(**common, budget=128 * 6, run_dir=str(tmp_path / "b"), resume=True)
    values = [e["oracle/value"] for e in straight.evals]
    assert [e["oracle/value"] for e in resumed.evals] == values
    assert values[-1] != values[0]


def test_the_cli_trains_it_on_lab_ring(tmp_path):
    from policylab.cli import main

    run_dir = tmp_path / "run"
    argv = ["train", "--task", "lab/ring", "--algo", NAME, "budget=256", "progress=false"]
    argv += [f"run_dir={run_dir}", 'knobs={"base_steps": 300, "eval_samples": 256}']
    # a config refuses a float inf: `clip: inf` arrives as the string "inf", read as no clip
    assert main(argv + ["options={clip: inf, warmup: 0}"]) == 0
    assert (run_dir / "metrics.jsonl").is_file()
    assert "acflow/w_mean" in (run_dir / "metrics.jsonl").read_text()


def test_a_conditional_task_gives_the_critic_its_condition():
    """Through GeneratorTask alone: 3 one-hot conditions, reward −‖x − c₀₁‖²."""
    torch.manual_seed(0)
    base = DiffusionPolicy(2, cond_dim=3, hidden=(16,), steps=4)
    base.freeze_reference()

    def conditions(n, g):
        return torch.nn.functional.one_hot(torch.randint(3, (n,), generator=g), 3).float()

    def reward(x, c):
        return -((x - c[:, :2]) ** 2).sum(-1)

    task = GeneratorTask(dim=2, reward=reward, batch_metrics=lambda x, c: {}, conditions=conditions)
    problem = Problem(
        mdp=base, value=lambda p: 0.0, optimum=1.0, initial_policy=base,
        extras={"generator": task},
    )  # fmt: skip
    state, (metrics,) = _run(NAME, {"groups": 4, "group_size": 4, "warmup": 0}, 1, problem)
    assert state["critic"].cond_dim == 3 and metrics["cost"] == 16
    assert metrics["critic/loss"] > 0
