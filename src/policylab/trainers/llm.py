"""The language-model trainer: one loop, read top to bottom.

Per step: the stages prepare (VAS's scoring pass) → the rollout source yields
prompts_per_step kept groups (prompts from the prompt stage, G samples each, annotated,
augmented, filtered and refilled; or stored offline groups) → reward shaping and the
reference's log-probs → advantages (the recipe's estimator), then the advantage-time
stages (D³S) → μ epochs over minibatches of whole groups, each accumulated over
micro-batches with the minibatch's global normaliser, learn-time stages (CAPO) masking
tokens → clip grad norm → AdamW step → metrics. Held-out evaluation before training,
every `eval_every` steps and at the end; the run ends after `steps` steps, or earlier
once `max_samples` samples were generated. The loop names no method: what varies is in
the recipe's components (recipes.py) and stages (stages/).
"""

from __future__ import annotations

import copy
import logging
import math
import time
from dataclasses import asdict, dataclass, field

import torch

from policylab import lora, rewards, tasks
from policylab.algebra.advantages import Estimate, group_stats, value_targets
from policylab.algebra.options import build_options
from policylab.algebra.shaping import shape_rewards
from policylab.config import ConfigError, TrainConfig
from policylab.devices import Precision, place
from policylab.distributed import ddp
from policylab.engines import Sampling, make_engine
from policylab.evaluate import METRICS as EVAL_METRICS
from policylab.evaluate import evaluate
from policylab.models import load_model, resolve_model_path, sequence_logprobs
from policylab.objects import RunObjects, is_object
from policylab.policies.frozen import frozen_actor
from policylab.policies.language_model import LanguageModelPolicy
from policylab.policies.policy_set import PolicySet
from policylab.prompting import PromptFormat, check_chat_template, require_chat_template
from policylab.recipes.base import GENERIC_POLICY
from policylab.recipes.compose import Components, components, recipe_rewards
from policylab.rewards.counts import FAULTS as reward_faults
from policylab.stages import Budget, Pipeline, RolloutSource, StageContext, build_pipeline
from policylab.stages.pipeline import WORKFLOW_COLUMNS
from policylab.trainers.export import model_card, save_final_model
from policylab.trainers.llm_update import update
from policylab.trainers.run import Run, lr_lambda, progress_bar, run_options, torch_threads
from policylab.workflows.agents import (
    AGENT_COLUMNS,
    AgentOptions,
    MultiTurn,
    evaluate_episodes,
    regroup,
)
from policylab.workflows.single_turn import SingleTurn
from policylab.workflows.spark import RecycleOptions, recycle_options, recycling

log = logging.getLogger(__name__)

CURVES = [
    "reward/mean",
    "eval/greedy_accuracy",
    "eval/sampled_reward",
    "kl/ref",
    "entropy",
    "response/length",
]


@dataclass
class TrainResult:
    run_dir: str
    before: dict[str, float]
    after: dict[str, float]
    steps: int
    seconds: float


@dataclass
class Plan:
    """Everything a run of `cfg` uses that can be checked before any model loads."""

    parts: Components
    task: tasks.Task
    reward_fn: rewards.CombinedReward
    pool: list[dict]
    pipeline: Pipeline
    resolved: dict
    agent: AgentOptions | None = None  # multi-turn tasks: the agent workflow's options
    roles: tuple[str, ...] = ("policy",)
    grouping: str | None = None  # keys that regroup the collected rows (None: as collected)
    eval_n: int = 0  # held-out examples per evaluation: cfg.eval_n, at most the test split
    lora: lora.LoraOptions | None = None  # adapters on a frozen base (None: full fine-tuning)
    objects: RunObjects = field(default_factory=RunObjects)  # given in Python (objects.py)
    recycle: RecycleOptions | None = None  # SPARK: steps' groups recycled into reward periods


@dataclass
class Progress:
    """What a run has done: restored on resume, saved in every checkpoint."""

    step: int = 0
    evals: list[dict] = field(default_factory=list)
    budget: Budget = field(default_factory=Budget)
    elapsed_before: float = 0.0  # wall time of the earlier processes of this run
    started: float = field(default_factory=time.perf_counter)

    @property
    def elapsed(self) -> float:
        return self.elapsed_before + time.perf_counter() - self.started


