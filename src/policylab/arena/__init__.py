"""The arena: algorithms side by side on one task, one budget, the same seeds."""
