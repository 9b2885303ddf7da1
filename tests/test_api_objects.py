"""`policylab.train` with objects, as TRL's GRPOTrainer takes them: a model and tokenizer
object, rows in memory (a list of dicts, a datasets Dataset), reward functions; the final
model at <run_dir>/model with its card; `policylab eval --model <run_dir>`; bad inputs
fail before any model loads, naming the field."""

import logging
import shutil

import datasets
import pytest
import torch
import yaml

import policylab
from policylab import cli
from policylab import rewards as reward_module
from policylab.models import TinyConfig, build_model, build_tokenizer, load_model
from policylab.objects import RunObjects, gather
from policylab.rewards.registry import reward_functions
from policylab.trainers.run import read_metrics

SMALL = TinyConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2)
# 2 prompts × 2 samples per step, 2 held-out rows, short answers: a step takes well under 1 s
FAST = dict(
    algo="grpo",
    prompts_per_step=2,
    samples_per_prompt=2,
    max_new_tokens=4,
    eval_n=2,
    eval_every=0,
    save_every=0,
    progress=False,
    lr=1e-3,
)


def rows(n: int = 12) -> list[dict]:
    """Sums with their answers; the last 2 rows are the held-out split."""
    return [
        {
            "prompt": f"{i}+{i + 1}=",
            "answer": str(2 * i + 1),
            "split": "test" if i >= n - 2 else "train",
        }
        for i in range(n)
    ]


def small_model():
    tokenizer = build_tokenizer()
    return build_model(tokenizer, SMALL, seed=0), tokenizer


def test_objects_train_and_the_reward_function_scores_every_sample(tmp_path):
    model, tokenizer = small_model()
    start = {k: v.clone() for k, v in model.state_dict().items()}
    calls = []

    def parity(prompts, completions, answer, **columns):
        calls.append((len(completions), list(answer)))
        return [float(len(c) % 2) for c in completions]

    result = policylab.train(
        model=model,
        tokenizer=tokenizer,
        task=rows(),
        rewards=[parity],
        steps=2,
        run_dir=str(tmp_path / "run"),
        **FAST,
    )
    assert result.steps == 2
    # one call per step, on 2 prompts × 2 samples, with the rows' answer column
    assert [n for n, _ in calls] == [4, 4]
    assert all(a in {str(2 * i + 1) for i in range(10)} for _, answers in calls for a in answers)
    saved = yaml.safe_load((tmp_path / "run" / "config.yaml").read_text())
    assert saved["rewards"] == {"parity": 1.0}
    assert saved["model"].startswith("<object: LlamaForCausalLM, weights ")
    assert saved["task"].startswith("<object: list of 12 dicts, rows ")
    assert saved["resolved"]["objects"] == {
        "tokenizer": type(tokenizer).__name__,
        "rewards": ["parity"],
    }
    metrics = read_metrics(result.run_dir, kind="train")
    assert [r["step"] for r in metrics] == [1, 2] and "reward/parity" in metrics[0]
    # the model object was trained in place (as TRL trains the model it is given) ...
    changed = [k for k, v in model.state_dict().items() if not torch.equal(v, start[k])]
    assert changed
    # ... and is the final model in run/model, with its tokenizer and card
    final, final_tokenizer = load_model(tmp_path / "run" / "model")
    for key, value in final.state_dict().items():
        assert torch.equal(value, model.state_dict()[key]), key
    assert final_tokenizer("3+4=")["input_ids"] == tokenizer("3+4=")["input_ids"]
    card = (tmp_path / "run" / "model" / "README.md").read_text()
    front = yaml.safe_load(card.split("---")[1])
    assert front["library_name"] == "transformers" and "grpo" in front["tags"]
    assert "base_model" not in front  # an object, not a hub id
    assert f"policylab {policylab.__version__}" in card
    assert "2 steps" in card and "`parity` × 1.0" in card
    before, after = result.before["eval/greedy_accuracy"], result.after["eval/greedy_accuracy"]
    assert f"| greedy_accuracy | {before:.3f} | {after:.3f} |" in card
    assert "AutoModelForCausalLM.from_pretrained" in card


