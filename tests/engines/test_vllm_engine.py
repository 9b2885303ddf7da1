"""The vLLM engine on the CPU: a fake `vllm` module with vLLM's API shape, backed by the
tiny model (fake_vllm.py), and a local HTTP server speaking `vllm serve`'s protocol."""

import json
import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import fake_vllm
import pytest
import torch

from policylab.config import TrainConfig
from policylab.engines import HFEngine, Sampling, make_engine
from policylab.engines.hf import end_token_ids
from policylab.engines.vllm import VLLMEngine, VLLMServerError, options
from policylab.models import TINY, load_model
from policylab.trainers.run import read_metrics
from run_testing import FAST_LLM


@pytest.fixture
def vllm(monkeypatch):
    fake = fake_vllm.module()
    monkeypatch.setitem(sys.modules, "vllm", fake)
    return fake


@pytest.fixture(scope="module")
def tiny():
    model, tokenizer = load_model("tiny")
    return model.eval(), tokenizer


def ids(tokenizer, *texts):
    return [tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]


def colocated(vllm, tiny) -> VLLMEngine:
    model, tokenizer = tiny
    return make_engine("vllm", {}, model, tokenizer, model_path=str(TINY), seed=0)


# ---- colocate ------------------------------------------------------------------------


def test_greedy_generations_equal_the_hf_engines(vllm, tiny):
    model, tokenizer = tiny
    prompts = ids(tokenizer, "17+25=", "3 5 7 -> 22:")  # different lengths
    greedy = Sampling(temperature=0, max_new_tokens=6)
    ours = colocated(vllm, tiny).generate(prompts, 2, greedy, torch.Generator().manual_seed(0))
    hf = HFEngine(model, tokenizer).generate(prompts, 2, greedy)
    # HF pads every row to the batch's longest step; vLLM's rows end where they end
    width = ours.response_ids.shape[1]
    assert width == int(ours.response_mask.sum(-1).max())
    assert torch.equal(ours.response_ids, hf.response_ids[:, :width])
    assert torch.equal(ours.response_mask, hf.response_mask[:, :width])
    torch.testing.assert_close(ours.logprobs, hf.logprobs[:, :width])
    assert ours.finish_reason == hf.finish_reason
    assert ours.texts == hf.texts
    assert ours.prompt_index.tolist() == [0, 0, 1, 1]
    assert ours.entropy is None  # vLLM reports none


