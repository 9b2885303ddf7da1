"""Short seeded runs recorded before the trainer was restructured (issue: one learner with
method stages). A refactor changes no number: the same runs must reproduce these to the
last digit. Record anew only when a change is meant to alter a number, and say which in
the commit:

    .venv/bin/python tests/golden_runs.py --write

Float results depend on the CPU (torch picks its kernels by the instruction set and the
processor), so the fixture holds one recording per machine kind, each with the platform it
was made on; a run must equal one of them exactly. On a new kind of machine, first check
out a commit whose numbers are trusted and add its recording:

    .venv/bin/python tests/golden_runs.py --add
"""

from __future__ import annotations

import json
import math
import platform
import sys
from pathlib import Path

import torch

FIXTURE = Path(__file__).parent / "fixtures" / "golden_runs.json"

WALL_CLOCK = ("perf/", "time/")  # columns that never repeat between runs

_LLM = dict(
    model="tiny",
    steps=3,
    prompts_per_step=4,
    samples_per_prompt=4,
    max_new_tokens=16,
    train_pool=64,
    lr=1e-4,
    eval_n=8,
    eval_every=2,
    save_every=0,
    progress=False,
    seed=0,
)

RUNS: dict[str, dict] = {
    "grpo-countdown": dict(_LLM, algo="grpo", task="countdown"),
    "rloo-countdown": dict(_LLM, algo="rloo", task="countdown"),
    "dapo-dynamic-sampling": dict(
        _LLM, algo="dapo", task="arithmetic", max_gen_rounds=0, samples_per_prompt=6
    ),
    "cispo-2-minibatches": dict(_LLM, algo="cispo", task="arithmetic", minibatches=2),
    "ppo-cartpole": dict(
        control=True,
        algo="ppo",
        task="CartPole-v1",
        total_steps=1024,
        num_envs=2,
        num_steps=128,
        epochs=2,
        minibatch_size=64,
        eval_every=2,
        eval_episodes=2,
        save_every=0,
        torch_threads=1,
        progress=False,
        seed=0,
    ),
}


def run(name: str, folder: Path) -> list[dict]:
    """Run `name` in `folder` on one thread; its metrics rows, wall-clock columns aside."""
    from policylab.config import ControlConfig, TrainConfig
    from policylab.trainers.control import train as train_control
    from policylab.trainers.llm import train as train_llm
    from policylab.trainers.run import read_metrics

    fields = dict(RUNS[name])
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        if fields.pop("control", False):
            train_control(ControlConfig(**fields, run_dir=str(folder)))
        else:
            train_llm(TrainConfig(**fields, run_dir=str(folder)))
    finally:
        torch.set_num_threads(threads)
    return read_metrics(folder, drop=WALL_CLOCK)


def same(a: float, b: float) -> bool:
    return a == b or (isinstance(a, float) and math.isnan(a) and math.isnan(b))


def platform_label() -> dict[str, str]:
    """What the float results depend on: torch's version, its CPU kernel level, the CPU."""
    model = platform.processor() or platform.machine()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        names = [
            ln.split(":", 1)[1].strip()
            for ln in cpuinfo.read_text().splitlines()
            if ln.startswith("model name")
        ]
        model = names[0] if names else model
    return {
        "torch": torch.__version__,
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "cpu": model,
    }


def recordings() -> list[dict]:
    """[{"platform": {...}, "runs": {name: rows}}, ...] (one per machine kind)."""
    return json.loads(FIXTURE.read_text())["recordings"]


if __name__ == "__main__":
    import tempfile

    if "--write" not in sys.argv and "--add" not in sys.argv:
        sys.exit(__doc__)
    recorded = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in RUNS:
            recorded[name] = run(name, Path(tmp) / name)
            print(name, len(recorded[name]), "rows")
    entry = {"platform": platform_label(), "runs": recorded}
    kept = recordings() if "--add" in sys.argv and FIXTURE.is_file() else []
    FIXTURE.parent.mkdir(exist_ok=True)
    FIXTURE.write_text(json.dumps({"recordings": [*kept, entry]}, indent=1) + "\n")
