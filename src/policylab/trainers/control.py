"""The control trainer: PPO on a gymnasium environment, one loop, read top to bottom.

Per iteration: collect num_envs × num_steps transitions (workflows/episodes.py) → GAE
along the time axis (algebra/advantages.py `gae_over_time`, bootstrapped at time limits)
→ `epochs` passes over shuffled minibatches: the recipe's policy loss (`ppo_clip`, via
`components`) + vf_coef · the recipe's value loss (`value_clip`) − ent_coef · entropy →
clip grad norm → optimiser step (Adam, or the recipe's `optimiser`, optimisers.py);
target-KL early stop → lr schedule → metrics, evaluation, checkpoint. One time step is
one row of the shared algebra (T = 1, token-mean = mean over steps). The run folder,
checkpoints and resume are trainers/run.py's, as for llm.py.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path

import torch

from policylab import recipes
from policylab.algebra.advantages import gae_over_time, masked_whiten
from policylab.algebra.dppo import dppo_chain_advantages, dppo_chain_loss
from policylab.algebra.generative import dppo_clip_schedule, dppo_denoise_discount
from policylab.config import ControlConfig, load, policy_fields
from policylab.envs.space_data import space_from_data, space_to_data
from policylab.envs.user import check_buildable, warn_without_time_limit
from policylab.optimisers import optimiser_of, optimisers
from policylab.policies import IQNLearner
from policylab.policies.kinds import control_policies
from policylab.recipes.compose import components
from policylab.stages.pipeline import control_pipeline
from policylab.trainers.augmented import augmented_backward, make_augmenter
from policylab.trainers.run import (
    Run,
    latest_checkpoint,
    load_state,
    lr_lambda,
    mean_metrics,
    progress_bar,
    run_options,
    torch_threads,
)
from policylab.workflows.episodes import EpisodeCollector, evaluate_policy, make_vector_env

log = logging.getLogger(__name__)

# threads="auto" caps control at one thread: its networks are a few 64-wide layers on
# batches of 8–256 rows, where a second thread only adds hand-offs (benchmarks/
# threads_under_load.py measures it)
CONTROL_MAX_THREADS = 1

CURVES = [
    "eval/return_mean",
    "rollout/episode_return",
    "pg/clipfrac",
    "vf/explained_var",
    "approx_kl",
    "entropy",
]


@dataclass
class ControlResult:
    run_dir: str
    evals: list[dict]
    env_steps: int
    seconds: float
    solved_at: dict | None  # first evaluation that reached cfg.stop_return: step, seconds


@dataclass
class ControlProgress:
    """What a control run has done: its evaluations, the first that reached
    `cfg.stop_return`, and its wall time (carried over a resume)."""

    evals: list[dict] = field(default_factory=list)
    solved_at: dict | None = None
    elapsed_before: float = 0.0
    started: float = field(default_factory=time.perf_counter)

    @property
    def elapsed(self) -> float:
        return self.elapsed_before + time.perf_counter() - self.started


def evaluation(policy, cfg: ControlConfig, run: Run, done: ControlProgress, iteration, batch_size):
    """Held-out episodes now (the policy's mode), logged at `iteration` with
    iteration × batch_size environment steps; the first evaluation after training began
    that reaches `cfg.stop_return` marks the run solved. The off-policy trainer calls it
    too (its step is one environment step: batch_size 1; an OffPolicyConfig has the same
    evaluation fields)."""
    scores = evaluate_policy(
        policy,
        cfg.task,
        cfg.eval_episodes,
        cfg.eval_seed,
        **env_arguments(cfg, evaluation=True),  # e.g. TradeSim's held-out split
    )
    scores["env_steps"] = iteration * batch_size
    scores["time/elapsed_s"] = done.elapsed
    run.log(iteration, scores, kind="eval")
    done.evals.append({"step": iteration, **scores})
    best = {"step": iteration, "policy": policy.state_dict(), "config": cfg.model_dump()}
    run.save_best(iteration, scores, best)
    # the untrained policy is evaluated too (iteration 0) but cannot count as solving it
    reached = iteration > 0 and cfg.stop_return is not None
    reached = reached and scores["eval/return_mean"] >= cfg.stop_return
    if reached and done.solved_at is None:
        done.solved_at = {"env_steps": scores["env_steps"], "seconds": scores["time/elapsed_s"]}
    return scores


def train(cfg: ControlConfig, *, resume: bool = False, callbacks=()) -> ControlResult:
    """Train the recipe's policy on `cfg.task` with `cfg.algo` (ppo: an MLP actor-critic;
    fpo: the flow policy, whose −L̂_cfm stands in for log π, papers §16; pg_rainbow: an
    IQN critic trained from replay feeds the value V_ψ that GAE uses, papers §17; dppo,
    adpo_provisional: a diffusion chain whose K′ denoising steps are the tokens of
    `chain_policy_loss`, seed_generative.md G7);
    `callbacks` (policylab.callbacks) hear of each iteration, evaluation and checkpoint."""
    with torch_threads(cfg.threads, limit=CONTROL_MAX_THREADS):
        return _train(cfg, resume, callbacks)


def _train(cfg: ControlConfig, resume: bool, callbacks=()) -> ControlResult:
    check_buildable(cfg.task, cfg.vector)  # module:Env imported, objects in this session
    warn_without_time_limit(cfg.task, cfg.max_episode_steps)
    parts = components(
        cfg.algo,
        advantage_overrides={"gamma": cfg.gamma, "lam": cfg.lam, "whiten": False},
        loss_overrides={} if cfg.clip is None else {"eps_low": cfg.clip, "eps_high": cfg.clip},
        value_overrides={"clip": cfg.value_clip},
        selection=cfg.selection,
        selection_overrides=cfg.selection_options,
    )
    pipeline = control_pipeline(parts)  # an advantage-time selection, if one is set
    if cfg.clip_schedule != "constant" and not hasattr(parts.loss.options, "eps_high"):
        raise ValueError(
            f"clip_schedule={cfg.clip_schedule!r} needs a clipped loss; "
            f"{cfg.algo}'s is {parts.loss.name!r}"
        )
    resolved = {
        "advantage": {"name": parts.advantage.name, **asdict(parts.advantage.options)},
        "loss": {"name": parts.loss.name, **asdict(parts.loss.options)},
        "value": {"name": parts.value.name, **asdict(parts.value.options)},
    }
    if cfg.init_policy is not None and not resume:
        check_init_policy(cfg)  # before the run folder: a file of another policy kind
    run = Run(
        cfg.folder,
        {**cfg.model_dump(), "resolved": resolved},
        resume=resume,
        **run_options(cfg),
        callbacks=callbacks,
    )
    torch.manual_seed(cfg.seed)
    collector = make_collector(cfg, cfg.seed)
    policy, iqn = make_policy(cfg, collector.envs)
    augmenter = make_augmenter(cfg, recipes.get(cfg.algo), collector.envs.single_observation_space)
    spaces = saved_spaces(collector.envs)
    generator = torch.Generator().manual_seed(cfg.seed)
    params = policy.ppo_parameters() if hasattr(policy, "ppo_parameters") else policy.parameters()
    optimiser = optimisers.get(optimiser_of(cfg.algo))(params, cfg)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimiser, lr_lambda(cfg, cfg.iterations))
    batch_size = cfg.num_envs * cfg.num_steps

    done, start = ControlProgress(), 0
    restored = run.load_checkpoint() if resume else None
    if restored is not None:
        _, state = restored
        policy.load_state_dict(state["policy"])
        optimiser.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        generator.set_state(state["generator"])
        if iqn is not None:
            iqn.load_state_dict(state["iqn"])
        pipeline.load_state_dict(state.get("stages") or {s.name: {} for s in pipeline})
        start = state["step"]
        done = ControlProgress(state["evals"], state["solved_at"], state["elapsed_s"])
        if isinstance(state["collector"], dict):  # a sync collector: every env's exact state
            collector.load_state_dict(state["collector"])
        else:  # none saved (async, or not plain data): restart the episodes, new seeds
            why = "written by an older policylab, which pickled them"
            if state["collector"] is None:
                why = "asynchronous, or holding objects that are not plain data"
            log.warning("the checkpoint holds no environment state (%s): episodes restart", why)
            collector.close()
            collector = make_collector(cfg, cfg.seed + start * cfg.num_envs)
        log.info("resumed %s at iteration %d", run.dir, start)
    elif cfg.init_policy is not None:  # a fresh run only: a resumed one is its checkpoint
        warm_start(policy, cfg.init_policy)  # e.g. a behaviour-cloned diffusion chain (G7.3)

    run.open_trackers()  # before the clock: their set-up is not training
    done.started = time.perf_counter()
    if start == 0:
        evaluation(policy, cfg, run, done, 0, batch_size)
    evals = done.evals
    fields = {"ret": "return", "eval": "eval", "sps": "steps/s"}
    # the bar's return is that of the last episodes to finish, carried over iterations in
    # which none did (a Pendulum iteration of 64 steps ends none of its 200-step episodes)
    shown_return = "-"
    with progress_bar(f"{cfg.algo} on {cfg.task}", cfg.iterations, fields, cfg.progress) as bar:
        job = bar.add_task(
            f"{cfg.algo} · {cfg.task}",
            total=cfg.iterations,
            completed=start,
            ret="-",
            eval=f"{evals[-1]['eval/return_mean']:.1f}",
            sps="-",
        )
        for iteration in range(start + 1, cfg.iterations + 1):
            if run.stopping:  # a callback raised StopTraining
                break
            # 1. rollouts: num_envs × num_steps transitions
            t0 = time.perf_counter()
            batch = collector.collect(policy, cfg.num_steps, generator)
            # 2. GAE along the time axis, bootstrapped at truncation
            with torch.no_grad():
                adv, returns = gae_over_time(
                    batch.rewards,
                    batch.values,
                    batch.next_values,
                    batch.terminated,
                    batch.truncated,
                    parts.advantage.options.gamma,
                    parts.advantage.options.lam,
                )
            # the advantage-time stages (none for the control recipes): the rows kept, and
            # their weights (a stage may also drop tokens: here a row is one token)
            rows, kept, _ = pipeline.keep(
                batch.rollouts, adv.reshape(-1, 1), iteration - 1, cfg.iterations
            )
            weight = torch.zeros(batch_size, 1)
            weight[rows] = kept.response_mask
            t1 = time.perf_counter()
            # 3. learn: epochs × shuffled minibatches, target-KL early stop
            loss = parts.loss
            if cfg.clip_schedule == "linear":  # ε·(1 − (k − 1)/K) in iteration k (SB3's lin_ε)
                eps = clip_range(parts.loss.options) * (1 - (iteration - 1) / cfg.iterations)
                loss = loss.with_options(eps_low=eps, eps_high=eps)
            learn = _learn(
                policy,
                optimiser,
                parts.value,
                loss,
                batch,
                adv.reshape(-1),
                returns.reshape(-1),
                cfg,
                generator,
                rows,
                weight,
                augmenter,
            )
            if iqn is not None:  # PG-Rainbow: replay the batch, M IQN steps (papers §17.4)
                iqn.push(batch, policy.normalize(collector.obs))
                learn.update(iqn.update(cfg.iqn_steps, cfg.iqn_batch, cfg.gamma, generator))
            scheduler.step()
            t2 = time.perf_counter()
            # 4. metrics, evaluation, checkpoint
            metrics = {
                "env_steps": iteration * batch_size,
                "rollout/reward_mean": float(batch.rewards.mean()),
                "rollout/episodes": len(batch.episode_returns),
                "adv/abs_mean": float(adv.abs().mean()),
                "clip": clip_range(loss.options),
                "lr": scheduler.get_last_lr()[0],
                "perf/steps_per_s": batch_size / (t2 - t0),
                "perf/collect_frac": (t1 - t0) / (t2 - t0),
                **learn,
                **pipeline.metrics(),
                # what the environment reports per episode (trade_sim: trade/sharpe, ...)
                **{f"rollout/{k}": sum(v) / len(v) for k, v in batch.episode_metrics.items()},
            }
            if batch.episode_returns:
                metrics["rollout/episode_return"] = sum(batch.episode_returns) / len(
                    batch.episode_returns
                )
                metrics["rollout/episode_length"] = sum(batch.episode_lengths) / len(
                    batch.episode_lengths
                )
                shown_return = f"{metrics['rollout/episode_return']:.1f}"
            run.log(iteration, metrics)
            last = iteration == cfg.iterations or run.stopping
            if last or (cfg.eval_every and iteration % cfg.eval_every == 0):
                evaluation(policy, cfg, run, done, iteration, batch_size)
                last = last or done.solved_at is not None or run.stopping
            if last or (cfg.save_every and iteration % cfg.save_every == 0):
                run.save_checkpoint(
                    iteration,
                    {
                        "step": iteration,
                        "env_steps": iteration * batch_size,
                        "policy": policy.state_dict(),
                        "optimizer": optimiser.state_dict(),
                        "scheduler": scheduler.state_dict(),
                        "generator": generator.get_state(),
                        "collector": collector.state_dict(),
                        "evals": evals,
                        "elapsed_s": done.elapsed,
                        "solved_at": done.solved_at,
                        "iqn": None if iqn is None else iqn.state_dict(),
                        "stages": pipeline.state_dict(),
                        "config": cfg.model_dump(),
                        "spaces": spaces,
                    },
                )
            bar.update(
                job,
                completed=iteration,
                ret=shown_return,
                eval=f"{evals[-1]['eval/return_mean']:.1f}",
                sps=f"{metrics['perf/steps_per_s']:.0f}",
            )
            if done.solved_at is not None:
                break

    seconds, solved_at = done.elapsed, done.solved_at
    collector.close()
    env_steps = evals[-1]["env_steps"]
    run.write_curves(CURVES, title=f"{cfg.algo} on {cfg.task} (seed {cfg.seed})")
    run.write_summary(summary_table(cfg, evals, env_steps, seconds, solved_at))
    run.close()
    return ControlResult(str(run.dir), evals, env_steps, seconds, solved_at)


def check_init_policy(cfg: ControlConfig) -> None:
    """init_policy must be a ControlPolicy.save file whose run's policy kind (recipes'
    `policy`) is this run's: e.g. a ppo (mlp) file cannot start a dppo (diffusion_chain)
    run. Shapes are checked when the weights load (`warm_start`)."""
    saved = policy_file(cfg.init_policy).get("config")
    if not isinstance(saved, dict):
        raise ValueError(
            f"init_policy={cfg.init_policy!r}: not a policy file written by ControlPolicy.save"
        )
    theirs = recipes.get(saved.get("algo", "ppo")).policy
    ours = recipes.get(cfg.algo).policy
    if theirs != ours:
        raise ValueError(
            f"init_policy={cfg.init_policy!r} holds a {saved.get('algo')!r} policy (policy kind "
            f"{theirs!r}); algo={cfg.algo!r} uses policy kind {ours!r}: start it from a file "
            f"of a {ours!r} run (dppo, adpo_provisional: python -m "
            "policylab.pretrain_diffusion_policy)"
        )


def policy_file(path: str) -> dict:
    """The contents of a ControlPolicy.save file (its "policy" weights, its "config")."""
    data = torch.load(Path(path), weights_only=True, map_location="cpu")
    if not isinstance(data, dict) or data.get("policy") is None:
        raise ValueError(f"init_policy={path!r}: not a policy file written by ControlPolicy.save")
    return data


def warm_start(policy: torch.nn.Module, path: str) -> None:
    """Load the weights (and observation statistics) of a ControlPolicy.save file."""
    try:
        policy.load_state_dict(policy_file(path)["policy"])
    except RuntimeError as err:
        raise ValueError(
            f"init_policy={path!r} does not fit this run's policy ({type(policy).__name__}): {err}"
        ) from None


def load_policy(run_dir: str | Path) -> torch.nn.Module:
    """The policy of a control run folder's latest checkpoint (with its observation
    statistics), ready for `act` / `evaluate_policy`."""
    path = latest_checkpoint(run_dir)
    if path is None:
        raise FileNotFoundError(f"{run_dir}: no checkpoint to load a policy from")
    state = load_state(path / "state.pt")
    cfg = load(ControlConfig, None, policy_fields(state["config"]))
    if state.get("spaces") is not None:  # no environment needed (one given in Python, too)
        spaces = state["spaces"]
        observation, action = (
            space_from_data(spaces["observation"]),
            space_from_data(spaces["action"]),
        )
        policy, _ = policy_for_spaces(cfg, observation, action)
    else:
        envs = make_vector_env(cfg.task, 1)
        policy, _ = make_policy(cfg, envs)
        envs.close()
    policy.load_state_dict(state["policy"])
    return policy


def make_collector(cfg: ControlConfig, seed: int) -> EpisodeCollector:
    """The run's environments, with reward scaling if `cfg.normalize_reward`."""
    reward_gamma = cfg.gamma if cfg.normalize_reward else None
    return EpisodeCollector(
        cfg.task,
        cfg.num_envs,
        seed,
        vector=cfg.vector,
        reward_gamma=reward_gamma,
        **env_arguments(cfg),
    )


