"""A seeded GRPO run of the shipped model, short enough for CI, in which the held-out
reward must rise by more than evaluation noise can explain."""

import pytest

from policylab.config import TrainConfig
from policylab.trainers.llm import train


@pytest.mark.slow
def test_grpo_raises_held_out_reward_of_the_shipped_model(tmp_path):
    cfg = TrainConfig(
        algo="grpo",
        task="arithmetic",
        model="tiny",
        steps=40,
        eval_every=0,
        eval_n=200,
        save_every=0,
        progress=False,
        run_dir=str(tmp_path / "run"),
        loss={"kl_coef": 0.0},
        lr=5e-4,
        seed=0,
    )
    result = train(cfg)
    before, after = result.before["eval/sampled_reward"], result.after["eval/sampled_reward"]
    # Both evaluations score the same 200 held-out prompts; the standard error of a
    # difference of two sampled means of 0/1 rewards is at most ~0.05 here, so a rise of
    # 0.15 is three standard errors above zero.
    assert after - before >= 0.15, (before, after)
