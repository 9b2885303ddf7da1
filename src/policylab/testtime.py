"""Test-time, per-instance policy gradient in latent space (papers/seed_agents.md §A9):
LatentSeek and the text-only reading of DMLR, with the baselines their arena compares.

Nothing here trains the model's weights: each method optimises latent vectors for one
input and decodes an answer from them.

- `latentseek`: LatentSeek (Li et al., arXiv:2505.13308; code bigai-nlco/LatentSeek
  `src/opt_generation.py:optimized_generation`). z = the last-layer hidden states of the
  first ℓ = min(⌊ρL⌋, 300) tokens of the greedy answer; while R ≤ threshold (at most
  `steps` times): loss = −R · Σ_j log softmax(W_head z_j)[argmax_j], one Adam step on z,
  prefix = argmax(W_head z), greedy continuation from prompt + prefix, re-score.
- `latent_confidence_pg`: DMLR-text (arXiv:2512.12623, text only, every constant ours):
  the K pause embeddings at the end of the input become z; M perturbations z + σε are
  decoded greedily and scored by C = −mean_j H_k(j); z ← z + η·(1/M)Σ_m (C_m − C̄) ε_m/σ.
- baselines: `greedy`, `best_of_n` (T = 1 samples, stop at the first accepted reward),
  `best_of_m_by_confidence` (T = 1 samples, the most confident one).

Rewards: `verifier_reward` is LatentSeek's self-verification score (weights 2/1/2/1 and the
format rule); the tiny model cannot verify itself, so `OracleReward` stands in: the task's
verifier through the same formula (every check passes or every check fails: 0 or −1), and
its noisy form flips that label with probability `flip`.

Counts per instance: `reward_calls`, `decodes` (answers decoded, each a full greedy or
sampled decode) and `forward_passes` (model calls over one sequence; a batched call over
B rows counts B).
"""

from __future__ import annotations

import logging
import math
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import torch

from policylab.tasks.base import extract_answer

log = logging.getLogger(__name__)

# LatentSeek's four self-verification questions and their weights [code src/rewards/reward.py]
VERIFIER_WEIGHTS = {"calculation": 2.0, "answer": 1.0, "completeness": 2.0, "understanding": 1.0}
FORMAT_PENALTY = 2.0  # [code src/rewards/reward.py] a failed answer-format rule adds −2
MAX_UPDATE_LENGTH = 300  # [code src/opt_generation.py] ℓ is capped at 300 tokens


def verifier_reward(
    passed: Mapping[str, bool],
    format_ok: bool = True,
    weights: Mapping[str, float] = VERIFIER_WEIGHTS,
) -> float:
    """LatentSeek's reward: R = −(Σ_{failed} w + 2·[format failed]) / Σ w, in [−4/3, 0].

    `passed`: question → whether the verifier said yes (every key of `weights`).
    With weights 2/1/2/1: answer and completeness failing give −3/6 = −0.5."""
    missing = sorted(set(weights) - set(passed))
    if missing:
        raise ValueError(f"verifier_reward: no verdict for {', '.join(missing)}")
    failed = sum(w for name, w in weights.items() if not passed[name])
    failed += 0.0 if format_ok else FORMAT_PENALTY
    return 0.0 - failed / sum(weights.values())  # 0.0, not −0.0, when all pass


class OracleReward:
    """The task's verifier as LatentSeek's self-reward (a perfect verifier: 0 right, −1
    wrong), or a noisy one that flips the label with probability `flip` (seeded).
    Callable on one completion; counts its calls and flips."""

    def __init__(self, task, example: dict, *, flip: float = 0.0, seed: int = 0) -> None:
        if not 0.0 <= flip <= 1.0:
            raise ValueError(f"oracle reward: flip={flip!r}; accepted: a probability in [0, 1]")
        self.task, self.example, self.flip = task, example, flip
        self.rng = random.Random(seed)
        self.calls = 0
        self.flips = 0
        self.unparsed = 0  # completions without an <answer> block: wrong (−1), counted

    def __call__(self, completion: str) -> float:
        self.calls += 1
        if extract_answer(completion) is None:
            self.unparsed += 1
            log.debug("oracle reward: no <answer> block in %r: scored wrong", completion)
        right = self.task.verify(completion, self.example) >= 1.0
        if self.flip and self.rng.random() < self.flip:
            right = not right
            self.flips += 1
        return verifier_reward(dict.fromkeys(VERIFIER_WEIGHTS, right))


