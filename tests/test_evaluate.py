"""Prompt rendering: plain text, chat messages, and the error for a model without a
chat template."""

import pytest

from policylab.evaluate import prompt_ids
from policylab.models import build_tokenizer


def test_plain_and_chat_prompts_give_the_same_ids_for_the_tiny_template():
    tokenizer = build_tokenizer()
    plain = prompt_ids(tokenizer, ["12+3="])
    chat = prompt_ids(tokenizer, [[{"role": "user", "content": "12+3="}]])
    assert plain == chat


def test_chat_prompts_without_a_template_name_the_fix():
    tokenizer = build_tokenizer()
    tokenizer.chat_template = None
    with pytest.raises(ValueError, match="no chat template; give the tokenizer a chat_template"):
        prompt_ids(tokenizer, [[{"role": "user", "content": "hi"}]])
