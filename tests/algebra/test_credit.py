"""Credit rules (agents spec §A0.5, §A3): the spec's hand cases (T-A0.3; LaMer T1 in both
forms, the reflect row), team mixing, options, and random turn tables against slow
reference loops that sum the formulas term by term."""

from __future__ import annotations

import random

import pytest
import torch
from algebra_testing import PROPERTY, close
from hypothesis import given
from hypothesis import strategies as st

from policylab.algebra.catalogue import credits
from policylab.algebra.credit import (
    CrossEpisodeOptions,
    DiscountedOptions,
    Turns,
    assign_credit,
    cross_episode_credit,
    team_mix,
)

F64 = torch.float64


def lamer_table(*, reflect: bool) -> Turns:
    """Spec §A3 tests: attempt 0 turns r = (0, 0), attempt 1 turns r = (0, 1), one
    trajectory; with `reflect`, a reflect row before attempt 1 (attempt 1, turn −1)."""
    rows = [(0, 0, 0.0, "act"), (0, 1, 0.0, "act"), (1, 0, 0.0, "act"), (1, 1, 1.0, "act")]
    if reflect:
        rows.insert(2, (1, -1, 0.0, "reflect"))
    return Turns(
        reward=torch.tensor([r for _, _, r, _ in rows], dtype=F64),
        traj=torch.zeros(len(rows), dtype=torch.long),
        attempt=torch.tensor([a for a, _, _, _ in rows]),
        turn=torch.tensor([t for _, t, _, _ in rows]),
        phase=[p for *_, p in rows],
    )


# ------------------------------------------------------------------ spec hand cases
def test_t_a0_3_discounted_return_within_the_attempt():
    # c_2 = 1, c_1 = 0 + 0.9·1 = 0.9, c_0 = 0 + 0.9·0.9 = 0.81
    turns = Turns(reward=torch.tensor([0.0, 0.0, 1.0], dtype=F64), traj=torch.zeros(3))
    close(assign_credit(turns, "discounted", gamma=0.9), [0.81, 0.9, 1.0], atol=1e-12)


def test_discounted_stops_at_attempt_and_trajectory_boundaries():
    # traj 0 attempt 0 r = (1, 2); traj 0 attempt 1 r = (4); traj 1 r = (8):
    # (1 + 0.5·2, 2), (4), (8) — nothing crosses an attempt or a trajectory
    turns = Turns(
        reward=torch.tensor([1.0, 2.0, 4.0, 8.0], dtype=F64),
        traj=torch.tensor([0, 0, 0, 1]),
        attempt=torch.tensor([0, 0, 1, 0]),
    )
    close(assign_credit(turns, "discounted", gamma=0.5), [2.0, 2.0, 4.0, 8.0], atol=1e-12)


def test_lamer_t1_paper_form():
    # g^(1) = (0 + 0.95·1, 1) = (0.95, 1); g^(0) = (0, 0);
    # G^(0)_t = g^(0)_t + 0.6·g^(1)_0 = 0.6·0.95 = 0.57 on both turns; G^(1) = g^(1)
    c = assign_credit(lamer_table(reflect=False), "cross_episode", gamma_traj=0.6, form="paper")
    close(c, [0.57, 0.57, 0.95, 1.0], atol=1e-12)


def test_lamer_t1_code_form():
    # backwards: 1; 0 + 0.95·1 = 0.95; boundary 0 + 0.6·0.95 = 0.57; 0 + 0.95·0.57 = 0.5415
    c = assign_credit(lamer_table(reflect=False), "cross_episode", gamma_traj=0.6, form="code")
    close(c, [0.5415, 0.57, 0.95, 1.0], atol=1e-12)


def test_lamer_t1_reflect_row_gets_the_next_attempts_first_return():
    # the reflect row (index 2) sits between the attempts: code 0.95 (the running return
    # at its position), and our paper-form choice gives the same G^(1)_0 = 0.95
    code = assign_credit(lamer_table(reflect=True), "cross_episode", gamma_traj=0.6)
    close(code, [0.5415, 0.57, 0.95, 0.95, 1.0], atol=1e-12)
    paper = assign_credit(lamer_table(reflect=True), "cross_episode", form="paper")
    close(paper, [0.57, 0.57, 0.95, 0.95, 1.0], atol=1e-12)


def test_lamer_t1_sokoban_gamma_traj():
    # γ_traj 0.9: 0.9·0.95 = 0.855, 0.95·0.855 = 0.81225
    c = assign_credit(lamer_table(reflect=False), "cross_episode", gamma_traj=0.9)
    close(c, [0.81225, 0.855, 0.95, 1.0], atol=1e-12)


