"""LoRA through peft (lora.py): only the adapters train, the base with its adapters off is
the reference (and the only copy of the model), export writes a merged model folder that
scores as the adapted model and an adapter folder peft reloads, runs with LoRA train end
to end and resume exactly, and bad options or a missing peft fail before any model loads."""

import sys

import pytest
import torch

import policylab
from policylab import lora, models
from policylab.config import ConfigError, TrainConfig, load, parse_overrides
from policylab.models import load_model, sequence_logprobs
from policylab.trainers import llm
from run_testing import FAST_LLM, assert_same_metrics

peft = pytest.importorskip("peft")


def score(model, tokenizer):
    """Log-probs [2, 3] of two fixed responses after two prompts of different lengths."""
    prompts = [tokenizer.encode("12+3="), tokenizer.encode("7*8=")]
    responses = torch.tensor([tokenizer.encode("15<"), tokenizer.encode("56<")])
    with torch.no_grad():
        out, _ = sequence_logprobs(
            model, prompts, responses, torch.ones_like(responses), pad_id=tokenizer.pad_token_id
        )
    return out


@pytest.fixture
def adapted(small_model_dir):
    """(LoRA model on the small random Llama, tokenizer), adapters on q_proj and v_proj."""
    torch.manual_seed(0)
    model, tokenizer = load_model(small_model_dir)
    return lora.apply_lora(model, lora.LoraOptions(r=4, target_modules=["q_proj", "v_proj"])), (
        tokenizer
    )


def one_step(model, tokenizer):
    """One AdamW step (lr 0.1) on the adapters, pushing the responses' log-probs up."""
    trained = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(trained, lr=0.1)
    prompts = [tokenizer.encode("12+3="), tokenizer.encode("7*8=")]
    responses = torch.tensor([tokenizer.encode("15<"), tokenizer.encode("56<")])
    logp, _ = sequence_logprobs(
        model, prompts, responses, torch.ones_like(responses), pad_id=tokenizer.pad_token_id
    )
    (-logp.sum()).backward()
    opt.step()


def test_only_the_adapters_train(adapted):
    model, tokenizer = adapted
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    # 1 layer × (q_proj, v_proj) × (A, B)
    assert len(trainable) == 4 and all(".lora_A." in n or ".lora_B." in n for n in trainable)
    base = {n: p.detach().clone() for n, p in model.named_parameters() if not p.requires_grad}
    adapters = {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}
    one_step(model, tokenizer)
    after = dict(model.named_parameters())
    assert all(torch.equal(after[n], w) for n, w in base.items())  # bit for bit
    assert all(not torch.equal(after[n], w) for n, w in adapters.items())


def test_reference_is_the_base_with_adapters_off(small_model_dir, adapted):
    model, tokenizer = adapted
    untouched, _ = load_model(small_model_dir)
    base = score(untouched, tokenizer)
    # B = 0 at the start: the adapted model is the base, adapters on or off
    assert torch.equal(score(model, tokenizer), base)
    with lora.adapters_off(model):
        assert torch.equal(score(model, tokenizer), base)
    one_step(model, tokenizer)
    assert (score(model, tokenizer) - base).abs().max() > 1e-3  # the policy moved
    with lora.adapters_off(model):
        assert torch.equal(score(model, tokenizer), base)  # the reference did not
    assert torch.equal(score(model, tokenizer), score(model, tokenizer))  # adapters back on
    assert (score(model, tokenizer) - base).abs().max() > 1e-3


def test_adapters_off_leaves_a_plain_model_as_it_is(small_model_dir):
    model, tokenizer = load_model(small_model_dir)
    assert not lora.is_lora(model)
    with lora.adapters_off(model):
        assert torch.equal(score(model, tokenizer), score(model, tokenizer))


