"""User tasks from data files: JSONL, JSON, CSV, Parquet, or a Hugging Face `datasets`
folder (saved with `save_to_disk`).

    task = tasks.get("data/problems.jsonl", prompt_column="question", reward="math_verify")

Each row needs a prompt (a string, or chat messages as a list of {role, content}); every
other column is handed to the reward functions (`answer` for exact_answer / math_verify).
The held-out split is the folder's "test" split or a `split` column when the data has
one, else the same stable prompt hash as the embedded tasks (10 % test).

Values keep their text: JSON values stay what the JSON says (the answer 39 is "39", never
"39.0"), every CSV cell is a string ("007" stays "007"); Parquet files and folders keep
their stored types. Nothing is read leniently: an empty, blank or non-UTF-8 file, a
malformed line, a CSV row with the wrong number of fields, a missing, null or empty
answer, and a prompt given two different answers are errors naming the file and the line
(JSONL, CSV) or row (JSON, Parquet, folders). A report (rows, exact duplicate rows, the
longest prompt) is logged when the file is read; `check_prompt_lengths` checks, with the
model's tokenizer, that every prompt leaves room for `max_new_tokens` in its context.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import math
import random
from pathlib import Path
from typing import Any

from policylab.tasks import json_schema
from policylab.tasks.base import SPLITS, demonstration, split_of

log = logging.getLogger(__name__)

SUFFIXES = {".jsonl": "json", ".json": "json", ".csv": "csv", ".parquet": "parquet"}
SHOWN = 5  # rows named in a message about several rows
# columns that often hold the prompt, suggested when the data has no prompt column
PROMPT_GUESSES = ("question", "problem", "query", "input", "instruction", "text", "messages")
KNOBS = ("prompt_column", "answer_column", "reward")

Located = tuple[str, dict]  # ("line 3", row): where a row is in its file, and the row


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
        rows: Any = None,
        name: str | None = None,
        **unknown: Any,
    ) -> None:
        # rows: the data itself (a list of dicts, a datasets Dataset or DatasetDict), with
        # `path` naming it in messages (policylab.train(task=...): objects.py)
        if unknown:
            knob, value = next(iter(unknown.items()))
            raise ValueError(
                f"a data-file task has no knob {knob!r} (got {knob}={value!r}); knobs: "
                f"{', '.join(KNOBS)}"
            )
        self.path = Path(path)
        self.name = name or (self.path.stem if self.path.suffix else self.path.name)
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
        located = _read(self.path, prompt_column, answer_column, rows)
        self._where = {s: [where for where, _ in rows] for s, rows in located.items()}
        self._splits = {s: [row for _, row in rows] for s, rows in located.items()}
        from policylab.rewards.registry import function

        self._reward = function(reward)
        self.columns = tuple(k for k in next(iter(self._splits.values()))[0] if k != prompt_column)

    @property
    def rows(self) -> dict[str, int]:
        """Rows per split."""
        return {split: len(self._splits.get(split, [])) for split in SPLITS}

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
        return [self._example(rows[i]) for i in order[:n]]

    def _example(self, stored: dict) -> dict:
        row = dict(stored)
        example = {"prompt": row.pop(self.prompt_column), **row}
        if self.answer_column in row:
            example["answer"] = str(row[self.answer_column])
            if example.get("completion") is None:  # a completion column is the demonstration
                example["completion"] = demonstration(example["answer"])
        return example

    def reward(self, prompts, completions, **columns: Any) -> list[float]:
        return self._reward(prompts, completions, **columns)

    def check_fits(self, model: str, max_new_tokens: int, prompt_format=None) -> None:
        """Every prompt (both splits), tokenized by `model`'s tokenizer as the run renders
        it (`prompt_format`: plain text, or the chat template), leaves room for
        `max_new_tokens` in the model's context; else a ValueError naming the rows.
        Loads the tokenizer and the model's config only, not its weights."""
        from transformers import AutoConfig, AutoTokenizer

        from policylab.models import resolve_model_path
        from policylab.prompting import context_length

        path = resolve_model_path(model)
        try:
            config = AutoConfig.from_pretrained(path)
        except OSError as err:
            raise ValueError(f"model {model!r}: cannot read its config: {err}") from None
        if context_length(config) is None:
            log.info("%s: %s states no context length; prompt lengths unchecked", self.path, model)
            return
        tokenizer = AutoTokenizer.from_pretrained(path)
        self.check_fits_with(config, tokenizer, max_new_tokens, prompt_format)

    def check_fits_with(self, config, tokenizer, max_new_tokens: int, prompt_format=None) -> None:
        """`check_fits` with the model's config and tokenizer themselves."""
        from policylab.prompting import context_length

        max_positions = context_length(config)
        if max_positions is None:
            log.info("%s: the model states no context length; prompt lengths unchecked", self.path)
            return
        rows = [r for split in self._splits.values() for r in split]
        where = [w for split in self._where.values() for w in split]
        examples = [{"prompt": r[self.prompt_column]} for r in rows]
        check_prompt_lengths(
            examples, tokenizer, max_positions, max_new_tokens, self.path, where, prompt_format
        )


