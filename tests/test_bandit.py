"""Every named algorithm learns the softmax bandit: the end-to-end check of the algebra."""

import json
from pathlib import Path

import pytest

from policylab import list_algorithms
from policylab.bandit import BanditConfig, run_bandit


@pytest.mark.parametrize("algorithm", list_algorithms())
@pytest.mark.parametrize("seed", [0, 1])
def test_every_algorithm_reaches_the_best_arm(algorithm, seed):
    cfg = BanditConfig()  # one fixed budget for every algorithm: 300 steps of 64 samples
    result = run_bandit(algorithm, cfg, seed=seed)
    assert result.best_arm_prob >= 0.9, (
        f"{algorithm} put only {result.best_arm_prob:.3f} on the best arm after {cfg.steps} steps"
    )
    assert result.steps_to_target is not None


def test_the_bandit_is_reproducible_from_its_seed():
    a = run_bandit("grpo", steps=20, seed=3)
    b = run_bandit("grpo", steps=20, seed=3)
    c = run_bandit("grpo", steps=20, seed=4)
    assert a.history == b.history
    assert a.history != c.history


def test_an_untrained_policy_is_uniform():
    # steps=1 with lr 0: nothing moves, so the best arm keeps probability 1/K.
    result = run_bandit("dapo", steps=1, lr=0.0)
    assert result.best_arm_prob == pytest.approx(0.25)


RECORDED = json.loads((Path(__file__).parent / "fixtures" / "bandit_histories.json").read_text())


@pytest.mark.parametrize("algorithm", sorted(RECORDED["histories"]))
def test_the_bandit_reproduces_its_recorded_histories(algorithm):
    # recorded before the softmax table became a TablePolicy (policies/table.py): the
    # policy's representation must not change a draw or a float
    result = run_bandit(algorithm, **RECORDED["config"])
    assert result.history == RECORDED["histories"][algorithm]
