"""The `mdm_logprob` estimators (papers/seed_generative.md G0.4, G1.10 D1)."""

import math

import pytest
import torch

from policylab.policies.masked_lm import MaskedDiffusionLM, MDMConfig, MDMSampling
from policylab.policies.mdm_logprob import MDMLogprobConfig, mdm_logprob, score_temperature

PAD, A, B, M, P = 0, 1, 2, 3, 4  # toy vocabulary: pad, a, b, mask, one prompt token


class ToyMDM(torch.nn.Module):
    """D1's model over L = 2 positions and {a, b}: p(pos0 = a) 0.6 at (M, M), 0.7 at
    (M, a); p(pos1 = a) 0.5 at (M, M), 0.9 at (a, M) (0.5 in states D1 leaves open)."""

    mask_id, pad_id = M, PAD

    def forward(self, ids, attention_mask=None):
        logits = torch.full((*ids.shape, 5), -1e9, dtype=torch.float64)
        for i, (z0, z1) in enumerate(ids[:, -2:].tolist()):
            p0 = {(M, M): 0.6, (M, A): 0.7}.get((z0, z1), 0.5)
            p1 = {(M, M): 0.5, (A, M): 0.9}.get((z0, z1), 0.5)
            for col, p in ((-2, p0), (-1, p1)):
                logits[i, col, A], logits[i, col, B] = math.log(p), math.log(1 - p)
        return logits


def toy(name, response, reveal, **kw):
    cfg = MDMLogprobConfig(prompt_mask_p=0.0, steps=2, **kw)
    fn = mdm_logprob.entry(name).fn
    logp, passes = fn(
        ToyMDM(), torch.tensor([[P]]), torch.tensor([response]), torch.tensor([reveal]), cfg
    )
    return logp.sum().item(), passes


def test_d1_toy_estimators():
    # step 0 reveals pos0 = a, step 1 pos1 = a
    assert toy("exact_steps", [A, A], [0, 1]) == (pytest.approx(-0.6161861, abs=1e-7), 2)
    assert toy("one_step", [A, A], [0, 1]) == (pytest.approx(-1.2039728, abs=1e-7), 1)
    assert toy("step_merge", [A, A], [0, 1], segments=2)[0] == pytest.approx(-0.6161861, abs=1e-7)
    assert toy("step_merge", [A, A], [0, 1], segments=1)[0] == pytest.approx(-1.2039728, abs=1e-7)
    # pos1 = a first, then pos0 = b: log 0.5 + log 0.3
    assert toy("exact_steps", [B, A], [1, 0])[0] == pytest.approx(-1.8971200, abs=1e-7)
    # contrast: the sequence (a, a) under a uniformly random order, from both orders' exact
    # values: log(½·0.6·0.9 + ½·0.5·0.7) = -0.8096810
    first, _ = toy("exact_steps", [A, A], [0, 1])
    second, _ = toy("exact_steps", [A, A], [1, 0])
    mixed = math.log(0.5 * math.exp(first) + 0.5 * math.exp(second))
    assert mixed == pytest.approx(-0.8096810, abs=1e-7)


def small(seed=0):
    torch.manual_seed(seed)
    return MaskedDiffusionLM(MDMConfig(d_model=32, n_layers=2, n_heads=2, d_ff=64)).eval()


def sample(model, steps=6, remasking="low_confidence"):
    prompts = [[20, 27, 14, 20, 22, 32], [21, 14, 30, 32], [17, 17, 14, 18, 32]]
    out = model.generate(
        prompts, MDMSampling(steps=steps, remasking=remasking), torch.Generator().manual_seed(0)
    )
    width = max(len(p) for p in prompts)
    padded = torch.tensor([[0] * (width - len(p)) + p for p in prompts])
    return padded, out.response_ids, out.reveal


def run(model, name, prompt, response, reveal, seed=7, **kw):
    cfg = MDMLogprobConfig(**kw)
    return mdm_logprob.entry(name).fn(
        model, prompt, response, reveal, cfg, generator=torch.Generator().manual_seed(seed)
    )


