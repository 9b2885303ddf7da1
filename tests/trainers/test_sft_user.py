"""SFT of a user's model on a user's data (`policylab sft --model ... --task ...`): the
loss falls on the data, only demonstration tokens carry it (text rows and chat
conversations), the result trains with `policylab.train`, and bad input fails early."""

import json
import math
import random

import pytest
import torch

import policylab
from policylab.cli import main
from policylab.models import load_model
from policylab.trainers import sft as sft_module
from policylab.trainers.sft import SFTConfig, sft
from policylab.trainers.sft_data import (
    IGNORE,
    collate,
    completion_loss,
    encode,
    encode_chat,
    encode_rows,
    loss_tokens,
    token_loss,
)
from run_testing import FAST_LLM
from tiny_models import CHATML, bpe_tokenizer


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def copy_rows(n=60, seed=0):
    """Prompt "copy xyz:" → completion "xyz": a task the shipped model has not seen."""
    rng = random.Random(seed)
    words = ["".join(rng.choice("abcdefgh") for _ in range(4)) for _ in range(n)]
    return [{"prompt": f"copy {w}:", "completion": w} for w in dict.fromkeys(words)]


def config(tmp_path, data, **fields):
    base = dict(
        out=str(tmp_path / "out"),
        init="tiny",
        tasks={str(data): {}},
        steps=2,
        batch_size=8,
        warmup_steps=0,
        eval_n=4,
        device="cpu",
    )
    return SFTConfig(**{**base, **fields})


