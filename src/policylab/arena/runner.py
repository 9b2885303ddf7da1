"""The arena runner: every algorithm × seed is an ordinary training run, side by side.

    policylab arena --task arithmetic --algos grpo,dr_grpo,rloo --seeds 3 --budget 3072
    policylab arena --task CartPole-v1 --algos ppo,pg_rainbow --seeds 3 --threshold 475
    policylab report runs/arena-arithmetic

Layout of an arena folder:

    <arena>/
      arena.json          the settings (task, algorithms, seeds, budget, overrides, ...)
      runs/<algo>-s<seed>/ one ordinary run folder each: open, resume or re-run it alone
      logs/<algo>-s<seed>.log  the run's console output (its error, if it failed)
      results.md, curves.png, report.html   written by arena/report.py

Each run is `policylab train` in its own process (`python -m policylab.cli`), so a
crashing run cannot take the others down and `--jobs` runs go in parallel, each with
cores/jobs torch threads. Re-running an arena continues it: a finished run (its
`arena_done.json`) is read, not trained again; a run with a checkpoint is resumed; any
other is started afresh.

Fair budgets. Control: the same number of environment steps (`total_steps`). Language
models: the same number of generated samples — `budget` / (prompts_per_step ×
samples_per_prompt) training steps for every algorithm, with the same prompts per step,
samples per prompt and max_new_tokens (an algorithm that discards or redraws samples is
charged for every sample it generated: the trainer counts them in `budget/samples`,
which is the curves' x axis, and stops at `max_samples` = the budget, so such a run trains
fewer steps). Generated tokens and wall-clock are reported beside.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from policylab.arena.decide import statistics_paragraphs
from policylab.arena.processes import Children
from policylab.arena.report import write_report
from policylab.arena.stats import AlgoSummary, RunRecord, summarize
from policylab.trainers.run import latest_checkpoint, read_metrics, write_atomic

SETTINGS = "arena.json"
DONE = "arena_done.json"

logger = logging.getLogger(__name__)


# the values a held-out score can take, by arena kind: accuracies lie in [0, 1]; the
# tabular score 1 − gap/gap₀ is at most 1 (a policy worse than the start is below 0);
# a control return has no bound the arena knows
SCORE_RANGES = {"llm": (0.0, 1.0), "agent": (0.0, 1.0), "tabular": (-math.inf, 1.0)}

AGENT_STEP_CAP = 1_000_000  # agent runs end at their token budget, long before this


@dataclass
class ArenaSpec:
    """What an arena runs; saved as arena.json so `policylab report` and a re-run read it."""

    task: str
    algos: list[str]
    seeds: list[int]
    budget: int  # env steps (control), samples (language models), tokens (agents), tabular units
    overrides: dict[str, Any] = field(default_factory=dict)
    baseline: str = ""  # default: the first algorithm
    threshold: float | None = None
    confidence: float = 0.95
    kind: str = ""  # "control", "llm", "agent" (a multi-turn task) or "tabular", from the task
    budget_unit: str = ""
    # the training field that carries the budget, and its value (steps / total_steps)
    budget_field: str = ""
    budget_value: int = 0
    plan: str = ""  # how the seeds were chosen (seeds="auto"), for the report

    def run_name(self, algo: str, seed: int) -> str:
        """The run folder's name: the --algos entry with characters that are unsafe in a
        path or a key=value override (spaces, braces, colons, slashes) replaced by _."""
        return re.sub(r"[^\w@=.,+-]", "_", algo) + f"-s{seed}"

    def differences(self, other: ArenaSpec) -> list[str]:
        """The settings that differ from `other` in ways that make their runs incomparable."""
        keys = ("task", "budget", "overrides", "kind")
        return [k for k in keys if getattr(self, k) != getattr(other, k)]


@dataclass
class ArenaResult:
    dir: Path
    spec: ArenaSpec
    records: list[RunRecord]
    summaries: list[AlgoSummary]
    report: dict[str, Path]
    trained: list[str]  # the runs this call trained or resumed (empty on a finished arena)
    statistics: list[str] = field(default_factory=list)  # power line, rliable table (decide.py)


def make_spec(
    task: str,
    algos: list[str] | str,
    seeds: int | list[int] = 3,
    *,
    budget: int | None = None,
    overrides: dict[str, Any] | None = None,
    baseline: str | None = None,
    threshold: float | None = None,
    confidence: float = 0.95,
) -> ArenaSpec:
    """Check the settings and turn the budget into the trainer's field; errors before any
    work (unknown algorithm, a budget that does not divide into whole steps, ...)."""
    from policylab import tasks
    from policylab.config import ControlConfig, TabularConfig, known_algorithm
    from policylab.routing import LAB_PREFIX, TABULAR_PREFIX, run_config

    algos = split_algos(algos) if isinstance(algos, str) else [a.strip() for a in algos]
    algos = [a for a in algos if a]
    if not algos:
        raise ValueError("an arena needs at least one algorithm (--algos a,b,...)")
    if len(set(algos)) != len(algos):
        raise ValueError(f"an algorithm appears twice in {algos}")
    # methods checked by TabularConfig (LabConfig) below
    tabular = str(task).startswith((TABULAR_PREFIX, LAB_PREFIX))
    for entry in algos:
        if not tabular:
            known_algorithm(parse_entry(entry)[0])
    seeds = _check_seeds(seeds)
    _check_budget(budget)
    if not 0 < confidence < 1:
        raise ValueError(f"confidence {confidence!r}: expected a level between 0 and 1, e.g. 0.95")
    if threshold is not None and not math.isfinite(threshold):
        raise ValueError(f"--threshold {threshold!r}: expected a finite score")
    baseline = baseline or algos[0]
    if baseline not in algos:
        raise ValueError(f"baseline {baseline!r} is not among the algorithms {algos}")
    overrides = dict(overrides or {})
    reserved = {"algo", "seed", "run_dir", "task", "progress", "steps", "total_steps"}
    reserved |= {"max_samples", "max_tokens", "budget"}
    clash = sorted(reserved & {k for a in algos for k in [*overrides, *parse_entry(a)[1]]})
    if clash:
        raise ValueError(f"the arena sets {', '.join(clash)} itself (use --budget for the budget)")
    spec = ArenaSpec(task, algos, seeds, 0, overrides, baseline, threshold, confidence)
    folders: dict[str, str] = {}
    for entry in algos:  # two entries in one run folder would write over each other
        other = folders.setdefault(spec.run_name(entry, 0), entry)
        if other != entry:
            raise ValueError(
                f"--algos entries {other!r} and {entry!r} share the run folder name "
                f"{spec.run_name(entry, 0)!r} (characters other than letters, digits and "
                "@=.,+- become _); make them differ in those characters"
            )
    # every run's config is built (by the one routing rule) and checked before anything runs
    configs = [
        run_config(None, {**overrides, **variant, "task": task, "algo": algo})
        for algo, variant in (
            (name, method_options_of(fields) if tabular else fields)
            for name, fields in map(parse_entry, algos)
        )
    ]
    cfg = configs[-1]
    if isinstance(cfg, TabularConfig):
        # every run is a seeded instance; the budget is the task's unit (gradient
        # evaluations, episodes, trajectories), the score 1 − gap/gap₀ from the exact oracle
        from policylab.trainers.tabular import catalogue

        _, build = catalogue(cfg)
        spec.kind, spec.budget_field = "tabular", "budget"
        spec.budget_unit = build(cfg.task, 0, **cfg.knobs).budget_unit
        spec.budget = cfg.budget if budget is None else budget
        spec.budget_value = spec.budget
        return spec
    if isinstance(cfg, ControlConfig):
        spec.kind, spec.budget_unit, spec.budget_field = "control", "env steps", "total_steps"
        spec.budget = cfg.total_steps if budget is None else budget
        spec.budget_value = spec.budget
        # equal env steps: a run stops after whole iterations of num_envs × num_steps, so
        # algorithms with different batches (ppo's 1000, a2c's 20) would train unequally
        batches = {c.algo: c.num_envs * c.num_steps for c in configs}
        trained = {a: spec.budget // b * b for a, b in batches.items()}
        if len(set(trained.values())) > 1:
            step = math.lcm(*batches.values())
            raise ValueError(
                f"a budget of {spec.budget} env steps trains "
                + ", ".join(f"{a} for {t} (batch {batches[a]})" for a, t in trained.items())
                + f": not equal; use a multiple of {step}, e.g. "
                f"{max(step, spec.budget // step * step)}"
            )
        return spec
    if hasattr(tasks.get(cfg.task, **cfg.task_knobs), "env"):
        # agents: equal generated tokens (trees and several roles make "samples"
        # incomparable, papers/seed_agents.md §A0.3); `steps` only caps the run
        spec.kind, spec.budget_unit, spec.budget_field = "agent", "generated tokens", "steps"
        if budget is None:
            raise ValueError("an arena on a multi-turn task needs --budget (generated tokens)")
        if cfg.schedule != "constant":
            raise ValueError(
                f"schedule={cfg.schedule}: an agent arena ends each run at its token budget, "
                "so the number of steps (the schedule's length) differs between methods; use "
                "the constant schedule"
            )
        spec.budget, spec.budget_value = budget, AGENT_STEP_CAP
        return spec
    spec.kind, spec.budget_unit, spec.budget_field = "llm", "generated samples", "steps"
    per_step = cfg.prompts_per_step * cfg.samples_per_prompt
    spec.budget = cfg.steps * per_step if budget is None else budget
    if spec.budget % per_step:
        raise ValueError(
            f"budget {spec.budget} is not a whole number of steps of {cfg.prompts_per_step} "
            f"prompts × {cfg.samples_per_prompt} samples = {per_step}"
        )
    spec.budget_value = spec.budget // per_step
    return spec


def split_algos(text: str) -> list[str]:
    """The entries of an --algos list: split at the commas that are outside brackets and
    quotes, so a variant's list value stays whole (`grpo,grpo@stop_strings=[a, b]` is two
    entries)."""
    entries, depth, quote, start = [], 0, "", 0
    for i, char in enumerate(text):
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char in "[{(":
            depth += 1
        elif char in "]})":
            depth = max(0, depth - 1)
        elif char == "," and depth == 0:
            entries.append(text[start:i].strip())
            start = i + 1
    return [*entries, text[start:].strip()]


def _check_seeds(seeds: int | list[int]) -> list[int]:
    """--seeds N (seeds 0 .. N-1) or a list of distinct non-negative seeds."""
    if isinstance(seeds, bool) or not isinstance(seeds, (int, list, tuple, range)):
        raise ValueError(f"seeds {seeds!r}: expected a number of seeds or a list of seeds")
    if isinstance(seeds, int):
        if seeds < 1:
            raise ValueError(
                f"--seeds {seeds}: an arena needs at least one seed (--seeds N runs seeds "
                "0 .. N-1 of every algorithm)"
            )
        return list(range(seeds))
    seeds = list(seeds)
    bad = [s for s in seeds if isinstance(s, bool) or not isinstance(s, int) or s < 0]
    if not seeds or bad:
        raise ValueError(f"seeds {seeds!r}: expected at least one non-negative whole number")
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds {seeds!r}: a seed appears twice")
    return seeds


def _check_budget(budget: int | None) -> None:
    """None is the trainer's default; anything else a positive whole number."""
    if budget is None:
        return
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
        raise ValueError(
            f"--budget {budget!r}: expected a positive whole number (environment steps, "
            "generated samples or tokens, or the tabular task's unit per run), or no "
            "--budget for the trainer's default"
        )