def test_limits_step_merge_is_one_step_at_n1_and_exact_at_n_s():
    model = small()
    prompt, response, reveal = sample(model)
    one, _ = run(model, "one_step", prompt, response, reveal)
    exact, passes = run(model, "exact_steps", prompt, response, reveal)
    assert passes == 6
    assert torch.allclose(run(model, "step_merge", prompt, response, reveal, segments=1)[0], one)
    for n in (6, 60):  # N > S clamps to S
        merged, passes = run(model, "step_merge", prompt, response, reveal, segments=n)
        assert passes == 6 and torch.allclose(merged, exact)
    assert not torch.allclose(one, exact)  # they differ beyond the first step's tokens
    first = reveal == 0
    assert torch.allclose(one[first], exact[first])  # step-0 tokens see the same state


def test_same_mask_seed_gives_ratio_one_and_another_seed_differs():
    model = small()
    prompt, response, reveal = sample(model)
    a, _ = run(model, "one_step", prompt, response, reveal, seed=3, prompt_mask_p=0.5)
    b, _ = run(model, "one_step", prompt, response, reveal, seed=3, prompt_mask_p=0.5)
    c, _ = run(model, "one_step", prompt, response, reveal, seed=4, prompt_mask_p=0.5)
    assert torch.equal(a, b) and not torch.equal(a, c)


def test_exact_steps_is_a_distribution_over_completions_given_the_order():
    # with the reveal order fixed (remasking=random does not depend on θ), exp(exact_steps)
    # sums to 1 over all completions: L = 2, S = 2, every (y0, y1) in the 101 real tokens
    torch.manual_seed(1)
    model = MaskedDiffusionLM(
        MDMConfig(d_model=16, n_layers=1, n_heads=2, d_ff=32, completion_length=2)
    ).eval()
    ys = torch.cartesian_prod(torch.arange(101), torch.arange(101))
    prompt = torch.tensor([[20, 14, 21, 32]]).expand(len(ys), -1)
    reveal = torch.tensor([[1, 0]]).expand(len(ys), -1)
    with torch.no_grad():
        logp, _ = run(model, "exact_steps", prompt, ys, reveal, prompt_mask_p=0.0, steps=2)
    assert logp.sum(1).double().exp().sum().item() == pytest.approx(1.0, abs=1e-4)


def test_gradient_flows_and_temperature_scales():
    model = small()
    model.train()
    prompt, response, reveal = sample(model)
    logp, _ = run(model, "step_merge", prompt, response, reveal)
    logp.sum().backward()
    assert all(p.grad is not None for p in model.head.parameters())
    hot, _ = run(model, "one_step", prompt, response, reveal, temperature=2.0)
    cold, _ = run(model, "one_step", prompt, response, reveal, temperature=1.0)
    assert not torch.allclose(hot, cold)
    assert score_temperature("sampling", 0.9) == 0.9 and score_temperature("one", 0.9) == 1.0


@pytest.mark.parametrize(
    "reveal,match",
    [(None, "reveal has shape None"), (torch.tensor([[0, 6, 1, 2, 3, 4]] * 3), "0 .. steps")],
)
def test_bad_reveal_is_refused_before_scoring(reveal, match):
    model = small()
    prompt, response, _ = sample(model)
    with pytest.raises(ValueError, match=match):
        run(model, "exact_steps", prompt, response, reveal)


def test_bad_config_and_unknown_estimator_name_the_field():
    with pytest.raises(ValueError, match="temperature"):
        MDMLogprobConfig(temperature=0.0)
    with pytest.raises(ValueError, match="segments"):
        MDMLogprobConfig(segments=0)
    with pytest.raises(ValueError, match="score_temperature"):
        score_temperature("hot", 1.0)
    with pytest.raises(ValueError, match="one_step"):
        mdm_logprob.entry("no_such_estimator")
