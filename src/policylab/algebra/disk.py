"""DISK's REINFORCE loss for one image pair and its schedules (papers/seed_control_theory.md
§15.1; Tyszkiewicz et al., arXiv 2006.13566, eq. 5–7; code cvlab-epfl/disk).

Pure tensors; the matcher and detector distributions are in policies/keypoints.py. Not in
the policy-loss registry: that registry's signature is rows of token log-probabilities
with advantages, this loss is over a dense [N1, N2] match matrix."""

from __future__ import annotations

from dataclasses import dataclass

import torch

# schedule constants [code cvlab-epfl/disk:train.py]
LM_FP = -0.25
LM_KP = -0.001
THETA_START, THETA_RISE, THETA_RATE = 15.0, 35.0, 0.05


@dataclass(frozen=True)
class DiskLossConfig:
    """lm_kp: the per-keypoint reward (negative: a cost) [code train.py: −0.001·ramp]."""

    lm_kp: float = LM_KP


def disk_reinforce(
    R: torch.Tensor,  # noqa: N803 - the paper's names
    P: torch.Tensor,  # noqa: N803
    logP: torch.Tensor,  # noqa: N803
    kp_logp: tuple[torch.Tensor, torch.Tensor],
    cfg: DiskLossConfig = DiskLossConfig(),  # noqa: B008 - frozen
) -> torch.Tensor:
    """The loss of one pair, minimised:

        L = −Σ_ij R_ij·sg(P_ij)·(log P_ij + logp_i + logp_j) − λ_kp·Σ_kp logp

    R, P, logP: [N1, N2] (reward, match probability, its log); kp_logp: (logp1 [N1],
    logp2 [N2]) of the accepted keypoints. The match expectation is exact (a sum over all
    pairs weighted by P, not a sampled match); its gradient is the REINFORCE estimate for
    the keypoints and the exact gradient for the matcher [paper eq. 7; code
    disk/loss/reinforce.py:_loss_for_pair]. λ_kp < 0 makes each keypoint a cost."""
    logp1, logp2 = kp_logp
    joint = logP + logp1[:, None] + logp2[None, :]
    reinforce = (R * P.detach() * joint).sum()
    return -reinforce - cfg.lm_kp * (logp1.sum() + logp2.sum())


def expected_reward(
    R: torch.Tensor,  # noqa: N803
    P: torch.Tensor,  # noqa: N803
    keypoints: int,
    lm_kp: float = LM_KP,
) -> float:
    """Σ_ij R_ij P_ij + λ_kp·(number of keypoints): the value whose gradient L estimates."""
    return float((R * P).sum()) + lm_kp * keypoints


def ramp(epoch: int) -> float:
    """0 at epoch 0, 0.1 at epoch 1, then min(1, 0.1 + 0.2·e) [code train.py]."""
    if epoch == 0:
        return 0.0
    if epoch == 1:
        return 0.1
    return min(1.0, 0.1 + 0.2 * epoch)


def schedule(epoch: int) -> dict[str, float]:
    """The epoch's λ_fp = −0.25·ramp, λ_kp = −0.001·ramp and θ_M = 15 + 35·min(1, 0.05e)
    [code cvlab-epfl/disk:train.py]."""
    r = ramp(epoch)
    return {
        "ramp": r,
        "lm_fp": LM_FP * r,
        "lm_kp": LM_KP * r,
        "theta": THETA_START + THETA_RISE * min(1.0, THETA_RATE * epoch),
    }
