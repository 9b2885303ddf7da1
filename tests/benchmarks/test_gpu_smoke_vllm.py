"""benchmarks/gpu_smoke.py --engine vllm: the config it builds, and what it says without
vLLM or a GPU (the real run needs both)."""

import importlib.util
from pathlib import Path

import pytest
import torch

PATH = Path(__file__).parents[2] / "benchmarks" / "gpu_smoke.py"


@pytest.fixture(scope="module")
def gpu_smoke():
    spec = importlib.util.spec_from_file_location("gpu_smoke_vllm", PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_engine_vllm_colocates_with_the_given_memory_share(gpu_smoke):
    args = gpu_smoke.parse_args(["--engine", "vllm", "--vllm-gpu-memory-utilization", "0.4"])
    fields = gpu_smoke.engine_fields(args)
    assert fields["engine"] == "vllm"
    assert fields["vllm"] == {
        "mode": "colocate",
        "gpu_memory_utilization": 0.4,
        "max_model_len": 2048,
        "dtype": "bfloat16",
    }
    assert gpu_smoke.engine_fields(gpu_smoke.parse_args([])) == {}


def test_engine_vllm_on_the_cpu_is_refused(gpu_smoke):
    with pytest.raises(SystemExit):
        gpu_smoke.parse_args(["--cpu-tiny", "--engine", "vllm"])


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vllm is installed")
def test_without_vllm_it_names_the_extra_and_exits_0(gpu_smoke, monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert gpu_smoke.main(["--engine", "vllm"]) == 0
    assert 'pip install "policylab[vllm]"' in capsys.readouterr().out
