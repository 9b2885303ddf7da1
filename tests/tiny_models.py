"""Tokenizers for the tests' tiny random models: byte-level BPE trained on a small corpus,
and the ChatML template as Qwen writes it (shared by the instruct, SFT and other tests)."""

from __future__ import annotations

# ChatML as Qwen writes it, with Qwen3's switch for an empty thinking block
CHATML = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{{ message['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n"
    "{% if enable_thinking is defined and enable_thinking is false %}"
    "<think>\n\n</think>\n\n{% endif %}{% endif %}"
)
CORPUS = ["12+35=47", "What is 3*4? <answer>12</answer>", "system user assistant"] * 20


def bpe_tokenizer(specials: list[str], corpus: list[str] = CORPUS, vocab_size: int = 320, **tokens):
    """A byte-level BPE fast tokenizer trained on `corpus`, `tokens` naming its specials
    (eos_token="<|im_end|>", ...)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=specials,
        initial_alphabet=alphabet,
        show_progress=False,
    )
    core.train_from_iterator(corpus, trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=core, clean_up_tokenization_spaces=False, **tokens
    )
