"""The multi-UAV coverage testbed (envs/uav_coverage.py; papers/seed_control_theory.md
§12.2, §12.3)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from policylab.envs.uav_coverage import (
    AGENT,
    SELF,
    ParallelUAVCoverage,
    UAVConfig,
    UAVCoverage,
    jain,
    scripted_actions,
)


def test_t12_3_jain_index():
    # (Σx)²/(nΣx²): [1,1,0,0] → 4/(4·2) = 0.5; [0.9,0.5,0.7,0.3] → 5.76/(4·1.64) = 0.878049
    assert float(jain([1.0, 1.0, 0.0, 0.0])) == pytest.approx(0.5)
    assert float(jain([0.9, 0.5, 0.7, 0.3])) == pytest.approx(0.878049, abs=1e-6)
    assert float(jain([0.0, 0.0])) == 0.0  # nothing covered: no fairness (our choice)


def _one_of_each() -> UAVCoverage:
    env = UAVCoverage(UAVConfig(n_mission=1, n_charger=1, n_poi=1, horizon=3), 1)
    env.reset(torch.Generator().manual_seed(0))
    env.pos = np.array([[[0.5, 0.5], [0.6, 0.5]]])
    env.poi = np.array([[[0.55, 0.5]]])
    env.data, env.left = np.array([[0.15]]), np.array([[0.15]])
    env.battery = np.array([[0.5, 1.0]])
    return env


def test_one_step_by_hand():
    env = _one_of_each()
    obs, reward, done = env.step(np.array([[[1.0, 0.0], [0.0, 0.0]]]))
    # mission moves 0.03 → (0.53, 0.5); drain 0.004 + 0.3·0.03 = 0.013 → 0.487
    # charger 0.07 away ≤ 0.15 → +0.05 → 0.537; PoI 0.02 away ≤ 0.06 → takes 0.1 of 0.15
    # rewards: mission 10·0.1/0.15 = 6.666667; charger 6.666667 + 0.5·0.05 = 6.691667
    assert env.pos[0, 0].tolist() == pytest.approx([0.53, 0.5])
    assert env.battery[0].tolist() == pytest.approx([0.537, 1.0])
    assert env.left[0, 0] == pytest.approx(0.05)
    assert reward[0].tolist() == pytest.approx([6.666667, 6.691667], abs=1e-6)
    assert not done
    m = env.metrics()  # coverage 0.1/0.15; charge_eff 0.05/0.013
    assert m["coverage"][0] == pytest.approx(2 / 3)
    assert m["jain"][0] == pytest.approx(1.0)
    assert m["charge_eff"][0] == pytest.approx(0.05 / 0.013)
    # the mission UAV's local graph: itself, the charger in agent slot 0, the PoI in slot 0
    o = obs[0, 0]
    assert o[:SELF].tolist() == pytest.approx([0.53, 0.5, 0.537, 1.0, 0.0])
    assert o[SELF : SELF + AGENT].tolist() == pytest.approx([0.07, 0.0, 1.0, 0.0, 1.0, 1.0])
    start = SELF + (env.cfg.max_agents - 1) * AGENT
    assert o[SELF + AGENT : start].tolist() == [0.0] * (start - SELF - AGENT)  # padding
    assert o[start : start + 4].tolist() == pytest.approx([0.02, 0.0, 0.05, 1.0])
    assert not o[start + 4 :].any()


def test_an_empty_battery_grounds_the_uav_and_stops_collection():
    env = _one_of_each()
    env.battery = np.array([[0.0, 1.0]])
    env.pos[0, 1] = [0.9, 0.9]  # charger out of reach
    env.step(np.array([[[1.0, 0.0], [0.0, 0.0]]]))
    assert env.pos[0, 0].tolist() == [0.5, 0.5] and env.left[0, 0] == 0.15


def test_sense_radius_hides_far_entities():
    env = _one_of_each()
    env.cfg = UAVConfig(n_mission=1, n_charger=1, n_poi=1, horizon=3, sense_radius=0.06)
    o = env.observe()[0, 0]
    start = SELF + (env.cfg.max_agents - 1) * AGENT
    assert not o[SELF : SELF + AGENT].any()  # charger 0.1 away: absent
    assert o[start + 3] == 1.0  # PoI 0.05 away: present


def test_knobs_are_checked_with_the_accepted_range():
    with pytest.raises(ValueError, match="n_poi=60 > max_pois=50"):
        UAVConfig(n_poi=60)
    with pytest.raises(ValueError, match="n_mission=0"):
        UAVConfig(n_mission=0)


def test_the_script_beats_hovering_and_random_flight():
    cfg = UAVConfig()
    cover = {}
    for name in ("script", "hover", "random"):
        env = UAVCoverage(cfg, 4)
        obs, done, rng = (
            env.reset(torch.Generator().manual_seed(3)),
            False,
            np.random.default_rng(0),
        )
        while not done:
            if name == "script":
                act = scripted_actions(obs, cfg)
            elif name == "hover":
                act = np.zeros(obs.shape[:-1] + (2,))
            else:
                act = rng.uniform(-1, 1, obs.shape[:-1] + (2,))
            obs, _, done = env.step(act)
        cover[name] = env.metrics()["coverage"].mean()
    assert cover["script"] > 0.5 > cover["random"] > cover["hover"]


def test_parallel_api_shape():
    env = ParallelUAVCoverage(UAVConfig(n_mission=2, n_poi=5, horizon=2))
    obs, infos = env.reset(seed=1)
    assert env.possible_agents == ["mission_0", "mission_1", "charger_0"]
    assert infos["charger_0"]["agent_type"] == "charger"
    assert obs["mission_0"].shape == (env.cfg.obs_dim,)
    actions = {a: np.zeros(2) for a in env.agents}
    env.step(actions)
    _, rewards, terms, truncs, _ = env.step(actions)
    assert truncs == {a: True for a in env.possible_agents} and not any(terms.values())
    assert env.agents == [] and set(rewards) == set(env.possible_agents)
