"""Bad configurations fail before any work, naming the field, the value and what is
accepted (issue #24, "Silent": Config); the CLI's integer options are checked by argparse."""

import math

import pytest
import torch

from policylab import models
from policylab.cli import main
from policylab.config import (
    GROUP_RELATIVE,
    ConfigError,
    ControlConfig,
    TabularConfig,
    TrainConfig,
    load,
    parse_overrides,
)
from policylab.trainers.sft import SFTConfig


def _rejects(schema, pairs: list[str]) -> str:
    with pytest.raises(ConfigError) as err:
        load(schema, None, parse_overrides(pairs))
    return str(err.value)


# --- one rule: every number anywhere in a config is finite ---------------------------------


@pytest.mark.parametrize(
    "pair, where",
    [
        ("temperature=inf", "temperature"),  # a string YAML reads, pydantic turns into inf
        ("temperature=.inf", "temperature"),
        ("failure_reward=.nan", "failure_reward"),
        ("lr=.inf", "lr"),
        ("loss={eps_low: .nan}", "loss.eps_low"),
        ("loss={kl_coef: .inf}", "loss.kl_coef"),
        ("advantage={eps: -.inf}", "advantage.eps"),
        ("rewards={arithmetic: .nan}", "rewards.arithmetic"),
        ("reward_shaping={overlong: {factor: .inf}}", "reward_shaping.overlong.factor"),
        ("agent={credit_options: {gammas: [0.9, .nan]}}", "agent.credit_options.gammas[1]"),
    ],
)
def test_train_config_rejects_nan_and_inf_anywhere_naming_the_path(pair, where):
    message = _rejects(TrainConfig, [pair])
    assert f"{where} = " in message and "not a finite number" in message
    assert "nan" in message or "inf" in message  # the value received


@pytest.mark.parametrize(
    "schema, pair, where",
    [
        (ControlConfig, "lr=.inf", "lr"),
        (ControlConfig, "stop_return=.nan", "stop_return"),
        (ControlConfig, "selection_options={ratio: .inf}", "selection_options.ratio"),
        (TabularConfig, "options={step: .nan}", "options.step"),
        (TabularConfig, "knobs={gamma: .inf}", "knobs.gamma"),
        (SFTConfig, "lr=.inf", "lr"),
    ],
)
def test_every_schema_rejects_non_finite_numbers(schema, pair, where):
    message = _rejects(schema, [pair])
    assert f"{where} = " in message and "not a finite number" in message


def test_finite_numbers_and_other_values_are_untouched():
    cfg = load(TrainConfig, None, parse_overrides(["loss={eps_low: 0.1}", "stop_strings=[nan]"]))
    assert cfg.loss == {"eps_low": 0.1} and cfg.stop_strings == ["nan"]  # a string stays one


def test_assignment_is_checked_too():
    cfg = TrainConfig()
    with pytest.raises(ValueError, match="not a finite number"):
        cfg.temperature = math.inf


# --- field constraints -----------------------------------------------------------------------


def test_control_hidden_widths_must_be_positive():
    message = _rejects(ControlConfig, ["hidden=[64, 0]"])
    assert "hidden.1 = 0" in message and "greater than 0" in message


def test_control_target_kl_must_be_positive():
    message = _rejects(ControlConfig, ["target_kl=-1"])
    assert "target_kl = -1" in message and "greater than 0" in message
    assert load(ControlConfig, None, {"target_kl": 0.02}).target_kl == 0.02


def test_train_warmup_longer_than_the_run_is_rejected():
    # updates = steps × epochs × minibatches = 10 × 2 × 2 = 40
    base = {"steps": 10, "epochs": 2, "minibatches": 2, "prompts_per_step": 4}
    assert load(TrainConfig, None, {**base, "warmup_steps": 40}).warmup_steps == 40
    message = _rejects(TrainConfig, [f"{k}={v}" for k, v in base.items()] + ["warmup_steps=41"])
    assert "warmup_steps=41" in message and "40 optimiser updates" in message
    assert "0 .. 40" in message


def test_control_warmup_longer_than_the_run_is_rejected():
    # iterations = total_steps // (num_envs × num_steps) = 1024 // (4 × 128) = 2
    base = ["total_steps=1024", "num_envs=4", "num_steps=128"]
    assert load(ControlConfig, None, parse_overrides([*base, "warmup_steps=2"])).warmup_steps == 2
    message = _rejects(ControlConfig, [*base, "warmup_steps=3"])
    assert "warmup_steps=3" in message and "2 iterations" in message


