"""MLP actor-critics for gymnasium control, in the style of CleanRL's `ppo.py` and SB3's
`MlpPolicy`: separate actor and critic trunks (tanh), orthogonal initialisation (gain √2,
policy head 0.01, value head 1), a state-independent log-std for continuous actions, and
an optional running normaliser of observations whose statistics live in the state dict (so
checkpoints carry them).

Action log-probs and entropies are summed over action dimensions: one time step is one
"token" of the shared algebra, so the policy loss sees logprobs of shape [B, 1].

Observations and the network's input. `normalize(obs)` turns raw observations into the
network's input x (the identity without a normaliser); `sample`, `value` and `evaluate`
take x (`sample` and `evaluate` are the policy protocol's, policies/base.py). The
collector normalises each step's observations with statistics updated first by them
(`normalize(obs, update=True)`, SB3's VecNormalize) and stores x, so the learner
recomputes log-probs on exactly the input the sampler saw."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from policylab.policies import categorical
from policylab.policies.base import Evaluation, Sample
from policylab.policies.encoders import make_encoder
from policylab.policies.spaces import action_nvec, check_observation_space, flat_dim, has_image


class RunningMeanStd(nn.Module):
    """Running mean and variance of observations (Chan et al.'s parallel update, as in
    OpenAI baselines and SB3's VecNormalize); normalise = clip((x − μ)/√(σ² + ε), ±clip)."""

    def __init__(self, shape: tuple[int, ...], clip: float = 10.0, eps: float = 1e-8) -> None:
        super().__init__()
        self.clip, self.eps = clip, eps
        self.register_buffer("mean", torch.zeros(shape, dtype=torch.float64))
        self.register_buffer("var", torch.ones(shape, dtype=torch.float64))
        self.register_buffer("count", torch.tensor(1e-4, dtype=torch.float64))

    @torch.no_grad()
    def update(self, x: torch.Tensor) -> None:
        x = x.to(torch.float64)
        batch_mean, batch_var, n = x.mean(0), x.var(0, unbiased=False), x.shape[0]
        delta = batch_mean - self.mean
        total = self.count + n
        self.mean += delta * n / total
        m2 = self.var * self.count + batch_var * n + delta**2 * self.count * n / total
        self.var.copy_(m2 / total)
        self.count.copy_(total)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = (x - self.mean.to(x.dtype)) / torch.sqrt(self.var.to(x.dtype) + self.eps)
        return z.clamp(-self.clip, self.clip)


def _layer(n_in: int, n_out: int, gain: float) -> nn.Linear:
    layer = nn.Linear(n_in, n_out)
    nn.init.orthogonal_(layer.weight, gain)
    nn.init.zeros_(layer.bias)
    return layer


def _mlp(n_in: int, hidden: tuple[int, ...], n_out: int, head_gain: float) -> nn.Sequential:
    layers: list[nn.Module] = []
    for width in hidden:
        layers += [_layer(n_in, width, math.sqrt(2)), nn.Tanh()]
        n_in = width
    layers.append(_layer(n_in, n_out, head_gain))
    return nn.Sequential(*layers)


class ActorCritic(nn.Module):
    """π(a|s) and V(s) over flat observations.

    discrete: logits = actor(s), π = softmax(logits).
    continuous: a ~ N(actor(s), diag(exp(2·log_std))), log_std a free parameter (init 0).
    multi-discrete (`nvec` given): a product of categoricals over the logits' blocks
    (policies/categorical.py); actions [B, K].
    Actions are sampled from the unbounded distribution; the workflow clips them to the
    action space before stepping (CleanRL, SB3), so the stored log-prob is exact.

    `encoder` (policies/encoders.py; None = the identity) turns the input x [B, obs_dim]
    into `features` [B, features] for both MLPs: a CNN for image observations."""

    def __init__(
        self,
        obs_dim: int,
        action_dim: int,
        *,
        discrete: bool,
        hidden: tuple[int, ...] = (64, 64),
        normalize_obs: bool = False,
        log_std_init: float = 0.0,
        nvec: tuple[int, ...] | None = None,
        encoder: nn.Module | None = None,
        features: int | None = None,
    ) -> None:
        super().__init__()
        self.discrete, self.action_dim = discrete, action_dim
        self.nvec = None if nvec is None else tuple(nvec)
        self.obs_norm = RunningMeanStd((obs_dim,)) if normalize_obs else None
        self.encoder = encoder
        n_in = obs_dim if features is None else features
        self.actor = _mlp(n_in, hidden, action_dim, head_gain=0.01)
        self.critic = _mlp(n_in, hidden, 1, head_gain=1.0)
        self.log_std = None if discrete else nn.Parameter(torch.full((action_dim,), log_std_init))

    def normalize(self, obs: torch.Tensor, *, update: bool = False) -> torch.Tensor:
        """The network's input for raw observations [B, obs_dim]: clip((obs − μ)/σ) with the
        running statistics, updated with `obs` first when `update`; obs unchanged without a
        normaliser."""
        if self.obs_norm is None:
            return obs
        if update:
            self.obs_norm.update(obs)
        return self.obs_norm(obs)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """What actor and critic read: encoder(x), or x itself without an encoder."""
        return x if self.encoder is None else self.encoder(x)

    def value(self, x: torch.Tensor) -> torch.Tensor:
        """V(s): input x = normalize(obs) [B, obs_dim] → [B]."""
        return self.critic(self.features(x)).squeeze(-1)

    def evaluate(
        self,
        x: torch.Tensor,
        actions: torch.Tensor,
        *,
        mask: torch.Tensor | None = None,
        extras: dict[str, Any] | None = None,
    ) -> Evaluation:
        """(log π(a|s) [B], entropy [B], V(s) [B]) for given actions at inputs x, with grad.
        mask and extras are unused: one action per row, exact log-probs."""
        h = self.features(x)
        logp, entropy = self._log_prob(self.actor(h), actions)
        return Evaluation(logp, entropy, self.critic(h).squeeze(-1))

    def _log_prob(
        self, out: torch.Tensor, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(log π(a|s), entropy) from the actor's output (logits, or the Gaussian mean)."""
        if self.nvec is not None:
            return categorical.log_prob_entropy(out, actions, self.nvec)
        if self.discrete:
            logp_all = torch.log_softmax(out, dim=-1)
            logp = logp_all.gather(-1, actions.long().unsqueeze(-1)).squeeze(-1)
            entropy = -(logp_all.exp() * logp_all).sum(-1)
        else:
            log_std = self.log_std.expand_as(out)
            z = (actions - out) / log_std.exp()
            logp = (-0.5 * z**2 - log_std - 0.5 * math.log(2 * math.pi)).sum(-1)
            entropy = (0.5 + 0.5 * math.log(2 * math.pi) + log_std).sum(-1)
        return logp, entropy

    @torch.no_grad()
    def sample(
        self,
        x: torch.Tensor,
        *,
        generator: torch.Generator | None = None,
        deterministic: bool = False,
    ) -> Sample:
        """Sample (or, deterministic, take the mode of) π(·|s) at inputs x = normalize(obs):
        actions, log π(a|s) [B], entropy [B], V(s) [B]."""
        out = self.actor(self.features(x))
        if self.nvec is not None:
            if deterministic:
                actions = categorical.mode(out, self.nvec)
            else:
                actions = categorical.sample(out, self.nvec, generator)
        elif self.discrete:
            if deterministic:
                actions = out.argmax(-1)
            else:
                probs = torch.softmax(out, dim=-1)
                actions = torch.multinomial(probs, 1, generator=generator).squeeze(-1)
        elif deterministic:
            actions = out
        else:
            noise = torch.randn(out.shape, generator=generator, dtype=out.dtype)
            actions = out + self.log_std.exp() * noise
        logp, entropy = self._log_prob(out, actions)  # one actor pass; V from `value`
        return Sample(actions, logp, entropy=entropy, values=self.value(x))

    @torch.no_grad()
    def mode(self, x: torch.Tensor) -> torch.Tensor:
        """The most likely action at inputs x = normalize(obs): `sample(x,
        deterministic=True).actions` from one actor pass, without the log-prob, entropy and
        critic that evaluation does not read."""
        out = self.actor(self.features(x))
        if self.nvec is not None:
            return categorical.mode(out, self.nvec)
        return out.argmax(-1) if self.discrete else out

    def act(
        self,
        x: torch.Tensor,
        generator: torch.Generator | None = None,
        *,
        deterministic: bool = False,
    ) -> Sample:
        """`sample` under the name callers used before the protocol."""
        return self.sample(x, generator=generator, deterministic=deterministic)


def observation_inputs(observation_space, kwargs: dict) -> tuple[int, dict]:
    """The flat input width of an actor-critic for `observation_space` and its keyword
    arguments with the space's encoder (a CNN for images) added; refuses a space it cannot
    read and normalize_obs with images. One home for every actor-critic built from spaces."""
    check_observation_space(observation_space)
    if kwargs.get("normalize_obs") and has_image(observation_space):
        raise ValueError(
            f"normalize_obs=true with image observations ({observation_space}): images are "
            "scaled by 1/255 instead (SB3's is_image_space); accepted: normalize_obs=false"
        )
    encoder, features = make_encoder(observation_space)
    if encoder is not None:
        kwargs = {**kwargs, "encoder": encoder, "features": features}
    return flat_dim(observation_space), kwargs


def make_actor_critic(observation_space, action_space, **kwargs) -> ActorCritic:
    """An ActorCritic sized for gymnasium spaces (policies/spaces.py): observations Box,
    Discrete (one-hot), MultiDiscrete, MultiBinary, images (a CNN encoder) or Dict/Tuple
    of these; actions Discrete, MultiDiscrete (a product of categoricals) or Box. Any
    other space is a ValueError naming it."""
    from gymnasium import spaces

    nvec = action_nvec(action_space)
    obs_dim, kwargs = observation_inputs(observation_space, kwargs)
    if isinstance(action_space, spaces.Discrete):
        return ActorCritic(obs_dim, int(action_space.n), discrete=True, **kwargs)
    if isinstance(action_space, spaces.MultiDiscrete):
        return ActorCritic(obs_dim, sum(nvec), discrete=True, nvec=nvec, **kwargs)
    return ActorCritic(obs_dim, int(math.prod(action_space.shape)), discrete=False, **kwargs)
