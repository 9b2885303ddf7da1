"""The `policylab` command: parses arguments and calls the Python API.

policylab list                  registered components and named algorithms
policylab describe NAME         an algorithm's formula, paper and every default with its source
policylab bandit                every algorithm on the softmax bandit (the current demo)
policylab solve --testtime NAME a test-time method (LatentSeek, DMLR-text) on one input
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from policylab import recipes as recipe_book
from policylab.describe import print_catalogue, print_description


def _bandit(console: Console, args: argparse.Namespace) -> int:
    from policylab.bandit import BanditConfig, run_bandit

    one_step = [n for n in recipe_book.names() if not recipe_book.get(n).workflow_options]
    algos = args.algos.split(",") if args.algos else one_step  # agent recipes play episodes
    unknown = [a for a in algos if a not in recipe_book.recipes]
    if unknown:
        console.print(
            f"[red]unknown algorithm(s) {', '.join(unknown)}[/red]; "
            f"choices: {', '.join(recipe_book.names())}"
        )
        return 2
    cfg = BanditConfig(steps=args.steps, states=args.states)
    console.print(
        f"Softmax bandit: {cfg.states} state(s), arms {cfg.arm_probs}, "
        f"{cfg.prompts_per_step} groups × "
        f"{cfg.samples_per_prompt} samples per step, {cfg.steps} steps, {cfg.minibatches} "
        f"minibatches, Adam lr {cfg.lr}, seeds 0..{args.seeds - 1}"
    )
    table = Table(title=f"P(best arm) after {cfg.steps} steps", title_justify="left")
    columns = ("algorithm", "P(best arm), mean [min, max]", f"steps to {cfg.target}", "samples")
    for col in (*columns, "seconds"):
        table.add_column(col)
    for algo in algos:
        results = [run_bandit(algo, cfg, seed=s) for s in range(args.seeds)]
        probs = [r.best_arm_prob for r in results]
        steps = [r.steps_to_target for r in results]
        shown = ", ".join("—" if s is None else str(s) for s in steps)
        table.add_row(
            algo,
            f"{sum(probs) / len(probs):.3f} [{min(probs):.3f}, {max(probs):.3f}]",
            shown,
            f"{sum(r.samples for r in results) / len(results):.0f}",
            f"{sum(r.seconds for r in results):.1f}",
        )
    console.print(table)
    return 0


def _train(console: Console, args: argparse.Namespace) -> int:

    from policylab import routing
    from policylab.config import ControlConfig, TabularConfig, parse_overrides
    from policylab.config_offpolicy import OffPolicyConfig
    from policylab.trainers.run_safety import RunFolderError

    overrides = parse_overrides(args.overrides)
    for flag in ("algo", "task", "model"):
        if getattr(args, flag) is not None:
            overrides[flag] = getattr(args, flag)
    saved: dict = {}
    if args.resume:
        saved = routing.saved_config(args.resume)
        if not saved:
            raise FileNotFoundError(
                f"--resume {args.resume}: no config.yaml there; is it a run folder?"
            )
        saved["run_dir"] = args.resume
    cfg = routing.run_config(args.config, overrides, saved=saved)
    try:  # a run folder that cannot be written (disk full, read-only) stops the run
        result = routing.train(cfg, resume=bool(args.resume))
    except RunFolderError as err:
        console.print(f"[red]error:[/red] {escape(str(err))}")
        return 2
    if isinstance(cfg, ControlConfig | OffPolicyConfig):
        return _report_control(console, cfg, result)
    if isinstance(cfg, TabularConfig):
        return _report_tabular(console, cfg, result)
    if not hasattr(result, "before"):  # a test-time method: scored, nothing trained
        return _report_testtime(console, cfg, result)
    table = Table(title=f"held-out {cfg.task} ({cfg.eval_n} test examples)", title_justify="left")
    for col in ("", "before", "after"):
        table.add_column(col)
    for key in ("eval/greedy_accuracy", "eval/greedy_reward", "eval/sampled_reward"):
        table.add_row(key.split("/")[1], f"{result.before[key]:.3f}", f"{result.after[key]:.3f}")
    console.print(table)
    _print_agent_metrics(console, result.run_dir)
    console.print(f"run folder: {result.run_dir} ({result.seconds:.0f} s)")
    return 0


def _print_agent_metrics(console: Console, run_dir: str) -> None:
    """Multi-turn runs: the last step's per-role and per-turn agent metrics."""
    from policylab.trainers.run import read_metrics

    rows = read_metrics(run_dir, kind="train")
    last = {k: v for k, v in rows[-1].items() if k.startswith("agent/")} if rows else {}
    if not last:
        return
    table = Table(title="agents, last training step", title_justify="left")
    table.add_column("metric")
    table.add_column("value")
    for key, value in sorted(last.items()):
        table.add_row(key.removeprefix("agent/"), f"{value:.3f}")
    console.print(table)


