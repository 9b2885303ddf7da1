"""What every embedded task promises: names and knobs, answer extraction, the fixed and
disjoint train/test split, stable generation, demonstrations that score 1.0, and the
TRL-style reward function."""

from __future__ import annotations

import random

import pytest

import policylab.tasks as tasks
from policylab.tasks.base import split_of

NAMES = [
    "arithmetic",
    "countdown",
    "countdown_calc",
    "json_extract",
    "gui_text",
    "plan_path",
    "plan_path_fog",
    "plan_path_moves",
    "ranked_list",
    "sudoku4",
]

# The first example of each split for the default knobs and seed 0. A change here means the
# generator changed: every stored dataset and reported score of that task changes with it.
FIRST_EXAMPLES = {
    ("arithmetic", "test"): ("45+74=", "119"),
    ("arithmetic", "train"): ("49+97=", "146"),
    ("countdown", "test"): ("2 9 18 -> 11:", "18-(9-2)"),
    ("countdown", "train"): ("7 17 19 -> 9:", "19-(17-7)"),
    ("plan_path", "test"): (".#..#/s...#/g#.##/.#.#./...#.:", "D"),
    ("plan_path", "train"): (".#.../....#/##s../...##/#...g:", "DDRR"),
    ("sudoku4", "test"): ("...2..1...4..3.1:", "1432321421434321"),
    ("countdown_calc", "test"): ("8 11 16 -> 3:", "8+11-16"),
    ("countdown_calc", "train"): ("7 17 19 -> 9:", "19-(17-7)"),
    ("plan_path_fog", "test"): ("...g/#.../#.s./...#:", "RUU"),
    ("plan_path_fog", "train"): (".s../...g/..#./....:", "RDR"),
    ("plan_path_moves", "test"): ("##../s.../#.../#..g:", "RDDRR"),
    ("plan_path_moves", "train"): (".#../..../.###/s..g:", "RRR"),
    ("ranked_list", "test"): ("top3 of 7 0 1 5 3 9:", "9\n7\n5"),
    ("ranked_list", "train"): ("top3 of 6 9 0 2 4 3:", "9\n6\n4"),
    ("sudoku4", "train"): ("4.3....2.32.....:", "4231314213242413"),
    ("json_extract", "test"): ("Emil (74) lives in Kyiv. ->", '{"n":"Emil","a":74,"c":"Kyiv"}'),
    ("json_extract", "train"): (
        "In Delhi lives Nils who is 20. ->",
        '{"n":"Nils","a":20,"c":"Delhi"}',
    ),
    ("gui_text", "test"): (".......N../.......N../SSF..PP.../SSF......./..........;c:S=", "9,29"),
    ("gui_text", "train"): ("....II..../...NN...../...NN.YYY./......YYY./.BB.......;c:B=", "19,44"),
}


def test_names():
    # lyapunov (one system per task: its split is by states, not by prompt) keeps its own
    # API tests in test_lyapunov.py; trade_sim (split by series seed ranges) in
    # test_trade_sim_task.py; the presets (test_task_presets.py) are names too
    own = ["lyapunov", "trade_sim"]
    assert tasks.task_classes.names() == sorted([*NAMES, *own])
    assert tasks.names() == sorted([*NAMES, *own, *tasks.presets()])


def test_unknown_task_lists_the_names():
    with pytest.raises(ValueError, match="unknown task 'chess'.*arithmetic, countdown"):
        tasks.get("chess")


@pytest.mark.parametrize("name", NAMES)
def test_defaults_and_repr(name):
    task = tasks.get(name)
    assert task.name == name
    assert repr(task).startswith(f"{name}(")
    with pytest.raises(AttributeError):  # knobs are frozen
        task.knobs.__setattr__(next(iter(vars(task.knobs))), 1)


def test_knobs_are_set():
    task = tasks.get("countdown", n_numbers=4, max_number=9)
    assert (task.knobs.n_numbers, task.knobs.max_number, task.knobs.max_target) == (4, 9, 100)


