"""The `policylab` command: parses arguments and calls the Python API.

policylab list                  registered components and named algorithms
policylab describe NAME         an algorithm's formula, paper and every default with its source
policylab bandit                every algorithm on the softmax bandit (the current demo)
"""

from __future__ import annotations

import argparse
import inspect
import sys

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from policylab import recipes as recipe_book
from policylab.algebra.advantages import advantage_estimators
from policylab.algebra.aggregate import AGG_MODES
from policylab.algebra.kl import kl_estimators
from policylab.algebra.losses import policy_losses
from policylab.algebra.options import describe_options
from policylab.algebra.shaping import reward_shapers
from policylab.algebra.value import value_losses
from policylab.registry import Registry

REGISTRIES: tuple[Registry, ...] = (
    advantage_estimators,
    policy_losses,
    kl_estimators,
    value_losses,
    reward_shapers,
)


def _list(console: Console) -> None:
    algos = Table(title="Algorithms (policylab describe NAME)", title_justify="left")
    for col in ("name", "advantage", "loss", "KL", "paper"):
        algos.add_column(col)
    for name in recipe_book.names():
        r = recipe_book.get(name)
        algos.add_row(name, r.advantage, r.loss, r.kl, _arxiv(r.paper))
    console.print(algos)
    for registry in REGISTRIES:
        table = Table(title=f"{registry.kind}s", title_justify="left")
        table.add_column("name")
        table.add_column("what it does")
        for name in registry.names():
            table.add_row(name, escape(registry.entry(name).summary))
        console.print(table)
    console.print(f"[bold]aggregation modes[/bold]: {', '.join(AGG_MODES)}")


def _arxiv(paper: str) -> str:
    """The arXiv id of a citation, or the citation when it has none."""
    return next((w.rstrip(",)") for w in paper.split() if w.startswith("arXiv:")), paper)


def _describe_recipe(console: Console, recipe: recipe_book.Recipe) -> None:
    console.print(f"[bold]{recipe.name}[/bold] — {recipe.title}")
    console.print(f"paper: {recipe.paper}")
    console.print("\n[bold]formula[/bold]")
    for line in recipe.formula.splitlines():
        console.print(f"  {escape(line)}", highlight=False)
    console.print("\n[bold]components[/bold]")
    console.print(
        f"  advantage: {recipe.advantage}   loss: {recipe.loss}"
        + (f"   value loss: {recipe.value_loss}" if recipe.value_loss else "")
    )
    console.print(f"  KL: {recipe.kl}   selection: {recipe.selection or 'all rows'}")
    table = Table(title="defaults", title_justify="left")
    for col in ("setting", "value", "source"):
        table.add_column(col, overflow="fold")
    for kind, registry, component in (
        ("advantage", advantage_estimators, recipe.advantage),
        ("loss", policy_losses, recipe.loss),
        ("value", value_losses, recipe.value_loss),
    ):
        if component is None:
            continue
        chosen = {
            "advantage": recipe.advantage_options,
            "loss": recipe.loss_options,
            "value": recipe.value_options,
        }[kind]
        for option, default, help_ in describe_options(registry.entry(component).config):
            if option in chosen:
                setting = chosen[option]
                table.add_row(f"{component}.{option}", repr(setting.value), escape(setting.source))
            else:
                table.add_row(
                    f"{component}.{option}", repr(default), escape(f"component default: {help_}")
                )
    for shaper, options in recipe.reward_shaping.items():
        for option, setting in options.items():
            table.add_row(f"{shaper}.{option}", repr(setting.value), escape(setting.source))
    for option, setting in recipe.training.items():
        table.add_row(f"training.{option}", repr(setting.value), escape(setting.source))
    console.print(table)
    for note in recipe.notes:
        console.print(f"note: {escape(note)}")


def _describe_component(console: Console, registry: Registry, name: str) -> None:
    entry = registry.entry(name)
    console.print(f"[bold]{name}[/bold] ({registry.kind})")
    console.print(escape(inspect.cleandoc(entry.fn.__doc__ or "")), highlight=False)
    rows = describe_options(entry.config)
    if rows:
        table = Table(title="options", title_justify="left")
        for col in ("option", "default", "meaning"):
            table.add_column(col)
        for option, default, help_ in rows:
            table.add_row(option, repr(default), escape(help_))
        console.print(table)


def _describe(console: Console, name: str) -> int:
    found = False
    if name in recipe_book.recipes:
        _describe_recipe(console, recipe_book.get(name))
        found = True
    for registry in REGISTRIES:
        if name in registry:
            console.print()
            _describe_component(console, registry, name)
            found = True
    if not found:
        every = sorted(set(recipe_book.names()).union(*(r.names() for r in REGISTRIES)))
        console.print(f"[red]unknown name {name!r}[/red]; choices: {', '.join(every)}")
        return 2
    return 0


def _bandit(console: Console, args: argparse.Namespace) -> int:
    from policylab.bandit import BanditConfig, run_bandit

    algos = args.algos.split(",") if args.algos else recipe_book.names()
    unknown = [a for a in algos if a not in recipe_book.recipes]
    if unknown:
        console.print(
            f"[red]unknown algorithm(s) {', '.join(unknown)}[/red]; "
            f"choices: {', '.join(recipe_book.names())}"
        )
        return 2
    cfg = BanditConfig(steps=args.steps)
    console.print(
        f"Softmax bandit: arms {cfg.arm_probs}, {cfg.prompts_per_step} groups × "
        f"{cfg.samples_per_prompt} samples per step, {cfg.steps} steps, {cfg.minibatches} "
        f"minibatches, Adam lr {cfg.lr}, seeds 0..{args.seeds - 1}"
    )
    table = Table(title=f"P(best arm) after {cfg.steps} steps", title_justify="left")
    for col in ("algorithm", "P(best arm), mean [min, max]", f"steps to {cfg.target}", "seconds"):
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
            f"{sum(r.seconds for r in results):.1f}",
        )
    console.print(table)
    return 0


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
    bandit.add_argument("--seeds", type=int, default=3, help="seeds per algorithm")
    bandit.add_argument("--steps", type=int, default=300, help="training steps per run")
    args = parser.parse_args(argv)
    console = Console(width=None if sys.stdout.isatty() else 120)
    if args.command == "list":
        _list(console)
        return 0
    if args.command == "describe":
        return _describe(console, args.name)
    return _bandit(console, args)


if __name__ == "__main__":
    sys.exit(main())
