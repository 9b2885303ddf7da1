"""A stand-in for the `vllm` package with its API's shape (LLM, SamplingParams,
RequestOutput / CompletionOutput, Logprob, the model runner's `load_weights`), backed by a
transformers model through HFEngine, so the vLLM engine is tested on the CPU. Install it
with `monkeypatch.setitem(sys.modules, "vllm", fake_vllm.module())`."""

from __future__ import annotations

import types
from dataclasses import dataclass

import torch

from policylab.engines import HFEngine, Sampling
from policylab.models import load_model


@dataclass
class Logprob:
    logprob: float
    rank: int | None = None
    decoded_token: str | None = None


@dataclass
class CompletionOutput:
    index: int
    text: str
    token_ids: list[int]
    cumulative_logprob: float | None
    logprobs: list[dict[int, Logprob]] | None
    finish_reason: str | None = None


@dataclass
class RequestOutput:
    request_id: str
    prompt_token_ids: list[int]
    outputs: list[CompletionOutput]


@dataclass
class SamplingParams:
    n: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    max_tokens: int | None = 16
    stop: list[str] | None = None
    stop_token_ids: list[int] | None = None
    include_stop_str_in_output: bool = False
    logprobs: int | None = None
    seed: int | None = None


class _Model:
    """vLLM's model in the model runner: `load_weights(iterable of (name, tensor))`."""

    def __init__(self, hf_model) -> None:
        self.hf_model, self.loads = hf_model, []

    def load_weights(self, weights) -> None:
        weights = dict(weights)
        self.loads.append(sorted(weights))
        self.hf_model.load_state_dict({k: v.detach().clone() for k, v in weights.items()})


class LLM:
    """`vllm.LLM(model=folder, **engine kwargs)` over the HF model of that folder."""

    instances: list[LLM] = []  # every LLM made, newest last

    def __init__(self, model: str, **kwargs) -> None:
        self.model, self.kwargs = model, kwargs
        hf_model, tokenizer = load_model(model)
        self.engine = HFEngine(hf_model.eval(), tokenizer)
        self.runner_model = _Model(hf_model)
        runner = types.SimpleNamespace(model=self.runner_model)
        worker = types.SimpleNamespace(model_runner=runner)
        self.llm_engine = types.SimpleNamespace(
            model_executor=types.SimpleNamespace(driver_worker=worker)
        )
        self.prefix_resets = 0
        self.requests: list[tuple[list[int], SamplingParams]] = []
        LLM.instances.append(self)

    def generate(self, prompts, sampling_params, use_tqdm=True) -> list[RequestOutput]:
        if not isinstance(sampling_params, list):
            sampling_params = [sampling_params] * len(prompts)
        return [
            self._one(i, p["prompt_token_ids"], s)
            for i, (p, s) in enumerate(zip(prompts, sampling_params, strict=True))
        ]

    def _one(self, i: int, prompt: list[int], params: SamplingParams) -> RequestOutput:
        assert params.logprobs == 0, "the engine asks for the sampled token's log-prob only"
        self.requests.append((prompt, params))
        sampling = Sampling(
            temperature=params.temperature,
            top_p=params.top_p,
            top_k=max(params.top_k, 0),
            max_new_tokens=params.max_tokens,
            stop_strings=tuple(params.stop or ()),
        )
        seed = params.seed if params.seed is not None else 0
        gen = self.engine.generate(
            [prompt], params.n, sampling, torch.Generator().manual_seed(seed)
        )
        outputs = []
        for j in range(params.n):
            keep = gen.response_mask[j].bool()
            ids = gen.response_ids[j][keep].tolist()
            lps = gen.logprobs[j][keep].tolist()
            outputs.append(
                CompletionOutput(
                    index=j,
                    text=gen.texts[j],
                    token_ids=ids,
                    cumulative_logprob=sum(lps),
                    logprobs=[{t: Logprob(lp, rank=1)} for t, lp in zip(ids, lps, strict=True)],
                    finish_reason=gen.finish_reason[j],
                )
            )
        return RequestOutput(str(i), prompt, outputs)

    def reset_prefix_cache(self) -> bool:
        self.prefix_resets += 1
        return True


def module() -> types.ModuleType:
    fake = types.ModuleType("vllm")
    fake.LLM, fake.SamplingParams = LLM, SamplingParams
    fake.RequestOutput, fake.CompletionOutput = RequestOutput, CompletionOutput
    fake.Logprob = Logprob
    fake.__version__ = "0.0.fake"
    LLM.instances.clear()
    return fake
