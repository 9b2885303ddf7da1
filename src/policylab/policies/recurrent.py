"""A recurrent glance agent: a small CNN reads one view, a GRU accumulates the glances, a
classifier reads the GRU state, and an actor-critic on the same state picks the next view
(AFGR, Du et al., arXiv 2206.01153; code PRIS-CV/MAFR network.py `ActorCritic`,
`Full_layer`).

    x_t = [CNN(image_t), onehot(view_t)]          h_t = GRU(x_t, h_{t−1}),  h_0 = 0
    p_t = softmax(W_cls h_t)                       π(· | h_t) = softmax(W_pi h_t) over views
    V(h_t) = w_v·h_t

The actor and critic read h_t detached: PPO trains them only, the classifier keeps its own
loss (stages of §16.1). Views already seen can be masked out of π (`visited`). Sizes are
ours: a 2-layer CNN and a 64-wide GRU for 16×16 views (the paper: ResNet-50 at 224 px and a
1024-wide GRU). The paper's actor has BatchNorm before its linear layer; ours does not."""

from __future__ import annotations

import torch
from torch import nn


class GlanceAgent(nn.Module):
    def __init__(self, views: int, classes: int, size: int = 16, hidden: int = 64) -> None:
        super().__init__()
        self.views, self.classes, self.hidden = views, classes, hidden
        self.encoder = nn.Sequential(
            nn.Conv2d(1, 16, 3, stride=2, padding=1),
            nn.ReLU(),
            nn.Conv2d(16, 32, 3, stride=2, padding=1),
            nn.ReLU(),
            nn.Flatten(),
            nn.Linear(32 * ((size + 3) // 4) ** 2, hidden),
            nn.ReLU(),
        )
        self.gru = nn.GRUCell(hidden + views, hidden)
        self.classifier = nn.Linear(hidden, classes)
        self.actor = nn.Linear(hidden, views)
        self.critic = nn.Linear(hidden, 1)

    def classifier_parameters(self) -> list[nn.Parameter]:
        return [*self.encoder.parameters(), *self.gru.parameters(), *self.classifier.parameters()]

    def policy_parameters(self) -> list[nn.Parameter]:
        return [*self.actor.parameters(), *self.critic.parameters()]

    def glance(self, h: torch.Tensor, images: torch.Tensor, view: torch.Tensor) -> torch.Tensor:
        """One glance: h [B, H], images [B, V, S, S], view [B] (long) → the next h [B, H]."""
        picked = images[torch.arange(images.shape[0]), view].unsqueeze(1)  # [B, 1, S, S]
        x = torch.cat([self.encoder(picked), nn.functional.one_hot(view, self.views).float()], 1)
        return self.gru(x, h)

    def start(self, batch: int) -> torch.Tensor:
        return torch.zeros(batch, self.hidden)

    def view_logits(self, h: torch.Tensor, visited: torch.Tensor | None = None) -> torch.Tensor:
        """Actor logits [B, V] on h detached; visited [B, V] (bool) views get −inf."""
        logits = self.actor(h.detach())
        return logits if visited is None else logits.masked_fill(visited, float("-inf"))

    def value(self, h: torch.Tensor) -> torch.Tensor:
        return self.critic(h.detach()).squeeze(-1)
