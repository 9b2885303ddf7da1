"""MaskedDiffusionLM and its generation (papers/seed_generative.md G0.3, G1.2, D6)."""

import pytest
import torch

from policylab.policies.masked_lm import (
    MaskedDiffusionLM,
    MDMConfig,
    MDMSampling,
    completion_mask,
    is_mdm_folder,
    transfer_counts,
)

PROMPTS = [[20, 27, 14, 20, 22, 32], [21, 14, 30, 32]]  # ragged: left padding needed


def small(seed=0, **kw):
    torch.manual_seed(seed)
    return MaskedDiffusionLM(MDMConfig(d_model=32, n_layers=2, n_heads=2, d_ff=64, **kw))


def test_d6_transfer_counts():
    assert transfer_counts(32, 16) == [2] * 16
    assert transfer_counts(6, 4) == [2, 2, 1, 1]
    assert transfer_counts(19, 8) == [3, 3, 3, 2, 2, 2, 2, 2]
    assert sum(transfer_counts(7, 3)) == 7


def test_tiny_size_and_mask_logit():
    model = MaskedDiffusionLM()
    n = sum(p.numel() for p in model.parameters())
    # 4 layers of 165,376 + token/position embeddings + final norm + untied head
    assert n == 4 * 165_376 + 102 * 128 + 64 * 128 + 256 + 128 * 102 + 102 == 696_166
    logits = model(torch.tensor([[20, 21, 101, 101]]))
    assert logits.shape == (1, 4, 102)
    assert torch.isneginf(logits[..., 101]).all()
    assert torch.isfinite(logits[..., :101]).all()


def test_left_padding_does_not_change_logits():
    model = small().eval()
    ids = torch.tensor([[21, 14, 30, 32, 101, 101]])
    padded = torch.cat([torch.zeros(1, 2, dtype=torch.long), ids], 1)
    a = model(ids)
    b = model(padded)[:, 2:]
    assert torch.allclose(a, b, atol=1e-5)


@pytest.mark.parametrize("remasking", ["low_confidence", "random"])
@pytest.mark.parametrize("steps,block", [(6, 0), (3, 0), (6, 3), (6, 2), (12, 0)])
def test_generation_reveals_every_position_by_schedule(remasking, steps, block):
    model = small()
    sampling = MDMSampling(length=6, steps=steps, block=block, remasking=remasking)
    out = model.generate(PROMPTS, sampling, torch.Generator().manual_seed(3))
    assert out.response_ids.shape == out.reveal.shape == (2, 6)
    assert (out.response_ids != 101).all()
    b = sampling.block_length
    per_block = steps // (6 // b)
    for row in out.reveal.tolist():
        assert min(row) >= 0 and max(row) < steps
        for k in range(6 // b):
            block_steps = row[k * b : (k + 1) * b]
            assert all(k * per_block <= s < (k + 1) * per_block for s in block_steps)
            counts = [block_steps.count(k * per_block + j) for j in range(per_block)]
            assert counts == transfer_counts(b, per_block)


def test_greedy_is_deterministic_and_sampling_follows_the_generator():
    model = small()
    greedy = MDMSampling(temperature=0.0)
    a = model.generate(PROMPTS, greedy, torch.Generator().manual_seed(1))
    b = model.generate(PROMPTS, greedy, torch.Generator().manual_seed(2))
    assert torch.equal(a.response_ids, b.response_ids) and torch.equal(a.reveal, b.reveal)
    hot = MDMSampling(temperature=5.0)
    c = model.generate(PROMPTS * 8, hot, torch.Generator().manual_seed(1))
    d = model.generate(PROMPTS * 8, hot, torch.Generator().manual_seed(1))
    e = model.generate(PROMPTS * 8, hot, torch.Generator().manual_seed(2))
    assert torch.equal(c.response_ids, d.response_ids)
    assert not torch.equal(c.response_ids, e.response_ids)


def test_low_confidence_reveals_the_most_confident_position_first():
    model = small()
    out = model.generate(PROMPTS[:1], MDMSampling(temperature=0.0))
    # recompute step 0's confidences: the position revealed at step 0 is their argmax
    ids = torch.tensor([PROMPTS[0] + [101] * 6])
    probs = model.eval()(ids)[0, 6:].double().softmax(-1)
    first = int((out.reveal[0] == 0).nonzero()[0])
    assert first == int(probs.max(-1).values.argmax())


def test_completion_mask_up_to_first_eos_and_all_without_eos():
    response = torch.tensor([[5, 1, 1, 7], [5, 6, 7, 8]])
    mask, reasons = completion_mask(response, eos_id=1)
    assert mask.tolist() == [[1, 1, 0, 0], [1, 1, 1, 1]]
    assert reasons == ["stop", "length"]


def test_save_load_round_trip(tmp_path):
    model = small(seed=4)
    model.save(tmp_path / "m", {"note": 1})
    assert is_mdm_folder(tmp_path / "m") and not is_mdm_folder(tmp_path)
    again = MaskedDiffusionLM.load(tmp_path / "m")
    ids = torch.tensor([[20, 21, 101]])
    assert torch.equal(model.eval()(ids), again.eval()(ids))


@pytest.mark.parametrize(
    "kw,field",
    [
        ({"block": 4}, "block"),
        ({"steps": 5, "block": 3}, "steps"),
        ({"remasking": "topk"}, "remasking"),
        ({"temperature": -1.0}, "temperature"),
    ],
)
def test_bad_sampling_names_the_field(kw, field):
    with pytest.raises(ValueError, match=f"MDMSampling.{field}"):
        MDMSampling(**kw)