def test_export_reloads_as_the_adapted_model(adapted, tmp_path, small_model_dir):
    model, tokenizer = adapted
    one_step(model, tokenizer)
    expected = score(model, tokenizer)
    folder = lora.export(model, tokenizer, tmp_path / "model")
    merged, merged_tokenizer = load_model(folder)  # a plain model folder: policylab and HF
    assert not lora.is_lora(merged)
    assert torch.allclose(score(merged, merged_tokenizer), expected, atol=1e-5)
    # the adapters alone, on a fresh base, through peft itself
    base, _ = load_model(small_model_dir)
    reloaded = peft.PeftModel.from_pretrained(base, str(folder / lora.ADAPTER))
    assert torch.equal(score(reloaded, tokenizer), expected)
    # exporting left the training model as it was (no merge and unmerge)
    assert torch.equal(score(model, tokenizer), expected)


def test_load_adapter_restores_trained_adapters(small_model_dir, adapted, tmp_path):
    model, tokenizer = adapted
    one_step(model, tokenizer)
    lora.export(model, tokenizer, tmp_path / "model")
    torch.manual_seed(1)
    fresh = lora.apply_lora(
        load_model(small_model_dir)[0], lora.LoraOptions(r=4, target_modules=["q_proj", "v_proj"])
    )
    assert not torch.equal(score(fresh, tokenizer), score(model, tokenizer))
    lora.load_adapter(fresh, tmp_path / "model")
    assert torch.equal(score(fresh, tokenizer), score(model, tokenizer))


def test_all_linear_targets_every_projection_but_the_head(small_model_dir):
    model, _ = load_model(small_model_dir)
    adapted = lora.apply_lora(model, lora.LoraOptions())
    targets = {n.split(".")[-4] for n, p in adapted.named_parameters() if p.requires_grad}
    assert targets == {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}


# ---- options -----------------------------------------------------------------------------


def test_off_and_defaults():
    assert TrainConfig().lora == {}
    assert TrainConfig(lora=None).lora == {} and TrainConfig(lora={}).lora == {}
    full = {"r": 16, "alpha": 32, "dropout": 0.0, "target_modules": "all-linear", "bias": "none"}
    assert TrainConfig(lora=True).lora == full
    assert TrainConfig(lora={"r": 8}).lora == {**full, "r": 8}  # written out in full
    # the command line: policylab train lora=true / lora='{r: 8}'
    assert load(TrainConfig, None, parse_overrides(["lora=true"])).lora == full
    assert load(TrainConfig, None, parse_overrides(["lora={r: 8}"])).lora["r"] == 8


@pytest.mark.parametrize(
    "options, named",
    [
        ({"rank": 8}, "unknown option(s) rank; valid options: alpha, bias, dropout, r, "),
        ({"r": 0}, "lora.r = 0 is out of range"),
        ({"r": 2.5}, "lora.r = 2.5 must be a whole number"),
        ({"alpha": -1}, "lora.alpha = -1 is out of range"),
        ({"dropout": 0.05}, "lora.dropout = 0.05"),
        ({"bias": "some"}, "lora.bias = 'some' is not valid; choices: 'none', 'all'"),
        ({"target_modules": []}, "lora.target_modules = []"),
        ("q_proj", "lora = 'q_proj': accepted: null or {} (off), true"),
    ],
)
def test_bad_options_name_the_key(options, named):
    with pytest.raises(ConfigError) as err:
        load(TrainConfig, None, {"lora": options})
    assert named in str(err.value)


def test_unknown_target_module_lists_the_models_layers(small_model_dir):
    model, _ = load_model(small_model_dir)
    with pytest.raises(ValueError, match=r"lora.target_modules = \['qkv'\].*q_proj.*v_proj"):
        lora.apply_lora(model, lora.LoraOptions(target_modules=["qkv"]))


def test_trained_biases_with_a_kl_fail_before_the_model_loads(small_model_dir, tmp_path):
    cfg = load(TrainConfig, None, {"model": small_model_dir, "lora": {"bias": "all"}})
    with pytest.raises(ConfigError, match="lora.bias = 'all'.*grpo's KL reference"):
        llm.compose(cfg)
    no_kl = cfg.model_copy(update={"loss": {"kl_coef": 0.0}})
    assert llm.compose(no_kl).lora.bias == "all"


