"""`policylab pretrain NAME` and the base-model registry (papers/seed_generative.md G0.7):
each model is built once, cached under $POLICYLAB_CACHE with its settings' checksum in the
name and found again; progress is reported; unknown names, knobs and bad values are errors
naming the choices, before any work."""

from __future__ import annotations

import pytest
import torch

from policylab.base_models import base_models, pretrain
from policylab.cli import main


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("POLICYLAB_CACHE", str(tmp_path / "cache"))


def test_registry_holds_the_issue_17_models():
    expected = {
        "ring_flow",
        "tiny_mdm",
        "digits_flow",
        "digits_classifier_a",
        "digits_classifier_b",
    }
    assert expected <= set(base_models.names())
    for name in base_models:
        model = base_models.get(name)
        for knob, (_, source) in model.knobs.items():
            assert source.startswith("["), (name, knob)  # every default carries its source


def test_ring_flow_is_built_once_then_found(tmp_path):
    from policylab.lab.ring import base_ring_flow

    seen = []
    first = pretrain(
        "ring_flow", 3, progress=lambda done, total: seen.append((done, total)), steps=120
    )
    assert first.built and first.path.is_file() and first.path.parent == tmp_path / "cache"
    assert seen == [(50, 120), (100, 120), (120, 120)]
    assert "9,218 parameters" in first.description
    again = pretrain("ring_flow", 3, steps=120)
    assert not again.built and again.path == first.path and again.sha256 == first.sha256
    # lab/ring reads the same file: its base model has the pre-trained weights
    weights = torch.load(first.path, weights_only=True)
    policy = base_ring_flow(3, 120)
    assert all(torch.equal(weights[k], v) for k, v in policy.velocity_net.state_dict().items())
    other = pretrain("ring_flow", 4, steps=120)  # another seed: another file
    assert other.built and other.path != first.path


def test_digits_models_are_built_once_and_are_what_lab_digits_reads(tmp_path):
    from policylab.lab.digits_models import base_digits_flow, classifier_b

    flow = pretrain("digits_flow", 1, steps=3, label_noise=0.25)
    assert flow.built and flow.path.parent == tmp_path / "cache"
    assert "169,536 parameters" in flow.description and "25% of labels" in flow.description
    assert not pretrain("digits_flow", 1, steps=3, label_noise=0.25).built
    assert pretrain("digits_flow", 1, steps=3, label_noise=0.5).path != flow.path
    weights = torch.load(flow.path, weights_only=True)
    policy = base_digits_flow(1, 3, 0.25)
    assert all(torch.equal(weights[k], v) for k, v in policy.velocity_net.state_dict().items())
    b = pretrain("digits_classifier_b", 1, steps=3)
    assert b.built and "classifier B (cnn)" in b.description and "seed 7920" in b.description
    saved = torch.load(b.path, weights_only=True)
    assert all(torch.equal(saved[k], v) for k, v in classifier_b(1, 3).state_dict().items())
    a = pretrain("digits_classifier_a", 1, steps=3)
    assert a.built and a.path != b.path and "held-out accuracy" in a.description


def test_tiny_mdm_is_built_checked_and_rebuilt_when_torn():
    steps = []
    built = pretrain("tiny_mdm", 0, progress=lambda d, t: steps.append((d, t)), steps=2, eval_n=2)
    assert built.built and (built.path / "SHA256SUMS").is_file() and steps == [(1, 2), (2, 2)]
    assert "696,166 parameters" in built.description  # G0.7 says 689,510: see the report
    assert not pretrain("tiny_mdm", 0, steps=2, eval_n=2).built
    (built.path / "config.json").write_text("{}")  # no longer matches SHA256SUMS
    assert pretrain("tiny_mdm", 0, steps=2, eval_n=2).built


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: pretrain("ring_flw"), "unknown base model 'ring_flw'; choices: .*ring_flow"),
        (lambda: pretrain("ring_flow", stepz=3), "unknown knob\\(s\\) stepz; accepted: steps"),
        (lambda: pretrain("ring_flow", -1), "seed = -1; accepted: an integer >= 0"),
        (lambda: pretrain("ring_flow", steps=0), "steps = 0; accepted: an integer >= 1"),
        (lambda: pretrain("tiny_mdm", lr=0.0), "lr = 0.0; accepted: a number > 0"),
    ],
)
def test_bad_requests_are_named(call, message, tmp_path):
    with pytest.raises(ValueError, match=message):
        call()
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").iterdir())


def test_cli_lists_builds_and_refuses(capsys, tmp_path):
    assert main(["pretrain", "--list"]) == 0
    out = capsys.readouterr().out
    assert "ring_flow" in out and "tiny_mdm" in out and "steps=3000" in out
    assert main(["pretrain", "ring_flow", "steps=60", "seed=1"]) == 0
    out = capsys.readouterr().out
    assert "ring_flow built" in out and "60/60" in out and "sha256" in out
    assert main(["pretrain", "ring_flow", "steps=60", "seed=1"]) == 0
    assert "found in the cache" in capsys.readouterr().out
    assert main(["pretrain", "nope"]) == 2
    assert "unknown base model 'nope'" in capsys.readouterr().out
    assert main(["pretrain"]) == 2
    assert "name a base model; choices: digits_classifier_a, digits_classifier_b, digits_flow" in (
        capsys.readouterr().out
    )