def _report_testtime(console: Console, cfg, result) -> int:
    console.print(
        f"{cfg.algo} is a test-time method ({result.method}): no weights trained; it ran on "
        f"{cfg.eval_n} held-out {cfg.task} instances"
    )
    _print_testtime(console, {result.method: result.summary}, f"held-out {cfg.task}")
    console.print(f"run folder: {result.run_dir} ({result.seconds:.0f} s)")
    return 0


def _print_testtime(console: Console, summaries: dict, title: str) -> None:
    table = Table(title=title, title_justify="left")
    columns = (
        "accuracy",
        "initial_accuracy",
        "iterations_mean",
        "reward_calls_mean",
        "decodes_mean",
        "forward_passes_mean",
    )
    for col in ("method", *columns):
        table.add_column(col.replace("_", " "))
    for method, s in summaries.items():
        table.add_row(method, *(f"{s['eval/' + c]:.3f}" for c in columns))
    console.print(table)


def _solve(console: Console, args: argparse.Namespace) -> int:
    from policylab import tasks, testtime_run
    from policylab.config import parse_overrides
    from policylab.models import load_model

    method, options = testtime_run.resolve(args.testtime, parse_overrides(args.option))
    needs_reward = "reward_fn" in testtime_run.reward_keywords(method)
    if needs_reward and args.answer is None:
        raise ValueError(
            f"--testtime {args.testtime} is guided by a reward: give --answer (the oracle's "
            "reference answer) with --task (whose verifier scores it)"
        )
    task = tasks.get(args.task)
    example = {"prompt": args.prompt, "answer": args.answer if args.answer is not None else ""}
    model, tok = load_model(args.model)
    model.eval()
    outcome = testtime_run.solve_one(
        model,
        tok,
        task,
        example,
        method,
        options,
        seed=args.seed,
        index=0,
        max_new_tokens=args.max_new_tokens,
    )
    s = outcome.solved
    table = Table(title=f"{args.testtime} ({method}) on {args.prompt!r}", title_justify="left")
    table.add_column("")
    table.add_column("value", overflow="fold")
    rows = {
        "first answer": "(none: it starts from latents)" if s.initial is None else repr(s.initial),
        "final answer": repr(s.completion),
        "iterations": str(s.iterations),
        "rewards": ", ".join(f"{r:g}" for r in s.rewards) or "(none: no reward calls)",
        "reward calls / decodes / forward passes": (
            f"{s.reward_calls} / {s.decodes} / {s.forward_passes}"
        ),
    }
    if s.confidence is not None:
        rows["confidence C"] = f"{s.confidence:.4f}"
    if args.answer is not None:
        rows["correct (first → final)"] = f"{outcome.initial_correct} → {outcome.correct}"
    for key, value in rows.items():
        table.add_row(key, escape(value))
    console.print(table)
    return 0


