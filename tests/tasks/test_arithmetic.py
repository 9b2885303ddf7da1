"""arithmetic: hand-made verifier cases and generator properties."""

from __future__ import annotations

import re

import pytest

import policylab.tasks as tasks

TASK = tasks.get("arithmetic")


@pytest.mark.parametrize(
    ("completion", "answer", "reward"),
    [
        ("<answer>42</answer>", "42", 1.0),
        ("<answer> 42\n</answer>", "42", 1.0),  # stripped
        ("let me see <answer>42</answer> ok", "42", 1.0),
        ("<answer>-8</answer>", "-8", 1.0),
        ("<answer>042</answer>", "42", 1.0),  # int() reads leading zeros: documented
        ("<answer>-0</answer>", "0", 1.0),
        ("<answer>43</answer>", "42", 0.0),  # wrong
        ("<answer>-42</answer>", "42", 0.0),
        ("<answer>+42</answer>", "42", 0.0),  # malformed
        ("<answer>42.0</answer>", "42", 0.0),
        ("<answer>4 2</answer>", "42", 0.0),
        ("<answer>40+2</answer>", "42", 0.0),
        ("<answer></answer>", "42", 0.0),
        ("<answer>forty-two</answer>", "42", 0.0),
        ("<answer>__import__('os')</answer>", "42", 0.0),  # adversarial
        ("<answer>" + "9" * 5000 + "</answer>", "42", 0.0),  # huge: no int() of it
        ("<answer>４２</answer>", "42", 0.0),  # full-width digits
        ("42", "42", 0.0),  # missing tags
        ("<answer>42", "42", 0.0),
        ("<answer>41</answer><answer>42</answer>", "42", 0.0),  # the first block counts
        ("<answer>42</answer><answer>41</answer>", "42", 1.0),
    ],
)
def test_verify(completion, answer, reward):
    assert TASK.verify(completion, {"answer": answer}) == reward


@pytest.mark.parametrize(
    ("prompt", "answer"),
    [("17+25=", "42"), ("17+25*3=", "92"), ("17-25=", "-8"), ("2*3-4*5=", "-14"), ("0*7=", "0")],
)
def test_answer_follows_precedence(prompt, answer):
    assert TASK._answer({"prompt": prompt}) == answer


def _by_hand(expression: str) -> int:
    # an independent evaluation: a sum of signed products
    total = 0
    for sign, term in re.findall(r"([+-]?)([0-9*]+)", expression):
        product = 1
        for factor in term.split("*"):
            product *= int(factor)
        total += -product if sign == "-" else product
    return total


@pytest.mark.parametrize(
    ("knobs", "n"),
    [
        ({}, 200),
        ({"digits": 1, "ops": "+"}, 80),
        ({"digits": 3, "ops": "*-", "n_operands": 4}, 200),
    ],
)
def test_generated_prompts_and_answers(knobs, n):
    task = tasks.get("arithmetic", **knobs)
    k = task.knobs
    for example in task.examples("train", n, seed=7):
        prompt = example["prompt"]
        assert prompt.endswith("=")
        operands = re.split(r"[+\-*]", prompt[:-1])
        assert len(operands) == k.n_operands
        assert all(len(x) <= k.digits and str(int(x)) == x for x in operands)
        assert set(re.sub(r"[0-9]", "", prompt[:-1])) <= set(k.ops)
        assert int(example["answer"]) == _by_hand(prompt[:-1])
        assert example["answer"] == str(int(example["answer"]))  # canonical form
        assert set(example) == {"prompt", "answer", "completion"}
