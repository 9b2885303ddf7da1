"""Memory-lean log-probs (logprobs.py `selective_logprobs`): the chunked log-softmax equals
the plain full-vocabulary one, values and gradients, whatever the chunking, temperature,
masks and strides; `response_forward` on a real model agrees with the plain formula."""

import math

import pytest
import torch

from policylab.logprobs import selective_logprobs
from policylab.models import TinyConfig, build_model, build_tokenizer, response_forward


def plain(logits, tokens, temperature):
    """The full [B, T, V] float32 log-softmax: what response_forward did before chunking."""
    logp_all = torch.log_softmax(logits.float() / temperature, dim=-1)
    logp = logp_all.gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
    return logp, -(logp_all.exp() * logp_all).sum(-1)


def test_a_hand_computed_case():
    # logits (0, ln 2, ln 3): p = (1/6, 2/6, 3/6); the token 2 has log p = ln 1/2, and
    # H = (1/6) ln 6 + (1/3) ln 3 + (1/2) ln 2
    logits = torch.tensor([[[0.0, math.log(2), math.log(3)]]], requires_grad=True)
    logp, entropy = selective_logprobs(logits, torch.tensor([[2]]), with_entropy=True)
    assert logp.item() == pytest.approx(math.log(0.5), abs=1e-6)
    expected = math.log(6) / 6 + math.log(3) / 3 + math.log(2) / 2
    assert entropy.item() == pytest.approx(expected, abs=1e-6)
    # ∂ log p_2 / ∂ z = onehot − p = (−1/6, −2/6, 1/2)
    logp.sum().backward()
    torch.testing.assert_close(logits.grad, torch.tensor([[[-1 / 6, -2 / 6, 0.5]]]))


@pytest.mark.parametrize("temperature", [1.0, 0.7, 1.3])
@pytest.mark.parametrize(
    "budget",
    [1 << 25, 11, 30, 60],  # one chunk; a position at a time; part of a row; whole rows
)
def test_chunked_equals_the_full_log_softmax(temperature, budget):
    torch.manual_seed(0)
    B, T, V = 3, 5, 11
    # a slice of a longer sequence, as response_forward passes it (not contiguous)
    source = (3 * torch.randn(B, T + 4, V)).requires_grad_()
    logits = source[:, 2 : 2 + T]
    tokens = torch.randint(V, (B, T))
    mask = torch.rand(B, T) > 0.3
    weights = torch.randn(B, T)

    logp, entropy = selective_logprobs(
        logits, tokens, temperature, with_entropy=True, chunk_elements=budget
    )
    ref_logp, ref_entropy = plain(logits, tokens, temperature)
    assert logp.dtype == entropy.dtype == torch.float32
    assert torch.allclose(logp, ref_logp, atol=1e-6, rtol=0)
    assert torch.allclose(entropy, ref_entropy.detach(), atol=1e-6, rtol=0)
    assert not entropy.requires_grad

    def grad_of(values):
        masked = torch.where(mask, values, torch.zeros_like(values))
        return torch.autograd.grad((masked * weights).sum(), source)[0]

    grad, ref_grad = grad_of(logp), grad_of(ref_logp)
    assert torch.allclose(grad, ref_grad, atol=1e-6, rtol=0)
    assert grad[:, :2].abs().sum() == 0 and grad[:, 2 + T :].abs().sum() == 0
    assert (grad[:, 2 : 2 + T][~mask] == 0).all()  # masked positions get no gradient


def test_float32_is_bit_identical_to_the_full_log_softmax():
    # the default path must not move any number of an existing run
    torch.manual_seed(1)
    source = torch.randn(4, 9, 13, requires_grad=True)
    logits, tokens = source[:, 1:8], torch.randint(13, (4, 7))
    for budget in (1 << 25, 13, 40):
        logp, entropy = selective_logprobs(logits, tokens, 0.9, True, chunk_elements=budget)
        ref_logp, ref_entropy = plain(logits, tokens, 0.9)
        assert torch.equal(logp, ref_logp) and torch.equal(entropy, ref_entropy.detach())
        w = torch.randn(4, 7)
        (grad,) = torch.autograd.grad((logp * w).sum(), source)
        (ref_grad,) = torch.autograd.grad((ref_logp * w).sum(), source)
        assert torch.equal(grad, ref_grad)


def test_gradcheck_in_float64_across_chunks():
    torch.manual_seed(2)
    logits = torch.randn(2, 3, 5, dtype=torch.float64, requires_grad=True)
    tokens = torch.randint(5, (2, 3))

    def first(z):
        return selective_logprobs(z, tokens, 0.8, chunk_elements=5)[0].double()

    # the log-softmax is formed in float32 whatever the input, so the check is loose
    assert torch.autograd.gradcheck(first, (logits,), eps=1e-3, atol=1e-3, rtol=1e-3)


def test_bfloat16_logits_give_float32_logprobs_and_a_bfloat16_gradient():
    torch.manual_seed(3)
    source = torch.randn(2, 4, 9).to(torch.bfloat16).requires_grad_()
    tokens = torch.randint(9, (2, 4))
    logp, _ = selective_logprobs(source, tokens, 1.0, chunk_elements=9)
    ref, _ = plain(source, tokens, 1.0)  # the same bf16 values, upcast
    assert logp.dtype == torch.float32
    assert torch.allclose(logp, ref, atol=1e-6, rtol=0)
    logp.sum().backward()
    assert source.grad.dtype == torch.bfloat16


def test_response_forward_equals_the_plain_formula_on_a_model():
    tokenizer = build_tokenizer()
    arch = TinyConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2)
    model = build_model(tokenizer, arch, seed=0)
    prompts = [tokenizer(t, add_special_tokens=False)["input_ids"] for t in ("12+3=", "7*8=")]
    torch.manual_seed(4)
    response = torch.randint(3, len(tokenizer), (2, 6))
    mask = torch.tensor([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]], dtype=torch.float32)
    out = response_forward(
        model, prompts, response, mask, pad_id=tokenizer.pad_token_id, temperature=0.8,
        with_entropy=True, with_head=True,
    )  # fmt: skip
    # the plain formula on the same forward's tempered logits (with_head returns them)
    logp = torch.log_softmax(out.logits, -1).gather(-1, response.unsqueeze(-1)).squeeze(-1)
    entropy = -(torch.log_softmax(out.logits, -1).exp() * torch.log_softmax(out.logits, -1))
    assert torch.allclose(out.logprobs, logp * mask, atol=1e-6, rtol=0)
    assert torch.allclose(out.entropy, entropy.sum(-1) * mask, atol=1e-6, rtol=0)
    assert (out.logprobs[0, 4:] == 0).all()
