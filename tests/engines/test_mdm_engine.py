"""MDMEngine: the Engine protocol over a masked diffusion LM (G0.3, G1.7)."""

import pytest
import torch

from policylab.engines.base import Sampling
from policylab.engines.mdm import MDMEngine
from policylab.models import build_tokenizer
from policylab.policies.masked_lm import MaskedDiffusionLM, MDMConfig, MDMSampling


def engine(**kw):
    torch.manual_seed(0)
    model = MaskedDiffusionLM(MDMConfig(d_model=32, n_layers=1, n_heads=2, d_ff=64))
    return MDMEngine(model, build_tokenizer(), **kw)


def test_n_samples_per_prompt_prompt_major_with_reveal():
    e = engine()
    sampling = Sampling(temperature=1.0, max_new_tokens=6)
    gen = e.generate([[20, 14, 21, 32], [22, 32]], 3, sampling, torch.Generator().manual_seed(1))
    assert gen.response_ids.shape == gen.reveal.shape == gen.logprobs.shape == (6, 6)
    assert gen.prompt_index.tolist() == [0, 0, 0, 1, 1, 1]
    assert len(gen.texts) == len(gen.finish_reason) == 6
    # the same rows as the model's own generate with the same generator
    rows = [[20, 14, 21, 32]] * 3 + [[22, 32]] * 3
    direct = e.model.generate(rows, MDMSampling(), torch.Generator().manual_seed(1))
    assert torch.equal(direct.response_ids, gen.response_ids)
    assert torch.equal(direct.reveal, gen.reveal)


@pytest.mark.parametrize(
    "sampling,match",
    [
        (Sampling(max_new_tokens=8), "max_new_tokens = 8"),
        (Sampling(max_new_tokens=6, top_p=0.9), "top_p"),
        (Sampling(max_new_tokens=6, stop_strings=("x",)), "stop_strings"),
    ],
)
def test_what_the_sampler_cannot_do_is_refused(sampling, match):
    with pytest.raises(ValueError, match=match):
        engine().generate([[20]], 1, sampling)


def test_bad_decoding_settings_fail_at_construction():
    with pytest.raises(ValueError, match="MDMSampling.steps"):
        engine(steps=5, block=3)
