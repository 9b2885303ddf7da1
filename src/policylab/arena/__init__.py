"""The arena: algorithms side by side on one task, one budget, the same seeds."""

from policylab.arena.runner import ArenaResult, ArenaSpec, arena, make_spec, report

__all__ = ["ArenaResult", "ArenaSpec", "arena", "make_spec", "report"]