def _check_jobs(jobs: int) -> None:
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"--jobs {jobs!r}: expected the number of runs in parallel, 1 or more")


def _check_ray(ray: bool | str) -> None:
    """False, True (a local cluster) or an address; with Ray installed, before any work."""
    if ray is False:
        return
    if ray is not True and not (isinstance(ray, str) and ray.strip()):
        raise ValueError(
            f"ray={ray!r}: expected True (a local Ray cluster) or a cluster's address "
            '("auto", "ray://head:10001")'
        )
    from policylab.ray_cluster import import_ray

    import_ray()


def arena(
    task: str,
    algos: list[str] | str,
    seeds: int | list[int] | str | None = None,
    *,
    budget: int | None = None,
    jobs: int = 1,
    overrides: dict[str, Any] | None = None,
    baseline: str | None = None,
    threshold: float | None = None,
    confidence: float = 0.95,
    out_dir: str | Path | None = None,
    progress: bool = True,
    min_effect: float | None = None,
    pilot_seeds: int = 5,
    max_seeds: int = 30,
    ray: bool | str = False,
) -> ArenaResult:
    """Run (or continue) an arena and write its report; returns the records, the table's
    rows and the report's paths. Usable from a notebook as from `policylab arena`.

    ray=True runs every algorithm × seed as a Ray task on a local cluster of `jobs` runs'
    worth of CPUs; ray="auto" or "ray://host:10001" on that cluster (arena/ray_backend.py).
    The runs, their folders and the report are the same as without Ray.

    seeds="auto" sizes the arena by power: a pilot of `pilot_seeds` seeds, then as many
    seeds (up to `max_seeds`) as a paired t test needs to detect a difference of
    `min_effect` in final score at 80 % power, α = 1 − confidence, planning with the
    noisiest comparison's SD (`policylab.arena.power`). Without `seeds`: "auto" when a
    `min_effect` is given, else 3."""
    _check_jobs(jobs)
    _check_ray(ray)
    if seeds is None:
        seeds = 3 if min_effect is None else "auto"
    if seeds == "auto":
        return _auto_seeds(
            task,
            algos,
            budget=budget,
            jobs=jobs,
            overrides=overrides,
            baseline=baseline,
            threshold=threshold,
            confidence=confidence,
            out_dir=out_dir,
            progress=progress,
            min_effect=min_effect,
            pilot_seeds=pilot_seeds,
            max_seeds=max_seeds,
            ray=ray,
        )
    if min_effect is not None:
        raise ValueError(
            "min_effect sizes an arena with seeds='auto' (--seeds auto); "
            f"with --seeds {seeds!r} it would be ignored"
        )
    spec = make_spec(
        task,
        algos,
        seeds,
        budget=budget,
        overrides=overrides,
        baseline=baseline,
        threshold=threshold,
        confidence=confidence,
    )
    folder = Path(out_dir or default_folder(task))
    _save_spec(folder, spec)
    trained = _run_all(folder, spec, jobs, progress, ray)
    return report(folder, trained=trained)


