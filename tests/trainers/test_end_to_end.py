"""A seeded GRPO run of the shipped model, short enough for CI, in which the held-out
score must rise by more than evaluation noise can explain."""

import pytest

from policylab.config import TrainConfig
from policylab.trainers.llm import train


@pytest.mark.slow
def test_grpo_raises_held_out_accuracy_of_the_shipped_model(tmp_path):
    cfg = TrainConfig(
        algo="grpo",
        task="arithmetic",
        model="tiny",
        steps=200,
        lr=5e-5,
        loss={"kl_coef": 0.0},
        eval_every=0,
        eval_n=500,
        save_every=0,
        progress=False,
        run_dir=str(tmp_path / "run"),
        seed=0,
    )
    result = train(cfg)
    before = result.before["eval/greedy_accuracy"]
    after = result.after["eval/greedy_accuracy"]
    # The same 500 held-out prompts are decoded greedily before and after, so the change
    # counts prompts that flipped: +0.08 is 40 more solved than lost. Two independent
    # accuracies near 0.5 would differ by a standard error of sqrt(2 * 0.25 / 500) = 0.032,
    # so even that looser reading puts 0.08 at 2.5 standard errors. Measured: seed 0 gives
    # +0.106 (0.492 -> 0.598), seed 1 +0.154, in about 45 s each.
    assert after - before >= 0.08, (before, after)