def _eval_testtime(console: Console, args: argparse.Namespace) -> int:
    from policylab import tasks, testtime_run
    from policylab.config import parse_overrides
    from policylab.models import load_model

    method, options = testtime_run.resolve(args.testtime, parse_overrides(args.option))
    name = args.task or "arithmetic"
    task = tasks.get(name, **parse_overrides(args.knobs))
    model, tok = load_model(args.model)
    _, summary = testtime_run.evaluate(
        model,
        tok,
        task,
        method,
        options,
        n=args.n,
        eval_seed=args.seed,  # the held-out draw, as plain `eval --seed` draws it
        seed=args.seed,
        max_new_tokens=args.max_new_tokens or 24,
    )
    _print_testtime(
        console,
        {args.testtime: summary},
        f"{args.model}: {args.n} held-out {name}, seed {args.seed}",
    )
    return 0


def _report_control(console: Console, cfg, result) -> int:
    table = Table(
        title=f"{cfg.task}: evaluation return ({cfg.eval_episodes} episodes)",
        title_justify="left",
    )
    for col in ("env steps", "return", "seconds"):
        table.add_column(col)
    for e in result.evals:
        table.add_row(
            str(e["env_steps"]), f"{e['eval/return_mean']:.1f}", f"{e['time/elapsed_s']:.1f}"
        )
    console.print(table)
    if result.solved_at is not None:
        console.print(
            f"reached {cfg.stop_return} at {result.solved_at['env_steps']} steps, "
            f"{result.solved_at['seconds']:.1f} s"
        )
    console.print(f"run folder: {result.run_dir} ({result.seconds:.0f} s)")
    return 0


def _report_tabular(console: Console, cfg, result) -> int:
    from policylab.config import LabConfig

    # a lab task's optimum may be a bound (DISK's one keypoint per cell), not a solved value
    best = "best value known" if isinstance(cfg, LabConfig) else "exact optimum"
    table = Table(
        title=f"{cfg.algo} on {cfg.task} (seed {cfg.seed}): {best} {result.optimum:.6g}",
        title_justify="left",
    )
    for col in ("step", "spent", "value", "gap", "score"):
        table.add_column(col)
    shown = result.evals if len(result.evals) <= 12 else result.evals[:: len(result.evals) // 10]
    if shown[-1] is not result.evals[-1]:
        shown = [*shown, result.evals[-1]]
    for e in shown:
        table.add_row(
            str(e["step"]),
            str(e["budget/spent"]),
            f"{e['oracle/value']:.6g}",
            f"{e['oracle/gap']:.3g}",
            f"{e['eval/score']:.4f}",
        )
    console.print(table)
    console.print(f"run folder: {result.run_dir} ({result.seconds:.1f} s)")
    return 0


def _arena(console: Console, args: argparse.Namespace) -> int:
    from policylab.arena import arena
    from policylab.arena.aggregate import arena_tasks
    from policylab.config import parse_overrides

    if (args.task is None) == (args.tasks is None):
        raise ValueError("give --task (one task) or --tasks a,b,... (several), not both")
    ray = _ray_address(args)  # first: a key=value it swallowed goes back to the fields
    settings = dict(
        budget=args.budget,
        jobs=args.jobs,
        overrides=parse_overrides(args.overrides),
        baseline=args.baseline,
        threshold=args.threshold,
        out_dir=args.out,
        min_effect=args.min_effect,
        ray=ray,
    )
    try:
        if args.tasks is not None:
            results, aggregate = arena_tasks(args.tasks, args.algos, args.seeds, **settings)
            codes = [_print_arena(console, r) for r in results]
            console.print(aggregate.read_text(), markup=False, highlight=False)
            console.print(f"aggregate: {aggregate}")
            return max(codes)
        result = arena(args.task, args.algos, args.seeds, **settings)
    except KeyboardInterrupt:
        console.print(
            "[yellow]interrupted:[/yellow] run the same command again to continue "
            "(finished runs are kept, checkpointed ones resume)"
        )
        return 130
    return _print_arena(console, result)


def _ray_address(args: argparse.Namespace) -> bool | str:
    """--ray: False without it, True (a local cluster) alone, else the address. A bare
    --ray takes the next word as its address; a key=value there is a field, given back."""
    if args.ray is None:
        return False
    if args.ray == "local" or "=" in args.ray:
        if "=" in args.ray:
            args.overrides.insert(0, args.ray)
        return True
    return args.ray


def _report(console: Console, args: argparse.Namespace) -> int:

    from policylab.arena import report
    from policylab.arena.aggregate import TASKS_FILE, report_tasks

    if (Path(args.arena_dir) / TASKS_FILE).is_file():
        results, aggregate = report_tasks(args.arena_dir)
        codes = [_print_arena(console, r) for r in results]
        console.print(aggregate.read_text(), markup=False, highlight=False)
        return max(codes)
    return _print_arena(console, report(args.arena_dir))


def _pretrain(console: Console, args: argparse.Namespace) -> int:
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
    )

    from policylab.base_models import base_models, pretrain, resolve
    from policylab.config import parse_overrides

    if args.list:
        table = Table(title="base models (policylab pretrain NAME key=value)")
        for column in ("name", "what", "knobs (default, source)"):
            table.add_column(column)
        for name in base_models:
            model = base_models.get(name)
            knobs = "; ".join(f"{k}={v!r} {src}" for k, (v, src) in model.knobs.items())
            table.add_row(name, model.title, escape(knobs))
        console.print(table)
        return 0
    if not args.name:
        raise ValueError(f"pretrain: name a base model; choices: {', '.join(base_models)}")
    knobs = parse_overrides(args.knobs)
    seed = knobs.pop("seed", 0)
    resolve(args.name, seed, knobs)  # a bad name, seed or knob fails before the bar opens
    columns = (TextColumn(f"pretrain {args.name}"), BarColumn(), MofNCompleteColumn())
    with Progress(*columns, TextColumn("steps"), TimeRemainingColumn(), console=console) as bar:
        task = bar.add_task("pretrain", total=None)
        built = pretrain(
            args.name,
            seed,
            progress=lambda done, total: bar.update(task, completed=done, total=total),
            **knobs,
        )
    state = "built" if built.built else "found in the cache"
    console.print(f"{args.name} {state}: {built.path}\n{escape(built.description)}")
    console.print(f"sha256 {built.sha256}")
    return 0