def train(
    cfg: TrainConfig, *, resume: bool = False, objects: RunObjects | None = None, callbacks=()
) -> TrainResult:
    """Train `cfg.model` on `cfg.task` with the algorithm `cfg.algo`; `objects` are the
    model, tokenizer, data or rewards given in Python that `cfg` names (objects.py);
    `callbacks` (policylab.callbacks) hear of each step, evaluation and checkpoint, and may
    stop it. `distributed=ddp`: run on every rank (distributed/ddp.py); rank 0's result."""
    if ddp.needs_launch(cfg):  # workers=N: start them; under torchrun: join its group
        return ddp.start(train, cfg, resume=resume, objects=objects, callbacks=callbacks)
    with torch_threads(cfg.threads):  # "auto": the free cores (trainers/run.py auto_threads)
        return _train(cfg, resume, objects, callbacks)


def _train(cfg: TrainConfig, resume: bool, objects: RunObjects | None, callbacks) -> TrainResult:
    world = ddp.world_of(cfg)
    plan = compose(cfg, objects)
    parts, task, pipeline = plan.parts, plan.task, plan.pipeline
    ddp.check(plan, world)
    run = ddp.run_folder(  # a DDP job: rank 0 writes the folder, the others a scratch one
        world,
        cfg.folder,
        {**cfg.model_dump(), "resolved": plan.resolved},
        resume=resume,
        **run_options(cfg),
        callbacks=callbacks,
    )
    torch.manual_seed(cfg.seed)
    policies, reference = learners(cfg, plan)
    generator = torch.Generator().manual_seed(cfg.seed)
    workflow = make_workflow(cfg, plan, policies, ddp.sampling_generator(generator, world))
    workflow = ddp.shard(workflow, world, generator)  # DDP: each rank its share of a round
    ddp.same_start(policies, world)
    done = Progress()
    ctx = StageContext(plan.pool, workflow, done.budget, run.dir, cfg.prompts_per_step)
    pipeline.setup(ctx)  # e.g. the offline set, sampled (and charged) or read back
    source = RolloutSource(plan.pool, pipeline, workflow, done.budget, cfg)
    if plan.agent is not None and plan.agent.train_phase == "none":  # baselines: no rows
        source.on_exhaust, source.max_rounds = "train_partial", 1  # one round a step
    if plan.recycle is not None:  # SPARK: infer periods recycled into reward periods
        sampling = ddp.sampling_generator(generator, world)
        source = recycling(
            source, policies(0), task, plan.pool, plan.recycle, cfg, sampling, done.budget
        )
    if resume and (restored := run.load_checkpoint()) is not None:
        restore(restored, policies, pipeline, generator, done, source)
        sync_engines(policies)  # the engine samples from the restored weights
        log.info("resumed %s at step %d", run.dir, done.step)
    unscored = rewards.UnscoredSteps(cfg.max_unscored_steps)
    reward_faults.take()  # a run counts its own samples' faults, not an earlier run's

    if done.step == 0:
        held_out(policies, plan, cfg, run, done)
        log.info(
            "with one inner epoch the policy loss is ~0 at every step (ratio 1, centred "
            "advantages) while its gradient is not: watch reward, grad_norm and "
            "adv/zero_std_frac instead"
        )
    with progress_bar(f"{cfg.algo} on {task.name}", cfg.steps, BAR_FIELDS, cfg.progress) as bar:
        latest = f"{done.evals[-1]['eval/greedy_accuracy']:.2f}"
        job = bar.add_task(
            f"{cfg.algo} · {task.name}",
            total=cfg.steps,
            completed=done.step,
            **{"reward": "-", "acc": latest, "tps": "-", "split": "-"},
        )
        while (
            done.step < cfg.steps
            and not out_of_budget(cfg, pipeline, done.budget)
            and not run.stopping  # a callback raised StopTraining
        ):
            done.step += 1
            plan.reward_fn.at_step(
                done.step - 1, epoch=(done.step - 1) * cfg.prompts_per_step / len(plan.pool)
            )
            # 1. rollouts: the stages' preparation, then the kept groups of this step,
            # regrouped by the run's grouping keys (agents: instance, turn, role)
            t0 = time.perf_counter()
            pipeline.prepare(done.step - 1, ctx)
            collected = source.next()
            batch, info = regroup(collected.batch, plan.grouping), collected.info
            t1 = time.perf_counter()
            batch = shape_rewards(batch, parts.shaping, cfg.max_new_tokens)
            batch = score_old(batch, reference, policies, cfg)  # reference, critic
            # 2. advantages on the kept groups, then the advantage-time stages; a step that
            # kept no group (on_exhaust=train_partial) makes no update
            kept = len(batch) > 0
            estimate = (
                parts.advantage.estimate(batch) if kept else Estimate(batch.response_mask.float())
            )
            advantages, batch = estimate.advantages, batch.with_extras(estimate.columns)
            scored = (batch, advantages)
            if kept:
                batch, advantages = pipeline.select(batch, advantages, done.step - 1, cfg.steps)
            t2 = time.perf_counter()
            # 3. learn: each policy on its roles' rows, μ epochs × minibatches × micro-batches
            learn = {}
            if kept:
                learn = learn_all(policies, parts, batch, advantages, cfg, generator, pipeline)
                sync_engines(policies)  # the next rollouts sample from the updated weights
            t3 = time.perf_counter()
            source.update(collected)
            # 4. metrics, samples, evaluation, checkpoint
            lr = policies.members[0].scheduler.get_last_lr()[0]
            metrics = _step_metrics(*scored, info, learn, lr, t0, t1, t2, t3)
            metrics.update({**estimate.metrics, **pipeline.metrics(), **done.budget.as_metrics()})
            metrics.update(getattr(source, "metrics", dict)())  # recycling's spark/*
            run.log(done.step, metrics)
            run.log_samples(done.step, _samples(info, collected.outcomes, cfg.samples_per_log))
            unscored.check(done.step, info.reward_counts)  # warns; stops a run that scores nothing
            last = done.step == cfg.steps or out_of_budget(cfg, pipeline, done.budget)
            last = last or run.stopping
            if last or (cfg.eval_every and done.step % cfg.eval_every == 0):
                held_out(policies, plan, cfg, run, done)
            if last or run.stopping or (cfg.save_every and done.step % cfg.save_every == 0):
                state = checkpoint_state(done, policies, pipeline, generator, source)
                model, tokenizer = saved_model(policies), policies(0).tokenizer
                run.save_checkpoint(done.step, state, model=model, tokenizer=tokenizer)
            bar.update(job, completed=done.step, **_bar(metrics, done.evals[-1]))

    before, after = done.evals[0], done.evals[-1]
    card = model_card(run.dir, cfg, plan.resolved, done.evals)
    if run.keeps_outputs:  # a DDP rank other than 0 would write a full model to scratch
        save_final_model(run.dir, saved_model(policies), policies(0).tokenizer, card)
    run.write_curves(CURVES, title=f"{cfg.algo} on {task.name} (seed {cfg.seed})")
    rows = run.metrics("train")
    summary = summary_table(cfg, before, after, rows, done.elapsed, done.step, done.budget.samples)
    run.write_summary(summary)
    run.close()
    return TrainResult(str(run.dir), before, after, done.step, done.elapsed)


