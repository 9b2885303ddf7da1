"""Embedded tasks: short procedural problems with exact verifiers, small enough for the tiny
shipped model to learn on a CPU.

    import policylab.tasks as tasks
    tasks.names()    # ['arithmetic', 'countdown', 'countdown_calc', 'plan_path', ...]
    task = tasks.get("countdown", n_numbers=3, max_number=20)
    rows = task.examples("train", 64, seed=0)   # dicts: prompt, answer, completion, columns
    task.reward(prompts, completions, numbers=[...], target=[...])   # TRL-style verifier
    tasks.extract_answer("<answer>3*5+7</answer>")                   # '3*5+7'

| task       | prompt                 | answer             | columns                     |
|------------|------------------------|--------------------|-----------------------------|
| arithmetic | `17+25*3=`             | `92`               | -                           |
| countdown  | `3 5 7 -> 22:`         | `3*5+7`            | numbers, target             |
| sudoku4    | `1.3434.2214..321:`    | `1234341221434321` | puzzle, solution            |
| plan_path  | `s..#/.#../...g/#...:` | `DDRRR`            | grid, start, goal, shortest |
| lyapunov   | `x1'=x2 x2'=-sin(x1)-0.1x2 V:` | `--^2c1c1` | check, states_seed    |
| json_extract | `Ann (34) lives in Oslo. ->` | `{"n":"Ann","a":34,"c":"Oslo"}` | schema, gold |
| gui_text   | `..AA....../…;c:A=`    | `24,4`             | screen, mode, action, box, text |

Presets (presets.py) name harder variants in one word: `tasks.get("countdown25")` is
`tasks.get("countdown", max_number=25)`; `tasks.presets()` lists them with a line each.

Knobs (defaults): arithmetic digits=2, ops="+", n_operands=2; countdown n_numbers=3,
max_number=20, max_target=100; sudoku4 blanks=11, partial_credit=False; plan_path size=5,
wall_prob=0.25; json_extract names=16, cities=16, max_age=80, held_out_template=-1
(its verifier is RL-Struct's JSON reward scaled to [0, 1]). Each module's docstring
gives the format, the knobs and the verifier.

Multi-turn tasks (papers/seed_agents.md §A1–§A3) have the same examples and single-turn
verifier, plus `task.env(example)`, a text environment (`policylab.envs.text.TextEnv`), and
`task.demonstrations(n, seed)`, per-turn SFT rows from a scripted noisy demonstrator:

| task            | prompt; first observation    | a played episode (after the observation)  |
|-----------------|------------------------------|-------------------------------------------|
| plan_path_moves | `s..#/.#../...g/#...:` ; `…:P` | `DR;ED;@1,0;PDRR;EDRR;@2,2;PR;ER;@2,3;` |
| countdown_calc  | `3 5 7 -> 22:` ; `…:C`         | `3*5;=15;C15+7;=22;`                    |
| plan_path_fog   | `s.../.#../...g/....:` ; `…:E` | `R;x#0,2;ED;@1,0;E…` (3 attempts)       |
| trade_sim       | `+3-1+2+0+4-2|0:` ; the same   | `B;+1-1+2+0+4-2|1:H;…` (60 days, §A5)   |

Their knobs: plan_path_moves size=4, wall_prob=0.25, agents=2, max_turns=4; countdown_calc
as countdown plus agents=1, max_turns=None (3; 4 with two agents); plan_path_fog size=4,
wall_prob=0.25, hide_prob=0.5, attempts=3, max_turns=6, fog_on_path=True; each also
demo_noise, the demonstrator's noise.

reasoning-gym's ~100 procedural datasets are tasks by name, `rg:<name>` (the `tasks` extra;
reasoning_gym.py): `tasks.get("rg:countdown", min_numbers=3)`, knobs the dataset's config
fields, the verifier reasoning-gym's own `score_answer`.

The model answers inside `<answer>…</answer>`; each example's `completion` is exactly
`<answer>{answer}</answer>`. The test split is a fixed ~10 % of each task's prompts,
chosen by a stable hash of the prompt (see `base.py`), disjoint from train.
"""

