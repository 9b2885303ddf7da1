"""The language model as a policy: evaluate (one forward) agrees with the engine's
sampling log-probs, and the response mask decides which positions count."""

import pytest
import torch

from policylab.engines import Sampling
from policylab.models import TinyConfig, build_model, build_tokenizer
from policylab.policies import LanguageModelPolicy


@pytest.fixture(scope="module")
def policy():
    tokenizer = build_tokenizer()
    arch = TinyConfig(
        hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2
    )
    sampling = Sampling(temperature=0.7, top_k=20, max_new_tokens=8)
    return LanguageModelPolicy(build_model(tokenizer, arch, seed=0), tokenizer, sampling=sampling)


def prompts(policy, *texts):
    return [policy.tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]


def test_evaluate_equals_the_engines_logprobs(policy):
    # prompts of different lengths (left padding); tempered, top-k filtered sampling: the
    # log-prob is under the full tempered distribution on both sides
    drawn = policy.sample(
        prompts(policy, "17+25=", "3 5 7 -> 22:"), generator=torch.Generator().manual_seed(0), n=3
    )
    assert drawn.actions.shape == drawn.mask.shape == (6, 8)
    assert drawn.extras["prompt_index"].tolist() == [0, 0, 0, 1, 1, 1]
    out = policy.evaluate(drawn.extras["prompt_ids"], drawn.actions, mask=drawn.mask)
    torch.testing.assert_close(out.logprobs.detach(), drawn.logprobs, atol=1e-5, rtol=0)
    torch.testing.assert_close(out.entropy, drawn.entropy, atol=1e-5, rtol=0)
    assert out.values is None


def test_masked_positions_are_zero_and_never_matter(policy):
    drawn = policy.sample(prompts(policy, "9*9="), generator=torch.Generator().manual_seed(1), n=2)
    mask = drawn.mask.clone()
    mask[0, 5:] = 0  # a response that ended after 5 tokens
    garbage = drawn.actions.clone()
    garbage[0, 5:] = torch.tensor([7, 8, 9])
    a = policy.evaluate(drawn.extras["prompt_ids"], drawn.actions, mask=mask)
    b = policy.evaluate(drawn.extras["prompt_ids"], garbage, mask=mask)
    assert (a.logprobs[0, 5:] == 0).all() and (a.entropy[0, 5:] == 0).all()
    torch.testing.assert_close(a.logprobs, b.logprobs, atol=1e-6, rtol=0)
    torch.testing.assert_close(a.logprobs[mask > 0], drawn.logprobs[mask > 0], atol=1e-5, rtol=0)


def test_evaluate_has_a_gradient_into_the_model(policy):
    drawn = policy.sample(prompts(policy, "1+1="), generator=torch.Generator().manual_seed(2))
    policy.zero_grad()
    policy.evaluate(
        drawn.extras["prompt_ids"], drawn.actions, mask=drawn.mask
    ).logprobs.sum().backward()
    grads = [p.grad for p in policy.model.parameters() if p.grad is not None]
    assert grads and any(g.abs().sum() > 0 for g in grads)


def test_one_prompt_per_row_is_required(policy):
    drawn = policy.sample(prompts(policy, "1+1="), generator=torch.Generator().manual_seed(2), n=2)
    with pytest.raises(ValueError, match="one prompt per row"):
        policy.evaluate(prompts(policy, "1+1="), drawn.actions, mask=drawn.mask)


def test_value_head_reads_the_hidden_state_before_each_token():
    """V [B, T] from a zero-initialised linear head on the final hidden state: 0 at first,
    0 where the mask is 0, with a gradient into the head and the trunk."""
    from policylab.models import build_model, build_tokenizer
    from policylab.policies.language_model import LanguageModelPolicy

    tokenizer = build_tokenizer()
    policy = LanguageModelPolicy(build_model(tokenizer, seed=0), tokenizer, value_head=True)
    prompts = [[5, 6, 7], [8, 9]]
    actions = torch.tensor([[10, 11, 12], [13, 14, 0]])
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])
    out = policy.evaluate(prompts, actions, mask=mask)
    assert out.values.shape == (2, 3) and torch.equal(out.values, torch.zeros(2, 3))
    torch.nn.init.normal_(policy.value_head.weight)
    out = policy.evaluate(prompts, actions, mask=mask)
    assert out.values[1, 2] == 0 and (out.values[mask > 0] != 0).all()
    out.values.sum().backward()
    assert policy.value_head.weight.grad.abs().sum() > 0
    assert policy.model.model.layers[0].mlp.up_proj.weight.grad.abs().sum() > 0
