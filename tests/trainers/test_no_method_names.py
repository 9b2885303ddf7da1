"""The trainers name no method: what varies between papers lives in the registries
(components, stages, recipes), and a trainer that compared a component's name would be
the `if self.loss_type == ...` pattern this library exists to avoid."""

import ast
from pathlib import Path

import policylab
from policylab import recipes
from policylab.algebra.catalogue import (
    advantage_estimators,
    policy_losses,
    selections,
    value_losses,
)
from policylab.stages import stages

TRAINERS = Path(policylab.__file__).parent / "trainers"
NAMES = (
    set(recipes.names())
    | set(policy_losses.names())
    | set(advantage_estimators.names())
    | set(selections.names())
    | set(value_losses.names())
    | set(stages.names())
    | {"flow", "pg_rainbow", "mlp", "diffusion_chain"}  # control policy kinds
)


def method_name_comparisons(source: str) -> list[str]:
    """Comparisons (==, !=, in) against a registered name."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left, *node.comparators]
        for side in sides:
            values = side.elts if isinstance(side, (ast.Tuple, ast.List, ast.Set)) else [side]
            named = [v.value for v in values if isinstance(v, ast.Constant) and v.value in NAMES]
            if named:
                found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


def test_the_checker_finds_name_comparisons():
    assert method_name_comparisons('if parts.selection.name == "capo": pass')
    assert method_name_comparisons('x = recipe.policy == "flow"')
    assert method_name_comparisons('ok = algo in ("grpo", "dapo")')
    assert not method_name_comparisons('if cfg.schedule == "linear": pass')
    assert not method_name_comparisons('keep = path.name != "SHA256SUMS"')


def test_no_trainer_compares_a_component_name():
    offenders = {
        path.name: hits
        for path in sorted(TRAINERS.glob("*.py"))
        if (hits := method_name_comparisons(path.read_text()))
    }
    assert offenders == {}


def test_the_language_model_loop_reads_in_one_sitting():
    """`trainers/llm.py:train` stays about 120 lines: setup, the loop, the summary; the
    rest (composition, evaluation, checkpoint state, restore) are named functions."""
    tree = ast.parse((TRAINERS / "llm.py").read_text())
    (train,) = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "train"]
    assert train.end_lineno - train.lineno + 1 <= 120
    nested = [n.name for n in ast.walk(train) if isinstance(n, ast.FunctionDef) and n is not train]
    assert nested == []  # no closures over the loop's state
