"""Experiment trackers beside the run folder's own files: TensorBoard, Weights & Biases,
MLflow and Trackio, chosen by the config's `report_to`.

Each tracker is one small adapter behind the `Tracker` protocol; trainers/run.py opens
them on the run's first log and sends every metric row, every step's text samples and
the run's config to each. Only TensorBoard is a dependency; the others are imported
when a run names them (`pip install wandb`, `mlflow` or `trackio`), and a run that names
one that is not installed stops before any model loads (`resolve`).

A metric's name is the same everywhere: a training metric as logged (`reward/mean`), an
evaluation metric under `eval/` once (`eval/greedy_accuracy`, never `eval/eval/...`).
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import logging
import os
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Protocol

log = logging.getLogger(__name__)

# the name in report_to → the module it imports and what installs it
INSTALL = {
    "tensorboard": ("tensorboard", "pip install tensorboard"),
    "wandb": ("wandb", "pip install wandb"),
    "mlflow": ("mlflow", "pip install mlflow"),
    "trackio": ("trackio", "pip install trackio"),
}
ALL = "all"  # every tracker that is installed
SAMPLES = "samples"  # the key of each step's text samples


class Tracker(Protocol):
    """What trainers/run.py sends to an experiment tracker. `log_hparams` comes first,
    once: a tracker whose runs take their config when they start (wandb, trackio) starts
    its run there. Metric names are final (`metric_name`), values plain numbers."""

    def log_metrics(self, step: int, metrics: dict[str, float]) -> None: ...

    def log_text(self, step: int, rows: list[dict]) -> None: ...

    def log_hparams(self, config: dict[str, Any]) -> None: ...

    def close(self) -> None: ...


def check_names(names: Iterable[str]) -> list[str]:
    """`names` if each is a tracker's name or "all"; else an error listing the choices."""
    names = list(names)
    for name in names:
        if name != ALL and name not in INSTALL:
            raise ValueError(
                f"unknown tracker {name!r}; choices: {', '.join([*INSTALL, ALL])} "
                "(all = every one that is installed)"
            )
    return names


def installed(module: str) -> bool:
    """Whether `module` can be imported (one already imported counts, a stand-in too)."""
    if module in sys.modules:
        return sys.modules[module] is not None
    return importlib.util.find_spec(module) is not None


def resolve(report_to: Iterable[str]) -> list[str]:
    """The trackers a run reports to: `report_to` with "all" replaced by every installed
    tracker, each named once. A named tracker that is not installed is an error that says
    what installs it (raised when the run folder is opened, before any model loads)."""
    names: list[str] = []
    for name in check_names(report_to):
        chosen = [n for n, (m, _) in INSTALL.items() if installed(m)] if name == ALL else [name]
        names += [n for n in chosen if n not in names]
    missing = [n for n in names if not installed(INSTALL[n][0])]
    if missing:
        how = "; ".join(INSTALL[n][1] for n in missing)
        verb, pronoun = ("is", "it") if len(missing) == 1 else ("are", "them")
        raise ValueError(
            f"report_to names {', '.join(missing)}, which {verb} not installed: {how} (or "
            f"leave {pronoun} out of report_to; report_to=[all] uses whichever trackers are "
            "installed)"
        )
    return names


def open_trackers(
    names: Iterable[str], run_dir: Path, config: dict[str, Any], purge_step: int | None
) -> list[Tracker]:
    """One open tracker per name (from `resolve`), each given the run's config: the run is
    named after its folder; `purge_step` (a resumed run) drops TensorBoard's events after
    its checkpoint."""
    opened = []
    for name in names:
        tracker = ADAPTERS[name](Path(run_dir), purge_step)
        tracker.log_hparams(config)
        opened.append(tracker)
    return opened


def metric_name(kind: str, key: str) -> str:
    """A metric's name in the trackers: training metrics as they are, other kinds under
    `<kind>/` once (an evaluation's `eval/greedy_accuracy` stays as it is)."""
    if kind == "train" or key.startswith(f"{kind}/"):
        return key
    return f"{kind}/{key}"


def numbers(metrics: dict[str, Any]) -> dict[str, float]:
    """The metrics that are plain numbers (a tracker plots only those)."""
    return {k: v for k, v in metrics.items() if isinstance(v, int | float)}


