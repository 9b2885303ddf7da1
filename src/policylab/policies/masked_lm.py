"""A masked diffusion language model (MDM) and its LLaDA-style generation.

`MaskedDiffusionLM` is a bidirectional transformer (`torch.nn.TransformerEncoder`, pre-norm,
GELU, no causal mask, a key-padding mask on left-padded prompts) over the shipped character
tokenizer plus one mask token M (101 + 1 = 102 ids); the logit of M is forced to −∞ at the
output, so M is never predicted [ours; papers/seed_generative.md G0.3].

Generation (G1.2, LLaDA semi-autoregressive low-confidence remasking [code
dllm-reasoning/d1:diffu_grpo_trainer.py:generate, get_num_transfer_tokens]): the L completion
positions start as M and are decoded in L/b blocks of b, S/(L/b) steps per block. At each
step the whole sequence is scored; a candidate x̃_l per position is the Gumbel-max argmax of
logit_l − τ_s·log(−log u) (sampling from softmax(logit/τ_s); greedy at τ_s = 0; noise in
float64); its confidence is softmax(logit)[x̃_l] at temperature 1 (`low_confidence`) or
U(0, 1) (`random`); positions outside the current block get −∞; the n_j masked positions of
highest confidence take their candidates. The step index at which a position is revealed is
returned as `reveal` [B, L] (ρ of G0.1), what the likelihood estimators of
`policylab.policies.mdm_logprob` read.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from torch import nn

from policylab.algebra.mdm_schedule import reveal_counts

REMASKING = ("low_confidence", "random")
MDM_FORMAT = "policylab_mdm"  # config.json's model_type of a saved MDM folder


@dataclass(frozen=True)
class MDMConfig:
    """Architecture of the tiny MDM (G1.6: d 128, 4 layers, 4 heads, L = 6) [ours: the
    feed-forward width 384 of the shipped AR model's TinyConfig]. Ids: the shipped
    tokenizer's <pad> 0 and <eos> 1, and the added mask token 101."""

    vocab_size: int = 102
    d_model: int = 128
    n_layers: int = 4
    n_heads: int = 4
    d_ff: int = 384
    max_len: int = 64
    completion_length: int = 6
    mask_id: int = 101
    pad_id: int = 0
    eos_id: int = 1

    def __post_init__(self) -> None:
        for name in ("vocab_size", "d_model", "n_layers", "n_heads", "d_ff", "max_len"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"MDMConfig.{name} = {value!r}; accepted: an integer >= 1")
        if self.d_model % self.n_heads:
            raise ValueError(
                f"MDMConfig.d_model = {self.d_model} is not divisible by n_heads = {self.n_heads}"
            )
        if not 1 <= self.completion_length < self.max_len:
            raise ValueError(
                f"MDMConfig.completion_length = {self.completion_length}; accepted: "
                f"1 .. max_len - 1 = {self.max_len - 1}"
            )
        if not 0 <= self.mask_id < self.vocab_size:
            raise ValueError(
                f"MDMConfig.mask_id = {self.mask_id}; accepted: 0 .. {self.vocab_size - 1}"
            )


@dataclass(frozen=True)
class MDMSampling:
    """How an MDM decodes (G1.2): completion length L, total steps S, block length b
    (0 = one block of L), temperature τ_s (0 = greedy) and the remasking rule. Defaults
    [ours, the toy]: S = L = 6, one block, τ_s = 1, low_confidence [code d1 default]."""

    length: int = 6
    steps: int = 6
    block: int = 0
    temperature: float = 1.0
    remasking: str = "low_confidence"

    def __post_init__(self) -> None:
        if self.length < 1:
            raise ValueError(f"MDMSampling.length = {self.length}; accepted: >= 1")
        block = self.block or self.length
        if block < 1 or self.length % block:
            raise ValueError(
                f"MDMSampling.block = {self.block}; accepted: 0 (one block) or a divisor of "
                f"length = {self.length}"
            )
        blocks = self.length // block
        if self.steps < blocks or self.steps % blocks:
            raise ValueError(
                f"MDMSampling.steps = {self.steps}; accepted: a multiple of the number of "
                f"blocks ({blocks}) that is >= {blocks}"
            )
        if self.temperature < 0:
            raise ValueError(f"MDMSampling.temperature = {self.temperature}; accepted: >= 0")
        if self.remasking not in REMASKING:
            raise ValueError(
                f"MDMSampling.remasking = {self.remasking!r}; accepted: {', '.join(REMASKING)}"
            )

    @property
    def block_length(self) -> int:
        return self.block or self.length


@dataclass
class MDMGenerations:
    """What `MaskedDiffusionLM.generate` returns, row-major like `Generations`:
    response_ids [B, L] (no M left); reveal [B, L] the step ρ at which each position was
    revealed (0 .. S−1); response_mask [B, L] 1 up to and including the first EOS (all L
    when there is none, G1.9); finish_reason "stop" (an EOS) or "length"."""

    response_ids: torch.Tensor
    reveal: torch.Tensor
    response_mask: torch.Tensor
    finish_reason: list[str]
    logprobs: torch.Tensor | None = None  # an MDM has no exact per-token log-prob (G0.4)


def transfer_counts(masked: int, steps: int) -> list[int]:
    """How many tokens each of `steps` steps reveals in a block with `masked` masked
    positions: n_j = ⌊m/steps⌋ + 1[j < m mod steps] [code d1:get_num_transfer_tokens].
    (6, 4) → [2, 2, 1, 1]; (19, 8) → [3, 3, 3, 2, 2, 2, 2, 2]."""
    if steps < 1 or masked < 0:
        raise ValueError(f"transfer_counts({masked}, {steps}): need masked >= 0 and steps >= 1")
    base, extra = divmod(masked, steps)
    return [base + (1 if j < extra else 0) for j in range(steps)]


def left_pad(prompts: list[list[int]], pad_id: int) -> torch.Tensor:
    """Prompts as one left-padded LongTensor [B, P]."""
    if not prompts or any(len(p) == 0 for p in prompts):
        raise ValueError("every prompt needs at least one token")
    width = max(len(p) for p in prompts)
    return torch.tensor([[pad_id] * (width - len(p)) + list(p) for p in prompts])


def decode(tokenizer, response_ids: torch.Tensor, eos_id: int) -> list[str]:
    """Completion texts up to the first EOS."""
    texts = []
    for row in response_ids.tolist():
        row = row[: row.index(eos_id)] if eos_id in row else row
        texts.append(tokenizer.decode(row))
    return texts


class MaskedDiffusionLM(nn.Module):
    """Bidirectional transformer p_θ(y_l | z) over every position at once (G0.3)."""

    def __init__(self, config: MDMConfig | None = None) -> None:
        super().__init__()
        self.config = cfg = config or MDMConfig()
        self.mask_id, self.pad_id, self.eos_id = cfg.mask_id, cfg.pad_id, cfg.eos_id
        self.embed = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.position = nn.Embedding(cfg.max_len, cfg.d_model)
        layer = nn.TransformerEncoderLayer(
            cfg.d_model,
            cfg.n_heads,
            cfg.d_ff,
            dropout=0.0,
            activation="gelu",
            batch_first=True,
            norm_first=True,
        )
        self.encoder = nn.TransformerEncoder(
            layer, cfg.n_layers, norm=nn.LayerNorm(cfg.d_model), enable_nested_tensor=False
        )
        self.head = nn.Linear(cfg.d_model, cfg.vocab_size)

    def forward(self, ids: torch.Tensor, attention_mask: torch.Tensor | None = None):
        """logits [B, T, V] of ids [B, T]; attention_mask [B, T] (1 = real token, default
        ids != pad). Positions count real tokens, so left padding does not shift them."""
        if attention_mask is None:
            attention_mask = ids != self.pad_id
        attention_mask = attention_mask.bool()
        if ids.shape[1] > self.config.max_len:
            raise ValueError(
                f"sequence of {ids.shape[1]} tokens exceeds MDMConfig.max_len = "
                f"{self.config.max_len}"
            )
        positions = (attention_mask.long().cumsum(1) - 1).clamp(min=0)
        h = self.embed(ids) + self.position(positions)
        h = self.encoder(h, src_key_padding_mask=~attention_mask)
        logits = self.head(h)
        logits[..., self.mask_id] = float("-inf")
        return logits

    @torch.no_grad()
    def generate(
        self,
        prompt_ids: list[list[int]],
        sampling: MDMSampling,
        generator: torch.Generator | None = None,
        schedule: torch.Tensor | None = None,
    ) -> MDMGenerations:
        """Decode one completion per prompt by G1.2 (see the module docstring).

        `schedule` [B, S, 2]: Co-GRPO's per-row schedule actions (log τ_s, logit q_s) (G1.5,
        `policies/mdm_schedule.py`); step s then samples at τ_s = exp(a_s0) (argmax tokens
        stay argmax when `sampling.temperature` is 0) and reveals n = max(1, round(σ(a_s1)
        ·masked)) positions, the last step all; one block only."""
        prompts = left_pad(prompt_ids, self.pad_id)
        rows, width = prompts.shape
        length, block = sampling.length, sampling.block_length
        _check_schedule(schedule, rows, sampling)
        ids = torch.cat([prompts, torch.full((rows, length), self.mask_id)], dim=1)
        attention = torch.cat([prompts != self.pad_id, torch.ones(rows, length, dtype=bool)], 1)
        reveal = torch.full((rows, length), -1, dtype=torch.long)
        blocks = length // block
        per_block = sampling.steps // blocks
        step = 0
        for k in range(blocks):
            start, end = width + k * block, width + (k + 1) * block
            counts = [
                transfer_counts(int(m), per_block)
                for m in (ids[:, start:end] == self.mask_id).sum(1)
            ]
            for j in range(per_block):
                was_training = self.training
                self.eval()
                logits = self(ids, attention).double()
                self.train(was_training)
                temperature = sampling.temperature
                if schedule is not None:
                    counts = _schedule_counts(schedule, step, ids[:, start:end] == self.mask_id)
                    if temperature:
                        temperature = torch.exp(schedule[:, step, 0].double())
                candidates = _gumbel_argmax(logits, temperature, generator)
                if sampling.remasking == "low_confidence":
                    confidence = logits.softmax(-1).gather(-1, candidates[..., None])[..., 0]
                else:
                    confidence = torch.rand(ids.shape, dtype=torch.float64, generator=generator)
                masked = ids == self.mask_id
                confidence[:, end:] = float("-inf")
                confidence = torch.where(masked, confidence, float("-inf"))
                for i in range(rows):
                    n = int(counts[i]) if schedule is not None else counts[i][j]
                    if n:
                        chosen = confidence[i].topk(n).indices
                        ids[i, chosen] = candidates[i, chosen]
                        reveal[i, chosen - width] = step
                step += 1
        response = ids[:, width:]
        return MDMGenerations(response, reveal, *completion_mask(response, self.eos_id))

    def save(self, folder: str | Path, meta: dict | None = None) -> None:
        """config.json, model.safetensors and policylab.json (meta) in `folder`."""
        from safetensors.torch import save_file

        out = Path(folder)
        out.mkdir(parents=True, exist_ok=True)
        (out / "config.json").write_text(
            json.dumps({"model_type": MDM_FORMAT, **asdict(self.config)}, indent=2) + "\n"
        )
        state = {k: v.contiguous() for k, v in self.state_dict().items()}
        save_file(state, str(out / "model.safetensors"))
        (out / "policylab.json").write_text(json.dumps(meta or {}, indent=2) + "\n")

    @classmethod
    def load(cls, folder: str | Path) -> MaskedDiffusionLM:
        """The MDM saved in `folder` by `save`; a folder of another kind is a ValueError."""
        from safetensors.torch import load_file

        model = cls(cls.load_config(folder))
        model.load_state_dict(load_file(str(Path(folder) / "model.safetensors")))
        return model

    @staticmethod
    def load_config(folder: str | Path) -> MDMConfig:
        """The MDMConfig saved in `folder`; a folder of another kind is a ValueError."""
        path = Path(folder)
        config_file = path / "config.json"
        if not config_file.is_file():
            raise FileNotFoundError(f"MDM folder {str(path)!r} has no config.json")
        raw = json.loads(config_file.read_text())
        if raw.pop("model_type", None) != MDM_FORMAT:
            raise ValueError(
                f"{str(path)!r} is not a masked diffusion LM folder (config.json model_type "
                f"must be {MDM_FORMAT!r}; build one with python -m policylab.pretrain_mdm)"
            )
        return MDMConfig(**raw)


def is_mdm_folder(folder: str | Path) -> bool:
    """True when `folder` holds a model saved by `MaskedDiffusionLM.save`."""
    config_file = Path(folder) / "config.json"
    if not config_file.is_file():
        return False
    try:
        return json.loads(config_file.read_text()).get("model_type") == MDM_FORMAT
    except (OSError, ValueError):
        return False


def completion_mask(response: torch.Tensor, eos_id: int) -> tuple[torch.Tensor, list[str]]:
    """response_mask [B, L] (1 up to and including the first EOS; all ones without an EOS,
    G1.9) and finish_reason per row."""
    is_eos = response == eos_id
    has_eos = is_eos.any(1)
    first = torch.where(has_eos, is_eos.long().argmax(1), response.shape[1] - 1)
    mask = (torch.arange(response.shape[1])[None] <= first[:, None]).long()
    return mask, ["stop" if e else "length" for e in has_eos.tolist()]


def _gumbel_argmax(
    logits: torch.Tensor, temperature, generator: torch.Generator | None
) -> torch.Tensor:
    """argmax of logit − τ·log(−log u), u ~ U(0, 1) in float64 — d1's argmax of
    e^{logit}/(−log u)^τ in log space (same argmax, no overflow); τ = 0: plain argmax.
    τ: a float, or one per row [B] (a Co-GRPO schedule)."""
    if isinstance(temperature, torch.Tensor):
        temperature = temperature[:, None, None]
    elif temperature == 0:
        return logits.argmax(-1)
    u = torch.rand(logits.shape, dtype=torch.float64, generator=generator).clamp_min(1e-300)
    return (logits.double() - temperature * torch.log(-torch.log(u))).argmax(-1)


def _check_schedule(schedule: torch.Tensor | None, rows: int, sampling: MDMSampling) -> None:
    if schedule is None:
        return
    if tuple(schedule.shape) != (rows, sampling.steps, 2):
        raise ValueError(
            f"schedule has shape {list(schedule.shape)}; accepted: [rows, steps, 2] = "
            f"[{rows}, {sampling.steps}, 2] (log τ_s, logit q_s per step)"
        )
    if sampling.block_length != sampling.length:
        raise ValueError(
            f"MDMSampling.block = {sampling.block} with a schedule; accepted: 0 (one block: "
            "the schedule's q_s is a fraction of the whole canvas, G1.5)"
        )


def _schedule_counts(schedule: torch.Tensor, step: int, masked: torch.Tensor) -> torch.Tensor:
    """Per-row reveal counts [B] of step `step` under the schedule's q (G1.5)."""
    q = torch.sigmoid(schedule[:, step, 1].double())
    return reveal_counts(q, masked.sum(1), last=step == schedule.shape[1] - 1)
