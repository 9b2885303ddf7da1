"""The Lyapunov task (papers/seed_control_theory.md §6): the prefix parser, the reward
(T6.2), the success test, failures counted, the exact quadratic check (T6.3), the weaker
grid check, the task API and a 2-step run of risk_seeking_pg on the tiny model."""

import random

import pytest
import torch

import policylab.tasks as tasks
from policylab.models import build_tokenizer
from policylab.tasks.lyapunov import (
    SYSTEMS,
    candidate_values,
    random_expression,
    reward_from_values,
    success_from_values,
)
from policylab.tasks.lyapunov_verify import (
    grid_check,
    quadratic_certificate,
    solve_lyapunov,
    verify,
)
from policylab.tasks.symbolic import ExpressionError, parse, try_parse, value_and_lie_derivative

PENDULUM = SYSTEMS["pendulum"]
X = torch.tensor([[1.0, 0.0], [0.0, 1.0], [-1.0, 2.0]], dtype=torch.float64)


# ---- parser ---------------------------------------------------------------------------------
def test_parse_round_trips_and_reads_variables():
    tree = parse("+^1 s*23", 3)
    assert tree.prefix() == "+^1s*23"
    assert tree.variables() == {1, 2, 3}


@pytest.mark.parametrize(
    ("text", "n_vars", "message"),
    [
        ("", 2, "empty"),
        ("+1", 2, "token 0 \\(add\\) lacks operands"),
        ("12", 2, "1 complete expression\\(s\\) left over"),
        ("+13", 2, "token 2 is '3'.*variables 12"),
        ("x1", 2, "token 0 is 'x'"),
        ("__import__", 2, "token 0 is '_'"),
        ("^" * 40 + "1", 2, "41 tokens; at most 32"),
    ],
)
def test_parse_errors_name_the_position(text, n_vars, message):
    with pytest.raises(ExpressionError, match=message):
        parse(text, n_vars)
    assert try_parse(text, n_vars) is None


# ---- reward (T6.2) ----------------------------------------------------------------------------
def test_t6_2_energy_reward_from_values():
    # V = 1 − cos x₁ + ½x₂²: ΔV = [0.459698, 0.5, 2.459698], V̇ = −0.1x₂² = [0, −0.1, −0.4]
    # relu(0.05 − ΔV) = 0; relu(V̇ + 0.2) = [0.2, 0.1, 0], mean 0.1 → R = 1/1.1
    def energy(x):
        return 1 - torch.cos(x[:, 0]) + 0.5 * x[:, 1] ** 2

    value, lie = value_and_lie_derivative(energy, PENDULUM.f, X)
    assert value.tolist() == pytest.approx([0.459698, 0.5, 2.459698], abs=1e-6)
    assert lie.tolist() == pytest.approx([0.0, -0.1, -0.4], abs=1e-12)
    assert reward_from_values(value, lie) == pytest.approx(0.909091, abs=1e-6)


def test_t6_2_sum_of_squares_reward_through_the_parser():
    # V = x₁² + x₂²: ΔV = [1, 1, 5]; V̇ = 2x₁x₂ + 2x₂(−sin x₁ − 0.1x₂) = [0, −0.2, −1.434116]
    # relu(V̇ + 0.2) = [0.2, 0, 0], mean 1/15 → R = 15/16 = 0.9375
    delta_v, lie = candidate_values(parse("+^1^2", 2), PENDULUM, X)
    assert delta_v.tolist() == [1.0, 1.0, 5.0]
    assert lie.tolist() == pytest.approx([0.0, -0.2, -1.434116], abs=1e-6)
    assert reward_from_values(delta_v, lie) == pytest.approx(0.9375, abs=1e-12)


def test_success_test_accepts_energy_and_rejects_sum_of_squares():
    states = PENDULUM.sample(2000, seed=5)
    assert success_from_values(*candidate_values(parse("--^2c1c1", 2), PENDULUM, states))
    assert not success_from_values(*candidate_values(parse("+^1^2", 2), PENDULUM, states))


def test_zero_rewards_are_counted_by_reason():
    task = tasks.get("lyapunov", n_states=64)
    row = task.examples("train", 1)[0]
    assert task.verify("<answer>^2</answer>", row) == 0.0  # x₁ missing
    assert task.verify("<answer>+1</answer>", row) == 0.0  # does not parse
    assert task.verify("no answer", row) == 0.0
    overflow = "*" + "^" * 12 + "1" + "^" * 12 + "2"  # x^4096 overflows to inf
    assert task.verify(f"<answer>{overflow}</answer>", row) == 0.0
    assert dict(task.failures) == {"missing_variable": 1, "parse_error": 1, "nonfinite": 1}


# ---- verification (T6.3) ----------------------------------------------------------------------
def test_t6_3_identity_is_not_strict_and_the_lyapunov_solution_is():
    A = torch.tensor([[0.0, 1.0], [-1.0, -0.1]], dtype=torch.float64)
    strict, _, eig_lie = quadratic_certificate(A, torch.eye(2, dtype=torch.float64))
    assert not strict
    assert eig_lie.tolist() == pytest.approx([-0.2, 0.0], abs=1e-12)
    P = solve_lyapunov(A, torch.eye(2, dtype=torch.float64))
    assert P.flatten().tolist() == pytest.approx([10.05, 0.5, 0.5, 10.0], abs=1e-9)
    strict, eig_p, eig_lie = quadratic_certificate(A, P)
    assert strict
    assert eig_p.tolist() == pytest.approx([9.524375, 10.525625], abs=1e-6)
    assert eig_lie.tolist() == pytest.approx([-1.0, -1.0], abs=1e-9)