def check_prompt_lengths(
    examples: list[dict],
    tokenizer,
    max_positions: int,
    max_new_tokens: int,
    source: str | Path,
    where: list[str] | None = None,
    prompt_format=None,
) -> int:
    """The longest prompt in tokens; a ValueError naming `source` and the rows (`where`,
    else "row i") whose prompt plus `max_new_tokens` exceeds the model's `max_positions`
    (a longer sequence runs past the positions the model was trained on)."""
    where = where or [f"row {i + 1}" for i in range(len(examples))]
    prompts = [e["prompt"] for e in examples]
    lengths, clipped = _token_counts(tokenizer, prompts, max_positions, prompt_format)
    room = max_positions - max_new_tokens
    over = [i for i, n in enumerate(lengths) if n > room]
    if over:
        rows = ", ".join(
            f"{where[i]} ({'over ' if i in clipped else ''}{lengths[i]} tokens)"
            for i in over[:SHOWN]
        )
        raise ValueError(
            f"{source}: {_count(len(over), 'prompt')} {'does' if len(over) == 1 else 'do'} "
            f"not fit the model's context of {max_positions} positions with max_new_tokens "
            f"{max_new_tokens}: {rows}{', ...' if len(over) > SHOWN else ''}; shorten or "
            f"drop prompts over {max(room, 0)} tokens, or lower max_new_tokens"
        )
    longest = max(range(len(lengths)), key=lengths.__getitem__)
    log.info(
        "%s: longest prompt %d tokens (%s) + max_new_tokens %d <= %d positions",
        source,
        lengths[longest],
        where[longest],
        max_new_tokens,
        max_positions,
    )
    return lengths[longest]


def _token_counts(
    tokenizer, prompts: list, max_positions: int, prompt_format=None
) -> tuple[list[int], set[int]]:
    """Tokens per prompt as `prompt_format` renders it (plain text by default), and which
    counts are of a prefix only: a text prompt is counted on its first 32 × max_positions
    characters (no tokenizer packs 32 characters in a token on average), so a prompt of
    millions of characters costs no more than that."""
    from policylab.prompting import PLAIN

    fmt = prompt_format or PLAIN

    def prompt_ids(tokenizer, prompts):
        return fmt.encode(tokenizer, prompts)

    cap = 32 * max_positions
    cut = [p[:cap] if isinstance(p, str) else p for p in prompts]
    lengths = [len(ids) for ids in prompt_ids(tokenizer, cut)]
    clipped = {i for i, p in enumerate(prompts) if isinstance(p, str) and len(p) > cap}
    for i in [i for i in clipped if lengths[i] <= max_positions]:  # denser than assumed
        lengths[i] = len(prompt_ids(tokenizer, [prompts[i]])[0])
        clipped.discard(i)
    return lengths, clipped