def test_missing_peft_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "peft", None)  # `import peft` raises ImportError
    with pytest.raises(ConfigError, match=r'pip install "policylab\[lora\]"'):
        load(TrainConfig, None, {"lora": {"r": 8}})
    with pytest.raises(ImportError, match=r'pip install "policylab\[lora\]"'):
        lora.apply_lora(torch.nn.Linear(2, 2), lora.LoraOptions())
    assert TrainConfig().lora == {}  # LoRA off never needs peft


# ---- the trainer ---------------------------------------------------------------------------


def lora_run(small_model_dir, folder, **fields):
    """A 2-step grpo run (its KL needs a reference) with rank-4 adapters on every linear
    layer, rewarded by the completion's length mod 5 (so groups differ and it learns)."""
    reward = folder.parent / "length.py"
    reward.parent.mkdir(parents=True, exist_ok=True)
    reward.write_text(
        "def length(prompts, completions, **kw):\n"
        "    return [float(len(c) % 5) for c in completions]\n"
    )
    run = dict(FAST_LLM, model=small_model_dir, run_dir=str(folder), steps=2, lr=1e-2)
    return {**run, "lora": {"r": 4, "alpha": 8}, "rewards": {f"{reward}:length": 1.0}, **fields}


def test_train_with_lora_end_to_end(small_model_dir, tmp_path, monkeypatch):
    loads = []
    real_load = models.load_model  # the trainer loads through policylab.objects → models
    monkeypatch.setattr(models, "load_model", lambda *a, **k: loads.append(a) or real_load(*a, **k))
    reference_models = []
    real_reference = llm.reference_logprobs

    def spy(reference, *args, **kwargs):
        reference_models.append(reference)
        return real_reference(reference, *args, **kwargs)

    monkeypatch.setattr(llm, "reference_logprobs", spy)
    result = policylab.train(**lora_run(small_model_dir, tmp_path / "run"))
    # grpo's KL needs a reference: it is the policy's own (LoRA) model, no second load
    assert len(loads) == 1
    assert reference_models and all(lora.is_lora(m) for m in reference_models)
    root = tmp_path / "run" / "model"
    merged, tokenizer = load_model(root)
    base, _ = load_model(small_model_dir)
    changed = [
        n
        for (n, a), b in zip(merged.named_parameters(), base.parameters(), strict=True)
        if not torch.equal(a, b)
    ]
    # all-linear: every projection of the layer moved; embeddings and norms did not
    assert sorted({n.split(".")[-2] for n in changed}) == [
        "down_proj",
        "gate_proj",
        "k_proj",
        "o_proj",
        "q_proj",
        "up_proj",
        "v_proj",
    ]
    adapter = peft.PeftModel.from_pretrained(base, str(root / lora.ADAPTER))
    assert torch.allclose(score(adapter, tokenizer), score(merged, tokenizer), atol=1e-5)
    checkpoint = tmp_path / "run" / "checkpoints" / f"step_{result.steps}" / "model"
    assert torch.equal(score(load_model(checkpoint)[0], tokenizer), score(merged, tokenizer))
    # a resumed run keeps its adapters' shape: other options would not fit the checkpoint
    other = lora_run(small_model_dir, tmp_path / "run", steps=3, lora={"r": 8})
    with pytest.raises(ValueError, match="cannot resume .* with lora="):
        policylab.train(**other, resume=True)


@pytest.mark.slow
def test_resume_with_lora_equals_an_uninterrupted_run(small_model_dir, tmp_path):
    # evaluations at 2 and 4 in both runs (the first half of b ends with one at 2)
    policylab.train(**lora_run(small_model_dir, tmp_path / "a", steps=4, eval_every=2))
    policylab.train(**lora_run(small_model_dir, tmp_path / "b", eval_every=2))
    resumed = lora_run(small_model_dir, tmp_path / "b", steps=4, eval_every=2)
    policylab.train(**resumed, resume=True)
    rows = assert_same_metrics(tmp_path / "a", tmp_path / "b")
    assert any(r.get("kl/ref", 0) > 0 for r in rows)  # the policy drifted from the reference
    a, tokenizer = load_model(tmp_path / "a" / "model")
    b, _ = load_model(tmp_path / "b" / "model")
    assert torch.equal(score(a, tokenizer), score(b, tokenizer))
