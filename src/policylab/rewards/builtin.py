"""Built-in reward functions: exact answer, answer format, math equivalence, and the GUI
rewards of gui_text (tasks/gui_rules.py: gui_r1, gui/format, gui/acc, se_gui_point,
gui_hit). Registered
under the names of `BUILTIN` by registry.py. A completion may be a text or, for
conversational prompts, TRL's conversation of one assistant message (its content is read)."""

from __future__ import annotations

import re
import threading

from policylab.rewards.json_struct import REWARDS as JSON_REWARDS
from policylab.tasks.base import _completion_text as text_of
from policylab.tasks.base import extract_answer
from policylab.tasks.gui_rules import REWARDS as GUI_REWARDS

_FORMAT = re.compile(r"^(?:(?!<answer>).)*<answer>((?!</?answer>).)+</answer>\s*$", re.DOTALL)


def exact_answer(prompts, completions, answer, **columns) -> list[float]:
    """1.0 when the text inside <answer>…</answer> equals the `answer` column (both
    stripped), else 0.0."""
    return [
        1.0 if (got := extract_answer(text_of(c))) is not None and got == str(a).strip() else 0.0
        for c, a in zip(completions, answer, strict=True)
    ]


def judge_label(prompts, completions, answer, **columns) -> list[float]:
    """SPARK's judge reward (arXiv:2509.22624; seed_agents.md §A7): 1.0 when the text
    inside <answer>…</answer> is exactly the recycled example's label (`answer`: Y/N,
    1/2, or the gold answer of a reflection item), else 0.0 (a missing tag included)."""
    return [
        1.0 if extract_answer(text_of(c)) == str(label).strip() else 0.0
        for c, label in zip(completions, answer, strict=True)
    ]


def format_reward(prompts, completions, **columns) -> list[float]:
    """1.0 when the completion ends with exactly one non-empty <answer>…</answer> block
    (anything may come before it), else 0.0."""
    return [1.0 if _FORMAT.match(text_of(c)) else 0.0 for c in completions]


def math_verify_reward(prompts, completions, answer, **columns) -> list[float]:
    """1.0 when the completion's answer is mathematically equal to the `answer` column,
    judged by Hugging Face's math-verify (LaTeX, fractions, sets, intervals, ...).

    The answer is read from <answer>…</answer> when present, else from the whole
    completion (math-verify then finds a boxed or final expression itself). math-verify
    times each call with signal.alarm (5 s), which only the main thread may use; in the
    worker thread of a reward timeout (reward_timeout_s) that timeout bounds it instead."""
    from math_verify import parse, verify

    own = 5 if threading.current_thread() is threading.main_thread() else None
    scores = []
    for completion, gold in zip(completions, answer, strict=True):
        completion = text_of(completion)
        inside = extract_answer(completion)
        text = inside if inside is not None else completion
        gold_parsed = parse(_as_math(str(gold)), parsing_timeout=own)
        predicted = parse(_as_math(text), parsing_timeout=own)
        right = gold_parsed and predicted and verify(gold_parsed, predicted, timeout_seconds=own)
        scores.append(1.0 if right else 0.0)
    return scores


def _as_math(text: str) -> str:
    # math-verify looks for LaTeX delimiters or \boxed; a bare "3/4" is wrapped so it parses.
    return text if ("$" in text or "\\" in text) else f"${text}$"


# name → function, as registry.py registers them
BUILTIN = {
    "exact_answer": exact_answer,
    "format": format_reward,
    "judge_label": judge_label,
    "math_verify": math_verify_reward,
    **JSON_REWARDS,  # RL-Struct's parts: json_valid, json_struct, … (json_struct.py)
    **GUI_REWARDS,  # GUI-R1 and SE-GUI: gui_r1, se_gui_point, gui_hit, … (gui_rules.py)
}
