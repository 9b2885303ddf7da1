"""How a prompt becomes the token ids a model is given: the one home of prompt rendering.

A prompt is plain text or a list of chat messages ({role, content}). Plain text is
tokenised as is (no special tokens added), unless the run asks for `chat=True`: then it
becomes the messages [system?, user] and, like a message list, is rendered with the
tokenizer's chat template and its generation prompt (`add_generation_prompt=True`, so
the model answers as the assistant), with the run's `chat_template_kwargs` (e.g.
enable_thinking=False). A message list without a system message gets the system prompt
first.

Also here: what a model's context holds (`context_length`), the check that each prompt
leaves room for the generation budget (`check_room`, before any generation), and the pad
token of a tokenizer that has none (`ensure_pad_token`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from policylab.models import ensure_pad_token  # noqa: F401  (re-exported: its home is models.py)

log = logging.getLogger(__name__)

SHOWN_CHARACTERS = 60  # of a prompt named in an error


@dataclass(frozen=True)
class PromptFormat:
    """How prompts are rendered: plain (the default: text as is, message lists through
    the chat template) or `chat` (every prompt through the chat template)."""

    chat: bool = False
    system_prompt: str = ""
    template_kwargs: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, cfg) -> PromptFormat:
        """The format of a TrainConfig (its fields chat, system_prompt,
        chat_template_kwargs)."""
        return cls(cfg.chat, cfg.system_prompt, dict(cfg.chat_template_kwargs))

    def messages(self, prompt: str | list[dict]) -> str | list[dict]:
        """What the tokenizer renders: plain text unchanged when not `chat`; else the
        messages, the system prompt first unless the messages have a system message."""
        if isinstance(prompt, str):
            if not self.chat:
                return prompt
            prompt = [{"role": "user", "content": prompt}]
        has_system = any(m.get("role") == "system" for m in prompt)
        if self.system_prompt and not has_system:
            return [{"role": "system", "content": self.system_prompt}, *prompt]
        return list(prompt)

    def encode(self, tokenizer, prompts: list) -> list[list[int]]:
        """Token ids of each prompt: plain text tokenised without special tokens, messages
        through the chat template with its generation prompt."""
        out = []
        for prompt in prompts:
            rendered = self.messages(prompt)
            if isinstance(rendered, str):
                out.append(tokenizer(rendered, add_special_tokens=False)["input_ids"])
                continue
            require_chat_template(tokenizer, getattr(tokenizer, "name_or_path", ""), self.chat)
            ids = tokenizer.apply_chat_template(
                rendered, add_generation_prompt=True, tokenize=True, **self.template_kwargs
            )
            # transformers 5 returns an encoding (a mapping); older versions a list of ids
            out.append(list(ids["input_ids"] if hasattr(ids, "keys") else ids))
        return out


PLAIN = PromptFormat()


def require_chat_template(tokenizer, model: str, chat: bool = True) -> None:
    """A ValueError naming `model` and the fix when its tokenizer has no chat template."""
    if getattr(tokenizer, "chat_template", None):
        return
    why = "chat=True renders every prompt" if chat else "the prompts are chat messages"
    instead = "train on plain-text prompts (chat=False)" if chat else "use plain-text prompts"
    raise ValueError(
        f"model {model!r}: {why}, but the tokenizer has no chat template; give the "
        "tokenizer a chat_template (a Jinja string, saved with the model in "
        f"tokenizer_config.json or chat_template.jinja), use a model that has one, or {instead}"
    )


def check_chat_template(model: str) -> None:
    """Before any weights load: `model`'s tokenizer (read from its folder or the hub) has
    a chat template; else the ValueError of `require_chat_template`."""
    from transformers import AutoTokenizer

    from policylab.models import resolve_model_path

    require_chat_template(AutoTokenizer.from_pretrained(resolve_model_path(model)), model)


CONTEXT_FIELDS = ("max_position_embeddings", "n_positions", "max_sequence_length")


def context_length(config) -> int | None:
    """Positions a model was built for, from its config (Llama/Qwen:
    max_position_embeddings, GPT-2: n_positions); None when the config states none."""
    sizes = (getattr(config, name, None) for name in CONTEXT_FIELDS)
    return next((n for n in sizes if isinstance(n, int)), None)


def check_room(
    ids: list[list[int]],
    prompts: list,
    max_positions: int | None,
    max_new_tokens: int,
    *,
    first: int = 0,
    what: str = "prompt",
) -> None:
    """Every prompt's tokens plus `max_new_tokens` fit in `max_positions`; else a
    ValueError naming the first prompt that does not (`what` and its index, counting from
    `first`, and its opening characters), the lengths, and what to change. Called before
    generation: past its context a model fails deep inside (an index error on GPT-2's
    position table, a CUDA assertion) or runs on positions it never learnt (RoPE)."""
    if max_positions is None:
        return
    room = max_positions - max_new_tokens
    over = [i for i, p in enumerate(ids) if len(p) > room]
    if not over:
        return
    i = over[0]
    prompt = prompts[i]
    text = prompt if isinstance(prompt, str) else " | ".join(str(m.get("content")) for m in prompt)
    shown = text[:SHOWN_CHARACTERS] + ("..." if len(text) > SHOWN_CHARACTERS else "")
    others = f" ({len(over) - 1} more in this batch)" if len(over) > 1 else ""
    raise ValueError(
        f"{what} {first + i} ({shown!r}) is {len(ids[i])} tokens long; with max_new_tokens "
        f"= {max_new_tokens} it needs {len(ids[i]) + max_new_tokens} positions, and the "
        f"model's context has {max_positions} (its config's {' or '.join(CONTEXT_FIELDS)}), "
        f"so prompts may be at most {max(room, 0)} tokens{others}. Shorten or drop the long "
        "prompts from the data, lower max_new_tokens, or use a model with a longer context"
    )