def test_sampled_logprobs_are_the_learners_and_padding_is_zero(vllm, tiny):
    model, tokenizer = tiny
    prompts = ids(tokenizer, "12+3=", "a longer prompt")
    out = colocated(vllm, tiny).generate(
        prompts, 3, Sampling(max_new_tokens=8), torch.Generator().manual_seed(1)
    )
    assert out.response_ids.shape == out.logprobs.shape == out.response_mask.shape
    for row in range(6):
        keep = out.response_mask[row].bool()
        k = int(keep.sum())
        assert keep[:k].all() and not keep[k:].any()  # right-padded
        assert (out.response_ids[row][~keep] == tokenizer.pad_token_id).all()
        assert (out.logprobs[row][~keep] == 0).all()
        prompt = prompts[row // 3]
        sequence = torch.tensor(prompt + out.response_ids[row][keep].tolist())
        with torch.no_grad():
            logp = torch.log_softmax(model(sequence[None]).logits[0], dim=-1)
        expected = logp[len(prompt) - 1 : -1].gather(-1, sequence[len(prompt) :, None])
        torch.testing.assert_close(out.logprobs[row][keep], expected.squeeze(-1))
        ended = int(out.response_ids[row][k - 1]) in end_token_ids(model, tokenizer)
        assert out.finish_reason[row] == ("stop" if ended else "length")


def test_sampling_params_carry_the_sampling_and_one_seed_per_prompt(vllm, tiny):
    model, tokenizer = tiny
    engine = colocated(vllm, tiny)
    sampling = Sampling(temperature=0.7, top_p=0.9, top_k=5, max_new_tokens=4, stop_strings=("=",))
    engine.generate(ids(tokenizer, "1+1=", "2+2="), 3, sampling, torch.Generator().manual_seed(0))
    llm = vllm.LLM.instances[-1]
    (_, first), (_, second) = llm.requests
    assert (first.n, first.temperature, first.top_p, first.top_k) == (3, 0.7, 0.9, 5)
    assert (first.max_tokens, first.stop, first.logprobs) == (4, ["="], 0)
    assert first.stop_token_ids == end_token_ids(model, tokenizer)
    assert first.seed != second.seed  # a shared seed would give both prompts the same noise
    again = colocated(vllm, tiny)
    again.generate(ids(tokenizer, "1+1=", "2+2="), 3, sampling, torch.Generator().manual_seed(0))
    assert [p.seed for _, p in vllm.LLM.instances[-1].requests] == [first.seed, second.seed]
    assert llm.kwargs["logprobs_mode"] == "processed_logprobs"
    assert llm.kwargs["gpu_memory_utilization"] == 0.3


def test_load_weights_reaches_the_vllm_model_and_resets_the_prefix_cache(vllm, tiny):
    model, tokenizer = tiny
    engine = colocated(vllm, tiny)
    llm = vllm.LLM.instances[-1]
    assert len(llm.runner_model.loads) == 1  # the learner's weights at construction
    changed = {k: v + 0.5 for k, v in model.state_dict().items()}
    engine.load_weights(changed)
    assert llm.runner_model.loads[-1] == sorted(changed)
    assert llm.prefix_resets == 2
    for name, value in llm.runner_model.hf_model.state_dict().items():
        assert torch.equal(value, changed[name]), name


# ---- the trainer ---------------------------------------------------------------------


def test_two_steps_sync_the_weights_after_each_update(vllm, tmp_path):
    torch.set_num_threads(1)
    from policylab.trainers.llm import train

    cfg = TrainConfig(**FAST_LLM, steps=2, engine="vllm", run_dir=str(tmp_path))
    result = train(cfg)
    llm = vllm.LLM.instances[-1]
    assert llm.kwargs["seed"] == cfg.seed
    assert len(llm.runner_model.loads) == 1 + 2  # at the start, then after each update
    final, _ = load_model(f"{result.run_dir}/model")
    for name, value in final.state_dict().items():  # vLLM holds the trained weights
        torch.testing.assert_close(llm.runner_model.hf_model.state_dict()[name], value)
    rows = [r for r in read_metrics(result.run_dir) if r.get("kind") != "eval"]
    for row in rows:  # a synced engine samples from the learner's weights
        assert row["engine/logprob_gap_mean"] < 1e-5
        assert row["engine/logprob_gap_max"] < 1e-4


def test_tis_with_the_hf_engine_changes_nothing_when_engines_agree(tmp_path):
    # sampler = learner (HF, float32): every TIS weight is ~1, so the run's losses match
    torch.set_num_threads(1)
    from policylab.trainers.llm import train

    plain = train(TrainConfig(**FAST_LLM, steps=2, run_dir=str(tmp_path / "plain")))
    tis = train(TrainConfig(**FAST_LLM, steps=2, tis_cap=2.0, run_dir=str(tmp_path / "tis")))
    a = [r for r in read_metrics(plain.run_dir) if r.get("kind") != "eval"]
    b = [r for r in read_metrics(tis.run_dir) if r.get("kind") != "eval"]
    for ra, rb in zip(a, b, strict=True):
        assert rb["loss"] == pytest.approx(ra["loss"], abs=1e-5)
        assert rb["grad_norm"] == pytest.approx(ra["grad_norm"], rel=1e-3)
        assert ra["engine/logprob_gap_mean"] < 1e-5 and rb["engine/logprob_gap_mean"] < 1e-5


def test_engine_vllm_without_vllm_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)  # import vllm raises ImportError
    with pytest.raises(ValueError, match=r'pip install "policylab\[vllm\]"'):
        TrainConfig(engine="vllm")


def test_vllm_options_are_checked(vllm):
    with pytest.raises(ValueError, match="engine = 'hf' does not use"):
        TrainConfig(vllm={"mode": "server"})
    with pytest.raises(ValueError, match="unknown option.*gpu_mem"):
        TrainConfig(engine="vllm", vllm={"gpu_mem": 0.5})
    with pytest.raises(ValueError, match="vllm.mode"):
        TrainConfig(engine="vllm", vllm={"mode": "remote"})
    with pytest.raises(ValueError, match="server_url"):
        TrainConfig(engine="vllm", vllm={"mode": "server", "server_url": "localhost:8000"})
    cfg = TrainConfig(engine="vllm", vllm={"mode": "server"})
    assert cfg.vllm["timeout_s"] == 300.0  # written out in full
    assert TrainConfig().vllm == {}


def test_per_role_policies_and_lora_are_refused_with_vllm(vllm):
    from policylab.config import ConfigError
    from policylab.trainers.llm import compose

    cfg = TrainConfig(
        algo="at_grpo", task="plan_path_moves", engine="vllm", agent={"regime": "per_role"}
    )
    with pytest.raises(ConfigError, match="regime"):
        compose(cfg)
    with pytest.raises(ConfigError, match="LoRA"):
        compose(TrainConfig(engine="vllm", lora=True))


# ---- server --------------------------------------------------------------------------


