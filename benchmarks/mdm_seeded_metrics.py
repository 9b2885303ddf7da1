"""Short seeded MDM runs, written as JSON (metrics without timings, and the sha256 of the
final weights), to check that a refactor changes nothing to the last digit: run it before
and after, then `cmp` the two files.

    PYTHONPATH=src python benchmarks/mdm_seeded_metrics.py /tmp/before.json diffu_grpo,d2_exact
    MDM=runs/tiny-mdm-1500 PYTHONPATH=src python benchmarks/mdm_seeded_metrics.py b.json diffu_grpo

Without MDM a random tiny model (d 32, 1 layer, seed 0) is used; with MDM=<folder>, that
model (non-zero rewards, so the policy-gradient term is exercised too).
"""

import hashlib
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import torch

from policylab.api import train
from policylab.policies.masked_lm import MaskedDiffusionLM, MDMConfig


def main() -> None:
    torch.set_num_threads(1)
    out, algos = Path(sys.argv[1]), sys.argv[2].split(",")
    tmp = Path(tempfile.mkdtemp())
    if os.environ.get("MDM"):
        shutil.copytree(os.environ["MDM"], tmp / "m")
    else:
        torch.manual_seed(0)
        MaskedDiffusionLM(MDMConfig(d_model=32, n_layers=1, n_heads=2, d_ff=64)).save(tmp / "m")
    result = {}
    for algo in algos:
        train(
            algo=algo, task="arithmetic", model=str(tmp / "m"), steps=3, prompts_per_step=3,
            samples_per_prompt=4, epochs=2, eval_n=6, eval_every=2, train_pool=40, lr=1e-3,
            run_dir=str(tmp / algo), progress=False, report_to=[], seed=3,
        )  # fmt: skip
        lines = (tmp / algo / "metrics.jsonl").read_text().splitlines()
        rows = [{k: v for k, v in json.loads(x).items() if not k.startswith("time")} for x in lines]
        weights = (tmp / algo / "model" / "model.safetensors").read_bytes()
        result[algo] = rows + [{"sha": hashlib.sha256(weights).hexdigest()}]
    out.write_text(json.dumps(result, indent=1, sort_keys=True))


if __name__ == "__main__":
    main()
