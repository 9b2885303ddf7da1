"""Generation engines: `generate(prompt_ids, n, sampling) -> Generations` and
`load_weights(state_dict)`. The trainer never knows which engine it drives."""

from __future__ import annotations

from typing import Any

from policylab.engines.base import Engine, Generations, Sampling
from policylab.engines.hf import HFEngine, end_token_ids

ENGINES = ("hf", "vllm")


def make_engine(
    name: str, options: dict[str, Any], model, tokenizer, *, model_path: str, seed: int = 0
) -> Engine:
    """The engine `name` ("hf" or "vllm") generating for `model` (the learner's
    transformers model): HFEngine shares the model object; VLLMEngine (engines/vllm.py) is
    built from `model_path` (colocate) or reaches a server, with `options` (the config's
    `vllm` mapping), and is then sent the learner's weights."""
    if name == "hf":
        return HFEngine(model, tokenizer)
    if name != "vllm":
        raise ValueError(f"engine = {name!r} is not valid; choices: {', '.join(ENGINES)}")
    from policylab.engines.vllm import VLLMEngine
    from policylab.engines.vllm import options as vllm_options

    chosen = vllm_options(options)
    ends = end_token_ids(model, tokenizer)
    if chosen.mode == "server":
        engine = VLLMEngine.server(tokenizer, ends, chosen)
    else:
        engine = VLLMEngine.colocated(model_path, tokenizer, ends, chosen, seed)
    engine.load_weights(model.state_dict())  # from the learner's first step on: its weights
    return engine


__all__ = ["ENGINES", "Engine", "Generations", "HFEngine", "Sampling", "make_engine"]