def test_paper_and_code_forms_differ_over_three_attempts():
    # attempt 0 r = (0, 0), attempt 1 r = (0), attempt 2 r = (1); γ_step 0.95, γ_traj 0.6.
    # paper: G^(0) = 0 + 0.6·0 + 0.36·1 = 0.36 on both turns, G^(1) = 0.6, G^(2) = 1.
    # code: 1; 0.6·1 = 0.6; 0.6·0.6 = 0.36; 0.95·0.36 = 0.342.
    turns = Turns(
        reward=torch.tensor([0.0, 0.0, 0.0, 1.0], dtype=F64),
        traj=torch.zeros(4),
        attempt=torch.tensor([0, 0, 1, 2]),
        turn=torch.tensor([0, 1, 0, 0]),
    )
    close(assign_credit(turns, "cross_episode", form="paper"), [0.36, 0.36, 0.6, 1.0], atol=1e-12)
    close(assign_credit(turns, "cross_episode", form="code"), [0.342, 0.36, 0.6, 1.0], atol=1e-12)


def test_reflect_row_labelled_at_the_end_of_the_failed_attempt():
    # the same reflect row labelled (attempt 0, turn 2) instead of (attempt 1, turn −1)
    t = lamer_table(reflect=True)
    t = Turns(
        reward=t.reward,
        traj=t.traj,
        attempt=torch.tensor([0, 0, 0, 1, 1]),
        turn=torch.tensor([0, 1, 2, 0, 1]),
        phase=torch.tensor([False, False, True, False, False]),
    )
    close(cross_episode_credit(t, CrossEpisodeOptions()), [0.5415, 0.57, 0.95, 0.95, 1.0])


def test_immediate_outcome_and_team_mix():
    # two trajectories: r = (1, −1 | 0.5); team R = (2, 2 | 0)
    turns = Turns(
        reward=torch.tensor([1.0, -1.0, 0.5], dtype=F64),
        traj=torch.tensor([0, 0, 1]),
        team=torch.tensor([2.0, 2.0, 0.0], dtype=F64),
    )
    close(assign_credit(turns, "immediate"), [1.0, -1.0, 0.5], atol=0.0)
    close(assign_credit(turns, "outcome"), [0.0, 0.0, 0.5], atol=0.0)  # Σ r per trajectory
    given = Turns(reward=turns.reward, traj=turns.traj, outcome=torch.tensor([1.0, 1.0, 0.0]))
    close(assign_credit(given, "outcome"), [1.0, 1.0, 0.0], atol=0.0)
    # α = 0.5: c + 0.5·R_team = (2, 0, 0.5)
    close(assign_credit(turns, "immediate", team_coef=0.5), [2.0, 0.0, 0.5], atol=0.0)
    close(team_mix(torch.tensor([1.0]), torch.tensor([4.0]), 0.25), [2.0], atol=0.0)
    # the team term is added to the credit once, not discounted: (1 + 0.5·(−1)) + 2
    close(assign_credit(turns, "discounted", gamma=0.5, team_coef=1.0)[0], 2.5, atol=1e-12)


def test_errors_name_the_field():
    turns = Turns(reward=torch.zeros(2), traj=torch.zeros(2))
    with pytest.raises(ValueError, match="Turns.team"):
        assign_credit(turns, "immediate", team_coef=1.0)
    with pytest.raises(ValueError, match="form"):
        CrossEpisodeOptions(form="both")
    with pytest.raises(ValueError, match="gamma"):
        DiscountedOptions(gamma=1.5)
    with pytest.raises(ValueError, match="valid options"):
        assign_credit(turns, "discounted", lam=0.9)
    with pytest.raises(ValueError, match="traj"):
        Turns(reward=torch.zeros(2), traj=torch.zeros(3))
    with pytest.raises(ValueError, match="phase"):
        Turns(reward=torch.zeros(2), traj=torch.zeros(2), phase=["act"])
    with pytest.raises(KeyError, match="cross_episode"):
        assign_credit(turns, "nope")


def test_registry_names_and_options():
    assert credits.names() == ["cross_episode", "discounted", "final", "immediate", "outcome"]
    assert credits.entry("cross_episode").config is CrossEpisodeOptions
    assert CrossEpisodeOptions() == CrossEpisodeOptions(0.0, 0.95, 0.6, "code")


# ------------------------------------------------------------------------ properties
@st.composite
def turn_tables(draw):
    """Random trajectories with attempts, play turns and reflect rows, listed in their
    natural order (the reference's) and then shuffled (the rules')."""
    rng = random.Random(draw(st.integers(0, 2**31 - 1)))
    rows = []  # (traj, attempt, turn, reflect, r)
    for traj in range(draw(st.integers(1, 3))):
        for attempt in range(draw(st.integers(1, 3))):
            if attempt > 0 and draw(st.booleans()):
                rows.append((traj, attempt, -1, True, 0.0))
            for turn in range(draw(st.integers(1, 3))):
                rows.append((traj, attempt, turn, False, round(rng.uniform(-1, 1), 3)))
    perm = list(range(len(rows)))
    rng.shuffle(perm)
    return rows, perm