@pytest.mark.parametrize(
    ("name", "knobs", "message"),
    [
        ("countdown", {"colour": 3}, "countdown has no knob 'colour'.*knobs: n_numbers"),
        ("countdown", {"n_numbers": 9}, "n_numbers=9 .*integer from 2 to 5"),
        ("countdown", {"n_numbers": True}, "n_numbers=True"),
        ("countdown", {"max_number": "20"}, "max_number='20'"),
        ("countdown", {"max_target": 0}, "max_target=0 .*from 1 to 9999"),
        ("arithmetic", {"digits": 0}, "digits=0 .*from 1 to 4"),
        ("arithmetic", {"n_operands": 1}, "n_operands=1"),
        ("arithmetic", {"ops": "+/"}, "ops='\\+/' .*distinct characters from '\\+-\\*'"),
        ("arithmetic", {"ops": "++"}, "ops='\\+\\+'"),
        ("arithmetic", {"ops": ""}, "ops=''"),
        ("sudoku4", {"blanks": 13}, "blanks=13 .*from 1 to 12"),
        ("sudoku4", {"partial_credit": 1}, "partial_credit=1 .*True or False"),
        ("plan_path", {"size": 7}, "size=7 .*from 2 to 6"),
        ("plan_path", {"wall_prob": 0.9}, "wall_prob=0.9 .*from 0.0 to 0.8"),
        ("plan_path", {"wall_prob": "low"}, "wall_prob='low'"),
    ],
)
def test_bad_knobs_name_the_knob_and_value(name, knobs, message):
    with pytest.raises(ValueError, match=message):
        tasks.get(name, **knobs)


@pytest.mark.parametrize(
    ("completion", "expected"),
    [
        ("<answer>42</answer>", "42"),
        ("thinking 6*7 ... <answer> 42 \n</answer> done", "42"),
        ("<answer>1</answer><answer>2</answer>", "1"),  # the first block counts
        ("<answer></answer>", ""),
        ("<answer><answer>5</answer>", "<answer>5"),  # up to the next closing tag
        ("42", None),
        ("<answer>42", None),
        ("42</answer>", None),
        ("</answer>42<answer>", None),
        ("", None),
        (None, None),
    ],
)
def test_extract_answer(completion, expected):
    assert tasks.extract_answer(completion) == expected


@pytest.mark.parametrize("name", NAMES)
def test_every_demonstration_scores_one(name):
    task = tasks.get(name)
    examples = task.examples("train", 200, seed=1)
    for example in examples:
        assert example["completion"] == f"<answer>{example['answer']}</answer>"
        assert task.verify(example["completion"], example) == 1.0, example


@pytest.mark.parametrize("name", NAMES)
def test_train_and_test_are_disjoint_and_follow_the_hash(name):
    task = tasks.get(name)
    train = task.examples("train", 300, seed=2)
    test = task.examples("test", 100, seed=3)
    assert {e["prompt"] for e in train}.isdisjoint({e["prompt"] for e in test})
    assert all(split_of(name, e["prompt"]) == "train" for e in train)
    assert all(split_of(name, e["prompt"]) == "test" for e in test)
    assert len({e["prompt"] for e in train}) == 300  # distinct within one call


def test_split_hash_is_fixed_and_near_ten_percent():
    assert split_of("arithmetic", "70+1=") == "test"
    assert split_of("arithmetic", "49-97=") == "train"
    prompts = [f"{a}+{b}=" for a in range(50) for b in range(50)]
    share = sum(split_of("arithmetic", p) == "test" for p in prompts) / len(prompts)
    assert 0.08 < share < 0.12


@pytest.mark.parametrize("split", ["train", "test"])
@pytest.mark.parametrize("name", NAMES)
def test_generation_is_stable(name, split):
    task = tasks.get(name)
    first = task.examples(split, 20, seed=0)
    assert first == tasks.get(name).examples(split, 20, seed=0)
    assert first[:5] == task.examples(split, 5, seed=0)  # a larger n extends a smaller one
    assert first != task.examples(split, 20, seed=1)
    assert (first[0]["prompt"], first[0]["answer"]) == FIRST_EXAMPLES[(name, split)]