def _auto_seeds(
    task: str,
    algos: list[str] | str,
    *,
    min_effect: float | None,
    pilot_seeds: int,
    max_seeds: int,
    out_dir: str | Path | None,
    **kwargs: Any,
) -> ArenaResult:
    """The pilot, the power calculation, then the seeds it asks for (see `arena`)."""
    from policylab.arena.decide import check_sizing, seeds_plan

    check_sizing(min_effect, pilot_seeds, max_seeds)
    folder = Path(out_dir or default_folder(task))
    pilot = arena(task, algos, pilot_seeds, out_dir=folder, **kwargs)
    n, text = seeds_plan(
        pilot.records,
        pilot.spec.baseline,
        pilot.spec.budget,
        pilot.spec.confidence,
        min_effect=min_effect,
        pilot_seeds=pilot_seeds,
        max_seeds=max_seeds,
    )
    logger.info("arena seeds %s", text)
    spec = load_spec(folder)
    spec.plan = text
    write_atomic(folder / SETTINGS, json.dumps(asdict(spec), indent=2) + "\n")
    if n <= len(spec.seeds):
        return report(folder, trained=pilot.trained)
    return arena(task, algos, n, out_dir=folder, **kwargs)


def folder_name(task: str) -> str:
    """A task's name as one path component (tabular/x → tabular_x)."""
    return task.replace("/", "_").replace(os.sep, "_")


