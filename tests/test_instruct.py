"""Instruct and base models: generation stops at every eos of the generation config, chat
templates render the prompts (chat=True, system prompt, chat_template_kwargs), a prompt
too long for the context fails before generation naming the row, and tokenizers without
a pad token work. Tiny random models built here: a Qwen2 with a byte-level BPE tokenizer
and a ChatML template, a GPT-2 (no template, no pad), a Llama without a pad token."""

import re

import pytest
import torch

from policylab.config import ConfigError, TrainConfig, load
from policylab.engines import HFEngine, Sampling
from policylab.engines.hf import end_token_ids
from policylab.evaluate import evaluate
from policylab.models import load_model
from policylab.policies.language_model import LanguageModelPolicy
from policylab.prompting import PromptFormat, check_room, context_length, ensure_pad_token
from policylab.trainers.llm import compose, train
from policylab.trainers.run import read_metrics
from policylab.workflows.single_turn import rollout
from run_testing import FAST_LLM
from tiny_models import CHATML, bpe_tokenizer


def qwen(max_positions: int = 256, eos: list[str] = ("<|im_end|>", "<|endoftext|>")):
    """A 2-layer Qwen2 and a ChatML tokenizer (eos <|im_end|>, pad <|endoftext|>, as Qwen's
    instruct checkpoints); its generation config lists the ids of `eos`."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    tokenizer = bpe_tokenizer(
        ["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
    )
    tokenizer.chat_template = CHATML
    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=max_positions,
        tie_word_embeddings=True,
    )
    model = Qwen2ForCausalLM(config)
    model.generation_config.eos_token_id = tokenizer.convert_tokens_to_ids(list(eos))
    return model, tokenizer


def gpt2(n_positions: int = 256):
    """A 2-layer GPT-2 whose tokenizer, like GPT-2's, has <|endoftext|> as bos, eos and unk,
    no pad token and no chat template."""
    from transformers import GPT2Config, GPT2LMHeadModel

    end = "<|endoftext|>"
    tokenizer = bpe_tokenizer([end], bos_token=end, eos_token=end, unk_token=end)
    torch.manual_seed(0)
    config = GPT2Config(
        vocab_size=len(tokenizer), n_embd=32, n_layer=2, n_head=2, n_positions=n_positions
    )
    return GPT2LMHeadModel(config), tokenizer


def llama_without_pad():
    """A 2-layer Llama whose tokenizer has <s>, </s> and <unk> but no pad token."""
    from transformers import LlamaConfig, LlamaForCausalLM

    tokenizer = bpe_tokenizer(
        ["<unk>", "<s>", "</s>"], bos_token="<s>", eos_token="</s>", unk_token="<unk>"
    )
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        max_position_embeddings=128,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    return LlamaForCausalLM(config), tokenizer


def saved(folder, model, tokenizer) -> str:
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


@pytest.fixture(scope="module")
def qwen_dir(tmp_path_factory):
    return saved(tmp_path_factory.mktemp("qwen"), *qwen())


def config(model_dir, tmp_path, **fields) -> TrainConfig:
    return load(
        TrainConfig,
        None,
        {**FAST_LLM, "model": model_dir, "run_dir": str(tmp_path / "run"), **fields},
    )


# --- end tokens -------------------------------------------------------------------------


def test_end_ids_are_the_tokenizer_eos_and_every_generation_config_eos():
    model, tokenizer = qwen()
    im_end, text_end = tokenizer.convert_tokens_to_ids(["<|im_end|>", "<|endoftext|>"])
    assert end_token_ids(model, tokenizer) == sorted([im_end, text_end])
    model.generation_config.eos_token_id = text_end  # an int: the tokenizer's eos joins it
    assert end_token_ids(model, tokenizer) == sorted([im_end, text_end])
    model.generation_config.eos_token_id = None
    assert end_token_ids(model, tokenizer) == [im_end]
    assert end_token_ids(None, tokenizer) == [im_end]  # an engine without a model object


def forcing(model, tokens: dict[int, int], otherwise: int):
    """Make the model's k-th forward call (1 = the prefill) put all its probability on
    tokens[k], else on `otherwise`: a logits bias on the LM head's output."""
    calls = []

    def hook(module, inputs, output):
        calls.append(1)
        bias = torch.full_like(output, -1e4)
        bias[..., tokens.get(len(calls), otherwise)] = 1e4
        return output + bias

    return model.lm_head.register_forward_hook(hook)


