"""Procedural image tasks (papers/seed_control_theory.md §0.7), numpy only."""
