"""LoRA through peft (the extra `lora`): the policy trains low-rank adapters on a frozen
base model, and that base (the adapters disabled) is the KL reference, so a run holds one
copy of the model's weights, not two.

An adapted linear layer computes W x + (alpha / r) · B A x, with A [r, in] drawn at random
and B [out, r] = 0, so training starts from the base model exactly (Hu et al. 2021,
arXiv 2106.09685, eq. 3). `export` writes the merged weights W + (alpha / r) · B A as an
ordinary model folder, with the adapters alone in its `adapter/` subfolder.

peft is imported only when LoRA is asked for."""

from __future__ import annotations

import contextlib
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from policylab.algebra.options import build_options, check_choice, check_range, option

INSTALL = 'pip install "policylab[lora]"'
ADAPTER = "adapter"  # the adapters' subfolder of an exported model folder
BIASES = ("none", "all", "lora_only")


@dataclass(frozen=True)
class LoraOptions:
    """The config's `lora` field (peft's LoraConfig under our names)."""

    r: int = option(16, "rank of each adapter (peft r)")
    alpha: float = option(32, "scale numerator: ΔW = (alpha / r) · B A (peft lora_alpha)")
    dropout: float = option(
        0.0,
        "must be 0: policylab computes log-probs in eval mode (the sampler's and the "
        "learner's agree, so the first ratio is 1), where dropout never applies",
    )
    target_modules: str | list[str] = option(
        "all-linear",
        'the layers that get adapters: "all-linear" (every linear layer but the output '
        "head), a list of module names (q_proj, v_proj, ...) or a regular expression",
    )
    bias: str = option(
        "none",
        "none, all or lora_only: which biases train too (peft bias); with a KL the "
        "reference must stay the base model, so only none",
    )

    def __post_init__(self) -> None:
        if isinstance(self.r, bool) or not isinstance(self.r, int):
            raise ValueError(f"lora.r = {self.r!r} must be a whole number >= 1")
        check_range("lora", "r", self.r, low=1)
        check_range("lora", "alpha", self.alpha, low=0, low_open=True)
        if self.dropout != 0:
            raise ValueError(
                f"lora.dropout = {self.dropout!r}: policylab computes log-probs in eval mode "
                "(the sampler's and the learner's agree, so the first ratio is 1), where "
                "dropout never applies; accepted: 0"
            )
        targets = self.target_modules
        names = [targets] if isinstance(targets, str) else targets
        if (
            not isinstance(names, list | tuple)
            or not names
            or not all(isinstance(n, str) and n for n in names)
        ):
            raise ValueError(
                f'lora.target_modules = {targets!r}: accepted: "all-linear", a non-empty '
                "list of module names (e.g. [q_proj, v_proj]) or a regular expression"
            )
        check_choice("lora", "bias", self.bias, BIASES)


def options(value: Any) -> LoraOptions | None:
    """The LoRA options of a config's `lora` value: None, False or {} = off; True = every
    default; a dict = those options over the defaults. An unknown key or a bad value is a
    ValueError naming it and what is accepted; so is a missing peft."""
    if value is None or value is False or (isinstance(value, dict) and not value):
        return None
    if value is True:
        value = {}
    if not isinstance(value, dict):
        raise ValueError(
            f"lora = {value!r}: accepted: null or {{}} (off), true (the defaults) or a mapping "
            "of options, e.g. {r: 16, alpha: 32}"
        )
    chosen = build_options(LoraOptions, value, where="lora")
    _peft(ValueError)
    return chosen


def as_config(value: Any) -> dict[str, Any]:
    """The config's `lora` field, checked and written out in full ({} when off), so that
    config.yaml records every option the run used."""
    chosen = options(value)
    return {} if chosen is None else asdict(chosen)


def _peft(error: type[Exception] = ImportError):
    try:
        import peft
    except ImportError:
        raise error(f"LoRA needs the peft package, which is not installed: {INSTALL}") from None
    return peft