def learners(cfg: TrainConfig, plan: Plan) -> tuple[PolicySet, torch.nn.Module | None]:
    """The policies (one per role under the per_role regime, else one) with their
    optimisers and lr schedules, and the frozen reference model when a KL needs one (with
    LoRA, the policy's own model, scored with its adapters off: no second copy)."""
    parts = plan.parts
    precision = Precision.of(cfg.device, cfg.dtype)  # float32 weights; autocast forwards
    model, tokenizer = plan.objects.model_and_tokenizer(cfg.model)
    if plan.lora is not None:
        if plan.objects.model is not None:  # peft rewrites the layers it wraps: not the user's
            model = copy.deepcopy(model)
        model = lora.apply_lora(model, plan.lora)
    place(model, precision, gradient_checkpointing=cfg.gradient_checkpointing)
    reference = None
    if needs_reference(parts):  # with LoRA: the policy's own model, its adapters off
        # placed as the policy, so that it scores as the initial policy did
        reference = model if plan.lora else place(plan.objects.reference(cfg.model), precision)
    sampling = Sampling(
        temperature=cfg.temperature,
        top_p=cfg.top_p,
        top_k=cfg.top_k,
        max_new_tokens=cfg.max_new_tokens,
        stop_strings=tuple(cfg.stop_strings),
    )
    engine = make_engine(
        cfg.engine, cfg.vllm, model, tokenizer, model_path=_model_path(cfg.model), seed=cfg.seed
    )
    policy = LanguageModelPolicy(
        model,
        tokenizer,
        sampling=sampling,
        engine=engine,
        value_head=parts.value is not None,
        packing=cfg.packing,
    ).to(precision.device)
    updates = cfg.steps * cfg.epochs * cfg.minibatches

    def optimiser_of(member: LanguageModelPolicy):
        trained = [p for p in member.parameters() if p.requires_grad]  # LoRA: the adapters
        opt = torch.optim.AdamW(trained, lr=cfg.lr, weight_decay=cfg.weight_decay)
        return opt, torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda(cfg, updates))

    regime = plan.agent.regime if plan.agent is not None else "shared"
    policies = PolicySet.build(policy, len(plan.roles), regime, optimiser_of)
    for member in policies.members:
        member.scaler = precision.grad_scaler()  # float16 only
    if plan.agent is not None and plan.agent.actor:  # a frozen role (Retroformer's actor)
        policies.actor = frozen_actor(plan.agent.actor, tokenizer, precision, sampling)
    return policies, reference


