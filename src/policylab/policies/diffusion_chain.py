"""DPPO's diffusion policy for control: an ε-prediction DDPM over the action, conditioned on
the observation, whose last K′ denoising steps are the fine-tuned "tokens"
(papers/seed_generative.md G7.1; Ren et al., arXiv:2409.00588, code `irom-lab/dppo`).

Chain (DDPM index t = K−1 … 0, noisiest first; actions scaled to u ∈ [−1, 1]):

    x_K ~ N(0, I);  ε̂ = ε_θ(x_t, t, o);  x̂_0 = clip((x_t − √(1−ᾱ_t)·ε̂)/√ᾱ_t, ±1)
    μ_t = c1_t·x̂_0 + c2_t·x_t;  s_t = √β̃_t (DDPM posterior)
    x_{t−1} = μ_t + max(s_t, s_min)·clip(z, ±z_clip),  z ~ N(0, I)

The first K − K′ steps use a frozen copy of the pre-trained ε-net, the last K′ the trained
one [code dppo: VPGDiffusion.p_mean_var, forward]. A row's log-probs are the K′ step
densities ℓp[i,k] = clamp(mean_d log N(x_{t−1}; μ_θ, max(s_t, s_min)²), −5, 2)
[code dppo: get_logprobs, PPODiffusion.loss] — `evaluate` returns them [B, K′] as the token
axis; `sample` stores the chain and the old step log-probs in its extras. s_min is one
attribute, used at sampling and scoring, so r ≡ 1 at θ_old. The critic is FlowPolicy's."""

from __future__ import annotations

import copy
import math
from typing import Any

import torch
from torch import nn

from policylab.algebra.generative import DPPO_LOGP_CLAMP, gaussian_step_logprob
from policylab.policies.base import Evaluation, Sample
from policylab.policies.diffusion import time_embedding
from policylab.policies.mlp import ActorCritic, RunningMeanStd, _layer, _mlp
from policylab.policies.spaces import mlp_input_dim


def cosine_betas(steps: int, s: float = 0.008) -> torch.Tensor:
    """β_t of the cosine schedule, ᾱ(t) = cos²(((t/K) + s)/(1 + s)·π/2)/ᾱ(0), β clipped at
    0.999 [code dppo: model/diffusion/sampling.py cosine_beta_schedule, s = 0.008]. [K]."""
    t = torch.arange(steps + 1, dtype=torch.float64) / steps
    abar = torch.cos((t + s) / (1 + s) * math.pi / 2) ** 2
    abar = abar / abar[0]
    return (1 - abar[1:] / abar[:-1]).clamp(0, 0.999)