@pytest.mark.parametrize("algo", ["grpo", "dr_grpo", "rloo", "reinforce_pp_baseline", "dapo"])
def test_one_sample_per_group_under_a_group_relative_estimator_is_rejected(algo):
    message = _rejects(TrainConfig, [f"algo={algo}", "samples_per_prompt=1"])
    assert "samples_per_prompt=1" in message and "every advantage is 0" in message
    assert "estimator" in message and "samples_per_prompt >= 2" in message


@pytest.mark.parametrize("algo", ["reinforce_pp", "risk_seeking_pg", "at_grpo"])
def test_one_sample_per_prompt_is_fine_where_groups_do_not_come_from_it(algo):
    # batch-level baselines; at_grpo's groups are the K branches of its tree, not the samples
    assert load(TrainConfig, None, {"algo": algo, "samples_per_prompt": 1}).algo == algo


def test_a_tree_of_one_branch_is_rejected_too():
    message = _rejects(TrainConfig, ["algo=at_grpo", "samples_per_prompt=1", "agent={branches: 1}"])
    assert "samples_per_prompt=1" in message


@pytest.mark.parametrize("name", GROUP_RELATIVE)
def test_the_group_relative_estimators_give_zero_advantage_to_singleton_groups(name):
    # why the rule exists: rewards 1, 0, 1 in groups of one each → every advantage is 0
    from policylab import advantages

    estimator = advantages(name)
    if hasattr(estimator.options, "kl_coef"):  # RLOO's KL in the reward needs log-probs
        estimator = advantages(name, kl_coef=0.0)
    adv = estimator(rewards=torch.tensor([1.0, 0.0, 1.0]), group_ids=torch.tensor([0, 1, 2]))
    assert torch.equal(adv, torch.zeros(3))


# --- errors before any work ------------------------------------------------------------------


LLM_FAST = ["steps=1", "prompts_per_step=2", "samples_per_prompt=2", "eval_n=2"]


@pytest.mark.parametrize(
    "argv",
    [
        [
            "train",
            "--task",
            "CartPole-v1",
            "lr=.inf",
            "total_steps=64",
            "num_envs=1",
            "minibatch_size=32",
        ],
        ["train", "loss={kl_coef: .inf}", *LLM_FAST],
        ["train", "lr=inf", *LLM_FAST],
    ],
)
def test_a_non_finite_value_fails_before_the_run_folder_is_made(
    argv, tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(tmp_path)
    assert main([*argv, "progress=false"]) == 2
    assert "not a finite number" in capsys.readouterr().out
    assert not (tmp_path / "runs").exists()


# --- --model of a missing folder -------------------------------------------------------------


def _no_hub(monkeypatch):
    import transformers

    def refuse(*args, **kwargs):
        raise AssertionError("the hub was asked")

    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", refuse)
    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", refuse)


@pytest.mark.parametrize("name", ["./no_such_model", "~/no_such_model_xyz", "runs/a/b/model"])
def test_a_missing_model_folder_is_named_before_any_hub_call(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _no_hub(monkeypatch)
    with pytest.raises(FileNotFoundError, match="no such model folder") as err:
        models.load_model(name)
    assert repr(name) in str(err.value) and "hub id" in str(err.value)
    assert f"model = {name!r}" in _rejects(TrainConfig, [f"model={name}"])


def test_a_model_folder_without_config_json_is_named(tmp_path, monkeypatch):
    _no_hub(monkeypatch)
    with pytest.raises(FileNotFoundError, match="no config.json"):
        models.load_model(str(tmp_path))


def test_a_hub_id_the_hub_cannot_provide_gets_a_clear_error(tmp_path, monkeypatch):
    import transformers

    def offline(*args, **kwargs):
        raise OSError("We couldn't connect to 'https://huggingface.co' to load the files")

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", offline)
    with pytest.raises(FileNotFoundError) as err:
        models.load_model("someone/no-such-model")
    message = str(err.value)
    assert "no such model folder 'someone/no-such-model'" in message
    assert "hub" in message and "couldn't connect" in message


def test_eval_of_a_missing_model_folder_is_a_clear_error(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    _no_hub(monkeypatch)
    assert main(["eval", "--model", "./nope", "--task", "arithmetic", "--n", "1"]) == 2
    assert "no such model folder './nope'" in capsys.readouterr().out


# --- CLI integers ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv, option",
    [
        (["eval", "--n", "0"], "--n"),
        (["eval", "--max-new-tokens", "-3"], "--max-new-tokens"),
        (["bandit", "--seeds", "0"], "--seeds"),
        (["bandit", "--steps", "0"], "--steps"),
        (["bandit", "--states", "0"], "--states"),
        (["bandit", "--steps", "ten"], "--steps"),
    ],
)
def test_cli_counts_must_be_positive_integers(argv, option, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {option}" in err and "a positive integer" in err
    assert repr(argv[-1]) in err  # the value received