def _model_path(name: str) -> str:
    """What a colocated vLLM loads: the model's folder or hub id ("" for a model object,
    which `compose` refuses with engine=vllm)."""
    return "" if is_object(name) else resolve_model_path(name)


def sync_engines(policies: PolicySet) -> None:
    """Each policy's engine gets its model's current weights (HFEngine shares the model
    object: nothing moves; vLLM: engines/vllm.py)."""
    for member in policies.members:
        member.policy.engine.load_weights(member.policy.model.state_dict())


def needs_reference(parts: Components) -> bool:
    """Whether a KL term (in the loss or in the reward) reads a reference model."""
    kl_in_reward = getattr(parts.advantage.options, "kl_coef", 0.0) > 0
    return parts.loss.options.needs_reference or kl_in_reward


def make_workflow(cfg: TrainConfig, plan: Plan, policies: PolicySet, generator):
    """The single-turn workflow, or episodes of an interactive task (`task.env`)."""
    if plan.agent is not None:
        return MultiTurn(
            policies,
            plan.task,
            plan.agent,
            cfg.samples_per_prompt,
            generator,
            cfg.temperature,
            cfg.top_p,
            annotators=plan.pipeline.annotators,
        )
    return SingleTurn(
        policies(0),
        plan.task,
        cfg.samples_per_prompt,
        plan.reward_fn,
        generator,
        mask_truncated=cfg.mask_truncated,
        annotators=plan.pipeline.annotators,
        prompt_format=PromptFormat.of(cfg),
    )


def learn_all(policies: PolicySet, parts, batch, advantages, cfg, generator, pipeline) -> dict:
    """`update` of each policy on its roles' rows (every row for a single policy); metrics
    of policy k prefixed `p<k>/` when there are several. With a critic, its targets (GAE's
    Â + V, never whitened) ride along as `extras["returns"]`."""
    if parts.value is not None:
        batch = batch.with_extras({"returns": value_targets(batch, parts.advantage.options)})
    out: dict[str, float] = {}
    for k, member in enumerate(policies.members):
        rows = policies.rows_of(k, batch.agent_ids)
        part, adv = (batch, advantages) if rows is None else (batch.select(rows), advantages[rows])
        if len(part) == 0:
            continue
        metrics = update(
            member.policy,
            member.optimiser,
            member.scheduler,
            parts.loss,
            part,
            adv,
            cfg,
            generator,
            token_mask=pipeline.token_mask,
            value_loss=parts.value,
            scaler=member.scaler,
        )
        prefix = f"p{k}/" if len(policies) > 1 else ""
        out.update({prefix + name: value for name, value in metrics.items()})
    return out


