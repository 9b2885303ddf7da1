"""DPG-T2I's critic Q_φ(ρ) on the residual ρ = (x̂_0 − x_0)² (papers/seed_generative.md
G5.1, G5.2): the code's FullyConvRegressionModel at the digits' size, with its own SGD.

Code (wfanyue/DPG-T2I-Personalization: reward_model.py FullyConvRegressionModel) on SD's
4 × 64 × 64 latents: conv 4→1 (3×3, pad 1) → LeakyReLU(0.01) → FC 4096→64 → ReLU →
FC 64→1, every weight and bias initialised U(0, 1/fan) with fan = 9 (conv), 4096, 64, and
trained by SGD lr 0.01 [code train_dreambooth_dpg.py `q_optimizer`]. Here the residual is
one 8×8 channel (64 values): conv 1→1 (3×3, pad 1) → LeakyReLU(0.01) → FC 64→hidden →
ReLU → FC hidden→1, the same U(0, 1/fan) initialisation [ours: the code's layout at 8×8]."""

from __future__ import annotations

import torch
from torch import nn

CRITIC_LR = 0.01  # [code train_dreambooth_dpg.py: torch.optim.SGD(reward_model, lr=0.01)]


class CriticOnResidual(nn.Module):
    """Q_φ(ρ): [B, side²] residual → [B] predicted cost."""

    def __init__(self, side: int = 8, hidden: int = 64) -> None:
        super().__init__()
        if side < 1 or hidden < 1:
            raise ValueError(f"CriticOnResidual: side = {side}, hidden = {hidden}; both >= 1")
        self.side = side
        self.conv = nn.Conv2d(1, 1, kernel_size=3, stride=1, padding=1)
        self.fc = nn.Linear(side * side, hidden)
        self.fc2 = nn.Linear(hidden, 1)
        # U(0, 1/fan) [code]: a positive critic of a positive residual
        for module, fan in ((self.conv, 3 * 3), (self.fc, side * side), (self.fc2, hidden)):
            nn.init.uniform_(module.weight, 0.0, 1.0 / fan)
            nn.init.uniform_(module.bias, 0.0, 1.0 / fan)

    def forward(self, rho: torch.Tensor) -> torch.Tensor:
        if rho.ndim != 2 or rho.shape[1] != self.side * self.side:
            raise ValueError(
                f"CriticOnResidual expects a residual [B, {self.side * self.side}]; "
                f"got {tuple(rho.shape)}"
            )
        h = self.conv(rho.reshape(-1, 1, self.side, self.side))
        h = nn.functional.leaky_relu(h, 0.01).flatten(1)
        return self.fc2(torch.relu(self.fc(h))).squeeze(-1)

    def optimizer(self, lr: float = CRITIC_LR) -> torch.optim.SGD:
        """Plain SGD, the code's critic optimiser."""
        return torch.optim.SGD(self.parameters(), lr=lr)

    def fit_step(self, opt: torch.optim.Optimizer, rho: torch.Tensor, target: torch.Tensor):
        """One SGD step of (Q_φ(ρ) − target)² on a detached residual [code: after each actor
        step]. Returns the loss before the step."""
        loss = ((self(rho.detach()) - target.detach()) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return float(loss.detach())
