"""Retroformer's rating of a reflection, its reward-model label and its metrics
(papers/seed_agents.md §A4; Yao et al. 2023, arXiv:2308.02151).

A reflection y_{k,i} written after the failed attempt i of task k is rated by the return
difference of the attempts around it,

    r(x_{k,i}, y_{k,i}) = G_{k,i+1} − G_{k,i}

[paper §4 as summarised by 2nd agentwiki; the sign convention is unchecked against the
paper text]; the released reward model's label is 1 iff the rating > 0.25 [code
weirayao/Retroformer reward_run.py]. G of an attempt is its success (1/0, the spec's
default) or its summed environment reward (`rating_return = "reward"`, the shaped
return). An attempt that was never played (the episode ended abnormally) returns 0.
"""

from __future__ import annotations

import hashlib
import math

import torch

RM_THRESHOLD = 0.25  # [code Retroformer reward_run.py] label 1 iff rating > 0.25


def ratings(g_prev: torch.Tensor, g_next: torch.Tensor) -> torch.Tensor:
    """r = G_{i+1} − G_i [B]: the return of the retry minus that of the failed attempt."""
    return torch.as_tensor(g_next, dtype=torch.float64) - torch.as_tensor(
        g_prev, dtype=torch.float64
    )


def rm_labels(rating: torch.Tensor, threshold: float = RM_THRESHOLD) -> torch.Tensor:
    """The reward model's training label [B]: 1.0 where rating > threshold, else 0.0."""
    return (torch.as_tensor(rating) > threshold).to(torch.float64)


def attempt_returns(trajs, table: dict, kind: str = "success") -> dict[tuple[int, int], float]:
    """G of each played attempt, keyed (trajectory index, attempt): success as 0/1, or the
    summed reward of its played act turns (`turn_table`'s attempt_score)."""
    if kind == "success":
        return {
            (i, n): float(ok) for i, traj in enumerate(trajs) for n, ok in enumerate(traj.successes)
        }
    out: dict[tuple[int, int], float] = {}
    for i, n, phase, score in zip(
        table["traj"].tolist(),
        table["attempt"].tolist(),
        table["phase"],
        table["attempt_score"].tolist(),
        strict=True,
    ):
        if phase == "act":
            out[(i, n)] = score
    return out


def reflection_ratings(table: dict, returns: dict[tuple[int, int], float]) -> torch.Tensor:
    """[R] per turn-table row: a reflect row of attempt n in trajectory i gets
    G(i, n+1) − G(i, n); every other row 0."""
    prev, nxt = [], []
    for i, n, phase in zip(
        table["traj"].tolist(), table["attempt"].tolist(), table["phase"], strict=True
    ):
        reflect = phase == "reflect"
        prev.append(returns.get((i, n), 0.0) if reflect else 0.0)
        nxt.append(returns.get((i, n + 1), 0.0) if reflect else 0.0)
    return ratings(torch.tensor(prev), torch.tensor(nxt))


def parameter_hash(module: torch.nn.Module) -> str:
    """A short SHA-256 of every parameter's name and bytes: equal iff unchanged."""
    digest = hashlib.sha256()
    for name, p in sorted(module.named_parameters()):
        digest.update(name.encode())
        digest.update(p.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()[:16]


def retro_metrics(trajs, batch, policies=None) -> dict[str, float]:
    """retro/*: per instance, success at attempt 1 and after attempt 2 (the mean over its
    reflection branches; 1 after a first-attempt success), the mean rating and the share above the
    RM threshold over the reflect rows, the memo length, and (with a frozen actor) the
    actor's parameter hash as an integer (it must never change)."""
    first: dict[int, bool] = {}
    retries: dict[int, list[bool]] = {}
    for traj in trajs:
        first.setdefault(traj.instance, bool(traj.successes[:1] and traj.successes[0]))
        retries.setdefault(traj.instance, []).append(any(traj.successes[:2]))
    out = {  # per instance; after attempt 2: the mean over its reflection branches
        "retro/success_attempt1": _mean(first.values()),
        "retro/success_attempt2": _mean(_mean(r) for r in retries.values()),
    }
    reflect = [i for i, p in enumerate(batch.extras.get("phase", [])) if p == "reflect"]
    if reflect:
        r = batch.rewards[reflect].double()
        out["retro/rating_mean"] = float(r.mean())
        out["retro/positive_frac"] = float((r > RM_THRESHOLD).double().mean())
        out["retro/rows"] = float(len(reflect))
    memos = [t for traj in trajs for t in traj.turns if t.phase == "reflect"]
    out["retro/memo_len_mean"] = _mean(len(t.gen_ids) for t in {id(t): t for t in memos}.values())
    actor = getattr(policies, "actor", None)
    if actor is not None:
        out["retro/actor_hash"] = float(int(parameter_hash(actor.model)[:8], 16))
    return out


def _mean(values) -> float:
    values = [float(v) for v in values]
    return sum(values) / len(values) if values else math.nan