def compose(cfg: TrainConfig, objects: RunObjects | None = None) -> Plan:
    """The run's components, task, rewards, training prompts and stages, every option
    checked before any model loads or any folder is made."""
    objects = objects or RunObjects()
    parts = components(
        cfg.algo,
        max_new_tokens=cfg.max_new_tokens,
        advantage_overrides=cfg.advantage,
        loss_overrides=cfg.loss,
        selection=cfg.selection,
        selection_overrides=cfg.selection_options,
        shaping_overrides=cfg.reward_shaping,
    )
    if parts.recipe.policy != GENERIC_POLICY:
        # an embedded task may have a gymnasium twin (trade_sim: policylab/TradeSim-v0)
        twin = (
            getattr(tasks.task_classes.get(cfg.task), "gym_id", None)
            if cfg.task in tasks.names()
            else None
        )
        raise ConfigError(
            f"{cfg.algo!r} trains a {parts.recipe.policy} network, a control policy: use it "
            "on a gymnasium task" + (f" ({cfg.task}'s is --task {twin})" if twin else "")
        )
    if parts.value is not None and not hasattr(parts.advantage.options, "lam"):
        raise ConfigError(
            f"{cfg.algo!r}: a critic learns the targets of GAE; its advantage estimator "
            f"{parts.advantage.name!r} has none (use advantage gae)"
        )
    task = objects.task or tasks.get(cfg.task, **cfg.task_knobs)
    if cfg.chat:  # the tokenizer has a template, before any weights load
        try:
            if objects.tokenizer is not None:  # given in Python: that one renders
                require_chat_template(objects.tokenizer, cfg.model)
            else:
                check_chat_template(cfg.model)
        except ValueError as err:
            raise ConfigError(str(err)) from None
    if isinstance(task, tasks.FileTask):  # every prompt + max_new_tokens fits the context
        objects.check_fits(task, cfg.model, cfg.max_new_tokens, PromptFormat.of(cfg))
    # the task's own verifier, built with this run's knobs, answers to the task's name
    pool = task.examples(
        "train",
        min(cfg.train_pool, getattr(task, "rows", {}).get("train", cfg.train_pool)),
        seed=cfg.seed,
    )
    # the run's rewards, else the recipe's own (when the data has their columns), else the
    # task's verifier, built with this run's knobs, which answers to the task's name
    weights = cfg.rewards or recipe_rewards(parts.recipe, pool[0])
    default_reward = task.name if cfg.task in tasks.names() else task.reward_name
    reward_fn = rewards.combine(
        weights or {default_reward: 1.0},
        failure_reward=cfg.failure_reward,
        functions={task.name: task.reward},
        timeout_s=cfg.reward_timeout_s,
        failure_limit=cfg.reward_failure_limit,
    )
    reward_fn.at_step(0, max_steps=cfg.steps)
    if not weights and not rewards.verifies(task, pool[0]):
        raise ConfigError(
            f"{task.name}: the data has no {getattr(task, 'answer_column', 'answer')!r} "
            f"column, which its verifier {task.reward_name!r} needs: give the run its "
            "rewards (rewards = {name: weight}), or the data an answer column"
        )
    if cfg.offline_prompts > len(pool):
        raise ConfigError(
            f"offline_prompts = {cfg.offline_prompts} exceeds the {len(pool)} training prompts "
            f"of {task.name} (train_pool = {cfg.train_pool})"
        )
    agent, roles, grouping = agent_plan(cfg, parts, task, pool[0])
    if cfg.chat and agent is not None:
        raise ConfigError(
            f"chat=True renders single-turn prompts; {task.name} is multi-turn, its "
            "observations are plain text in one transcript (set chat=False)"
        )
    if cfg.save_best and agent is None and cfg.save_best not in EVAL_METRICS:
        raise ConfigError(
            f"save_best = {cfg.save_best!r} is not a metric of {task.name}'s held-out "
            f"evaluation; choices: {', '.join(EVAL_METRICS)}"
        )
    provided = WORKFLOW_COLUMNS | (AGENT_COLUMNS if agent is not None else frozenset())
    pipeline = build_pipeline(cfg, parts, len(pool), provided=provided)
    resolved = {
        "advantage": {"name": parts.advantage.name, **asdict(parts.advantage.options)},
        "loss": {"name": parts.loss.name, **asdict(parts.loss.options)},
        "selection": {"name": parts.selection.name, **asdict(parts.selection.options)},
        "sampler": {"name": pipeline.prompts.name, **asdict(pipeline.prompts.options)},
        "stages": pipeline.describe(),
        "rewards": weights or {default_reward: 1.0},
    }
    if agent is not None:
        resolved["agent"] = asdict(agent)
    eval_n = tasks.eval_size(task, cfg.eval_n)  # a small test split clamps it (a warning)
    adapters = lora.options(cfg.lora)
    if adapters is not None and adapters.bias != "none" and needs_reference(parts):
        raise ConfigError(
            f"lora.bias = {adapters.bias!r} trains the base model's biases, which disabling the "
            f"adapters does not undo, so {cfg.algo}'s KL reference would drift from the initial "
            "model; accepted with a KL: bias none (or switch the KL off)"
        )
    if objects:
        resolved["objects"] = objects.describe()
    check_engine(cfg, agent, adapters)
    recycle = recycle_plan(cfg, parts, agent, pipeline)
    return Plan(
        parts,
        task,
        reward_fn,
        pool,
        pipeline,
        resolved,
        agent,
        roles,
        grouping,
        eval_n,
        adapters,
        objects,
        recycle,
    )


def recycle_plan(
    cfg: TrainConfig, parts: Components, agent, pipeline: Pipeline
) -> RecycleOptions | None:
    """SPARK's recycling options (the recipe's, updated by `recycle`), checked: it recycles
    single-turn, plain-text, online groups of the pool's own prompts, and its reward
    periods are plain generation (no annotator fills their columns)."""
    try:
        options = recycle_options(parts.recipe, cfg.recycle)
    except ValueError as err:
        raise ConfigError(str(err)) from None
    if options is not None and cfg.distributed != "none":
        raise ConfigError(
            f"{cfg.algo} with distributed={cfg.distributed}: reward periods are not sharded "
            "across ranks yet; accepted: distributed none"
        )
    if options is not None and (agent is not None or cfg.chat or cfg.offline_prompts):
        raise ConfigError(
            f"{cfg.algo} recycles the groups of single-turn, plain-text, online steps; "
            f"accepted: a single-turn task with chat=False and offline_prompts=0 (got task "
            f"{cfg.task}, chat={cfg.chat}, offline_prompts={cfg.offline_prompts})"
        )
    staged = [stage.name for stage in (*pipeline.annotators, *pipeline.augmenters)]
    if options is not None and staged:
        # an augmenter rolls out variant questions (the judge labels would be the original's);
        # an annotator's columns (answers, entropies) are not filled in reward periods
        raise ConfigError(
            f"{cfg.algo} with recycling: the stages {', '.join(staged)} change or annotate "
            "rollouts, which reward periods do not reproduce; accepted: recycling with "
            "recipes and options without annotators or augmenters (grpo, spark, …)"
        )
    return options