def test_a_notebook_cell_run_twice_registers_its_new_function(tmp_path, caplog):
    model, tokenizer = small_model()
    used = []

    def cell(run: str) -> None:
        def brevity(prompts, completions, **columns):  # a new function object each run
            used.append(brevity)
            return [-len(c) / 4 for c in completions]

        policylab.train(
            model=model,
            tokenizer=tokenizer,
            task=rows(),
            rewards={brevity: 0.5, "format": 0.1},
            steps=1,
            run_dir=str(tmp_path / run),
            **FAST,
        )

    cell("first")
    with caplog.at_level(logging.INFO, logger="policylab.objects"):
        cell("second")
    assert used[0] is not used[-1]
    assert reward_functions.get("brevity") is used[-1]  # the second cell's function scored
    assert "replacing the function registered under that name" in caplog.text
    saved = yaml.safe_load((tmp_path / "second" / "config.yaml").read_text())
    assert saved["rewards"] == {"brevity": 0.5, "format": 0.1}


def test_a_dataset_task_trains_and_a_dataset_dict_keeps_its_splits(tmp_path):
    model, tokenizer = small_model()
    data = datasets.Dataset.from_list(rows())
    result = policylab.train(
        model=model, tokenizer=tokenizer, task=data, steps=1, run_dir=str(tmp_path / "a"), **FAST
    )
    assert result.steps == 1 and 0 <= result.after["eval/greedy_reward"] <= 1
    # the run folder does not hold data given in Python: eval names it and asks for a task
    with pytest.raises(ValueError, match="trained on data given in Python.*name the task"):
        policylab.evaluate_model(str(tmp_path / "a"), n=2)
    assert list(policylab.evaluate_model(str(tmp_path / "a"), "arithmetic", n=2)) == ["arithmetic"]
    plain = [{k: v for k, v in r.items() if k != "split"} for r in rows()]
    splits = datasets.DatasetDict(
        train=datasets.Dataset.from_list(plain[:9]), test=datasets.Dataset.from_list(plain[9:])
    )
    fields, objects = gather(task=splits)
    assert fields["task"].startswith("<object: DatasetDict of 9 train + 3 test rows, rows ")
    assert objects.task.rows == {"train": 9, "test": 3}
    held_out = sorted(e["answer"] for e in objects.task.examples("test", 3))
    assert held_out == sorted(r["answer"] for r in plain[9:])


def test_eval_takes_a_run_folder(tmp_path, small_model_dir, capsys):
    run = tmp_path / "run"
    policylab.train(
        model=small_model_dir,
        task="arithmetic",
        steps=1,
        run_dir=str(run),
        **{**FAST, "eval_n": 4, "save_every": 1},
    )
    assert (run / "model" / "README.md").is_file()
    # an unset task is the run's own (arithmetic), with its max_new_tokens
    scores = policylab.evaluate_model(str(run), n=4)
    assert list(scores) == ["arithmetic"]
    assert cli.main(["eval", "--model", str(run), "--n", "4"]) == 0
    out = capsys.readouterr().out
    assert "arithmetic" in out and "countdown" not in out
    # without model/ (a run still going), the latest checkpoint's model
    shutil.rmtree(run / "model")
    assert policylab.evaluate_model(str(run), n=4) == scores
    shutil.rmtree(run / "checkpoints")
    assert cli.main(["eval", "--model", str(run), "--n", "4"]) == 2
    assert "has no model yet" in capsys.readouterr().out