class _Server:
    """`vllm serve`'s endpoints over a fake LLM; records each request."""

    def __init__(self, llm, hold: threading.Event | None = None) -> None:
        self.llm, self.hold, self.calls = llm, hold, []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                self._answer(None)

            def do_POST(self):
                size = int(self.headers.get("Content-Length", 0))
                self._answer(json.loads(self.rfile.read(size) or b"{}"))

            def _answer(self, body):
                server.calls.append((self.path, body))
                if server.hold is not None:
                    server.hold.wait(10)  # a server that does not answer in time
                reply = server.reply(self.path, body)
                data = json.dumps(reply).encode()
                self.send_response(200 if reply is not None else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}"
        threading.Thread(target=self.http.serve_forever, daemon=True).start()

    def reply(self, path, body):
        if path == "/v1/models":
            return {"data": [{"id": "tiny"}]}
        if path == "/get_world_size":
            return {"world_size": 1}
        if path == "/v1/completions":
            return {"choices": self.completions(body)}
        if path in (
            "/init_weight_transfer_engine",
            "/start_weight_update",
            "/update_weights",
            "/finish_weight_update",
            "/reset_prefix_cache",
        ):
            return {}
        return None

    def completions(self, body):
        fields = {k: body[k] for k in vars(fake_vllm.SamplingParams()) if k in body}
        params = fake_vllm.SamplingParams(**fields)
        choices = []
        for prompt in body["prompt"]:
            out = self.llm.generate([{"prompt_token_ids": prompt}], params)[0]
            for o in reversed(out.outputs):  # any order: the client sorts by index
                sampled = [lp[t].logprob for t, lp in zip(o.token_ids, o.logprobs, strict=True)]
                choices.append(
                    {
                        "index": o.index,
                        "text": o.text,
                        "token_ids": o.token_ids,
                        "finish_reason": o.finish_reason,
                        "logprobs": {
                            "tokens": [f"token_id:{t}" for t in o.token_ids],
                            "token_logprobs": sampled,
                        },
                    }
                )
        return choices

    def close(self):
        if self.hold is not None:
            self.hold.set()
        self.http.shutdown()
        self.http.server_close()


class _Sender:
    """Stands in for the NCCL weight transfer: records what it would broadcast."""

    def __init__(self):
        self.opened, self.sent = [], []

    def address(self):
        return {"master_address": "127.0.0.1", "master_port": 51216}

    def open(self, info):
        self.opened.append(info)

    def send(self, named):
        self.sent.append({k: v.clone() for k, v in named})


@pytest.fixture
def server(vllm):
    running = _Server(vllm.LLM(str(TINY)))
    yield running
    running.close()


def server_engine(tiny, url, sender=None, **opts) -> VLLMEngine:
    model, tokenizer = tiny
    chosen = options({"mode": "server", "server_url": url, **opts})
    return VLLMEngine.server(tokenizer, end_token_ids(model, tokenizer), chosen, sender)


def test_server_generations_equal_the_colocated_ones(vllm, tiny, server):
    _, tokenizer = tiny
    prompts = ids(tokenizer, "17+25=", "3 5 7 -> 22:")
    sampling = Sampling(max_new_tokens=6)
    remote = server_engine(tiny, server.url, _Sender()).generate(
        prompts, 3, sampling, torch.Generator().manual_seed(4)
    )
    local = colocated(vllm, tiny).generate(prompts, 3, sampling, torch.Generator().manual_seed(4))
    for name in ("response_ids", "logprobs", "response_mask", "prompt_index"):
        torch.testing.assert_close(getattr(remote, name), getattr(local, name))
    assert remote.finish_reason == local.finish_reason and remote.texts == local.texts
    bodies = [b for path, b in server.calls if path == "/v1/completions"]
    # one request per prompt, each with its own seed (sent concurrently: any order)
    assert sorted(b["prompt"] for b in bodies) == sorted([p] for p in prompts)
    assert all(b["logprobs"] == 0 and b["return_token_ids"] and b["n"] == 3 for b in bodies)
    assert bodies[0]["model"] == "tiny" and bodies[0]["seed"] != bodies[1]["seed"]


def test_server_weight_update_announces_then_sends_every_tensor(tiny, server):
    model, _ = tiny
    sender = _Sender()
    engine = server_engine(tiny, server.url, sender)
    state = model.state_dict()
    engine.load_weights(state)
    engine.load_weights(state)
    paths = [p for p, _ in server.calls if p != "/v1/models"]
    update = ["/start_weight_update", "/update_weights", "/finish_weight_update"]
    group = ["/get_world_size", "/init_weight_transfer_engine"]  # once
    assert paths == [*group, *update, "/reset_prefix_cache", *update, "/reset_prefix_cache"]
    assert sender.opened == [
        {"master_address": "127.0.0.1", "master_port": 51216, "rank_offset": 1, "world_size": 2}
    ]
    info = next(b for p, b in server.calls if p == "/update_weights")["update_info"]
    assert info["names"] == list(state) and info["shapes"][0] == list(state[info["names"][0]].shape)
    assert info["dtype_names"][0] == "float32"
    assert len(sender.sent) == 2
    for name, value in state.items():
        assert torch.equal(sender.sent[0][name], value)


def test_a_slow_server_times_out_with_its_url(vllm, tiny):
    hold = threading.Event()
    slow = _Server(vllm.LLM(str(TINY)), hold)
    try:
        with pytest.raises(VLLMServerError, match=rf"{slow.url}.*timeout_s = 0.2"):
            server_engine(tiny, slow.url, _Sender(), timeout_s=0.2)
    finally:
        slow.close()


def test_an_unreachable_server_is_named(tiny):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    with pytest.raises(VLLMServerError, match=rf"cannot reach the vLLM server at {url}"):
        server_engine(tiny, url, _Sender(), timeout_s=2)
