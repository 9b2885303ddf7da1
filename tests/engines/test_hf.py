"""The Hugging Face engine: log-probs, seeds, shared prefill, stopping, padding."""

import pytest
import torch

from policylab.engines import HFEngine, Sampling
from policylab.models import build_model, build_tokenizer


@pytest.fixture(scope="module")
def engine():
    tokenizer = build_tokenizer()
    return HFEngine(build_model(tokenizer, seed=1), tokenizer)


def ids(engine, *texts):
    return [engine.tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]


def test_logprobs_equal_a_full_forward_pass(engine):
    prompts = ids(engine, "17+25=", "3 5 7 -> 22:")  # different lengths: left padding
    out = engine.generate(prompts, 3, Sampling(max_new_tokens=8), torch.Generator().manual_seed(0))
    for row in range(6):
        prompt = prompts[row // 3]
        keep = out.response_mask[row].bool()
        sequence = torch.tensor(prompt + out.response_ids[row][keep].tolist())
        with torch.no_grad():
            logp = torch.log_softmax(engine.model(sequence[None]).logits[0], dim=-1)
        expected = logp[len(prompt) - 1 : -1].gather(-1, sequence[len(prompt) :, None]).squeeze(-1)
        torch.testing.assert_close(out.logprobs[row][keep], expected, atol=1e-5, rtol=1e-5)
        assert (out.logprobs[row][~keep] == 0).all()


def test_samples_are_reproducible_from_the_generator(engine):
    prompts = ids(engine, "12+3=")

    def run(seed):
        return engine.generate(prompts, 4, Sampling(), torch.Generator().manual_seed(seed))

    assert torch.equal(run(0).response_ids, run(0).response_ids)
    assert not torch.equal(run(0).response_ids, run(1).response_ids)


def test_n_samples_per_prompt_are_prompt_major(engine):
    out = engine.generate(
        ids(engine, "a", "bb"), 3, Sampling(max_new_tokens=4), torch.Generator().manual_seed(0)
    )
    assert out.response_ids.shape[0] == 6
    assert out.prompt_index.tolist() == [0, 0, 0, 1, 1, 1]


def test_greedy_ignores_padding_and_equals_top_k_1(engine):
    alone = engine.generate(ids(engine, "9*9="), 1, Sampling(temperature=0, max_new_tokens=6))
    batched = engine.generate(
        ids(engine, "9*9=", "a much longer prompt"), 1, Sampling(temperature=0, max_new_tokens=6)
    )
    assert alone.texts[0] == batched.texts[0]
    top1 = engine.generate(
        ids(engine, "9*9="),
        2,
        Sampling(top_k=1, max_new_tokens=6),
        torch.Generator().manual_seed(0),
    )
    assert top1.texts == [alone.texts[0]] * 2


def test_length_limit_and_stop_strings(engine):
    out = engine.generate(
        ids(engine, "x"), 2, Sampling(max_new_tokens=3), torch.Generator().manual_seed(0)
    )
    assert out.response_ids.shape[1] <= 3
    assert all(r in ("stop", "length") for r in out.finish_reason)
    # every sampled character stops the row: a stop string of every printable character
    stop = tuple(chr(c) for c in range(32, 127)) + ("\n", "<answer>", "</answer>")
    out = engine.generate(
        ids(engine, "x"),
        4,
        Sampling(max_new_tokens=5, stop_strings=stop),
        torch.Generator().manual_seed(0),
    )
    assert out.response_mask.sum(dim=1).tolist() == [1.0] * 4
    assert out.finish_reason == ["stop"] * 4


class EndAfter(torch.nn.Module):
    """Wraps a model so that the end token wins from the `after`-th generated token on."""

    def __init__(self, model, end_id: int, after: int) -> None:
        super().__init__()
        self.inner, self.end_id, self.after, self.calls = model, end_id, after, 0

    def forward(self, **kwargs):
        out = self.inner(**kwargs)
        if self.calls >= self.after:
            out.logits[..., self.end_id] += 1e4
        self.calls += 1
        return out


@pytest.mark.filterwarnings("ignore::FutureWarning")
def test_the_end_token_stops_a_row_and_is_kept_in_its_mask():
    tokenizer = build_tokenizer()
    engine = HFEngine(EndAfter(build_model(tokenizer), tokenizer.eos_token_id, after=2), tokenizer)
    out = engine.generate(
        ids(engine, "x"), 2, Sampling(max_new_tokens=8), torch.Generator().manual_seed(0)
    )
    # calls: prefill (token 1), step (token 2), step (token 3 = end)
    assert out.finish_reason == ["stop", "stop"]
    assert out.response_mask.sum(dim=1).tolist() == [3.0, 3.0]
    assert (out.response_ids[:, 2] == tokenizer.eos_token_id).all()
    assert out.response_ids.shape[1] == 3  # the loop ended once every row had stopped


def test_bad_sampling_values_are_rejected():
    with pytest.raises(ValueError, match="top_p"):
        Sampling(top_p=0.0)
    with pytest.raises(ValueError, match="temperature"):
        Sampling(temperature=-1)
