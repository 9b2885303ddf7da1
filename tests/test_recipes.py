"""Named algorithms: components exist, every default is sourced, recipe defaults reach the
callables."""

import re

import pytest
import torch

import policylab
from policylab import recipes
from policylab.algebra.catalogue import advantage_estimators, policy_losses
from policylab.api import components

SOURCE = re.compile(r"^\[(paper|code|ours)\b")
REQUIRED = {"ppo", "grpo", "dr_grpo", "dapo", "gspo", "cispo", "rloo", "reinforce_pp"}


def test_the_issue_s_algorithms_are_all_named():
    assert REQUIRED <= set(policylab.list_algorithms())


@pytest.mark.parametrize("name", recipes.names())
def test_every_default_has_a_tagged_source(name):
    recipe = recipes.get(name)
    assert recipe.advantage in advantage_estimators
    assert recipe.loss in policy_losses
    assert re.search(r"arXiv:\d{4}\.\d{4,5}", recipe.paper)
    assert recipe.citations, "a recipe with no sourced default"
    for key, source in recipe.citations.items():
        assert SOURCE.match(source), f"{name}: {key} has source {source!r}"


@pytest.mark.parametrize("name", recipes.names())
def test_recipe_components_build_with_the_recipe_defaults(name):
    parts = components(name, max_new_tokens=16)
    for key, value in recipes.get(name).component_defaults("loss").items():
        expected = 16 if key == "L_max" and value is None else value
        assert getattr(parts.loss.options, key) == expected
    for key, value in recipes.get(name).component_defaults("advantage").items():
        assert getattr(parts.advantage.options, key) == value


def test_dapo_is_ppo_clip_with_clip_higher_and_token_mean():
    fn = policylab.policy_loss("dapo")
    assert fn.fn is policy_losses.get("ppo_clip")
    opts = fn.options
    assert (opts.eps_low, opts.eps_high, opts.loss_agg_mode, opts.kl_coef) == (
        0.2,
        0.28,
        "token-mean",
        0.0,
    )


def test_grpo_recipe_needs_a_reference_and_says_so():
    assert recipes.get("grpo").needs_reference
    assert not recipes.get("dapo").needs_reference
    lp = torch.zeros(2, 3)
    with pytest.raises(ValueError, match="ref_logprobs"):
        policylab.policy_loss("grpo")(
            logprobs=lp, old_logprobs=lp, advantages=torch.ones(2), response_mask=torch.ones(2, 3)
        )


def test_dr_grpo_loss_asks_for_the_generation_budget():
    with pytest.raises(ValueError, match="L_max"):
        policylab.policy_loss("dr_grpo")
    assert policylab.policy_loss("dr_grpo", L_max=8).options.L_max == 8


def test_overrides_win_over_recipe_defaults():
    assert policylab.policy_loss("dapo", eps_high=0.3).options.eps_high == 0.3
    assert policylab.advantages("grpo", scale="batch").options.scale == "batch"


def test_unknown_override_names_the_valid_options():
    with pytest.raises(ValueError, match="valid options: .*eps_high"):
        policylab.policy_loss("dapo", epsilon=0.2)


def test_a_bad_value_names_the_field_and_choices():
    with pytest.raises(ValueError, match="loss_agg_mode.*token-mean"):
        policylab.policy_loss("ppo_clip", loss_agg_mode="mean")
    with pytest.raises(ValueError, match="dual_clip_c"):
        policylab.policy_loss("ppo_clip", dual_clip_c=0.5)
    with pytest.raises(ValueError, match="scale"):
        policylab.advantages("grpo", scale="global")


def test_dapo_selects_by_dynamic_sampling_and_others_keep_every_row():
    assert recipes.get("dapo").selection == "dynamic_sampling"
    assert components("dapo").selection.name == "dynamic_sampling"
    assert components("dapo").selection.options.metric is None
    assert components("grpo").selection.name == "all"
    # one config word puts dynamic sampling under any algorithm, and back to all for dapo
    assert components("grpo", selection="dynamic_sampling").selection.name == "dynamic_sampling"
    assert components("dapo", selection="all").selection.name == "all"
    chosen = components("dapo", selection_overrides={"metric": "exact_answer"}).selection
    assert chosen.options.metric == "exact_answer"
    with pytest.raises(ValueError, match="selection 'all'.*unknown option"):
        components("grpo", selection_overrides={"metric": "acc"})
