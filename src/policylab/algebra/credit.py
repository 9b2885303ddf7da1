"""Credit rules: per-turn rewards r → per-turn credit c (spec papers/seed_agents.md §A0.5).

`fn(turns: Turns, cfg) -> c [R]`, one value per row of the turn table. The workflow turns
the credit into the row reward (`pack_turns`) or places it at a turn's last generated
token (`pack_trajectories`, algebra/steptool.py); the advantage estimator then compares
rows. Every rule takes `team_coef` (AT-GRPO's team mixing, `team_mix`).

Order inside a trajectory: rows sorted by (attempt, turn); at equal (attempt, turn) a
reflect row comes first, then the table's own order [ours]. So a reflect turn before
attempt n may be labelled (attempt n, turn −1 or 0) or (attempt n−1, a turn after the
last play turn): either way it sits between the two attempts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from policylab.algebra.options import build_options, check_choice, check_range, option
from policylab.registry import Registry

credits: Registry = Registry("credit rule")

REFLECT = "reflect"  # the phase of LaMer's and Retroformer's reflection turns


@dataclass
class Turns:
    """The turn table: R turns, every column [R].

    reward: r [R] float, the turn's own reward (0 for a reflect turn). traj: trajectory id
    [R] (any integers; equal ids = one play of an instance). attempt: attempt n [R]
    (default 0). turn: order within the attempt, increasing [R] (default: table order).
    phase: one string per turn ("act", "play", "reflect", "judge") or a bool tensor
    is_reflect [R]; only "reflect" changes a rule (`cross_episode`). outcome: R(τ) [R], the
    trajectory outcome repeated on its rows (`outcome`). team: R_team [R] (`team_coef`)."""

    reward: torch.Tensor
    traj: torch.Tensor
    attempt: torch.Tensor | None = None
    turn: torch.Tensor | None = None
    phase: Sequence[str] | torch.Tensor | None = None
    outcome: torch.Tensor | None = None
    team: torch.Tensor | None = None

    def __post_init__(self) -> None:
        self.reward = torch.as_tensor(self.reward)
        if not self.reward.is_floating_point():
            self.reward = self.reward.to(torch.get_default_dtype())
        R = len(self.reward)
        if self.reward.dim() != 1:
            raise ValueError(f"Turns.reward has shape {list(self.reward.shape)}; expected [R]")
        if self.traj is None:
            raise ValueError("Turns.traj is required: the trajectory id of each turn [R]")
        for name in ("traj", "attempt", "turn", "outcome", "team"):
            value = getattr(self, name)
            if value is None:
                continue
            value = torch.as_tensor(value)
            if value.shape != (R,):
                raise ValueError(
                    f"Turns.{name} has shape {list(value.shape)}; expected [R] with R={R} "
                    "(the length of reward)"
                )
            setattr(self, name, value)
        if self.phase is not None and len(self.phase) != R:
            raise ValueError(f"Turns.phase has {len(self.phase)} entries; expected R={R}")

    def __len__(self) -> int:
        return len(self.reward)

    @property
    def is_reflect(self) -> torch.Tensor:
        """[R] bool: the turn is a reflection (phase "reflect")."""
        if self.phase is None:
            return torch.zeros(len(self), dtype=torch.bool)
        if isinstance(self.phase, torch.Tensor):
            return self.phase.to(torch.bool)
        return torch.tensor([p == REFLECT for p in self.phase], dtype=torch.bool)

    def order(self) -> list[int]:
        """Row indices sorted by (traj, attempt, turn, reflect first, table order)."""
        R = len(self)
        traj = self.traj.tolist()
        attempt = [0] * R if self.attempt is None else self.attempt.tolist()
        turn = list(range(R)) if self.turn is None else self.turn.tolist()
        reflect = self.is_reflect.tolist()
        return sorted(range(R), key=lambda i: (traj[i], attempt[i], turn[i], not reflect[i], i))


# ---- options ------------------------------------------------------------------------------
@dataclass(frozen=True)
class CreditOptions:
    team_coef: float = option(
        0.0, "α of team_mix, c + α·R_team (AT-GRPO docs; the plan configs set none: 0)"
    )

    def __post_init__(self) -> None:
        check_range(type(self).__name__, "team_coef", self.team_coef)


@dataclass(frozen=True)
class OutcomeOptions(CreditOptions):
    pass


@dataclass(frozen=True)
class ImmediateOptions(CreditOptions):
    pass


@dataclass(frozen=True)
class DiscountedOptions(CreditOptions):
    gamma: float = option(0.95, "γ of the return within an attempt (LaMer's γ_step) [ours]")

    def __post_init__(self) -> None:
        super().__post_init__()
        check_range("discounted", "gamma", self.gamma, low=0.0, high=1.0)


@dataclass(frozen=True)
class CrossEpisodeOptions(CreditOptions):
    gamma_step: float = option(0.95, "γ_step between turns of an attempt (LaMer scripts)")
    gamma_traj: float = option(
        0.6, "γ_traj between attempts (LaMer: 0.6 MineSweeper/WebShop/ALFWorld, 0.9 Sokoban)"
    )
    form: str = option("code", "code: LaMer's credit_assignment (trained); paper: eq. as quoted")

    def __post_init__(self) -> None:
        super().__post_init__()
        check_range("cross_episode", "gamma_step", self.gamma_step, low=0.0, high=1.0)
        check_range("cross_episode", "gamma_traj", self.gamma_traj, low=0.0, high=1.0)
        check_choice("cross_episode", "form", self.form, ("code", "paper"))


# ---- rules --------------------------------------------------------------------------------
def team_mix(credit: torch.Tensor, team: torch.Tensor, coef: float) -> torch.Tensor:
    """c + α·R_team [R] (AT-GRPO, `final_reward = alpha * global_reward + local_reward`,
    code PettingLLMs docs/core-concepts/at-grpo.md). Added to the credit, once per turn:
    for `immediate` this is the docs' reward mix; for the discounted rules the team term is
    not discounted [ours]."""
    if coef == 0:
        return credit
    return credit + coef * team.to(credit.dtype)


def _finish(turns: Turns, credit: torch.Tensor, cfg: CreditOptions, name: str) -> torch.Tensor:
    if cfg.team_coef == 0:
        return credit
    if turns.team is None:
        raise ValueError(f"credit {name!r} with team_coef = {cfg.team_coef} needs Turns.team")
    return team_mix(credit, turns.team, cfg.team_coef)


def _dtype(turns: Turns) -> torch.dtype:
    return torch.promote_types(turns.reward.dtype, torch.float32)


@credits.register("outcome", config=OutcomeOptions)
def outcome_credit(turns: Turns, cfg: OutcomeOptions) -> torch.Tensor:
    """The trajectory's outcome on every turn: c_t = R(τ) (spec §A0.5).

    R(τ) = `turns.outcome` (e.g. success) when given, else the undiscounted sum of the
    trajectory's rewards Σ_t r_t [ours]. Shapes: [R] → [R]."""
    if turns.outcome is not None:
        credit = turns.outcome.to(_dtype(turns))
    else:
        _, traj = torch.unique(turns.traj, return_inverse=True)
        r = turns.reward.to(_dtype(turns))
        total = r.new_zeros(int(traj.max()) + 1 if len(traj) else 0).index_add(0, traj, r)
        credit = total[traj]
    return _finish(turns, credit, cfg, "outcome")