@pytest.fixture(scope="module")
def chatml_dir(tmp_path_factory):
    """A random 2-layer Qwen2 with a byte-level BPE tokenizer and the ChatML template."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    tokenizer = bpe_tokenizer(
        ["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        corpus=["system user assistant hello there how are you"] * 20,
        vocab_size=300,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
    )
    tokenizer.chat_template = CHATML
    folder = tmp_path_factory.mktemp("chatml-qwen2")
    arch = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=256,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(0)
    Qwen2ForCausalLM(arch).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


def test_sft_from_tiny_lowers_the_completion_loss_on_a_jsonl_file(tmp_path):
    data = write_jsonl(tmp_path / "copy.jsonl", copy_rows())
    cfg = config(tmp_path, data, steps=20, lr=3e-3)
    model, tokenizer = load_model("tiny")
    rows = encode_rows(
        tokenizer, sft_module.demonstrations(policylab.tasks.get(str(data)), cfg), 128, "copy"
    )
    before = completion_loss(model, rows, tokenizer.pad_token_id)

    meta = sft(cfg, progress=False)

    trained, _ = load_model(cfg.out)
    after = completion_loss(trained, rows, tokenizer.pad_token_id)
    assert after < 0.7 * before, (before, after)
    held = meta["heldout"][str(data)]  # no answer column: a loss, no accuracy
    assert set(held) == {"eval/completion_loss"} and math.isfinite(held["eval/completion_loss"])


def test_only_the_completion_and_the_end_token_carry_the_loss():
    _, tokenizer = load_model("tiny")
    ids, labels = encode(tokenizer, {"prompt": "1+2=", "completion": "3"})
    # the character tokenizer: one token per character, then <eos>
    one, plus, two, equals, three = tokenizer.convert_tokens_to_ids(list("1+2=3"))
    eos = tokenizer.eos_token_id
    assert ids == [one, plus, two, equals, three, eos]
    assert labels == [IGNORE, IGNORE, IGNORE, IGNORE, three, eos]
    # a multi-turn segment (end: False) gets no end token
    assert encode(tokenizer, {"prompt": "ab", "completion": "c", "end": False})[1][-1] != eos

    # the loss is the mean over the two labelled positions, padding and prompt aside
    model, _ = load_model("tiny")
    short = encode(tokenizer, {"prompt": "7=", "completion": "7"})
    batch = [(ids, labels), short]
    input_ids, padded, attention = collate(batch, tokenizer.pad_token_id)
    assert padded[1].tolist() == [IGNORE, IGNORE, short[1][2], eos, IGNORE, IGNORE]
    assert attention[1].tolist() == [1, 1, 1, 1, 0, 0]
    assert loss_tokens(batch) == 4  # "3", eos; "7", eos
    with torch.no_grad():
        logp = model(input_ids=input_ids, attention_mask=attention).logits.log_softmax(-1)
        expected = (
            -(logp[0, 3, three] + logp[0, 4, eos] + logp[1, 1, short[0][2]] + logp[1, 2, eos]) / 4
        )
        assert token_loss(model, batch, tokenizer.pad_token_id).item() == pytest.approx(
            expected.item(), rel=1e-6
        )


def test_a_completion_column_beats_the_answer_demonstration(tmp_path):
    rows = [{"prompt": f"q{i}", "answer": str(i), "completion": f"because {i}"} for i in range(20)]
    task = policylab.tasks.get(str(write_jsonl(tmp_path / "qa.jsonl", rows)))
    for ex in task.examples("train", 3):
        assert ex["completion"] == f"because {ex['answer']}"


def test_messages_rows_train_on_the_assistant_turns_only(chatml_dir):
    _, tokenizer = load_model(chatml_dir)
    messages = [
        {"role": "system", "content": "be kind"},
        {"role": "user", "content": "hello"},
        {"role": "assistant", "content": "hello there"},
        {"role": "user", "content": "how are you"},
        {"role": "assistant", "content": "you"},
    ]
    ids, labels = encode(tokenizer, {"prompt": messages})
    assert tokenizer.decode(ids) == (
        "<|im_start|>system\nbe kind<|im_end|>\n<|im_start|>user\nhello<|im_end|>\n"
        "<|im_start|>assistant\nhello there<|im_end|>\n<|im_start|>user\nhow are you<|im_end|>\n"
        "<|im_start|>assistant\nyou<|im_end|>\n"
    )
    trained = [i for i, t in enumerate(labels) if t != IGNORE]
    spans = tokenizer.decode([ids[i] for i in trained])
    assert spans == "hello there<|im_end|>\nyou<|im_end|>\n"
    assert all(labels[i] == ids[i] for i in trained)
    # everything up to and including the generation prompt is masked
    first = trained[0]
    assert tokenizer.decode(ids[:first]).endswith("<|im_start|>assistant\n")

    # a conversational prompt with a completion: only the completion's turn is trained
    ids, labels = encode(tokenizer, {"prompt": messages[:4], "completion": "you"})
    assert tokenizer.decode([t for t in labels if t != IGNORE]) == "you<|im_end|>\n"


def test_chat_rows_need_a_chat_template_that_writes_assistant_turns(chatml_dir):
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]
    _, tokenizer = load_model(chatml_dir)
    tokenizer.chat_template = None
    with pytest.raises(ValueError, match="no chat template"):
        encode_chat(tokenizer, messages)
    _, tiny = load_model("tiny")  # its template concatenates the user turns only
    with pytest.raises(ValueError, match="drops assistant messages"):
        encode_chat(tiny, messages)
    with pytest.raises(ValueError, match="no assistant turn"):
        encode_chat(tiny, messages[:1])


def test_sft_on_a_messages_file_saves_a_model_that_trains(chatml_dir, tmp_path):
    rows = [
        {
            "messages": [
                {"role": "user", "content": f"hello {i}"},
                {"role": "assistant", "content": f"hello there {i}"},
            ]
        }
        for i in range(30)
    ]
    data = write_jsonl(tmp_path / "chat.jsonl", rows)
    meta = sft(config(tmp_path, data, init=chatml_dir, steps=3, lr=1e-2), progress=False)
    assert meta["final_loss"] > 0
    model, tokenizer = load_model(str(tmp_path / "out"))
    assert tokenizer.chat_template == CHATML
    assert model.config.model_type == "qwen2"


def test_the_out_folder_loads_and_trains_one_rl_step(tmp_path):
    rows = [{"prompt": f"{i}+{i}=", "answer": str(2 * i)} for i in range(40)]
    data = write_jsonl(tmp_path / "double.jsonl", rows)
    meta = sft(config(tmp_path, data), progress=False)
    held = meta["heldout"][str(data)]  # answers to check: accuracy as well as the loss
    assert {"eval/completion_loss", "eval/greedy_accuracy"} <= set(held)
    saved = json.loads((tmp_path / "out" / "policylab.json").read_text())
    assert saved["config"]["init"] == "tiny"

    model, tokenizer = load_model(str(tmp_path / "out"))
    assert model.config.model_type == "llama" and tokenizer.eos_token == "<eos>"
    result = policylab.train(
        **{**FAST_LLM, "model": str(tmp_path / "out"), "steps": 1},
        run_dir=str(tmp_path / "run"),
    )
    assert set(result.after) >= {"eval/greedy_accuracy"}


def test_data_without_a_prompt_column_fails_before_the_model_loads(tmp_path, monkeypatch):
    rows = [{"question": f"q{i}", "completion": f"a{i}"} for i in range(10)]
    data = write_jsonl(tmp_path / "bad.jsonl", rows)

    def no_loading(*args, **kwargs):
        raise AssertionError("a model or tokenizer was loaded")

    monkeypatch.setattr(sft_module, "load_model", no_loading)
    monkeypatch.setattr(sft_module, "_tokenizer", no_loading)
    with pytest.raises(ValueError, match="no column 'prompt'; columns: question, completion"):
        sft(config(tmp_path, data), progress=False)


def test_rows_longer_than_the_limit_are_refused_naming_them(tmp_path):
    rows = copy_rows(20) + [{"prompt": "copy " + "ab" * 20 + ":", "completion": "ab" * 20}]
    data = write_jsonl(tmp_path / "long.jsonl", rows)
    with pytest.raises(ValueError, match=r"longer than 30 tokens.*'copy ababab.*8\d tokens"):
        sft(config(tmp_path, data, max_length=30), progress=False)


def test_a_non_empty_out_folder_needs_overwrite(tmp_path):
    data = write_jsonl(tmp_path / "copy.jsonl", copy_rows(20))
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "keep.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="not empty.*keep.txt.*overwrite=true"):
        sft(config(tmp_path, data), progress=False)
    sft(config(tmp_path, data, overwrite=True, steps=1), progress=False)
    assert (tmp_path / "out" / "keep.txt").read_text() == "mine"
    assert (tmp_path / "out" / "config.json").is_file()


def test_micro_batches_give_the_full_batch_gradient():
    model, tokenizer = load_model("tiny")
    rows = [encode(tokenizer, r) for r in copy_rows(5)]
    grads = []
    for micro in (0, 2):
        model.zero_grad()
        loss = sft_module._backward(model, rows, tokenizer.pad_token_id, micro)
        grads.append((loss, [p.grad.clone() for p in model.parameters()]))
    (full, g_full), (split, g_split) = grads
    assert split == pytest.approx(full, rel=1e-5)
    for a, b in zip(g_full, g_split, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)


def test_epochs_set_the_steps_and_bfloat16_with_checkpointing_trains_on_cpu(tmp_path):
    data = write_jsonl(tmp_path / "copy.jsonl", copy_rows(30))
    train_rows = policylab.tasks.get(str(data)).rows["train"]
    cfg = config(
        tmp_path, data, epochs=2, batch_size=16, dtype="bfloat16", gradient_checkpointing=True
    )
    meta = sft(cfg, progress=False)
    assert meta["curve"][-1]["step"] == math.ceil(2 * train_rows / 16)
    assert math.isfinite(meta["final_loss"])


def test_the_sft_command_takes_model_task_and_overwrite(tmp_path, capsys):
    data = write_jsonl(tmp_path / "copy.jsonl", copy_rows(20))
    out = tmp_path / "cli"
    args = ["sft", "--model", "tiny", "--task", str(data), "--out", str(out)]
    fields = ["steps=1", "batch_size=4", "eval_n=2", "device=cpu"]
    assert main(args + fields) == 0
    assert "held-out completion loss" in capsys.readouterr().out
    assert main(args + fields) == 2  # out is not empty now
    assert "overwrite" in capsys.readouterr().out
    assert main(args + ["--overwrite"] + fields) == 0
