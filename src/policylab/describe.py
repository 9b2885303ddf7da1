"""What `policylab list` and `policylab describe NAME` print: the registered components,
stages and named algorithms, each algorithm's formula, paper, defaults with their sources,
and where each of its parts lives in the source."""

from __future__ import annotations

import inspect
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from policylab import recipes as recipe_book
from policylab.algebra.aggregate import AGG_MODES
from policylab.algebra.catalogue import (
    advantage_estimators,
    kl_estimators,
    ope_estimators,
    policy_losses,
    reward_shapers,
    selections,
    value_losses,
)
from policylab.algebra.options import describe_options
from policylab.algebra.selection import stage_of
from policylab.lab.catalogue import lab_methods, lab_tasks
from policylab.recipes.compose import components
from policylab.registry import Registry
from policylab.stages import stages
from policylab.stages.pipeline import WORKFLOW_COLUMNS, annotators_for
from policylab.stages.rollouts import RULE_STAGES
from policylab.tabular.catalogue import tabular_methods, tabular_tasks
from policylab.tabular.methods import TabularMethod
from policylab.tasks import presets as task_presets
from policylab.tasks import reasoning_gym, task_classes
from policylab.workflows.agents import AGENT_COLUMNS, AgentOptions, MultiTurn
from policylab.workflows.rounds import collect_groups

REGISTRIES: tuple[Registry, ...] = (
    advantage_estimators,
    policy_losses,
    kl_estimators,
    value_losses,
    reward_shapers,
    selections,
    stages,
    ope_estimators,
)
# each table's heading: the plural of the registry's kind ("policy loss" → "policy losses")
_TITLES = {
    "advantage estimator": "advantage estimators",
    "policy loss": "policy losses",
    "KL estimator": "KL estimators",
    "value loss": "value losses",
    "reward shaping": "reward shaping rules",
    "selection": "selections",
    "stage": "stages (sampler=, augment=; selections run as stages too)",
    "OPE estimator": "off-policy value estimators, differentiable for higher-order "
    "derivatives (algebra/ope.py; docs/theory.md)",
}


def print_catalogue(console: Console) -> None:
    """`policylab list`: the algorithms, then every registry's entries."""
    algos = Table(title="Algorithms (policylab describe NAME)", title_justify="left")
    for col in ("name", "advantage", "loss", "KL", "paper"):
        algos.add_column(col)
    for name in recipe_book.names():
        r = recipe_book.get(name)
        algos.add_row(name, r.advantage, r.loss, r.kl, _arxiv(r.paper))
    console.print(algos)
    for registry in REGISTRIES:
        table = Table(title=_TITLES[registry.kind], title_justify="left")
        table.add_column("name")
        table.add_column("what it does")
        for name in registry.names():
            table.add_row(name, escape(registry.entry(name).summary))
        console.print(table)
    console.print(f"[bold]aggregation modes[/bold]: {', '.join(AGG_MODES)}")
    theory = Table(
        title="Tabular methods, scored against an exact optimum "
        "(policylab train --task tabular/<task> --algo NAME; docs/theory.md)",
        title_justify="left",
    )
    for col in ("name", "what it does", "paper"):
        theory.add_column(col)
    for name in tabular_methods.names():
        m = tabular_methods.get(name)
        theory.add_row(name, escape(m.title), _arxiv(m.paper))
    console.print(theory)
    tasks_line = ", ".join(f"tabular/{n}" for n in tabular_tasks.names())
    console.print(f"[bold]tabular tasks[/bold]: {tasks_line}")
    lab = Table(
        title="Lab methods, each with its own loop on a seeded testbed "
        "(policylab train --task lab/<task> --algo NAME; docs/lab.md)",
        title_justify="left",
    )
    for col in ("name", "what it does", "paper"):
        lab.add_column(col)
    for name in lab_methods.names():
        m = lab_methods.get(name)
        lab.add_row(name, escape(m.title), _arxiv(m.paper))
    console.print(lab)
    console.print(f"[bold]lab tasks[/bold]: {', '.join(f'lab/{n}' for n in lab_tasks.names())}")
    builtin = ", ".join(task_classes.names())
    console.print(f"[bold]language-model tasks[/bold]: {builtin}")
    console.print(escape(reasoning_gym.catalogue_line()), highlight=False)
    presets = Table(title="Harder task presets (--task NAME; docs/tasks.md)", title_justify="left")
    presets.add_column("name")
    presets.add_column("base task, knobs: what it is")
    for name, text in task_presets().items():
        presets.add_row(name, escape(text))
    console.print(presets)