def _read(
    path: Path, prompt_column: str, answer_column: str, data: Any = None
) -> dict[str, list[Located]]:
    """{"train": rows, "test": rows}, each row with its place in the file, validated and
    reported, from a file, a datasets folder or `data` in memory (named `path`)."""
    if data is not None:
        given = _dataset_rows(path, data)
    elif path.is_dir():
        given = _folder(path)
    elif path.suffix in SUFFIXES:
        if not path.is_file():
            raise ValueError(f"data file {str(path)!r} does not exist")
        given = {"file": _file_rows(path)}
    else:
        raise ValueError(f"{path}: not a data file (.jsonl, .json, .csv, .parquet) or folder")
    for split, rows in given.items():
        _validate(path, rows, prompt_column, answer_column, split)
        json_schema.check_rows(path, rows)  # JSON-extraction rows: schema and gold
    every = [located for rows in given.values() for located in rows]
    _fill_missing(path, every)
    _check_duplicates(path, every, prompt_column, answer_column)
    splits = given if "file" not in given else _split(path, given["file"], prompt_column)
    _report(path, splits, every, prompt_column)
    return splits


def _folder(path: Path) -> dict[str, list[Located]]:
    import datasets

    datasets.disable_progress_bars()
    try:
        loaded = datasets.load_from_disk(str(path))
    except Exception as err:  # noqa: BLE001 - name the folder for the user
        raise ValueError(f"{path}: cannot load the datasets folder: {err}") from None
    return _dataset_rows(path, loaded)


def _dataset_rows(path: Path, data: Any) -> dict[str, list[Located]]:
    """The rows of a list of dicts or a datasets Dataset ({"file": rows}, split later), or
    of a DatasetDict (its train and test splits)."""
    if isinstance(data, list):
        for i, item in enumerate(data, start=1):
            if not isinstance(item, dict):
                raise ValueError(f"{path}: row {i} is {type(item).__name__}, not a dict")
        return {"file": _numbered([dict(item) for item in data], "row")}  # rows are filled in
    if not hasattr(data, "keys"):  # a datasets.Dataset
        return {"file": _numbered(data.to_list(), "row")}
    if "train" not in data:
        raise ValueError(f"{path}: the dataset has splits {list(data)}; need 'train'")
    return {s: _numbered(data[s].to_list(), f"{s} row") for s in SPLITS if s in data}


def _numbered(rows: list[dict], unit: str) -> list[Located]:
    return [(f"{unit} {i}", row) for i, row in enumerate(rows, start=1)]


def _file_rows(path: Path) -> list[Located]:
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        if path.stat().st_size == 0:
            raise ValueError(f"{path}: the file is empty (0 bytes)")
        try:
            return _numbered(pq.read_table(path).to_pylist(), "row")
        except Exception as err:  # noqa: BLE001 - name the file for the user
            raise ValueError(f"{path}: cannot read the file as Parquet: {err}") from None
    text = _text(path)
    if path.suffix == ".csv":
        return _csv_rows(path, text)
    if path.suffix == ".json":
        try:
            whole = json.loads(text)
        except json.JSONDecodeError:
            whole = None  # JSON lines, read line by line below
        if isinstance(whole, list):
            for i, item in enumerate(whole, start=1):
                if not isinstance(item, dict):
                    raise ValueError(f"{path}: item {i} of the list is not a JSON object")
            return _numbered(whole, "item")
    return _jsonl_rows(path, text)


def _text(path: Path) -> str:
    """The file's text: UTF-8 (a byte-order mark is dropped), not empty, not blank."""
    data = path.read_bytes()
    if not data:
        raise ValueError(f"{path}: the file is empty (0 bytes)")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise ValueError(
            f"{path}: the file is not UTF-8: byte 0x{data[err.start]:02x} at offset "
            f"{err.start} (line {line}); save it as UTF-8"
        ) from None
    if not text.strip():
        raise ValueError(f"{path}: the file has no rows: only blank lines")
    return text


