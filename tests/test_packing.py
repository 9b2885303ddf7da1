"""packing.py: packed rows give the padded forward's log-probs, loss and gradients."""

from __future__ import annotations

import pytest
import torch

from policylab.models import build_tokenizer, response_forward
from policylab.packing import pack

PAD = 0


def tiny_llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=40,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
        tie_word_embeddings=True,
        pad_token_id=PAD,
    )
    return LlamaForCausalLM(cfg)


def tiny_qwen2():
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(1)
    cfg = Qwen2Config(
        vocab_size=40,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
        tie_word_embeddings=False,
        pad_token_id=PAD,
    )
    return Qwen2ForCausalLM(cfg)


MODELS = {"llama": tiny_llama, "qwen2": tiny_qwen2}


def ragged_batch(seed: int, B: int = 8, T: int = 6, G: int = 1):
    """Prompts of 1–8 tokens, each shared by G consecutive rows (a GRPO group); responses
    of 1–T real tokens right-padded with PAD; one advantage per row."""
    g = torch.Generator().manual_seed(seed)
    distinct = [
        torch.randint(1, 40, (int(torch.randint(1, 9, (1,), generator=g)),), generator=g).tolist()
        for _ in range(-(-B // G))
    ]
    prompts = [distinct[i // G] for i in range(B)]
    lengths = torch.randint(1, T + 1, (B,), generator=g)
    mask = (torch.arange(T).unsqueeze(0) < lengths.unsqueeze(-1)).float()
    responses = torch.randint(1, 40, (B, T), generator=g).masked_fill(mask == 0, PAD)
    advantages = torch.randn(B, 1, generator=g).expand(B, T)
    return prompts, responses, mask, advantages


def loss_and_grads(model, batch, packing: bool, temperature: float):
    """A GRPO-shaped loss (token mean of −A·ratio, ratio = exp(logp − logp.detach()))."""
    prompts, responses, mask, advantages = batch
    model.zero_grad(set_to_none=True)
    out = response_forward(
        model,
        prompts,
        responses,
        mask,
        pad_id=PAD,
        temperature=temperature,
        with_entropy=True,
        packing=packing,
    )
    ratio = torch.exp(out.logprobs - out.logprobs.detach())
    loss = -(advantages * ratio * mask).sum() / mask.sum()
    loss.backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    return out, loss.detach(), grads


def test_pack_lays_segments_end_to_end():
    # prompts [5, 6] and [7]; responses [8, 9, PAD] (2 real) and [10, 11, 12] (3 real).
    # Segments drop their last response token: [5, 6, 8] (3) and [7, 10, 11] (3);
    # capacity 6 holds both in one row, positions restart at 0 for the second.
    responses = torch.tensor([[8, 9, PAD], [10, 11, 12]])
    mask = torch.tensor([[1.0, 1, 0], [1, 1, 1]])
    packed = pack([[5, 6], [7]], responses, mask, pad_id=PAD, capacity=6)
    assert packed.input_ids.tolist() == [[5, 6, 8, 7, 10, 11]]
    assert packed.position_ids.tolist() == [[0, 1, 2, 0, 1, 2]]
    # row 0: token 8 is predicted at offset 1 (after 6), token 9 at 2 (after 8);
    # row 1 starts at 3: 10 at 3 (after 7), 11 at 4, 12 at 5
    assert packed.query.tolist() == [1, 2, 3, 4, 5]
    assert packed.rows.tolist() == [0, 0, 1, 1, 1]
    assert packed.cols.tolist() == [0, 1, 0, 1, 2]
    assert packed.targets.tolist() == [8, 9, 10, 11, 12]


def test_a_shared_prompt_is_computed_once_and_branches_do_not_see_each_other():
    # rows 0 and 2 share prompt [5, 6]; responses [8, 9] (2 real), [10] (1), [11, 12, 13].
    # Segment 0: [5, 6] then branches [8] (row 0) and [11, 12] (row 2), positions 2.. each;
    # segment 1: [7] with an empty branch (row 1 has one token, predicted at the prompt).
    responses = torch.tensor([[8, 9, PAD], [10, PAD, PAD], [11, 12, 13]])
    mask = torch.tensor([[1.0, 1, 0], [1, 0, 0], [1, 1, 1]])
    packed = pack([[5, 6], [7], [5, 6]], responses, mask, pad_id=PAD, capacity=6)
    assert packed.input_ids.tolist() == [[5, 6, 8, 11, 12, 7]]
    assert packed.position_ids.tolist() == [[0, 1, 2, 2, 3, 0]]
    assert packed.branch.tolist() == [[-1, -1, 0, 2, 2, -1]]
    # token 0 of rows 0 and 2 is predicted at the prompt's last token (offset 1)
    scored = zip(packed.rows.tolist(), packed.cols.tolist(), packed.query.tolist(), strict=True)
    assert sorted(scored) == [
        (0, 0, 1),
        (0, 1, 2),
        (1, 0, 5),
        (2, 0, 1),
        (2, 1, 3),
        (2, 2, 4),
    ]
    allowed = packed.allowed()[0, 0].int().tolist()
    assert allowed[3] == [1, 1, 0, 1, 0, 0]  # row 2's first branch token: prompt, itself
    assert allowed[4] == [1, 1, 0, 1, 1, 0]  # never row 0's branch (offset 2)
    assert allowed[5] == [0, 0, 0, 0, 0, 1]  # another segment: only itself


def test_pack_pads_the_tail_as_its_own_segment_and_refuses_gaps():
    responses = torch.tensor([[8, 9], [10, PAD]])
    mask = torch.tensor([[1.0, 1], [1, 0]])
    packed = pack([[5, 6], [7]], responses, mask, pad_id=PAD, capacity=3)
    assert packed.input_ids.tolist() == [[5, 6, 8], [7, PAD, PAD]]
    assert packed.position_ids.tolist() == [[0, 1, 2], [0, 0, 1]]
    gap = torch.tensor([[1.0, 0], [1, 0]])
    holes = torch.tensor([[0.0, 0], [0, 0]])
    assert pack([[5], [7]], responses, gap, pad_id=PAD, observation_mask=holes) is not None
    assert pack([[5], [7]], responses, torch.tensor([[0.0, 1], [1, 0]]), pad_id=PAD) is None
    with pytest.raises(ValueError, match="capacity=2"):
        pack([[5, 6], [7]], responses, mask, pad_id=PAD, capacity=2)


@pytest.mark.parametrize("name", sorted(MODELS))
@pytest.mark.parametrize("seed", range(4))
def test_packed_equals_padded_on_ragged_batches(name, seed):
    model = MODELS[name]()
    batch = ragged_batch(seed, G=(1, 2, 4, 3)[seed])
    temperature = (0.7, 1.0, 1.3, 1.0)[seed]
    padded, loss_a, grads_a = loss_and_grads(model, batch, packing=False, temperature=temperature)
    packed, loss_b, grads_b = loss_and_grads(model, batch, packing=True, temperature=temperature)
    mask = batch[2]
    assert (packed.logprobs[mask == 0] == 0).all() and (packed.entropy[mask == 0] == 0).all()
    torch.testing.assert_close(packed.logprobs, padded.logprobs, atol=1e-5, rtol=0)
    torch.testing.assert_close(packed.entropy, padded.entropy, atol=1e-5, rtol=0)
    torch.testing.assert_close(loss_b, loss_a, atol=1e-5, rtol=0)
    assert grads_a.keys() == grads_b.keys() and len(grads_a) == len(list(model.parameters()))
    for n in grads_a:
        torch.testing.assert_close(grads_b[n], grads_a[n], atol=1e-5, rtol=0, msg=n)


@pytest.mark.parametrize("capacity", [14, 48])  # segments here: 2–13 tokens
def test_several_segments_per_row_stay_apart(capacity):
    """With room for many segments per row, a segment attends only to itself: the
    log-probs are the padded path's (and not when the segments are merged)."""
    from policylab.packing import packed_forward

    model = tiny_llama()
    prompts, responses, mask, _ = ragged_batch(11)
    padded = response_forward(model, prompts, responses, mask, pad_id=PAD)
    packed = pack(prompts, responses, mask, pad_id=PAD, capacity=capacity)
    together = packed_forward(model, packed)
    torch.testing.assert_close(together["logprobs"], padded.logprobs, atol=1e-5, rtol=0)
    assert packed.input_ids.shape[0] < len(prompts)  # rows were actually shared
    packed.segment = torch.zeros_like(packed.segment)  # one segment per row: they leak
    mixed = packed_forward(model, packed)
    assert (mixed["logprobs"] - padded.logprobs).abs().max() > 1e-3


@pytest.mark.parametrize("attention", ["eager", "sdpa"])
def test_both_attention_kinds_read_the_mask(attention):
    model = tiny_qwen2()
    model.config._attn_implementation = attention
    prompts, responses, mask, _ = ragged_batch(7, G=4)
    padded = response_forward(model, prompts, responses, mask, pad_id=PAD)
    packed = response_forward(model, prompts, responses, mask, pad_id=PAD, packing=True)
    torch.testing.assert_close(packed.logprobs, padded.logprobs, atol=1e-5, rtol=0)


def test_observation_tokens_are_attended_not_scored_and_heads_agree():
    """A multi-turn row: response positions 2–3 are the environment's (observation mask),
    attended but not scored; the value-head input and CAPO's head outputs match too."""
    model = tiny_llama()
    prompts, responses, _, _ = ragged_batch(3, B=3, T=6, G=3)
    responses = torch.randint(1, 40, (3, 6), generator=torch.Generator().manual_seed(3))
    mask = torch.tensor([[1.0, 1, 0, 0, 1, 1], [1, 0, 0, 0, 0, 0], [1, 1, 1, 1, 1, 0]])
    observation = torch.tensor([[0.0, 0, 1, 1, 0, 0], [0, 0, 0, 0, 0, 0], [0] * 6])
    kwargs = dict(pad_id=PAD, observation_mask=observation, with_head=True, with_hidden=True)
    a = response_forward(model, prompts, responses, mask, **kwargs)
    b = response_forward(model, prompts, responses, mask, packing=True, **kwargs)
    torch.testing.assert_close(b.logprobs, a.logprobs, atol=1e-5, rtol=0)
    scored = mask > 0
    torch.testing.assert_close(b.hidden[scored], a.hidden[scored], atol=1e-5, rtol=0)
    torch.testing.assert_close(b.head_input[scored], a.head_input[scored], atol=1e-5, rtol=0)
    torch.testing.assert_close(b.logits[scored], a.logits[scored], atol=1e-5, rtol=0)


def test_policy_evaluate_uses_packing(monkeypatch):
    """LanguageModelPolicy(packing=True).evaluate runs the packed path, same numbers."""
    import policylab.models as models
    from policylab.models import TinyConfig, build_model
    from policylab.policies.language_model import LanguageModelPolicy

    calls = []
    real = models.packed_forward
    monkeypatch.setattr(models, "packed_forward", lambda *a, **k: calls.append(1) or real(*a, **k))
    tokenizer = build_tokenizer()
    model = build_model(tokenizer, TinyConfig(32, 64, 2, 4, 64))
    prompts, responses, mask, _ = ragged_batch(5)
    plain = LanguageModelPolicy(model, tokenizer).evaluate(prompts, responses, mask=mask)
    assert calls == []
    packed = LanguageModelPolicy(model, tokenizer, packing=True).evaluate(
        prompts, responses, mask=mask
    )
    assert calls == [1]
    torch.testing.assert_close(packed.logprobs, plain.logprobs, atol=1e-5, rtol=0)
    torch.testing.assert_close(packed.entropy, plain.entropy, atol=1e-5, rtol=0)