def check_engine(cfg: TrainConfig, agent: AgentOptions | None, adapters) -> None:
    """engine=vllm: one policy of full weights that vLLM can load by name."""
    if cfg.engine != "vllm":
        return
    if agent is not None and agent.regime != "shared":
        raise ConfigError(
            f"engine=vllm with agent.regime = {agent.regime!r}: one vLLM engine serves one "
            "policy; accepted: regime shared (or engine hf)"
        )
    if adapters is not None:
        raise ConfigError("engine=vllm does not sync LoRA adapters yet: drop lora (or engine hf)")
    colocated = cfg.vllm.get("mode", "colocate") == "colocate"
    if colocated and (
        cfg.device == "cpu" or cfg.device.startswith("cuda:") and cfg.device != "cuda:0"
    ):
        raise ConfigError(
            f"engine=vllm (colocate) with device={cfg.device!r}: vLLM places itself on the "
            "process's first GPU, so the learner must be there too; accepted: device auto, "
            "cuda or cuda:0 (or engine hf)"
        )
    if is_object(cfg.model) and cfg.vllm.get("mode", "colocate") == "colocate":
        raise ConfigError(
            "engine=vllm (colocate) loads the model from a folder or hub id; a model given "
            "as a Python object has none: save it (save_pretrained) and pass its folder"
        )


def agent_plan(cfg: TrainConfig, parts: Components, task, example: dict):
    """(AgentOptions, role names, grouping keys) of an interactive task (one with
    `task.env`): the recipe's workflow options updated by the config's `agent` field; for
    a single-turn task (None, ("policy",), None), and agent options are refused."""
    if not hasattr(task, "env"):
        if cfg.agent or parts.recipe.workflow_options:
            what = f"agent = {cfg.agent}" if cfg.agent else f"{cfg.algo} (an agent recipe)"
            classes = tasks.task_classes
            interactive = [n for n in classes.names() if hasattr(classes.get(n), "env")]
            raise ConfigError(
                f"{what} needs a multi-turn task ({', '.join(interactive)}, or a task with "
                f"an env method: docs/agents.md); {task.name} is single-turn"
            )
        return None, ("policy",), None
    defaults = parts.recipe.component_defaults("workflow")
    agent = build_options(AgentOptions, {**defaults, **cfg.agent}, where="agent")
    if agent.actor:
        try:
            resolve_model_path(agent.actor)
        except FileNotFoundError as err:
            raise ConfigError(f"agent.actor = {agent.actor!r}: {err}") from None
    roles = tuple(task.env(example).roles)
    return agent, roles, agent.grouping


def held_out(policies: PolicySet, plan: Plan, cfg: TrainConfig, run: Run, done: Progress) -> dict:
    """Held-out scores now, logged at the current step with the budget spent so far:
    greedy and sampled answers, or episodes of an interactive task."""
    if plan.agent is not None:
        scores = evaluate_episodes(
            policies, plan.task, plan.agent, n=plan.eval_n, seed=cfg.eval_seed
        )
    else:
        # a task with no verifier of its own (a data file without answers) is scored with
        # the run's rewards, as its training samples are
        own = rewards.verifies(plan.task, plan.pool[0])
        if not own:
            plan.reward_fn.at_step(done.step)
        scores = evaluate(
            policies(0).model,
            policies(0).tokenizer,
            plan.task,
            n=plan.eval_n,
            seed=cfg.eval_seed,
            max_new_tokens=cfg.max_new_tokens,
            prompt_format=PromptFormat.of(cfg),
            reward=None if own else plan.reward_fn,
        ).as_dict()
    scores.update(done.budget.as_metrics())
    scores["time/elapsed_s"] = done.elapsed
    run.log(done.step, scores, kind="eval")
    done.evals.append({"step": done.step, **scores})
    run.save_best(
        done.step, scores, {"step": done.step}, saved_model(policies), policies(0).tokenizer
    )
    return scores


