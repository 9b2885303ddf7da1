"""vLLM as the generation engine (the extra `vllm`; a CUDA GPU), behind the engine
contract of engines/base.py, in two modes:

- colocate: a `vllm.LLM` in the trainer's process, on the trainer's GPU (TRL's
  `vllm_mode="colocate"`). `generate` sends every prompt as token ids with its own
  `SamplingParams(n, temperature, top_p, top_k, max_tokens, stop, stop_token_ids,
  logprobs=0, seed)`; `load_weights` hands the learner's state dict to the vLLM model's
  own `load_weights` (the model runner's model, TRL's colocate sync) and resets the prefix
  cache, whose entries were computed with the old weights.
- server: an HTTP client of a `vllm serve` server (the protocol TRL's VLLMClient speaks):
  `POST /v1/completions` with token-id prompts and `return_token_ids`; weights through
  vLLM's NCCL weight-transfer engine (`/init_weight_transfer_engine`, `/update_weights`
  between `/start_weight_update` and `/finish_weight_update`, then
  `/reset_prefix_cache`). Every request has the timeout `vllm.timeout_s`; an unreachable
  server is an error naming its URL.

Each prompt gets its own seed drawn from the trainer's generator: one seed shared by a
batch gives every prompt the same noise (vLLM issue #50440), while the n samples of one
request get seed + i from vLLM. vLLM reports the log-prob of each sampled token; with
`logprobs_mode = "processed_logprobs"` (the default here) that is under the temperature-
scaled distribution, the quantity the learner recomputes (engines/hf.py), so the trainer's
`engine/logprob_gap_*` metrics measure only the engines' numerical difference. vLLM
reports no entropy (`Generations.entropy` is None).

vllm is imported only when this engine is built; the CPU tests drive it with a fake
`vllm` module of the same shape (tests/engines/test_vllm_engine.py)."""

from __future__ import annotations

import json
import logging
import os
import urllib.error
import urllib.request
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import Any

import torch

from policylab.algebra.options import build_options, check_choice, check_range, option
from policylab.engines.base import Generations, Sampling, check_request

log = logging.getLogger(__name__)

INSTALL = 'pip install "policylab[vllm]"'
MODES = ("colocate", "server")
FINISH = {"stop": "stop", "length": "length"}  # vLLM's finish_reason → ours


@dataclass(frozen=True)
class VllmOptions:
    """The config's `vllm` field (engine = "vllm")."""

    mode: str = option("colocate", "colocate (a vllm.LLM in this process) or server (HTTP)")
    server_url: str = option(
        "http://127.0.0.1:8000", "server: the base URL of the `vllm serve` server"
    )
    timeout_s: float = option(
        300.0, "server: seconds one request (a generation, a weight update) may take"
    )
    gpu_memory_utilization: float = option(
        0.3,
        "colocate: the fraction of GPU memory vLLM may take; the learner shares the GPU "
        "(TRL's vllm_gpu_memory_utilization default)",
    )
    dtype: str = option("auto", "colocate: vLLM's dtype (auto = the checkpoint's)")
    max_model_len: int = option(0, "colocate: vLLM's context length (0 = the model's own)")
    enforce_eager: bool = option(False, "colocate: no CUDA graphs (slower, less memory)")
    logprobs_mode: str = option(
        "processed_logprobs",
        "colocate: which log-probs vLLM reports: processed_logprobs = after temperature, as "
        'the learner computes them; raw_logprobs = vLLM\'s own default; "" = do not pass '
        "it (a vLLM without the option); server: start `vllm serve` with --logprobs-mode",
    )
    group_port: int = option(51216, "server: the port of the NCCL weight-transfer group")

    def __post_init__(self) -> None:
        check_choice("vllm", "mode", self.mode, MODES)
        if not isinstance(self.server_url, str) or not self.server_url.startswith(
            ("http://", "https://")
        ):
            raise ValueError(
                f"vllm.server_url = {self.server_url!r}: accepted: an http:// or https:// URL, "
                "e.g. http://127.0.0.1:8000"
            )
        check_range("vllm", "timeout_s", self.timeout_s, low=0, low_open=True)
        check_range("vllm", "gpu_memory_utilization", self.gpu_memory_utilization, low=0, high=1)
        check_range("vllm", "max_model_len", self.max_model_len, low=0)
        check_choice(
            "vllm", "logprobs_mode", self.logprobs_mode, ("processed_logprobs", "raw_logprobs", "")
        )


