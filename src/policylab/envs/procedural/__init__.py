"""Procedural image tasks (numpy, papers/seed_control_theory.md §0.7): visual_reach (§10)."""
