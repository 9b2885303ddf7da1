"""The bias of d1's one-step likelihood estimate on the tiny MDM (papers/seed_generative.md
G0.4, G0.7, G1.8 `estimator/gap`): mean |one_step − exact_steps| in nats per completion token,
on completions the model samples itself, with 95 % Student-t CIs over seeds.

    OMP_NUM_THREADS=1 PYTHONPATH=src python benchmarks/mdm_estimator_gap.py \
        --model runs/tiny-mdm --seeds 5

Per seed: `--prompts` held-out arithmetic prompts × `--group` samples at τ_s = 1 (S = 6, one
block, low-confidence remasking, the G0.7 setting); every estimator scores the same rows with
the same prompt-mask seed. Rows: prompt_mask_p 0.15 (d1's released setting, both estimators
re-mask the prompt identically) and 0 (no re-masking: the gap is then the estimator's alone).
Tokens revealed at step 0 are scored from the same state by both, so their gap is 0 at p = 0;
the table also gives the gap on later-step tokens only.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from policylab import tasks  # noqa: E402
from policylab.arena.stats import mean_ci  # noqa: E402
from policylab.models import build_tokenizer  # noqa: E402
from policylab.policies.masked_lm import MaskedDiffusionLM, MDMSampling, left_pad  # noqa: E402
from policylab.policies.mdm_logprob import MDMLogprobConfig, mdm_logprob  # noqa: E402
from policylab.pretrain_mdm import encode  # noqa: E402


def one_seed(model, tokenizer, seed: int, prompts: int, group: int, p: float) -> dict:
    examples = tasks.get("arithmetic").examples("test", prompts, seed=seed)
    ids, _ = encode(tokenizer, examples, model.config.completion_length, model.eos_id)
    ids = [row for row in ids for _ in range(group)]
    sampling = MDMSampling(length=model.config.completion_length, steps=6, temperature=1.0)
    out = model.generate(ids, sampling, torch.Generator().manual_seed(seed))
    prompt = left_pad(ids, model.pad_id)
    scores = {}
    for name, segments in (("one_step", 1), ("step_merge", 2), ("exact_steps", 6)):
        cfg = MDMLogprobConfig(prompt_mask_p=p, segments=segments, steps=6)
        with torch.no_grad():
            logp, _ = mdm_logprob.entry(name).fn(
                model,
                prompt,
                out.response_ids,
                out.reveal,
                cfg,
                generator=torch.Generator().manual_seed(1000 + seed),
            )
        scores[name] = logp
    mask = out.response_mask.bool()
    later = mask & (out.reveal > 0)
    gap = (scores["one_step"] - scores["exact_steps"]).abs()
    return {
        "gap_one_step": gap[mask].mean().item(),
        "gap_one_step_later": gap[later].mean().item(),
        "gap_step_merge2": (scores["step_merge"] - scores["exact_steps"]).abs()[mask].mean().item(),
        "signed_one_minus_exact": (scores["one_step"] - scores["exact_steps"])[mask].mean().item(),
        "exact_per_token": scores["exact_steps"][mask].mean().item(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", default="runs/tiny-mdm")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--prompts", type=int, default=64)
    parser.add_argument("--group", type=int, default=8)
    args = parser.parse_args()
    torch.set_num_threads(1)
    model = MaskedDiffusionLM.load(args.model).eval()
    tokenizer = build_tokenizer()
    start = time.perf_counter()
    print(f"model {args.model}; {args.prompts} prompts x {args.group} samples per seed")
    print("| prompt_mask_p | quantity (nats/token) | mean | 95 % CI |")
    print("|---|---|---|---|")
    for p in (0.15, 0.0):
        rows = [
            one_seed(model, tokenizer, s, args.prompts, args.group, p) for s in range(args.seeds)
        ]
        for key in rows[0]:
            ci = mean_ci([r[key] for r in rows])
            print(f"| {p} | {key} | {ci.mean:.3f} | [{ci.low:.3f}, {ci.high:.3f}] |")
    print(f"seconds {time.perf_counter() - start:.1f}; load average {os.getloadavg()}")


if __name__ == "__main__":
    main()
