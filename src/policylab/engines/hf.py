"""Batched sampling from any Hugging Face causal LM with a KV cache.

Prompts are left-padded and prefilled once; the cache is then repeated n times, so the
n samples of one prompt share its prefill. Each step feeds the last token of every live
row, samples with temperature / top-k / top-p from a seeded generator, and records the
log-prob of the sampled token under the temperature-scaled distribution (the quantity the
trainer recomputes, so the first update needs no extra forward pass while the policy is
unchanged). Rows stop at an end token (`end_token_ids`: the tokenizer's eos and every eos
of the model's generation config) or a stop string; the loop stops when all have.
"""

from __future__ import annotations

import inspect

import torch

from policylab.devices import autocast_for
from policylab.engines.base import Generations, Sampling, check_request, load_unless_shared


class HFEngine:
    """Generation from a `transformers` causal LM that the trainer also optimises (CPU,
    or one GPU): the model object is shared, so `load_weights` has nothing to copy."""

    def __init__(self, model, tokenizer) -> None:
        self.model = model
        self.tokenizer = tokenizer
        if tokenizer.pad_token_id is None:
            raise ValueError("the tokenizer has no pad token; set tokenizer.pad_token first")
        self.pad_id = tokenizer.pad_token_id
        self.end_ids = end_token_ids(model, tokenizer)
        # transformers 5 renamed the cache argument of forward() to `cache`.
        params = inspect.signature(model.forward).parameters
        self._cache_arg = "cache" if "cache" in params else "past_key_values"

    def load_weights(self, state_dict: dict[str, torch.Tensor]) -> None:
        load_unless_shared(self.model, state_dict)

    @torch.no_grad()
    def generate(
        self,
        prompt_ids: list[list[int]],
        n: int,
        sampling: Sampling,
        generator: torch.Generator | None = None,
    ) -> Generations:
        check_request(prompt_ids, n)
        device = next(self.model.parameters()).device
        generator = _generator_on(device, generator)
        was_training = self.model.training
        self.model.eval()
        try:
            with autocast_for(self.model):
                return self._generate(prompt_ids, n, sampling, generator, device)
        finally:
            self.model.train(was_training)

    def _generate(self, prompt_ids, n, sampling, generator, device) -> Generations:
        width = max(len(p) for p in prompt_ids)
        ids = torch.full((len(prompt_ids), width), self.pad_id, dtype=torch.long)
        attention = torch.zeros((len(prompt_ids), width), dtype=torch.long)
        for i, p in enumerate(prompt_ids):
            ids[i, width - len(p) :] = torch.tensor(p)
            attention[i, width - len(p) :] = 1
        ids, attention = ids.to(device), attention.to(device)
        positions = (attention.cumsum(-1) - 1).clamp(min=0)
        out = self.model(
            input_ids=ids, attention_mask=attention, position_ids=positions, use_cache=True
        )
        cache, logits = _cache_of(out), out.logits[:, -1, :]
        if n > 1:  # the n samples of a prompt share its prefill
            cache.batch_repeat_interleave(n)
            logits = logits.repeat_interleave(n, dim=0)
            attention = attention.repeat_interleave(n, dim=0)
        rows = logits.shape[0]
        next_position = attention.sum(-1)
        tokens, logps, entropies, alive = [], [], [], []
        done = torch.zeros(rows, dtype=torch.bool, device=device)
        stopped = torch.zeros(rows, dtype=torch.bool)
        texts = [""] * rows
        ends = torch.tensor(self.end_ids, dtype=torch.long, device=device)
        for step in range(sampling.max_new_tokens):
            token, logp, entropy = _sample(logits.float(), sampling, generator)
            token = torch.where(done, torch.full_like(token, self.pad_id), token)
            alive.append(~done)
            tokens.append(token)
            logps.append(torch.where(done, torch.zeros_like(logp), logp))
            entropies.append(torch.where(done, torch.zeros_like(entropy), entropy))
            ended = ~done & torch.isin(token, ends)
            if sampling.stop_strings:  # decode only when stop strings are asked for
                for r in (~done & ~ended).nonzero(as_tuple=True)[0].tolist():
                    texts[r] += self.tokenizer.decode([int(token[r])])
                    if any(texts[r].endswith(s) for s in sampling.stop_strings):
                        ended[r] = True
            done = done | ended
            stopped |= ended.cpu()
            if bool(done.all()) or step == sampling.max_new_tokens - 1:
                break
            attention = torch.cat(
                [attention, torch.ones(rows, 1, dtype=torch.long, device=device)], dim=1
            )
            out = self.model(
                input_ids=token.unsqueeze(-1),
                attention_mask=attention,
                position_ids=next_position.unsqueeze(-1),
                use_cache=True,
                **{self._cache_arg: cache},
            )
            cache, logits = _cache_of(out), out.logits[:, -1, :]
            next_position = next_position + 1
        response_ids = torch.stack(tokens, dim=1).cpu()
        logprobs = torch.stack(logps, dim=1).cpu()
        entropy = torch.stack(entropies, dim=1).cpu()
        mask = torch.stack(alive, dim=1).cpu().float()  # real tokens, the end token included
        finish = ["stop" if s else "length" for s in stopped.tolist()]
        decoded = self.tokenizer.batch_decode(
            response_ids.masked_fill(mask == 0, self.pad_id), skip_special_tokens=True
        )
        return Generations(
            response_ids,
            logprobs * mask,
            mask,
            finish,
            decoded,
            torch.arange(len(prompt_ids)).repeat_interleave(n),
            entropy * mask,
        )


