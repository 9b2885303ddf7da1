"""RepES — representation-driven evolution strategies (Nabati, Tennenholtz & Mannor,
Representation-Driven Reinforcement Learning, ICML 2023, arXiv:2305.19922, Alg. 5;
papers/seed_control_theory.md §7).

One round (Alg. 5), θ the policy's flat parameters [D]:
    1. evaluation set θ ± δ_i (δ ∼ N(0, ν²I), i ≤ n_eval/2): one trajectory each; the
       (parameters, return) pairs go into a history buffer;
    2. the representation f is trained on the buffer with a linear return decoder
       (deterministic encoder: the ELBO reduces to the squared error of κᵀf(θ) vs G);
    3. bandit statistics over x = [f(θ'), 1]: V = λI + Σxxᵀ, b = Σxy, ŵ = V⁻¹b;
    4. decision set θ ± δ'_j, j ≤ N_dec/2, valued by the bandit: TS v̂ = ⟨x, w̃⟩ with
       w̃ ∼ N(ŵ, σ²V⁻¹) (the paper's grid-world) or OFUL v̂ = ⟨x, ŵ⟩ + α‖x‖_{V⁻¹};
    5. g = (1/N)Σ_j [v̂(θ+δ'_j) − v̂(θ−δ'_j)]δ'_j,  θ ← θ + α_ES·g   (es.py, Alg. 4).

Representation, our choice (the paper's is a DWSNet, 4 layers × 16): an MLP over the
centred, scaled parameters (θ' − θ_t)/ν → tanh hidden → a latent z; or a fixed Gaussian
random projection of the same input (`representation="random_projection"`). Returns are
standardised by the buffer's mean and std for the encoder and the ridge fit and mapped
back, so bandit values are in return units (ES and RepES share α_ES).

Also here: `inner_trajectory_value`, the quantity behind the paper's Prop. 3.2, which does
not equal v(π)/(1 − γ) in general (§7.1)."""

from __future__ import annotations

import torch

from policylab.search.es import antithetic_perturbations, es_gradient, es_step
from policylab.search.linear_bandit import (
    oful_scores,
    ridge_stats,
    ridge_weights,
    thompson_weights,
)
from policylab.tabular.mdp import TabularMDP
from policylab.tabular.solve import evaluate, occupancy

DTYPE = torch.float64
LOW = torch.float32  # the encoder's precision: its inputs are [B, D] with D ≈ 4,300

# --- a functional MLP: parameters are one flat vector, batched over rows -------------


def mlp_sizes(n_in: int, hidden: tuple[int, ...], n_out: int) -> list[tuple[int, int]]:
    """Layer shapes (out, in): n_in → hidden… → n_out."""
    dims = [n_in, *hidden, n_out]
    return [(dims[i + 1], dims[i]) for i in range(len(dims) - 1)]


def mlp_numel(sizes: list[tuple[int, int]]) -> int:
    return sum(o * i + o for o, i in sizes)


def mlp_init(sizes: list[tuple[int, int]], generator: torch.Generator) -> torch.Tensor:
    """Flat parameters, each weight and bias U(±1/√fan_in) (torch.nn.Linear's rule) [D]."""
    parts = []
    for o, i in sizes:
        bound = i**-0.5
        parts.append((2 * torch.rand(o * i + o, generator=generator, dtype=DTYPE) - 1) * bound)
    return torch.cat(parts)


def mlp_apply(params: torch.Tensor, sizes: list[tuple[int, int]], x: torch.Tensor):
    """tanh MLP with a linear last layer. params: [B, D]; x: [n, in] (shared) or
    [B, n, in] → [B, n, out]."""
    if params.ndim != 2 or params.shape[1] != mlp_numel(sizes):
        raise ValueError(
            f"params: expected [B, {mlp_numel(sizes)}], got shape {tuple(params.shape)}"
        )
    h = x.expand(params.shape[0], *x.shape) if x.ndim == 2 else x
    at = 0
    for k, (o, i) in enumerate(sizes):
        W = params[:, at : at + o * i].reshape(-1, o, i)
        bias = params[:, at + o * i : at + o * i + o]
        at += o * i + o
        h = torch.einsum("bni,boi->bno", h, W) + bias.unsqueeze(1)
        if k < len(sizes) - 1:
            h = torch.tanh(h)
    return h


def policy_tables(params: torch.Tensor, sizes: list[tuple[int, int]]) -> torch.Tensor:
    """π_θ(·|s) = softmax(MLP_θ(onehot(s))) for every state → [B, S, A] (S = sizes[0][1])."""
    n_states = sizes[0][1]
    eye = torch.eye(n_states, dtype=params.dtype)
    return torch.softmax(mlp_apply(params, sizes, eye), dim=-1)


# --- the representation and its linear decoder ----------------------------------------


