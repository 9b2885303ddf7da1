"""The one rule for names given to `policy_loss` / `advantages` / `value_loss`: an algorithm's
name gives that recipe's component with the recipe's defaults; a name that is only a
component gives the bare component; "component:NAME" always gives the bare component."""

import pytest
import torch

import policylab
from policylab.recipes.compose import _resolve

GROUP = torch.tensor([0, 0, 0, 1, 1, 1])
REWARDS = torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0, 0.0])
MASK = torch.ones(6, 2)


@pytest.mark.parametrize(
    ("call", "name", "component", "option", "recipe_value", "bare_value"),
    [
        # Reg-GRPO's recipe adds a k3 KL to the reference with β = 0.1 (recipes/objectives.py)
        (policylab.policy_loss, "reg_grpo", "reg_grpo", "kl_coef", 0.1, 0.0),
        # P3O's recipe pairs every two rows of a group, clipping jointly (objectives.py)
        (policylab.policy_loss, "p3o", "p3o", "loss_agg_mode", "seq-mean-token-mean", None),
        # RLOO's recipe subtracts β·KL with β = 0.05 from the reward (TRL's RLOOTrainer)
        (policylab.advantages, "rloo", "rloo", "kl_coef", 0.05, 0.0),
    ],
)
def test_an_algorithm_name_gives_the_recipe_component(
    call, name, component, option, recipe_value, bare_value
):
    recipe_fn = call(name)
    bare_fn = call(f"component:{name}")
    assert recipe_fn.name == bare_fn.name == component
    assert getattr(recipe_fn.options, option) == recipe_value
    if bare_value is not None:
        assert getattr(bare_fn.options, option) == bare_value
    assert recipe_fn.options != bare_fn.options


def test_rloo_recipe_estimator_subtracts_the_kl_from_the_reward():
    # One group of 2 rows, R = [1, 0]; Σ_t k1(old, ref) = Σ_t (old − ref) = [2·0.5, 0] = [1, 0].
    # Recipe (β = 0.05): R' = [1 − 0.05, 0] = [0.95, 0] → leave-one-out A = [0.95, −0.95].
    # Bare (β = 0): A = [1, −1].
    logprobs = torch.tensor([[-0.5, -0.5], [-1.0, -1.0]])
    ref = torch.tensor([[-1.0, -1.0], [-1.0, -1.0]])
    batch = {
        "rewards": [1.0, 0.0],
        "group_ids": [0, 0],
        "response_mask": torch.ones(2, 2),
        "logprobs": logprobs,
        "ref_logprobs": ref,
    }
    recipe = policylab.advantages("rloo")(**batch)
    bare = policylab.advantages("component:rloo")(**batch)
    torch.testing.assert_close(recipe[:, 0], torch.tensor([0.95, -0.95]))
    torch.testing.assert_close(bare[:, 0], torch.tensor([1.0, -1.0]))


def test_a_name_that_is_only_a_component_gives_the_bare_component():
    assert _resolve("ppo_clip", policylab.api.policy_losses, "loss") == ("ppo_clip", {})
    assert _resolve("gae", policylab.api.advantage_estimators, "advantage") == ("gae", {})


def test_an_algorithm_whose_component_has_another_name_gives_it():
    # dapo's loss is ppo_clip with clip-higher 0.28 (recipes/core.py)
    loss = policylab.policy_loss("dapo")
    assert loss.name == "ppo_clip" and loss.options.eps_high == 0.28


def test_component_spelling_rejects_an_algorithm_only_name():
    with pytest.raises(policylab.UnknownNameError, match="'dapo'.*choices: .*ppo_clip"):
        policylab.policy_loss("component:dapo")


def test_unknown_name_lists_components_and_algorithms():
    with pytest.raises(policylab.UnknownNameError, match="choices: .*or an algorithm: .*dapo"):
        policylab.policy_loss("nope")