def default_folder(task: str) -> Path:
    """An arena's folder when --out is not given: runs/arena-<task>."""
    return Path("runs") / f"arena-{folder_name(task)}"


def report(arena_dir: str | Path, *, trained: list[str] | None = None) -> ArenaResult:
    """Read every run of an arena folder and (re)write results.md, curves.png, report.html."""
    folder = Path(arena_dir)
    spec = load_spec(folder)
    records = [read_record(folder, spec, algo, seed) for algo in spec.algos for seed in spec.seeds]
    from policylab.lab import PREFIX as LAB_PREFIX

    score_range = SCORE_RANGES.get(spec.kind)
    if str(spec.task).startswith(LAB_PREFIX):  # a lab task's optimum may be the best value
        score_range = None  # known (HGAM's script, MB-PG's oracle): a policy can pass it
    summaries = summarize(
        records, spec.baseline, spec.threshold, spec.budget, spec.confidence, score_range
    )
    meta = {
        "command": command_line(folder, spec),
        "budget": f"{spec.budget:,} {spec.budget_unit} per run "
        f"({spec.budget_field}={spec.budget_value})",
        "seeds": ", ".join(map(str, spec.seeds)) + (f" ({spec.plan})" if spec.plan else ""),
    }
    tokens = _tokens_line(records, spec)
    if tokens:
        meta["generated tokens"] = tokens
    statistics = statistics_paragraphs(records, spec.baseline, spec.budget, spec.confidence)
    paths = write_report(
        folder,
        records,
        task=spec.task,
        baseline=spec.baseline,
        threshold=spec.threshold,
        budget=spec.budget,
        confidence=spec.confidence,
        meta=meta,
        score_range=score_range,
        extra=statistics,
    )
    return ArenaResult(folder, spec, records, summaries, paths, trained or [], statistics)