def encoder_sizes(dim: int, options) -> list[tuple[int, int]]:
    """The encoder MLP: D → encoder_hidden (tanh) → latent_dim."""
    return mlp_sizes(dim, (options.encoder_hidden,), options.latent_dim)


def init_representation(dim: int, options, generator: torch.Generator) -> dict:
    """The representation's state (flat float32 tensors: the encoder runs in single
    precision, the bandit in double): encoder and decoder weights and Adam moments, or
    the fixed projection M [latent_dim, D] ∼ N(0, 1)."""
    if options.representation == "random_projection":
        M = torch.randn(options.latent_dim, dim, generator=generator, dtype=LOW)
        return {"proj": M}
    enc = mlp_init(encoder_sizes(dim, options), generator).to(LOW)
    dec = torch.zeros(options.latent_dim + 1, dtype=LOW)
    zeros = torch.zeros(enc.numel() + dec.numel(), dtype=LOW)
    return {"enc": enc, "dec": dec, "adam_m": zeros, "adam_v": zeros.clone(), "adam_t": 0}


def encode(rep: dict, U: torch.Tensor, antithetic: bool = False) -> torch.Tensor:
    """f from the offsets U = (θ' − θ_t)/ν [B, D] → z [B, d] (float32): the tanh MLP
    (`rep["enc"]`, shapes `rep["sizes"]`) or, when `rep` holds "proj", U·Mᵀ/√D. With
    `antithetic`, U holds the + half and the result is [f(+U); f(−U)] [2B, d]: the first
    layer's product is computed once (W₁(−u) = −W₁u)."""
    U = U.to(LOW)
    if "proj" in rep:
        z = U @ rep["proj"].T / U.shape[1] ** 0.5
        return torch.cat([z, -z]) if antithetic else z
    (h, n_in), *rest = rep["sizes"]
    W1 = rep["enc"][: h * n_in].reshape(h, n_in)
    b1 = rep["enc"][h * n_in : h * n_in + h]
    A = U @ W1.T
    pre = torch.cat([A, -A]) if antithetic else A
    hidden = torch.tanh(pre + b1)
    return mlp_apply(rep["enc"][h * n_in + h :].unsqueeze(0), rest, hidden.unsqueeze(0))[0]


def features(z: torch.Tensor) -> torch.Tensor:
    """x = [z, 1]: the bandit's features with an intercept [B, d + 1]."""
    return torch.cat([z, torch.ones(z.shape[0], 1, dtype=z.dtype)], dim=1).to(DTYPE)


def train_encoder(rep: dict, U: torch.Tensor, targets: torch.Tensor, options, generator) -> float:
    """`options.encoder_steps` Adam steps on mean (κᵀ[f(u), 1] − y)² over minibatches of
    the buffer's offsets U [n, D] and standardised returns y [n]; updates rep["enc"],
    rep["dec"] and the Adam moments in place; returns the last loss. A random projection
    is not trained (returns nan)."""
    if "proj" in rep:
        return float("nan")
    b1, b2, eps = 0.9, 0.999, 1e-8  # Adam's defaults [Kingma & Ba 2015]
    y = targets.to(LOW)
    n_enc, loss = rep["enc"].numel(), torch.tensor(float("nan"))
    for _ in range(options.encoder_steps):
        idx = torch.randint(len(y), (min(options.encoder_batch, len(y)),), generator=generator)
        flat = torch.cat([rep["enc"], rep["dec"]]).requires_grad_(True)
        z = encode({"enc": flat[:n_enc], "sizes": rep["sizes"]}, U[idx])
        x = torch.cat([z, torch.ones(len(idx), 1, dtype=LOW)], dim=1)
        loss = (x @ flat[n_enc:] - y[idx]).pow(2).mean()
        (grad,) = torch.autograd.grad(loss, flat)
        rep["adam_t"] += 1
        rep["adam_m"] = b1 * rep["adam_m"] + (1 - b1) * grad
        rep["adam_v"] = b2 * rep["adam_v"] + (1 - b2) * grad**2
        t = rep["adam_t"]
        m_hat, v_hat = rep["adam_m"] / (1 - b1**t), rep["adam_v"] / (1 - b2**t)
        new = flat.detach() - options.encoder_lr * m_hat / (v_hat.sqrt() + eps)
        rep["enc"], rep["dec"] = new[:n_enc], new[n_enc:]
    return float(loss.detach())


def r_squared(pred: torch.Tensor, target: torch.Tensor) -> float:
    """1 − Σ(t − p)²/Σ(t − t̄)² (nan when the targets are constant)."""
    ss = (target - target.mean()).pow(2).sum()
    return float(1 - (target - pred).pow(2).sum() / ss) if ss > 1e-12 else float("nan")


# --- one RepES round ----------------------------------------------------------------


