"""Differentiable first-principles models used by model-based policy gradients (§11).

(Named `dynamics`, not `models`: `policylab.models` is the language-model module.)"""
