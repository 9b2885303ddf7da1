"""Configuration: pydantic schemas, YAML files and `key=value` overrides.

Every field has a one-line description (shown by `--help`); an unknown field or a bad
value fails before any work, naming the field, the value and what is accepted."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, ClassVar, Literal, TypeVar

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PositiveInt,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

M = TypeVar("M", bound=BaseModel)


class Schema(BaseModel):
    """Base of every config: unknown keys are errors, values are validated on assignment."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, frozen=False)

    @field_validator("*")
    @classmethod
    def _finite(cls, value: Any, info: ValidationInfo) -> Any:
        """Every number of every field is finite, nested option dicts and lists included:
        a NaN or ±inf reaches a trainer only to crash it after the run folder is made, or
        worse, to train on NaN silently."""
        for path, number in _numbers(value, info.field_name):
            if not math.isfinite(number):
                where = "" if path == info.field_name else f"{path} = {number!r}: "
                raise ValueError(
                    f"{where}not a finite number; NaN and ±inf are not "
                    "accepted anywhere in a config (a field that can be off says how, e.g. "
                    "null or 0)"
                )
        return value


def _numbers(value: Any, path: str):
    """(path, float) for every float inside `value`: `loss.eps_low`, `hidden[1]`, ..."""
    if isinstance(value, float):
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _numbers(item, f"{path}.{key}")
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            yield from _numbers(item, f"{path}[{i}]")


def known_trackers(value: list[str]) -> list[str]:
    """`value` if each names a tracker (trackers.py) or "all"; installed is checked when
    the run starts."""
    from policylab.trackers import check_names

    return check_names(value)


def trackers_list(value: Any) -> Any:
    """report_to=wandb or report_to=wandb,mlflow (one string) as a list; none = []."""
    if isinstance(value, str):
        return [] if value.strip() == "none" else [n.strip() for n in value.split(",") if n.strip()]
    return value


def eval_metric(value: str | None) -> str | None:
    """`value` if it names an evaluation metric (eval/...): best/ is chosen at evaluations."""
    if value is not None and not value.startswith("eval/"):
        raise ValueError(
            "save_best compares evaluations, so it names an evaluation metric: eval/<name> "
            "(e.g. eval/greedy_accuracy for a language model, eval/return_mean for control)"
        )
    return value


class ConfigError(ValueError):
    """A config that cannot run; the message names the field, the value and the choices."""


class RunSchema(Schema):
    """What every trainer's config shares: the lr-schedule check and the run folder's name
    (runs/<algo>-<task>-s<seed> unless `run_dir` is set). Subclasses declare the fields
    `algo`, `task`, `seed`, `schedule` and `run_dir`."""

    @field_validator("threads", mode="before", check_fields=False)
    @classmethod
    def _thread_count(cls, value: Any) -> Any:
        ok = value == "auto" or (isinstance(value, int) and not isinstance(value, bool))
        if not ok or (value != "auto" and value < 0):
            raise ValueError(
                f"threads={value!r}; accepted: auto (the free cores), 0 (torch's own count) "
                "or a number of threads >= 1"
            )
        return value

    @field_validator("schedule", check_fields=False)
    @classmethod
    def _known_schedule(cls, value: str) -> str:
        if value not in ("constant", "linear", "cosine"):
            raise ValueError(f"unknown schedule {value!r}; choices: constant, linear, cosine")
        return value

    @field_validator("report_to", mode="before", check_fields=False)
    @classmethod
    def _trackers_list(cls, value: Any) -> Any:
        return trackers_list(value)

    @field_validator("report_to", check_fields=False)
    @classmethod
    def _known_trackers(cls, value: list[str]) -> list[str]:
        return known_trackers(value)

    @field_validator("save_best", check_fields=False)
    @classmethod
    def _eval_metric(cls, value: str | None) -> str | None:
        return eval_metric(value)

    @property
    def name(self) -> str:
        if self.run_dir:
            return Path(self.run_dir).name
        return f"{self.algo}-{Path(self.task).stem}-s{self.seed}"

    @property
    def folder(self) -> Path:
        return Path(self.run_dir) if self.run_dir else Path("runs") / self.name