# ---- settings ---------------------------------------------------------------------------
def _save_spec(folder: Path, spec: ArenaSpec) -> None:
    path = folder / SETTINGS
    if path.exists():
        saved = load_spec(folder)
        differ = spec.differences(saved)
        if differ:
            raise ValueError(
                f"{folder} holds an arena with different {', '.join(differ)}; its runs would "
                f"not be comparable: choose another --out, or delete the folder"
            )
        # more algorithms or seeds extend the arena; the old ones stay in the report
        spec.algos = saved.algos + [a for a in spec.algos if a not in saved.algos]
        spec.seeds = saved.seeds + [s for s in spec.seeds if s not in saved.seeds]
        spec.plan = spec.plan or saved.plan
    folder.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(asdict(spec), indent=2) + "\n")


def load_spec(folder: str | Path) -> ArenaSpec:
    path = Path(folder) / SETTINGS
    if not path.is_file():
        raise FileNotFoundError(f"{folder}: no {SETTINGS}; is it an arena folder?")
    return ArenaSpec(**json.loads(path.read_text()))


def command_line(folder: Path, spec: ArenaSpec) -> str:
    """The command that reproduces (or continues) this arena, each argument shell-quoted:
    pasted into a shell, it passes the task, the entries and the fields as they are and
    runs nothing else (a variant's `$(...)` or spaces stay text)."""
    args = ["--task", spec.task, "--algos", ",".join(spec.algos)]
    if spec.seeds == list(range(len(spec.seeds))):
        args += ["--seeds", str(len(spec.seeds))]
    args += ["--budget", str(spec.budget)]
    if spec.baseline != spec.algos[0]:
        args += ["--baseline", spec.baseline]
    if spec.threshold is not None:
        args += ["--threshold", _number(spec.threshold)]
    args += ["--out", str(folder)]
    args += [f"{k}={_text(v)}" for k, v in spec.overrides.items()]
    return "policylab arena " + shlex.join(args)


def _number(value: float) -> str:
    """Short when exact (475, not 475.0), else every digit."""
    short = f"{value:g}"
    return short if float(short) == value else repr(value)