def options(value: dict[str, Any] | None) -> VllmOptions:
    """The vLLM options of a config's `vllm` mapping over the defaults; an unknown key or a
    bad value is a ValueError naming it."""
    return build_options(VllmOptions, value or {}, where="vllm")


def as_config(value: Any) -> dict[str, Any]:
    """The config's `vllm` field: {} stays {} (the defaults), a mapping is checked and
    written out in full."""
    if value is None or value == {}:
        return {}
    if not isinstance(value, dict):
        raise ValueError(f"vllm = {value!r}: accepted: a mapping of options, e.g. {{mode: server}}")
    return asdict(options(value))


def require_vllm(error: type[Exception] = ImportError):
    """The vllm module, or `error` naming the extra to install."""
    try:
        import vllm
    except ImportError:
        raise error(
            f"engine = 'vllm' needs the vllm package, which is not installed: {INSTALL} "
            "(vLLM needs a CUDA GPU)"
        ) from None
    return vllm


@dataclass
class Completion:
    """One sampled response as vLLM reports it."""

    token_ids: list[int]
    logprobs: list[float]  # of each sampled token
    finish_reason: str | None


class VLLMEngine:
    """The engine contract over a vLLM backend (`_Colocated` or `_Server`): prompts as
    token ids in, `Generations` out (right-padded with the pad id, the end token kept in
    the mask, as HFEngine); `load_weights` pushes the learner's weights to vLLM."""

    def __init__(self, backend, tokenizer, end_ids: list[int]) -> None:
        if tokenizer.pad_token_id is None:
            raise ValueError("the tokenizer has no pad token; set tokenizer.pad_token first")
        self.backend, self.tokenizer = backend, tokenizer
        self.pad_id, self.end_ids = tokenizer.pad_token_id, list(end_ids)

    @classmethod
    def colocated(
        cls, model_path: str, tokenizer, end_ids: list[int], opts: VllmOptions, seed: int = 0
    ) -> VLLMEngine:
        vllm = require_vllm()
        # the engine core in this process, so that load_weights reaches the model (as TRL)
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        kwargs: dict[str, Any] = dict(
            model=model_path,
            gpu_memory_utilization=opts.gpu_memory_utilization,
            dtype=opts.dtype,
            enforce_eager=opts.enforce_eager,
            seed=seed,
        )
        if opts.max_model_len:
            kwargs["max_model_len"] = opts.max_model_len
        if opts.logprobs_mode:
            kwargs["logprobs_mode"] = opts.logprobs_mode
        return cls(_Colocated(vllm.LLM(**kwargs), vllm), tokenizer, end_ids)

    @classmethod
    def server(cls, tokenizer, end_ids: list[int], opts: VllmOptions, sender=None) -> VLLMEngine:
        """A client of the server at `opts.server_url`; `sender` moves the tensors of a
        weight update (default: vLLM's NCCL weight-transfer engine, `NcclSender`)."""
        backend = _Server(opts.server_url, opts.timeout_s, sender or NcclSender(opts.group_port))
        return cls(backend, tokenizer, end_ids)

    def load_weights(self, state_dict: dict[str, torch.Tensor]) -> None:
        self.backend.load_weights(state_dict)

    def generate(
        self,
        prompt_ids: list[list[int]],
        n: int,
        sampling: Sampling,
        generator: torch.Generator | None = None,
    ) -> Generations:
        check_request(prompt_ids, n)
        seeds = [None] * len(prompt_ids)
        if generator is not None:  # one seed per prompt, reproducible from the trainer's
            seeds = torch.randint(2**31 - 1, (len(prompt_ids),), generator=generator).tolist()
        request = sampling_request(n, sampling, self.end_ids)
        completions = self.backend.generate(prompt_ids, request, seeds)
        if len(completions) != n * len(prompt_ids):
            raise RuntimeError(
                f"vLLM returned {len(completions)} completions for {len(prompt_ids)} prompts × "
                f"n = {n}"
            )
        return to_generations(completions, n, self.pad_id, self.tokenizer)


def sampling_request(n: int, sampling: Sampling, end_ids: list[int]) -> dict[str, Any]:
    """vLLM's SamplingParams fields for `sampling` (the same names in the HTTP API)."""
    return dict(
        n=n,
        temperature=sampling.temperature,
        top_p=sampling.top_p,
        top_k=sampling.top_k if sampling.top_k > 0 else -1,  # -1: off in every vLLM
        max_tokens=sampling.max_new_tokens,
        stop=list(sampling.stop_strings),
        include_stop_str_in_output=True,  # the stop string stays in the response, as HFEngine
        stop_token_ids=list(end_ids),
        logprobs=0,  # the sampled token's log-prob only
    )


