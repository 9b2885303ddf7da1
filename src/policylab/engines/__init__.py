"""Generation engines: `generate(prompt_ids, n, sampling) -> Generations` and
`load_weights(state_dict)`. The trainer never knows which engine it drives."""

from policylab.engines.base import Engine, Generations, Sampling
from policylab.engines.hf import HFEngine

__all__ = ["Engine", "Generations", "HFEngine", "Sampling"]