def test_quadratic_candidates_on_the_linear_system_get_the_exact_check():
    linear = SYSTEMS["linear3"]
    good = verify(parse("+^1+^2^3", 3), linear)
    assert (good.verified, good.method) == (True, "exact_quadratic")
    # x₁² + x₂² + (x₃ − x₁)²: P ≻ 0 but AᵀP + PA has a positive eigenvalue 0.341806
    bad = verify(parse("+^1+^2^-31", 3), linear)
    assert (bad.verified, bad.method) == (False, "exact_quadratic")


def test_other_candidates_get_the_weaker_grid_check():
    # the energy's V̇ = −0.2x₂² vanishes on x₂ = 0: not a strict Lyapunov function
    verdict = grid_check(parse("--^2c1c1", 2), PENDULUM, points_per_dim=41, radius=0.5)
    assert verdict.method == "grid_lipschitz" and not verdict.verified
    assert "V̇" in verdict.detail
    # 2-D: x₁² + x₂² for ẋ = (−x₁, −x₂) passes outside the ball
    quad = SYSTEMS["linear3"].__class__(
        "decay", 2, lambda x: -x, (-1.0, -1.0), (1.0, 1.0), "", "+^1^2"
    )
    assert grid_check(parse("+^1^2", 2), quad, points_per_dim=41, radius=0.2).verified


# ---- the task API ---------------------------------------------------------------------------
def test_registered_with_knobs_checked():
    assert "lyapunov" in tasks.names()
    with pytest.raises(ValueError, match="system='cartpole'.*pendulum, linear3, poly6"):
        tasks.get("lyapunov", system="cartpole")
    with pytest.raises(ValueError, match="n_states=0"):
        tasks.get("lyapunov", n_states=0)
    with pytest.raises(ValueError, match="no knob 'dim'"):
        tasks.get("lyapunov", dim=3)


@pytest.mark.parametrize("system", sorted(SYSTEMS))
def test_rows_and_the_canonical_answer(system):
    task = tasks.get("lyapunov", system=system, n_states=500)
    train = task.examples("train", 3, seed=0)
    test = task.examples("test", 3, seed=0)
    assert {r["prompt"] for r in train + test} == {SYSTEMS[system].prompt}
    assert {r["states_seed"] for r in train} == {0}  # the fixed training states
    assert len({r["states_seed"] for r in test}) == 3  # fresh states per held-out row
    assert test == task.examples("test", 3, seed=0) != task.examples("test", 3, seed=1)
    assert all(task.verify(r["completion"], r) == 1.0 for r in test)  # success test
    assert 0.9 < task.verify(train[0]["completion"], train[0]) <= 1.0
    rewards = task.reward(
        [r["prompt"] for r in train],
        ["<answer>+11</answer>"] * 3,
        **{c: [r[c] for r in train] for c in task.columns},
    )
    assert rewards == [0.0] * 3


@pytest.mark.parametrize("system", sorted(SYSTEMS))
def test_prompt_and_answer_fit_the_tiny_model(system):
    tokenizer = build_tokenizer()
    task = tasks.get("lyapunov", system=system)
    row = task.examples("train", 1)[0]
    # poly6's prompt (101 chars) leaves room for 16-token answers in a 128-token context
    text = row["prompt"] + "<answer>" + "^" * 15 + "1</answer>"
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    assert tokenizer.unk_token_id not in ids
    assert tokenizer.decode(ids) == text
    assert len(ids) <= 128  # the tiny model's context


def test_demonstrations_are_well_formed_and_never_the_answer():
    task = tasks.get("lyapunov", system="linear3")
    rows = task.demonstrations(200, seed=0)
    answers = [tasks.extract_answer(r["completion"]) for r in rows]
    assert all(try_parse(a, 3) is not None for a in answers)
    assert task.system.answer not in answers
    assert max(len(a) for a in answers) <= 12
    rng = random.Random(1)
    assert all(len(random_expression(rng, 2, max_tokens=5)) <= 5 for _ in range(200))


# ---- a run on the tiny model ----------------------------------------------------------------
@pytest.mark.slow
def test_two_steps_of_risk_seeking_pg_on_the_tiny_model(tmp_path):
    from policylab.config import TrainConfig, load
    from policylab.trainers.llm import train
    from policylab.trainers.run import read_metrics

    cfg = load(
        TrainConfig,
        None,
        {
            "task": "lyapunov",
            "task_knobs": {"n_states": 200},
            "algo": "risk_seeking_pg",
            "prompts_per_step": 1,
            "samples_per_prompt": 10,
            "max_new_tokens": 12,
            "eval_n": 2,
            "eval_every": 0,
            "save_every": 0,
            "progress": False,
            "steps": 2,
            "run_dir": str(tmp_path / "run"),
        },
    )
    train(cfg)
    rows = read_metrics(cfg.run_dir, kind="train")
    assert [r["step"] for r in rows] == [1, 2]
    # ε = 0.1 of 10 rows: the best row and its ties are kept
    assert all(0.1 <= r["rs/kept_frac"] <= 1 for r in rows)