@dataclass(frozen=True)
class FinalOptions(CreditOptions):
    pass


@credits.register("final", config=FinalOptions)
def final_credit(turns: Turns, cfg: FinalOptions) -> torch.Tensor:
    """The trajectory's outcome on its last turn only, 0 on the others (StepTool's
    ablation, "PPO on the final reward", spec §A2): c_t = R(τ)·[t = last(τ)], last in
    `turns.order()`. R(τ) as in `outcome`. Shapes: [R] → [R]."""
    total = outcome_credit(turns, OutcomeOptions())
    last: dict[int, int] = {}
    for i in turns.order():
        last[int(turns.traj[i])] = i
    keep = torch.zeros(len(turns), dtype=torch.bool)
    keep[list(last.values())] = True
    credit = torch.where(keep, total, torch.zeros_like(total))
    return _finish(turns, credit, cfg, "final")


@credits.register("immediate", config=ImmediateOptions)
def immediate_credit(turns: Turns, cfg: ImmediateOptions) -> torch.Tensor:
    """The turn's own reward: c_t = r_t (AT-GRPO: the acting agent's reward for its action,
    code PettingLLMs agents' `step`). Shapes: [R] → [R]."""
    return _finish(turns, turns.reward.to(_dtype(turns)).clone(), cfg, "immediate")


@credits.register("discounted", config=DiscountedOptions)
def discounted_credit(turns: Turns, cfg: DiscountedOptions) -> torch.Tensor:
    """Discounted return within the attempt: c_t = Σ_{l≥t} γ^{l−t} r_l over the turns l of
    the same trajectory and attempt, l counted in turn order (spec §A0.5; GiGPO
    arXiv:2505.10978 eq. 5). T-A0.3: r = (0, 0, 1), γ = 0.9 → (0.81, 0.9, 1.0). Every row
    is a turn here, reflect rows included. Shapes: [R] → [R]."""
    r = turns.reward.to(_dtype(turns)).tolist()
    attempt = turns.attempt.tolist() if turns.attempt is not None else [0] * len(turns)
    traj = turns.traj.tolist()
    credit = [0.0] * len(turns)
    run, scope = 0.0, None
    for i in reversed(turns.order()):
        here = (traj[i], attempt[i])
        run = r[i] + cfg.gamma * run if here == scope else r[i]
        scope = here
        credit[i] = run
    return _finish(turns, torch.tensor(credit, dtype=_dtype(turns)), cfg, "discounted")


