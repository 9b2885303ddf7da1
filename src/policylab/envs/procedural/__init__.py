"""Procedural image tasks, numpy only (papers/seed_control_theory.md §0.7): multi-view
objects (§16), image pairs under homographies (§15), visual reaching (§10)."""