def _text(value: Any) -> str:
    """A field's value as a key=value override reads it back (YAML): plain when that gives
    the same value, JSON otherwise (the string "true", lists, mappings, None)."""
    plain = str(value)
    try:
        if not isinstance(value, (list, dict)) and yaml.safe_load(plain) == value:
            return plain
    except yaml.YAMLError:
        pass
    return json.dumps(value)


def parse_entry(entry: str) -> tuple[str, dict[str, Any]]:
    """An --algos entry: a named algorithm, or a variant of one with its own fields,
    `name@key=value@key=value` (e.g. `ppo@clip_schedule=linear`), compared like any other
    algorithm under its full label."""
    from policylab.config import parse_overrides

    name, *fields = entry.split("@")
    bad = [f for f in fields if "=" not in f]
    if bad:
        raise ValueError(f"{entry!r}: expected name@key=value, got {', '.join(bad)!r}")
    return name, parse_overrides(fields)


def method_options_of(variant: dict[str, Any]) -> dict[str, Any]:
    """A tabular or lab variant's fields with every key that is not a run field moved into
    `options` (the method checks them and names its accepted options)."""
    from policylab.config import TabularConfig

    run_fields = set(TabularConfig.model_fields)
    options = {k: v for k, v in variant.items() if k not in run_fields}
    if not options:
        return variant
    kept = {k: v for k, v in variant.items() if k in run_fields}
    return {**kept, "options": {**kept.get("options", {}), **options}}


# ---- running ----------------------------------------------------------------------------
def run_config_of(folder: Path, spec: ArenaSpec, algo: str, seed: int):
    """The checked config (a TrainConfig or ControlConfig, by the routing rule) of one
    run: the arena's overrides, the entry's variant fields, its budget, seed and folder."""
    from policylab.routing import run_config

    name, variant = parse_entry(algo)
    if spec.kind == "tabular":  # `dgpo@clip=0`: a key that is no run field is a method option
        variant = method_options_of(variant)
    fields = {**spec.overrides, **variant, spec.budget_field: spec.budget_value}
    if spec.kind == "llm":  # a run that redraws groups stops at the same sample budget
        fields["max_samples"] = spec.budget
    if spec.kind == "agent":  # every agent run stops at the same generated-token budget
        fields["max_tokens"] = spec.budget
    run_dir = folder / "runs" / spec.run_name(algo, seed)
    fields.update(task=spec.task, algo=name, seed=seed, run_dir=str(run_dir), progress=False)
    return run_config(None, fields)


def run_command(folder: Path, spec: ArenaSpec, algo: str, seed: int) -> list[str]:
    """The process for one run (`algo` is an --algos entry, with its variant fields if
    any): its config object, written to `configs/<run>.yaml` (process isolation, no field
    names on a command line), resumed from its checkpoint when it has one."""
    run_dir = folder / "runs" / spec.run_name(algo, seed)
    cfg = run_config_of(folder, spec, algo, seed)
    path = folder / "configs" / f"{spec.run_name(algo, seed)}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False))
    cmd = [sys.executable, "-m", "policylab.cli", "train", "--config", str(path)]
    return cmd + (["--resume", str(run_dir)] if latest_checkpoint(run_dir) is not None else [])


def log_path(folder: Path, spec: ArenaSpec, algo: str, seed: int) -> Path:
    """A run's console output; beside it `<run>.failed` (the exit code) when it failed."""
    return folder / "logs" / f"{spec.run_name(algo, seed)}.log"


