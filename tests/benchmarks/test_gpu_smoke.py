"""benchmarks/gpu_smoke.py: its tiny CPU version trains through policylab's trainer and
reports; without CUDA the real one says so and exits 0."""

import importlib.util
import json
from pathlib import Path

import pytest
import torch

PATH = Path(__file__).parents[2] / "benchmarks" / "gpu_smoke.py"


@pytest.fixture(scope="module")
def gpu_smoke():
    spec = importlib.util.spec_from_file_location("gpu_smoke", PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_without_cuda_it_says_so_and_exits_0(gpu_smoke, monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert gpu_smoke.main([]) == 0
    assert "no CUDA GPU here" in capsys.readouterr().out


def test_the_shape_is_qwen2_05b(gpu_smoke):
    # 494 M parameters with tied embeddings (Qwen2-0.5B's model card: 0.49 B): embeddings
    # V·d; per layer q (d·d + d), k and v (d·kv + kv each), o (d·d), MLP (3·d·f), 2 norms
    from transformers import Qwen2Config

    c = Qwen2Config(**gpu_smoke.QWEN2_05B)
    d, f, L, V = c.hidden_size, c.intermediate_size, c.num_hidden_layers, c.vocab_size
    kv = d // c.num_attention_heads * c.num_key_value_heads
    per_layer = (d * d + d) + 2 * (d * kv + kv) + d * d + 3 * d * f + 2 * d
    assert V * d + L * per_layer + d == pytest.approx(494e6, rel=0.01)


@pytest.mark.slow
def test_cpu_tiny_trains_in_bfloat16_and_reports(gpu_smoke, tmp_path, capsys):
    out = tmp_path / "result.json"
    assert gpu_smoke.main(["--cpu-tiny", "--work-dir", str(tmp_path), "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "tokens/s (generated, steps after the first):" in text
    assert "torch.cuda.max_memory_allocated: n/a (CPU)" in text
    result = json.loads(out.read_text())
    assert result["dtype"] == "bfloat16" and len(result["steps"]) == 2
    assert result["generated_tokens_per_s"] > 0
    assert all(s["grad_norm"] > 0 for s in result["steps"])  # the weights were updated
    assert (tmp_path / "run" / "checkpoints" / "step_2" / "model").is_dir()