def _describe_tabular(console: Console, method: TabularMethod, kind: str = "tabular") -> None:
    console.print(f"[bold]{method.name}[/bold] — {method.title} ({kind} method)")
    console.print(f"paper: {escape(method.paper)}")
    console.print(escape(method.formula), highlight=False)
    table = Table(title="defaults", title_justify="left")
    for col in ("option", "value", "meaning", "source"):
        table.add_column(col)
    help_ = method.option_help()
    for key, setting in method.defaults.items():
        table.add_row(key, repr(setting.value), escape(help_.get(key, "")), escape(setting.source))
    console.print(table)
    for note in method.notes:
        console.print(f"- {escape(note)}", highlight=False)
    console.print(f"step: {locate(method.step)}")


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
    console.print(
        f"  KL: {recipe.kl}   selection: {recipe.selection or 'all rows'}   "
        f"prompt sampler: {recipe.sampler or 'uniform'}"
    )
    table = Table(title="defaults", title_justify="left")
    for col in ("setting", "value", "source"):
        table.add_column(col, overflow="fold")
    for kind, registry, component in (
        ("advantage", advantage_estimators, recipe.advantage),
        ("loss", policy_losses, recipe.loss),
        ("value", value_losses, recipe.value_loss),
        ("selection", selections, recipe.selection),
    ):
        if component is None:
            continue
        chosen = {
            "advantage": recipe.advantage_options,
            "loss": recipe.loss_options,
            "value": recipe.value_options,
            "selection": recipe.selection_options,
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
    for option, setting in recipe.sampler_options.items():
        table.add_row(f"{recipe.sampler}.{option}", repr(setting.value), escape(setting.source))
    if recipe.workflow_options:  # an agent recipe: every AgentOptions field (agent=...)
        for option, default, help_ in describe_options(AgentOptions):
            setting = recipe.workflow_options.get(option)
            value, source = (
                (setting.value, setting.source) if setting else (default, f"default: {help_}")
            )
            table.add_row(f"agent.{option}", repr(value), escape(source))
    for name, setting in recipe.rewards.items():  # the recipe's own rewards and weights
        table.add_row(f"rewards.{name}", repr(setting.value), escape(setting.source))
    for option, setting in recipe.training.items():
        table.add_row(f"training.{option}", repr(setting.value), escape(setting.source))
    console.print(table)
    for note in recipe.notes:
        console.print(f"note: {escape(note)}")
    console.print("\n[bold]where each part lives[/bold]")
    for kind, where in part_locations(recipe):
        console.print(f"  {kind}: {where}", highlight=False)


def part_locations(recipe: recipe_book.Recipe) -> list[tuple[str, str]]:
    """(part, "src/policylab/<file>.py:<function or class>") for each part of `recipe`."""
    parts = [
        ("advantage", advantage_estimators, recipe.advantage),
        ("loss", policy_losses, recipe.loss),
        ("value loss", value_losses, recipe.value_loss),
        ("selection", selections, recipe.selection),
        ("prompt stage", stages, recipe.sampler),
    ]
    found = [(kind, locate(reg.get(name))) for kind, reg, name in parts if name is not None]
    if recipe.selection is not None:  # the stage that runs the selection, and when
        rule = selections.get(recipe.selection)
        wrapper = RULE_STAGES[stage_of(rule)]
        found.append((f"selection's stage ({wrapper.kind})", locate(wrapper)))
        if wrapper.kind == "filter":
            found.append(("refill rounds", locate(collect_groups)))
    parts = components(recipe.name, max_new_tokens=1)
    provided = WORKFLOW_COLUMNS
    if recipe.workflow_options:  # an agent recipe: episodes, credit and packing
        found.append(("workflow", locate(MultiTurn)))
        provided = provided | AGENT_COLUMNS
    if parts.value is None:  # the annotators a language-model run adds for what it reads
        for annotator in annotators_for(parts, provided):
            found.append(("annotate stage", locate(type(annotator))))
    return found


def locate(obj) -> str:
    """Where `obj` (a function or class) is defined, relative to the repository."""
    path = Path(inspect.getsourcefile(obj)).resolve()
    root = Path(__file__).resolve().parents[1]  # src/
    shown = path.relative_to(root.parent) if path.is_relative_to(root) else path
    return f"{shown}:{obj.__qualname__}"


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


def print_description(console: Console, name: str) -> int:
    """`policylab describe NAME`: a recipe and/or the components of that name (2 if none)."""
    found = False
    if name in recipe_book.recipes:
        _describe_recipe(console, recipe_book.get(name))
        found = True
    for registry in REGISTRIES:
        if name in registry:
            console.print()
            _describe_component(console, registry, name)
            found = True
    for kind, methods in (("tabular", tabular_methods), ("lab", lab_methods)):
        if name in methods:
            _describe_tabular(console, methods.get(name), kind)
            found = True
    if not found:
        every = sorted(
            set(recipe_book.names()).union(
                *(r.names() for r in REGISTRIES), tabular_methods.names(), lab_methods.names()
            )
        )
        console.print(f"[red]unknown name {name!r}[/red]; choices: {', '.join(every)}")
        return 2
    return 0
