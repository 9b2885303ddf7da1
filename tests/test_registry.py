"""Registries: register by name, reject duplicates, unknown names list the choices."""

from __future__ import annotations

import pytest

import policylab
from policylab.registry import Registry, UnknownNameError


def _registry() -> Registry:
    reg = Registry("policy loss")

    @reg.register("alpha")
    def alpha():
        """First."""

    @reg.register("beta")
    def beta():
        """Second."""

    return reg


def test_register_and_get():
    reg = _registry()
    assert reg.get("alpha").__name__ == "alpha"
    assert reg.get("beta").__name__ == "beta"


def test_register_returns_the_function_unchanged():
    reg = Registry("kl")

    def k9(x):
        return x + 1

    assert reg.register("k9")(k9) is k9
    assert reg.get("k9")(1) == 2


def test_duplicate_name_is_rejected():
    reg = _registry()
    with pytest.raises(ValueError, match="alpha"):

        @reg.register("alpha")
        def alpha_again():
            pass

    assert reg.get("alpha").__name__ == "alpha"  # the first registration stays


def test_unknown_name_lists_choices():
    reg = _registry()
    with pytest.raises(UnknownNameError) as err:
        reg.get("gamma")
    message = str(err.value)
    assert "gamma" in message
    assert "alpha" in message and "beta" in message
    assert "policy loss" in message


def test_unknown_name_error_is_key_and_value_error():
    assert issubclass(UnknownNameError, KeyError)
    assert issubclass(UnknownNameError, ValueError)
    reg = _registry()
    with pytest.raises(KeyError):
        reg.get("gamma")
    with pytest.raises(ValueError):
        reg.get("gamma")


def test_public_factories_list_valid_names():
    with pytest.raises((ValueError, KeyError)) as err:
        policylab.policy_loss("nope")
    for name in ("ppo_clip", "gspo", "gspo_token", "cispo", "reinforce"):
        assert name in str(err.value)
    with pytest.raises((ValueError, KeyError)) as err:
        policylab.advantages("nope")
    for name in ("grpo", "rloo", "gae"):
        assert name in str(err.value)
