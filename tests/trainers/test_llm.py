"""The language-model trainer on a small random model: every algorithm updates every
parameter, resume equals an uninterrupted run, checkpoints survive a kill, bad configs
fail early, a raising reward does not stop training."""

import textwrap

import pytest
import torch

import policylab
from policylab import recipes
from policylab.config import ConfigError, TrainConfig, load
from policylab.models import load_model
from policylab.recipes.base import GENERIC_POLICY
from policylab.trainers import run as run_module
from policylab.trainers.llm import train
from policylab.trainers.run import read_metrics
from run_testing import FAST_LLM, assert_same_metrics

FAST = FAST_LLM


def config(small_model_dir, tmp_path, **fields):
    return load(
        TrainConfig,
        None,
        {**FAST, "model": small_model_dir, "run_dir": str(tmp_path / "run"), **fields},
    )


# recipes of a control network (fpo's flow, pg_rainbow's quantile critic) are control-only;
# agent recipes need a multi-turn task (tests/trainers/test_llm_agents.py); ppo trains the
# language model's value head; rank_grpo's rank_items stage needs a ranked-list task
# (tests/recipes/test_rank_grpo_llm.py)
NEEDS_RANKED_LISTS = {"rank_grpo"}
ALGOS = [
    a
    for a in policylab.list_algorithms()
    if recipes.get(a).policy == GENERIC_POLICY
    and not recipes.get(a).workflow_options
    and a not in NEEDS_RANKED_LISTS
]


@pytest.mark.parametrize("algo", ALGOS)
def test_two_steps_change_every_parameter(small_model_dir, tmp_path, algo):
    # A 0/1 reward (PACS reads it as a label) that varies within groups, so no algorithm
    # sees only zero advantages — except risk-seeking PG, whose (1 − ε)-quantile baseline
    # is 1 on 0/1 rewards (every kept row has A = 0): it gets a graded reward.
    graded = recipes.get(algo).advantage == "quantile_baseline"
    rewards = tmp_path / "length.py"
    rewards.write_text(
        "def length(prompts, completions, **kw):\n"
        + (
            "    return [len(c) % 7 / 6 for c in completions]\n"
            if graded
            else "    return [float(len(c) % 2) for c in completions]\n"
        )
    )
    cfg = config(small_model_dir, tmp_path, algo=algo, steps=2, rewards={f"{rewards}:length": 1.0})
    before, _ = load_model(small_model_dir)
    result = train(cfg)
    after, _ = load_model(f"{result.run_dir}/checkpoints/step_2/model")
    unchanged = [
        n
        for (n, a), b in zip(before.named_parameters(), after.parameters(), strict=True)
        if torch.equal(a, b)
    ]
    assert not unchanged, f"{algo} left {unchanged} untouched"


def test_resume_3_plus_3_equals_6(small_model_dir, tmp_path):
    # a reward that depends on the completion, so every step's metrics depend on the data
    reward = tmp_path / "length.py"
    reward.write_text(
        "def length(prompts, completions, **kw):\n"
        "    return [float(len(c) % 5) for c in completions]\n"
    )
    varied = {"rewards": {f"{reward}:length": 1.0}}
    straight = config(small_model_dir, tmp_path / "a", steps=6, eval_every=3, **varied)
    train(straight)
    first = config(small_model_dir, tmp_path / "b", steps=3, eval_every=3, **varied)
    train(first)
    train(first.model_copy(update={"steps": 6}), resume=True)
    assert_same_metrics(straight.run_dir, first.run_dir)


def test_a_kill_during_a_checkpoint_leaves_the_previous_one(small_model_dir, tmp_path, monkeypatch):
    cfg = config(small_model_dir, tmp_path, steps=4, save_every=2)
    real_save = torch.save

    def dying_save(obj, path, *args, **kwargs):
        if "step_4" in str(path):
            raise KeyboardInterrupt("killed while writing step 4")
        return real_save(obj, path, *args, **kwargs)

    monkeypatch.setattr(run_module.torch, "save", dying_save)
    with pytest.raises(KeyboardInterrupt):
        train(cfg)
    monkeypatch.setattr(run_module.torch, "save", real_save)
    latest = run_module.Run(cfg.run_dir, {}, resume=True).latest_checkpoint()
    assert latest is not None and latest.name == "step_2"
    load_model(str(latest / "model"))  # loadable
    result = train(cfg, resume=True)  # and the run finishes from it
    assert result.steps == 4
    steps = [r["step"] for r in read_metrics(cfg.run_dir) if r["kind"] == "train"]
    assert steps == [1, 2, 3, 4]


def test_a_new_run_refuses_a_folder_with_checkpoints(small_model_dir, tmp_path):
    cfg = config(small_model_dir, tmp_path, steps=1)
    train(cfg)
    with pytest.raises(FileExistsError, match="--resume"):
        train(cfg)


def test_a_raising_reward_does_not_stop_training(small_model_dir, tmp_path):
    fragile = tmp_path / "fragile.py"
    fragile.write_text(
        textwrap.dedent("""
        def fragile(prompts, completions, **kw):
            return [1.0 / (len(c) % 3) for c in completions]   # raises on some lengths
    """)
    )
    cfg = config(small_model_dir, tmp_path, steps=2, rewards={f"{fragile}:fragile": 1.0})
    train(cfg)
    rows = [r for r in read_metrics(cfg.run_dir) if r["kind"] == "train"]
    assert len(rows) == 2
    assert sum(r["reward/failures"] for r in rows) > 0


def test_the_sampler_and_learner_agree_on_log_probs(small_model_dir, tmp_path):
    cfg = config(small_model_dir, tmp_path, steps=1)
    train(cfg)
    row = [r for r in read_metrics(cfg.run_dir) if r["kind"] == "train"][0]
    # the engine's cached incremental forward vs the learner's full forward, float32
    assert row["engine/logprob_abs_diff"] < 1e-4


def test_run_folder_contents(small_model_dir, tmp_path):
    cfg = config(small_model_dir, tmp_path, steps=2)
    result = train(cfg)
    names = {p.name for p in (tmp_path / "run").iterdir()}
    assert {
        "config.yaml",
        "metrics.jsonl",
        "samples.jsonl",
        "curves.png",
        "summary.md",
        "checkpoints",
    } <= names
    assert any(n.startswith("events.") for n in names)
    summary = (tmp_path / "run" / "summary.md").read_text()
    assert "greedy accuracy" in summary
    assert result.before["step"] == 0 and result.after["step"] == 2


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"algo": "grpoo"}, "unknown algorithm 'grpoo'"),
        ({"prompts_per_step": 6, "minibatches": 4}, "valid: \\[1, 2, 3, 6\\]"),
        ({"lr": "fast"}, "lr"),
        ({"stepz": 3}, "unknown field 'stepz'"),
        ({"schedule": "exp"}, "constant, linear, cosine"),
    ],
)
def test_bad_configs_fail_before_any_work(fields, message):
    with pytest.raises(ConfigError, match=message):
        load(TrainConfig, None, fields)


def test_bad_task_and_options_fail_before_a_run_folder_exists(small_model_dir, tmp_path):
    for fields, message in (
        ({"task": "sudoku9"}, "unknown task"),
        ({"task_knobs": {"digitz": 2}}, "no knob 'digitz'"),
        ({"loss": {"eps": 0.1}}, "valid options"),
        ({"algo": "fpo"}, "control policy"),
    ):
        with pytest.raises((ValueError, KeyError), match=message):
            train(config(small_model_dir, tmp_path, steps=1, **fields))
        assert not (tmp_path / "run").exists()