def env_arguments(cfg, evaluation: bool = False) -> dict:
    """gym.make's arguments of a run's environments: `env_kwargs`, max_episode_steps when
    the config sets one (else the env's own limit), and for `evaluation` the
    `eval_env_kwargs` on top. A ControlConfig or an OffPolicyConfig."""
    made = dict(cfg.env_kwargs)
    if cfg.max_episode_steps is not None:
        made["max_episode_steps"] = cfg.max_episode_steps
    return {**made, **cfg.eval_env_kwargs} if evaluation else made


def clip_range(options) -> float:
    """The ratio clip ε of a ppo_clip-style loss's options (eps_high when asymmetric); nan
    for a loss without one."""
    return float(getattr(options, "eps_high", math.nan))


def make_policy(cfg: ControlConfig, envs) -> tuple[torch.nn.Module, IQNLearner | None]:
    """The recipe's control network (policies/kinds.py) and its helper learner, if any."""
    return policy_for_spaces(cfg, envs.single_observation_space, envs.single_action_space)


def policy_for_spaces(
    cfg: ControlConfig, observation_space, action_space
) -> tuple[torch.nn.Module, IQNLearner | None]:
    """`make_policy` for one environment's spaces (a saved policy is rebuilt from them)."""
    recipe = recipes.get(cfg.algo)
    build = control_policies.get(recipe.policy)
    training = {key: setting.value for key, setting in recipe.training.items()}
    return build(cfg, observation_space, action_space, training)