def to_generations(completions: list[Completion], n: int, pad_id: int, tokenizer) -> Generations:
    """Prompt-major completions → Generations: response_ids [B, T] right-padded with
    `pad_id`, logprobs [B, T] (0 on padding), mask [B, T] (the end token included),
    finish "stop" / "length", decoded texts, prompt index [B]."""
    width = max(1, max(len(c.token_ids) for c in completions))
    rows = len(completions)
    ids = torch.full((rows, width), pad_id, dtype=torch.long)
    logprobs = torch.zeros((rows, width), dtype=torch.float32)
    mask = torch.zeros((rows, width), dtype=torch.float32)
    finish = []
    for r, c in enumerate(completions):
        if len(c.logprobs) != len(c.token_ids):
            raise RuntimeError(
                f"vLLM returned {len(c.logprobs)} log-probs for {len(c.token_ids)} tokens; "
                "ask it for the sampled token's log-prob (logprobs=0)"
            )
        if c.finish_reason not in FINISH:
            raise RuntimeError(
                f"vLLM finished a response with {c.finish_reason!r}; expected stop or length"
            )
        k = len(c.token_ids)
        ids[r, :k] = torch.tensor(c.token_ids, dtype=torch.long)
        logprobs[r, :k] = torch.tensor(c.logprobs, dtype=torch.float32)
        mask[r, :k] = 1.0
        finish.append(FINISH[c.finish_reason])
    texts = tokenizer.batch_decode(ids, skip_special_tokens=True)
    index = torch.arange(rows // n).repeat_interleave(n)
    return Generations(ids, logprobs, mask, finish, texts, index)


class _Colocated:
    """A `vllm.LLM` in this process."""

    def __init__(self, llm, vllm) -> None:
        self.llm, self.vllm = llm, vllm

    def generate(self, prompt_ids, request: dict, seeds: list[int | None]) -> list[Completion]:
        params = [self.vllm.SamplingParams(**request, seed=seed) for seed in seeds]
        prompts = [{"prompt_token_ids": list(p)} for p in prompt_ids]  # vLLM's TokensPrompt
        outputs = self.llm.generate(prompts, params, use_tqdm=False)
        return [
            Completion(
                list(o.token_ids),
                [step[token].logprob for token, step in zip(o.token_ids, o.logprobs, strict=True)],
                o.finish_reason,
            )
            for out in outputs
            for o in out.outputs
        ]

    def load_weights(self, state_dict: dict[str, torch.Tensor]) -> None:
        weights = list(state_dict.items())
        model = _inner_model(self.llm)
        if model is not None:
            model.load_weights(weights)
        else:  # a vLLM whose workers are elsewhere: run the same call on each of them
            self.llm.collective_rpc(_load_on_worker, args=(weights,))
        self.llm.reset_prefix_cache()  # its KV entries were computed with the old weights


def _inner_model(llm):
    """The torch model inside a `vllm.LLM` whose engine runs in this process (TRL's path;
    V1's driver worker wraps the worker), or None."""
    driver = getattr(getattr(llm.llm_engine, "model_executor", None), "driver_worker", None)
    for holder in (driver, getattr(driver, "worker", None)):
        runner = getattr(holder, "model_runner", None)
        if runner is not None and hasattr(runner, "model"):
            return runner.model
    return None


def _load_on_worker(worker, weights):
    worker.model_runner.model.load_weights(weights)


class VLLMServerError(RuntimeError):
    """The vLLM server is unreachable, too slow, or answered an error."""


class _Server:
    """A client of `vllm serve` at `url`; every request times out after `timeout_s`."""

    def __init__(self, url: str, timeout_s: float, sender) -> None:
        self.url, self.timeout_s, self.sender = url.rstrip("/"), timeout_s, sender
        self.model = self._call("GET", "/v1/models")["data"][0]["id"]
        self._group_open = False

    def generate(self, prompt_ids, request: dict, seeds: list[int | None]) -> list[Completion]:
        def one(i: int) -> list[Completion]:
            body = {
                "model": self.model,
                "prompt": [list(prompt_ids[i])],
                **request,
                "return_token_ids": True,
                "return_tokens_as_token_ids": True,
            }
            if seeds[i] is not None:
                body["seed"] = seeds[i]
            choices = sorted(self._call("POST", "/v1/completions", body)["choices"], key=_index)
            return [_completion(c) for c in choices]

        # one request per prompt (each its own seed), sent concurrently
        with ThreadPoolExecutor(max_workers=min(32, len(prompt_ids))) as pool:
            return [c for part in pool.map(one, range(len(prompt_ids))) for c in part]

    def load_weights(self, state_dict: dict[str, torch.Tensor]) -> None:
        if not self._group_open:
            size = self._call("GET", "/get_world_size")["world_size"] + 1  # + the trainer
            info = {**self.sender.address(), "rank_offset": 1, "world_size": size}
            # the server waits in the rendezvous while answering, so join it meanwhile
            self._alongside(
                ("/init_weight_transfer_engine", {"init_info": info}), self.sender.open, info
            )
            self._group_open = True
        names = list(state_dict)
        info = {
            "names": names,
            "dtype_names": [str(t.dtype).removeprefix("torch.") for t in state_dict.values()],
            "shapes": [list(t.shape) for t in state_dict.values()],
            "packed": True,
        }
        self._call("POST", "/start_weight_update", {}, missing_ok=True)  # vLLM >= 0.21
        self._alongside(
            ("/update_weights", {"update_info": info}), self.sender.send, state_dict.items()
        )
        self._call("POST", "/finish_weight_update", {}, missing_ok=True)
        self._call("POST", "/reset_prefix_cache", {})

    def _alongside(self, post: tuple[str, dict], work, argument) -> None:
        with ThreadPoolExecutor(max_workers=1) as pool:
            answer = pool.submit(self._call, "POST", *post)
            work(argument)
            answer.result()

    def _call(self, method: str, path: str, body=None, *, missing_ok: bool = False) -> dict:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.url + path, data=data, method=method, headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                return json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as err:
            if missing_ok and err.code == 404:
                return {}
            detail = err.read()[:300].decode(errors="replace")
            raise VLLMServerError(
                f"the vLLM server at {self.url} answered {method} {path} with HTTP {err.code}: "
                f"{detail}"
            ) from None
        except TimeoutError:
            raise self._timed_out(method, path) from None
        except urllib.error.URLError as err:
            if isinstance(err.reason, TimeoutError):
                raise self._timed_out(method, path) from None
            raise VLLMServerError(
                f"cannot reach the vLLM server at {self.url} ({err.reason}): start it with "
                "`vllm serve MODEL` (docs/scale.md) or set vllm.server_url"
            ) from None

    def _timed_out(self, method: str, path: str) -> VLLMServerError:
        return VLLMServerError(
            f"the vLLM server at {self.url} did not answer {method} {path} within "
            f"vllm.timeout_s = {self.timeout_s} s"
        )


def _index(choice: dict) -> int:
    return int(choice.get("index", 0))


def _completion(choice: dict) -> Completion:
    """One choice of /v1/completions: token ids (`return_token_ids`, or the "token_id:N"
    tokens of its log-probs) and the sampled tokens' log-probs."""
    lp = choice.get("logprobs") or {}
    ids = choice.get("token_ids")
    if ids is None:
        ids = [int(str(t).removeprefix("token_id:")) for t in lp.get("tokens", [])]
    return Completion(list(ids), list(lp.get("token_logprobs", [])), choice.get("finish_reason"))


class NcclSender:
    """The trainer's side of vLLM's NCCL weight-transfer engine (a server started with
    `--weight-transfer-config '{"backend": "nccl"}'` and VLLM_SERVER_DEV_MODE=1): joins the
    group as rank 0 and broadcasts each update's tensors (needs vllm and CUDA here)."""

    def __init__(self, port: int) -> None:
        self.port, self.group = port, None

    def address(self) -> dict[str, Any]:
        from vllm.utils.network_utils import get_ip

        return {"master_address": get_ip(), "master_port": self.port}

    def open(self, info: dict[str, Any]) -> None:
        from vllm.distributed.weight_transfer.nccl_engine import NCCLWeightTransferEngine

        self.group = NCCLWeightTransferEngine.trainer_init(info)

    def send(self, named: Iterable[tuple[str, torch.Tensor]]) -> None:
        from vllm.distributed.weight_transfer.nccl_engine import (
            NCCLTrainerSendWeightsArgs,
            NCCLWeightTransferEngine,
        )

        NCCLWeightTransferEngine.trainer_send_weights(
            iterator=iter(named),
            trainer_args=NCCLTrainerSendWeightsArgs(group=self.group, packed=True),
        )
