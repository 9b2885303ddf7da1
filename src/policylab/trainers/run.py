"""The run folder shared by every trainer: resolved config, metrics (JSONL and
TensorBoard), samples, atomic checkpoints with resume, curves, summary, progress bar.

    runs/<name>/
      config.yaml      resolved config, versions, git sha
      metrics.jsonl    one JSON object per step (and per evaluation)
      events.*         TensorBoard: scalars, samples (text tab), config (hparams tab)
      samples.jsonl    prompts, completions, rewards
      curves.png       chosen metrics against steps
      checkpoints/     step_N/ ...; `latest` names the newest complete one; the
                       `keep_checkpoints` newest are kept
      best/            with `save_best`: the evaluation with the highest value of that
                       metric (best.json: metric, value, step), its model
      summary.md       before/after table, wall time, throughput
      .lock            the pid and host of the process that owns the folder

What can go wrong, and what happens: a second process on a folder in use is refused
(`RunFolderInUse`); a checkpoint is loaded with `weights_only=True` (tensors and plain
values: a file holding Python objects is refused, never executed); a resume drops the
metrics and samples its checkpoint does not cover (all of them without a checkpoint); a
torn last line of metrics.jsonl (a kill mid-write) is dropped with a warning; a checkpoint
that cannot be written (disk full) is removed with a warning and training continues,
while metrics that cannot be written stop the run (`RunFolderError`).

Beside the folder's files, every metric row, sample and the config also go to the
experiment trackers of `report_to` (trackers.py: TensorBoard, wandb, mlflow, trackio),
and the run's callbacks (callbacks.py) hear of each logged step (`on_step`), evaluation
(`on_eval`) and checkpoint (`on_checkpoint`); one that raises `StopTraining` sets
`stopping`, which the trainers' loops check.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import math
import os
import platform
import shutil
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch
import yaml
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from policylab import trackers
from policylab.callbacks import Callbacks
from policylab.trainers.run_safety import (
    RunFolderError,
    acquire_lock,
    check_resumable,
    load_state,
    read_jsonl,
    release_lock,
)

log = logging.getLogger(__name__)

CHECKPOINTS = "checkpoints"
LATEST = "latest"
BEST = "best"


class Run:
    """One run folder. `resume=True` continues the folder's newest checkpoint; a new run
    refuses a folder that already holds checkpoints (nothing is overwritten silently)."""

    def __init__(
        self,
        run_dir: str | Path,
        config: dict[str, Any],
        *,
        resume: bool = False,
        keep_checkpoints: int = 2,
        report_to: Iterable[str] = ("tensorboard",),
        save_best: str | None = None,
        callbacks: Iterable[object] = (),
    ) -> None:
        self.dir = Path(run_dir)
        self.keep = keep_checkpoints  # 0: every checkpoint
        self.save_best_metric = save_best
        self._report_to = trackers.resolve(report_to)  # before any model loads
        self.callbacks = Callbacks(callbacks)
        self._trackers: list[trackers.Tracker] | None = None  # opened on the first log
        self._hparams = config
        self._unsaved: tuple[int, OSError] | None = None  # the last checkpoint that failed
        if not resume and self.latest_checkpoint() is not None:
            raise FileExistsError(
                f"run folder {str(self.dir)!r} already holds checkpoints; continue it with "
                "--resume, or choose another run name"
            )
        resumed = resume and (self.dir / "config.yaml").is_file()
        if resumed:
            check_resumable(self.dir / "config.yaml", config)
        self.dir.mkdir(parents=True, exist_ok=True)
        self._lock = acquire_lock(self.dir)
        text = yaml.safe_dump(
            {**config, "provenance": provenance()}, sort_keys=False, allow_unicode=True
        )
        self._config_text: str | None = text
        logged = [self.dir / name for name in ("metrics.jsonl", "samples.jsonl")]
        if self.latest_checkpoint() is None and any(path.exists() for path in logged):
            # an attempt killed before its first checkpoint: the run starts again at step 0
            log.warning(
                "no complete checkpoint in %s: starting from step 0, without the rows the "
                "earlier attempt logged (%s)",
                self.dir,
                ", ".join(path.name for path in logged if path.exists()),
            )
            for path in logged:
                _keep_until(path, None)
            shutil.rmtree(self.dir / BEST, ignore_errors=True)  # that attempt's best model
            self._purge_step = 0
        if not resumed:  # a resumed run's, once it logs: a failed resume leaves it as it was
            self._write_config()

    # ---- logging --------------------------------------------------------------------------
    def log(self, step: int, metrics: dict[str, float], *, kind: str = "train") -> None:
        """One row of metrics.jsonl, the same numbers to every tracker (an evaluation's
        under `eval/`), then the callbacks: `on_step` for a training row, `on_eval` for
        an evaluation."""
        plain = {k: _plain(v) for k, v in metrics.items()}
        row = {"step": step, "kind": kind, **plain}
        self._write_config()
        self._append("metrics.jsonl", json.dumps(row) + "\n")
        named = {trackers.metric_name(kind, k): v for k, v in trackers.numbers(plain).items()}
        for tracker in self._open_trackers():
            tracker.log_metrics(step, named)
        if kind == "train":
            self.callbacks.on_step(step, plain)
        elif kind == "eval":
            self.callbacks.on_eval(step, plain)

    def log_samples(self, step: int, rows: Iterable[dict]) -> None:
        plain = [{k: _plain(v) for k, v in row.items()} for row in rows]
        lines = [json.dumps({"step": step, **row}) + "\n" for row in plain]
        if lines:
            self._append("samples.jsonl", "".join(lines))
            for tracker in self._open_trackers():
                tracker.log_text(step, plain)

    keeps_outputs = True  # what the run leaves stays (a DDP follower's scratch folder does not)

    @property
    def stopping(self) -> bool:
        """A callback raised StopTraining: the trainer ends the run at this step."""
        return self.callbacks.stop is not None

    def _append(self, name: str, lines: str) -> None:
        """Whole lines, in one unbuffered write on a file opened for appending: a kill
        leaves at most a torn last line, and nothing else writes between their bytes."""
        path = self.dir / name
        data = lines.encode()
        try:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                if os.write(fd, data) != len(data):
                    raise OSError(errno.ENOSPC, "short write (disk full?)")
            finally:
                os.close(fd)
        except OSError as err:
            raise RunFolderError(
                f"cannot write {path}: {err}; the run stops here. Its checkpoints are "
                f"unchanged (latest: {self.latest_checkpoint() or 'none'}): free space or "
                "make the folder writable, then continue it with --resume"
            ) from err

    def _write_config(self) -> None:
        if self._config_text is not None:
            write_atomic(self.dir / "config.yaml", self._config_text)
            self._config_text = None

    def metrics(self, kind: str | None = None) -> list[dict]:
        return read_metrics(self.dir, kind=kind)

    def open_trackers(self) -> None:
        """Open the trackers now rather than at the first log (after a resume's
        `load_checkpoint`): a trainer whose clock starts before its first log keeps their
        set-up (TensorBoard's writer: ~0.3–0.8 s on 2 cores) off the training time."""
        self._open_trackers()

    def _open_trackers(self) -> list[trackers.Tracker]:
        """The trackers, opened on the first log: after a resume's `load_checkpoint`,
        whose step TensorBoard purges the later events from."""
        if self._trackers is None:
            self._trackers = trackers.open_trackers(
                self._report_to, self.dir, self._hparams, self._purge_step
            )
        return self._trackers

    _purge_step: int | None = None

    def close(self) -> None:
        """Flush and close the trackers and give the folder up; a run whose last
        checkpoint could not be written ends with an error saying which checkpoint it has
        instead."""
        for tracker in self._trackers or []:
            tracker.close()
        self._trackers = []
        release_lock(self._lock)
        if self._unsaved is not None:
            step, err = self._unsaved
            raise RunFolderError(
                f"the run's last checkpoint (step {step}) could not be written in "
                f"{self.dir / CHECKPOINTS}: {err}. Its latest complete checkpoint is "
                f"{self.latest_checkpoint() or 'none'}: free space and continue it with "
                "--resume to redo the steps after it"
            )

    # ---- checkpoints ----------------------------------------------------------------------
    def latest_checkpoint(self) -> Path | None:
        return latest_checkpoint(self.dir)

    def save_checkpoint(
        self, step: int, state: dict[str, Any], model=None, tokenizer=None
    ) -> Path | None:
        """Write step_N/ under a temporary name, rename it, then switch `latest`: a kill at
        any moment leaves the previous checkpoint complete and named by `latest`. A write
        that fails (disk full, read-only folder) removes the temporary folder, warns and
        returns None: the previous checkpoint stays `latest` and training goes on. The
        callbacks' `on_checkpoint` hears of a checkpoint once it is complete."""
        root = self.dir / CHECKPOINTS
        final = root / f"step_{step}"
        tmp = root / f".step_{step}.tmp"
        try:
            root.mkdir(parents=True, exist_ok=True)
            _write_folder(tmp, state, model, tokenizer)
            shutil.rmtree(final, ignore_errors=True)
            os.replace(tmp, final)
            write_atomic(root / LATEST, final.name + "\n")
        except OSError as err:
            shutil.rmtree(tmp, ignore_errors=True)
            log.warning(
                "could not write checkpoint %s: %s; removed %s, %s stays the latest "
                "checkpoint and training continues",
                final,
                err,
                tmp,
                self.latest_checkpoint() or "no checkpoint",
            )
            self._unsaved = (step, err)
            return None
        self._unsaved = None
        self._prune(keep=final)
        self.callbacks.on_checkpoint(step, final)
        return final

    def save_best(
        self,
        step: int,
        metrics: dict[str, float],
        state: dict[str, Any],
        model=None,
        tokenizer=None,
    ) -> Path | None:
        """With `save_best` set: best/ holds the model of the evaluation with the highest
        value of that metric so far (state.pt, model/ when given, best.json with the
        metric, value and step), replaced when an evaluation beats it. The evaluation
        before training (step 0) only checks the metric exists; a write that fails warns
        and training goes on. Returns best/ when it was written."""
        name = self.save_best_metric
        if name is None:
            return None
        named = {trackers.metric_name("eval", k): v for k, v in metrics.items()}
        if name not in named:
            choices = ", ".join(k for k, v in named.items() if isinstance(v, int | float))
            raise ValueError(
                f"save_best = {name!r} is not an evaluation metric; choices: {choices}"
            )
        value = float(named[name])
        best = self.best()
        if step == 0 or math.isnan(value) or (best is not None and value <= best["value"]):
            return None
        final, tmp, old = self.dir / BEST, self.dir / ".best.tmp", self.dir / ".best.old"
        try:
            _write_folder(tmp, state, model, tokenizer)
            record = {"metric": name, "value": value, "step": step}
            write_atomic(tmp / "best.json", json.dumps(record) + "\n")
            shutil.rmtree(old, ignore_errors=True)
            if final.exists():
                os.replace(final, old)
            os.replace(tmp, final)
            shutil.rmtree(old, ignore_errors=True)
        except OSError as err:
            shutil.rmtree(tmp, ignore_errors=True)
            log.warning("could not write the best model %s: %s; training continues", final, err)
            return None
        log.info("best %s so far: %.4g at step %d, saved in %s", name, value, step, final)
        return final

    def best(self) -> dict | None:
        """best/best.json ({"metric", "value", "step"}), or None before the first best."""
        path = self.dir / BEST / "best.json"
        return json.loads(path.read_text()) if path.is_file() else None

    def load_checkpoint(self) -> tuple[Path, dict[str, Any]] | None:
        """(folder, state) of the newest complete checkpoint; logs after it are dropped so
        the resumed run appends exactly where the checkpoint stopped."""
        path = self.latest_checkpoint()
        if path is None:
            return None
        state = load_state(path / "state.pt")
        step = int(state["step"])
        for name in ("metrics.jsonl", "samples.jsonl"):
            _keep_until(self.dir / name, step)
        self._purge_step = step + 1
        return path, state

    def _prune(self, keep: Path) -> None:
        steps = sorted(
            (p for p in (self.dir / CHECKPOINTS).glob("step_*") if p.is_dir()),
            key=lambda p: int(p.name.split("_")[1]),
        )
        if not self.keep:
            return
        for old in steps[: max(0, len(steps) - self.keep)]:
            if old != keep:
                shutil.rmtree(old, ignore_errors=True)

    # ---- outputs --------------------------------------------------------------------------
    def write_curves(self, keys: list[str], title: str = "") -> Path | None:
        """curves.png: one panel per metric key (train and eval rows) against steps."""
        rows = self.metrics()
        present = [k for k in keys if any(k in r for r in rows)]
        if not present:
            return None
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        cols = min(3, len(present))
        nrows = (len(present) + cols - 1) // cols
        fig, axes = plt.subplots(nrows, cols, figsize=(4.2 * cols, 3.0 * nrows), squeeze=False)
        for ax, key in zip(axes.flat, present, strict=False):
            points = [(r["step"], r[key]) for r in rows if key in r and r[key] is not None]
            ax.plot(
                [p[0] for p in points],
                [p[1] for p in points],
                marker="o" if len(points) < 30 else None,
                linewidth=1.2,
            )
            ax.set_title(key, fontsize=9)
            ax.set_xlabel("step", fontsize=8)
            ax.grid(alpha=0.3)
        for ax in list(axes.flat)[len(present) :]:
            ax.axis("off")
        if title:
            fig.suptitle(title, fontsize=10)
        fig.tight_layout()
        path = self.dir / "curves.png"
        fig.savefig(path.with_suffix(".tmp.png"), dpi=90)
        plt.close(fig)
        os.replace(path.with_suffix(".tmp.png"), path)
        return path

    def write_summary(self, text: str) -> None:
        write_atomic(self.dir / "summary.md", text)


def run_options(cfg) -> dict[str, Any]:
    """Run's options from a trainer's config: trackers, checkpoint retention, best model."""
    return {
        "report_to": cfg.report_to,
        "keep_checkpoints": cfg.keep_checkpoints,
        "save_best": cfg.save_best,
    }


def progress_bar(description: str, total: int, fields: dict[str, str], enabled: bool = True):
    """A rich progress bar with live fields (reward, accuracy, throughput, phase split)."""
    columns = [
        TextColumn("[bold]{task.description}"),
        BarColumn(bar_width=24),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    ]
    columns += [TextColumn(f"{label} {{task.fields[{key}]}}") for key, label in fields.items()]
    import sys

    from rich.console import Console

    # a log file or a pipe gets the final line at full width instead of a cut-off one
    console = Console(width=None if sys.stdout.isatty() else 160)
    return Progress(*columns, disable=not enabled, console=console)


def latest_checkpoint(run_dir: str | Path) -> Path | None:
    """The folder the run's `checkpoints/latest` names (None before its first checkpoint)."""
    pointer = Path(run_dir) / CHECKPOINTS / LATEST
    if not pointer.is_file():
        return None
    path = Path(run_dir) / CHECKPOINTS / pointer.read_text().strip()
    return path if path.is_dir() else None


def read_metrics(
    run_dir: str | Path, *, kind: str | None = None, drop: tuple[str, ...] = ()
) -> list[dict]:
    """The rows of a run folder's metrics.jsonl (of one `kind`, "train" or "eval", if given),
    without the keys that start with any prefix in `drop` (e.g. ("perf/",) for wall-clock
    columns, which never repeat between runs)."""
    rows = read_jsonl(Path(run_dir) / "metrics.jsonl")
    return [
        {k: v for k, v in r.items() if not (drop and k.startswith(drop))}
        for r in rows
        if kind is None or r.get("kind") == kind
    ]


def lr_lambda(cfg, total_updates: int):
    """Multiplier of the peak lr: linear warm-up over `cfg.warmup_steps` updates, then
    constant, linear decay to 0 or cosine decay to 0 (`cfg.schedule`)."""

    def factor(update: int) -> float:
        if update < cfg.warmup_steps:
            return (update + 1) / cfg.warmup_steps
        if cfg.schedule == "constant":
            return 1.0
        progress = min(1.0, (update - cfg.warmup_steps) / max(1, total_updates - cfg.warmup_steps))
        if cfg.schedule == "linear":
            return 1.0 - progress
        return 0.5 * (1.0 + math.cos(math.pi * progress))

    return factor


def mean_metrics(weighted: list[tuple[float, dict[str, float]]]) -> dict[str, float]:
    """Weighted mean of metric dicts (e.g. over micro-batches, weighted by tokens)."""
    total = sum(w for w, _ in weighted) or 1.0
    keys = {k for _, m in weighted for k in m}
    return {k: sum(w * m.get(k, 0.0) for w, m in weighted) / total for k in sorted(keys)}


def write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        tmp.write_text(text)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def provenance() -> dict[str, str]:
    from policylab.version import __version__

    info = {
        "policylab": __version__,
        "torch": str(torch.__version__),
        "python": platform.python_version(),
    }
    try:
        import transformers

        info["transformers"] = str(transformers.__version__)
    except ImportError:
        pass
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            cwd=Path(__file__).parent,
        )
        if sha.returncode == 0:
            info["git_sha"] = sha.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return info


