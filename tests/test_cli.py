"""The `policylab` command: list, describe, bandit."""

import pytest

from policylab.cli import main


def test_list_shows_algorithms_and_components(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    for name in (
        "grpo",
        "dr_grpo",
        "dapo",
        "gspo",
        "cispo",
        "rloo",
        "reinforce_pp",
        "ppo",
        "ppo_clip",
        "gae",
        "k3",
        "token-mean",
    ):
        assert name in out


def test_list_titles_each_component_table_in_plain_english(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    for title in (
        "advantage estimators",
        "policy losses",
        "KL estimators",
        "value losses",
        "reward shaping rules",
        "selections",
    ):
        assert title in out
    assert "losss" not in out and "shapings" not in out


def test_describe_grpo_shows_formula_paper_and_sourced_defaults(capsys):
    assert main(["describe", "grpo"]) == 0
    out = capsys.readouterr().out
    assert "arXiv:2402.03300" in out
    assert "k3" in out and "0.04" in out
    assert "[paper §4.2]" in out  # the source of the KL coefficient, not swallowed as markup
    assert "seq-mean-token-mean" in out


def test_describe_dapo_shows_dynamic_sampling_and_its_sourced_defaults(capsys):
    assert main(["describe", "dapo"]) == 0
    out = capsys.readouterr().out
    assert "selection: dynamic_sampling" in out
    assert "dynamic_sampling.metric" in out and "filter_groups.metric" in out
    assert "max_gen_rounds" in out
    assert main(["describe", "dynamic_sampling"]) == 0
    assert "arXiv:2503.14476" in capsys.readouterr().out


def test_describe_a_component(capsys):
    assert main(["describe", "k3_low_var"]) == 0
    assert "verl" in capsys.readouterr().out


def test_describe_unknown_name_lists_choices(capsys):
    assert main(["describe", "grpoo"]) == 2
    out = capsys.readouterr().out
    assert "unknown name 'grpoo'" in out and "dapo" in out


def test_bandit_runs_the_chosen_algorithms(capsys):
    assert main(["bandit", "--algos", "grpo,cispo", "--seeds", "1", "--steps", "5"]) == 0
    out = capsys.readouterr().out
    assert "grpo" in out and "cispo" in out and "dapo" not in out


@pytest.mark.parametrize("algos", ["nope", "grpo,nope"])
def test_bandit_rejects_unknown_algorithms(capsys, algos):
    assert main(["bandit", "--algos", algos, "--seeds", "1"]) == 2
    assert "unknown algorithm" in capsys.readouterr().out


def test_describe_says_where_each_part_lives_and_lists_stages(capsys):
    assert main(["describe", "vas"]) == 0
    out = capsys.readouterr().out
    assert "src/policylab/algebra/advantages.py:grpo_advantages" in out
    assert "src/policylab/stages/prompts.py:VAS" in out
    assert "(stage)" in out  # the stage of the same name, with its options
    assert "[paper of grpo, DeepSeekMath" in out  # GRPO's run settings, named as GRPO's
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    for stage in ("uniform", "offline", "step_labels", "line_segments", "answers", "difficulty"):
        assert stage in out