def apply_lora(model, chosen: LoraOptions):
    """`model` with adapters on its `target_modules` (a peft PeftModel, in eval mode as
    the model it wraps): only the adapters (and the biases `bias` names) require grad."""
    peft = _peft()
    targets = chosen.target_modules
    config = peft.LoraConfig(
        r=chosen.r,
        lora_alpha=chosen.alpha,
        lora_dropout=chosen.dropout,
        target_modules=list(targets) if isinstance(targets, list | tuple) else targets,
        bias=chosen.bias,
        task_type="CAUSAL_LM",
    )
    try:
        adapted = peft.get_peft_model(model, config)
    except ValueError as err:
        linear = sorted(
            {
                n.rpartition(".")[2]
                for n, m in model.named_modules()
                if isinstance(m, torch.nn.Linear)
            }
        )
        raise ValueError(
            f"lora.target_modules = {targets!r}: {err}; this model's linear layers: "
            f'{", ".join(linear)} (or "all-linear")'
        ) from None
    return adapted.eval()  # peft's wrapper starts in train mode; the base was in eval


def is_lora(model) -> bool:
    """Whether `model` carries peft adapters (never imports peft)."""
    peft = sys.modules.get("peft")
    return peft is not None and isinstance(model, peft.PeftModel)


def adapters_off(model):
    """A context in which `model` is the frozen reference: a LoRA model with its adapters
    disabled, i.e. its base as loaded; any other model as it is."""
    return model.disable_adapter() if is_lora(model) else contextlib.nullcontext()


@torch.no_grad()
def merged_state_dict(model) -> dict[str, torch.Tensor]:
    """The base model's state dict, under its own names, with each adapted weight merged:
    W + (alpha / r) · B A (peft's `get_delta_weight`). The model itself is not changed
    (peft's merge_and_unload would change it, and unmerging rounds the base weights)."""
    from peft.tuners.lora import LoraLayer

    base = model.get_base_model()
    merged = {}
    for name, module in base.named_modules():
        if isinstance(module, LoraLayer):
            weight = module.get_base_layer().weight
            deltas = [module.get_delta_weight(a) for a in module.active_adapters]
            # one layer at a time on the model's device, kept on the CPU: a GPU holds at
            # most one extra layer while a checkpoint or the final model is written [ours]
            merged[f"{name}.weight"] = (weight + sum(deltas)).cpu()
    out = {}
    for key, value in base.state_dict().items():
        if ".lora_" in key:
            continue
        key = key.replace(".base_layer.", ".")
        out[key] = merged.get(key, value)
    return out


def export(model, tokenizer, folder: str | Path) -> Path:
    """`folder`: the merged full weights and the tokenizer (a model folder that
    `AutoModelForCausalLM.from_pretrained` and policylab's `load_model` read), and in
    `folder/adapter` the adapters alone (`peft.PeftModel.from_pretrained(base, ...)`)."""
    folder = Path(folder)
    model.get_base_model().save_pretrained(folder, state_dict=merged_state_dict(model))
    if tokenizer is not None:
        tokenizer.save_pretrained(folder)
    model.save_pretrained(folder / ADAPTER)
    return folder


class Exported:
    """A LoRA model whose `save_pretrained(folder)` is `export`: what a checkpoint writes,
    so that every checkpoint's model/ is a complete model folder with its adapters."""

    def __init__(self, model) -> None:
        self.model = model

    def save_pretrained(self, folder: str | Path) -> None:
        export(self.model, None, folder)


def for_saving(model):
    """What to call `save_pretrained` on to save `model`: `Exported(model)` for a LoRA
    model, the model itself otherwise."""
    return Exported(model) if is_lora(model) else model


def load_adapter(model, folder: str | Path) -> None:
    """The adapters `export` wrote into `folder` (its `adapter/` subfolder, or the
    adapter folder itself), loaded into the LoRA model `model` in place."""
    peft = _peft()
    folder = Path(folder)
    if not (folder / "adapter_config.json").is_file():
        folder = folder / ADAPTER
    weights = peft.utils.load_peft_weights(str(folder), device="cpu")
    result = peft.set_peft_model_state_dict(model, weights)
    unexpected = getattr(result, "unexpected_keys", [])
    if unexpected:
        raise ValueError(
            f"the adapters in {folder} do not fit this model (unexpected: "
            f"{', '.join(unexpected[:5])}); were they saved with other lora options?"
        )