def update_length(length: int, rho: float, cap: int = MAX_UPDATE_LENGTH) -> int:
    """ℓ = min(⌊ρ·L⌋, cap): how many answer positions LatentSeek optimises (0: none)."""
    return min(int(math.floor(rho * length)), cap)


def latent_step(
    z: torch.Tensor, head: torch.Tensor, reward: float, optimizer: torch.optim.Optimizer
) -> float:
    """One LatentSeek update of z [ℓ, H] (a leaf the optimiser owns) under the output
    matrix `head` [V, H]: loss = −R · Σ_j log(softmax(head z_j)[a_j] + 1e-8 + 1e-10) with
    a_j = argmax_j (not a sample) [code opt_generation.py]; returns the loss."""
    optimizer.zero_grad()
    probs = torch.softmax(z @ head.T, dim=-1) + 1e-8
    chosen = probs.argmax(dim=-1, keepdim=True)
    loss = -reward * torch.log(probs.gather(-1, chosen) + 1e-10).sum()
    loss.backward()
    optimizer.step()
    return float(loss.detach())


def topk_entropy(logits: torch.Tensor, k: int) -> torch.Tensor:
    """H_k: entropy of the top-k next-token probabilities renormalised, per position.
    logits [..., V] → [...]. (3, 2, 1, 0), k = 2 → 0.5822031."""
    top = torch.topk(logits, min(k, logits.shape[-1]), dim=-1).values
    logp = torch.log_softmax(top, dim=-1)
    return -(logp.exp() * logp).sum(-1)


@dataclass
class Decoded:
    """Decoded answers of a batch: ids (without eos), the logits [L_b+1, V] and the
    last-layer hidden states [L_b+1, H] at each generated position (eos included)."""

    ids: list[list[int]]
    logits: list[torch.Tensor]
    hidden: list[torch.Tensor]
    forward_passes: int


@torch.no_grad()
def decode(
    model,
    embeds: torch.Tensor,
    *,
    max_new_tokens: int,
    eos_id: int | None,
    temperature: float = 0.0,
    generator: torch.Generator | None = None,
) -> Decoded:
    """Decode from input embeddings [B, P, H] (every row the same length): greedy when
    `temperature` is 0, else sampled at that temperature."""
    trunk, head = model.base_model, model.get_output_embeddings()
    table = model.get_input_embeddings()
    batch = embeds.shape[0]
    ids: list[list[int]] = [[] for _ in range(batch)]
    logits: list[list[torch.Tensor]] = [[] for _ in range(batch)]
    hidden: list[list[torch.Tensor]] = [[] for _ in range(batch)]
    live = torch.ones(batch, dtype=torch.bool)
    passes = 0
    for _ in range(max_new_tokens):
        passes += int(live.sum())
        h = trunk(inputs_embeds=embeds, use_cache=False).last_hidden_state[:, -1]
        out = head(h).float()
        if temperature > 0:
            probs = torch.softmax(out / temperature, dim=-1)
            nxt = torch.multinomial(probs, 1, generator=generator).squeeze(-1)
        else:
            nxt = out.argmax(-1)
        for b in torch.nonzero(live).flatten().tolist():
            logits[b].append(out[b])
            hidden[b].append(h[b])
            if eos_id is not None and int(nxt[b]) == eos_id:
                live[b] = False
            else:
                ids[b].append(int(nxt[b]))
        if not live.any():
            break
        embeds = torch.cat([embeds, table(nxt)[:, None]], dim=1)
    return Decoded(ids, [torch.stack(x) for x in logits], [torch.stack(x) for x in hidden], passes)