def run_one(
    folder: Path, spec: ArenaSpec, algo: str, seed: int, threads: int, children: Children
) -> int | None:
    """Train one run in its own process; its exit code (0: done), None if the arena was
    stopped meanwhile (the run stays partial: neither done nor failed). What a run is,
    wherever it executes: a Ray task (ray_backend.py) calls this on its worker."""
    if children.stopped:
        return None
    name = spec.run_name(algo, seed)
    run_dir = folder / "runs" / name
    cmd = run_command(folder, spec, algo, seed)
    if latest_checkpoint(run_dir) is None and run_dir.exists():
        shutil.rmtree(run_dir)  # started but never checkpointed: start again from nothing
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    log = log_path(folder, spec, algo, seed)
    log.parent.mkdir(parents=True, exist_ok=True)
    failed = log.with_suffix(".failed")
    failed.unlink(missing_ok=True)
    started = time.perf_counter()
    with log.open("a") as out:
        out.write(f"$ {shlex.join(cmd)}\n")
        out.flush()
        code = children.run(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
    if code == 0:
        done = {"seconds": time.perf_counter() - started, "command": shlex.join(cmd)}
        (run_dir / DONE).write_text(json.dumps(done) + "\n")
    elif code is not None:
        failed.write_text(f"{code}\n")
    return code


def _run_all(
    folder: Path, spec: ArenaSpec, jobs: int, progress: bool, ray: bool | str = False
) -> list[str]:
    """Train every unfinished run, `jobs` at a time, with one progress line per run. If
    the arena is interrupted (Ctrl-C) or fails, its running children are ended and waited
    for before the exception goes on, so a re-run never meets a run still being written.
    Runs go seed by seed (every algorithm's seed 0, then seed 1, ...), so an arena stopped
    early, or extended to more seeds, has all its algorithms on the same seeds. With `ray`
    each run is a Ray task (ray_backend.py) running the same `run_one` on its worker."""
    todo = [
        (algo, seed)
        for seed in spec.seeds
        for algo in spec.algos
        if not (folder / "runs" / spec.run_name(algo, seed) / DONE).is_file()
    ]
    if not todo:
        return []
    jobs = max(1, min(jobs, len(todo)))
    threads = max(1, (os.cpu_count() or 1) // jobs)
    if ray:
        from policylab.arena.ray_backend import RayRuns

        # the driver's threads only wait on Ray, which decides how many runs fit at once
        address = None if ray is True else ray
        what = dict(run=run_one, config_of=run_config_of, log_of=log_path)
        with RayRuns(address, local_cpus=jobs * threads, **what) as runs:
            _train_in_pool(folder, spec, todo, threads, progress, runs.run_one, runs, len(todo))
    else:
        _train_in_pool(folder, spec, todo, threads, progress, run_one, Children(), jobs)
    return [spec.run_name(a, s) for a, s in todo]


def _train_in_pool(
    folder: Path,
    spec: ArenaSpec,
    todo: list[tuple[str, int]],
    threads: int,
    progress: bool,
    run: Callable[..., int | None],
    children: Children,
    workers: int,
) -> None:
    """`run(folder, spec, algo, seed, threads, children)` for every run of `todo`, from
    `workers` threads; on an interruption or an error, `children.stop()` ends the runs."""
    pool = ThreadPoolExecutor(max_workers=workers)
    try:
        _train_todo(folder, spec, todo, threads, progress, pool, children, run)
    except BaseException:
        children.stop()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _train_todo(
    folder: Path,
    spec: ArenaSpec,
    todo: list[tuple[str, int]],
    threads: int,
    progress: bool,
    pool: ThreadPoolExecutor,
    children: Children,
    run: Callable[..., int | None],
) -> None:
    from policylab.trainers.run import progress_bar

    fields = {"at": "at", "score": "held-out"}
    title = f"arena · {spec.task}"
    total = spec.budget
    with progress_bar(title, len(todo), fields, progress) as bar:
        overall = bar.add_task(f"{len(todo)} runs", total=len(todo), at="", score="")
        rows = {}
        futures: dict[Future, tuple[str, int]] = {}
        for algo, seed in todo:
            future = pool.submit(run, folder, spec, algo, seed, threads, children)
            futures[future] = (algo, seed)
            rows[(algo, seed)] = bar.add_task(
                spec.run_name(algo, seed), total=total, at="queued", score=""
            )
        pending, finished = set(futures), 0
        while pending:
            time.sleep(1.0)
            for future in [f for f in pending if f.done()]:
                pending.discard(future)
                algo, seed = futures[future]
                name = spec.run_name(algo, seed)
                status = "done" if future.result() == 0 else "FAILED"
                _, score = _latest(folder / "runs" / name, spec)
                bar.update(rows[(algo, seed)], at=status)
                bar.advance(overall)
                finished += 1
                if progress:  # one line per run, also in a log file
                    bar.console.print(
                        f"[{finished}/{len(todo)}] {name} {status}"
                        + ("" if score is None else f", held-out {score:.3g}")
                        + ("" if status == "done" else f" (see logs/{name}.log)")
                    )
            for future in pending:
                if future.running():
                    algo, seed = futures[future]
                    x, score = _latest(folder / "runs" / spec.run_name(algo, seed), spec)
                    bar.update(
                        rows[(algo, seed)],
                        completed=x,
                        at=f"{x:,.0f}",
                        score="" if score is None else f"{score:.3g}",
                    )


# ---- reading runs back ------------------------------------------------------------------
def _axes(spec: ArenaSpec) -> tuple[str, str]:
    """(budget key, score key) of a run's evaluation rows."""
    if spec.kind == "control":
        return "env_steps", "eval/return_mean"
    if spec.kind == "agent":
        return "budget/tokens", "eval/greedy_accuracy"
    if spec.kind == "tabular":
        return "budget/spent", "eval/score"
    return "budget/samples", "eval/greedy_accuracy"


def _latest(run_dir: Path, spec: ArenaSpec) -> tuple[float, float | None]:
    """Budget spent and last held-out score of a run in progress (for the progress bar)."""
    rows = read_metrics(run_dir)
    x_key, score_key = _axes(spec)
    train = [r for r in rows if r.get("kind") != "eval" and x_key in r]
    evals = [r for r in rows if r.get("kind") == "eval"]
    return (
        float(train[-1][x_key]) if train else 0.0,
        float(evals[-1][score_key]) if evals else None,
    )


def read_record(folder: Path, spec: ArenaSpec, algo: str, seed: int) -> RunRecord:
    """One run's curve (budget spent, held-out score at each evaluation) and status: done
    (finished), failed (its last attempt exited non-zero; the log's last lines are the
    error), or partial (interrupted, or not started yet)."""
    name = spec.run_name(algo, seed)
    run_dir = folder / "runs" / name
    x_key, score_key = _axes(spec)
    evals = read_metrics(run_dir, kind="eval")
    curve = _curve(evals, x_key, score_key)
    seconds = max((r.get("time/elapsed_s", 0.0) for r in evals), default=0.0)
    record = RunRecord(algo, seed, "done", curve, seconds, spec.budget_unit, run_dir=str(run_dir))
    log = log_path(folder, spec, algo, seed)
    if log.with_suffix(".failed").is_file():
        record.status, record.error = "failed", _last_error(log)
    elif not ((run_dir / DONE).is_file() and curve):
        record.status = "partial"
    return record


def _curve(evals: list[dict], x_key: str, score_key: str) -> list[tuple[float, float]]:
    """(budget, score) per evaluation. The evaluation at step 0 is the one before training,
    so it sits at x = 0 even when the run spent budget before its first step (offline data,
    sampled up front); evaluations at the same budget keep the last one (an offline run's
    training spends nothing more, so its curve is the step from the untrained score to the
    final one)."""
    points: dict[float, float] = {}
    for r in evals:
        if x_key in r:
            points[0.0 if r.get("step") == 0 else float(r[x_key])] = float(r[score_key])
    return sorted(points.items())


def _last_error(log: Path) -> str:
    """The last non-empty lines of a run's console output (its traceback's end)."""
    lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
    return " / ".join(lines[-3:])[-500:] if lines else "no output"


def _tokens_line(records: list[RunRecord], spec: ArenaSpec) -> str:
    """Mean generated tokens per run, per algorithm (language models)."""
    if spec.kind != "llm":
        return ""
    parts = []
    for algo in spec.algos:
        done = [
            max(row.get("budget/tokens", 0) for row in read_metrics(r.run_dir, kind="eval"))
            for r in records
            if r.algo == algo and r.status == "done"
        ]
        if done:
            parts.append(f"{algo} {sum(done) / len(done):,.0f}")
    return "mean per run: " + ", ".join(parts) if parts else ""