def saved_spaces(envs) -> dict | None:
    """The spaces of one environment as plain data (envs/space_data.py), for checkpoints;
    None for a space it cannot describe (a loader then builds the environment)."""
    try:
        return {
            "observation": space_to_data(envs.single_observation_space),
            "action": space_to_data(envs.single_action_space),
        }
    except ValueError as err:
        log.info("the checkpoints will not hold the spaces: %s", err)
        return None


def _learn(
    policy,
    optimiser,
    value_loss,
    policy_loss,
    batch,
    adv,
    returns,
    cfg,
    generator,
    kept,
    weight,
    augmenter=None,
) -> dict[str, float]:
    """`cfg.epochs` passes of shuffled minibatches of the `kept` rows (each weighted by
    `weight` [B, 1], 0/1); stops early once the approximate KL (Schulman's k3,
    E[(r − 1) − log r]) of a minibatch exceeds `cfg.target_kl`. With an `augmenter` the
    gradient is that of augmented observations (trainers/augmented.py)."""
    params = [p for group in optimiser.param_groups for p in group["params"]]
    every_row = bool(weight.all())  # no selection dropped a row: no minibatch can be empty
    history: list[tuple[float, dict[str, float]]] = []
    # the trainer's own per-minibatch figures stay tensors until the iteration ends: one
    # conversion to Python floats (the same values) instead of four per minibatch
    own: list[torch.Tensor] = []
    stopped = False
    for _ in range(cfg.epochs):
        order = kept[torch.randperm(len(kept), generator=generator)]
        for rows in order.split(cfg.minibatch_size):
            mask = weight[rows]
            losses = partial(
                _pass_loss, policy, policy_loss, value_loss, batch, rows, adv, returns, mask, cfg
            )
            if augmenter is None:
                result = losses(batch.obs[rows], skip_empty=not every_row)
                if result is None:  # a selection left this minibatch nothing
                    continue
                loss, entropy, approx_kl, pg, vf = result
                optimiser.zero_grad(set_to_none=True)
                loss.backward()
            else:  # K augmented passes combined into .grad (trainers/augmented.py)
                if not every_row and not mask.any():
                    continue
                loss, entropy, approx_kl, pg, vf = augmented_backward(
                    augmenter, losses, batch.obs[rows], params, generator
                )
            norm = torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip or math.inf)
            optimiser.step()
            with torch.no_grad():
                own.append(torch.stack([loss, entropy, approx_kl, norm.to(loss.dtype)]))
            history.append((1.0, {**pg, **vf}))
            if cfg.target_kl is not None and float(approx_kl) > cfg.target_kl:
                stopped = True
                break
        if stopped:
            break
    for (_, metrics), values in zip(history, torch.stack(own).tolist() if own else [], strict=True):
        metrics.update(zip(("loss", "entropy", "approx_kl", "grad_norm"), values, strict=True))
    out = mean_metrics(history)
    out["updates"] = len(history)
    out["early_stop"] = float(stopped)
    if getattr(policy, "log_std", None) is not None:
        out["policy/std"] = float(policy.log_std.detach().exp().mean())
    return out