def _claims(console: Console, args: argparse.Namespace) -> int:

    from policylab.arena.claim_list import ARENAS, CLAIMS, RECORDED
    from policylab.arena.claims import claims_report
    from policylab.trainers.run import write_atomic

    verdicts, text = claims_report(
        args.root, CLAIMS, ARENAS, recorded=RECORDED, run=args.run, jobs=args.jobs
    )
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(out, text)
    for v in verdicts:
        console.print(f"{v.claim.method:14} {v.verdict:18} {v.reason}", markup=False)
    console.print(f"wrote {out}")
    return 0


def seeds_arg(text: str) -> int | str:
    """--seeds: a whole number (the arena checks it is ≥ 1, naming the flag), or auto
    (sized by power, with --min-effect)."""
    if text == "auto":
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a number of seeds (1, 2, ...) or auto, got {text!r}"
        ) from None


def _print_arena(console: Console, result) -> int:
    """The results table as Markdown, the report's paths; exit 1 if a run failed."""
    console.print(result.report["markdown"].read_text(), markup=False, highlight=False)
    console.print(f"report: {result.report['html']}  ({len(result.trained)} runs trained now)")
    failed = [r for r in result.records if r.status == "failed"]
    for r in failed:
        console.print(f"[red]failed:[/red] {r.algo} seed {r.seed}: {escape(r.error)}")
    return 1 if failed else 0


def _sft(console: Console, args: argparse.Namespace) -> int:
    from policylab.config import load, parse_overrides
    from policylab.trainers.sft import SFTConfig, sft

    overrides = parse_overrides(args.overrides)
    flags = {"init": args.model, "out": args.out, "tasks": args.task and {args.task: {}}}
    overrides.update({k: v for k, v in flags.items() if v is not None})
    if args.overwrite:
        overrides["overwrite"] = True
    cfg = load(SFTConfig, args.config, overrides)
    start = f"the model {cfg.init}" if cfg.init else "a fresh tiny model"
    console.print(f"SFT of {start} on {', '.join(cfg.tasks)} → {cfg.out}")
    meta = sft(cfg, progress=True)
    scored = {k: s for k, s in meta["heldout"].items() if "eval/greedy_accuracy" in s}
    if scored:
        _print_scores(console, scored, f"held-out after {meta['curve'][-1]['step']} steps")
    for name, s in meta["heldout"].items():
        if "eval/completion_loss" in s:
            console.print(f"{name}: held-out completion loss {s['eval/completion_loss']:.4f}")
    console.print(
        f"saved to {cfg.out} ({meta['parameters']:,} parameters, "
        f"{meta['train_seconds']} s of training); RL from it: policylab train --model {cfg.out}"
    )
    return 0


