"""Workflows turn a batch of prompts (or environments) into Rollouts."""