@pytest.fixture
def no_model_loads(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a model was loaded")

    monkeypatch.setattr("policylab.models.load_model", refuse)
    monkeypatch.setattr("policylab.trainers.llm.load_model", refuse)


@pytest.mark.parametrize(
    ("inputs", "message"),
    [
        ({"task": [{"question": "1+1=", "answer": "2"}]}, "no column 'prompt'; columns: question"),
        ({"task": [{"prompt": "1+1="}, "2+2="]}, "task: row 2 is str, not a dict"),
        ({"task": [{"prompt": "1+1=", "hint": "x"}]}, "task: the rows have no 'answer' column"),
        ({"task": []}, "task = an empty list"),
        ({"task": {"prompt": ["1+1="]}}, "task = {'prompt'"),
        (
            {"task": rows(), "rewards": [3]},
            "rewards[0] = 3 is neither a reward function nor a name",
        ),
        ({"rewards": {"format": 1.0, None: 2.0}}, "rewards[None] = None is neither"),
        (
            {"rewards": [lambda p, c: [0.0] * len(c)]},
            "this one's is '<lambda>': define it with def",
        ),
        ({"model": 42}, "model = 42: accepted: a transformers causal LM object"),
        ({"tokenizer": "gpt2"}, "tokenizer = 'gpt2': accepted: a transformers tokenizer"),
        ({"task": rows(), "task_knobs": {"column": "q"}}, "task_knobs ['column']"),
    ],
)
def test_bad_inputs_fail_before_any_model_loads(
    inputs, message, tmp_path, small_model_dir, no_model_loads
):
    fields = {"model": small_model_dir, "run_dir": str(tmp_path / "run"), **FAST, **inputs}
    with pytest.raises(ValueError) as err:
        policylab.train(**fields)
    assert message in str(err.value)
    assert not (tmp_path / "run").exists()


def test_a_function_under_a_built_in_rewards_name_is_refused(no_model_loads):
    def exact_answer(prompts, completions, **columns):
        return [1.0] * len(completions)

    with pytest.raises(ValueError, match="'exact_answer' has the name of a built-in reward"):
        policylab.train(task=rows(), rewards=[exact_answer])

    def countdown(prompts, completions, **columns):
        return [1.0] * len(completions)

    with pytest.raises(ValueError, match="the countdown task's verifier"):
        policylab.train(rewards=[countdown])
    # the built-in function itself is its name
    assert gather(rewards=[reward_module.exact_answer])[0]["rewards"] == {"exact_answer": 1.0}


def test_a_model_object_without_a_source_needs_its_tokenizer():
    model, _ = small_model()
    with pytest.raises(ValueError, match="its name_or_path is empty\\): pass tokenizer=..."):
        gather(model=model)
    # a model loaded from a folder brings its tokenizer, set up as load_model sets it up
    tiny, _ = load_model("tiny")
    _, objects = gather(model=tiny)
    assert objects.tokenizer.padding_side == "left" and objects.tokenizer.pad_token == "<pad>"
    assert not RunObjects() and objects


def test_resuming_a_run_given_objects_needs_the_same_objects(tmp_path, capsys):
    def parity(prompts, completions, **columns):
        return [float(len(c) % 2) for c in completions]

    run = str(tmp_path / "run")
    model, tokenizer = small_model()
    setup = dict(tokenizer=tokenizer, task=rows(), rewards=[parity], run_dir=run, **FAST)
    policylab.train(model=model, steps=1, **setup)
    # from the command line: nothing holds the objects
    assert cli.main(["train", "--resume", run, "steps=2"]) == 2
    out = " ".join(capsys.readouterr().out.split())
    assert "was started in Python with objects that config.yaml cannot hold: model" in out
    assert "rewards parity (functions given in Python)" in out
    # in Python without the reward function
    with pytest.raises(ValueError, match="rewards parity"):
        policylab.train(model=small_model()[0], **{**setup, "rewards": None}, steps=2, resume=True)
    # the model object itself was trained in place: no longer the run's starting model
    with pytest.raises(ValueError, match="trained in place"):
        policylab.train(model=model, steps=2, resume=True, **setup)
    # other rows
    with pytest.raises(ValueError, match="cannot resume .* with task = <object: list of 13"):
        policylab.train(model=small_model()[0], steps=2, resume=True, **{**setup, "task": rows(13)})
    # the model as it started (built again), the same rows and reward: the run continues
    result = policylab.train(model=small_model()[0], steps=2, resume=True, **setup)
    assert result.steps == 2


def test_the_model_card_names_a_hub_base_model_and_every_held_out_score(tmp_path):
    from policylab.config import TrainConfig
    from policylab.trainers.export import model_card

    cfg = TrainConfig(model="Qwen/Qwen2.5-0.5B-Instruct", task="countdown", steps=3)
    resolved = {"advantage": {"name": "grpo", "scale": True}, "loss": {"name": "ppo_clip"}}
    evals = [
        {"step": 0, "eval/greedy_accuracy": 0.25, "eval/sampled_reward": 0.125},
        {"step": 3, "eval/greedy_accuracy": 0.5, "eval/sampled_reward": 0.375},
    ]
    card = model_card(tmp_path / "run", cfg, resolved, evals)
    front = yaml.safe_load(card.split("---")[1])
    assert front["base_model"] == "Qwen/Qwen2.5-0.5B-Instruct"
    assert "| greedy_accuracy | 0.250 | 0.500 |" in card
    assert "| sampled_reward | 0.125 | 0.375 |" in card
    assert "advantage `grpo` (scale=True)" in card
    assert f'from_pretrained("{tmp_path / "run" / "model"}")' in card


def test_a_final_model_that_cannot_be_written_leaves_no_folder(tmp_path, caplog):
    from policylab.trainers.export import save_final_model

    model, tokenizer = small_model()

    def full(folder, **kwargs):
        raise OSError(28, "No space left on device")

    model.save_pretrained = full
    with caplog.at_level(logging.WARNING):
        assert save_final_model(tmp_path, model, tokenizer, "card") is None
    assert "could not write the final model" in caplog.text
    assert list(tmp_path.iterdir()) == []