def _pass_loss(
    policy, policy_loss, value_loss, batch, rows, adv, returns, mask, cfg, obs, skip_empty=False
):
    """One minibatch's PPO loss on observations `obs` (the rollout's, or augmented ones):
    (loss, entropy mean, approximate KL, policy-loss metrics, value-loss metrics); None
    when `skip_empty` and the mask keeps no row."""
    rollouts = batch.rollouts
    extras = {key: value[rows] for key, value in rollouts.extras.items()}
    logp, entropy, values = policy.evaluate(obs, rollouts.actions[rows], extras=extras)
    if skip_empty and not mask.any():
        return None
    a = adv[rows].unsqueeze(-1)
    if cfg.norm_adv and len(rows) > 1:
        a = masked_whiten(a, mask, unbiased=True)
    if logp.dim() == 2:  # a diffusion chain: its K′ denoising steps are the tokens (DPPO)
        old_logp = extras["chain_logp"]
        pg_loss, pg = chain_policy_loss(cfg.algo, logp, old_logp, a, mask, policy_loss)
    else:
        old_logp = rollouts.logprobs[rows, 0]
        pg_loss, pg = policy_loss(
            logprobs=logp.unsqueeze(-1),
            old_logprobs=old_logp.unsqueeze(-1),
            advantages=a,
            response_mask=mask,
        )
    v_loss, vf = value_loss(
        values.unsqueeze(-1),
        rollouts.values[rows, 0].unsqueeze(-1),
        returns[rows].unsqueeze(-1),
        mask,
    )
    loss = pg_loss + cfg.vf_coef * v_loss - cfg.ent_coef * entropy.mean()
    with torch.no_grad():
        log_ratio = logp - old_logp
        approx_kl = ((log_ratio.exp() - 1) - log_ratio).mean()
    return loss, entropy.mean(), approx_kl, pg, vf


