"""SFT rows as token ids and labels: which tokens carry the loss, and the loss itself.

A row is a task example (`tasks.get(...)`, a data file's `FileTask` included):

- text: `prompt` and `completion` strings → prompt ids + completion ids + the end token
  (unless the row says `end: False`, a multi-turn segment); loss on the completion and the
  end token.
- chat: `prompt` a list of messages ({role, content}) → rendered with the tokenizer's chat
  template. Without a `completion` it is a whole conversation (a data file's `messages`
  column) and every assistant turn carries the loss; with one (a string, or a list of
  messages) the completion's assistant turns do, the prompt's turns are context. An
  assistant turn's tokens are those the template adds between the conversation so far with
  its generation prompt and the conversation through that turn — the turn's text and the
  template's own end of turn (ChatML: `<|im_end|>` and its newline); no other end token.

Labels are -100 (ignored by cross-entropy) wherever no loss is taken. A row longer than
the limit (the model's context unless `max_length` is lower) is an error naming it: cutting
it would teach an unfinished answer (our choice; filter long rows out of the data).
"""

from __future__ import annotations

import torch

from policylab.prompting import context_length  # noqa: F401  (re-exported for sft.py)

IGNORE = -100  # cross-entropy's ignore_index
SHOWN = 5  # rows named in a message about several rows


def encode(tokenizer, example: dict) -> tuple[list[int], list[int]]:
    """(input ids, labels) of one demonstration row (module docstring)."""
    prompt, completion = example["prompt"], example.get("completion")
    if isinstance(prompt, list):
        if completion is None:
            return encode_chat(tokenizer, prompt, first=0)
        if isinstance(completion, str):
            completion = [{"role": "assistant", "content": completion}]
        if not isinstance(completion, list):
            raise ValueError(f"completion must be a string or chat messages, got {completion!r}")
        return encode_chat(tokenizer, prompt + completion, first=len(prompt))
    if not isinstance(completion, str) or not completion:
        raise ValueError(
            f"no completion to train on (got {completion!r}): a text row needs a "
            "'completion' column (or an 'answer' column, trained as <answer>…</answer>)"
        )
    end = example.get("end", True)
    if end and tokenizer.eos_token_id is None:
        raise ValueError("the tokenizer has no eos token, which SFT appends to each completion")
    prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    answer = tokenizer(completion, add_special_tokens=False)["input_ids"]
    answer = answer + ([tokenizer.eos_token_id] if end else [])
    return prompt_ids + answer, [IGNORE] * len(prompt_ids) + answer


def encode_chat(tokenizer, messages: list[dict], first: int = 0) -> tuple[list[int], list[int]]:
    """(ids, labels) of a conversation: labels on the assistant turns from index `first`."""
    if not getattr(tokenizer, "chat_template", None):
        raise ValueError(
            "the row is chat messages but the tokenizer has no chat template; give the "
            "tokenizer a chat_template, or use text prompt/completion columns"
        )
    turns = [i for i, m in enumerate(messages) if i >= first and m.get("role") == "assistant"]
    if not turns:
        roles = [m.get("role") for m in messages[first:]]
        raise ValueError(f"no assistant turn to train on (roles {roles})")
    full = _render(tokenizer, messages)
    labels = [IGNORE] * len(full)
    for i in turns:
        before = _render(tokenizer, messages[:i], add_generation_prompt=True)
        through = _render(tokenizer, messages[: i + 1])
        if full[: len(before)] != before or full[: len(through)] != through:
            raise ValueError(
                f"the chat template renders the conversation before assistant turn {i} "
                "differently once later turns follow, so the turn's tokens cannot be found; "
                "give each assistant turn its own row"
            )
        if len(through) <= len(before):
            raise ValueError(
                f"the chat template renders assistant turn {i} as no tokens: it drops "
                "assistant messages; give the tokenizer a chat template that writes them"
            )
        labels[len(before) : len(through)] = full[len(before) : len(through)]
    return full, labels


def _render(tokenizer, messages: list[dict], add_generation_prompt: bool = False) -> list[int]:
    ids = tokenizer.apply_chat_template(
        messages, tokenize=True, add_generation_prompt=add_generation_prompt
    )
    # transformers 5 returns an encoding (a mapping); older versions a list of ids
    return list(ids["input_ids"] if hasattr(ids, "keys") else ids)


def encode_rows(tokenizer, rows: list[dict], max_length: int, source: str) -> list[tuple]:
    """Every row encoded; a ValueError naming `source` and the row (its number and how its
    prompt begins) for a row that cannot be encoded, or rows over `max_length` tokens."""
    encoded, over = [], []
    for number, row in enumerate(rows, start=1):
        try:
            ids, labels = encode(tokenizer, row)
        except ValueError as err:
            raise ValueError(f"{source}: example {number} ({_begins(row)}): {err}") from None
        if len(ids) > max_length:
            over.append(f"example {number} ({_begins(row)}, {len(ids)} tokens)")
        encoded.append((ids, labels))
    if over:
        more = ", ..." if len(over) > SHOWN else ""
        raise ValueError(
            f"{source}: {len(over)} of {len(rows)} training examples are longer than "
            f"{max_length} tokens (the model's context, or max_length): "
            f"{'; '.join(over[:SHOWN])}{more}; drop or shorten them (SFT does not cut rows)"
        )
    return encoded


def _begins(row: dict) -> str:
    prompt = row["prompt"]
    text = prompt if isinstance(prompt, str) else str(prompt[0].get("content", ""))
    return f"prompt begins {text[:40]!r}"


def collate(rows: list[tuple], pad_id: int):
    """Right-padded [B, T] input ids, labels (-100 on padding) and attention mask."""
    width = max(len(ids) for ids, _ in rows)
    input_ids = torch.tensor([ids + [pad_id] * (width - len(ids)) for ids, _ in rows])
    labels = torch.tensor([lab + [IGNORE] * (width - len(lab)) for _, lab in rows])
    attention = torch.tensor([[1] * len(ids) + [0] * (width - len(ids)) for ids, _ in rows])
    return input_ids, labels, attention


def loss_tokens(rows: list[tuple]) -> int:
    """Positions that carry the loss: labelled tokens after the first (the first token of a
    sequence has no context to predict it from)."""
    return sum(sum(1 for t in labels[1:] if t != IGNORE) for _, labels in rows)


def token_loss(model, rows: list[tuple], pad_id: int, reduction: str = "mean") -> torch.Tensor:
    """Cross-entropy of each labelled token given the tokens before it: the mean over the
    batch's labelled tokens, or their sum."""
    device = next(model.parameters()).device
    input_ids, labels, attention = (t.to(device) for t in collate(rows, pad_id))
    logits = model(input_ids=input_ids, attention_mask=attention).logits
    return torch.nn.functional.cross_entropy(
        logits[:, :-1].flatten(0, 1).float(),
        labels[:, 1:].flatten(),
        ignore_index=IGNORE,
        reduction=reduction,
    )


@torch.no_grad()
def completion_loss(model, rows: list[tuple], pad_id: int, batch_size: int = 64) -> float:
    """Mean cross-entropy per labelled token over encoded `rows` (no gradient)."""
    total = sum(
        token_loss(model, rows[i : i + batch_size], pad_id, reduction="sum").item()
        for i in range(0, len(rows), batch_size)
    )
    return total / max(loss_tokens(rows), 1)
