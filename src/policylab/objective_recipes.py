"""Recipes of the objective methods (issue #8; papers/seed_llm_algorithms.md §3, §5,
§10–13, §15): each changes the surrogate, the regulariser or the advantage, and names its
components with paper-sourced defaults. Imported by recipes.py, which registers them with
the others."""

from __future__ import annotations

from policylab.recipes import Recipe, S, add, get  # noqa: F401
