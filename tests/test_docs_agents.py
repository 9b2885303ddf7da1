"""docs/agents.md's own-environment example runs as written (a user's interactive task,
registered and trained for two steps)."""

import re
from pathlib import Path

import torch

from policylab import tasks

DOC = Path(__file__).parents[1] / "docs" / "agents.md"


def test_the_own_environment_example_trains(tmp_path, monkeypatch):
    torch.set_num_threads(1)
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)
    example = next(b for b in blocks if "class GuessEnv" in b)
    assert len(example.splitlines()) < 80
    monkeypatch.chdir(tmp_path)
    scope: dict = {}
    try:
        exec(compile(example, str(DOC), "exec"), scope)
    finally:
        tasks.task_classes._entries.pop("guess", None)
    result = scope["result"]
    assert result.steps == 2
    assert (tmp_path / "runs" / "guess-demo" / "metrics.jsonl").exists()