def parse_overrides(pairs: list[str]) -> dict[str, Any]:
    """["lr=1e-3", "tasks=[a,b]"] → {"lr": 0.001, "tasks": ["a", "b"]} (values read as YAML)."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise ConfigError(f"override {pair!r} is not of the form key=value")
        try:
            out[key.strip()] = yaml.safe_load(raw) if raw.strip() else ""
        except yaml.YAMLError as err:
            raise ConfigError(f"override {pair!r}: cannot read the value: {err}") from None
    return out


def load(
    schema: type[M], file: str | Path | None = None, overrides: dict[str, Any] | None = None
) -> M:
    """`schema` from an optional YAML file, updated by `overrides`; errors are ConfigError."""
    data = read_fields(file) if file is not None else {}
    data.update(overrides or {})
    try:
        return schema(**data)
    except ValidationError as err:
        raise ConfigError(_explain(schema, err)) from None


def read_fields(file: str | Path) -> dict[str, Any]:
    """The field: value mapping of a YAML config file, unchecked (a schema checks it once
    every layer is in)."""
    path = Path(file)
    if not path.is_file():
        raise ConfigError(f"config file {str(path)!r} does not exist")
    loaded = yaml.safe_load(path.read_text()) or {}
    if not isinstance(loaded, dict):
        raise ConfigError(f"config file {str(path)!r} must hold a mapping of field: value")
    return loaded


def _explain(schema: type[BaseModel], err: ValidationError) -> str:
    lines = [f"invalid {schema.__name__}:"]
    for e in err.errors():
        field = ".".join(str(p) for p in e["loc"]) or "(config)"
        if e["type"] == "extra_forbidden":
            valid = ", ".join(sorted(schema.model_fields))
            lines.append(f"  unknown field {field!r}; valid fields: {valid}")
        elif not e["loc"]:  # a check across fields: its message names them and their values
            lines.append(f"  {e['msg'].removeprefix('Value error, ')}")
        else:
            lines.append(
                f"  {field} = {e.get('input')!r}: {e['msg'].removeprefix('Value error, ')}"
            )
    return "\n".join(lines)


def describe_fields(schema: type[BaseModel]) -> str:
    """One line per field: name, default and description, for `--help`."""
    rows = []
    for name, field in schema.model_fields.items():
        default = field.get_default(call_default_factory=True)
        rows.append(f"  {name} (default {default!r}): {field.description or ''}")
    return "\n".join(rows)


def known_algorithm(value: str) -> str:
    """`value` if it names a recipe; otherwise an error listing the recipes."""
    from policylab import recipes

    if value not in recipes.recipes:
        raise ValueError(f"unknown algorithm {value!r}; choices: {', '.join(recipes.names())}")
    return value


def _stage_of_kind(name: str, kind: str, exclude: tuple[str, ...] = ()) -> str:
    """`name` if it is a registered stage of `kind`; else an error listing the choices."""
    from policylab.stages import stages

    choices = [n for n in stages.names() if stages.get(n).kind == kind and n not in exclude]
    if name not in choices:
        raise ValueError(f"unknown {kind} stage {name!r}; choices: {', '.join(choices)}")
    return name


# Advantage estimators whose advantage is a sample's reward relative to the other samples
# of its group (algebra/advantages.py): a group of one gets A = 0, so samples_per_prompt=1
# would train on nothing. copo, empg and gigpo also keep a term that is not group-relative.
GROUP_RELATIVE = ("grpo", "dr_grpo", "rloo", "reinforce_pp_baseline")
DISTRIBUTED = ("none", "ddp")  # how the learner spreads over processes (docs/scale.md)


class TrainConfig(RunSchema):
    """Every field of `policylab train` (language models). Sizes are per optimiser step:
    prompts_per_step prompts × samples_per_prompt samples = one batch of rows."""

    algo: str = Field("grpo", description="named algorithm (policylab list)")
    task: str = Field("arithmetic", description="embedded task name or a data file/folder")
    task_knobs: dict[str, Any] = Field(default_factory=dict, description="task difficulty knobs")
    model: str = Field("tiny", description='"tiny" (shipped), a local folder or a hub id')
    device: str = Field(
        "auto",
        description='where the model runs: "auto" (cuda when torch sees a GPU, else cpu), '
        '"cpu", "cuda" or "cuda:N"',
    )
    dtype: Literal["float32", "bfloat16", "float16"] = Field(
        "float32",
        description="precision of forward passes: float32, or bfloat16 / float16 under "
        "autocast with float32 master weights (float16 with loss scaling)",
    )
    gradient_checkpointing: bool = Field(
        False, description="recompute each layer's activations in backward (less memory)"
    )
    rewards: dict[str, float] = Field(
        default_factory=dict,
        description="reward name → weight; empty = the task's verifier with weight 1",
    )
    failure_reward: float = Field(
        0.0, description="reward of a sample whose reward function raised"
    )
    reward_timeout_s: float = Field(
        30.0,
        ge=0,
        allow_inf_nan=False,
        description="seconds one call of a reward function may take; past it its samples "
        "get failure_reward (0 = no limit, called in the main thread)",
    )
    max_unscored_steps: int = Field(
        3,
        ge=0,
        description="stop after this many steps in a row in which no sample got a valid "
        "reward (0 = only warn)",
    )
    reward_failure_limit: float = Field(
        0.5,
        ge=0,
        le=1,
        allow_inf_nan=False,
        description="stop, with its traceback, when a reward function raises or times out "
        "on more than this fraction of a batch's samples (1 = never stop: failed samples "
        "get failure_reward)",
    )
    steps: int = Field(200, ge=1, description="training steps (one batch of rollouts each)")
    prompts_per_step: int = Field(16, ge=1, description="prompts drawn per step")
    train_pool: int = Field(4000, ge=1, description="distinct training prompts drawn once per run")
    samples_per_prompt: int = Field(8, ge=1, description="G: samples per prompt (the group)")
    epochs: int = Field(1, ge=1, description="μ: passes over each batch")
    minibatches: int = Field(
        1, ge=1, description="optimiser steps per pass (batch split in groups)"
    )
    micro_batch_rows: int = Field(
        0, ge=0, description="rows per forward/backward (0 = whole minibatch)"
    )
    distributed: str = Field(
        "none",
        description="none (one process) or ddp: data-parallel learners across processes, "
        "started by torchrun or with workers=N (docs/scale.md)",
    )
    workers: int = Field(
        1, ge=1, description="distributed=ddp: local processes to start (1 under torchrun)"
    )
    packing: bool = Field(
        False,
        description="learner and reference forwards on packed rows without padding, the LM "
        "head on response positions only (equal to float32 rounding; docs/benchmarks.md)",
    )
    lr: float = Field(
        5e-5, gt=0, description="peak AdamW learning rate (measured: docs/training.md)"
    )
    warmup_steps: int = Field(0, ge=0, description="linear warm-up (optimiser steps)")
    schedule: str = Field("constant", description="after warm-up: constant, linear or cosine")
    weight_decay: float = Field(0.0, ge=0, description="AdamW weight decay")
    grad_clip: float = Field(1.0, ge=0, description="max global grad norm (0 = off)")
    lora: dict[str, Any] = Field(
        default_factory=dict,
        description="LoRA adapters (extra lora): {} or null = off, true = defaults, or "
        "options r, alpha, dropout, target_modules, bias (docs/training.md); the reference "
        "is the base with the adapters disabled",
    )
    vf_coef: float = Field(
        0.1,
        ge=0,
        description="recipes with a critic: weight of the value loss (TRL PPOConfig vf_coef)",
    )
    temperature: float = Field(1.0, gt=0, description="sampling temperature (> 0 to train)")
    top_p: float = Field(1.0, gt=0, le=1, description="nucleus sampling")
    top_k: int = Field(0, ge=0, description="top-k sampling (0 = off)")
    engine: Literal["hf", "vllm"] = Field(
        "hf",
        description="generation engine: hf (transformers, shares the learner's model) or vllm "
        "(extra vllm, a CUDA GPU; options in `vllm`)",
    )
    vllm: dict[str, Any] = Field(
        default_factory=dict,
        description="engine=vllm: options mode (colocate | server), server_url, timeout_s, "
        "gpu_memory_utilization, dtype, max_model_len, enforce_eager, logprobs_mode, "
        "group_port (docs/scale.md); {} = the defaults",
    )
    tis_cap: float = Field(
        0.0,
        ge=0,
        allow_inf_nan=False,
        description="truncated importance sampling between the engine and the learner: each "
        "token's advantage × min(π_learner_old / π_sampler, tis_cap), the learner's old "
        "log-probs recomputed before the update (0 = off; TRL's vllm_importance_sampling_cap)",
    )
    max_new_tokens: int = Field(24, ge=1, description="generation budget (also Dr. GRPO's L_max)")
    stop_strings: list[str] = Field(default_factory=list, description="extra stop strings")
    chat: bool = Field(
        False,
        description="instruct models: render each prompt as [system?, user] messages with the "
        "tokenizer's chat template and its generation prompt (False: plain text as is; "
        "message-list prompts always use the template)",
    )
    system_prompt: str = Field(
        "", description="chat=True: a system message before each prompt (empty = none)"
    )
    chat_template_kwargs: dict[str, Any] = Field(
        default_factory=dict,
        description="chat=True: extra arguments of apply_chat_template, e.g. "
        "{enable_thinking: false}",
    )
    mask_truncated: bool = Field(
        False, description="drop completions cut by max_new_tokens from the loss"
    )
    advantage: dict[str, Any] = Field(
        default_factory=dict, description="advantage estimator option overrides"
    )
    loss: dict[str, Any] = Field(
        default_factory=dict, description="policy loss option overrides (e.g. kl_coef)"
    )
    selection: str | None = Field(
        None,
        description="which groups/rows are trained on: all, dynamic_sampling, ... "
        "(None = the algorithm's: dynamic_sampling for dapo, all otherwise)",
    )
    reward_shaping: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description="reward shaping option overrides by shaper, e.g. {overlong: {L_max: 64, "
        "L_cache: 16}} (the algorithm's shapers apply by default: dapo's overlong)",
    )
    selection_options: dict[str, Any] = Field(
        default_factory=dict, description="selection option overrides (e.g. metric)"
    )
    max_gen_rounds: int = Field(
        10,
        ge=0,
        description="dynamic sampling: most generation rounds per step (0 = unlimited; "
        "verl max_num_gen_batches)",
    )
    on_exhaust: Literal["raise", "train_partial"] = Field(
        "raise",
        description="dynamic sampling, when max_gen_rounds rounds kept too few groups: raise "
        "(verl; a task the model always or never solves is a finding, and an update on a "
        "few groups is not DAPO's) or train_partial (train on the groups kept; none: no update)",
    )
    sampler: str | None = Field(
        None,
        description="prompt sampler (None = the algorithm's: vade, vas for those recipes, "
        "uniform otherwise): uniform epochs; vade (Beta posteriors, Thompson "
        "draws scored by p(1 − p); papers §8); vas (a scoring pass every few steps, a "
        "fraction of each batch drawn by variance promotion score; papers §7)",
    )
    sampler_options: dict[str, Any] = Field(
        default_factory=dict,
        description="prompt sampler option overrides (e.g. every, n_score for vas)",
    )
    augment: str = Field(
        "none",
        description="difficulty: Reg-GRPO's difficulty-aware augmentation (papers §5.2): a "
        "prompt whose group beat the recent average is replaced by a harder variant, one "
        "that fell short by an easier one (the task's difficulty knobs), rolled out again",
    )
    augment_options: dict[str, Any] = Field(
        default_factory=dict,
        description="augmentation options: window, tol, reward_range, only_uniform_groups",
    )
    offline_prompts: int = Field(
        0,
        ge=0,
        description="0 = online RL; N > 0 = offline (BCPG-NSA, papers §15): sample G "
        "completions of N prompts once from the initial policy, keep mixed-outcome groups, "
        "train on them for the whole run (only that pass counts against max_samples)",
    )
    recycle: dict[str, Any] = Field(
        default_factory=dict,
        description="SPARK rollout recycling overrides (reflection, pointwise_prob, "
        "reflect_max, capacity, max_answer_chars; the spark recipe's defaults): each step's "
        "groups become judge and reflection examples, trained on in reward periods; any key "
        "turns recycling on for another recipe (workflows/spark.py)",
    )
    agent: dict[str, Any] = Field(
        default_factory=dict,
        description="multi-turn tasks: agent workflow overrides (branching, branches, regime, "
        "grouping, credit, credit_options, attempts, reflect, packing; policylab describe)",
    )
    max_tokens: int = Field(
        0,
        ge=0,
        description="end the run once this many tokens were generated (0 = off; the agent "
        "arenas' equal budget)",
    )
    max_samples: int = Field(
        0,
        ge=0,
        description="end the run once this many samples were generated, kept or not "
        "(0 = off; equal budgets with dynamic sampling); steps stays the lr schedule's length",
    )
    eval_every: int = Field(
        25, ge=0, description="held-out evaluation every N steps (0 = start and end only)"
    )
    eval_n: int = Field(200, ge=1, description="held-out examples per evaluation")
    eval_seed: int = Field(
        0, description="which held-out examples are drawn (fixed across training seeds)"
    )
    save_every: int = Field(50, ge=0, description="checkpoint every N steps (0 = only at the end)")
    report_to: list[str] = Field(
        default_factory=lambda: ["tensorboard"],
        description="experiment trackers: tensorboard, wandb, mlflow, trackio, or all (every "
        "one installed); [] = the run folder's files only",
    )
    keep_checkpoints: int = Field(
        2, ge=0, description="how many of the newest checkpoints to keep (0 = all)"
    )
    save_best: str | None = Field(
        None,
        description="keep the model of the best evaluation in <run_dir>/best/ by this metric, "
        "higher is better (e.g. eval/greedy_accuracy; None = off)",
    )
    samples_per_log: int = Field(
        4, ge=0, description="completions written to samples.jsonl per step"
    )
    run_dir: str = Field("", description="run folder (default runs/<algo>-<task>-s<seed>)")
    seed: int = Field(0, description="seed of prompts, sampling and initialisation")
    threads: int | Literal["auto"] = Field(
        "auto",
        description="torch CPU threads: auto = the cores other processes leave free, "
        "round(cpus − load average), at most torch's own count (trainers/run.py "
        "auto_threads); 0 = torch's own count; n = n",
    )
    progress: bool = Field(True, description="show the progress bar")

    @field_validator("algo")
    @classmethod
    def _known_algo(cls, value: str) -> str:
        return known_algorithm(value)

    @field_validator("model")
    @classmethod
    def _model_folder_exists(cls, value: str) -> str:
        from policylab.models import model_folder_problem
        from policylab.objects import is_object

        problem = None if is_object(value) else model_folder_problem(value)  # objects.py
        if problem:
            raise ValueError(problem)
        return value

    @field_validator("lora", mode="before")
    @classmethod
    def _lora_options(cls, value: Any) -> dict[str, Any]:
        from policylab.lora import as_config

        return as_config(value)

    @field_validator("vllm", mode="before")
    @classmethod
    def _vllm_options(cls, value: Any) -> dict[str, Any]:
        from policylab.engines.vllm import as_config

        return as_config(value)

    @field_validator("device")
    @classmethod
    def _device_here(cls, value: str) -> str:
        from policylab.devices import resolve_device

        resolve_device(value)  # the form, and a GPU when one is asked for
        return value

    @model_validator(mode="after")
    def _distribution(self) -> TrainConfig:
        if self.distributed not in DISTRIBUTED:
            raise ValueError(
                f"distributed={self.distributed!r} is not valid; choices: {', '.join(DISTRIBUTED)}"
            )
        if self.workers > 1 and self.distributed == "none":
            raise ValueError(
                f"workers={self.workers} with distributed=none: set distributed=ddp to train "
                "across processes (or workers=1)"
            )
        if self.distributed != "none" and self.prompts_per_step % self.workers:
            raise ValueError(
                f"workers={self.workers} must divide prompts_per_step={self.prompts_per_step} "
                "(each process generates an equal share of a step's prompts)"
            )
        if self.distributed != "none" and self.workers > 1 and ":" in self.device:
            raise ValueError(
                f"device={self.device!r} with workers={self.workers}: each process uses its own "
                "GPU (cuda:LOCAL_RANK); use device=cuda or auto"
            )
        if self.distributed != "none" and self.engine != "hf":
            raise ValueError(
                f"engine={self.engine!r} with distributed={self.distributed!r}: the data-parallel "
                "learner generates with each rank's own HF engine; use engine=hf (one vLLM "
                "engine per rank is not built yet)"
            )
        return self

    @field_validator("selection")
    @classmethod
    def _known_selection(cls, value: str | None) -> str | None:
        from policylab.algebra.selection import selections

        if value is not None and value not in selections:
            raise ValueError(
                f"unknown selection {value!r}; choices: {', '.join(selections.names())}"
            )
        return value

    @field_validator("sampler")
    @classmethod
    def _known_sampler(cls, value: str | None) -> str | None:
        return value if value is None else _stage_of_kind(value, "prompts", exclude=("offline",))

    @field_validator("augment")
    @classmethod
    def _known_augment(cls, value: str) -> str:
        return value if value == "none" else _stage_of_kind(value, "augment")

    @model_validator(mode="after")
    def _engine_installed(self) -> TrainConfig:
        if self.engine != "vllm":
            if self.vllm:
                raise ValueError(
                    f"vllm = {self.vllm} sets options of the vLLM engine, which engine = "
                    f"{self.engine!r} does not use; set engine = 'vllm' (or drop vllm)"
                )
            return self
        from policylab.engines.vllm import require_vllm

        require_vllm(ValueError)  # before any model loads
        return self

    @model_validator(mode="after")
    def _chat_fields_need_chat(self) -> TrainConfig:
        given = [
            f"{name}={getattr(self, name)!r}"
            for name in ("system_prompt", "chat_template_kwargs")
            if getattr(self, name)
        ]
        if given and not self.chat:
            raise ValueError(
                f"{' and '.join(given)} with chat=False: they reach the model through the "
                "chat template, which plain-text prompts do not use; set chat=True (message-"
                "list prompts render the same either way)"
            )
        return self

    @model_validator(mode="after")
    def _sizes(self) -> TrainConfig:
        if self.offline_prompts and self.sampler not in (None, "uniform"):
            raise ValueError(
                f"sampler={self.sampler} chooses prompts to generate for; offline data "
                f"(offline_prompts={self.offline_prompts}) is sampled once, so use the uniform "
                "sampler (its epochs run over the stored groups)"
            )
        if self.augment != "none" and (
            self.offline_prompts or self.sampler not in (None, "uniform")
        ):
            raise ValueError(
                f"augment={self.augment} varies freshly drawn prompts: it needs online data "
                "(offline_prompts=0) and the uniform sampler"
            )
        rows = self.prompts_per_step * self.samples_per_prompt
        if self.prompts_per_step % self.minibatches:
            valid = [
                d for d in range(1, self.prompts_per_step + 1) if self.prompts_per_step % d == 0
            ]
            raise ValueError(
                f"minibatches={self.minibatches} must divide prompts_per_step="
                f"{self.prompts_per_step} (whole groups per minibatch); valid: {valid}"
            )
        per_minibatch = rows // self.minibatches
        if self.micro_batch_rows and per_minibatch % self.micro_batch_rows:
            valid = [d for d in range(1, per_minibatch + 1) if per_minibatch % d == 0]
            raise ValueError(
                f"micro_batch_rows={self.micro_batch_rows} must divide the {per_minibatch} rows "
                f"of a minibatch; valid: {valid}"
            )
        updates = self.steps * self.epochs * self.minibatches
        if self.warmup_steps > updates:
            raise ValueError(
                f"warmup_steps={self.warmup_steps} is longer than the run's {updates} optimiser "
                f"updates (steps {self.steps} × epochs {self.epochs} × minibatches "
                f"{self.minibatches}): the lr would never reach its peak; accepted: 0 .. {updates}"
            )
        self._groups_of_more_than_one()
        return self

    def _groups_of_more_than_one(self) -> None:
        """samples_per_prompt=1 under a group-relative estimator: every advantage is 0.
        A tree of K > 1 branches (the agent workflow) makes its groups from the branches."""
        from policylab import recipes

        recipe = recipes.get(self.algo)
        if self.samples_per_prompt > 1 or recipe.advantage not in GROUP_RELATIVE:
            return
        agent = {k: getattr(v, "value", v) for k, v in recipe.workflow_options.items()}
        agent.update(self.agent)
        branches = agent.get("branches", 0)
        if agent.get("branching") == "tree" and isinstance(branches, int) and branches > 1:
            return  # (a branches value that is not a count is AgentOptions' error to report)
        raise ValueError(
            f"samples_per_prompt=1 with {self.algo}, whose advantage estimator "
            f"{recipe.advantage!r} compares each sample with the others of its prompt's group: "
            "with one sample per group every advantage is 0 and nothing is learnt; accepted: "
            "samples_per_prompt >= 2, or an algorithm with a batch baseline (reinforce_pp, "
            "risk_seeking_pg) or a critic (ppo)"
        )


class ControlConfig(RunSchema):
    """Every field of `policylab train --task <gymnasium id>` (PPO on control). One
    iteration collects num_envs × num_steps transitions, then runs `epochs` passes of
    minibatches over them. Unset fields take the environment's tuned defaults
    (`CONTROL_DEFAULTS`), then these generic ones (CleanRL's `ppo.py`)."""

    algo: str = Field(
        "ppo",
        description="named algorithm with a value loss and GAE (ppo; fpo; pg_rainbow)",
    )
    task: str = Field(
        "CartPole-v1",
        description="gymnasium environment id, module:EnvId (imported, registers EnvId) or "
        "module:EnvClass (a gymnasium.Env subclass or a function returning one)",
    )
    max_episode_steps: int | None = Field(
        None,
        ge=1,
        description="truncate episodes at this many steps, in training and evaluation "
        "(gymnasium's TimeLimit; None = the environment's own limit, if any)",
    )
    env_kwargs: dict[str, Any] = Field(
        default_factory=dict,
        description="keyword arguments of every environment, training and evaluation "
        "(gym.make), e.g. {horizon: 20}; eval_env_kwargs go on top for evaluation",
    )
    selection: str | None = Field(
        None,
        description="an advantage-time selection over the iteration's transitions (d3s); "
        "None = the algorithm's (none for the control recipes)",
    )
    selection_options: dict[str, Any] = Field(
        default_factory=dict, description="selection option overrides"
    )
    total_steps: int = Field(100_000, ge=1, description="environment steps (all envs together)")
    num_envs: int = Field(4, ge=1, description="environments stepped in lock-step")
    num_steps: int = Field(128, ge=1, description="steps per environment per iteration")
    epochs: int = Field(4, ge=1, description="passes over each iteration's batch")
    minibatch_size: int = Field(128, ge=1, description="transitions per optimiser step")
    lr: float = Field(2.5e-4, gt=0, description="peak Adam learning rate")
    schedule: str = Field("linear", description="lr after warm-up: constant, linear or cosine")
    warmup_steps: int = Field(0, ge=0, description="linear lr warm-up (iterations)")
    gamma: float = Field(0.99, ge=0, le=1, description="discount γ")
    lam: float = Field(0.95, ge=0, le=1, description="GAE λ")
    clip: float | None = Field(
        None, gt=0, lt=1, description="PPO ratio clip ε (None = the recipe's: ppo 0.2, fpo 0.05)"
    )
    clip_schedule: Literal["constant", "linear"] = Field(
        "constant", description="clip ε: constant, or linear to 0 over the run (SB3's lin_ε)"
    )
    value_clip: float | None = Field(
        None, gt=0, description="clip V to V_old ± this (None = unclipped value loss)"
    )
    vf_coef: float = Field(0.5, ge=0, description="weight of the value loss")
    ent_coef: float = Field(0.0, ge=0, description="weight of the entropy bonus")
    use_sde: bool = Field(
        False,
        description="gSDE exploration (Raffin et al. 2021, SB3's use_sde): Gaussian noise "
        "z(s)·θ_ε linear in the actor's last features, θ_ε held between draws (mlp policy, "
        "Box actions)",
    )
    sde_sample_freq: int = Field(
        -1,
        ge=-1,
        description="use_sde: draw new exploration matrices every N steps of a rollout "
        "(-1 or 0 = once per rollout, SB3's default; the zoo's Pendulum: 4)",
    )
    log_std_init: float = Field(
        0.0,
        description="initial log σ of the Gaussian policy (per action; per feature × action "
        "with use_sde) (SB3's log_std_init)",
    )
    norm_adv: bool = Field(True, description="standardise advantages per minibatch")
    target_kl: float | None = Field(
        None, gt=0, description="stop the epochs once approx. KL exceeds this (None = off)"
    )
    grad_clip: float = Field(0.5, ge=0, description="max global grad norm (0 = off)")
    hidden: list[PositiveInt] = Field(default_factory=lambda: [64, 64], description="MLP widths")
    # fpo only (the flow policy, papers §16); defaults are the fpo recipe's `training`
    flow_steps: int = Field(10, ge=1, description="fpo: Euler steps from noise to an action")
    n_mc: int = Field(8, ge=1, description="fpo: (τ, ε) draws per action for the CFM ratio")
    cfm_reduce: Literal["mean", "sum"] = Field(
        "mean", description="fpo: CFM squared error over action dims: mean or sum"
    )
    cfm_weight: Literal["none", "tau_sq"] = Field(
        "tau_sq", description="fpo: CFM weight w(τ): none (1) or tau_sq (τ²)"
    )
    cfm_scale: float = Field(1.0, gt=0, description="fpo: multiplier of the CFM loss")
    tau_sampling: Literal["grid", "uniform"] = Field(
        "grid", description="fpo: τ on the Euler grid {0, 1/K, …} or U[0, 1]"
    )
    # dppo / adpo_provisional only (papers/seed_generative.md G7)
    adapg_lam: float = Field(
        0.5,
        ge=0,
        le=1,
        description="adpo_provisional: the adapg optimiser's λ (1 = Adam, 0 = RMSProp)",
    )
    init_policy: str | None = Field(
        None,
        description="start the policy from this file (ControlPolicy.save, e.g. "
        "policylab.pretrain_diffusion_policy's BC checkpoint; None = fresh weights)",
    )
    # pg_rainbow only (IQN critic, papers §17); defaults are the pg_rainbow recipe's `training`
    pgr_quantiles: int = Field(32, ge=1, description="pg_rainbow: N quantiles fed to V_ψ")
    pgr_input: Literal["concat", "scaled", "quantiles_only"] = Field(
        "concat", description="pg_rainbow: V_ψ input: [V_θ, q], V_θ·q or q"
    )
    iqn_steps: int = Field(16, ge=0, description="pg_rainbow: IQN steps per iteration")
    iqn_batch: int = Field(64, ge=1, description="pg_rainbow: IQN replay minibatch")
    iqn_lr: float = Field(5e-4, gt=0, description="pg_rainbow: IQN Adam learning rate")
    iqn_kappa: float = Field(1.0, ge=0, description="pg_rainbow: quantile Huber κ")
    iqn_n_tau: int = Field(32, ge=1, description="pg_rainbow: N fractions τ per update")
    iqn_n_tau_target: int = Field(32, ge=1, description="pg_rainbow: N' target fractions τ'")
    iqn_n_tau_select: int = Field(32, ge=1, description="pg_rainbow: K fractions for a*")
    iqn_target_every: int = Field(100, ge=1, description="pg_rainbow: target sync (IQN steps)")
    replay_capacity: int = Field(100_000, ge=1, description="pg_rainbow: replay transitions")
    replay_min: int = Field(1_000, ge=1, description="pg_rainbow: V_θ alone until this many")
    # image augmentation of the learning passes (CG2A's hook, trainers/augmented.py)
    augment: list[str] | None = Field(
        None,
        description="image augmentations of the PPO passes: shift, colour_jitter, random_conv, "
        "grayscale (None = the algorithm's: all four for cg2a_ppo_provisional, none for ppo; "
        "[] = none)",
    )
    gradient_combine: str | None = Field(
        None,
        description="with augment: per_row (one pass, one augmentation drawn per row) or a "
        "registered combiner of one gradient per augmentation: mean, equal_norm, min_norm, "
        "soft_surgery, cg2a_provisional (None = the algorithm's, else per_row)",
    )
    gradient_combine_options: dict[str, Any] | None = Field(
        None,
        description="combiner options: kappa (surgery strength, 0..1), solver (equal_norm or "
        "min_norm), min_norm_iters (None = the algorithm's, else the defaults)",
    )
    normalize_obs: bool = Field(False, description="running mean/var observation normaliser")
    normalize_reward: bool = Field(
        False, description="scale rewards by the running std of the discounted return"
    )
    vector: Literal["sync", "async"] = Field(
        "sync", description="vector env: sync (one process) or async (a process per env)"
    )
    eval_every: int = Field(
        10, ge=0, description="evaluation every N iterations (0 = start and end only)"
    )
    eval_episodes: int = Field(10, ge=1, description="episodes per evaluation (policy's mode)")
    eval_seed: int = Field(10_000, description="seed of the evaluation episodes")
    eval_env_kwargs: dict[str, Any] = Field(
        default_factory=dict,
        description="keyword arguments of the evaluation environments only (gym.make), e.g. "
        "a held-out split: {split: test}",
    )
    stop_return: float | None = Field(
        None, description="stop once the evaluation return reaches this (None = never)"
    )
    save_every: int = Field(
        0, ge=0, description="checkpoint every N iterations (0 = only at the end)"
    )
    report_to: list[str] = Field(
        default_factory=lambda: ["tensorboard"],
        description="experiment trackers: tensorboard, wandb, mlflow, trackio, or all (every "
        "one installed); [] = the run folder's files only",
    )
    keep_checkpoints: int = Field(
        2, ge=0, description="how many of the newest checkpoints to keep (0 = all)"
    )
    save_best: str | None = Field(
        None,
        description="keep the policy of the best evaluation in <run_dir>/best/ by this metric, "
        "higher is better (e.g. eval/return_mean; None = off)",
    )
    run_dir: str = Field("", description="run folder (default runs/<algo>-<task>-s<seed>)")
    seed: int = Field(0, description="seed of environments, sampling and initialisation")
    threads: int | Literal["auto"] = Field(
        "auto",
        description="torch CPU threads: auto = the free cores, at most 1 (tiny MLPs run "
        "fastest on one, trainers/run.py auto_threads); 0 = torch's own count; n = n "
        "(torch_threads, the older name, is read as this)",
    )
    progress: bool = Field(True, description="show the progress bar")

    @model_validator(mode="before")
    @classmethod
    def _older_threads_name(cls, data: Any) -> Any:
        """torch_threads (before issue 22, in saved configs too) is read as `threads`."""
        if isinstance(data, dict) and "torch_threads" in data:
            data = dict(data)
            older = data.pop("torch_threads")
            if "threads" in data and data["threads"] != older:
                raise ValueError(
                    f"threads={data['threads']!r} and torch_threads={older!r} (its older "
                    "name) disagree; set threads only"
                )
            data["threads"] = older
        return data

    @field_validator("selection")
    @classmethod
    def _known_selection(cls, value: str | None) -> str | None:
        return TrainConfig._known_selection(value)

    @field_validator("algo")
    @classmethod
    def _algo_with_critic(cls, value: str) -> str:
        from policylab import recipes

        recipe = recipes.get(known_algorithm(value))
        if recipe.value_loss is None or recipe.advantage != "gae":
            with_critic = [
                n
                for n in recipes.names()
                if recipes.get(n).value_loss and recipes.get(n).advantage == "gae"
            ]
            raise ValueError(
                f"algorithm {value!r} has no critic and GAE; control training needs one of: "
                f"{', '.join(with_critic)}"
            )
        return value

    @model_validator(mode="after")
    def _sde(self) -> ControlConfig:
        if self.sde_sample_freq not in (-1, 0) and not self.use_sde:
            raise ValueError(
                f"sde_sample_freq={self.sde_sample_freq} acts only with use_sde=true; set "
                "use_sde=true or leave sde_sample_freq at -1"
            )
        if self.use_sde:
            from policylab import recipes

            policy = recipes.get(self.algo).policy
            if policy != "mlp":
                raise ValueError(
                    f"use_sde=true needs the mlp policy; algo={self.algo!r} uses {policy!r}: "
                    "choose an algorithm with the mlp policy (ppo) or use_sde=false"
                )
        return self

    @model_validator(mode="after")
    def _ignored_fields(self) -> ControlConfig:
        """Fields an algorithm would silently ignore are refused: adapg_lam acts only
        through the adapg optimiser (adpo_provisional's; a resumed config holds the
        default), ent_coef not on a diffusion chain (its entropy is 0)."""
        from policylab import recipes
        from policylab.optimisers import optimiser_of

        optimiser = optimiser_of(self.algo)
        if optimiser != "adapg" and self.adapg_lam != type(self).model_fields["adapg_lam"].default:
            users = [n for n in recipes.names() if optimiser_of(n) == "adapg"]
            raise ValueError(
                f"adapg_lam={self.adapg_lam} acts only with the adapg optimiser; "
                f"algo={self.algo!r} uses {optimiser!r}: choose one of {', '.join(users)} "
                "or leave adapg_lam unset"
            )
        if self.ent_coef and recipes.get(self.algo).policy == "diffusion_chain":
            raise ValueError(
                f"ent_coef={self.ent_coef} has no effect on algo={self.algo!r}: the diffusion "
                "chain's entropy is 0 (DPPO has no entropy term); accepted: 0"
            )
        return self

    @model_validator(mode="after")
    def _init_policy(self) -> ControlConfig:
        """init_policy must be a file, unless the run folder holds a checkpoint: a resumed
        run is its checkpoint and does not read the file (trainers/control.py)."""
        resumable = any((self.folder / "checkpoints").glob("step_*/state.pt"))
        if self.init_policy is not None and not Path(self.init_policy).is_file() and not resumable:
            raise ValueError(
                f"init_policy={self.init_policy!r} is not a file; accepted: a policy file "
                "written by ControlPolicy.save (or None for fresh weights)"
            )
        return self

    @model_validator(mode="after")
    def _augment(self) -> ControlConfig:
        """augment, gradient_combine and its options name registered parts (checked before
        any environment is built)."""
        from policylab.trainers.augmented import check_augment

        check_augment(self)
        return self

    @model_validator(mode="after")
    def _sizes(self) -> ControlConfig:
        batch = self.num_envs * self.num_steps
        if batch % self.minibatch_size:
            valid = [d for d in range(1, batch + 1) if batch % d == 0]
            raise ValueError(
                f"minibatch_size={self.minibatch_size} must divide num_envs × num_steps = "
                f"{batch}; valid: {valid}"
            )
        if self.warmup_steps > self.iterations:
            raise ValueError(
                f"warmup_steps={self.warmup_steps} is longer than the run's {self.iterations} "
                f"iterations (total_steps {self.total_steps} // (num_envs {self.num_envs} × "
                f"num_steps {self.num_steps})): the lr would never reach its peak; accepted: "
                f"0 .. {self.iterations}"
            )
        return self

    @property
    def iterations(self) -> int:
        return max(1, self.total_steps // (self.num_envs * self.num_steps))


def policy_fields(fields: dict[str, Any]) -> dict[str, Any]:
    """A saved control config's fields for rebuilding its policy (inference, a run's
    checkpoint): `init_policy`, the run's start file, is not read (it may be gone)."""
    return {**fields, "init_policy": None} if "init_policy" in fields else fields


# Tuned per-environment defaults, applied under the user's fields. Sources: rl-baselines3-zoo
# hyperparams/ppo.yml ([zoo]) where it transfers; [ours] where we measured (docs/control.md).
CONTROL_DEFAULTS: dict[str, dict[str, Any]] = {
    "policylab/TradeSim-v0": {  # FLAG-Trader's market (seed_agents.md §A5), all [ours]
        "num_envs": 8,  # one 60-day episode per environment per iteration
        "num_steps": 60,
        "minibatch_size": 120,
        "epochs": 4,
        "lr": 3e-4,
        "value_clip": 0.2,
        "total_steps": 4_800,  # CPU scale; the spec's 3·10⁵ is out of reach for the LM
        "eval_episodes": 20,
        "eval_every": 5,
        "eval_env_kwargs": {"split": "test"},  # held-out series, disjoint from training's
    },
    "policylab/MarketMaking-v0": {  # DRLMM's market (seed_control_theory.md §13), [ours]
        "gamma": 1.0,  # the objective: the undiscounted PnL over a fixed horizon (t observed)
        "num_envs": 4,
        "num_steps": 250,  # five 50-step episodes per environment per iteration
        "minibatch_size": 250,
        "total_steps": 100_000,
        "eval_episodes": 50,
    },
    "policylab/VisualReach-v0": {  # CG2A's testbed (control §10), all [ours]: benchmarks/cg2a.py
        "num_envs": 8,
        "num_steps": 64,
        "minibatch_size": 128,
        "epochs": 8,
        "lr": 1e-3,
        "ent_coef": 0.01,
        "total_steps": 16_384,  # CPU scale; the spec's 2·10⁵ is 12× more
        "eval_every": 8,
        "eval_episodes": 32,
        "eval_env_kwargs": {"split": "test"},  # unseen colours and textures
    },
    "CartPole-v1": {
        "num_envs": 8,  # [zoo]
        "num_steps": 32,  # [zoo]
        "minibatch_size": 256,  # [zoo] batch_size 256 (one minibatch per epoch)
        "epochs": 20,  # [zoo]
        "gamma": 0.98,  # [zoo]
        "lam": 0.8,  # [zoo]
        "lr": 1e-3,  # [zoo] lin_1e-3
        # clip ε 0.2 constant [ours]: the zoo anneals it (lin_0.2); over the same 5 seeds the
        # median steps to 475 were 12,800 constant vs 17,920 linear, a difference inside the
        # noise (AUC Δ −9.5 [−38, +19], docs/control.md), so we keep the simpler one
        "ent_coef": 0.0,  # [zoo]
        "total_steps": 100_000,  # [zoo] n_timesteps 1e5
    },
    "FrozenLake-v1": {  # slippery 4×4, one-hot observations (policies/spaces.py)
        # [ours]: the return is the success rate (1 at the goal), so 100 evaluation
        # episodes give it to ±0.1 (95 %) where 10 give ±0.3; the training settings are
        # the generic ones (measured in docs/control.md)
        "eval_episodes": 100,
    },
    "Pendulum-v1": {
        "num_envs": 4,  # [zoo]
        "num_steps": 1024,  # [zoo]
        "minibatch_size": 64,  # [zoo] batch_size 64
        "epochs": 10,  # [zoo]
        "gamma": 0.9,  # [zoo]
        "lam": 0.95,  # [zoo]
        "lr": 1e-3,  # [zoo]
        "schedule": "constant",  # [zoo] constant lr
        "normalize_obs": True,  # [ours]
        "total_steps": 100_000,  # [zoo] n_timesteps 1e5
        "eval_every": 5,  # [ours] iterations are 4096 steps long
    },
}


# Settings an algorithm brings on every task, under the user's fields (over the task's):
# A2C is one update per batch [code stable-baselines3:A2C] ("batch": the whole batch).
_DPPO_RUN = {  # DPPO's run settings [code dppo: hopper-v2 ft_ppo_diffusion_mlp.yaml]
    "lr": 1e-4,  # actor_lr (critic_lr 1e-3 is the recipe's)
    "epochs": 5,  # update_epochs
    "target_kl": 1.0,  # target_kl
    "vf_coef": 0.5,  # vf_coef
    "normalize_reward": True,  # reward_scale_running
    "grad_clip": 0.0,  # no max_grad_norm in the yaml
    "minibatch_size": 512,  # [ours] rows (× K′ steps); the yaml's 5,000 (row, step) pairs
}
CONTROL_ALGO_DEFAULTS: dict[str, dict[str, Any]] = {
    "dppo": _DPPO_RUN,
    "adpo_provisional": _DPPO_RUN,
    "a2c": {  # [code stable-baselines3:A2C] n_steps 5, lr 7e-4, no advantage normalisation
        "num_steps": 5,
        "lr": 7e-4,
        "epochs": 1,
        "minibatch_size": "batch",
        "norm_adv": False,
    },
}


# Settings that `use_sde=true` brings on a task, under the user's fields (over
# CONTROL_DEFAULTS): rl-baselines3-zoo hyperparams/ppo.yml's gSDE entries [zoo].
CONTROL_SDE_DEFAULTS: dict[str, dict[str, Any]] = {
    "Pendulum-v1": {
        "sde_sample_freq": 4,  # [zoo]
        "normalize_obs": False,  # [zoo] no `normalize` in its Pendulum-v1 entry
        "log_std_init": 0.0,  # [zoo] SB3's ActorCriticPolicy default (no policy_kwargs)
    },
}


def is_gym_task(task: str) -> bool:
    """True for a registered gymnasium environment id (e.g. CartPole-v1), a custom
    environment's module:EnvId / module:EnvClass, or one given in Python (envs/user.py)."""
    try:
        import gymnasium

        import policylab.envs  # noqa: F401  (registers the policylab/... ids)
        from policylab.envs.user import is_object_id, is_user_env
    except ImportError:
        return False
    return task in gymnasium.registry or is_user_env(task) or is_object_id(task)


def load_control(file: str | Path | None = None, overrides: dict[str, Any] | None = None):
    """ControlConfig: the task's tuned defaults, then the YAML file, then `overrides`."""
    # the file's fields, checked once with every layer (a file giving num_steps for a2c's
    # whole-batch minibatch does not fail on the schema's default minibatch alone)
    given: dict[str, Any] = dict(read_fields(file)) if file is not None else {}
    given.update(overrides or {})
    task = given.get("task", ControlConfig.model_fields["task"].default)
    sde = CONTROL_SDE_DEFAULTS.get(task, {}) if _truthy(given.get("use_sde")) else {}
    layers = {**CONTROL_DEFAULTS.get(task, {}), **sde}
    algo = given.get("algo", ControlConfig.model_fields["algo"].default)
    for key, value in CONTROL_ALGO_DEFAULTS.get(algo, {}).items():
        if value == "batch":  # one minibatch: the iteration's whole batch
            merged = {**layers, **given}
            value = int(merged.get("num_envs", ControlConfig.model_fields["num_envs"].default))
            value *= int(merged.get("num_steps", ControlConfig.model_fields["num_steps"].default))
        layers[key] = value
    return load(ControlConfig, None, {**layers, **given})


def _truthy(value: Any) -> bool:
    """A bool field's value as pydantic reads it (True, "true", "yes", "1", 1, ...)."""
    return str(value).strip().lower() in ("true", "yes", "on", "1", "y", "t")


class TabularConfig(RunSchema):
    """Every field of `policylab train --task tabular/<name>`: a registered tabular method
    (tabular/catalogue.py) on a seeded instance with an exact oracle (docs/theory.md).
    The seed chooses the instance (a new Garnet, a new starting policy); the run stops when
    it has spent `budget` in the task's budget unit (exact-gradient evaluations, episodes,
    trajectories) or, with `stop_gap`, when its gap to the optimum falls below it."""

    algo: str = Field("drpg", description="tabular method (policylab list --tabular)")
    task: str = Field("tabular/robust_garnet", description="tabular/<task>")
    knobs: dict[str, Any] = Field(
        default_factory=dict, description="task knobs (n_states, gamma, beta, horizon, ...)"
    )
    options: dict[str, Any] = Field(
        default_factory=dict, description="method option overrides (step, inner_tol, ...)"
    )
    seed: int = Field(0, description="instance and sampling seed")
    budget: int = Field(200, ge=1, description="what the run may spend, in the task's unit")
    eval_every: int = Field(10, ge=1, description="score the policy every N method steps")
    save_every: int = Field(50, ge=0, description="checkpoint every N steps (0: at the end)")
    stop_gap: float | None = Field(
        None, ge=0, description="stop once the gap to the exact optimum is at most this"
    )
    run_dir: str | None = Field(None, description="run folder (default runs/<algo>-<task>-s<seed>)")
    progress: bool = Field(True, description="show a progress bar")
    torch_threads: int = Field(
        1,
        ge=0,
        description="torch threads during the run (tiny tensors: 1 avoids thread "
        "overhead; 0 leaves torch's default)",
    )

    KIND: ClassVar[str] = "tabular"  # the task prefix and the registries' kind

    @classmethod
    def catalogue(cls):
        """(methods, tasks) registries of this run kind."""
        from policylab.tabular.catalogue import tabular_methods, tabular_tasks

        return tabular_methods, tabular_tasks

    @field_validator("algo")
    @classmethod
    def _known_method(cls, value: str) -> str:
        methods, _ = cls.catalogue()
        if value not in methods:
            raise ValueError(
                f"unknown {cls.KIND} method {value!r}; choices: {', '.join(methods.names())}"
            )
        return value

    @field_validator("task")
    @classmethod
    def _known_task(cls, value: str) -> str:
        _, tasks = cls.catalogue()
        prefix = f"{cls.KIND}/"
        if not value.startswith(prefix) or value.removeprefix(prefix) not in tasks:
            choices = ", ".join(f"{prefix}{n}" for n in tasks.names())
            raise ValueError(f"unknown {cls.KIND} task {value!r}; choices: {choices}")
        return value


class LabConfig(TabularConfig):
    """Every field of `policylab train --task lab/<name>`: a registered lab method
    (lab/catalogue.py) on a seeded testbed with its own scorer (docs/lab.md). The fields
    and the run are the tabular ones: `budget` is in the task's unit (episodes,
    generations, image pairs), `eval/score` is the task's score."""

    algo: str = Field("", description="lab method (policylab list)")
    task: str = Field("lab/", description="lab/<task>")
    KIND: ClassVar[str] = "lab"

    @classmethod
    def catalogue(cls):
        from policylab.lab.catalogue import lab_methods, lab_tasks

        return lab_methods, lab_tasks

    @model_validator(mode="after")
    def _method_runs_on_task(self) -> LabConfig:
        from policylab.lab.catalogue import lab_methods

        method = lab_methods.get(self.algo)
        name = self.task.removeprefix("lab/")
        if method.tasks and name not in method.tasks:
            same = [m for m in lab_methods.names() if name in lab_methods.get(m).tasks]
            raise ValueError(
                f"lab method {self.algo!r} runs on {', '.join(f'lab/{t}' for t in method.tasks)}, "
                f"not {self.task}; {self.task}'s methods: {', '.join(same) or 'none'}"
            )
        return self