def _jsonl_rows(path: Path, text: str) -> list[Located]:
    rows = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as bad:
            raise ValueError(f"{path}: line {number} is not valid JSON: {bad.msg}") from None
        if not isinstance(value, dict):
            raise ValueError(f"{path}: line {number} is not a JSON object")
        rows.append((f"line {number}", value))
    return rows


def _csv_rows(path: Path, text: str) -> list[Located]:
    """Rows of strings, one per record; a record's line is the line it starts on (a quoted
    field may span lines)."""
    reader = csv.reader(io.StringIO(text, newline=""))
    header, rows, start = None, [], 1
    for record in reader:
        line, start = start, reader.line_num + 1
        if not record:
            continue
        if header is None:
            header = record
            if len(set(header)) < len(header):
                raise ValueError(f"{path}: line {line}: the header repeats a column: {header}")
            continue
        if len(record) != len(header):
            fields = _count(len(record), "field")
            raise ValueError(
                f"{path}: line {line} has {fields}; the header has {len(header)}: "
                f"{', '.join(header)} (a comma inside a value needs quotes)"
            )
        rows.append((f"line {line}", dict(zip(header, record, strict=True))))
    if not rows:
        raise ValueError(f"{path}: the file has no rows after its header")
    return rows


def _validate(path: Path, rows: list[Located], prompt_column: str, answer: str, where: str):
    """Every row has a prompt; with an answer column, every row has an answer (a string or
    a number, not null, NaN or blank)."""
    if not rows:
        raise ValueError(f"{path}: no rows ({where})")
    first = rows[0][1]
    if prompt_column not in first:
        guess = next((c for c in PROMPT_GUESSES if c in first), next(iter(first), "..."))
        raise ValueError(
            f"{path}: no column {prompt_column!r}; columns: {', '.join(first)}; name the "
            f"prompt column with the task knob prompt_column, e.g. task_knobs={{prompt_column: "
            f"{guess}}} (Python: tasks.get(path, prompt_column={guess!r}))"
        )
    has_answer = any(answer in row for _, row in rows)
    for place, row in rows:
        prompt = row.get(prompt_column)
        ok = (isinstance(prompt, str) and prompt.strip()) or (
            isinstance(prompt, list)
            and prompt
            and all(isinstance(m, dict) and "content" in m for m in prompt)
        )
        if not ok:
            raise ValueError(
                f"{path}: {place}: {prompt_column!r} must be a non-empty "
                f"string or a list of chat messages, got {prompt!r}"
            )
        if has_answer:
            _check_answer(path, place, row, answer)


def _check_answer(path: Path, place: str, row: dict, column: str) -> None:
    if column not in row:
        raise ValueError(
            f"{path}: {place}: no {column!r} (the answer column, task knob answer_column), "
            "which other rows have"
        )
    value = row[column]
    problem = None
    if value is None:
        problem = "is null"
    elif isinstance(value, float) and not math.isfinite(value):
        problem = f"is {value}"
    elif isinstance(value, bool) or not isinstance(value, (str, int, float)):
        problem = f"must be a string or a number, got {value!r}"
    elif isinstance(value, str) and not value.strip():
        problem = "is empty"
    if problem:
        raise ValueError(f"{path}: {place}: {column!r} {problem}; every row needs its answer")


def _fill_missing(path: Path, rows: list[Located]) -> None:
    """A column some rows lack is None in those rows (logged), so every row has every
    column the reward functions are handed."""
    columns = list(dict.fromkeys(k for _, r in rows for k in r))
    short = [(place, [c for c in columns if c not in row]) for place, row in rows]
    short = [(place, missing) for place, missing in short if missing]
    for _, row in rows:
        row.update({c: None for c in columns if c not in row})
    if short:
        place, missing = short[0]
        log.warning(
            "%s: %s lack some columns, given None (first: %s lacks %s)",
            path,
            _count(len(short), "row"),
            place,
            ", ".join(missing),
        )


