"""Running the test-time methods of `policylab.testtime` over a held-out set: the method
table and its options, one instance solved with its reward and seeds, a whole held-out
evaluation, and the run folder `policylab train --algo latentseek --task arithmetic` writes
(config.yaml, metrics.jsonl with one row per instance and the summary row, samples.jsonl
with every instance's answers, summary.md). Nothing here changes a model's weights.

Options (`agent={...}` on `policylab train`, `--option key=value` on `policylab eval` and
`policylab solve`): the method's own keywords (e.g. latentseek's rho, lr, steps, threshold,
start) plus `reward` (oracle | noisy_oracle), `flip` (the noisy oracle's flip probability)
and `pause` (K pause characters `~` appended to every prompt: the DMLR-text model's input).
"""

from __future__ import annotations

import inspect
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch

from policylab import testtime
from policylab.tasks.base import ANSWER_OPEN

NAN = float("nan")
PAUSE = "~"  # the DMLR-text model's pause character [ours, seed_agents.md §A9]
METHODS: dict[str, Callable] = {
    "greedy": testtime.greedy,
    "best_of_n": testtime.best_of_n,
    "latentseek": testtime.latentseek,
    "latent_conf_pg": testtime.latent_confidence_pg,
    "best_of_m_by_confidence": testtime.best_of_m_by_confidence,
}
REWARDS = ("oracle", "noisy_oracle")
GENERIC = {"reward": "oracle", "flip": 0.2, "pause": 0}
_RUNTIME = {"model", "tok", "prompt_ids", "reward_fn", "generator", "max_new_tokens"}


def method_options(method: str) -> dict[str, Any]:
    """The options `method` accepts, with their defaults (its keywords and GENERIC)."""
    if method not in METHODS:
        raise ValueError(
            f"unknown test-time method {method!r}; accepted: {', '.join(METHODS)} "
            "(or a test-time algorithm: latentseek, dmlr_text_provisional)"
        )
    params = inspect.signature(METHODS[method]).parameters.values()
    own = {p.name: p.default for p in params if p.name not in _RUNTIME}
    return {**GENERIC, **own}