@dataclass
class Solved:
    """One instance's outcome: the final completion, the first one decoded (None for
    latent_confidence_pg, which decodes none before its first update), and the cost."""

    completion: str
    initial: str | None
    iterations: int = 0
    rewards: list[float] = field(default_factory=list)
    reward_calls: int = 0
    decodes: int = 0
    forward_passes: int = 0
    confidence: float | None = None
    latent: torch.Tensor | None = None  # the final latent vectors (latent_confidence_pg's z)


def _embed(model, ids: list[int]) -> torch.Tensor:
    return model.get_input_embeddings()(torch.tensor([ids]))


def _text(tok, ids: list[int]) -> str:
    return tok.decode(ids, skip_special_tokens=True)


def greedy(model, tok, prompt_ids: list[int], *, max_new_tokens: int = 24) -> Solved:
    """The greedy answer: no reward call, one decode."""
    out = decode(model, _embed(model, prompt_ids), max_new_tokens=max_new_tokens, eos_id=_eos(tok))
    text = _text(tok, out.ids[0])
    return Solved(text, text, decodes=1, forward_passes=out.forward_passes)


def latentseek(
    model,
    tok,
    prompt_ids: list[int],
    reward_fn: Callable[[str], float],
    *,
    rho: float = 0.1,
    lr: float = 0.03,
    steps: int = 10,
    threshold: float = -0.2,
    start: int = 0,
    max_new_tokens: int = 24,
) -> Solved:
    """LatentSeek on one input (module docstring). `start`: the first optimised answer
    position s (0 in the paper's code). Stops as soon as R > `threshold`; returns the last
    decoded answer. The model's weights are never changed."""
    eos = _eos(tok)
    first = decode(model, _embed(model, prompt_ids), max_new_tokens=max_new_tokens, eos_id=eos)
    answer = first.ids[0]
    text = _text(tok, answer)
    solved = Solved(text, text, decodes=1, forward_passes=first.forward_passes)
    reward = reward_fn(text)
    solved.rewards.append(reward)
    solved.reward_calls = 1
    ell = min(update_length(len(answer), rho), max(len(answer) - start, 0))
    if reward > threshold or ell == 0:
        return solved
    head = model.get_output_embeddings().weight.detach()
    z = first.hidden[0][start : start + ell].detach().clone().requires_grad_(True)
    optimizer = torch.optim.Adam([z], lr=lr)
    fixed = answer[:start]
    while solved.iterations < steps and reward <= threshold:
        latent_step(z, head, reward, optimizer)
        prefix = fixed + (z.detach() @ head.T).argmax(-1).tolist()
        out = decode(
            model,
            _embed(model, prompt_ids + prefix),
            max_new_tokens=max(max_new_tokens - len(prefix), 1),
            eos_id=eos,
        )
        solved.completion = _text(tok, prefix + out.ids[0])
        solved.decodes += 1
        solved.forward_passes += out.forward_passes
        solved.iterations += 1
        reward = reward_fn(solved.completion)
        solved.rewards.append(reward)
        solved.reward_calls += 1
    return solved


def best_of_n(
    model,
    tok,
    prompt_ids: list[int],
    reward_fn: Callable[[str], float],
    *,
    n: int = 10,
    threshold: float = -0.2,
    temperature: float = 1.0,
    generator: torch.Generator | None = None,
    max_new_tokens: int = 24,
) -> Solved:
    """n samples at `temperature`, scored in order until one has R > `threshold` (that one
    is returned, else the last). Reward calls = samples scored."""
    out = _samples(model, tok, prompt_ids, n, temperature, generator, max_new_tokens)
    texts = [_text(tok, ids) for ids in out.ids]
    solved = Solved(texts[0], texts[0], decodes=n, forward_passes=out.forward_passes)
    for text in texts:
        solved.completion = text
        solved.rewards.append(reward_fn(text))
        solved.reward_calls += 1
        if solved.rewards[-1] > threshold:
            break
    return solved