def chain_policy_loss(algo, logp, old_logp, adv, mask, policy_loss):
    """DPPO's loss over a row's K′ steps (algebra/dppo.py): the normalised row advantage
    clipped to the recipe's quantiles and discounted over the steps, PPO-clipped per step
    with ε_k from clip_base to the loss's ε (papers/seed_generative.md G7.1)."""
    training = {k: s.value for k, s in recipes.get(algo).training.items()}
    steps = logp.shape[1]
    discount = dppo_denoise_discount(steps, training["gamma_denoise"])
    eps = dppo_clip_schedule(
        steps, training["clip_base"], policy_loss.options.eps_high, training["clip_rate"]
    )
    a = dppo_chain_advantages(adv, mask, discount, tuple(training["adv_quantiles"]))
    return dppo_chain_loss(logp, old_logp, a, mask, eps)


def summary_table(
    cfg: ControlConfig, evals: list[dict], env_steps: int, seconds: float, solved_at
) -> str:
    """summary.md: evaluation return before and after, and the run's throughput."""
    before, after = evals[0], evals[-1]
    best = max(evals, key=lambda e: e["eval/return_mean"])
    lines = [
        f"# {cfg.algo} on {cfg.task} (seed {cfg.seed})",
        "",
        f"| evaluation ({cfg.eval_episodes} episodes, policy's mode) | return |",
        "|---|---|",
        f"| before training | {before['eval/return_mean']:.1f} |",
        f"| after {after['env_steps']} steps | {after['eval/return_mean']:.1f} |",
        f"| best (at {best['env_steps']} steps) | {best['eval/return_mean']:.1f} |",
        "",
        f"{env_steps} environment steps in {seconds:.1f} s "
        f"({env_steps / max(seconds, 1e-9):.0f} steps/s overall).",
    ]
    if solved_at is not None:
        lines.append(
            f"Evaluation return first reached {cfg.stop_return} at "
            f"{solved_at['env_steps']} steps, {solved_at['seconds']:.1f} s."
        )
    return "\n".join(lines) + "\n"
