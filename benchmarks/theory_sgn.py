"""SGN certificates vs the Euclidean (Rosen) certificate (spec §4.2; arXiv:2512.06791).

Part 1, the code's 2-D game J = [[1, 10], [0.05, 1]]: margins, steps, h_euler/h_stab.
Part 2, the code's random LQ ensemble (LQ_GAMES/random_suite.py: 64-dim, two players,
seeds 12345 + 1000·s, λ on its 7-point grid): per λ, how many games each certificate
certifies, how many are stable (h_stab > 0), the soundness check of every SGN certificate
(for h = f·h_euler, f ∈ FRACTIONS: ‖I − hJ‖_M ≤ √(1 − 2hα + h²β²) < 1, 200 explicit steps
of play decrease ‖x‖_M at every step, and 2^K steps by repeated squaring shrink ‖x‖_M by at
least that factor^(2^K)), the conservativeness h_euler/h_stab, and the code's RK4
guideline h_rk4 = 2.5/β checked against the exact RK4 threshold and the M-norm.

Part 3 [ours]: λ ~ U(0, 2.5) per game (seeds 777000 + s), binned by λ.

    PYTHONPATH=src .venv/bin/python benchmarks/theory_sgn.py      # 1001 + 300 games
    PYTHONPATH=src .venv/bin/python benchmarks/theory_sgn.py --seeds 3 --uniform 20
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from policylab.games import (
    euclidean_certificate,
    h_stab,
    metric_norm,
    quadratic_jacobian,
    rk4_step_matrix,
    sgn_certificate,
    step_matrix,
    true_margin,
)
from policylab.games.quadratic import SUITE_LAMBDAS, SUITE_SEED

F64 = torch.float64
FRACTIONS = (0.25, 0.5, 0.9, 0.999)
EXPLICIT_STEPS = 200
UNIFORM_SEED = 777_000  # [ours] part 3's game seeds


def part_one() -> None:
    J = torch.tensor([[1.0, 10.0], [0.05, 1.0]], dtype=F64)
    euc = euclidean_certificate(J, player_dims=(1, 1))
    sgn = sgn_certificate(J, player_dims=(1, 1))
    fixed = sgn_certificate(J, player_dims=(1, 1), weights=torch.tensor([1.0, 200.0]))
    hs = h_stab(J)
    print("Part 1: 2-D game J = [[1, 10], [0.05, 1]]")
    print(f"  Euclidean λ_min(sym J) = {euc.alpha:.6f} (certified: {euc.certified})")
    print(f"  band r = w2/w1 ∈ ({sgn.band[0]:.6f}, {sgn.band[1]:.6f})")
    for name, c in (("w = (1, 200)", fixed), ("searched", sgn)):
        print(
            f"  SGN {name}: r = {float(c.w[1]):.4f}, α* = {c.alpha:.6f}, "
            f"α_true = {true_margin(J, c.w, (1, 1)):.6f}, β = {c.beta:.6f}, "
            f"h_euler = {c.h_euler:.6f}, h_stab = {hs:.6f}, ratio = {c.h_euler / hs:.4f}"
        )
    m = torch.diag(fixed.M)
    T = step_matrix(J, 0.2)
    print(
        f"  h = 0.2: ‖T‖_M = {metric_norm(T, m):.6f}, ‖T‖_2 = "
        f"{float(torch.linalg.matrix_norm(T, ord=2)):.6f}"
    )


def play_converges(J, m, h, q, gen, squarings: int) -> tuple[bool, bool]:
    """(every explicit step shrinks ‖x‖_M by <= q, 2^squarings steps shrink by <= q^K)."""
    T = step_matrix(J, h)
    x = torch.randn(J.shape[0], generator=gen, dtype=F64)
    norm = lambda v: float((m * v * v).sum().sqrt())  # noqa: E731
    start, monotone = norm(x), True
    for _ in range(EXPLICIT_STEPS):
        nxt = x - h * (J @ x)  # simultaneous gradient play x ← x − hF(x)
        monotone &= norm(nxt) <= q * norm(x) * (1 + 1e-12)
        x = nxt
    power = T
    for _ in range(squarings):
        power = power @ power
    x0 = torch.randn(J.shape[0], generator=gen, dtype=F64)
    converged = norm(power @ x0) <= q ** (2**squarings) * norm(x0) * (1 + 1e-9) + 1e-300
    return monotone and start > 0, converged


def evaluate_game(J, gen, squarings):
    dims = (J.shape[0] // 2,) * 2
    euc = euclidean_certificate(J, player_dims=dims)
    sgn = sgn_certificate(J, player_dims=dims)
    row = {
        "euc": euc.certified,
        "sgn": sgn.certified,
        "stable": h_stab(J) > 0,
        "false": 0,
        "checks": 0,
        "euc_ratio": None,
        "sgn_ratio": None,
        "rk4_ok": None,
    }
    hs = h_stab(J)
    if euc.certified:
        row["euc_ratio"] = euc.h_euler / hs
    if not sgn.certified:
        return row
    row["sgn_ratio"] = sgn.h_euler / hs
    m = torch.diag(sgn.M)
    for frac in FRACTIONS:
        h = frac * sgn.h_euler
        q = sgn.euler_factor(h)
        contracts = metric_norm(step_matrix(J, h), m) <= min(q + 1e-12, 1.0)
        monotone, converged = play_converges(J, m, h, q, gen, squarings)
        row["checks"] += 1
        row["false"] += int(not (contracts and q < 1 and monotone and converged))
    rk4_norm = metric_norm(rk4_step_matrix(J, sgn.h_rk4), m)
    row["rk4_ok"] = (sgn.h_rk4 <= h_stab(J, "rk4"), rk4_norm <= 1.0)
    return row


def summarise(title: str, rows: dict[str, list[dict]], started: float) -> None:
    print(f"\n{title}")
    print(
        f"{'λ':>11} {'games':>5} {'stable':>6} {'Euclid':>6} {'SGN':>5} {'false':>5} "
        f"{'h/h_stab Euclid':>16} {'h/h_stab SGN (min–max)':>26} {'RK4 ρ≤1':>8} {'RK4 ‖·‖_M≤1':>11}"
    )
    totals = dict.fromkeys(("games", "stable", "euc", "sgn", "false", "checks", "only_euc"), 0)
    all_sgn_ratio = []
    for key, rs in rows.items():
        counts = {k: sum(r[k] for r in rs) for k in ("stable", "euc", "sgn", "false", "checks")}
        counts["games"] = len(rs)
        counts["only_euc"] = sum(r["euc"] and not r["sgn"] for r in rs)
        for k, v in counts.items():
            totals[k] += v
        er = [r["euc_ratio"] for r in rs if r["euc_ratio"] is not None]
        sr = [r["sgn_ratio"] for r in rs if r["sgn_ratio"] is not None]
        rk = [r["rk4_ok"] for r in rs if r["rk4_ok"] is not None]
        all_sgn_ratio += sr
        e_txt = f"{statistics.median(er):.2e}" if er else "—"
        s_txt = f"{statistics.median(sr):.2e} ({min(sr):.1e}–{max(sr):.1e})" if sr else "—"
        rk1 = f"{sum(a for a, _ in rk)}/{len(rk)}" if rk else "—"
        rk2 = f"{sum(b for _, b in rk)}/{len(rk)}" if rk else "—"
        print(
            f"{key:>11} {len(rs):5d} {counts['stable']:6d} {counts['euc']:6d} "
            f"{counts['sgn']:5d} {counts['false']:5d} {e_txt:>16} {s_txt:>26} {rk1:>8} {rk2:>11}"
        )
    median = f"{statistics.median(all_sgn_ratio):.2e}" if all_sgn_ratio else "—"
    print(
        f"total: {totals['games']} games, stable {totals['stable']}, Euclid certifies "
        f"{totals['euc']}, SGN certifies {totals['sgn']} (Euclid-only {totals['only_euc']}); "
        f"false SGN certificates {totals['false']} of {totals['checks']} (game, h) checks; "
        f"median SGN h_euler/h_stab {median}; {time.perf_counter() - started:.0f} s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=143, help="games per grid λ (code: 30)")
    parser.add_argument("--uniform", type=int, default=300, help="games with λ ~ U(0, 2.5)")
    parser.add_argument("--squarings", type=int, default=20, help="2^K steps of play")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    gen = torch.Generator().manual_seed(0)
    part_one()

    started = time.perf_counter()
    rows = {f"{lam:.3f}": [] for lam in SUITE_LAMBDAS}
    for s in range(args.seeds):
        for lam in SUITE_LAMBDAS:
            J = quadratic_jacobian(SUITE_SEED + 1000 * s, lam)
            rows[f"{lam:.3f}"].append(evaluate_game(J, gen, args.squarings))
    title = f"Part 2: the code's grid, {args.seeds} seeds × {len(SUITE_LAMBDAS)} λ"
    summarise(title, rows, started)

    started = time.perf_counter()
    bins = [(0.5 * k, 0.5 * (k + 1)) for k in range(5)]
    rows = {f"[{lo:.1f},{hi:.1f})": [] for lo, hi in bins}
    lams = 2.5 * torch.rand(args.uniform, generator=torch.Generator().manual_seed(1), dtype=F64)
    for s, lam in enumerate(lams.tolist()):
        J = quadratic_jacobian(UNIFORM_SEED + s, lam)
        lo, hi = bins[min(int(lam / 0.5), 4)]
        rows[f"[{lo:.1f},{hi:.1f})"].append(evaluate_game(J, gen, args.squarings))
    summarise(f"Part 3: {args.uniform} games, λ ~ U(0, 2.5) [ours]", rows, started)


if __name__ == "__main__":
    main()
