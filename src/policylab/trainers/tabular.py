"""The tabular trainer: a registered method on a seeded instance with an exact oracle,
one loop, read top to bottom (papers/seed_control_theory.md §0.2, docs/theory.md).

Per step: the method's step (an exact gradient and its update, or a sampled estimate, or
one fitted iteration) → metrics → every `eval_every` steps the oracle scores the policy:
`eval/score` = 1 − gap/gap₀, `oracle/gap` = optimum − value, where the value is the one
the task defines (nominal, robust, soft-robust, finite-horizon) → checkpoint. The run
stops when it has spent `budget` in the task's unit, or at `stop_gap`. The run folder,
checkpoints and resume are trainers/run.py's, as for the other trainers.

A lab run (`lab/<name>`, a `LabConfig`; policylab/lab) is the same loop over the lab
registries: its method's state may hold networks, which its `checkpoint` and `restore`
turn into tensors and back."""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

import torch

from policylab.config import LabConfig, TabularConfig
from policylab.trainers.run import Run, progress_bar, torch_threads

CURVES = ["eval/score", "oracle/gap", "oracle/value", "grad/norm", "inner/iterations"]


@dataclass
class TabularResult:
    run_dir: str
    evals: list[dict]
    spent: int
    seconds: float
    optimum: float


def train(cfg: TabularConfig, *, resume: bool = False) -> TabularResult:
    """Run `cfg.algo` on `cfg.task`'s instance `cfg.seed` (module docstring)."""
    with torch_threads(cfg.torch_threads):
        return _train(cfg, resume)


def catalogue(cfg: TabularConfig):
    """(methods, build) of the run's kind: the lab registries for a LabConfig, else the
    tabular ones."""
    if isinstance(cfg, LabConfig):
        from policylab.lab.catalogue import build, lab_methods

        return lab_methods, build
    from policylab.tabular.catalogue import build, tabular_methods

    return tabular_methods, build


def _train(cfg: TabularConfig, resume: bool) -> TabularResult:
    methods, build = catalogue(cfg)
    method = methods.get(cfg.algo)
    options = method.build_options(cfg.options)  # an unknown option fails before the folder
    problem = build(cfg.task, cfg.seed, **cfg.knobs)
    generator = torch.Generator().manual_seed(cfg.seed)
    state = method.init(problem, options, generator)
    if method.own_start:  # the score's zero is where this method starts
        problem.initial = float(problem.value(method.policy(problem, state)))
    resolved = {
        "options": dataclasses.asdict(options),
        "budget_unit": problem.budget_unit,
        "optimum": problem.optimum,
        "initial_value": problem.initial,
    }
    run = Run(cfg.folder, {**cfg.model_dump(), "resolved": resolved}, resume=resume)
    step, spent, evals, elapsed_before = 0, 0, [], 0.0
    restored = run.load_checkpoint() if resume else None
    if restored is not None:
        _, saved = restored
        state, step, spent = saved["method"], saved["step"], saved["spent"]
        if method.restore is not None:
            state = method.restore(problem, options, state)
        evals, elapsed_before = saved["evals"], saved["elapsed_s"]
        generator.set_state(saved["generator"])
    started = time.perf_counter()

    def elapsed() -> float:
        return elapsed_before + time.perf_counter() - started

    def evaluation() -> dict:
        pi = method.policy(problem, state)
        value = float(problem.value(pi))
        row = {
            "eval/score": problem.score(pi),
            "oracle/gap": problem.optimum - value,
            "oracle/value": value,
            "budget/spent": spent,
            "time/elapsed_s": elapsed(),
        }
        run.log(step, row, kind="eval")
        evals.append({"step": step, **row})
        return row

    if step == 0:
        evaluation()
    title = f"{cfg.algo} on {cfg.task} (seed {cfg.seed})"
    fields = {"gap": "gap", "unit": problem.budget_unit}
    with progress_bar(title, cfg.budget, fields, cfg.progress) as bar:
        job = bar.add_task(title, total=cfg.budget, completed=spent, gap="", unit="")
        stop = cfg.stop_gap is not None and evals[-1]["oracle/gap"] <= cfg.stop_gap
        while spent < cfg.budget and not stop:
            # 1. one method step: its metrics say what it spent
            t0 = time.perf_counter()
            state, metrics = method.step(problem, state, options, generator)
            step += 1
            spent += int(metrics.pop("cost"))
            run.log(
                step, {"budget/spent": spent, "time/step_s": time.perf_counter() - t0, **metrics}
            )
            # 2. the oracle's score, every eval_every steps and at the end
            last = spent >= cfg.budget
            if last or step % cfg.eval_every == 0:
                row = evaluation()
                stop = cfg.stop_gap is not None and row["oracle/gap"] <= cfg.stop_gap
            # 3. checkpoint: tensors and plain numbers only
            if last or stop or (cfg.save_every and step % cfg.save_every == 0):
                run.save_checkpoint(
                    step,
                    {
                        "step": step,
                        "spent": spent,
                        "method": state if method.checkpoint is None else method.checkpoint(state),
                        "generator": generator.get_state(),
                        "evals": evals,
                        "elapsed_s": elapsed(),
                    },
                )
            bar.update(job, completed=min(spent, cfg.budget), gap=f"{evals[-1]['oracle/gap']:.3g}")

    run.write_curves(CURVES, title=title)
    run.write_summary(summary(cfg, problem, evals, spent, elapsed()))
    run.close()
    return TabularResult(str(run.dir), evals, spent, elapsed(), problem.optimum)


def summary(cfg: TabularConfig, problem, evals: list[dict], spent: int, seconds: float) -> str:
    first, last = evals[0], evals[-1]
    # a lab task's optimum may be a bound or the best value known (DISK, HGAM's script)
    best = "the best value known" if isinstance(cfg, LabConfig) else "the exact optimum"
    return "\n".join(
        [
            f"# {cfg.algo} on {cfg.task} (seed {cfg.seed})",
            "",
            f"| | value | gap to {best} | score |",
            "|---|---|---|---|",
            f"| start | {first['oracle/value']:.6g} | {first['oracle/gap']:.3g} | "
            f"{first['eval/score']:.4f} |",
            f"| end | {last['oracle/value']:.6g} | {last['oracle/gap']:.3g} | "
            f"{last['eval/score']:.4f} |",
            "",
            f"{best[4:].capitalize()} {problem.optimum:.6g}; spent {spent} "
            f"{problem.budget_unit} in {seconds:.1f} s.",
            "",
        ]
    )