from __future__ import annotations

import logging
from typing import Any

from policylab.registry import Registry, UnknownNameError
from policylab.tasks.arithmetic import Arithmetic
from policylab.tasks.base import ANSWER_CLOSE, ANSWER_OPEN, SPLITS, Task, extract_answer
from policylab.tasks.countdown import Countdown
from policylab.tasks.countdown_calc import CountdownCalc
from policylab.tasks.files import FileTask, looks_like_data
from policylab.tasks.gui_text import GuiText
from policylab.tasks.json_extract import JsonExtract
from policylab.tasks.lyapunov import Lyapunov
from policylab.tasks.plan_path import PlanPath
from policylab.tasks.plan_path_fog import PlanPathFog
from policylab.tasks.plan_path_moves import PlanPathMoves
from policylab.tasks.presets import PRESETS, presets, resolve
from policylab.tasks.ranked_list import RankedList
from policylab.tasks.reasoning_gym import PREFIX as RG_PREFIX
from policylab.tasks.reasoning_gym import ReasoningGymTask, dataset_names, is_rg_name
from policylab.tasks.sudoku4 import Sudoku4
from policylab.tasks.trade_sim import TradeSim

log = logging.getLogger(__name__)

task_classes: Registry[type[Task]] = Registry("task")
for _cls in (
    Arithmetic,
    Countdown,
    CountdownCalc,
    JsonExtract,
    GuiText,
    Lyapunov,
    PlanPath,
    PlanPathFog,
    PlanPathMoves,
    RankedList,
    Sudoku4,
    TradeSim,
):
    task_classes.add(_cls.name, _cls)


def names(reasoning_gym: bool = False) -> list[str]:
    """The embedded tasks' and the presets' names, sorted; with `reasoning_gym`, followed
    by every `rg:<name>` (needs the `tasks` extra)."""
    rg = [RG_PREFIX + n for n in dataset_names()] if reasoning_gym else []
    return [*sorted([*task_classes.names(), *PRESETS]), *rg]


def get(name: str, **knobs: Any) -> Task | FileTask | ReasoningGymTask:
    """The task `name` with its difficulty knobs set (unset knobs keep their defaults), a
    preset (presets.py: its base task with the preset's knobs, `knobs` overriding them), a
    reasoning-gym dataset `rg:<name>` (knobs: its config fields; reasoning_gym.py), or a
    user task read from a data file or folder (`FileTask`; knobs prompt_column,
    answer_column, reward). An unknown name lists the tasks and presets; an unknown knob or
    a bad value raises ValueError naming the knob, the value and what is accepted."""
    if name in PRESETS:
        name, knobs = resolve(name, knobs)
    elif is_rg_name(name):
        return ReasoningGymTask(name, **knobs)
    elif name not in task_classes:
        if looks_like_data(name):
            return FileTask(name, **knobs)
        raise UnknownNameError(
            f"unknown task {name!r}; choices: {', '.join(task_classes.names())}; presets: "
            f"{', '.join(sorted(PRESETS))}; reasoning-gym: rg:<name>"
        )
    return task_classes.get(name)(**knobs)


def eval_size(task: Any, n: int) -> int:
    """How many held-out examples an evaluation of `n` can score: `n`, or the size of the
    task's test split when that is smaller (a warning names both sizes). A task whose
    test split is empty raises ValueError. Checked before any model loads."""
    test = getattr(task, "rows", {}).get("test")
    if test is None or n <= test:
        return n
    if test == 0:
        raise ValueError(
            f"{task!r} has no test rows, so nothing to evaluate; give the data a 'test' "
            "split (a split column, or a datasets folder with a test split)"
        )
    log.warning(
        "eval_n = %d exceeds the %d test examples of %s: evaluating on all %d",
        n,
        test,
        getattr(task, "name", task),
        test,
    )
    return test


__all__ = [
    "ANSWER_CLOSE",
    "ANSWER_OPEN",
    "FileTask",
    "ReasoningGymTask",
    "SPLITS",
    "Task",
    "eval_size",
    "extract_answer",
    "get",
    "names",
    "presets",
    "task_classes",
]
