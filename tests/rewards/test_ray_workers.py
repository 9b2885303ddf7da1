"""Reward actors (rewards/ray_workers.py): a slow reward scored by 2 Ray actors gives the
rewards, failures and counts it gives in this process, in the batch's order."""

import math
import os
import sys
import time

import pytest

from policylab.rewards import combine
from policylab.rewards.ray_workers import RayRewardPool
from policylab.rewards.signature import takes

ray = pytest.importorskip("ray")


@pytest.fixture(scope="module")
def cluster():
    """A local cluster of 2 CPUs whose workers import this module (the actors unpickle
    `slow_length` from it, as a user's workers import the user's reward module)."""
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.pathsep.join(p for p in [here, os.environ.get("PYTHONPATH", "")] if p)
    with pytest.MonkeyPatch.context() as env:
        env.setenv("PYTHONPATH", path)
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def pool(cluster):
    """`slow_length` on 2 actors, shared by the tests (an actor takes seconds to start);
    half a CPU each, so that another pool of 2 fits the cluster beside it."""
    with RayRewardPool(slow_length, workers=2, cpus_per_worker=0.5) as pooled:
        yield pooled


def slow_length(prompts, completions, target, trainer_state=None, pid_file=None, **kwargs):
    """A slow verifier: len(completion) + target + the step; "boom" raises, "exit" calls
    sys.exit, "?" cannot be scored (None), "inf" is not finite."""
    time.sleep(0.05)
    if pid_file:  # which process scored which completions
        with open(pid_file, "a") as out:
            out.write(f"{os.getpid()} {','.join(completions)}\n")
    if "boom" in completions:
        raise ValueError("boom")
    if "exit" in completions:
        sys.exit(3)
    step = trainer_state.global_step if trainer_state is not None else 0
    return [
        None if c == "?" else math.inf if c == "inf" else len(c) + t + step
        for c, t in zip(completions, target, strict=True)
    ]


PROMPTS = [f"p{i}" for i in range(7)]
TARGETS = [10, 20, 30, 40, 50, 60, 70]


def both(pool, completions):
    """The combined reward in this process, and with the function on the pool's actors."""
    here = combine({slow_length: 1.0}, failure_reward=-1.0)
    there = combine({pool: 1.0}, failure_reward=-1.0)
    for reward in (here, there):
        reward.at_step(5)
    args = (PROMPTS[: len(completions)], completions)
    targets = TARGETS[: len(completions)]
    return here(*args, target=targets), there(*args, target=targets)


@pytest.mark.slow
def test_two_actors_give_the_in_process_rewards_in_order(pool, tmp_path):
    completions = ["a", "bb", "ccc", "dddd", "e", "ff", "ggg"]
    pids = tmp_path / "pids"
    here, there = both(pool, completions)
    # len + target + step 5, sample by sample: 1+10+5, 2+20+5, ...
    assert there.total == [16, 27, 38, 49, 56, 67, 78]
    assert (there.total, there.parts, there.failures) == (here.total, here.parts, here.failures)
    # rows 0-2 on one actor, 3-6 on the other: two processes, each a contiguous slice
    assert pool(PROMPTS, completions, TARGETS, pid_file=str(pids)) == [
        1 + 10,
        2 + 20,
        3 + 30,
        4 + 40,
        1 + 50,
        2 + 60,
        3 + 70,
    ]
    lines = sorted(pids.read_text().splitlines(), key=lambda line: line.split()[1])
    assert [line.split()[1] for line in lines] == ["a,bb,ccc", "dddd,e,ff,ggg"]
    assert len({line.split()[0] for line in lines}) == 2
    assert os.getpid() not in {int(line.split()[0]) for line in lines}


@pytest.mark.slow
def test_failures_none_and_non_finite_values_count_as_in_process(pool):
    # "boom" raises and "exit" calls sys.exit on the actor: the batch call fails, combine
    # retries sample by sample, and only those two get failure_reward (-1)
    completions = ["a", "boom", "?", "inf", "exit", "ff", "g"]
    here, there = both(pool, completions)
    assert there.total[:2] == [16, -1.0] and math.isnan(there.total[2])
    assert there.failures == {"slow_length": 2} == here.failures
    assert there.counts.metrics() == here.counts.metrics()
    assert [str(v) for v in there.total] == [str(v) for v in here.total]  # NaN too
    assert (there.counts.scored, there.counts.rows) == (here.counts.scored, here.counts.rows)


def test_the_pool_is_called_as_its_function_is():
    pool = RayRewardPool(slow_length, workers=3)
    assert pool.__name__ == "slow_length"
    assert takes(pool) == takes(slow_length)
    with pytest.raises(ValueError, match="workers=0"):
        RayRewardPool(slow_length, workers=0)
    with pytest.raises(TypeError, match="not callable"):
        RayRewardPool("slow_length")


@pytest.mark.slow
def test_fewer_samples_than_actors(pool):
    here, there = both(pool, ["a"])
    assert there.total == here.total == [16]


@pytest.mark.slow
def test_a_reward_loaded_from_a_file_travels_to_the_actors(cluster, tmp_path):
    from policylab.rewards import load_user_reward

    (tmp_path / "my_rewards.py").write_text(
        "def shout(prompts, completions, **kw):\n    return [c.count('!') for c in completions]\n"
    )
    fn = load_user_reward(f"{tmp_path / 'my_rewards.py'}:shout")  # a module no worker imports
    with RayRewardPool(fn, workers=2, cpus_per_worker=0.5) as pool:
        assert pool(["p"] * 3, ["a!", "!!", "b"]) == [1, 2, 0]
