"""OffPolicyConfig: every field of `policylab train --algo ddpg --task <gymnasium id>`
(trainers/offpolicy.py). Its defaults are the `ddpg` recipe's `training` settings, each
with its source (recipes/offpolicy.py); a test keeps the two equal."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, PositiveInt, field_validator

from policylab.config import RunSchema, known_algorithm

# control network kinds trained off-policy (a recipe's `policy`): trainers/offpolicy.py
OFF_POLICY_KINDS = ("deterministic",)


def is_off_policy(algo: Any) -> bool:
    """Whether `algo` names a recipe that trains off-policy (DDPG): routing.py sends such
    gymnasium runs to trainers/offpolicy.py."""
    from policylab import recipes

    return (
        isinstance(algo, str)
        and algo in recipes.recipes
        and recipes.get(algo).policy in OFF_POLICY_KINDS
    )


class OffPolicyConfig(RunSchema):
    """DDPG on a gymnasium environment with Box actions: one environment, one gradient step
    of the critic per environment step, the actor and the targets every `policy_frequency`
    steps (CleanRL's ddpg_continuous_action.py)."""

    algo: str = Field("ddpg", description="an off-policy algorithm (ddpg)")
    task: str = Field("Pendulum-v1", description="gymnasium environment id with Box actions")
    max_episode_steps: int | None = Field(
        None, ge=1, description="truncate episodes at this many steps (None = the env's own)"
    )
    env_kwargs: dict[str, Any] = Field(
        default_factory=dict,
        description="keyword arguments of every environment, training and evaluation "
        "(gym.make); eval_env_kwargs go on top for evaluation",
    )
    total_steps: int = Field(100_000, ge=1, description="environment steps")
    lr: float = Field(3e-4, gt=0, description="Adam learning rate of actor and critic")
    schedule: str = Field("constant", description="lr schedule (constant only: as CleanRL)")
    gamma: float = Field(0.99, ge=0, le=1, description="discount γ")
    tau: float = Field(0.005, gt=0, le=1, description="soft target update θ' ← τθ + (1 − τ)θ'")
    buffer_size: int = Field(1_000_000, ge=1, description="replay capacity (transitions)")
    batch_size: int = Field(256, ge=1, description="replay minibatch")
    learning_starts: int = Field(
        100, ge=0, description="uniform random actions and no updates before this many steps"
    )
    policy_frequency: int = Field(
        2, ge=1, description="update the actor and the targets every N environment steps"
    )
    noise: Literal["gaussian", "ou"] = Field(
        "gaussian", description="exploration noise: gaussian, or ou (Ornstein–Uhlenbeck)"
    )
    exploration_noise: float = Field(
        0.1, ge=0, description="noise σ, as a fraction of the action scale (high − low)/2"
    )
    ou_theta: float = Field(0.15, gt=0, description="ou: mean reversion θ")
    ou_dt: float = Field(1e-2, gt=0, description="ou: time step dt")
    hidden: list[PositiveInt] = Field(
        default_factory=lambda: [256, 256], description="actor and critic MLP widths"
    )
    log_every: int = Field(1000, ge=1, description="a metrics row every N environment steps")
    eval_every: int = Field(
        5000, ge=0, description="evaluate every N environment steps (0 = start and end only)"
    )
    eval_episodes: int = Field(10, ge=1, description="episodes per evaluation (actor's μ(s))")
    eval_seed: int = Field(10_000, description="seed of the evaluation episodes")
    eval_env_kwargs: dict[str, Any] = Field(
        default_factory=dict, description="keyword arguments of the evaluation environments"
    )
    stop_return: float | None = Field(
        None, description="stop once the evaluation return reaches this (None = never)"
    )
    save_every: int = Field(
        0, ge=0, description="checkpoint every N environment steps (0 = only at the end)"
    )
    report_to: list[str] = Field(
        default_factory=lambda: ["tensorboard"], description="experiment trackers"
    )
    keep_checkpoints: int = Field(2, ge=0, description="newest checkpoints kept (0 = all)")
    save_best: str | None = Field(
        None, description="keep the best evaluation's actor in <run_dir>/best/ by this metric"
    )
    run_dir: str = Field("", description="run folder (default runs/<algo>-<task>-s<seed>)")
    seed: int = Field(0, description="seed of the environment, noise, replay and init")
    threads: int | Literal["auto"] = Field("auto", description="torch CPU threads (auto: ≤ 1)")
    progress: bool = Field(True, description="show the progress bar")

    @field_validator("algo")
    @classmethod
    def _off_policy_algo(cls, value: str) -> str:
        from policylab import recipes

        known_algorithm(value)
        if not is_off_policy(value):
            off = [n for n in recipes.names() if is_off_policy(n)]
            raise ValueError(
                f"algorithm {value!r} is on-policy; the off-policy trainer takes: {', '.join(off)}"
            )
        return value

    @field_validator("schedule")
    @classmethod
    def _constant_only(cls, value: str) -> str:
        if value != "constant":
            raise ValueError(f"schedule={value!r}; the off-policy trainer takes: constant")
        return value
