"""Reward registry, built-in rewards, user rewards and the failure-isolating combination."""

import math
import textwrap

import pytest

from policylab import rewards
from policylab.rewards.combine import RewardOutputError

P = ["p"] * 3


def test_exact_answer():
    got = rewards.get("exact_answer")(
        P, ["<answer>42</answer>", "<answer> 42 </answer>", "42"], answer=["42", "42", "42"]
    )
    assert got == [1.0, 1.0, 0.0]  # tags required; surrounding spaces stripped


@pytest.mark.parametrize(
    ("completion", "expected"),
    [
        ("<answer>7</answer>", 1.0),
        ("some work then <answer>7</answer>  ", 1.0),
        ("<answer></answer>", 0.0),  # empty answer
        ("<answer>7</answer> trailing", 0.0),  # text after the answer
        ("<answer>7</answer><answer>8</answer>", 0.0),  # two answers
        ("<answer>7", 0.0),  # unclosed
        ("7", 0.0),
    ],
)
def test_format(completion, expected):
    assert rewards.get("format")(["p"], [completion]) == [expected]


def test_math_verify_judges_equivalence():
    fn = rewards.get("math_verify")
    got = fn(
        ["p"] * 4,
        [
            "<answer>1/2</answer>",
            "the answer is $\\frac{1}{2}$",
            "<answer>0.6</answer>",
            "<answer>x</answer>",
        ],
        answer=["0.5"] * 4,
    )
    assert got == [1.0, 1.0, 0.0, 0.0]


def test_names_include_every_task_verifier_and_builtins():
    names = rewards.names()
    for name in (
        "exact_answer",
        "format",
        "math_verify",
        "arithmetic",
        "countdown",
        "sudoku4",
        "plan_path",
    ):
        assert name in names


def test_a_task_name_gives_its_verifier():
    fn = rewards.get("arithmetic")
    assert fn(["2+2="], ["<answer>4</answer>"], answer=["4"]) == [1.0]


def test_unknown_reward_lists_choices():
    with pytest.raises(KeyError, match="exact_answer"):
        rewards.get("exact")


def test_user_reward_from_a_file_and_from_a_module(tmp_path, monkeypatch):
    source = textwrap.dedent("""
        def brevity(prompts, completions, **kw):
            return [1.0 / (1 + len(c)) for c in completions]
    """)
    (tmp_path / "my_rewards.py").write_text(source)
    from_file = rewards.get(f"{tmp_path / 'my_rewards.py'}:brevity")
    assert from_file(["p"], ["abc"]) == [0.25]
    monkeypatch.syspath_prepend(str(tmp_path))
    from_module = rewards.get("my_rewards:brevity")
    assert from_module(["p"], ["a"]) == [0.5]
    with pytest.raises(ValueError, match="has no function 'nope'.*brevity"):
        rewards.get("my_rewards:nope")
    with pytest.raises(ValueError, match="no file"):
        rewards.get(f"{tmp_path / 'missing.py'}:brevity")
    with pytest.raises(ValueError, match="cannot import"):
        rewards.get("no_such_module_xyz:fn")


def test_combine_weights_and_keeps_each_part():
    combined = rewards.combine({"exact_answer": 1.0, "format": 0.1})
    result = combined(P, ["<answer>1</answer>", "<answer>2</answer>", "1"], answer=["1"] * 3)
    assert result.parts["exact_answer"] == [1.0, 0.0, 0.0]
    assert result.parts["format"] == [1.0, 1.0, 0.0]
    assert result.total == pytest.approx([1.1, 0.1, 0.0])
    assert result.failures == {}


def test_a_raising_sample_gets_the_failure_reward_and_is_counted(caplog):
    def fragile(prompts, completions, **kw):
        return [1 / (len(c) - 3) for c in completions]  # length 3 divides by zero

    combined = rewards.combine({fragile: 1.0}, failure_reward=-1.0)
    result = combined(P, ["abcd", "abc", "abcde"])
    assert result.parts["fragile"] == [1.0, -1.0, 0.5]
    assert result.failures == {"fragile": 1}
    assert "fragile" in caplog.text


def test_wrong_length_and_non_numbers_name_the_function():
    def short(prompts, completions, **kw):
        return [1.0]

    def wordy(prompts, completions, **kw):
        return ["good"] * len(completions)

    with pytest.raises(RewardOutputError, match="'short' returned 1 values for 3"):
        rewards.combine({short: 1.0})(P, ["a", "b", "c"])
    with pytest.raises(RewardOutputError, match="'wordy' returned 'good'"):
        rewards.combine({wordy: 1.0})(P, ["a", "b", "c"])


def test_none_means_unscorable_and_is_left_out():
    def partial(prompts, completions, **kw):
        return [None, 1.0, None]

    def nothing(prompts, completions, **kw):
        return [None, 0.5, 0.25]

    result = rewards.combine({partial: 1.0, nothing: 2.0})(P, ["a", "b", "c"])
    assert math.isnan(result.total[0])
    assert result.total[1:] == [2.0, 0.5]


def test_columns_are_passed_by_name_and_missing_ones_are_explained():
    def needs_target(prompts, completions, target):
        return [float(t) for t in target]

    combined = rewards.combine({needs_target: 1.0})
    assert combined(["p"], ["c"], target=[3], other=["x"]).total == [3.0]
    with pytest.raises(ValueError, match="needs column\\(s\\) target; the data has: other"):
        combined(["p"], ["c"], other=["x"])


def test_mismatched_columns_are_rejected():
    with pytest.raises(ValueError, match="column 'answer' has 1 values for 2"):
        rewards.combine({"exact_answer": 1.0})(["p", "q"], ["a", "b"], answer=["a"])


def test_functions_given_by_name_take_precedence_over_the_registry():
    from policylab import tasks

    partial = tasks.get("sudoku4", partial_credit=True)
    ex = partial.examples("test", 1)[0]
    blank = ex["puzzle"].index(".")  # change one blank cell: partial credit keeps the rest
    digit = "1" if ex["solution"][blank] != "1" else "2"
    wrong_one = ex["solution"][:blank] + digit + ex["solution"][blank + 1 :]
    args = ([ex["prompt"]], [f"<answer>{wrong_one}</answer>"])
    cols = {"puzzle": [ex["puzzle"]], "solution": [ex["solution"]]}
    default = rewards.combine({"sudoku4": 1.0})(*args, **cols).total[0]
    knob_aware = rewards.combine({"sudoku4": 1.0}, functions={"sudoku4": partial.reward})
    assert default == 0.0
    assert 0.0 < knob_aware(*args, **cols).total[0] < 1.0