class DiffusionChainPolicy(nn.Module):
    """ε-net ε_θ(x, t, o) (and its frozen copy) with a critic V(o), for a D-dim Box action
    with bounds [low, high]. Defaults: K = 10, K′ = 5 (G7.3), s_min 0.1, z_clip 3, x̂_0 clip
    1 [code dppo: min_sampling_denoising_std, randn_clip_value, denoised_clip_value]."""

    discrete = False
    log_std = None  # no Gaussian head; the trainer's std metric skips it

    def __init__(
        self,
        obs_dim: int,
        action_dim: int,
        *,
        low: torch.Tensor | float = -1.0,
        high: torch.Tensor | float = 1.0,
        hidden: tuple[int, ...] = (256, 256),
        critic_hidden: tuple[int, ...] = (64, 64),
        normalize_obs: bool = False,
        denoising_steps: int = 10,
        fine_tuned_steps: int = 5,
        std_min: float = 0.1,
        z_clip: float = 3.0,
        denoised_clip: float = 1.0,
    ) -> None:
        super().__init__()
        if not 1 <= fine_tuned_steps <= denoising_steps:
            raise ValueError(
                f"fine_tuned_steps = {fine_tuned_steps}; accepted: 1..denoising_steps "
                f"({denoising_steps})"
            )
        if not std_min > 0:
            raise ValueError(f"std_min = {std_min}; accepted: > 0 (the step density needs it)")
        self.action_dim, self.steps, self.fine_tuned = action_dim, denoising_steps, fine_tuned_steps
        self.std_min, self.z_clip, self.denoised_clip = std_min, z_clip, denoised_clip
        low_t = torch.as_tensor(low, dtype=torch.float32).expand(action_dim)
        high_t = torch.as_tensor(high, dtype=torch.float32).expand(action_dim)
        self.register_buffer("action_mid", ((high_t + low_t) / 2).clone())
        self.register_buffer("action_half", ((high_t - low_t) / 2).clone())
        betas = cosine_betas(denoising_steps)
        alphas = 1 - betas
        abar = torch.cumprod(alphas, 0)
        abar_prev = torch.cat([torch.ones(1, dtype=abar.dtype), abar[:-1]])
        var = betas * (1 - abar_prev) / (1 - abar)
        for name, value in {
            "sqrt_abar": abar.sqrt(),
            "sqrt_one_minus_abar": (1 - abar).sqrt(),
            "mu_x0": betas * abar_prev.sqrt() / (1 - abar),
            "mu_xt": (1 - abar_prev) * alphas.sqrt() / (1 - abar),
            "post_std": var.clamp_min(1e-20).sqrt(),
        }.items():
            self.register_buffer(name, value.float())
        self.obs_norm = RunningMeanStd((obs_dim,)) if normalize_obs else None
        layers: list[nn.Module] = []
        n_in = obs_dim + action_dim + 9
        for width in hidden:
            layers += [_layer(n_in, width, math.sqrt(2)), nn.ReLU()]
            n_in = width
        layers.append(_layer(n_in, action_dim, 0.01))
        self.eps_net = nn.Sequential(*layers)
        self.eps_frozen = copy.deepcopy(self.eps_net).requires_grad_(False)
        self.critic = _mlp(obs_dim, critic_hidden, 1, head_gain=1.0)

    normalize = ActorCritic.normalize  # raw observations → the networks' input x

    def freeze_reference(self) -> None:
        """The frozen first K − K′ steps become the current ε-net (after pre-training)."""
        self.eps_frozen.load_state_dict(self.eps_net.state_dict())

    critic_lr: float | None = None  # the critic's own lr (DPPO's critic_lr); None = the run's

    def ppo_parameters(self) -> list[dict]:
        """What the trainer's optimiser updates, as param groups: the fine-tuned ε-net (the
        run's lr) and the critic (`critic_lr` when set)."""
        critic = {"params": list(self.critic.parameters())}
        if self.critic_lr is not None:
            critic["lr"] = self.critic_lr
        return [{"params": list(self.eps_net.parameters())}, critic]

    def value(self, x: torch.Tensor) -> torch.Tensor:
        """V(s): input x = normalize(obs) [B, obs_dim] → [B]."""
        return self.critic(x).squeeze(-1)

    # ---- the chain --------------------------------------------------------------------------
    def step_mean(self, x: torch.Tensor, t: int, feats: torch.Tensor) -> torch.Tensor:
        """μ_t(x_t, o) of DDPM step t (trained net for t < K′, frozen otherwise): [B, D]."""
        net = self.eps_net if t < self.fine_tuned else self.eps_frozen
        tau = torch.full((x.shape[0], 1), t / self.steps, dtype=x.dtype)
        eps = net(torch.cat([feats, x, time_embedding(tau)], dim=-1))
        x0 = (x - self.sqrt_one_minus_abar[t] * eps) / self.sqrt_abar[t]
        if self.denoised_clip is not None:
            x0 = x0.clamp(-self.denoised_clip, self.denoised_clip)
        return self.mu_x0[t] * x0 + self.mu_xt[t] * x

    def step_std(self, t: int) -> torch.Tensor:
        """max(s_t, s_min): the one std of sampling and scoring."""
        return self.post_std[t].clamp_min(self.std_min)

    def run_chain(
        self,
        feats: torch.Tensor,
        generator: torch.Generator | None = None,
        *,
        deterministic: bool = False,
    ) -> torch.Tensor:
        """x_K → x_0: the last K′ + 1 states [B, K′+1, D] (u-space). deterministic: x_K = 0
        and z = 0 at every step (our choice for evaluation, as FlowPolicy's x_0 = 0)."""
        shape = (feats.shape[0], self.action_dim)
        zeros = torch.zeros(shape, dtype=feats.dtype)
        x = zeros if deterministic else torch.randn(shape, generator=generator, dtype=feats.dtype)
        kept = [x] if self.fine_tuned == self.steps else []
        for t in reversed(range(self.steps)):
            mean = self.step_mean(x, t, feats)
            if deterministic:
                z = zeros
            else:
                z = torch.randn(shape, generator=generator, dtype=feats.dtype)
                z = z.clamp(-self.z_clip, self.z_clip)
            x = mean + self.step_std(t) * z
            if t <= self.fine_tuned:  # x_{K′} (the fine-tuned part's start) and after
                kept.append(x)
        return torch.stack(kept, 1)

    def chain_logprobs(self, feats: torch.Tensor, chain: torch.Tensor) -> torch.Tensor:
        """ℓp_θ[i, k] of the stored chain [B, K′+1, D], noisiest → cleanest: [B, K′]."""
        out = []
        for k in range(self.fine_tuned):
            t = self.fine_tuned - 1 - k
            mean = self.step_mean(chain[:, k], t, feats)
            out.append(
                gaussian_step_logprob(
                    chain[:, k + 1], mean, self.step_std(t), clamp=DPPO_LOGP_CLAMP
                )
            )
        return torch.stack(out, 1)

    def to_action(self, u: torch.Tensor) -> torch.Tensor:
        return self.action_mid + self.action_half * u

    def to_unit(self, actions: torch.Tensor) -> torch.Tensor:
        return (actions - self.action_mid) / self.action_half

    # ---- the policy protocol ----------------------------------------------------------------
    def evaluate(
        self,
        x: torch.Tensor,
        actions: torch.Tensor,
        *,
        mask: torch.Tensor | None = None,
        extras: dict[str, Any] | None = None,
    ) -> Evaluation:
        """(ℓp_θ [B, K′] on the stored chain `extras["chain"]`, entropy [B] = 0 (DPPO has no
        entropy term), V [B])."""
        if not extras or "chain" not in extras:
            raise ValueError("DiffusionChainPolicy.evaluate needs the rollout's stored chain")
        values = self.critic(x).squeeze(-1)
        return Evaluation(self.chain_logprobs(x, extras["chain"]), torch.zeros_like(values), values)

    @torch.no_grad()
    def sample(
        self,
        x: torch.Tensor,
        *,
        generator: torch.Generator | None = None,
        deterministic: bool = False,
    ) -> Sample:
        """Run the chain at inputs x = normalize(obs): actions [B, D] (scaled to the Box),
        logprobs = mean_k ℓp_old [B] (a summary; the loss reads the steps), values [B],
        extras chain [B, K′+1, D] and chain_logp [B, K′]."""
        chain = self.run_chain(x, generator, deterministic=deterministic)
        logp = self.chain_logprobs(x, chain)
        values = self.critic(x).squeeze(-1)
        extras = {"chain": chain, "chain_logp": logp}
        return Sample(self.to_action(chain[:, -1]), logp.mean(-1), values=values, extras=extras)

    act = ActorCritic.act

    def bc_loss(
        self, x: torch.Tensor, actions: torch.Tensor, generator: torch.Generator | None = None
    ) -> torch.Tensor:
        """DDPM's ε-prediction loss for behaviour cloning: t ~ U{0..K−1}, x_t = √ᾱ_t·u +
        √(1 − ᾱ_t)·ε, mean (ε_θ(x_t, t, o) − ε)² [code dppo: DiffusionModel.p_losses]."""
        u = self.to_unit(actions).clamp(-1, 1)
        t = torch.randint(self.steps, (u.shape[0],), generator=generator)
        eps = torch.randn(u.shape, generator=generator)
        xt = self.sqrt_abar[t, None] * u + self.sqrt_one_minus_abar[t, None] * eps
        tau = (t.float() / self.steps).unsqueeze(-1)
        pred = self.eps_net(torch.cat([x, xt, time_embedding(tau)], dim=-1))
        return ((pred - eps) ** 2).mean()


def make_diffusion_chain_policy(observation_space, action_space, **kwargs) -> DiffusionChainPolicy:
    """A DiffusionChainPolicy sized for gymnasium spaces (flat observations, Box actions)."""
    from gymnasium import spaces

    if not isinstance(action_space, spaces.Box):
        raise ValueError(
            f"action space {action_space} is not supported by the diffusion chain policy "
            "(dppo, adpo_provisional); expected a Box (continuous actions)"
        )
    obs_dim = mlp_input_dim(observation_space, "diffusion chain (dppo)")
    low = torch.as_tensor(action_space.low, dtype=torch.float32).reshape(-1)
    high = torch.as_tensor(action_space.high, dtype=torch.float32).reshape(-1)
    return DiffusionChainPolicy(obs_dim, low.numel(), low=low, high=high, **kwargs)
