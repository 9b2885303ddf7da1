"""User tasks from data files: JSONL, JSON, CSV, Parquet, or a Hugging Face `datasets`
folder (saved with `save_to_disk`).

    task = tasks.get("data/problems.jsonl", prompt_column="question", reward="math_verify")

Each row needs a prompt (a string, or chat messages as a list of {role, content}); every
other column is handed to the reward functions (`answer` for exact_answer / math_verify).
The held-out split is the folder's "test" split or a `split` column when the data has
one, else the same stable prompt hash as the embedded tasks (10 % test). Files are read by
`datasets`; a malformed row is reported with its line (JSONL) or row number.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from policylab.tasks.base import SPLITS, demonstration, split_of

SUFFIXES = {".jsonl": "json", ".json": "json", ".csv": "csv", ".parquet": "parquet"}


def looks_like_data(name: str) -> bool:
    path = Path(name)
    return path.suffix in SUFFIXES or path.is_dir()


class FileTask:
    """A task read from a data file; the same interface as the embedded tasks."""

    def __init__(
        self,
        path: str,
        *,
        prompt_column: str = "prompt",
        answer_column: str = "answer",
        reward: str = "exact_answer",
    ) -> None:
        self.path = Path(path)
        self.name = self.path.stem if self.path.suffix else self.path.name
        self.prompt_column, self.answer_column, self.reward_name = (
            prompt_column,
            answer_column,
            reward,
        )
        self.knobs = {
            "prompt_column": prompt_column,
            "answer_column": answer_column,
            "reward": reward,
        }
        self._splits = _read(self.path, prompt_column)
        from policylab.rewards.registry import function

        self._reward = function(reward)
        self.columns = tuple(k for k in next(iter(self._splits.values()))[0] if k != prompt_column)

    @property
    def rows(self) -> dict[str, int]:
        """Rows per split."""
        return {split: len(rows) for split, rows in self._splits.items()}

    def __repr__(self) -> str:
        return f"FileTask({str(self.path)!r}, prompt_column={self.prompt_column!r})"

    def examples(self, split: str, n: int, seed: int = 0) -> list[dict]:
        """`n` rows of `split`, in an order shuffled by `seed` (a larger n extends a smaller)."""
        if split not in SPLITS:
            raise ValueError(f"split={split!r} is invalid; accepted: {', '.join(SPLITS)}")
        rows = self._splits.get(split, [])
        if n > len(rows):
            raise ValueError(f"{self!r} has {len(rows)} {split} rows; asked for {n}")
        order = list(range(len(rows)))
        random.Random(seed).shuffle(order)
        out = []
        for i in order[:n]:
            row = dict(rows[i])
            example = {"prompt": row.pop(self.prompt_column), **row}
            if self.answer_column in row:
                example["answer"] = str(row[self.answer_column])
                example["completion"] = demonstration(example["answer"])
            out.append(example)
        return out

    def reward(self, prompts, completions, **columns: Any) -> list[float]:
        return self._reward(prompts, completions, **columns)


def _read(path: Path, prompt_column: str) -> dict[str, list[dict]]:
    """{"train": rows, "test": rows}, validated, from a file or a datasets folder."""
    import datasets

    datasets.disable_progress_bars()
    if path.is_dir():
        loaded = datasets.load_from_disk(str(path))
        if isinstance(loaded, datasets.DatasetDict):
            if "train" not in loaded:
                raise ValueError(f"{path}: the dataset has splits {list(loaded)}; need 'train'")
            splits = {s: loaded[s].to_list() for s in SPLITS if s in loaded}
            return {s: _validated(path, rows, prompt_column, s) for s, rows in splits.items()}
        rows = loaded.to_list()
    elif path.suffix in SUFFIXES:
        if not path.is_file():
            raise ValueError(f"data file {str(path)!r} does not exist")
        try:
            rows = datasets.load_dataset(
                SUFFIXES[path.suffix], data_files=str(path), split="train"
            ).to_list()
        except Exception as err:  # noqa: BLE001 - find the bad line for the user
            raise ValueError(_locate(path, err)) from None
    else:
        raise ValueError(f"{path}: not a data file (.jsonl, .json, .csv, .parquet) or folder")
    rows = _validated(path, rows, prompt_column, "file")
    if rows and "split" in rows[0]:
        bad = sorted({str(r["split"]) for r in rows} - set(SPLITS))
        if bad:
            raise ValueError(f"{path}: the split column has values {bad}; accepted: train, test")
        return {
            s: [{k: v for k, v in r.items() if k != "split"} for r in rows if r["split"] == s]
            for s in SPLITS
        }
    return {
        s: [r for r in rows if split_of(path.stem, _key(r[prompt_column])) == s] for s in SPLITS
    }


def _validated(path: Path, rows: list[dict], prompt_column: str, where: str) -> list[dict]:
    if not rows:
        raise ValueError(f"{path}: no rows ({where})")
    if prompt_column not in rows[0]:
        raise ValueError(
            f"{path}: no column {prompt_column!r}; columns: {', '.join(rows[0])} "
            "(set prompt_column=...)"
        )
    line = 2 if path.suffix == ".csv" else 1  # CSV rows start after the header line
    for i, row in enumerate(rows):
        prompt = row[prompt_column]
        ok = (isinstance(prompt, str) and prompt.strip()) or (
            isinstance(prompt, list)
            and prompt
            and all(isinstance(m, dict) and "content" in m for m in prompt)
        )
        if not ok:
            unit = "line" if path.suffix in (".jsonl", ".csv") else "row"
            raise ValueError(
                f"{path}: {unit} {i + line}: {prompt_column!r} must be a non-empty "
                f"string or a list of chat messages, got {prompt!r}"
            )
    return rows


def _key(prompt: Any) -> str:
    return prompt if isinstance(prompt, str) else json.dumps(prompt, sort_keys=True)


def _locate(path: Path, err: Exception) -> str:
    if path.suffix == ".jsonl":
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except json.JSONDecodeError as bad:
                return f"{path}: line {number} is not valid JSON: {bad.msg}"
            if not isinstance(value, dict):
                return f"{path}: line {number} is not a JSON object"
    return f"{path}: cannot read the file: {err}"