def saved_model(policies: PolicySet):
    """What checkpoints, best/ and model/ save: the policy's model (with LoRA, its merged
    weights in the folder and the adapters alone in its adapter/ subfolder)."""
    return lora.for_saving(policies(0).model)


def out_of_budget(cfg: TrainConfig, pipeline: Pipeline, budget: Budget) -> bool:
    """The sample or token budget is spent (a prompt stage that generates nothing, such as
    offline data, never runs out)."""
    spends = bool(pipeline.prompts.spends)
    over = (cfg.max_samples and budget.samples >= cfg.max_samples) or (
        cfg.max_tokens and budget.tokens >= cfg.max_tokens
    )
    return bool(over) and spends


def score_old(batch, reference, policies: PolicySet, cfg: TrainConfig):
    """The batch with the reference's log-probs (when a KL needs them), the critic's
    values V(s_t) [B, T] at rollout time (recipes with a value head), and with tis_cap the
    learner's own old log-probs in place of the engine's (kept as
    extras["sampler_logprobs"], truncated importance sampling's denominator)."""
    if len(batch) == 0:
        return batch
    if reference is not None:
        tokenizer = policies(0).tokenizer
        batch = batch.replace(ref_logprobs=reference_logprobs(reference, batch, cfg, tokenizer))
    with_values = policies(0).value_head is not None
    if not (with_values or cfg.tis_cap):
        return batch
    logprobs, values = learner_scores(batch, policies)
    if with_values:
        batch = batch.replace(values=values)
    if cfg.tis_cap:
        batch = batch.with_extras({"sampler_logprobs": batch.logprobs}).replace(logprobs=logprobs)
    return batch


def learner_scores(batch, policies: PolicySet) -> tuple[torch.Tensor, torch.Tensor]:
    """log π_θ_old [B, T] and V(s_t) [B, T] (0 without a value head) of the batch's tokens
    under the learner before the update; each policy scores its roles' rows."""
    logprobs = torch.zeros_like(batch.response_mask, dtype=torch.float32)
    values = torch.zeros_like(batch.response_mask, dtype=torch.float32)
    with torch.no_grad():
        for k, member in enumerate(policies.members):
            rows = policies.rows_of(k, batch.agent_ids)
            part = batch if rows is None else batch.select(rows)
            out = member.policy.evaluate(
                part.extras["prompt_ids"],
                part.response_ids,
                mask=part.response_mask,
                observation_mask=part.observation_mask,
                with_entropy=False,
            )
            where = slice(None) if rows is None else rows
            logprobs[where] = out.logprobs.float().to(logprobs.device)
            if out.values is not None:
                values[where] = out.values.float()
    return logprobs, values


def reference_logprobs(reference, batch, cfg: TrainConfig, tokenizer) -> torch.Tensor:
    with torch.no_grad(), lora.adapters_off(reference):  # LoRA: the base is the reference
        ref, _ = sequence_logprobs(
            reference,
            batch.extras["prompt_ids"],
            batch.response_ids,
            batch.response_mask,
            pad_id=tokenizer.pad_token_id,
            temperature=cfg.temperature,
            observation_mask=batch.observation_mask,
            packing=cfg.packing,
        )
    return ref


def checkpoint_state(done: Progress, policies: PolicySet, pipeline, generator, source=None) -> dict:
    first, *rest = policies.state_dict()
    return {
        "step": done.step,
        "optimizer": first["optimizer"],
        "scheduler": first["scheduler"],
        # policies after the first (per_role): weights, optimiser and schedule
        "others": [
            {"model": m.policy.model.state_dict(), **s}
            for m, s in zip(policies.members[1:], rest, strict=True)
        ],
        "value_heads": [
            m.policy.value_head.state_dict()
            for m in policies.members
            if m.policy.value_head is not None
        ],
        "stages": pipeline.state_dict(),
        "generator": generator.get_state(),
        "evals": done.evals,
        "spent": done.budget.state_dict(),
        "elapsed_s": done.elapsed,
        "source": getattr(source, "state_dict", dict)(),  # recycling's cache
    }