def _write_folder(tmp: Path, state: dict[str, Any], model, tokenizer) -> None:
    """A checkpoint's files in the fresh folder `tmp`: model/ (a complete model folder,
    `policylab eval --model .../model`) when a model is given, and state.pt."""
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    if model is not None:
        model.save_pretrained(tmp / "model")
    if tokenizer is not None:
        tokenizer.save_pretrained(tmp / "model")
    with open(tmp / "state.pt", "wb") as f:  # a file object: write errors are OSError
        torch.save(state, f)


def _keep_until(path: Path, step: int | None) -> None:
    """Drop the rows of a JSONL file after `step` (all of them when None): what a resumed
    run's checkpoint does not cover."""
    if not path.exists():
        return
    if step is None:
        path.unlink()
        return
    kept = [row for row in read_jsonl(path) if row.get("step", 0) <= step]
    write_atomic(path, "".join(json.dumps(row) + "\n" for row in kept))


def _plain(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.item() if value.numel() == 1 else value.tolist()
    return value


def auto_threads(cpus: int, load: float, limit: int) -> int:
    """torch's intra-op threads for a run starting now (`threads="auto"`, our choice):
    the cores the other processes leave free, round(cpus − load), at least 1 and at most
    `limit` (the trainer's cap: torch's own count for a language model, 1 for control's
    tiny networks).

    Why: a parallel op waits for its slowest thread; with more threads than free cores a
    descheduled thread stalls every op for a scheduler slice, and OpenMP threads spin while
    they wait. On a 2-core machine at load ~6 two-thread torch ran ~28× slower than idle
    (issue 22), where one thread gets its fair share. One thread runs no OpenMP team at
    all, so the wait policy (spin or sleep) no longer matters; inter-op threads are left
    as torch sets them (the trainers run no inter-op parallel work, and torch allows
    setting them once per process only). The load is read once, at the start."""
    free = math.floor(cpus - load + 0.5)
    return max(1, min(limit, free))


def resolve_threads(threads: int | str, limit: int | None = None) -> int:
    """The thread count a run uses for its `threads` setting: n ≥ 1 as given; 0 torch's
    current count (untouched); "auto" `auto_threads` of os.cpu_count(), the 1-minute load
    average and `limit` (default: torch's current count, which OMP_NUM_THREADS or
    torch.set_num_threads set)."""
    if threads == "auto":
        limit = torch.get_num_threads() if limit is None else limit
        return auto_threads(os.cpu_count() or 1, os.getloadavg()[0], limit)
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 0:
        raise ValueError(f"threads={threads!r}; accepted: 'auto', 0 (torch's own) or n >= 1")
    return threads or torch.get_num_threads()


@contextlib.contextmanager
def torch_threads(n: int | str, limit: int | None = None):
    """torch's thread count set to `resolve_threads(n, limit)` inside the block (yielded),
    restored after."""
    before = torch.get_num_threads()
    chosen = resolve_threads(n, limit)
    if n == "auto":
        log.info("threads=auto: %d torch thread(s) (%d CPUs, load %.1f)", chosen,
                 os.cpu_count() or 1, os.getloadavg()[0])  # fmt: skip
    torch.set_num_threads(chosen)
    try:
        yield chosen
    finally:
        torch.set_num_threads(before)
