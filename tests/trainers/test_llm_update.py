"""The learn phase: micro-batches hold whole groups, and micro-batching leaves the update
unchanged (the global normaliser makes the pieces add up)."""

import torch

from policylab.config import TrainConfig, load
from policylab.trainers.llm import train
from policylab.trainers.llm_update import micro_batches
from policylab.trainers.run import read_metrics
from run_testing import FAST_LLM


def test_micro_batches_are_whole_groups_in_order():
    ids = torch.tensor([0, 0, 0, 1, 1, 2, 2, 2, 2, 3])
    parts = [p.tolist() for p in micro_batches(ids, 4)]
    assert parts == [[0, 1, 2], [3, 4], [5, 6, 7, 8], [9]]
    assert [p.tolist() for p in micro_batches(ids, 0)] == [list(range(10))]
    # a group larger than the limit is one micro-batch of its own
    assert [p.tolist() for p in micro_batches(ids, 2)][2] == [5, 6, 7, 8]


def test_micro_batching_leaves_the_update_unchanged(small_model_dir, tmp_path):
    def run(name, rows):
        cfg = load(
            TrainConfig,
            None,
            {
                **FAST_LLM,
                "model": small_model_dir,
                "steps": 2,
                "micro_batch_rows": rows,
                "run_dir": str(tmp_path / name),
            },
        )
        train(cfg)
        return read_metrics(cfg.run_dir, kind="train")

    whole, split = run("whole", 0), run("split", 4)
    for a, b in zip(whole, split, strict=True):
        assert abs(a["grad_norm"] - b["grad_norm"]) < 1e-4 * max(1.0, a["grad_norm"])
        assert abs(a["reward/mean"] - b["reward/mean"]) < 1e-9


def test_packing_leaves_the_update_unchanged(tmp_path):
    """TrainConfig.packing: the first update (same rollouts) with packed rows has the padded
    run's loss, KL and gradient norm to float32 rounding (the shipped model: its rewards
    vary within groups, so the gradient is not 0)."""

    def run(name, packing):
        cfg = load(
            TrainConfig,
            None,
            {
                **FAST_LLM,
                "model": "tiny",
                "steps": 1,
                "loss": {"kl_coef": 0.04},
                "packing": packing,
                "run_dir": str(tmp_path / name),
            },
        )
        train(cfg)
        return read_metrics(cfg.run_dir, kind="train")[0]

    padded, packed = run("padded", False), run("packed", True)
    assert packed["reward/mean"] == padded["reward/mean"]  # the same rollouts
    assert padded["grad_norm"] > 0
    for key in ("grad_norm", "loss", "kl/ref"):
        assert abs(packed[key] - padded[key]) < 1e-5 * max(1.0, abs(padded[key])), key