def rep_es_round(state: dict, options, rollout, generator: torch.Generator, exact=None):
    """Alg. 5, one round, in place on `state`: θ [D], the buffer (buf_theta [H, D], buf_G
    [H], buf_pos, buf_n) and the representation (`init_representation`'s keys).
    rollout(params [B, D]) → sampled returns [B]; exact(params [B, D]) → exact values [B]
    (metrics only: `bandit/linearity_r2` on held-out perturbations, `bandit/optimism`).
    Returns the metrics; `cost` = trajectories rolled out."""
    theta, std = state["theta"], options.perturbation_std
    D = theta.numel()
    rep = {k: state[k] for k in ("enc", "dec", "adam_m", "adam_v", "adam_t", "proj") if k in state}
    rep["sizes"] = encoder_sizes(D, options)
    # 1. evaluation set, rolled out and stored
    delta = antithetic_perturbations(options.trajectories // 2, D, std, generator)
    cand = torch.cat([theta + delta, theta - delta])
    returns = rollout(cand)
    n, H = cand.shape[0], state["buf_theta"].shape[0]
    slots = (state["buf_pos"] + torch.arange(n)) % H
    state["buf_theta"][slots] = cand.to(state["buf_theta"].dtype)
    state["buf_G"][slots] = returns
    state["buf_pos"] = int((state["buf_pos"] + n) % H)
    state["buf_n"] = min(state["buf_n"] + n, H)
    G_hist = state["buf_G"][: state["buf_n"]]
    U_hist = (state["buf_theta"][: state["buf_n"]] - theta.to(LOW)) / std
    mean, scale = G_hist.mean(), G_hist.std().clamp_min(1e-8)
    y = (G_hist - mean) / scale
    # 2. representation; 3. bandit statistics on the re-encoded buffer
    loss = train_encoder(rep, U_hist, y, options, generator)
    V, b = ridge_stats(features(encode(rep, U_hist)), y, options.ridge)
    w_hat = ridge_weights(V, b)
    # 4. decision set θ ± δ'_j valued by the bandit (return units)
    dec = antithetic_perturbations(options.decision_set // 2, D, std, generator, dtype=LOW)
    Xd = features(encode(rep, dec / std, antithetic=True))
    if options.bandit == "ts":
        score = Xd @ thompson_weights(V, w_hat, options.ts_scale, generator)
    else:
        score = oful_scores(Xd, V, w_hat, options.oful_alpha)
    v_hat = mean + scale * score
    state.update({k: v for k, v in rep.items() if k != "sizes"})
    # 5. ES step with the bandit's values
    half = dec.shape[0]
    g = es_gradient(v_hat[:half], v_hat[half:], dec.to(DTYPE))
    state["theta"] = es_step(theta, g, options.step)
    metrics = {
        "cost": n,
        "bandit/encoder_loss": loss,
        "rollout/return_mean": float(returns.mean()),
        "grad/norm": float(g.norm()),
    }
    if exact is not None:
        held = antithetic_perturbations(options.heldout // 2, D, std, generator)
        pred = mean + scale * features(encode(rep, held / std, antithetic=True)) @ w_hat
        metrics["bandit/linearity_r2"] = r_squared(
            pred, exact(torch.cat([theta + held, theta - held]))
        )
        best = int(v_hat.argmax())
        sign = 1.0 if best < half else -1.0
        best_params = theta + sign * dec[best % half].to(DTYPE)
        metrics["bandit/optimism"] = float(v_hat[best] - exact(best_params.unsqueeze(0))[0])
    return metrics


# --- Prop. 3.2 (§7.1, T7.3) ---------------------------------------------------------


def inner_trajectory_value(mdp: TabularMDP, pi: torch.Tensor, normalised: bool = True):
    """E_{s∼d_π} v(π, s) = Σ_s d_π(s)·V^π(s) (a 0-d tensor), the target of the paper's
    "inner trajectory sampling"; d_π = (1 − γ)ρᵀ(I − γP_π)⁻¹ when `normalised`, else the
    unnormalised ρᵀ(I − γP_π)⁻¹.

    The paper's Prop. 3.2 states E_{s∼d_π}v(π, s) = v(π)/(1 − γ) (unnormalised d). This
    does not hold in general: on MDP2 with π uniform, v = 7.773973 and v/(1 − γ) =
    77.739726, while the unnormalised expectation is 81.539688 (normalised 8.153969). It
    holds when ρ is stationary under π (ρᵀP_π = ρ): then d_π = ρ and the sum is ρᵀV = v
    (normalised) or v/(1 − γ) (unnormalised). The sampling option estimates this quantity,
    a different target from v(π)."""
    d = occupancy(mdp, pi)
    d = d if normalised else d / (1 - mdp.gamma)
    return d @ evaluate(mdp, pi).V