def _check_duplicates(path: Path, rows: list[Located], prompt_column: str, answer: str):
    """A prompt given two different answers is an error (one of them is wrong, and the
    policy is rewarded for both); rows repeating an earlier row exactly are logged."""
    first: dict[str, Located] = {}
    seen: dict[str, str] = {}
    clashes, repeats = [], []
    for place, row in rows:
        key = _key(row[prompt_column])
        if key in first:
            earlier, before = first[key]
            if answer in row and str(before.get(answer)) != str(row[answer]):
                clashes.append(f"{earlier} ({before[answer]!r}) and {place} ({row[answer]!r})")
        else:
            first[key] = (place, row)
        whole = json.dumps(row, sort_keys=True, default=str)
        if whole in seen:
            repeats.append(f"{place} = {seen[whole]}")
        else:
            seen[whole] = place
    if clashes:
        more = ", ..." if len(clashes) > SHOWN else ""
        raise ValueError(
            f"{path}: {_count(len(clashes), 'prompt')} "
            f"{'has' if len(clashes) == 1 else 'have'} different answers: "
            f"{'; '.join(clashes[:SHOWN])}{more}; keep one answer per prompt"
        )
    if repeats:
        verb = "repeats an earlier row" if len(repeats) == 1 else "repeat earlier rows"
        counted = _count(len(repeats), "row")
        _warn_rows(
            path,
            f"{counted} {verb} exactly: {{rows}} (kept; they weigh those prompts more)",
            repeats,
        )


def _split(path: Path, rows: list[Located], prompt_column: str) -> dict[str, list[Located]]:
    """A file's rows by its `split` column, else by the stable prompt hash."""
    if "split" in rows[0][1]:
        bad = sorted({str(r.get("split")) for _, r in rows} - set(SPLITS))
        if bad:
            raise ValueError(f"{path}: the split column has values {bad}; accepted: train, test")
        return {
            s: [
                (w, {k: v for k, v in r.items() if k != "split"})
                for w, r in rows
                if r["split"] == s
            ]
            for s in SPLITS
        }
    return {
        s: [(w, r) for w, r in rows if split_of(path.stem, _key(r[prompt_column])) == s]
        for s in SPLITS
    }


def _report(path: Path, splits: dict[str, list[Located]], rows: list[Located], prompt_column):
    """The data report: rows per split, columns and the longest prompt in characters."""
    size = [len(_key(r[prompt_column])) for _, r in rows]
    longest = max(range(len(size)), key=size.__getitem__)
    columns = list(dict.fromkeys(k for _, r in rows for k in r))
    log.info(
        "%s: %d rows (%s); columns %s; longest prompt %d characters (%s)",
        path,
        len(rows),
        ", ".join(f"{s} {len(r)}" for s, r in splits.items()),
        ", ".join(columns),
        size[longest],
        rows[longest][0],
    )
    train = {_key(r[prompt_column]) for _, r in splits.get("train", [])}
    leaked = [w for w, r in splits.get("test", []) if _key(r[prompt_column]) in train]
    if leaked:
        verb = "is also a train prompt" if len(leaked) == 1 else "are also train prompts"
        counted = _count(len(leaked), "test prompt")
        _warn_rows(
            path,
            f"{counted} {verb} ({{rows}}): the held-out score overstates generalisation",
            leaked,
        )


def _warn_rows(path: Path, message: str, places: list[str]) -> None:
    """Log "<path>: <message>" about some rows, its `{rows}` the first SHOWN of `places`
    (then ", ..." when there are more)."""
    listed = ", ".join(places[:SHOWN]) + (", ..." if len(places) > SHOWN else "")
    log.warning("%s: %s", path, message.format(rows=listed))


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _key(prompt: Any) -> str:
    return prompt if isinstance(prompt, str) else json.dumps(prompt, sort_keys=True)
