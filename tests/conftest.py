"""Puts tests/ on sys.path (pytest's prepend import mode), so test modules in any folder
can import the shared helpers beside this file (run_testing.py)."""

import pytest

from policylab.models import TinyConfig, build_model, build_tokenizer


@pytest.fixture(scope="session")
def small_model_dir(tmp_path_factory):
    """A hub-style folder (save_pretrained) of a small random Llama: fast to train."""
    folder = tmp_path_factory.mktemp("small-model")
    tokenizer = build_tokenizer()
    arch = TinyConfig(
        hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2
    )
    build_model(tokenizer, arch, seed=0).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)
