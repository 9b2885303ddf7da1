"""A reward model as a reward function: a folder holding a sequence classifier with one
output (`AutoModelForSequenceClassification`, as TRL's reward models are saved) scores
each prompt + completion, as TRL's GRPOTrainer scores with it.

    rewards.get("models/my-rm")              # any folder whose config.json names a
    combine({"models/my-rm": 1.0, ...})      # ...ForSequenceClassification architecture

The text is the prompt followed by the completion; for conversational prompts, the
prompt's messages and the completion's, rendered by the reward model's own chat template.
It is tokenized by the reward model's own tokenizer (no special tokens added, padded on
the right) and scored in batches without gradients: the reward is the logit. The model
loads on the first call, not when the run is planned.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import torch

from policylab.devices import resolve_device
from policylab.rewards.trl import as_completions, is_conversational

log = logging.getLogger(__name__)

CLASSIFIER = "ForSequenceClassification"  # the end of a reward model's architecture name


def is_reward_model(spec: str) -> bool:
    """Whether `spec` is a folder with a config.json naming a sequence classifier."""
    config = Path(spec).expanduser() / "config.json"
    if not config.is_file():
        return False
    try:
        architectures = json.loads(config.read_text()).get("architectures") or []
    except (OSError, ValueError):
        return False
    return any(str(a).endswith(CLASSIFIER) for a in architectures)


class RewardModel:
    """`(prompts, completions, **columns) -> list[float]`: the logit of the classifier in
    folder `path` on each prompt + completion. `batch_size` texts per forward pass;
    `device` None: CUDA when present, else the CPU."""

    # A forward pass cannot hang the way user code can, and its first call loads the
    # model: reward_timeout_s does not apply (it runs in the calling thread).
    timeout_exempt = True

    def __init__(self, path: str, *, batch_size: int = 16, device: str | None = None) -> None:
        if not is_reward_model(path):
            raise ValueError(
                f"reward model {path!r}: expected a folder whose config.json names a "
                f"...{CLASSIFIER} architecture (a model saved by "
                "AutoModelForSequenceClassification.save_pretrained)"
            )
        self.path = str(Path(path).expanduser())
        self.__name__ = Path(self.path).name
        self.batch_size = batch_size
        self.device = str(resolve_device(device or "auto"))
        self._model = self._tokenizer = None

    def __repr__(self) -> str:
        return f"RewardModel({self.path!r})"

    def load(self) -> tuple[Any, Any]:
        """The classifier (in eval mode, on `device`) and its tokenizer, loaded once."""
        if self._model is None:
            from transformers import AutoModelForSequenceClassification, AutoTokenizer

            model = AutoModelForSequenceClassification.from_pretrained(self.path)
            if model.config.num_labels != 1:
                raise ValueError(
                    f"reward model {self.path!r} has {model.config.num_labels} outputs "
                    "(num_labels); a reward model has one (num_labels=1)"
                )
            tokenizer = AutoTokenizer.from_pretrained(self.path)
            if tokenizer.pad_token is None:  # batches need padding; the classifier reads
                tokenizer.pad_token = tokenizer.eos_token  # the last non-pad token
            if model.config.pad_token_id is None:
                model.config.pad_token_id = tokenizer.pad_token_id
            self._model = model.to(self.device).eval().requires_grad_(False)
            self._tokenizer = tokenizer
            log.info("reward model %s loaded on %s", self.path, self.device)
        return self._model, self._tokenizer

    def texts(self, prompts, completions) -> list[str]:
        """What the classifier reads: prompt + completion, or the whole conversation
        rendered by the reward model's chat template."""
        _, tokenizer = self.load()
        completions = as_completions(prompts, completions)
        out = []
        for prompt, completion in zip(prompts, completions, strict=True):
            if is_conversational(prompt):
                reply = completion if isinstance(completion, list) else []
                out.append(tokenizer.apply_chat_template([*prompt, *reply], tokenize=False))
            else:
                out.append(f"{prompt}{completion}")
        return out

    def __call__(self, prompts, completions, **columns: Any) -> list[float]:
        model, tokenizer = self.load()
        texts = self.texts(prompts, completions)
        scores: list[float] = []
        with torch.no_grad():
            for start in range(0, len(texts), self.batch_size):
                batch = tokenizer(
                    texts[start : start + self.batch_size],
                    return_tensors="pt",
                    padding=True,
                    padding_side="right",
                    add_special_tokens=False,
                ).to(self.device)
                scores += model(**batch).logits[:, 0].float().tolist()
        return scores