def test_generation_leaves_the_global_rng_alone():
    random.seed(123)
    state = random.getstate()
    tasks.get("countdown").examples("train", 10)
    assert random.getstate() == state


@pytest.mark.parametrize(
    ("name", "knobs", "max_prompt", "max_answer"),
    [
        ("arithmetic", {}, 40, 20),
        ("countdown", {}, 40, 20),
        ("plan_path", {}, 40, 20),
        ("sudoku4", {}, 40, 20),
        ("arithmetic", {"digits": 4, "n_operands": 4}, 40, 20),
        ("countdown", {"n_numbers": 5, "max_number": 99, "max_target": 9999}, 40, 20),
        ("plan_path", {"size": 6}, 42, 25),
        ("sudoku4", {"blanks": 12}, 40, 20),
    ],
)
def test_short_prompts_and_answers_in_the_task_alphabet(name, knobs, max_prompt, max_answer):
    task = tasks.get(name, **knobs)
    for example in task.examples("train", 50, seed=4):
        assert len(example["prompt"]) <= max_prompt
        assert len(example["answer"]) <= max_answer
        assert set(example["prompt"] + example["answer"]) <= set(task.chars), example


def test_bad_arguments_of_examples():
    task = tasks.get("arithmetic")
    with pytest.raises(ValueError, match="split='valid'.*train, test"):
        task.examples("valid", 3)
    with pytest.raises(ValueError, match="n=-1"):
        task.examples("train", -1)
    with pytest.raises(ValueError, match="seed='x'"):
        task.examples("train", 1, seed="x")
    assert task.examples("test", 0) == []


def test_too_few_instances_says_how_many():
    # digits=1, ops="+", 2 operands: 100 prompts in all, 12 of them in the test split
    task = tasks.get("arithmetic", digits=1, ops="+")
    assert len(task.examples("test", 12)) == 12
    with pytest.raises(ValueError, match="only about 12 distinct test examples"):
        task.examples("test", 13)


def _columns(examples: list[dict], names: tuple[str, ...]) -> dict[str, list]:
    return {c: [e[c] for e in examples] for c in names}


@pytest.mark.parametrize("name", NAMES)
def test_reward_scores_each_row_from_list_columns(name):
    task = tasks.get(name)
    examples = task.examples("train", 30, seed=5)
    own = {k for k in examples[0] if k not in ("prompt", "completion")}
    completions = [
        e["completion"] if i % 3 else "<answer>?</answer>" for i, e in enumerate(examples)
    ]
    scores = task.reward(
        [e["prompt"] for e in examples],
        completions,
        **_columns(examples, tuple(own)),
        trainer_state=object(),  # what TRL also passes; ignored
    )
    assert scores == [1.0 if i % 3 else 0.0 for i in range(30)]
    assert task.reward([], [], **{c: [] for c in task.columns}) == []


def test_reward_accepts_conversations():
    task = tasks.get("arithmetic")
    scores = task.reward(
        ["2+2=", "2+2="],
        [[{"role": "assistant", "content": "<answer>4</answer>"}], [{"role": "assistant"}]],
        answer=["4", "4"],
    )
    assert scores == [1.0, 0.0]


def test_reward_errors_name_the_problem():
    task = tasks.get("countdown")
    with pytest.raises(ValueError, match="needs the column 'target'"):
        task.reward(["p"], ["c"], numbers=[[1, 2]])
    with pytest.raises(ValueError, match="column 'numbers' has 2 values for 1 completions"):
        task.reward(["p"], ["c"], numbers=[[1], [2]], target=[3])
    with pytest.raises(ValueError, match="2 prompts but 1 completions"):
        task.reward(["p", "q"], ["c"], numbers=[[1]], target=[1])
    with pytest.raises(TypeError, match="str or a list of messages"):
        task.reward(["p"], [3], numbers=[[1]], target=[1])