@credits.register("cross_episode", config=CrossEpisodeOptions)
def cross_episode_credit(turns: Turns, cfg: CrossEpisodeOptions) -> torch.Tensor:
    """LaMer's cross-episode return (Jiang et al., arXiv:2512.16848; spec §A3).

    paper: g_t^{(n)} = Σ_{l≥t} γ_step^{l−t} r_l^{(n)} over the play turns of attempt n,
        G_t^{(n)} = g_t^{(n)} + Σ_{m>n} γ_traj^{m−n} g_0^{(m)} over the later attempts m of
        the trajectory [paper, as quoted by a review].
    code: one running return backwards over the play turns of the trajectory,
        run ← r + γ_step·run inside an attempt, run ← r + γ_traj·run when the next play turn
        belongs to another attempt; so later attempts are also discounted by γ_step per
        remaining turn of attempt n [code LaMer metarl_rollout_loop.py:credit_assignment].
    A reflect row adds no reward and gets the return of the play turn that follows it in
    the trajectory (the next attempt's first turn; 0 if none): the code's rule, and our
    choice for the paper form [ours], where it equals Σ_{m≥n'} γ_traj^{m−n'} g_0^{(m)} for
    the next attempt n'.
    Spec §A3 T1 (attempt 0 r = (0, 0), attempt 1 r = (0, 1), γ_step 0.95, γ_traj 0.6):
    paper (0.57, 0.57, 0.95, 1.0), code (0.5415, 0.57, 0.95, 1.0), a reflect row between
    the attempts 0.95 (both forms). Shapes: [R] → [R]."""
    if cfg.form == "code":
        credit = _cross_episode_code(turns, cfg.gamma_step, cfg.gamma_traj)
    else:
        credit = _cross_episode_paper(turns, cfg.gamma_step, cfg.gamma_traj)
    return _finish(turns, torch.tensor(credit, dtype=_dtype(turns)), cfg, "cross_episode")


def _cross_episode_code(turns: Turns, gamma_step: float, gamma_traj: float) -> list[float]:
    r = turns.reward.tolist()
    attempt = turns.attempt.tolist() if turns.attempt is not None else [0] * len(turns)
    traj, reflect = turns.traj.tolist(), turns.is_reflect.tolist()
    credit = [0.0] * len(turns)
    run, here_traj, here_attempt = 0.0, None, None
    for i in reversed(turns.order()):
        if traj[i] != here_traj:  # a new trajectory starts (from its end)
            run, here_traj, here_attempt = 0.0, traj[i], None
        if reflect[i]:
            credit[i] = run
            continue
        gamma = gamma_step if here_attempt in (None, attempt[i]) else gamma_traj
        run = r[i] + gamma * run
        here_attempt = attempt[i]
        credit[i] = run
    return credit


def _cross_episode_paper(turns: Turns, gamma_step: float, gamma_traj: float) -> list[float]:
    r = turns.reward.tolist()
    attempt = turns.attempt.tolist() if turns.attempt is not None else [0] * len(turns)
    traj, reflect = turns.traj.tolist(), turns.is_reflect.tolist()
    order = turns.order()
    # g: the return within the attempt over its play turns; first[τ][n] = g_0^{(n)}
    g = [0.0] * len(turns)
    first: dict[int, dict[int, float]] = {}
    run, scope = 0.0, None
    for i in reversed(order):
        if reflect[i]:
            continue
        here = (traj[i], attempt[i])
        run = r[i] + gamma_step * run if here == scope else r[i]
        scope, g[i] = here, run
        first.setdefault(traj[i], {})[attempt[i]] = run
    credit = [0.0] * len(turns)
    for i in order:
        if not reflect[i]:
            n = attempt[i]
            later = (gamma_traj ** (m - n) * g0 for m, g0 in first[traj[i]].items() if m > n)
            credit[i] = g[i] + sum(later)
    # a reflect row: the return of the play turn after it
    following, here_traj = 0.0, None
    for i in reversed(order):
        if traj[i] != here_traj:
            following, here_traj = 0.0, traj[i]
        if reflect[i]:
            credit[i] = following
        else:
            following = credit[i]
    return credit


def assign_credit(turns: Turns, name: str = "immediate", **options) -> torch.Tensor:
    """c [R] of the credit rule `name` with its options (unknown options are an error)."""
    entry = credits.entry(name)
    return entry.fn(turns, build_options(entry.config, options, where=f"credit {name!r}"))
