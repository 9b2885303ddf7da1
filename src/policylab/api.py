"""The public entry points over the registries: `policy_loss`, `advantages`,
`kl_estimator`, `value_loss`, `reward_shaping` and the `list_*` functions.

`policy_loss`, `advantages` and `value_loss` take a name and keyword overrides, and return a
callable over plain keyword tensors (nested lists are accepted too). The name follows one
rule (recipes/compose.py `_resolve`): an algorithm's name gives that recipe's component
with the recipe's defaults, even where a component has the same name (`advantages("rloo")`
has RLOO's β = 0.05 KL in the reward); a name that is only a component gives the bare
component; "component:NAME" always gives the bare registered component
(`advantages("component:rloo")`). The composition itself (bound components, `components`)
lives in recipes/compose.py and is re-exported here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from policylab import recipes as recipe_book
from policylab.algebra.aggregate import AGG_MODES
from policylab.algebra.catalogue import (
    advantage_estimators,
    kl_estimators,
    policy_losses,
    reward_shapers,
    selections,
    value_losses,
)
from policylab.algebra.options import build_options
from policylab.recipes.compose import (  # noqa: F401  (public names, re-exported)
    AdvantageEstimator,
    Components,
    PolicyLoss,
    RewardShaping,
    SelectionRule,
    ValueLoss,
    _bound,
    _float,
    _resolve,
    components,
)


def policy_loss(name: str, **overrides: Any) -> PolicyLoss:
    """The policy loss `name` with `overrides` applied: an algorithm's name gives its
    recipe's loss and defaults, "component:NAME" the bare registered loss (module docstring).

    >>> loss, metrics = policy_loss("dapo")(logprobs=lp, old_logprobs=old,
    ...                                    advantages=adv, response_mask=mask)"""
    component, defaults = _resolve(name, policy_losses, "loss")
    return _bound(
        PolicyLoss, policy_losses, component, defaults, overrides, f"policy_loss({name!r})"
    )


def advantages(name: str, **overrides: Any) -> AdvantageEstimator:
    """The advantage estimator `name` with `overrides` applied: an algorithm's name gives its
    recipe's estimator and defaults, "component:NAME" the bare registered one.

    >>> A = advantages("grpo")(rewards=[1, 0, 0, 1], group_ids=[0, 0, 0, 0])"""
    component, defaults = _resolve(name, advantage_estimators, "advantage")
    return _bound(
        AdvantageEstimator,
        advantage_estimators,
        component,
        defaults,
        overrides,
        f"advantages({name!r})",
    )


def value_loss(name: str, **overrides: Any) -> ValueLoss:
    """The value loss `name` (e.g. "value_clip", or an algorithm with a critic such as "ppo")."""
    component, defaults = _resolve(name, value_losses, "value")
    return _bound(ValueLoss, value_losses, component, defaults, overrides, f"value_loss({name!r})")


def reward_shaping(name: str, **overrides: Any) -> RewardShaping:
    """The reward-shaping rule `name` (e.g. "overlong") with `overrides` applied."""
    entry = reward_shapers.entry(name)
    options = build_options(entry.config, overrides, where=f"reward_shaping({name!r})")
    return RewardShaping(name, entry, options)


def train(
    config: Any = None,
    *,
    model: Any = None,
    tokenizer: Any = None,
    task: Any = None,
    rewards: Any = None,
    resume: bool = False,
    callbacks=(),
    **fields: Any,
):
    """Train a language model or a control policy. `config` is a TrainConfig or
    ControlConfig, a dict of fields or a YAML path; `fields` override it. The task decides
    the trainer (routing.py): a gymnasium id such as "CartPole-v1" trains a control policy
    and returns a ControlResult (run folder, evaluation returns); any other task trains a
    language model and returns a TrainResult (run folder, held-out before/after; the final
    model in <run_dir>/model). A control task may also be `module:EnvId` or
    `module:EnvClass`, or, here only, a gymnasium.Env or a function returning one
    (envs/user.py): it trains in this Python session (not with vector="async"), and
    resumes only when given again.

    Objects are accepted as TRL's GRPOTrainer accepts them (objects.py): `model` a
    transformers causal LM (trained in place) or a name ("tiny", a folder, a hub id);
    `tokenizer` a tokenizer (None: the model's own); `task` a task name, a data file or
    folder, a list of dicts or a datasets Dataset with a prompt column (and an answer
    column, or `rewards`); `rewards` functions `fn(prompts, completions, **columns)` or
    reward names, as a list or a dict reward → weight. A run given objects is resumed
    with the same objects (`resume=True`). `callbacks`: policylab.callbacks.Callback
    objects (on_step, on_eval, on_checkpoint; raise StopTraining to stop)."""
    from policylab import objects, routing

    if task is not None and not isinstance(task, str | Path):
        from policylab.envs.user import is_env_object, register_object

        if is_env_object(task):  # a control run: the environment's registered id is the task
            task = register_object(task)
    named, given = objects.gather(
        model=model,
        tokenizer=tokenizer,
        task=task,
        rewards=rewards,
        task_knobs=fields.get("task_knobs"),
    )
    cfg = routing.run_config(config, {**fields, **named})
    if objects.is_object(cfg.task) and not cfg.run_dir:  # not runs/grpo-<object: ...>-s0
        cfg.run_dir = str(Path("runs") / f"{cfg.algo}-{objects.IN_MEMORY_TASK}-s{cfg.seed}")
    if resume and not given and (saved := routing.saved_config(cfg.folder)):
        # as `policylab train --resume`: the run's saved fields are the lowest layer, so a
        # field set when it started (hidden, normalize_obs, …) need not be given again (a
        # run given objects is checked against them by check_given, objects.py)
        cfg = routing.run_config(
            config, {**fields, **named, "run_dir": str(cfg.folder)}, saved=saved
        )
    return routing.train(cfg, resume=resume, objects=given, callbacks=callbacks)


def evaluate_model(
    model: Any = "tiny",
    task: str | None = None,
    *,
    tokenizer: Any = None,
    n: int = 200,
    seed: int = 0,
    max_new_tokens: int | None = None,
    **knobs: Any,
) -> dict[str, dict[str, float]]:
    """Held-out scores {task: {eval/greedy_accuracy, eval/greedy_reward,
    eval/sampled_reward}} of `model` on `task` (a name, comma-separated names, "all", or
    a data file). `model`: a run folder (its final model/, else its latest checkpoint's),
    a model folder, "tiny", a hub id, or a model object (with `tokenizer`, None: its own).
    For a run folder, an unset `task` and `max_new_tokens` are the run's (its task_knobs
    too), and prompts are rendered as in its training (chat template or plain text);
    otherwise every task, 24 tokens, plain text. `n` beyond a task's test split is
    clamped to it (a warning)."""
    from policylab import objects, tasks
    from policylab.evaluate import evaluate
    from policylab.models import load_model
    from policylab.prompting import PLAIN, PromptFormat
    from policylab.trainers.export import run_settings

    prompt_format, ran = PLAIN, {}
    if isinstance(model, str | Path):
        ran = run_settings(model)
        if task is None and ran.get("data_in_memory"):
            raise ValueError(
                f"run {str(model)!r} was trained on data given in Python "
                f"({ran['data_in_memory']}), which its folder does not hold: name the task "
                "to evaluate on (task=<name or data file>, or --task)"
            )
        if task is None and ran.get("task"):
            task, knobs = ran["task"], {**ran.get("task_knobs", {}), **knobs}
        if max_new_tokens is None:
            max_new_tokens = ran.get("max_new_tokens")
        if ran.get("chat"):
            prompt_format = PromptFormat(
                True, ran["system_prompt"], dict(ran["chat_template_kwargs"])
            )
    # the tasks, their held-out sizes and their scorers are settled before any model loads
    names = tasks.names() if task in (None, "all") else task.split(",")
    chosen = {name: tasks.get(name, **knobs) for name in names}
    sizes = {name: tasks.eval_size(one, n) for name, one in chosen.items()}
    scorers = {
        name: _held_out_scorer(name, one, ran.get("rewards")) for name, one in chosen.items()
    }
    if isinstance(model, str | Path):
        model, loaded = load_model(ran.get("model_dir", model))
        tokenizer = objects.prepared(tokenizer) if tokenizer is not None else loaded
    else:
        _, given = objects.gather(model=model, tokenizer=tokenizer)
        model, tokenizer = given.model, given.tokenizer
    return {
        name: evaluate(
            model,
            tokenizer,
            one,
            n=sizes[name],
            seed=seed,
            max_new_tokens=max_new_tokens or 24,
            prompt_format=prompt_format,
            reward=scorers[name],
        ).as_dict()
        for name, one in chosen.items()
    }


def _held_out_scorer(name: str, task: Any, run_rewards: dict | None):
    """None when `task` scores itself (its verifier has the columns it needs), else the
    run's own rewards, as its training scored the held-out split; a data file without
    answers and no run to take rewards from is a ValueError naming the missing column."""
    from policylab import rewards

    if rewards.verifies(task, task.examples("test", 1)[0]):
        return None
    if not run_rewards:
        raise ValueError(
            f"{name}: the data has no {getattr(task, 'answer_column', 'answer')!r} column for "
            f"its verifier {getattr(task, 'reward_name', '?')!r}, and no run's rewards to score "
            "with; evaluate a run folder trained with rewards=..., or give the data answers"
        )
    try:
        return rewards.combine(run_rewards)
    except (KeyError, ValueError) as err:  # a function that lived only in that Python session
        raise ValueError(
            f"{name}: the run scored its held-out split with rewards {sorted(run_rewards)}, "
            f"which cannot all be found here ({err}); evaluate from Python after defining "
            "them, or on a task with answers"
        ) from None


def kl_estimator(name: str):
    """The KL estimator `name`: `fn(logprobs, ref_logprobs) -> per-token estimate`."""
    fn = kl_estimators.get(name)

    def estimate(logprobs, ref_logprobs):
        logprobs = _float(logprobs)
        return fn(logprobs, _float(ref_logprobs, logprobs))

    estimate.__doc__ = fn.__doc__
    return estimate


kl = kl_estimator  # DESIGN.md's public name


def list_losses() -> list[str]:
    return policy_losses.names()


def list_advantages() -> list[str]:
    return advantage_estimators.names()


def list_kl() -> list[str]:
    return kl_estimators.names()


def list_value_losses() -> list[str]:
    return value_losses.names()


def list_reward_shaping() -> list[str]:
    return reward_shapers.names()


def list_selections() -> list[str]:
    return selections.names()


def list_agg_modes() -> list[str]:
    return list(AGG_MODES)


def list_algorithms() -> list[str]:
    return recipe_book.names()
