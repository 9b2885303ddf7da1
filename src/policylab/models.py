"""The tiny shipped model: its character-level tokenizer, its architecture, and loading
any causal LM (the shipped one, a local folder or a hub id) the same way.

The tokenizer has one token per printable ASCII character plus newline, the special
tokens <pad>, <eos> and <unk>, and the answer tags <answer> and </answer> as single
(non-special, so decoding keeps them) tokens. The model is a Llama-architecture causal LM
from `transformers`, small enough to train and run on a laptop CPU.
"""

from __future__ import annotations

import logging
import re
import string
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from policylab.devices import autocast_for, checkpointing_for
from policylab.logprobs import selective_logprobs
from policylab.packing import pack, packed_forward

log = logging.getLogger(__name__)

ASSETS = Path(__file__).parent / "assets"
TINY = ASSETS / "tiny"  # the shipped model and tokenizer
TINY_NAME = "tiny"  # what users type: --model tiny

PAD, EOS, UNK = "<pad>", "<eos>", "<unk>"
ANSWER_OPEN, ANSWER_CLOSE = "<answer>", "</answer>"
CHARACTERS = [c for c in string.printable if c not in "\t\r\x0b\x0c"]  # 95 printable + "\n"

# A chat template for message-style prompts: the user turns, concatenated.
CHAT_TEMPLATE = (
    "{% for message in messages %}{% if message['role'] != 'assistant' %}"
    "{{ message['content'] }}{% endif %}{% endfor %}"
)


@dataclass(frozen=True)
class TinyConfig:
    """Architecture of the shipped model (DESIGN.md calibration: ~0.9 M parameters)."""

    hidden_size: int = 128
    intermediate_size: int = 384
    num_hidden_layers: int = 4
    num_attention_heads: int = 4
    max_position_embeddings: int = 128


def build_tokenizer(filler_tokens: int = 0):
    """The character-level fast tokenizer, as a `PreTrainedTokenizerFast`. `filler_tokens`
    appends that many tokens that no text encodes to (<t0>, <t1>, ...): a vocabulary the
    size of a real model's for benchmarks (benchmarks/gpu_smoke.py); 0 = the shipped one."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    specials = [PAD, EOS, UNK]
    fillers = [f"<t{i}>" for i in range(filler_tokens)]
    vocab = {tok: i for i, tok in enumerate(specials + CHARACTERS + fillers)}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNK))
    core.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    core.decoder = decoders.Fuse()
    core.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in specials])
    core.add_tokens(
        [AddedToken(t, special=False, normalized=False) for t in (ANSWER_OPEN, ANSWER_CLOSE)]
    )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core,
        pad_token=PAD,
        eos_token=EOS,
        unk_token=UNK,
        padding_side="left",
        clean_up_tokenization_spaces=False,
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def build_model(tokenizer, config: TinyConfig | None = None, seed: int = 0):
    """A freshly initialised Llama causal LM sized by `config`."""
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = config or TinyConfig()
    torch.manual_seed(seed)
    llama = LlamaConfig(
        vocab_size=len(tokenizer),
        **asdict(cfg),
        num_key_value_heads=cfg.num_attention_heads,
        rms_norm_eps=1e-5,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    return LlamaForCausalLM(llama)


# a hub id: name or owner/name, letters, digits, "-", "_", "." (huggingface_hub's rule)
HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?")
MODEL_CHOICES = (
    '"tiny" (shipped), a local model folder (with config.json) or a hub id (name or owner/name)'
)


def _is_path(name: str) -> bool:
    """Whether `name` can only mean a local folder: not shaped like a hub id, or starting
    with /, . or ~, or with a parent folder that exists here (runs/x when runs/ exists)."""
    if name.startswith(("/", ".", "~")) or not HUB_ID.fullmatch(name) or ".." in name:
        return True
    return "/" in name and Path(name).parent.is_dir()


def model_folder_problem(name_or_path: str | Path) -> str | None:
    """Why `name_or_path` cannot be a model, found without any hub call; None when it can
    (the shipped model, a local folder with config.json, or something shaped like a hub id)."""
    name = str(name_or_path)
    if name == TINY_NAME:
        return None
    folder = Path(name).expanduser()
    if folder.is_dir():
        if (folder / "config.json").is_file():
            return None
        return (
            f"model folder {name!r} has no config.json, so it holds no saved model "
            "(model.save_pretrained or `policylab sft` writes one)"
        )
    if _is_path(name):
        return (
            f"no such model folder {name!r} (looked for {folder.absolute()}), and a path is not "
            f"a hub id; --model takes {MODEL_CHOICES}"
        )
    return None


def resolve_model_path(name_or_path: str | Path) -> str:
    """ "tiny" → the shipped folder; a local folder (~ expanded) → its path; anything else
    (a hub id) is passed to `from_pretrained` as is. A path that does not exist is a
    FileNotFoundError naming it, before any hub call."""
    if str(name_or_path) == TINY_NAME:
        if not (TINY / "config.json").exists():
            raise FileNotFoundError(
                f"the shipped model is missing from {TINY}; rebuild it with `make assets`"
            )
        return str(TINY)
    problem = model_folder_problem(name_or_path)
    if problem:
        raise FileNotFoundError(problem)
    folder = Path(name_or_path).expanduser()
    return str(folder) if folder.is_dir() else str(name_or_path)


def load_model(name_or_path: str | Path = TINY_NAME, *, dtype: torch.dtype = torch.float32):
    """(model, tokenizer) from "tiny", a local folder or a hub id, via `from_pretrained`.

    A tokenizer without a pad token pads with its eos (else bos, else unk) token:
    `ensure_pad_token`."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = resolve_model_path(name_or_path)
    try:
        tokenizer = AutoTokenizer.from_pretrained(path)
    except OSError as err:
        if Path(path).is_dir():
            raise
        reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise FileNotFoundError(
            f"no such model folder {str(name_or_path)!r}, and the hub could not provide it as a "
            f"hub id ({reason}); --model takes {MODEL_CHOICES}"
        ) from None
    ensure_pad_token(tokenizer, str(name_or_path))
    tokenizer.padding_side = "left"
    model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype)
    return model, tokenizer


