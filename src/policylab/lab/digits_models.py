"""The digits testbed's models (papers/seed_generative.md G0.6, G0.7), each built from a seed
and cached under `$POLICYLAB_CACHE` (lab/cache.py):

- classifier A, `digit_prob`'s reward model: MLP 64-128-10 with ReLU (9,610 parameters)
  [G0.6; ReLU ours]; `features(x)` gives its 128 hidden units (the similarity features).
- classifier B, the held-out reward model (evaluation only, the reward-hacking probe): a
  2-layer CNN (conv 1→16, conv 16→32, 3×3, ReLU, max-pool to 4×4, linear 512→10) with
  another seed [G0.6 "different seed and architecture, e.g. a 2-layer CNN"; sizes ours].
  Both: 2,000 Adam steps (lr 1e-3 [ours]), batch 128, input noise N(0, 0.05²) [G0.7].
- the digits flow: DiffusionPolicy(64, cond_dim=10, hidden=(256, 256, 256), steps=10) with a
  one-hot label, CFM pre-training (batch 256, Adam 1e-3 [ours, as the ring]) where a fraction
  `label_noise` of the labels (0.5 [G0.7]) is replaced by a uniform random label, so the
  base model follows its condition only partly (G0.7: p_A(c|x) ≈ 0.31 after 2,000 steps).

Returned models are in eval mode with gradients off for their parameters (the classifiers)
or a frozen reference (the flow)."""

from __future__ import annotations

import functools
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from policylab.lab.cache import cache_file, load_or_build
from policylab.lab.digits_data import CLASSES, DIM, SIDE, load_digits_split
from policylab.policies.diffusion import DiffusionPolicy

FLOW_HIDDEN, FLOW_STEPS = (256, 256, 256), 10  # G0.7
CLF_BATCH, CLF_NOISE, CLF_LR = 128, 0.05, 1e-3  # G0.7; lr ours
FLOW_BATCH, FLOW_LR = 256, 1e-3  # ours, as the ring flow
B_SEED_OFFSET = 7_919  # classifier B of seed s trains from seed s + this: never A's seed [ours]


class MLPClassifier(nn.Module):
    """Classifier A: 64 → 128 (ReLU) → 10 logits."""

    def __init__(self, hidden: int = 128) -> None:
        super().__init__()
        self.hidden = nn.Linear(DIM, hidden)
        self.head = nn.Linear(hidden, CLASSES)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """[B, 64] → [B, 128] hidden activations."""
        return F.relu(self.hidden(x))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