@pytest.mark.parametrize("listed", [True, False])
def test_generation_stops_at_the_second_eos_of_the_generation_config(listed):
    # ChatML's <|im_end|> is the tokenizer's eos; the model emits <|endoftext|>, the other
    # id Qwen's generation_config lists: generation stops there only when it is listed
    model, tokenizer = qwen(eos=["<|im_end|>", "<|endoftext|>"] if listed else ["<|im_end|>"])
    text_end = tokenizer.convert_tokens_to_ids("<|endoftext|>")
    letter = tokenizer.convert_tokens_to_ids("a")
    handle = forcing(model, {3: text_end}, otherwise=letter)
    prompt = tokenizer("12+35=", add_special_tokens=False)["input_ids"]
    out = HFEngine(model, tokenizer).generate([prompt], 1, Sampling(max_new_tokens=6))
    handle.remove()
    if listed:  # "a", "a", <|endoftext|>: the end token is kept in the mask
        assert out.response_ids[0].tolist() == [letter, letter, text_end]
        assert out.response_mask[0].tolist() == [1.0, 1.0, 1.0]
        assert out.finish_reason == ["stop"]
        assert out.texts == ["aa"]
    else:  # the same tokens, then "a" until max_new_tokens
        assert out.response_ids[0].tolist() == [letter, letter, text_end, letter, letter, letter]
        assert out.response_mask[0].sum() == 6
        assert out.finish_reason == ["length"]


# --- chat templates ---------------------------------------------------------------------


def test_chat_renders_system_and_user_with_the_generation_prompt():
    _, tokenizer = qwen()
    fmt = PromptFormat(chat=True, system_prompt="Be brief.")
    expected = (
        "<|im_start|>system\nBe brief.<|im_end|>\n"
        "<|im_start|>user\n12+35=<|im_end|>\n<|im_start|>assistant\n"
    )
    assert fmt.encode(tokenizer, ["12+35="]) == [
        tokenizer(expected, add_special_tokens=False)["input_ids"]
    ]
    no_system = PromptFormat(chat=True).messages("12+35=")
    assert no_system == [{"role": "user", "content": "12+35="}]
    thinking_off = PromptFormat(chat=True, template_kwargs={"enable_thinking": False})
    ids = thinking_off.encode(tokenizer, ["12+35="])[0]
    assert tokenizer.decode(ids).endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")


def test_plain_text_stays_plain_and_message_lists_keep_working():
    _, tokenizer = qwen()
    assert PromptFormat().encode(tokenizer, ["12+35="]) == [
        tokenizer("12+35=", add_special_tokens=False)["input_ids"]
    ]
    messages = [{"role": "user", "content": "hi"}]
    plain = PromptFormat().encode(tokenizer, [messages])[0]
    assert tokenizer.decode(plain) == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    # chat=True adds the system prompt to a message list without one, and keeps its own
    with_system = PromptFormat(chat=True, system_prompt="S").encode(tokenizer, [messages])[0]
    assert tokenizer.decode(with_system).startswith("<|im_start|>system\nS<|im_end|>\n")
    own = [{"role": "system", "content": "Mine"}, *messages]
    assert PromptFormat(chat=True, system_prompt="S").messages(own) == own


def test_chat_with_a_tokenizer_without_template_fails_before_the_model_loads(tmp_path, monkeypatch):
    folder = saved(tmp_path / "gpt2", *gpt2())
    monkeypatch.setattr(
        "policylab.trainers.llm.load_model", lambda *a, **k: pytest.fail("model loaded")
    )
    cfg = config(folder, tmp_path, chat=True, steps=1)
    with pytest.raises(ConfigError, match="no chat template") as err:
        train(cfg)
    assert folder in str(err.value) and "chat_template" in str(err.value)
    assert "chat=False" in str(err.value)


def test_chat_fields_without_chat_and_chat_on_a_multi_turn_task_are_refused(qwen_dir, tmp_path):
    with pytest.raises(ConfigError, match="system_prompt='Be brief.'.*set chat=True"):
        config(qwen_dir, tmp_path, system_prompt="Be brief.")
    with pytest.raises(ConfigError, match="chat_template_kwargs"):
        config(qwen_dir, tmp_path, chat_template_kwargs={"enable_thinking": False})
    with pytest.raises(ConfigError, match="countdown_calc is multi-turn"):
        compose(config(qwen_dir, tmp_path, task="countdown_calc", chat=True))