def _eval(console: Console, args: argparse.Namespace) -> int:
    from policylab.api import evaluate_model
    from policylab.config import parse_overrides

    if args.testtime:
        return _eval_testtime(console, args)
    if args.option:
        raise ValueError("--option sets a test-time method's options: give --testtime NAME")

    scores = evaluate_model(
        args.model,
        args.task,
        n=args.n,
        seed=args.seed,
        max_new_tokens=args.max_new_tokens,
        **parse_overrides(args.knobs),
    )
    _print_scores(console, scores, f"{args.model}: {args.n} held-out examples, seed {args.seed}")
    return 0


def _print_scores(console: Console, scores: dict, title: str) -> None:
    table = Table(title=title, title_justify="left")
    for col in ("task", "greedy accuracy", "greedy reward", "sampled reward (T=1)"):
        table.add_column(col)
    for name, s in scores.items():
        table.add_row(
            name,
            f"{s['eval/greedy_accuracy']:.3f}",
            f"{s['eval/greedy_reward']:.3f}",
            f"{s['eval/sampled_reward']:.3f}",
        )
    console.print(table)


def positive_int(text: str) -> int:
    """argparse type of a count: 1, 2, ...; anything else is a usage error naming it."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer (1, 2, ...), got {text!r}")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="policylab", description="Policy-gradient RL: one algebra, many papers."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="list registered components and named algorithms")
    describe = sub.add_parser("describe", help="formula, paper and defaults of an algorithm")
    describe.add_argument("name")
    bandit = sub.add_parser("bandit", help="run every algorithm on the softmax bandit")
    bandit.add_argument("--algos", default="", help="comma-separated algorithms (default: all)")
    bandit.add_argument("--seeds", type=positive_int, default=3, help="seeds per algorithm")
    bandit.add_argument("--steps", type=positive_int, default=300, help="training steps per run")
    bandit.add_argument(
        "--states",
        type=positive_int,
        default=1,
        help="states (prompts); state s scales each arm's success by 1 − 0.75·s/(S − 1)",
    )
    tr = sub.add_parser(
        "train",
        help="train a language model, a control policy on a gymnasium id, a tabular "
        "method on tabular/<task>, or a lab method on lab/<task>",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="fields (key=value):\n"
        + _fields("train")
        + "\n\ncontrol fields (--task <gymnasium id>, e.g. CartPole-v1):\n"
        + _fields("control")
        + "\n\ntabular fields (--task tabular/<name>, e.g. tabular/robust_garnet; the same "
        "for --task lab/<name>):\n" + _fields("tabular"),
    )
    tr.add_argument("--algo", default=None, help="named algorithm (policylab list)")
    tr.add_argument(
        "--task",
        default=None,
        help="embedded task, a data file/folder, a gymnasium id, tabular/<task> or lab/<task>",
    )
    tr.add_argument("--model", default=None, help='"tiny" (shipped), a folder or a hub id')
    tr.add_argument("--config", default=None, help="YAML file of fields")
    tr.add_argument("--resume", default=None, metavar="RUN_DIR", help="continue a run folder")
    tr.add_argument("overrides", nargs="*", help="key=value field overrides")
    sft = sub.add_parser(
        "sft",
        help="supervised fine-tuning on demonstrations: the tiny model, or yours (--model) "
        "on your data (--task)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="fields (key=value):\n" + _fields("sft"),
    )
    sft.add_argument(
        "--model", default=None, help='start from "tiny", a folder or a hub id (field init)'
    )
    sft.add_argument(
        "--task",
        default=None,
        help="a data file/folder (prompt + completion or answer columns, or messages) or an "
        "embedded task (field tasks={NAME: {}})",
    )
    sft.add_argument("--out", default=None, help="folder to save the model in (field out)")
    sft.add_argument("--overwrite", action="store_true", help="write into a non-empty out folder")
    sft.add_argument("--config", default=None, help="YAML file of fields")
    sft.add_argument("overrides", nargs="*", help="key=value field overrides")
    ev = sub.add_parser("eval", help="held-out accuracy and mean reward of a model on tasks")
    ev.add_argument(
        "--model",
        default="tiny",
        help='"tiny" (shipped), a model folder, a hub id, or a run folder (its model/, else '
        "its latest checkpoint's)",
    )
    ev.add_argument(
        "--task",
        default=None,
        help="a task, comma-separated tasks, or all (default: a run folder's task, else all)",
    )
    ev.add_argument("--n", type=positive_int, default=200, help="held-out examples per task")
    ev.add_argument("--seed", type=int, default=0, help="seed of the held-out draw and sampling")
    ev.add_argument(
        "--max-new-tokens",
        type=positive_int,
        default=None,
        help="generation budget (default: a run folder's, else 24)",
    )
    ev.add_argument(
        "--testtime",
        default=None,
        metavar="NAME",
        help="score a test-time method instead (greedy, best_of_n, latentseek, "
        "latent_conf_pg, best_of_m_by_confidence, or a test-time algorithm; docs/agents.md)",
    )
    ev.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a test-time method's option (repeatable), e.g. --option rho=0.5",
    )
    ev.add_argument("knobs", nargs="*", help="task difficulty knobs as key=value")
    so = sub.add_parser(
        "solve",
        help="run a test-time method (LatentSeek, DMLR-text, ...) on one input",
    )
    so.add_argument("--testtime", required=True, metavar="NAME", help="method or algorithm")
    so.add_argument("--model", default="tiny", help='"tiny", a model folder or a hub id')
    so.add_argument("--prompt", required=True, help="the input text, e.g. 17+25+3=")
    so.add_argument("--answer", default=None, help="reference answer for the oracle reward")
    so.add_argument("--task", default="arithmetic", help="task whose verifier scores answers")
    so.add_argument("--seed", type=int, default=0, help="seed of sampling and oracle noise")
    so.add_argument("--max-new-tokens", type=positive_int, default=24)
    so.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a method option (repeatable), e.g. --option rho=0.5 --option start=answer",
    )
    ar = sub.add_parser(
        "arena",
        help="algorithms side by side: same task, budget and seeds, with confidence intervals",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Each algorithm × seed is an ordinary run folder under OUT/runs; re-running the "
        "same command continues an interrupted arena (finished runs are reused, partial ones "
        "resumed). key=value fields apply to every run (policylab train --help lists them).",
    )
    ar.add_argument("--task", default=None, help="embedded task, data file or gymnasium id")
    ar.add_argument(
        "--tasks",
        default=None,
        help="several tasks, comma-separated: one arena each, then IQM, bootstrap intervals "
        "and the probability of improvement over seeds × tasks (aggregate.md)",
    )
    ar.add_argument(
        "--algos",
        required=True,
        help="comma-separated algorithms; name@key=value[@key=value] is a variant with its "
        "own fields (e.g. ppo,ppo@clip_schedule=linear); commas inside [...], {...} or "
        "quotes belong to the value",
    )
    ar.add_argument(
        "--seeds",
        type=seeds_arg,
        default=None,
        help="seeds 0 .. N-1 for every algorithm (N ≥ 1), or auto: a 5-seed pilot, then as "
        "many seeds as 80 %% power to detect --min-effect needs (at most 30); default: auto "
        "with --min-effect, else 3",
    )
    ar.add_argument(
        "--min-effect",
        type=float,
        default=None,
        help="the smallest difference in final score worth detecting (e.g. 0.05 accuracy): "
        "the arena sizes its seeds to detect it (--seeds auto)",
    )
    ar.add_argument(
        "--budget",
        type=int,
        default=None,
        help="per run: environment steps (control), generated samples (language models), "
        "generated tokens (agents) or the tabular task's unit (gradient evaluations, "
        "episodes); a positive whole number; default: the trainer's",
    )
    ar.add_argument("--jobs", type=int, default=1, help="runs in parallel (≥ 1)")
    ar.add_argument("--baseline", default=None, help="algorithm the others are compared to")
    ar.add_argument("--threshold", type=float, default=None, help="score for 'budget to reach'")
    ar.add_argument("--out", default=None, help="arena folder (default runs/arena-<task>)")
    ar.add_argument(
        "--ray",
        nargs="?",
        const="local",
        default=None,
        metavar="ADDRESS",
        help='every run a Ray task (pip install "policylab[ray]"): on a local cluster, or '
        "on the cluster at ADDRESS (auto, ray://head:10001); same folders and report",
    )
    ar.add_argument("overrides", nargs="*", help="key=value fields for every run")
    pre = sub.add_parser(
        "pretrain",
        help="build a base model once and cache it (ring_flow, tiny_mdm, …; --list)",
        description="Builds the registered base model NAME (policylab/base_models.py), or "
        "finds it in $POLICYLAB_CACHE (default ~/.cache/policylab), and prints its path.",
    )
    pre.add_argument("name", nargs="?", help="a registered base model (--list shows them)")
    pre.add_argument("knobs", nargs="*", help="seed=N and the model's knobs as key=value")
    pre.add_argument("--list", action="store_true", help="list the base models and their knobs")
    rep = sub.add_parser("report", help="(re)write an arena's results.md, curves.png, report.html")
    rep.add_argument("arena_dir")
    cl = sub.add_parser(
        "claims",
        help="one verdict per seed paper from the claims arenas: writes docs/claims.md",
        description="Reads the claims arenas (policylab/arena/claim_list.py) under --root and "
        "writes each paper's claim, the measured difference with its interval and the verdict. "
        "--run trains or continues the arenas first (hours on a laptop CPU).",
    )
    cl.add_argument("--root", default="runs/claims", help="folder holding one arena per setup")
    cl.add_argument("--out", default="docs/claims.md", help="the Markdown file to write")
    cl.add_argument("--run", action="store_true", help="train what is missing first")
    cl.add_argument("--jobs", type=positive_int, default=2, help="runs in parallel with --run")
    args = parser.parse_args(argv)
    _show_logs()
    console = Console(width=None if sys.stdout.isatty() else 120)
    _quiet_transformers()
    if args.command == "list":
        print_catalogue(console)
        return 0
    if args.command == "describe":
        return print_description(console, args.name)
    commands = {
        "bandit": _bandit,
        "train": _train,
        "sft": _sft,
        "eval": _eval,
        "solve": _solve,
        "arena": _arena,
        "report": _report,
        "claims": _claims,
        "pretrain": _pretrain,
    }
    try:
        return commands[args.command](console, args)
    except (ValueError, KeyError, FileNotFoundError, FileExistsError) as err:
        console.print(f"[red]error:[/red] {escape(str(err))}")
        return 2


def _fields(command: str) -> str:
    from policylab.config import ControlConfig, TabularConfig, TrainConfig, describe_fields
    from policylab.trainers.sft import SFTConfig

    schemas = {
        "sft": SFTConfig,
        "train": TrainConfig,
        "control": ControlConfig,
        "tabular": TabularConfig,
    }
    return describe_fields(schemas[command])


def _show_logs() -> None:
    """Warnings from the library on stderr as `WARNING message`, and the data report of a
    data file (rows, duplicates, longest prompt against the context) at INFO."""
    import logging

    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(message)s")
    logging.getLogger("policylab.tasks.files").setLevel(logging.INFO)


def _quiet_transformers() -> None:
    """No per-file progress bars from transformers when loading and saving models."""
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:
        return
    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()


if __name__ == "__main__":
    sys.exit(main())