def as_turns(rows, perm) -> Turns:
    picked = [rows[p] for p in perm]
    return Turns(
        reward=torch.tensor([r[4] for r in picked], dtype=F64),
        traj=torch.tensor([r[0] for r in picked]),
        attempt=torch.tensor([r[1] for r in picked]),
        turn=torch.tensor([r[2] for r in picked]),
        phase=["reflect" if r[3] else "act" for r in picked],
    )


def reference(rows, rule, gamma_step=0.95, gamma_traj=0.6):
    """Credits in natural row order, each a direct sum of the spec's formula."""
    out = []
    for i, (tau, n, _, reflect, _) in enumerate(rows):
        play = [j for j, row in enumerate(rows) if row[0] == tau and not row[3]]
        if rule == "discounted":  # every row of the attempt is a turn, reflect rows too
            same = [j for j, row in enumerate(rows) if row[:2] == (tau, n) and j >= i]
            out.append(sum(gamma_step**k * rows[j][4] for k, j in enumerate(same)))
            continue
        if reflect:  # the credit of the next play row of the trajectory
            after = [j for j in play if j > i]
            out.append(out_of(rows, after[0], rule, gamma_step, gamma_traj) if after else 0.0)
        else:
            out.append(out_of(rows, i, rule, gamma_step, gamma_traj))
    return out


def out_of(rows, i, rule, gamma_step, gamma_traj):
    tau, n = rows[i][0], rows[i][1]
    play = [j for j, row in enumerate(rows) if row[0] == tau and not row[3]]
    later = [j for j in play if j >= i]
    if rule == "code":  # Σ_q r_q·Π of the γ between consecutive play turns
        total, factor = 0.0, 1.0
        for k, j in enumerate(later):
            if k > 0:
                factor *= gamma_step if rows[j][1] == rows[later[k - 1]][1] else gamma_traj
            total += factor * rows[j][4]
        return total

    def g(first, attempt):  # Σ_{l≥t} γ_step^{l−t} r_l within the attempt
        seq = [j for j in play if rows[j][1] == attempt and j >= first]
        return sum(gamma_step**k * rows[j][4] for k, j in enumerate(seq))

    attempts = sorted({rows[j][1] for j in play if rows[j][1] > n})
    starts = {m: min(j for j in play if rows[j][1] == m) for m in attempts}
    return g(i, n) + sum(gamma_traj ** (m - n) * g(starts[m], m) for m in attempts)


@PROPERTY
@given(table=turn_tables())
def test_rules_match_slow_references_in_any_row_order(table):
    rows, perm = table
    turns = as_turns(rows, perm)
    back = torch.empty(len(perm), dtype=torch.long)
    back[torch.tensor(perm)] = torch.arange(len(perm))  # natural row k sits at back[k]
    for rule, kwargs in (
        ("code", {"form": "code"}),
        ("paper", {"form": "paper"}),
    ):
        got = assign_credit(turns, "cross_episode", **kwargs)[back]
        close(got, reference(rows, rule), atol=1e-12)
    got = assign_credit(turns, "discounted", gamma=0.95)[back]
    close(got, reference(rows, "discounted"), atol=1e-12)
    close(assign_credit(turns, "immediate")[back], [r[4] for r in rows], atol=0.0)
    sums = {t: sum(r[4] for r in rows if r[0] == t) for t in {r[0] for r in rows}}
    close(assign_credit(turns, "outcome")[back], [sums[r[0]] for r in rows], atol=1e-12)


@PROPERTY
@given(table=turn_tables())
def test_forms_agree_when_both_gammas_are_one(table):
    # γ_step = γ_traj = 1: both forms are the undiscounted sum of the rest of the trial
    rows, perm = table
    turns = as_turns(rows, perm)
    paper = assign_credit(turns, "cross_episode", gamma_step=1.0, gamma_traj=1.0, form="paper")
    code = assign_credit(turns, "cross_episode", gamma_step=1.0, gamma_traj=1.0, form="code")
    close(paper, code, atol=1e-12)


def test_final_credit_puts_the_outcome_on_the_last_turn_only():
    from policylab.algebra.credit import Turns, assign_credit

    turns = Turns(
        reward=torch.tensor([0.5, 1.0, 0.0, 0.2, 0.3]),
        traj=torch.tensor([0, 0, 0, 1, 1]),
        turn=torch.tensor([0, 1, 2, 0, 1]),
        outcome=torch.tensor([1.0, 1.0, 1.0, 0.0, 0.0]),
    )
    assert assign_credit(turns, "final").tolist() == [0.0, 0.0, 1.0, 0.0, 0.0]
    shuffled = Turns(
        reward=turns.reward[[2, 0, 4, 1, 3]],
        traj=turns.traj[[2, 0, 4, 1, 3]],
        turn=turns.turn[[2, 0, 4, 1, 3]],
        outcome=turns.outcome[[2, 0, 4, 1, 3]],
    )
    assert assign_credit(shuffled, "final").tolist() == [1.0, 0.0, 0.0, 0.0, 0.0]