def resolve(name: str, overrides: Mapping[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
    """(method, options) of a method or a test-time recipe (its `training` defaults), with
    `overrides` applied; an unknown option or a bad value is an error naming the choices."""
    from policylab import recipes

    defaults: dict[str, Any] = {}
    method = name
    if name in recipes.recipes:
        training = recipes.get(name).training
        if "testtime" not in training:
            raise ValueError(
                f"{name} trains a model; --testtime takes a test-time method "
                f"({', '.join(METHODS)}) or a test-time algorithm"
            )
        method = training["testtime"].value
        defaults = {k: s.value for k, s in training.items() if k != "testtime"}
    accepted = method_options(method)
    options = {**accepted, **{k: v for k, v in defaults.items() if k in accepted}}
    unknown = sorted(set(overrides or {}) - set(accepted))
    if unknown:
        raise ValueError(
            f"{name}: unknown test-time option(s) {', '.join(unknown)}; accepted: "
            f"{', '.join(sorted(accepted))}"
        )
    options.update(overrides or {})
    _check(name, options)
    return method, options


# numeric options: (kind, lowest, highest, lowest excluded); a value outside, or of another
# type, is refused before any model loads
_RANGES: dict[str, tuple[type, float, float, bool]] = {
    "flip": (float, 0.0, 1.0, False),
    "rho": (float, 0.0, 1.0, True),
    "lr": (float, 0.0, math.inf, True),
    "sigma": (float, 0.0, math.inf, True),
    "temperature": (float, 0.0, math.inf, True),
    "threshold": (float, -math.inf, math.inf, False),
    "steps": (int, 0, math.inf, False),
    "n": (int, 1, math.inf, False),
    "m": (int, 1, math.inf, False),
    "M": (int, 1, math.inf, False),
    "K": (int, 1, math.inf, False),
    "topk": (int, 1, math.inf, False),
}


def _check_number(name: str, key: str, value: Any) -> None:
    kind, low, high, open_low = _RANGES[key]
    number = (int, float) if kind is float else (int,)
    bad_type = isinstance(value, bool) or not isinstance(value, number)
    if bad_type or math.isnan(value) or value > high or value < low or open_low and value == low:
        accepted = f"{'a number' if kind is float else 'an integer'} " + (
            f"in {'(' if open_low else '['}{low}, {high}]"
            if math.isfinite(high)
            else f"{'>' if open_low else '≥'} {low}"
            if math.isfinite(low)
            else ""
        )
        raise ValueError(f"{name}: {key}={value!r}; accepted: {accepted.strip()}")


def _check(name: str, options: dict[str, Any]) -> None:
    for key, value in options.items():
        if key in _RANGES:
            _check_number(name, key, value)
    if options["reward"] not in REWARDS:
        raise ValueError(f"{name}: reward={options['reward']!r}; accepted: {', '.join(REWARDS)}")
    if not isinstance(options["pause"], int) or options["pause"] < 0:
        raise ValueError(f"{name}: pause={options['pause']!r}; accepted: 0, 1, 2, ...")
    if options["pause"] < options.get("K", 0):
        raise ValueError(
            f"{name}: K={options['K']} latent positions replace the prompt's last K ids, "
            f"but pause={options['pause']}: give pause ≥ K (the model's pause characters)"
        )
    start = options.get("start", 0)
    if start != "answer" and (not isinstance(start, int) or start < 0):
        raise ValueError(f"{name}: start={start!r}; accepted: 0, 1, ... or 'answer'")


@dataclass
class Outcome:
    """One instance: the method's result, whether its answer (and the first one) is right."""

    solved: testtime.Solved
    correct: bool
    initial_correct: bool | None  # None: the method decodes no first answer
    flips: int
    unparsed: int
    seconds: float


def solve_one(
    model,
    tok,
    task,
    example: dict,
    method: str,
    options: Mapping[str, Any],
    *,
    seed: int,
    index: int,
    max_new_tokens: int = 24,
) -> Outcome:
    """`method` on one example. Instance `index` under `seed` gets its own sampling
    generator and oracle noise, the same under every method (paired by prompt)."""
    opts = dict(options)
    prompt = example["prompt"] + PAUSE * opts.pop("pause")
    prompt_ids = tok(prompt, add_special_tokens=False)["input_ids"]
    flip = opts.pop("flip")
    flip = flip if opts.pop("reward") == "noisy_oracle" else 0.0
    oracle = testtime.OracleReward(task, example, flip=flip, seed=_instance_seed(seed, index))
    params = inspect.signature(METHODS[method]).parameters
    if "reward_fn" in params:
        opts["reward_fn"] = oracle
    if "generator" in params:
        opts["generator"] = torch.Generator().manual_seed(_instance_seed(seed, index))
    if opts.get("start") == "answer":
        opts["start"] = answer_start(tok)
    started = time.perf_counter()
    solved = METHODS[method](model, tok, prompt_ids, max_new_tokens=max_new_tokens, **opts)
    return Outcome(
        solved,
        task.verify(solved.completion, example) >= 1.0,
        None if solved.initial is None else task.verify(solved.initial, example) >= 1.0,
        oracle.flips,
        oracle.unparsed,
        time.perf_counter() - started,
    )


def reward_keywords(method: str) -> set[str]:
    """The runtime keywords `method` takes (reward_fn, generator, ...)."""
    return set(inspect.signature(METHODS[method]).parameters) & _RUNTIME


def answer_start(tok) -> int:
    """s = the first answer position after the `<answer>` tag (its token count)."""
    return len(tok(ANSWER_OPEN, add_special_tokens=False)["input_ids"])


def _instance_seed(seed: int, index: int) -> int:
    return seed * 1_000_003 + index


def instance_row(outcome: Outcome) -> dict[str, float]:
    """The numbers logged per instance."""
    s = outcome.solved
    return {
        "testtime/correct": float(outcome.correct),
        "testtime/initial_correct": (
            NAN if outcome.initial_correct is None else float(outcome.initial_correct)
        ),
        "testtime/iterations": float(s.iterations),
        "testtime/reward_calls": float(s.reward_calls),
        "testtime/decodes": float(s.decodes),
        "testtime/forward_passes": float(s.forward_passes),
        "testtime/final_reward": s.rewards[-1] if s.rewards else NAN,
        "testtime/oracle_flips": float(outcome.flips),
        "testtime/unparsed_answers": float(outcome.unparsed),
        "testtime/seconds": outcome.seconds,
    }


def summarize(outcomes: list[Outcome]) -> dict[str, float]:
    """Means over instances of `instance_row`, named accuracy where they are 0/1 (nan
    values, such as a method's missing first answer, are left out; all nan gives nan)."""
    rows = [instance_row(o) for o in outcomes]
    mean = {}
    for key in rows[0]:
        values = [r[key] for r in rows if not math.isnan(r[key])]
        mean[key] = sum(values) / len(values) if values else NAN
    mean.pop("testtime/final_reward")
    return {
        "eval/accuracy": mean.pop("testtime/correct"),
        "eval/initial_accuracy": mean.pop("testtime/initial_correct"),
        **{k.replace("testtime/", "eval/") + "_mean": v for k, v in mean.items()},
        "eval/n": float(len(rows)),
    }


def evaluate(
    model,
    tok,
    task,
    method: str,
    options: Mapping[str, Any],
    *,
    n: int,
    eval_seed: int = 0,
    seed: int = 0,
    max_new_tokens: int = 24,
    on_instance: Callable[[int, dict, Outcome], None] | None = None,
) -> tuple[list[Outcome], dict[str, float]]:
    """`method` over `n` held-out examples (drawn with `eval_seed`); `seed` sets the
    sampling and oracle noise. Returns every outcome and the summary."""
    examples = task.examples("test", n, seed=eval_seed)
    outcomes = []
    model.eval()
    for i, example in enumerate(examples):
        outcome = solve_one(
            model,
            tok,
            task,
            example,
            method,
            options,
            seed=seed,
            index=i,
            max_new_tokens=max_new_tokens,
        )
        outcomes.append(outcome)
        if on_instance is not None:
            on_instance(i, example, outcome)
    return outcomes, summarize(outcomes)


@dataclass
class TestTimeResult:
    """What `policylab train` with a test-time algorithm returns."""

    run_dir: str
    method: str
    options: dict[str, Any]
    summary: dict[str, float]
    seconds: float


def is_testtime(algo: str) -> bool:
    """Whether the algorithm `algo` is a test-time method (its recipe names one)."""
    from policylab import recipes

    return algo in recipes.recipes and "testtime" in recipes.get(algo).training


def train(cfg) -> TestTimeResult:
    """`policylab train --algo <test-time algorithm>`: no weights are trained; the method
    runs on `cfg.eval_n` held-out instances of `cfg.task` (drawn with `eval_seed`, sampled
    with `seed`) and the run folder holds config.yaml, one metrics row per instance
    (kind "instance"), the summary row (kind "eval"), samples.jsonl and summary.md.
    Options come from the recipe, overridden by `cfg.agent`."""
    from policylab import tasks
    from policylab.models import load_model
    from policylab.trainers.run import Run, run_options

    method, options = resolve(cfg.algo, cfg.agent)  # before any model loads
    task = tasks.get(cfg.task, **cfg.task_knobs)
    if not hasattr(task, "verify"):
        raise ValueError(f"task {cfg.task!r}: test-time methods need a task with a verifier")
    started = time.perf_counter()
    run = Run(
        cfg.folder,
        {**cfg.model_dump(), "resolved": {"testtime": method, "options": options}},
        **run_options(cfg),
    )
    torch.manual_seed(cfg.seed)
    model, tok = load_model(cfg.model)

    def log_instance(i: int, example: dict, outcome: Outcome) -> None:
        run.log(i, instance_row(outcome), kind="instance")
        s = outcome.solved
        run.log_samples(
            i,
            [
                {
                    "prompt": example["prompt"],
                    "answer": example["answer"],
                    "initial": s.initial,
                    "completion": s.completion,
                    "rewards": s.rewards,
                }
            ],
        )

    _, summary = evaluate(
        model,
        tok,
        task,
        method,
        options,
        n=cfg.eval_n,
        eval_seed=cfg.eval_seed,
        seed=cfg.seed,
        max_new_tokens=cfg.max_new_tokens,
        on_instance=log_instance,
    )
    run.log(cfg.eval_n, summary, kind="eval")
    seconds = time.perf_counter() - started
    run.write_summary(_summary_text(cfg, method, options, summary, seconds))
    run.close()
    return TestTimeResult(str(run.dir), method, options, summary, seconds)


def _summary_text(cfg, method, options, summary, seconds) -> str:
    lines = [
        f"# {cfg.algo} ({method}) on {cfg.task}, model {cfg.model}",
        "",
        f"Test-time method: no weights trained. {int(summary['eval/n'])} held-out instances "
        f"(eval_seed {cfg.eval_seed}, seed {cfg.seed}), {seconds:.0f} s.",
        "",
        "| metric | value |",
        "|---|---|",
        *(f"| {k} | {v:.4g} |" for k, v in summary.items()),
        "",
        "Options: " + ", ".join(f"{k}={v!r}" for k, v in options.items()),
        "",
    ]
    return "\n".join(lines)


def pause_rows(task, n: int, pause: int = 4, seed: int = 0) -> list[dict[str, str]]:
    """SFT rows of the DMLR-text model: `n` training-split examples of `task` with `pause`
    pause characters between prompt and answer ({"prompt": "17+25+3=~~~~", "answer": "45"});
    `policylab sft --task FILE` trains on their `<answer>…</answer>` demonstrations."""
    rows = task.examples("train", n, seed=seed)
    return [{"prompt": r["prompt"] + PAUSE * pause, "answer": r["answer"]} for r in rows]