class CNNClassifier(nn.Module):
    """Classifier B: two 3×3 conv layers on the 8×8 image, max-pool, linear head."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.head = nn.Linear(32 * (SIDE // 2) ** 2, CLASSES)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        h = F.relu(self.conv1(x.reshape(-1, 1, SIDE, SIDE)))
        return F.max_pool2d(F.relu(self.conv2(h)), 2).flatten(1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


ARCHITECTURES = {"mlp": MLPClassifier, "cnn": CNNClassifier}


def train_classifier(arch: str, seed: int, steps: int) -> nn.Module:
    """Cross-entropy on the 1,500 training digits plus N(0, 0.05²) input noise, Adam."""
    with torch.random.fork_rng(devices=[]):  # the net's initialisation, no global effect
        torch.manual_seed(seed)
        model = ARCHITECTURES[arch]()
    data = load_digits_split()
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=CLF_LR)
    for _ in range(steps):
        idx = torch.randint(data.x_train.shape[0], (CLF_BATCH,), generator=g)
        x = data.x_train[idx] + CLF_NOISE * torch.randn(CLF_BATCH, DIM, generator=g)
        loss = F.cross_entropy(model(x), data.y_train[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model


def classifier_path(arch: str, seed: int, steps: int) -> Path:
    """The cache file of a classifier (its settings' checksum in the name)."""
    settings = f"digit-clf|{arch}|{seed}|{steps}|{CLF_BATCH}|{CLF_NOISE}|{CLF_LR}"
    return cache_file(f"digits_{arch}_{seed}_{steps}", settings)


@functools.lru_cache(maxsize=8)
def _classifier(arch: str, seed: int, steps: int) -> nn.Module:
    model = load_or_build(
        classifier_path(arch, seed, steps),
        ARCHITECTURES[arch],
        lambda: train_classifier(arch, seed, steps),
        what=f"digits classifier ({arch})",
    )
    return model.eval().requires_grad_(False)


def _check_steps(name: str, steps: int) -> None:
    if not isinstance(steps, int) or isinstance(steps, bool) or steps < 1:
        raise ValueError(f"{name}: steps = {steps!r}; must be an integer >= 1")


def classifier_a(seed: int = 0, steps: int = 2000) -> MLPClassifier:
    """Classifier A (the training reward's model), cached; frozen, eval mode."""
    _check_steps("classifier_a", steps)
    return _classifier("mlp", seed, steps)


def classifier_b(seed: int = 0, steps: int = 2000) -> CNNClassifier:
    """Classifier B (held-out evaluation only), from seed + B_SEED_OFFSET; frozen."""
    _check_steps("classifier_b", steps)
    return _classifier("cnn", seed + B_SEED_OFFSET, steps)


@torch.no_grad()
def accuracy(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    return float((model(x).argmax(-1) == y).double().mean())


def one_hot(labels: torch.Tensor) -> torch.Tensor:
    return F.one_hot(labels, CLASSES).float()


def pretrain_digits_flow(seed: int, steps: int, label_noise: float) -> DiffusionPolicy:
    """CFM on the training digits, conditioned on one-hot labels of which a fraction
    `label_noise` is replaced by a uniform random label (G0.7)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        policy = _flow()
    data = load_digits_split()
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(policy.trainable(), lr=FLOW_LR)
    for _ in range(steps):
        idx = torch.randint(data.x_train.shape[0], (FLOW_BATCH,), generator=g)
        x, y = data.x_train[idx], data.y_train[idx]
        swap = torch.rand(FLOW_BATCH, generator=g) < label_noise
        y = torch.where(swap, torch.randint(CLASSES, (FLOW_BATCH,), generator=g), y)
        tau = torch.rand(FLOW_BATCH, 1, generator=g)
        eps = torch.randn(FLOW_BATCH, DIM, generator=g)
        loss = policy.cfm_loss(x, tau, eps, one_hot(y))[0].mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return policy


def _flow() -> DiffusionPolicy:
    return DiffusionPolicy(DIM, cond_dim=CLASSES, hidden=FLOW_HIDDEN, steps=FLOW_STEPS)


def digits_flow_path(seed: int, steps: int, label_noise: float) -> Path:
    """The cache file of the base flow (its settings' checksum in the name); label_noise is
    read as a float, so 0 and 0.0 name one file."""
    label_noise = float(label_noise)
    settings = (
        f"digits-flow|{FLOW_HIDDEN}|{FLOW_STEPS}|{seed}|{steps}|{label_noise!r}|"
        f"{FLOW_BATCH}|{FLOW_LR}"
    )
    return cache_file(f"digits_flow_{seed}_{steps}", settings)


def base_digits_flow(seed: int = 0, steps: int = 2000, label_noise: float = 0.5) -> DiffusionPolicy:
    """The cached class-conditional base flow; its reference frozen (a fresh module per call:
    methods fine-tune it)."""
    _check_steps("base_digits_flow", steps)
    if not 0.0 <= label_noise <= 1.0:
        raise ValueError(f"base_digits_flow: label_noise = {label_noise!r}; must be in [0, 1]")
    policy = load_or_build(
        digits_flow_path(seed, steps, label_noise),
        _flow,
        lambda: pretrain_digits_flow(seed, steps, label_noise),
        part=lambda p: p.velocity_net,
        what="digits flow",
    )
    policy.freeze_reference()
    return policy
