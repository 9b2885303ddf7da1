"""The tiny shipped model: tokenizer round trip, loading like any hub model, checksums,
and the command that rebuilds it."""

import json

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from policylab import tasks
from policylab.models import TINY, build_tokenizer, load_model
from policylab.trainers.sft import SFTConfig, checksums, sft


def test_tokenizer_round_trips_every_task_prompt_and_demonstration():
    tokenizer = build_tokenizer()
    for name in tasks.names():
        for ex in tasks.get(name).examples("train", 50, seed=1):
            text = ex["prompt"] + ex["completion"]
            ids = tokenizer(text, add_special_tokens=False)["input_ids"]
            assert tokenizer.unk_token_id not in ids, text
            assert tokenizer.decode(ids) == text
            # one token per character, the tags one token each
            tags = text.count("<answer>") + text.count("</answer>")
            assert len(ids) == len(text) - tags * (len("<answer>") - 1) - text.count("</answer>")


def test_special_tokens():
    tokenizer = build_tokenizer()
    assert (tokenizer.pad_token, tokenizer.eos_token) == ("<pad>", "<eos>")
    ids = tokenizer("<answer>7</answer>", add_special_tokens=False)["input_ids"]
    assert len(ids) == 3
    assert tokenizer.decode(ids + [tokenizer.eos_token_id], skip_special_tokens=True) == (
        "<answer>7</answer>"  # the tags survive decoding; the end token does not
    )


def test_the_shipped_files_match_their_checksums():
    recorded = (TINY / "SHA256SUMS").read_text()
    assert checksums(TINY) == recorded


def test_the_shipped_model_loads_like_a_hub_model_and_generates():
    model = AutoModelForCausalLM.from_pretrained(TINY)
    tokenizer = AutoTokenizer.from_pretrained(TINY)
    assert sum(p.numel() for p in model.parameters()) < 5_000_000
    prompt = tokenizer("12+34=", return_tensors="pt")
    out = model.generate(
        **prompt, max_new_tokens=8, do_sample=False, pad_token_id=tokenizer.pad_token_id
    )
    text = tokenizer.decode(out[0, prompt["input_ids"].shape[1] :], skip_special_tokens=True)
    assert text.startswith("<answer>")


def test_load_model_accepts_tiny_and_a_folder():
    model, tokenizer = load_model("tiny")
    assert tokenizer.padding_side == "left"
    again, _ = load_model(str(TINY))
    for a, b in zip(model.parameters(), again.parameters(), strict=True):
        assert torch.equal(a, b)


def test_a_missing_model_folder_is_a_clear_error(tmp_path):
    with pytest.raises(OSError):
        load_model(str(tmp_path / "nothing-here"))


def test_a_short_sft_run_saves_a_loadable_model(tmp_path):
    out = tmp_path / "model"
    cfg = SFTConfig(
        out=str(out),
        steps=3,
        pool_size=20,
        eval_n=4,
        hidden_size=32,
        num_hidden_layers=1,
        tasks={"arithmetic": {}, "countdown": {}},
    )
    meta = sft(cfg, progress=False)
    assert set(meta["heldout"]) == {"arithmetic", "countdown"}
    saved = json.loads((out / "policylab.json").read_text())
    assert saved["config"]["steps"] == 3
    assert (out / "SHA256SUMS").read_text() == checksums(out)
    model, tokenizer = load_model(str(out))
    assert model.config.hidden_size == 32


def test_eval_of_the_shipped_model_reproduces_its_recorded_scores():
    from policylab.evaluate import evaluate

    recorded = json.loads((TINY / "policylab.json").read_text())["heldout"]
    model, tokenizer = load_model("tiny")
    for name, scores in recorded.items():
        got = evaluate(model, tokenizer, tasks.get(name), n=200, seed=0).as_dict()
        assert got["eval/greedy_accuracy"] == pytest.approx(scores["eval/greedy_accuracy"])
        # the deliberately unfinished model leaves room for RL on every task
        assert 0.2 <= scores["eval/greedy_accuracy"] <= 0.7


def test_the_sft_command_builds_a_model_the_eval_command_reads(tmp_path, capsys):
    from policylab.cli import main

    out = tmp_path / "cli-model"
    assert (
        main(
            [
                "sft",
                f"out={out}",
                "steps=2",
                "pool_size=10",
                "eval_n=2",
                "hidden_size=16",
                "num_hidden_layers=1",
                "tasks={arithmetic: {}}",
            ]
        )
        == 0
    )
    assert (out / "SHA256SUMS").read_text() == checksums(out)
    assert main(["eval", "--model", str(out), "--task", "arithmetic", "--n", "3"]) == 0
    assert "arithmetic" in capsys.readouterr().out
    assert main(["sft", "stepz=2"]) == 2  # a bad field is an error, not a traceback
