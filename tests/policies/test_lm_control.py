"""The LM as a control policy (policies/lm_control.py, seed_agents.md §A5): the
restricted head's softmax, its initialisation from the LM's own action logits, the state
text, and partial fine-tuning (`trainable_layers`)."""

from __future__ import annotations

import pytest
import torch

import policylab
from policylab.envs.trade_sim import BUY, observation_text
from policylab.models import load_model
from policylab.policies.base import Policy
from policylab.policies.lm_control import LMControlPolicy

OBS = torch.tensor([[3, -1, 2, 0, 4, -2, 1.0], [-9, 9, 0, 0, 1, 1, 0.0]])


@pytest.fixture(scope="module")
def tiny():
    return load_model("tiny")


def policy_of(tiny, trainable_layers=2) -> LMControlPolicy:
    model, tokenizer = tiny
    fresh = type(model)(model.config)
    fresh.load_state_dict(model.state_dict())
    return LMControlPolicy(fresh, tokenizer, trainable_layers=trainable_layers)


def test_restricted_softmax_of_the_spec_example(tiny):
    # logits (B, S, H) = (2, 0.5, 1): Z = e² + e^0.5 + e = 11.75597; π(B) = e²/Z
    policy = policy_of(tiny)
    logits = torch.tensor([[2.0, 0.5, 1.0]])
    policy.heads = lambda x: (logits.expand(len(x), 3), torch.zeros(len(x)))
    logp, entropy, _ = policy.evaluate(OBS[:1], torch.tensor([BUY]))
    assert float(logp[0]) == pytest.approx(-0.4643688, abs=1e-6)
    pi = torch.tensor([0.6285317, 0.1402444, 0.2312239])
    assert float(entropy[0]) == pytest.approx(float(-(pi * pi.log()).sum()), abs=1e-6)
    draws = policy.sample(OBS[:1].repeat(4000, 1), generator=torch.Generator().manual_seed(0))
    freq = torch.bincount(draws.actions, minlength=3) / 4000
    assert torch.allclose(freq, pi, atol=0.03)


def test_head_starts_as_the_lm_next_token_logits_of_b_s_h(tiny):
    model, tokenizer = tiny
    policy = policy_of(tiny)
    ids = policy.token_ids(OBS)
    with torch.no_grad():
        full = policy.model(input_ids=ids).logits[:, -1]
        restricted, values = policy.heads(OBS)
    action_ids = tokenizer.convert_tokens_to_ids(["B", "S", "H"])
    assert torch.allclose(restricted, full[:, action_ids], atol=1e-5)
    assert torch.equal(values, torch.zeros(2))  # zero value head at the start


def test_state_text_ids_equal_the_tokenizer_of_the_text(tiny):
    _, tokenizer = tiny
    policy = policy_of(tiny)
    ids = policy.token_ids(OBS)
    for row, obs in zip(ids.tolist(), OBS, strict=True):
        text = observation_text(obs.numpy())
        assert row == tokenizer(text, add_special_tokens=False)["input_ids"]
    assert ids.shape == (2, 15)


def test_policy_protocol_and_sample_logprobs_match_evaluate(tiny):
    policy = policy_of(tiny)
    assert isinstance(policy, Policy)
    draw = policy.sample(OBS, generator=torch.Generator().manual_seed(1))
    logp, _, values = policy.evaluate(OBS, draw.actions)
    assert torch.allclose(logp, draw.logprobs, atol=1e-6)
    assert torch.allclose(values, draw.values)
    assert torch.equal(policy.mode(OBS), policy.sample(OBS, deterministic=True).actions)


def _one_update(policy: LMControlPolicy) -> None:
    loss_fn = policylab.policy_loss("ppo_clip")
    optimiser = torch.optim.Adam(policy.ppo_parameters(), lr=1e-2)
    draw = policy.sample(OBS, generator=torch.Generator().manual_seed(0))
    logp, _, values = policy.evaluate(OBS, draw.actions)
    adv = torch.tensor([[1.0], [-1.0]])
    loss, _ = loss_fn(
        logprobs=logp.unsqueeze(-1),
        old_logprobs=draw.logprobs.unsqueeze(-1),
        advantages=adv,
        response_mask=torch.ones(2, 1),
    )
    (loss + values.pow(2).mean() + (values - 1).pow(2).mean()).backward()
    optimiser.step()


def test_trainable_layers_2_leaves_the_bottom_and_embeddings_bitwise_unchanged(tiny):
    policy = policy_of(tiny, trainable_layers=2)
    before = {k: v.clone() for k, v in policy.state_dict().items()}
    _one_update(policy)
    after = policy.state_dict()
    frozen = [k for k in before if k.startswith(("model.model.layers.0.", "model.model.layers.1."))]
    frozen += ["model.model.embed_tokens.weight", "model.lm_head.weight"]
    assert len(frozen) > 10
    for key in frozen:
        assert torch.equal(before[key], after[key]), key
    for key in (
        "model.model.layers.3.self_attn.q_proj.weight",
        "model.model.layers.2.mlp.down_proj.weight",
        "model.model.norm.weight",
        "policy_head.weight",
        "value_head.bias",
    ):
        assert not torch.equal(before[key], after[key]), key


def test_full_fine_tuning_moves_the_bottom_layers_too(tiny):
    policy = policy_of(tiny, trainable_layers=None)
    before = policy.model.model.layers[0].self_attn.q_proj.weight.clone()
    _one_update(policy)
    assert not torch.equal(before, policy.model.model.layers[0].self_attn.q_proj.weight)


def test_bad_trainable_layers_is_refused(tiny):
    with pytest.raises(ValueError, match="trainable_layers = 5; accepted: 0 … 4"):
        policy_of(tiny, trainable_layers=5)