def test_two_chat_steps_train_the_qwen_model_on_rendered_prompts(qwen_dir, tmp_path, monkeypatch):
    import policylab.evaluate
    import policylab.workflows.single_turn as single_turn

    seen = {"training": [], "held-out": []}

    def recorder(kind, check):
        def record(ids, *args, **kwargs):
            seen[kind] += ids
            return check(ids, *args, **kwargs)

        return record

    monkeypatch.setattr(single_turn, "check_room", recorder("training", check_room))
    monkeypatch.setattr(policylab.evaluate, "check_room", recorder("held-out", check_room))
    # a 0/1 reward that varies within groups, so the two steps have advantages to learn from
    length = tmp_path / "length.py"
    length.write_text(
        "def length(prompts, completions, **kw):\n"
        "    return [float(len(c) % 2) for c in completions]\n"
    )
    cfg = config(
        qwen_dir,
        tmp_path,
        steps=2,
        rewards={f"{length}:length": 1.0},
        chat=True,
        system_prompt="Answer briefly.",
        chat_template_kwargs={"enable_thinking": False},
    )
    before, tokenizer = load_model(qwen_dir)
    result = train(cfg)
    assert result.steps == 2
    for kind, ids in seen.items():
        assert len(ids) >= cfg.prompts_per_step, kind
        for row in ids:
            text = tokenizer.decode(row)
            assert text.startswith("<|im_start|>system\nAnswer briefly.<|im_end|>\n"), kind
            assert text.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n"), kind
    rows = read_metrics(result.run_dir, kind="train")
    assert [r["step"] for r in rows] == [1, 2]
    after, _ = load_model(f"{result.run_dir}/checkpoints/step_2/model")
    changed = [
        not torch.equal(p, q) for p, q in zip(before.parameters(), after.parameters(), strict=True)
    ]
    assert any(changed)
    # `policylab eval --model <run_dir>` renders the held-out prompts as the run did
    seen["held-out"].clear()
    policylab.evaluate_model(result.run_dir, n=2)
    assert seen["held-out"]
    for row in seen["held-out"]:
        assert tokenizer.decode(row).startswith("<|im_start|>system\nAnswer briefly.<|im_end|>")


# --- context length ---------------------------------------------------------------------


def test_check_room_names_the_row_the_lengths_and_the_fix():
    # context 10, max_new_tokens 4: prompts may be 6 tokens; row 1 (first = 5: index 6)
    # has 7
    prompts = ["short", "a prompt that runs on " * 5]
    ids = [[1, 2, 3], [1] * 7]
    check_room(ids[:1], prompts[:1], 10, 4)
    check_room(ids, prompts, None, 4)  # a config without a context length: unchecked
    with pytest.raises(ValueError) as err:
        check_room(ids, prompts, 10, 4, first=5, what="training prompt")
    message = str(err.value)
    assert message.startswith("training prompt 6 ('a prompt that runs on a prompt")
    assert "is 7 tokens long" in message and "needs 11 positions" in message
    assert "context has 10" in message and "at most 6 tokens" in message
    assert "lower max_new_tokens" in message


def test_a_prompt_too_long_for_the_context_fails_before_generation():
    from policylab import tasks

    model, tokenizer = gpt2(n_positions=24)  # GPT-2 states its context as n_positions
    ensure_pad_token(tokenizer)
    assert context_length(model.config) == 24
    calls = []
    model.register_forward_hook(lambda *args: calls.append(1))
    task = tasks.get("arithmetic")
    with pytest.raises(ValueError, match=r"held-out prompt 0 \('.*max_new_tokens = 22"):
        evaluate(model, tokenizer, task, n=4, max_new_tokens=22)
    policy = LanguageModelPolicy(model, tokenizer, sampling=Sampling(max_new_tokens=22))
    examples = task.examples("train", 3)
    with pytest.raises(
        ValueError, match=r"training prompt 0 \('" + re.escape(examples[0]["prompt"])
    ):
        rollout(examples, policy, 2, reward_fn=None)
    assert calls == []  # the model never ran


# --- pad tokens -------------------------------------------------------------------------


def test_pad_token_falls_back_to_eos_then_bos_then_unk_else_a_clear_error():
    _, tokenizer = llama_without_pad()
    ensure_pad_token(tokenizer)
    assert tokenizer.pad_token == "</s>"
    only_bos = bpe_tokenizer(["<s>"], bos_token="<s>")
    ensure_pad_token(only_bos)
    assert only_bos.pad_token == "<s>"
    bare = bpe_tokenizer([])
    with pytest.raises(ValueError, match="'my-model'.*no pad token.*add_special_tokens"):
        ensure_pad_token(bare, "my-model")


def test_llama_without_pad_token_trains_end_to_end(tmp_path):
    folder = saved(tmp_path / "llama", *llama_without_pad())
    model, tokenizer = load_model(folder)
    assert tokenizer.pad_token == "</s>" and tokenizer.padding_side == "left"
    result = train(config(folder, tmp_path, steps=2))
    rows = read_metrics(result.run_dir, kind="train")
    assert [r["step"] for r in rows] == [1, 2]
    assert all(torch.isfinite(torch.tensor(r["reward/mean"])) for r in rows)