PAD_FALLBACKS = ("eos_token", "bos_token", "unk_token")


def ensure_pad_token(tokenizer, model: str = "") -> None:
    """Give a tokenizer without a pad token one of its own special tokens as pad: eos,
    else bos, else unk (common for hub models: Llama, GPT-2 and Qwen base checkpoints
    have no pad token). The pad id only fills positions the attention mask hides and
    rows that already ended, and decoding skips special tokens, so any special token
    serves and the model needs no new embedding row (a new row would be a token the
    policy could sample). A tokenizer with none of them is a ValueError naming the fix."""
    if tokenizer.pad_token is not None:
        return
    for name in PAD_FALLBACKS:
        token = getattr(tokenizer, name, None)
        if token is not None:
            tokenizer.pad_token = token
            log.info("%s: no pad token; padding with its %s %r", model or "tokenizer", name, token)
            return
    raise ValueError(
        f"model {model!r}: its tokenizer has no pad token and no eos, bos or unk token to "
        "pad with. Add one and save it with the model: tokenizer.add_special_tokens("
        "{'pad_token': '<pad>'}); model.resize_token_embeddings(len(tokenizer))"
    )


def count_parameters(model) -> int:
    return sum(p.numel() for p in model.parameters())


def sequence_logprobs(
    model,
    prompt_ids: list[list[int]],
    response_ids: torch.Tensor,
    response_mask: torch.Tensor,
    *,
    pad_id: int,
    temperature: float = 1.0,
    with_entropy: bool = False,
    observation_mask: torch.Tensor | None = None,
    packing: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-probs [B, T] of `response_ids` after each prompt under `model` (logits divided by
    `temperature`, as the engine samples), and optionally the next-token entropy [B, T].

    Prompts are left-padded and responses right-padded into one [B, P + T] input, so a
    single forward scores the whole batch; positions come from the attention mask, so
    padding never shifts them. Masked response positions hold 0. `packing`: packing.py's
    rows without padding instead (equal to float32 rounding)."""
    out = response_forward(
        model,
        prompt_ids,
        response_ids,
        response_mask,
        pad_id=pad_id,
        temperature=temperature,
        with_entropy=with_entropy,
        observation_mask=observation_mask,
        packing=packing,
    )
    return out.logprobs, out.entropy


@dataclass
class ResponseForward:
    logprobs: torch.Tensor  # [B, T], with gradient
    entropy: torch.Tensor | None = None  # [B, T], no gradient
    head_input: torch.Tensor | None = None  # [B, T, d] final hidden state / temperature
    logits: torch.Tensor | None = None  # [B, T, V] tempered logits, no gradient
    hidden: torch.Tensor | None = None  # [B, T, d] final hidden state, with gradient,
    # on the model's device (what a value head reads); every other field is on the device
    # of `response_ids`


def response_forward(
    model,
    prompt_ids: list[list[int]],
    response_ids: torch.Tensor,
    response_mask: torch.Tensor,
    *,
    pad_id: int,
    temperature: float = 1.0,
    with_entropy: bool = False,
    with_head: bool = False,
    observation_mask: torch.Tensor | None = None,
    with_hidden: bool = False,
    packing: bool = False,
) -> ResponseForward:
    """`sequence_logprobs`, plus with `with_head` the LM head's input and output at each
    response position (detached; what CAPO's last-layer curvature model needs). The head
    input is divided by the temperature, so that tempered logits = W · head_input for a
    linear head W.

    `observation_mask` [B, T]: response positions the model attends to without being
    scored (an environment's text inside a multi-turn row, papers/seed_agents.md §A0.3):
    the attention over the response region is response_mask ∨ observation_mask, and
    log-probs and entropy stay 0 wherever response_mask is 0.

    `with_hidden`: the final hidden state before each response token, with gradient (what
    a value head reads: V(s_t) of the context that token t is sampled from).

    The forward pass runs on the model's device, under the autocast `devices.place` gave
    the model (none by default), with activation checkpointing when it is enabled; the
    log-probs come from logprobs.py `selective_logprobs` (float32, never the whole
    [B, T, V] float32 log-softmax) and go back to the device of `response_ids`.

    `packing`: the segments without padding, the LM head on scored positions only
    (packing.py; equal to float32 rounding, not to the bit); a batch with gaps in its
    attended response positions keeps this padded path."""
    if packing:
        packed = pack(
            prompt_ids,
            response_ids,
            response_mask,
            pad_id=pad_id,
            observation_mask=observation_mask,
        )
        if packed is not None:
            fields = packed_forward(
                model,
                packed,
                temperature=temperature,
                with_entropy=with_entropy,
                with_head=with_head,
                with_hidden=with_hidden,
                home=response_ids.device,
            )
            return ResponseForward(**fields)
    device = next(model.parameters()).device
    B, T = response_ids.shape
    P = max(len(p) for p in prompt_ids)
    ids = torch.full((B, P + T), pad_id, dtype=torch.long)
    attention = torch.zeros((B, P + T), dtype=torch.long)
    for i, p in enumerate(prompt_ids):
        ids[i, P - len(p) : P] = torch.tensor(p)
        attention[i, P - len(p) : P] = 1
    ids[:, P:] = response_ids
    seen = response_mask > 0
    if observation_mask is not None:
        seen = seen | (observation_mask > 0)
    attention[:, P:] = seen.long()
    ids, attention = ids.to(device), attention.to(device)
    positions = (attention.cumsum(-1) - 1).clamp(min=0)
    with autocast_for(model), checkpointing_for(model):
        output = model(
            input_ids=ids,
            attention_mask=attention,
            position_ids=positions,
            output_hidden_states=with_head or with_hidden,
            use_cache=False,
        )
    logits = output.logits[:, P - 1 : P + T - 1]  # the model's dtype; never copied whole
    logp, entropy = selective_logprobs(logits, ids[:, P:], temperature, with_entropy)
    home = response_ids.device  # results go back where the batch lives (the CPU)
    valid = response_mask.to(device) > 0
    out = ResponseForward(torch.where(valid, logp, torch.zeros_like(logp)).to(home))
    if with_entropy:
        out.entropy = torch.where(valid, entropy, torch.zeros_like(entropy)).to(home)
    if with_hidden:
        out.hidden = output.hidden_states[-1][:, P - 1 : P + T - 1]
    if with_head:
        hidden = output.hidden_states[-1][:, P - 1 : P + T - 1]
        out.head_input = (hidden.detach().float() / temperature).to(home)
        out.logits = (logits.detach().float() / temperature).to(home)
    return out