def flat_config(config: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """A nested config as one level of `a.b` keys whose values are numbers, strings or
    booleans (lists and None as their JSON text): what TensorBoard's hparams and MLflow's
    params accept."""
    out: dict[str, Any] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            out.update(flat_config(value, f"{name}."))
        elif isinstance(value, bool | int | float | str):
            out[name] = value
        else:
            out[name] = json.dumps(value, default=str)
    return out


def samples_markdown(rows: list[dict]) -> str:
    """A step's samples as a markdown table (TensorBoard's text tab renders it)."""
    columns = _columns(rows)
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        cells = [_cell(row.get(c, "")) for c in columns]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _columns(rows: list[dict]) -> list[str]:
    return list(dict.fromkeys(key for row in rows for key in row))


def _cell(value: Any) -> str:
    text = f"{value:.4g}" if isinstance(value, float) else str(value)
    return text.replace("|", "\\|").replace("\n", "<br>")


def _table(rows: list[dict]) -> tuple[list[str], list[list[Any]]]:
    columns = _columns(rows)
    return columns, [[row.get(c) for c in columns] for row in rows]


def _project(variable: str) -> str:
    return os.environ.get(variable) or "policylab"


# ---- the adapters ----------------------------------------------------------------------------
class TensorBoard:
    """Scalars, a markdown table of each step's samples (the text tab) and the config (the
    hparams tab), in the run folder's own events file."""

    def __init__(self, run_dir: Path, purge_step: int | None) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(str(run_dir), purge_step=purge_step)

    def log_metrics(self, step: int, metrics: dict[str, float]) -> None:
        for key, value in metrics.items():
            self.writer.add_scalar(key, value, step)

    def log_text(self, step: int, rows: list[dict]) -> None:
        self.writer.add_text(SAMPLES, samples_markdown(rows), step)

    def log_hparams(self, config: dict[str, Any]) -> None:
        # into this writer's file: SummaryWriter.add_hparams would open a second folder
        from torch.utils.tensorboard.summary import hparams

        for summary in hparams(flat_config(config), {}):
            self.writer.file_writer.add_summary(summary)

    def close(self) -> None:
        self.writer.close()


class Wandb:
    """A Weights & Biases run named after the run folder, in project $WANDB_PROJECT
    (default policylab), its files under the run folder; samples as a wandb.Table."""

    def __init__(self, run_dir: Path, purge_step: int | None) -> None:
        self.wandb = importlib.import_module("wandb")
        self.run_dir = run_dir

    def log_hparams(self, config: dict[str, Any]) -> None:
        self.wandb.init(
            project=_project("WANDB_PROJECT"),
            name=self.run_dir.name,
            config=config,
            dir=str(self.run_dir),
        )

    def log_metrics(self, step: int, metrics: dict[str, float]) -> None:
        self.wandb.log(dict(metrics), step=step)

    def log_text(self, step: int, rows: list[dict]) -> None:
        columns, data = _table(rows)
        self.wandb.log({SAMPLES: self.wandb.Table(columns=columns, data=data)}, step=step)

    def close(self) -> None:
        self.wandb.finish()


class MLflow:
    """An MLflow run named after the run folder (tracking URI and experiment from
    MLflow's own environment variables); the config as params, samples as a markdown
    artifact per step."""

    def __init__(self, run_dir: Path, purge_step: int | None) -> None:
        self.mlflow = importlib.import_module("mlflow")
        self.mlflow.start_run(run_name=run_dir.name)

    def log_hparams(self, config: dict[str, Any]) -> None:
        self.mlflow.log_params(flat_config(config))

    def log_metrics(self, step: int, metrics: dict[str, float]) -> None:
        self.mlflow.log_metrics(dict(metrics), step=step)

    def log_text(self, step: int, rows: list[dict]) -> None:
        self.mlflow.log_text(samples_markdown(rows), f"{SAMPLES}/step_{step:06d}.md")

    def close(self) -> None:
        self.mlflow.end_run()


class Trackio:
    """A Trackio run named after the run folder, in project $TRACKIO_PROJECT (default
    policylab); samples as a trackio.Table."""

    def __init__(self, run_dir: Path, purge_step: int | None) -> None:
        self.trackio = importlib.import_module("trackio")
        self.run_dir = run_dir

    def log_hparams(self, config: dict[str, Any]) -> None:
        self.trackio.init(
            project=_project("TRACKIO_PROJECT"), name=self.run_dir.name, config=config
        )

    def log_metrics(self, step: int, metrics: dict[str, float]) -> None:
        self.trackio.log(dict(metrics), step=step)

    def log_text(self, step: int, rows: list[dict]) -> None:
        columns, data = _table(rows)
        self.trackio.log({SAMPLES: self.trackio.Table(columns=columns, data=data)}, step=step)

    def close(self) -> None:
        self.trackio.finish()


ADAPTERS: dict[str, Callable[[Path, int | None], Tracker]] = {
    "tensorboard": TensorBoard,
    "wandb": Wandb,
    "mlflow": MLflow,
    "trackio": Trackio,
}