def restore(
    restored, policies: PolicySet, pipeline, generator, done: Progress, source=None
) -> None:
    """The run's state from its newest checkpoint (policies, optimisers, schedulers,
    stages, sampling RNG), and what it had done (into `done`, whose budget the stages
    share)."""
    path, state = restored
    first = policies.members[0]
    if lora.is_lora(first.policy.model):  # the adapters: the base is the loaded model
        lora.load_adapter(first.policy.model, path / "model")
    else:
        first.policy.model.load_state_dict(load_model(str(path / "model"))[0].state_dict())
    others = state.get("others", [])
    for member, saved in zip(policies.members[1:], others, strict=True):
        member.policy.model.load_state_dict(saved["model"])
    heads = [m.policy.value_head for m in policies.members if m.policy.value_head is not None]
    for head, saved in zip(heads, state.get("value_heads", []), strict=True):
        head.load_state_dict(saved)
    policies.load_state_dict(
        [{"optimizer": state["optimizer"], "scheduler": state["scheduler"]}, *others]
    )
    pipeline.load_state_dict(state.get("stages") or pipeline.legacy_state(state))
    generator.set_state(state["generator"])
    if hasattr(source, "load_state_dict"):
        source.load_state_dict(state["source"])
    done.budget.load_state_dict(state["spent"])
    done.step, done.evals = state["step"], state["evals"]
    done.elapsed_before = state.get("elapsed_s", 0.0)


BAR_FIELDS = {"reward": "reward", "acc": "held-out", "tps": "tok/s", "split": "gen/score/learn"}


def _bar(metrics: dict, latest_eval: dict) -> dict[str, str]:
    return {
        "reward": f"{metrics['reward/mean']:.3f}",
        "acc": f"{latest_eval['eval/greedy_accuracy']:.2f}",
        "tps": f"{metrics['perf/tokens_per_s']:.0f}",
        "split": f"{metrics['perf/generate_frac']:.0%}/"
        f"{metrics['perf/score_frac']:.0%}/{metrics['perf/learn_frac']:.0%}",
    }


def _samples(info, outcomes, n: int) -> list[dict]:
    return [
        {"prompt": info.prompts[i], "completion": info.completions[i], "reward": float(outcomes[i])}
        for i in range(min(n, len(info.completions)))
    ]


def _step_metrics(batch, advantages, info, learn, lr, t0, t1, t2, t3) -> dict[str, float]:
    rewards = batch.rewards
    finite = rewards[torch.isfinite(rewards)]
    stats = group_stats(rewards, batch.group_ids)
    valid = batch.response_mask > 0
    total = t3 - t0
    metrics = {
        "reward/mean": float(finite.mean()) if len(finite) else math.nan,
        "reward/std": float(finite.std()) if len(finite) > 1 else 0.0,
        "reward/solved_frac": float((finite >= 1.0).float().mean()) if len(finite) else 0.0,
        **{f"reward/{k}": float(v.mean()) for k, v in batch.reward_parts.items()},
        "reward/failures": float(sum(info.failures.values())),
        "adv/zero_std_frac": stats.zero_std_frac,
        "adv/abs_mean": float(advantages[valid].abs().mean()) if valid.any() else 0.0,
        "response/length": float(batch.response_mask.sum(-1).float().mean()),
        "response/truncated_frac": float(batch.truncated.float().mean()),
        "lr": lr,
        "perf/step_s": total,
        "perf/tokens_per_s": info.generated_tokens / max(total, 1e-9),
        "perf/generate_frac": info.generate_s / total,
        "perf/score_frac": info.score_s / total,
        "perf/reference_frac": (t2 - t1) / total,
        "perf/learn_frac": (t3 - t2) / total,
        **learn,
        **info.metrics,
        **(info.reward_counts.metrics() if info.reward_counts is not None else {}),
        **reward_faults.take(),  # samples scored 0 for a reason of their own, by reason
    }
    return metrics


def summary_table(
    cfg: TrainConfig,
    before: dict,
    after: dict,
    rows: list[dict],
    seconds: float,
    steps: int,
    samples: int,
) -> str:
    """summary.md: the held-out scores before and after, and the run's throughput."""
    tokens = sum(r.get("perf/tokens_per_s", 0) * r.get("perf/step_s", 0) for r in rows)
    lines = [
        f"# {cfg.algo} on {cfg.task} (model {cfg.model}, seed {cfg.seed})",
        "",
        "| held-out (test split) | before | after | change |",
        "|---|---|---|---|",
    ]
    for key, label in (
        ("eval/greedy_accuracy", "greedy accuracy"),
        ("eval/greedy_reward", "greedy reward"),
        ("eval/sampled_reward", "sampled reward (T=1)"),
    ):
        lines.append(
            f"| {label} | {before[key]:.3f} | {after[key]:.3f} | {after[key] - before[key]:+.3f} |"
        )
    lines += [
        "",
        f"{steps} steps of {cfg.prompts_per_step} prompts × "
        f"{cfg.samples_per_prompt} samples ({samples} samples generated) in {seconds:.0f} s "
        f"({seconds / max(steps, 1):.2f} s/step, "
        f"{tokens / max(seconds, 1e-9):.0f} generated tokens/s overall).",
        "",
    ]
    return "\n".join(lines)
