"""HGAM, MADDPG and the script on lab/uav_coverage (lab/hgam.py; §12)."""

from __future__ import annotations

import pytest
import torch

import policylab
from policylab.envs.uav_coverage import UAVConfig
from policylab.lab.catalogue import build, lab_methods
from policylab.lab.uav_coverage import ScriptPolicy, TeamPolicy, evaluate
from policylab.trainers.run import latest_checkpoint, load_state

KNOBS = {"n_poi": 6, "horizon": 8, "eval_episodes": 2}
FAST = {"envs": 2, "rollout": 4, "batch_size": 8, "learning_starts": 8, "hidden": [16, 16]}


@pytest.mark.parametrize("algo", ["maddpg", "hgam_provisional"])
def test_two_steps_change_every_trainable_parameter(algo):
    method = lab_methods.get(algo)
    options = method.build_options({**FAST, "learning_starts": 0})
    problem = build("lab/uav_coverage", 0, **KNOBS)
    gen = torch.Generator().manual_seed(0)
    state = method.init(problem, options, gen)
    before = [
        {k: v.clone() for k, v in ag.actor.state_dict().items() if v.dtype.is_floating_point}
        for ag in state["agents"]
    ]
    for _ in range(2):
        state, metrics = method.step(problem, state, options, gen)
    # 8 vector steps of 2 episodes; updates start once the replay holds a batch of 8 rows
    assert metrics["cost"] == 8 and state["updates"] == 5
    for i, (ag, old) in enumerate(zip(state["agents"], before, strict=True)):
        for name, p in ag.actor.named_parameters():
            if i == 3 and name.startswith("charger."):
                continue  # the only charger has no charger neighbour: that edge type is empty
            if name in ("charger.w_target", "charger.a"):
                continue  # one charger neighbour: α = softmax of one score = 1, no gradient
            if name.endswith(".w_target"):
                continue  # moves only when scores straddle LeakyReLU's kink (test_graph.py)
            assert not torch.equal(p, old[name]), f"{algo}: agent {i} actor {name} did not move"


@pytest.mark.parametrize("algo", ["maddpg", "hgam_provisional", "uav_script"])
def test_train_from_the_api_scores_against_the_script(algo, tmp_path):
    options = {} if algo == "uav_script" else FAST
    result = policylab.train(
        task="lab/uav_coverage",
        algo=algo,
        knobs=KNOBS,
        options=options,
        budget=32,
        eval_every=2,
        run_dir=str(tmp_path / "run"),
        progress=False,
    )
    assert result.spent >= 32
    script = evaluate(ScriptPolicy(), UAVConfig(n_poi=6, horizon=8), 2, 0 + 1_000_003)
    assert result.optimum == pytest.approx(script["coverage"])
    if algo == "uav_script":
        assert result.evals[-1]["eval/score"] == pytest.approx(1.0)


@pytest.mark.slow
def test_resume_is_exact(tmp_path):
    common = {
        "task": "lab/uav_coverage",
        "algo": "hgam_provisional",
        "knobs": KNOBS,
        "options": FAST,
        "eval_every": 2,
        "progress": False,
    }
    straight = policylab.train(**common, budget=48, run_dir=str(tmp_path / "a"))
    policylab.train(**common, budget=16, save_every=1, run_dir=str(tmp_path / "b"))
    resumed = policylab.train(**common, budget=48, run_dir=str(tmp_path / "b"), resume=True)
    assert [e["step"] for e in resumed.evals] == [e["step"] for e in straight.evals]
    assert [e["oracle/value"] for e in resumed.evals] == [e["oracle/value"] for e in straight.evals]
    # the networks, optimisers, replay and episodes: the same to the bit
    a, b = (load_state(latest_checkpoint(tmp_path / r) / "state.pt")["method"] for r in "ab")
    assert a["updates"] == b["updates"] > 0
    for sa, sb in zip(a["agents"], b["agents"], strict=True):
        for key in ("actor", "critic"):
            for name, t in sa[key].items():
                assert torch.equal(t, sb[key][name]), f"{key}.{name}"
    assert all(torch.equal(a["env"][k], b["env"][k]) for k in a["env"])


def test_a_trained_team_flies_held_out_counts_without_retraining():
    method = lab_methods.get("hgam_provisional")
    options = method.build_options(FAST)
    problem = build("lab/uav_coverage", 0, **KNOBS)
    state = method.init(problem, options, torch.Generator().manual_seed(0))
    team = method.policy(problem, state)
    assert isinstance(team, TeamPolicy) and len(team.mission) == 3 and len(team.charger) == 1
    for n_mission, n_poi in [(2, 20), (5, 50)]:
        m = evaluate(team, UAVConfig(n_mission=n_mission, n_poi=n_poi, horizon=4), 2, 7)
        assert set(m) == {"coverage", "jain", "charge_eff"}
        assert 0.0 <= m["coverage"] <= 1.0


def test_bad_knob_and_option_name_what_is_accepted():
    with pytest.raises(ValueError, match="unknown knob.*n_uav.*accepted: eval_episodes"):
        build("lab/uav_coverage", 0, n_uav=3)
    with pytest.raises(ValueError, match="gamma = 1.5 is out of range"):
        lab_methods.get("maddpg").build_options({"gamma": 1.5})