def confidence(decoded: Decoded, topk: int) -> list[float]:
    """C = −mean_j H_k(j) over each row's generated positions (the eos step included)."""
    return [-float(topk_entropy(lg, topk).mean()) for lg in decoded.logits]


def latent_confidence_pg(
    model,
    tok,
    prompt_ids: list[int],
    *,
    K: int = 4,  # noqa: N803 - the paper's symbol
    M: int = 8,  # noqa: N803
    sigma: float = 0.1,
    lr: float = 0.1,
    steps: int = 10,
    topk: int = 5,
    generator: torch.Generator | None = None,
    max_new_tokens: int = 24,
) -> Solved:
    """DMLR-text on one input whose last K ids are pause tokens (module docstring): z
    [K, H] starts at their embeddings; each step decodes M perturbed inputs greedily and
    moves z along the score-function estimate of ∇ E[C]; the answer is the greedy decode
    from the final z. All constants ours (seed_agents.md §A9)."""
    if K < 1 or len(prompt_ids) <= K:
        raise ValueError(
            f"latent_confidence_pg: K={K} pause positions in a prompt of "
            f"{len(prompt_ids)} ids; accepted: 1 ≤ K < prompt length"
        )
    eos = _eos(tok)
    with torch.no_grad():
        base = _embed(model, prompt_ids)[0]
    fixed, z = base[:-K], base[-K:].clone()
    solved = Solved("", None)  # no unperturbed decode before the first step
    for _ in range(steps):
        eps = torch.randn(M, *z.shape, generator=generator)
        embeds = torch.cat([fixed.expand(M, -1, -1), z + sigma * eps], dim=1)
        out = decode(model, embeds, max_new_tokens=max_new_tokens, eos_id=eos)
        scores = torch.tensor(confidence(out, topk))
        z = z + lr * ((scores - scores.mean())[:, None, None] * eps).mean(0) / sigma
        solved.decodes += M
        solved.forward_passes += out.forward_passes
        solved.iterations += 1
    final = decode(model, torch.cat([fixed, z])[None], max_new_tokens=max_new_tokens, eos_id=eos)
    solved.completion = _text(tok, final.ids[0])
    solved.confidence = confidence(final, topk)[0]
    solved.latent = z
    solved.decodes += 1
    solved.forward_passes += final.forward_passes
    return solved


def best_of_m_by_confidence(
    model,
    tok,
    prompt_ids: list[int],
    *,
    m: int = 81,
    topk: int = 5,
    temperature: float = 1.0,
    generator: torch.Generator | None = None,
    max_new_tokens: int = 24,
) -> Solved:
    """m samples at `temperature`; the one with the highest confidence C is the answer.
    m = 81 matches latent_confidence_pg's decodes at its defaults (10 × 8 + 1)."""
    out = _samples(model, tok, prompt_ids, m, temperature, generator, max_new_tokens)
    scores = confidence(out, topk)
    best = max(range(m), key=scores.__getitem__)
    text = _text(tok, out.ids[best])
    solved = Solved(text, _text(tok, out.ids[0]), decodes=m, forward_passes=out.forward_passes)
    solved.confidence = scores[best]
    return solved


def _samples(model, tok, prompt_ids, n: int, temperature, generator, max_new_tokens) -> Decoded:
    """n continuations of one prompt at `temperature`, decoded together (the best-of
    baselines draw their candidates with it)."""
    embeds = _embed(model, prompt_ids).expand(n, -1, -1)
    return decode(
        model,
        embeds,
        max_new_tokens=max_new_tokens,
        eos_id=_eos(tok),
        temperature=temperature,
        generator=generator,
    )


def _eos(tok) -> int | None:
    return tok.eos_token_id
