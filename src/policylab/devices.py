"""Where a language model runs and in which precision.

`device`: "auto" (the first CUDA GPU when torch sees one, else the CPU), "cpu", "cuda" or
"cuda:N". `dtype`: "float32" (the default: nothing changes), or "bfloat16" / "float16"
mixed precision: the weights stay float32 (the optimiser's master copy) and every forward
pass runs under `torch.autocast(device, dtype)`, on the CPU too; float16 adds loss
scaling (`torch.amp.GradScaler`) because its gradients underflow. Log-probs, ratios,
losses and advantages stay float32 (algebra/precision.py).

The trainer marks a model with `place`; the two places that run a forward pass
(models.py `response_forward`, engines/hf.py) enter `autocast_for(model)`, and the
learner's forward also `checkpointing_for(model)`. The mark is a plain attribute, so it
follows the model through `copy.deepcopy` (per-role policies) and costs nothing at
float32, where `autocast_for` is a null context.
"""

from __future__ import annotations

import re
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass

import torch

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
DEVICE_CHOICES = '"auto", "cpu", "cuda" or "cuda:N"'
_DEVICE = re.compile(r"auto|cpu|cuda(:\d+)?")
_MARK = "policylab_precision"  # the attribute `place` sets on a model


def resolve_device(name: str) -> torch.device:
    """The torch device `name` means here; a ValueError naming the value and the choices
    when it has the wrong form or asks for a GPU that this machine does not have."""
    if not _DEVICE.fullmatch(name):
        raise ValueError(f"unknown device {name!r}; accepted: {DEVICE_CHOICES}")
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)
    if device.type != "cuda":
        return device
    if not torch.cuda.is_available():
        build = f"CUDA {torch.version.cuda}" if torch.version.cuda else "a CPU-only build"
        raise ValueError(
            f"device {name!r}, but torch sees no CUDA GPU on this machine (torch "
            f"{torch.__version__}, {build}); use device=auto (cuda when present, else cpu) "
            "or device=cpu"
        )
    count = torch.cuda.device_count()
    if device.index is not None and device.index >= count:
        raise ValueError(
            f"device {name!r}, but this machine has {count} CUDA GPU(s): accepted cuda:0 .. "
            f"cuda:{count - 1}"
        )
    return device


@dataclass(frozen=True)
class Precision:
    """A device and the dtype forward passes compute in (weights stay float32)."""

    device: torch.device = torch.device("cpu")
    dtype: torch.dtype = torch.float32

    @classmethod
    def of(cls, device: str = "auto", dtype: str = "float32") -> Precision:
        if dtype not in DTYPES:
            raise ValueError(f"unknown dtype {dtype!r}; accepted: {', '.join(DTYPES)}")
        return cls(resolve_device(device), DTYPES[dtype])

    @property
    def mixed(self) -> bool:
        return self.dtype != torch.float32

    def autocast(self) -> AbstractContextManager:
        """Autocast to `dtype` on `device` (a null context at float32)."""
        if not self.mixed:
            return nullcontext()
        return torch.autocast(self.device.type, dtype=self.dtype)

    def grad_scaler(self) -> torch.amp.GradScaler | None:
        """A loss scaler for float16 (its small gradients underflow to 0 without one); None
        for float32 and bfloat16, whose exponent range is float32's."""
        if self.dtype != torch.float16:
            return None
        return torch.amp.GradScaler(self.device.type)


def place(model, precision: Precision, *, gradient_checkpointing: bool = False):
    """`model` moved to `precision.device` and marked so that its forward passes run under
    `precision.autocast()`; its weights keep their dtype (float32 from `load_model`: the
    master weights). With `gradient_checkpointing`, the transformers model recomputes each
    layer's activations in the backward pass (models.py's learner forward turns it on only
    while gradients are taken). Returns `model`."""
    model.to(precision.device)
    setattr(model, _MARK, precision)
    if gradient_checkpointing:
        # transformers >= 5 renamed gradient_checkpointing_enable (now a deprecated alias)
        enable = getattr(model, "activation_checkpointing_enable", None)
        if enable is not None:
            enable({"use_reentrant": False})
        else:
            model.gradient_checkpointing_enable(
                gradient_checkpointing_kwargs={"use_reentrant": False}
            )
    return model


def precision_of(model) -> Precision | None:
    """The precision `place` marked `model` with (None: never placed)."""
    return getattr(model, _MARK, None)


def autocast_for(model) -> AbstractContextManager:
    """The autocast context `model`'s forward passes run under (null unless `place` marked
    it with a mixed precision)."""
    precision = precision_of(model)
    return precision.autocast() if precision is not None else nullcontext()


@contextmanager
def checkpointing_for(model):
    """The context of a learner's forward pass: the activation checkpointing that `place`
    enabled is on while gradients are taken. transformers checkpoints a layer only while
    that layer is in training mode; policylab keeps its models in eval mode (no dropout:
    the learner's log-probs must equal the sampler's), so only the checkpointed layers'
    own flags are set, and only for the duration of the call."""
    layers = []
    if torch.is_grad_enabled():
        layers = [
            m
            for m in model.modules()
            if getattr(m, "gradient_checkpointing", False) is True and not m.training
        ]
    for layer in layers:
        layer.training = True
    try:
        yield
    finally:
        for layer in layers:
            layer.training = False