def end_token_ids(model, tokenizer) -> list[int]:
    """The ids that end a response: the tokenizer's eos and every id of the model's
    `generation_config.eos_token_id` (an int or a list; instruct checkpoints list their
    end of turn there, e.g. Qwen's <|im_end|> beside <|endoftext|>), sorted."""
    ids = {tokenizer.eos_token_id} if tokenizer.eos_token_id is not None else set()
    listed = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    if listed is not None:
        ids.update([listed] if isinstance(listed, int) else listed)
    return sorted(ids)


def _generator_on(device: torch.device, generator: torch.Generator | None):
    """A generator that can draw on `device`: `generator` itself when it lives there, else
    one seeded from a draw of it, so a seeded CPU generator (the trainer's) still makes
    GPU sampling reproducible."""
    if generator is None or generator.device == device:
        return generator
    seed = int(torch.randint(2**62, (1,), generator=generator))
    return torch.Generator(device).manual_seed(seed)


def _cache_of(output):
    cache = getattr(output, "cache", None)
    return cache if cache is not None else output.past_key_values


def _sample(
    logits: torch.Tensor, sampling: Sampling, generator
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Token, its log-prob and the distribution's entropy under softmax(logits /
    temperature), the full vocabulary before top-k/top-p; greedy at temperature 0 (both then
    under the untempered distribution)."""
    if sampling.greedy:
        logp_all = torch.log_softmax(logits, dim=-1)
        token = logp_all.argmax(dim=-1)
        return token, logp_all.gather(-1, token.unsqueeze(-1)).squeeze(-1), _entropy(logp_all)
    logp_all = torch.log_softmax(logits / sampling.temperature, dim=-1)
    filtered = logp_all
    if sampling.top_k > 0:
        kth = filtered.topk(min(sampling.top_k, filtered.shape[-1]), dim=-1).values[:, -1:]
        filtered = filtered.masked_fill(filtered < kth, float("-inf"))
    if sampling.top_p < 1.0:
        sorted_logp, order = filtered.sort(dim=-1, descending=True)
        cumulative = sorted_logp.exp().cumsum(dim=-1)
        drop = cumulative - sorted_logp.exp() > sampling.top_p  # keep the token that crosses
        sorted_logp = sorted_logp.masked_fill(drop, float("-inf"))
        filtered = torch.full_like(filtered, float("-inf")).scatter(-1, order, sorted_logp)
    probs = torch.softmax(filtered, dim=-1)
    token = torch.multinomial(probs, 1, generator=generator).squeeze(-1)
    return token, logp_all.gather(-1, token.unsqueeze(-1)).squeeze(-1), _entropy(logp_all)


def _entropy(logp_all: torch.Tensor) -> torch.Tensor:
    return -(logp_all.exp() * logp_all).nan_to_num().sum(-1)
