"""Every policy kind implements the protocol, and `evaluate` on what `sample` drew gives
back the sampling log-probs (and values)."""

import pytest
import torch

from policylab.engines import Sampling
from policylab.models import TinyConfig, build_model, build_tokenizer
from policylab.policies import (
    ActorCritic,
    Evaluation,
    FlowPolicy,
    LanguageModelPolicy,
    PGRainbowPolicy,
    Policy,
    Sample,
    TablePolicy,
)


def small_language_model():
    tokenizer = build_tokenizer()
    arch = TinyConfig(
        hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2
    )
    model = build_model(tokenizer, arch, seed=0)
    return LanguageModelPolicy(model, tokenizer, sampling=Sampling(max_new_tokens=6))


NAMES = ["categorical", "gaussian", "pg_rainbow", "flow", "table", "language_model"]


@pytest.fixture(scope="module")
def kinds():
    """name → (policy, inputs of a batch of 5 rows, or 2 prompts)."""
    with torch.random.fork_rng():  # initialisation draws leave the global RNG as found
        torch.manual_seed(0)
        obs = torch.randn(5, 3)
        pgr = PGRainbowPolicy(3, 4)
        pgr.active.fill_(True)  # V_ψ reads the IQN
        lm = small_language_model()
        prompts = [lm.tokenizer("12+", add_special_tokens=False)["input_ids"], [5, 6, 7, 8]]
        return {
            "categorical": (ActorCritic(3, 4, discrete=True), obs),
            "gaussian": (ActorCritic(3, 2, discrete=False, normalize_obs=True), obs),
            "pg_rainbow": (pgr, obs),
            "flow": (FlowPolicy(3, 2, n_mc=4, flow_steps=3), obs),
            "table": (TablePolicy(3, 4), torch.tensor([0, 2, 2, 1, 0])),
            "language_model": (lm, prompts),
        }


@pytest.mark.parametrize("name", NAMES)
def test_every_kind_is_a_policy(kinds, name):
    assert isinstance(kinds[name][0], Policy)


def test_a_module_without_evaluate_is_not_a_policy():
    class OnlySamples:
        def sample(self, inputs, *, generator=None): ...

    assert not isinstance(OnlySamples(), Policy)


@pytest.mark.parametrize("name", NAMES)
def test_evaluate_reproduces_the_sampling_logprobs(kinds, name):
    policy, inputs = kinds[name]
    generator = torch.Generator().manual_seed(1)
    if name == "language_model":
        drawn = policy.sample(inputs, generator=generator, n=2)
        evaluation = policy.evaluate(
            drawn.extras["prompt_ids"], drawn.actions, mask=drawn.mask, extras=drawn.extras
        )
        assert drawn.actions.shape[0] == 4 and drawn.logprobs.shape == drawn.mask.shape
        atol = 1e-5  # the engine's cached steps and one full forward differ in rounding
    else:
        drawn = policy.sample(inputs, generator=generator)
        evaluation = policy.evaluate(inputs, drawn.actions, extras=drawn.extras)
        assert drawn.logprobs.shape == (5,)
        atol = 1e-6
    assert isinstance(drawn, Sample) and isinstance(evaluation, Evaluation)
    assert not drawn.logprobs.requires_grad
    assert evaluation.logprobs.requires_grad
    torch.testing.assert_close(evaluation.logprobs, drawn.logprobs, atol=atol, rtol=0)
    if drawn.entropy is not None:
        torch.testing.assert_close(evaluation.entropy, drawn.entropy, atol=atol, rtol=0)
    if drawn.values is None:
        assert evaluation.values is None
    else:
        torch.testing.assert_close(evaluation.values, drawn.values, atol=1e-6, rtol=0)


def test_the_flow_policys_logprob_is_minus_its_cfm_loss_on_the_stored_draws():
    # FPO's surrogate: −mean_k ℓ[i, k] over the N_mc draws recorded at sampling time
    policy = FlowPolicy(3, 2, n_mc=4, flow_steps=3)
    obs = torch.randn(5, 3)
    drawn = policy.sample(obs, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(drawn.logprobs, -drawn.extras["fpo_old_cfm"].mean(-1))
    with pytest.raises(ValueError, match="fpo_tau"):
        policy.evaluate(obs, drawn.actions)


def test_act_is_sample_under_its_old_name():
    policy = ActorCritic(3, 4, discrete=True)
    obs = torch.randn(5, 3)
    a = policy.act(obs, torch.Generator().manual_seed(2))
    b = policy.sample(obs, generator=torch.Generator().manual_seed(2))
    assert torch.equal(a.actions, b.actions) and torch.equal(a.logprobs, b.logprobs)
