"""Device and precision (devices.py): the device names, mixed precision under autocast on
the CPU (bfloat16, float16 with loss scaling) with float32 master weights and float32
log-probs, gradient checkpointing with unchanged gradients, float32 changing nothing, and
the trainer's wiring of it all."""

import copy

import pytest
import torch

from policylab.config import ConfigError, TrainConfig, load
from policylab.devices import Precision, place, precision_of, resolve_device
from policylab.engines import Sampling
from policylab.engines.hf import _generator_on
from policylab.models import TinyConfig, build_model, build_tokenizer, response_forward
from policylab.policies import LanguageModelPolicy
from policylab.trainers.llm import compose, learners, train
from policylab.trainers.run import read_metrics
from run_testing import FAST_LLM

TOKENIZER = build_tokenizer()


def tiny(kind: str, seed: int = 0):
    """A random 2-layer Llama or Qwen2 (grouped-query attention) in eval mode, as
    `load_model` returns models."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    if kind == "llama":
        arch = TinyConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2)
        return build_model(TOKENIZER, arch, seed=seed).eval()
    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=len(TOKENIZER),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        tie_word_embeddings=True,
        pad_token_id=TOKENIZER.pad_token_id,
        eos_token_id=TOKENIZER.eos_token_id,
    )
    return Qwen2ForCausalLM(config).eval()


def batch():
    prompts = [TOKENIZER(t, add_special_tokens=False)["input_ids"] for t in ("12+34=", "9*9=")]
    torch.manual_seed(5)
    response = torch.randint(3, len(TOKENIZER), (2, 6))
    mask = torch.tensor([[1, 1, 1, 1, 1, 0], [1, 1, 1, 1, 1, 1]], dtype=torch.float32)
    return prompts, response, mask


def forward(model, **kw):
    prompts, response, mask = batch()
    return response_forward(model, prompts, response, mask, pad_id=TOKENIZER.pad_token_id, **kw)


def grads(model) -> list[torch.Tensor]:
    model.zero_grad()
    forward(model, temperature=0.9).logprobs.sum().backward()
    return [p.grad.clone() for p in model.parameters()]


# ---- device names -------------------------------------------------------------------


def test_cuda_without_a_gpu_fails_in_the_config(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    for name in ("cuda", "cuda:0"):
        with pytest.raises(ConfigError, match="device = .*no CUDA GPU.*device=cpu"):
            load(TrainConfig, None, {"device": name})
    assert resolve_device("auto") == torch.device("cpu")
    assert load(TrainConfig, None, {"device": "cpu"}).device == "cpu"


@pytest.mark.parametrize("name", ["gpu", "cuda:", "cuda:x", "CUDA", "mps", ""])
def test_unknown_device_names_list_the_accepted_ones(name):
    with pytest.raises(ConfigError, match='accepted: "auto", "cpu", "cuda" or "cuda:N"'):
        load(TrainConfig, None, {"device": name})


def test_auto_and_indices_on_a_machine_with_two_gpus(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert resolve_device("auto") == torch.device("cuda")
    assert resolve_device("cuda:1") == torch.device("cuda", 1)
    with pytest.raises(ValueError, match=r"2 CUDA GPU\(s\): accepted cuda:0 .. cuda:1"):
        resolve_device("cuda:2")


def test_dtype_choices():
    assert load(TrainConfig, None, {}).dtype == "float32"  # the default
    with pytest.raises(ConfigError, match="dtype = 'fp16'.*'float32', 'bfloat16' or 'float16'"):
        load(TrainConfig, None, {"dtype": "fp16"})
    with pytest.raises(ValueError, match="unknown dtype 'half'; accepted: float32, bfloat16"):
        Precision.of("cpu", "half")


def test_autocast_and_loss_scaling_by_dtype():
    cpu = torch.device("cpu")
    assert Precision.of("cpu", "bfloat16") == Precision(cpu, torch.bfloat16)
    with Precision.of("cpu", "float32").autocast():
        assert not torch.is_autocast_enabled("cpu")
    with Precision.of("cpu", "bfloat16").autocast():
        assert torch.is_autocast_enabled("cpu")
        assert torch.get_autocast_dtype("cpu") == torch.bfloat16
    assert Precision.of("cpu", "float32").grad_scaler() is None
    assert Precision.of("cpu", "bfloat16").grad_scaler() is None  # float32's exponent range
    scaler = Precision.of("cpu", "float16").grad_scaler()
    assert isinstance(scaler, torch.amp.GradScaler) and scaler.is_enabled()


def test_a_cpu_generator_stays_itself_on_the_cpu():
    generator = torch.Generator().manual_seed(0)
    assert _generator_on(torch.device("cpu"), generator) is generator
    assert _generator_on(torch.device("cpu"), None) is None


# ---- float32 changes nothing ----------------------------------------------------------


def test_float32_placement_changes_no_number():
    plain = tiny("qwen2")
    placed = place(copy.deepcopy(plain), Precision.of("cpu", "float32"))
    assert precision_of(placed) == Precision.of("cpu", "float32")
    a, b = forward(plain, with_entropy=True), forward(placed, with_entropy=True)
    assert torch.equal(a.logprobs, b.logprobs) and torch.equal(a.entropy, b.entropy)
    for ga, gb in zip(grads(plain), grads(placed), strict=True):
        assert torch.equal(ga, gb)


# ---- mixed precision on the CPU -----------------------------------------------------


@pytest.mark.parametrize("kind", ["llama", "qwen2"])
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_mixed_precision_on_the_cpu_keeps_float32_weights_and_logprobs(kind, dtype):
    exact = tiny(kind)
    model = place(copy.deepcopy(exact), Precision.of("cpu", dtype))
    low, full = forward(model, with_entropy=True), forward(exact, with_entropy=True)
    assert low.logprobs.dtype == low.entropy.dtype == torch.float32
    assert torch.isfinite(low.logprobs).all()
    # autocast is on: the numbers moved, by about the low precision's rounding
    assert not torch.equal(low.logprobs, full.logprobs)
    torch.testing.assert_close(low.logprobs, full.logprobs, atol=0.1, rtol=0)
    # master weights: the parameters and their gradients stay float32
    low.logprobs.sum().backward()
    assert all(p.dtype == p.grad.dtype == torch.float32 for p in model.parameters())
    assert all(torch.isfinite(p.grad).all() for p in model.parameters())


def test_the_engine_samples_under_autocast_too():
    sampling = Sampling(temperature=1.0, max_new_tokens=6)
    exact = LanguageModelPolicy(tiny("qwen2"), TOKENIZER, sampling=sampling)
    low = copy.deepcopy(exact)  # the engine shares the deep copy's model
    place(low.model, Precision.of("cpu", "bfloat16"))
    prompts = batch()[0]

    def draw(policy):
        return policy.sample(prompts, generator=torch.Generator().manual_seed(0), n=2)

    a, b = draw(exact), draw(low)
    assert b.logprobs.dtype == torch.float32
    assert not torch.equal(a.logprobs, b.logprobs)
    # the learner's forward (autocast too) agrees with the sampler to bf16 rounding
    again = low.evaluate(b.extras["prompt_ids"], b.actions, mask=b.mask)
    torch.testing.assert_close(again.logprobs.detach(), b.logprobs, atol=0.1, rtol=0)


# ---- gradient checkpointing ---------------------------------------------------------


@pytest.mark.parametrize("kind", ["llama", "qwen2"])
def test_checkpointing_recomputes_layers_and_leaves_the_gradients(kind):
    plain = tiny(kind)
    lean = place(copy.deepcopy(plain), Precision.of("cpu", "float32"), gradient_checkpointing=True)
    calls = []
    for layer in lean.model.layers:
        layer.mlp.register_forward_pre_hook(lambda *_: calls.append(1))
    expected = grads(plain)
    got = grads(lean)
    # each layer's MLP was entered twice: the forward, and its recomputation in backward
    assert len(calls) == 2 * len(lean.model.layers)
    for a, b in zip(expected, got, strict=True):
        torch.testing.assert_close(a, b, atol=1e-7, rtol=0)
    assert not any(m.training for m in lean.modules())  # eval mode again: no dropout
    calls.clear()
    with torch.no_grad():  # no gradient, no recomputation
        forward(lean)
    assert len(calls) == len(lean.model.layers)


# ---- the trainer ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def qwen2_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("qwen2")
    tiny("qwen2").save_pretrained(folder)
    TOKENIZER.save_pretrained(folder)
    return str(folder)


def run_config(model_dir, tmp_path, **fields):
    fields = {**FAST_LLM, "model": model_dir, "run_dir": str(tmp_path / "run"), **fields}
    return load(TrainConfig, None, fields)


def test_learners_place_policy_and_reference(qwen2_dir, tmp_path):
    cfg = run_config(
        qwen2_dir, tmp_path, device="cpu", dtype="float16", gradient_checkpointing=True,
        loss={"kl_coef": 0.05},  # a reference model
    )  # fmt: skip
    policies, reference = learners(cfg, compose(cfg))
    model = policies(0).model
    assert precision_of(model) == precision_of(reference) == Precision.of("cpu", "float16")
    assert model.dtype == reference.dtype == torch.float32  # master weights; exact reference
    assert all(layer.gradient_checkpointing for layer in model.model.layers)
    assert not any(getattr(m, "gradient_checkpointing", False) for m in reference.modules())
    assert isinstance(policies.members[0].scaler, torch.amp.GradScaler)
    default = run_config(qwen2_dir, tmp_path, device="cpu")
    policies, _ = learners(default, compose(default))
    assert policies.members[0].scaler is None


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_a_mixed_precision_run_on_the_cpu_learns(qwen2_dir, tmp_path, dtype):
    parity = tmp_path / "parity.py"  # a reward that varies within every group
    parity.write_text(
        "def parity(prompts, completions, **kw):\n    return [len(c) % 2 for c in completions]\n"
    )
    cfg = run_config(
        qwen2_dir, tmp_path, steps=2, device="cpu", dtype=dtype, loss={"kl_coef": 0.05},
        rewards={f"{parity}:parity": 1.0},
    )  # fmt: skip
    before = {n: p.clone() for n, p in tiny("qwen2").named_parameters()}
    result = train(cfg)
    rows = read_metrics(cfg.run_dir, kind="train")
    assert len(rows) == 2
    for row in rows:
        assert all(torch.isfinite(torch.tensor(row[k])) for k in ("loss", "kl/ref", "entropy"))
        assert ("loss_scale" in row) == (dtype == "float16")
    from transformers import AutoModelForCausalLM

    after = AutoModelForCausalLM.from_pretrained(f"{result.run_dir}/checkpoints/step_2/model")
    assert next(after.parameters()).dtype == torch.float32
    changed = [n for n, p in after.named_parameters() if not torch.equal(p, before[n])]
    assert changed, "no parameter moved"
