"""Control policy kinds by name: a recipe's `policy` field names one, and the control
trainer builds it from here without asking which it is.

Each entry is `build(cfg, observation_space, action_space, training) -> (policy, helper)`:
the network (the policy protocol, policies/base.py) and an optional helper learner trained
beside the policy loss (PG-Rainbow's IQN critic from replay; None for the others). `cfg`
is the control config and `training` the recipe's run settings; each kind reads its own."""

from __future__ import annotations

from typing import Any

from policylab.policies.diffusion_chain import make_diffusion_chain_policy
from policylab.policies.flow import make_flow_policy
from policylab.policies.gsde import make_gsde_actor_critic
from policylab.policies.iqn import IQNLearner, make_pg_rainbow_policy
from policylab.policies.lm_control import make_lm_control_policy
from policylab.policies.mlp import make_actor_critic
from policylab.registry import Registry

control_policies: Registry = Registry("control policy")


def _common(cfg) -> dict[str, Any]:
    return {"hidden": tuple(cfg.hidden), "normalize_obs": cfg.normalize_obs}


@control_policies.register("mlp")
def mlp(cfg, observation_space, action_space, training):
    """An MLP actor-critic (categorical or diagonal Gaussian actions; gSDE exploration for
    Gaussian ones with `use_sde`, policies/gsde.py)."""
    if cfg.use_sde:
        sde = {"log_std_init": cfg.log_std_init, "sde_sample_freq": cfg.sde_sample_freq}
        return make_gsde_actor_critic(observation_space, action_space, **_common(cfg), **sde), None
    kwargs = {"log_std_init": cfg.log_std_init}
    return make_actor_critic(observation_space, action_space, **_common(cfg), **kwargs), None


@control_policies.register("flow")
def flow(cfg, observation_space, action_space, training):
    """FPO's flow-matching action policy (papers §16)."""
    keys = ("flow_steps", "n_mc", "cfm_reduce", "cfm_weight", "cfm_scale", "tau_sampling")
    kwargs = {k: getattr(cfg, k) for k in keys}
    return make_flow_policy(observation_space, action_space, **_common(cfg), **kwargs), None


@control_policies.register("diffusion_chain")
def diffusion_chain(cfg, observation_space, action_space, training):
    """DPPO's diffusion policy (papers/seed_generative.md G7): an ε-prediction DDPM over the
    action whose last K′ steps are trained; the critic has the run's `hidden` widths."""
    keys = ("denoising_steps", "fine_tuned_steps", "std_min", "z_clip", "denoised_clip")
    kwargs = {k: training[k] for k in keys}
    policy = make_diffusion_chain_policy(
        observation_space,
        action_space,
        hidden=tuple(training["chain_hidden"]),
        critic_hidden=tuple(cfg.hidden),
        normalize_obs=cfg.normalize_obs,
        **kwargs,
    )
    policy.critic_lr = training["critic_lr"]
    return policy, None


@control_policies.register("pg_rainbow")
def pg_rainbow(cfg, observation_space, action_space, training):
    """PG-Rainbow (papers §17): an actor-critic whose V_ψ reads an IQN critic's quantiles;
    the IQN critic learns from replay (the helper)."""
    kwargs = {k: getattr(cfg, k) for k in ("pgr_quantiles", "pgr_input")}
    policy = make_pg_rainbow_policy(observation_space, action_space, **_common(cfg), **kwargs)
    learner = IQNLearner(
        policy,
        obs_dim=policy.iqn.torso[0].in_features,
        capacity=cfg.replay_capacity,
        lr=cfg.iqn_lr,
        adam_eps=training["iqn_adam_eps"],
        kappa=cfg.iqn_kappa,
        n_tau=cfg.iqn_n_tau,
        n_tau_target=cfg.iqn_n_tau_target,
        n_tau_select=cfg.iqn_n_tau_select,
        target_every=cfg.iqn_target_every,
        replay_min=cfg.replay_min,
    )
    return policy, learner


@control_policies.register("lm_control")
def lm_control(cfg, observation_space, action_space, training):
    """FLAG-Trader's policy network (seed_agents.md §A5): a causal LM over the state text,
    an action-restricted head and a value head, top `trainable_layers` layers trained.
    It reads trade_sim's observation (daily moves, then the holding flag) as text and acts
    B/S/H: any other environment is refused before the model loads."""
    from gymnasium import spaces

    moves = getattr(observation_space, "shape", None)
    flat_box = isinstance(observation_space, spaces.Box) and moves is not None and len(moves) == 1
    if getattr(action_space, "n", None) != 3 or not flat_box:
        raise ValueError(
            f"{cfg.algo} writes trade_sim's observation as text and acts B/S/H: it needs "
            "Discrete(3) actions and a flat vector of daily moves and the holding flag "
            f"(policylab/TradeSim-v0); {cfg.task} has actions {action_space} and "
            f"observations {observation_space}"
        )
    return make_lm_control_policy(training["model"], training["trainable_layers"]), None
