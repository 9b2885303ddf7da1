"""A run's final model: `<run_dir>/model/`, a folder that loads with `from_pretrained`
and uploads to the hub as it is, with its model card (README.md: the recipe, the data,
the steps, the held-out scores before and after, how to load it).

    runs/<name>/model/
      config.json, model.safetensors, generation_config.json   (save_pretrained)
      tokenizer.json, tokenizer_config.json, ...                (the tokenizer's)
      README.md                                                 (the model card)

`run_settings` finds the model of a run folder for `policylab eval --model <run_dir>`:
its model/, else its latest checkpoint's."""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path
from typing import Any

import yaml

log = logging.getLogger(__name__)

MODEL = "model"
CARD = "README.md"


def save_final_model(run_dir: str | Path, model, tokenizer, card: str) -> Path | None:
    """`model` and `tokenizer` (save_pretrained) and the model `card` (README.md) into
    <run_dir>/model/, written under a temporary name and then renamed, so model/ is always
    complete. A write that fails (disk full) warns and returns None: the run's last
    checkpoint holds the same weights."""
    folder, tmp = Path(run_dir) / MODEL, Path(run_dir) / f".{MODEL}.tmp"
    try:
        shutil.rmtree(tmp, ignore_errors=True)
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        (tmp / CARD).write_text(card)
        shutil.rmtree(folder, ignore_errors=True)
        os.replace(tmp, folder)
    except OSError as err:
        shutil.rmtree(tmp, ignore_errors=True)
        log.warning(
            "could not write the final model to %s: %s; the last checkpoint's model/ "
            "(%s/checkpoints) holds the same weights",
            folder,
            err,
            run_dir,
        )
        return None
    return folder


def model_card(run_dir: str | Path, cfg, resolved: dict, evals: list[dict]) -> str:
    """README.md of the run's final model: hub metadata, the recipe, the data, the
    held-out scores before and after, how to load and upload it."""
    from policylab import recipes
    from policylab.version import __version__

    folder = Path(run_dir) / MODEL
    recipe = recipes.get(cfg.algo)
    before, after = evals[0], evals[-1]
    scores = [k for k in before if k.startswith("eval/") and k in after]
    tags = ["policylab", "reinforcement-learning", cfg.algo]
    meta: dict[str, Any] = {"library_name": "transformers", "pipeline_tag": "text-generation"}
    if _hub_id(cfg.model):
        meta["base_model"] = cfg.model
    meta["tags"] = tags
    rewards = resolved.get("rewards") or cfg.rewards or {"(the task's verifier)": 1.0}
    options = {
        part: ", ".join(f"{k}={v}" for k, v in resolved[part].items() if k != "name")
        for part in ("advantage", "loss")
    }
    lines = [
        "---",
        yaml.safe_dump(meta, sort_keys=False).strip(),
        "---",
        "",
        f"# {cfg.algo} on {cfg.task}",
        "",
        f"Trained with policylab {__version__} from `{cfg.model}`: "
        f"{after['step']} steps of {recipe.title} ({recipe.paper}).",
        "",
        "## Recipe",
        "",
        f"- algorithm: `{cfg.algo}`; advantage `{resolved['advantage']['name']}` "
        f"({options['advantage']}); loss `{resolved['loss']['name']}` ({options['loss']})",
        f"- {cfg.prompts_per_step} prompts × {cfg.samples_per_prompt} samples per step, "
        f"{cfg.epochs} epoch(s) × {cfg.minibatches} minibatch(es), AdamW lr {cfg.lr} "
        f"({cfg.schedule}), temperature {cfg.temperature}, max_new_tokens {cfg.max_new_tokens}",
        f"- rewards: {', '.join(f'`{k}` × {v}' for k, v in rewards.items())}",
        f"- seed {cfg.seed}; every field is in the run folder's config.yaml",
        "",
        "## Data",
        "",
        f"- task: `{cfg.task}`" + (f", knobs {cfg.task_knobs}" if cfg.task_knobs else ""),
        f"- held-out: {cfg.eval_n} test examples (eval_seed {cfg.eval_seed})",
        "",
        "## Held-out scores",
        "",
        f"| metric | before (step {before['step']}) | after (step {after['step']}) |",
        "|---|---|---|",
        *[f"| {k.removeprefix('eval/')} | {before[k]:.3f} | {after[k]:.3f} |" for k in scores],
        "",
        "## Use",
        "",
        "```python",
        "from transformers import AutoModelForCausalLM, AutoTokenizer",
        "",
        f'model = AutoModelForCausalLM.from_pretrained("{folder}")',
        f'tokenizer = AutoTokenizer.from_pretrained("{folder}")',
        "```",
        "",
        f"Score it again with `policylab eval --model {folder.parent}`. The folder uploads "
        "to the hub as it is:",
        "",
        "```python",
        "from huggingface_hub import create_repo, upload_folder",
        "",
        'create_repo("<you>/<name>", exist_ok=True)',
        f'upload_folder(repo_id="<you>/<name>", folder_path="{folder}")',
        "```",
        "",
    ]
    return "\n".join(lines)


def _hub_id(model: str) -> bool:
    """Whether the run started from a hub id (not "tiny", a local folder or an object)."""
    from policylab.models import TINY_NAME
    from policylab.objects import is_object

    return model != TINY_NAME and not is_object(model) and not Path(model).expanduser().exists()


def run_settings(path: str | Path) -> dict[str, Any]:
    """For a run folder (one with config.yaml): the folder of its model (`model_dir`:
    model/, else the latest checkpoint's) and its task, task_knobs and max_new_tokens (the
    task only when it is a name or file, not data given in Python). {} for anything else."""
    from policylab.objects import is_object
    from policylab.trainers.run import latest_checkpoint

    folder = Path(path).expanduser()
    if not (folder / "config.yaml").is_file():
        return {}
    if (folder / MODEL / "config.json").is_file():
        model_dir = folder / MODEL
    elif (checkpoint := latest_checkpoint(folder)) is not None:
        model_dir = checkpoint / MODEL
    else:
        raise FileNotFoundError(
            f"run folder {str(path)!r} has no model yet: no {MODEL}/ (written when a run "
            "ends) and no checkpoint (checkpoints/latest)"
        )
    saved = yaml.safe_load((folder / "config.yaml").read_text()) or {}
    task = saved.get("task")
    return {
        "model_dir": str(model_dir),
        "task": None if is_object(task) else task,
        "data_in_memory": task if is_object(task) else None,
        "task_knobs": saved.get("task_knobs") or {},
        "rewards": saved.get("rewards") or {},
        "max_new_tokens": saved.get("max_new_tokens"),
        # how its prompts were rendered (chat template or plain text)
        "chat": bool(saved.get("chat", False)),
        "system_prompt": saved.get("system_prompt") or "",
        "chat_template_kwargs": saved.get("chat_template_kwargs") or {},
    }
