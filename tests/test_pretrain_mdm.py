"""`python -m policylab.pretrain_mdm` (papers/seed_generative.md G1.1, G0.7), a few steps."""

import hashlib
import json

import pytest

from policylab.policies.masked_lm import MaskedDiffusionLM
from policylab.pretrain_mdm import PretrainMDMConfig, main


def test_pretrain_saves_a_loadable_measured_model(tmp_path):
    out = tmp_path / "mdm"
    meta = main(["--out", str(out), "--steps", "40", "--eval-n", "8", "--pool-size", "300"])
    assert meta["parameters"] == 696_166
    assert meta["final_loss"] < meta["first_loss"]  # masked SFT learns something in 40 steps
    assert 0 <= meta["heldout"]["greedy_accuracy_S6"] <= 1
    assert json.loads((out / "policylab.json").read_text())["heldout"]["n"] == 8
    for line in (out / "SHA256SUMS").read_text().splitlines():
        digest, name = line.split()
        assert hashlib.sha256((out / name).read_bytes()).hexdigest() == digest
    model = MaskedDiffusionLM.load(out)
    assert model.config.mask_id == 101 and model.config.vocab_size == 102


@pytest.mark.parametrize("field,value", [("steps", 0), ("batch_size", -1), ("lr", 0.0)])
def test_bad_setting_names_the_field(field, value):
    with pytest.raises(ValueError, match=field):
        PretrainMDMConfig(**{field: value})
