"""DISK's two stochastic policies — keypoints per grid cell and mutual-softmax matching —
and the small U-Net that feeds them (papers/seed_control_theory.md §15.1; Tyszkiewicz et
al., arXiv 2006.13566, §3; code cvlab-epfl/disk).

Detector: the heatmap [B, 1, H, W] is cut into w×w cells; in each cell a proposal
j ∼ softmax(logits of the cell), accepted with probability σ(logit_j):

    log p(j, accept) = log softmax(ℓ)_j + log σ(ℓ_j),   log p(j, reject) = … + log σ(−ℓ_j)

[code disk/model/detector.py:point_distribution]. Matcher: D_ij = ‖d_i − d_j‖ between
L2-normalised descriptors, P_ij = softmax_row(−θ_M D)_ij · softmax_col(−θ_M D)_ij, so
log P is the sum of the two log-softmaxes [code disk/model/consistent_matcher.py]. At
inference: the most likely proposal of each cell, kept when σ(ℓ) > ½ (the detector's
mode; the paper's NMS top-k is for full-size images), and cycle-consistent argmax matches.

Keypoints are (x, y) integer pixel coordinates (a pixel's centre)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

CELL = 8  # w [paper §3.1; code detector.py window=8]


def cell_logits(heatmap: torch.Tensor, cell: int = CELL) -> torch.Tensor:
    """[B, 1, H, W] → [B, C, w·w], C = (H/w)·(W/w) cells in row-major order."""
    b, _, h, w = heatmap.shape
    if h % cell or w % cell:
        raise ValueError(f"heatmap {h}×{w} is not a multiple of the cell size {cell}")
    return F.unfold(heatmap, kernel_size=cell, stride=cell).transpose(1, 2)


def keypoint_logp(logits: torch.Tensor, proposal: torch.Tensor, accept: torch.Tensor):
    """log p of (proposal, accept) per cell: logits [..., w·w], proposal and accept [...]."""
    chosen = logits.gather(-1, proposal.unsqueeze(-1)).squeeze(-1)
    sign = accept.to(logits.dtype) * 2 - 1
    return torch.log_softmax(logits, -1).gather(-1, proposal.unsqueeze(-1)).squeeze(
        -1
    ) + F.logsigmoid(sign * chosen)


def _cell_xy(proposal: torch.Tensor, width: int, cell: int) -> torch.Tensor:
    """(x, y) pixels of proposal j in each cell: proposal [B, C] → [B, C, 2]."""
    cells_per_row = width // cell
    c = torch.arange(proposal.shape[-1], device=proposal.device)
    x = (c % cells_per_row) * cell + proposal % cell
    y = (c // cells_per_row) * cell + proposal // cell
    return torch.stack([x, y], -1)


def sample_keypoints(
    heatmap: torch.Tensor, generator: torch.Generator | None = None, cell: int = CELL
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Per image: the accepted keypoints (x, y) [N, 2] and their log p [N] (with grad)."""
    logits = cell_logits(heatmap, cell)
    with torch.no_grad():
        probs = torch.softmax(logits, -1)
        proposal = torch.multinomial(probs.flatten(0, 1), 1, generator=generator).view(
            probs.shape[:2]
        )
        chosen = logits.gather(-1, proposal.unsqueeze(-1)).squeeze(-1)
        accept = torch.rand(chosen.shape, generator=generator) < torch.sigmoid(chosen)
    logp = keypoint_logp(logits, proposal, accept)
    xy = _cell_xy(proposal, heatmap.shape[-1], cell)
    return [(xy[b][accept[b]], logp[b][accept[b]]) for b in range(heatmap.shape[0])]


def mode_keypoints(heatmap: torch.Tensor, cell: int = CELL) -> list[torch.Tensor]:
    """Per image: each cell's most likely proposal, kept when σ(ℓ) > ½: [N, 2] (x, y)."""
    logits = cell_logits(heatmap, cell)
    best = logits.argmax(-1)
    keep = logits.gather(-1, best.unsqueeze(-1)).squeeze(-1) > 0
    xy = _cell_xy(best, heatmap.shape[-1], cell)
    return [xy[b][keep[b]] for b in range(heatmap.shape[0])]


def descriptors_at(desc_map: torch.Tensor, xy: torch.Tensor) -> torch.Tensor:
    """L2-normalised descriptors of one image at integer keypoints: [D, H, W], [N, 2] →
    [N, D]."""
    return F.normalize(desc_map[:, xy[:, 1], xy[:, 0]].T, dim=-1)


def match_distribution(
    desc1: torch.Tensor, desc2: torch.Tensor, theta: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """P, log P [N1, N2] of the mutual-softmax matcher (module docstring).
    desc1 [N1, D], desc2 [N2, D], already L2-normalised."""
    affinity = -theta * torch.cdist(desc1, desc2)
    logp = torch.log_softmax(affinity, 1) + torch.log_softmax(affinity, 0)
    return logp.exp(), logp


def cycle_consistent_matches(desc1: torch.Tensor, desc2: torch.Tensor) -> torch.Tensor:
    """Pairs (i, j) with j = argmin_j D_ij and i = argmin_i D_ij: [M, 2]."""
    if desc1.shape[0] == 0 or desc2.shape[0] == 0:
        return torch.zeros(0, 2, dtype=torch.long)
    dist = torch.cdist(desc1, desc2)
    fwd, back = dist.argmin(1), dist.argmin(0)
    i = torch.arange(desc1.shape[0])
    mutual = back[fwd] == i
    return torch.stack([i[mutual], fwd[mutual]], 1)


def _block(cin: int, cout: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(cin, cout, 3, padding=1),
        nn.InstanceNorm2d(cout, affine=True),
        nn.PReLU(cout),
        nn.Conv2d(cout, cout, 3, padding=1),
        nn.InstanceNorm2d(cout, affine=True),
        nn.PReLU(cout),
    )


class UNet(nn.Module):
    """A 3-level U-Net (16 → 32 → 32 → 32 → 16 channels, skip connections) whose last 1×1 layer
    gives 1 heatmap channel and `desc_dim` descriptor channels at full resolution [ours:
    §15.2's size; DISK's is a 4-level U-Net of 128 px blocks with InstanceNorm and PReLU,
    code disk/model/unet.py]. Input [B, 1, H, W] with H, W multiples of 4."""

    def __init__(self, desc_dim: int = 32, channels: tuple[int, int] = (16, 32)):
        super().__init__()
        small, big = channels
        self.desc_dim = desc_dim
        self.down1 = _block(1, small)
        self.down2 = _block(small, big)
        self.bottom = _block(big, big)
        self.up2 = _block(2 * big, big)
        self.up1 = _block(big + small, small)
        self.head = nn.Conv2d(small, 1 + desc_dim, 1)

    def forward(self, images: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """images [B, 1, H, W] → heatmap logits [B, 1, H, W], descriptors [B, D, H, W]."""
        a = self.down1(images)
        b = self.down2(F.avg_pool2d(a, 2))
        c = self.bottom(F.avg_pool2d(b, 2))
        b = self.up2(torch.cat([b, F.interpolate(c, scale_factor=2.0)], 1))
        a = self.up1(torch.cat([a, F.interpolate(b, scale_factor=2.0)], 1))
        out = self.head(a)
        return out[:, :1], out[:, 1:]
