"""DISK and its two baselines as lab methods on `lab/image_pairs` (papers/seed_control_theory.md
§15; Tyszkiewicz, Fua, Trulls, NeurIPS 2020, arXiv 2006.13566).

- `disk`: keypoints sampled per grid cell and matched by the mutual softmax, trained by
  REINFORCE on correct minus incorrect matches with the match expectation exact
  (algebra/disk.py, policies/keypoints.py).
- `supervised_grid`: the same U-Net, descriptors trained with a triplet loss (hardest
  in-pair negative) at the homography's exact correspondences of a fixed cell-centre
  grid; it detects nothing: its keypoints are the grid.
- `harris`: Harris corners (numpy; the strongest response per cell) with raw 9×9 patch
  descriptors; nothing is trained, its steps only spend the budget.

Every step draws `batch` fresh training pairs from the run's generator; the budget is in
image pairs. A DISK "epoch" of the schedules is `epoch_pairs` pairs (the code's epoch is
5000 batches of 2 scenes)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from policylab.algebra.disk import DiskLossConfig, disk_reinforce, expected_reward, schedule
from policylab.algebra.options import check_range, option
from policylab.envs.procedural.image_pairs import make_pairs, pair_rewards, project
from policylab.lab import add_method
from policylab.lab.image_pairs import grid_points, raw_patches
from policylab.policies.keypoints import (
    UNet,
    descriptors_at,
    match_distribution,
    mode_keypoints,
    sample_keypoints,
)
from policylab.recipes.base import S
from policylab.tabular.methods import TabularMethod

PAPER = "Tyszkiewicz, Fua, Trulls, DISK, NeurIPS 2020, arXiv 2006.13566"


def _check_common(owner: str, o) -> None:
    check_range(owner, "lr", o.lr, low=0, low_open=True)
    check_range(owner, "batch", o.batch, low=1)
    check_range(owner, "desc_dim", o.desc_dim, low=1)


@dataclass(frozen=True)
class DiskOptions:
    lr: float = option(1e-3, help="Adam step size")
    batch: int = option(2, help="image pairs per step")
    epoch_pairs: int = option(50, help="image pairs per schedule epoch")
    desc_dim: int = option(32, help="descriptor channels")
    threshold: float = option(2.0, help="reprojection distance of a correct match, px")

    def __post_init__(self) -> None:
        _check_common("disk", self)
        check_range("disk", "epoch_pairs", self.epoch_pairs, low=1)
        check_range("disk", "threshold", self.threshold, low=0, low_open=True)


@dataclass(frozen=True)
class GridOptions:
    lr: float = option(1e-3, help="Adam step size")
    batch: int = option(2, help="image pairs per step")
    desc_dim: int = option(32, help="descriptor channels")
    margin: float = option(1.0, help="triplet margin on descriptor distances")

    def __post_init__(self) -> None:
        _check_common("supervised_grid", self)
        check_range("supervised_grid", "margin", self.margin, low=0, low_open=True)


@dataclass(frozen=True)
class HarrisOptions:
    k: float = option(0.04, help="Harris det − k·trace² constant")
    sigma: float = option(1.0, help="Gaussian window of the structure tensor, px")
    batch: int = option(2, help="image pairs spent per (empty) step")

    def __post_init__(self) -> None:
        check_range("harris", "k", self.k, low=0, low_open=True, high=0.25)
        check_range("harris", "sigma", self.sigma, low=0, low_open=True)
        check_range("harris", "batch", self.batch, low=1)


# --- the networks' state -----------------------------------------------------------------


def _images(batch: list[np.ndarray]) -> torch.Tensor:
    return torch.as_tensor(np.stack(batch), dtype=torch.float32).unsqueeze(1)


def _net_init(problem, options, generator):
    with torch.random.fork_rng():
        torch.manual_seed(int(torch.randint(2**31 - 1, (1,), generator=generator)))
        net = UNet(desc_dim=options.desc_dim)
    return {"net": net, "opt": torch.optim.Adam(net.parameters(), lr=options.lr), "seen": 0}


def _checkpoint(state):
    return {
        "net": state["net"].state_dict(),
        "opt": state["opt"].state_dict(),
        "seen": state["seen"],
    }


def _restore(problem, options, saved):
    net = UNet(desc_dim=options.desc_dim)
    net.load_state_dict(saved["net"])
    opt = torch.optim.Adam(net.parameters(), lr=options.lr)
    opt.load_state_dict(saved["opt"])
    return {"net": net, "opt": opt, "seen": int(saved["seen"])}


def _train_pairs(problem, options, generator):
    seed = int(torch.randint(2**31 - 1, (1,), generator=generator))
    return make_pairs(seed, options.batch, warp=problem.mdp["warp"], shapes=problem.mdp["shapes"])


def _apply(state, loss: torch.Tensor, pairs: int) -> float:
    state["opt"].zero_grad()
    loss.backward()
    norm = float(torch.nn.utils.clip_grad_norm_(state["net"].parameters(), float("inf")))
    state["opt"].step()
    state["seen"] += pairs
    return norm


# --- DISK ----------------------------------------------------------------------------------


def disk_step(problem, state, options, generator):
    """One Adam step on the mean over `batch` pairs of disk_reinforce (algebra/disk.py)."""
    pairs = _train_pairs(problem, options, generator)
    sched = schedule(state["seen"] // options.epoch_pairs)
    cfg = DiskLossConfig(lm_kp=sched["lm_kp"])
    images = _images([p.image1 for p in pairs] + [p.image2 for p in pairs])
    heatmap, desc = state["net"](images)
    keypoints = sample_keypoints(heatmap, generator)
    n = len(pairs)
    loss, reward, good, count = torch.zeros(()), 0.0, 0.0, 0
    for b, pair in enumerate(pairs):
        (xy1, logp1), (xy2, logp2) = keypoints[b], keypoints[n + b]
        count += len(xy1) + len(xy2)
        if len(xy1) == 0 or len(xy2) == 0:
            loss = loss - cfg.lm_kp * (logp1.sum() + logp2.sum())
            continue
        P, logP = match_distribution(
            descriptors_at(desc[b], xy1), descriptors_at(desc[n + b], xy2), sched["theta"]
        )
        R = torch.as_tensor(
            pair_rewards(
                pair.homography,
                xy1.numpy(),
                xy2.numpy(),
                threshold=options.threshold,
                lm_fp=sched["lm_fp"],
            ),
            dtype=P.dtype,
        )
        loss = loss + disk_reinforce(R, P, logP, (logp1, logp2), cfg)
        reward += expected_reward(R, P.detach(), len(xy1) + len(xy2), cfg.lm_kp)
        good += float((P.detach() * (R > 0)).sum())
    norm = _apply(state, loss / n, n)
    return state, {
        "cost": n,
        "reward/expected": reward / n,
        "matches/expected_correct": good / n,
        "keypoints/per_image": count / (2 * n),
        "schedule/theta": sched["theta"],
        "schedule/ramp": sched["ramp"],
        "grad/norm": norm,
    }


def _net_features(state, grid: bool):
    net = state["net"]

    def features(images: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
        with torch.no_grad():
            heatmap, desc = net(_images(list(images)))
        if grid:
            xy = torch.as_tensor(grid_points(images.shape[-1]))
            points = [xy] * len(images)
        else:
            points = mode_keypoints(heatmap)
        return [
            (p.numpy(), descriptors_at(d, p).numpy()) for p, d in zip(points, desc, strict=True)
        ]

    return features


def disk_policy(problem, state):
    return _net_features(state, grid=False)


# --- supervised descriptors on a fixed grid ---------------------------------------------------


def _sample_at(desc_map: torch.Tensor, xy: torch.Tensor) -> torch.Tensor:
    """Bilinear descriptors at real (x, y): [D, H, W], [N, 2] → [N, D], L2-normalised."""
    size = desc_map.shape[-1]
    where = (xy / (size - 1) * 2 - 1).view(1, 1, -1, 2).to(desc_map.dtype)
    out = F.grid_sample(desc_map[None], where, align_corners=True)[0, :, 0].T
    return F.normalize(out, dim=-1)


def grid_step(problem, state, options, generator):
    """Triplet loss max(0, m + ‖a_i − p_i‖ − min_{j≠i} ‖a_i − p_j‖) with anchors at the grid
    of image 1 and positives at their exact images under H (hardest negative in the pair)."""
    pairs = _train_pairs(problem, options, generator)
    images = _images([p.image1 for p in pairs] + [p.image2 for p in pairs])
    _, desc = state["net"](images)
    n, size = len(pairs), images.shape[-1]
    grid = grid_points(size)
    loss, active = torch.zeros(()), 0.0
    for b, pair in enumerate(pairs):
        target = project(pair.homography, grid)
        inside = ((target >= 0) & (target <= size - 1)).all(1)
        anchors = descriptors_at(desc[b], torch.as_tensor(grid[inside]))
        positives = _sample_at(desc[n + b], torch.as_tensor(target[inside]))
        dist = torch.cdist(anchors, positives)
        hardest = (dist + 1e9 * torch.eye(len(dist))).min(1).values
        hinge = F.relu(options.margin + dist.diagonal() - hardest)
        loss = loss + hinge.mean()
        active += float((hinge > 0).float().mean())
    norm = _apply(state, loss / n, n)
    return state, {
        "cost": n,
        "loss/triplet": float(loss.detach()) / n,
        "triplet/active": active / n,
        "grad/norm": norm,
    }


def grid_policy(problem, state):
    return _net_features(state, grid=True)


# --- Harris ----------------------------------------------------------------------------------


def _gaussian(image: np.ndarray, sigma: float) -> np.ndarray:
    radius = int(np.ceil(3 * sigma))
    t = np.arange(-radius, radius + 1)
    kernel = np.exp(-(t**2) / (2 * sigma**2))
    kernel /= kernel.sum()
    padded = np.pad(image, radius, mode="edge")
    rows = np.apply_along_axis(lambda r: np.convolve(r, kernel, "valid"), 1, padded)
    return np.apply_along_axis(lambda c: np.convolve(c, kernel, "valid"), 0, rows)


def harris_response(image: np.ndarray, k: float = 0.04, sigma: float = 1.0) -> np.ndarray:
    """det M − k·(trace M)², M = G_σ * [[Ix², IxIy], [IxIy, Iy²]] (central differences)
    [Harris & Stephens 1988]."""
    iy, ix = np.gradient(image.astype(np.float64))
    xx, yy, xy = (_gaussian(a, sigma) for a in (ix * ix, iy * iy, ix * iy))
    return xx * yy - xy**2 - k * (xx + yy) ** 2


def harris_keypoints(image: np.ndarray, k: float, sigma: float, cell: int = 8) -> np.ndarray:
    """The strongest positive response of each cell (as DISK's one proposal per cell),
    kept when above 1 % of the image's maximum [ours]: [K, 2] (x, y)."""
    resp = harris_response(image, k, sigma)
    size = image.shape[0]
    blocks = resp.reshape(size // cell, cell, size // cell, cell).transpose(0, 2, 1, 3)
    flat = blocks.reshape(size // cell, size // cell, -1)
    best, value = flat.argmax(-1), flat.max(-1)
    cy, cx = np.mgrid[0 : size // cell, 0 : size // cell]
    keep = value > 0.01 * max(resp.max(), 1e-12)
    x = cx * cell + best % cell
    y = cy * cell + best // cell
    return np.stack([x[keep], y[keep]], 1)


def harris_policy(problem, state):
    k, sigma = state["k"], state["sigma"]

    def features(images: np.ndarray):
        out = []
        for img in images:
            xy = harris_keypoints(img, k, sigma)
            out.append((xy, raw_patches(img, xy)))
        return out

    return features


def harris_init(problem, options, generator):
    return {"k": options.k, "sigma": options.sigma}


def harris_step(problem, state, options, generator):
    return state, {"cost": options.batch}


CODE = "[code cvlab-epfl/disk:train.py]"
add_method(
    TabularMethod(
        tasks=("image_pairs",),
        name="disk",
        title="DISK: keypoints and matches by policy gradient",
        paper=PAPER,
        formula="L = −Σ_ij R_ij·sg(P_ij)·(log P_ij + logp_i + logp_j) − λ_kp·Σ logp",
        options=DiskOptions,
        defaults={
            "lr": S(1e-3, "[ours: code 1e-4 over 2.5·10⁵ batches; our budget is ~10³ pairs]"),
            "batch": S(2, "[code train.py: batch 2 scenes]"),
            "epoch_pairs": S(50, "[ours: code 5000 batches of 2 scenes per epoch; cut to fit]"),
            "desc_dim": S(32, "[paper §15.2 testbed; code 128]"),
            "threshold": S(2.0, "[code cvlab-epfl/disk:disk/loss/rewards.py:DepthReward]"),
        },
        init=_net_init,
        step=disk_step,
        policy=disk_policy,
        checkpoint=_checkpoint,
        restore=_restore,
        notes=(f"schedules λ_fp, λ_kp, θ_M by epoch {CODE}; Adam",),
    )
)
add_method(
    TabularMethod(
        tasks=("image_pairs",),
        name="supervised_grid",
        title="Triplet-loss descriptors on a fixed keypoint grid (DISK's baseline)",
        paper="seed_control_theory.md §15.2 baseline; triplet loss as HardNet, arXiv 1705.10872",
        formula="max(0, m + ‖a_i − p_i‖ − min_{j≠i} ‖a_i − p_j‖), anchors on the grid",
        options=GridOptions,
        defaults={
            "lr": S(1e-3, "[ours: as disk]"),
            "batch": S(2, "[ours: as disk]"),
            "desc_dim": S(32, "[paper §15.2 testbed]"),
            "margin": S(1.0, "[paper HardNet arXiv 1705.10872 §3]"),
        },
        init=_net_init,
        step=grid_step,
        policy=grid_policy,
        checkpoint=_checkpoint,
        restore=_restore,
    )
)
add_method(
    TabularMethod(
        tasks=("image_pairs",),
        name="harris",
        title="Harris corners with raw-patch descriptors (untrained)",
        paper="Harris & Stephens, A combined corner and edge detector, 1988",
        formula="det M − k·tr(M)², one per 8×8 cell; 9×9 normalised patches",
        options=HarrisOptions,
        defaults={
            "k": S(0.04, "[paper Harris & Stephens 1988; OpenCV's usual 0.04]"),
            "sigma": S(1.0, "[ours]"),
            "batch": S(2, "[ours: as disk]"),
        },
        init=harris_init,
        step=harris_step,
        policy=harris_policy,
    )
)
