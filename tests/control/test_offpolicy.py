"""The off-policy trainer (papers/seed_control_theory.md §0.4, §12.1): the TD target by hand
(T12.2), the soft update by hand, the replay buffer's seeded sampling and checkpointing,
MADDPG's per-agent update on a tiny cooperative task, a short DDPG run that resumes
2 + 2 = 4 metric for metric, the config's defaults against the recipe's, and the CLI."""

import math

import pytest
import torch

from policylab import recipes, routing
from policylab.algebra.catalogue import advantage_estimators, policy_losses
from policylab.algebra.deterministic import soft_update, td_target
from policylab.api import advantages, policy_loss
from policylab.config import load
from policylab.config_offpolicy import OffPolicyConfig, is_off_policy
from policylab.rollouts import Rollouts
from policylab.trainers.offpolicy import Agent, load_actor, maddpg_update, recipe_defaults, train
from policylab.trainers.run import read_metrics
from policylab.workflows.episodes import evaluate_policy
from policylab.workflows.replay import ReplayBuffer
from run_testing import WALL_CLOCK, assert_same_metrics


# ---- T12.2: the TD target ----------------------------------------------------------------
def test_td_target_by_hand_t12_2():
    # y = 1 + 0.95·(1 − 0)·2 = 2.9; terminated: y = r = 1.0
    r, q = torch.tensor([1.0, 1.0]), torch.tensor([2.0, 2.0])
    y = td_target(r, q, torch.tensor([0.0, 1.0]), 0.95)
    assert y.tolist() == pytest.approx([2.9, 1.0])


def test_a_truncated_step_bootstraps():
    # the trainer stores `terminated` only: a time-limit end keeps γ·Q' (y = 2.9, not 1.0)
    r, q = torch.tensor([1.0]), torch.tensor([2.0])
    truncated_not_terminated = torch.tensor([0.0])
    assert td_target(r, q, truncated_not_terminated, 0.95).item() == pytest.approx(2.9)


def test_td_target_registry_entry_and_actor_loss():
    assert "td_target" in advantage_estimators and "deterministic_pg" in policy_losses
    rollouts = Rollouts(
        rewards=torch.tensor([1.0, 1.0]),
        response_mask=torch.ones(2, 1),
        dones=torch.tensor([False, True]),
        extras={"next_q": torch.tensor([2.0, 2.0])},
    )
    y = advantages("ddpg", gamma=0.95)(rollouts)
    assert y.squeeze(-1).tolist() == pytest.approx([2.9, 1.0])
    # L = −mean Q(s, μ(s)) = −(3 + 5)/2 = −4
    q = torch.tensor([[3.0], [5.0]])
    loss, _ = policy_loss("ddpg")(
        logprobs=torch.zeros(2, 1),
        old_logprobs=torch.zeros(2, 1),
        advantages=q,
        response_mask=torch.ones(2, 1),
    )
    assert loss.item() == pytest.approx(-4.0)


# ---- soft target update ------------------------------------------------------------------
def test_soft_update_by_hand():
    source, target = torch.nn.Linear(1, 1), torch.nn.Linear(1, 1)
    with torch.no_grad():
        source.weight.fill_(1.0), source.bias.fill_(2.0)
        target.weight.fill_(0.0), target.bias.fill_(4.0)
    soft_update(target, source, tau=0.1)
    # θ' = 0.1·1 + 0.9·0 = 0.1;  b' = 0.1·2 + 0.9·4 = 3.8
    assert target.weight.item() == pytest.approx(0.1)
    assert target.bias.item() == pytest.approx(3.8)
    assert source.weight.item() == 1.0  # the online network is untouched


# ---- replay ------------------------------------------------------------------------------
def _filled(capacity=5, n=7) -> ReplayBuffer:
    buf = ReplayBuffer(capacity, {"obs": (2,), "reward": ()})
    for i in range(n):
        buf.add(obs=torch.full((1, 2), float(i)), reward=torch.tensor([float(i)]))
    return buf


def test_replay_ring_overwrites_the_oldest():
    buf = _filled()
    assert len(buf) == 5 and buf.pos == 2
    # rows 5, 6 overwrote 0, 1: the buffer holds 5, 6, 2, 3, 4
    assert buf.data["reward"].tolist() == [5.0, 6.0, 2.0, 3.0, 4.0]


def test_replay_sampling_is_seeded_and_survives_a_checkpoint():
    buf = _filled()
    a = buf.sample(8, torch.Generator().manual_seed(3))
    b = buf.sample(8, torch.Generator().manual_seed(3))
    assert torch.equal(a["reward"], b["reward"])
    assert torch.equal(a["obs"][:, 0], a["reward"])  # fields of one row stay together
    other = buf.sample(8, torch.Generator().manual_seed(4))
    assert not torch.equal(a["reward"], other["reward"])
    restored = ReplayBuffer(5, {"obs": (2,), "reward": ()})
    restored.load_state_dict(buf.state_dict())
    c = restored.sample(8, torch.Generator().manual_seed(3))
    assert torch.equal(a["reward"], c["reward"])
    restored.add(obs=torch.zeros(1, 2), reward=torch.tensor([9.0]))
    assert restored.data["reward"][2].item() == 9.0  # the write position came back too
    with pytest.raises(ValueError, match="capacity"):
        ReplayBuffer(4, {"obs": (2,), "reward": ()}).load_state_dict(buf.state_dict())


# ---- MADDPG: the per-agent update on a tiny cooperative task -----------------------------
def test_maddpg_two_agents_learn_a_cooperative_one_step_task():
    """Two agents, o_i ~ U(−1, 1), shared reward r = −(a_1 + a_2 − o_1 − o_2)²: only the
    sum matters, so each agent needs the centralised critic (it sees the other's action).
    One-step episodes (terminated = 1): y = r. After training the joint action's error is
    far below the untrained one's."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    agents = [Agent.build(1, [-2.0], [2.0], 2, 2, [32, 32], 3e-3) for _ in range(2)]
    before_actor = [p.clone() for p in agents[1].actor.parameters()]

    def error(n=256):
        o = 2 * torch.rand(n, 2, generator=g) - 1
        with torch.no_grad():
            a = torch.cat([agents[i].actor(o[:, i : i + 1]) for i in range(2)], -1)
        return float(((a.sum(-1) - o.sum(-1)) ** 2).mean())

    start = error()
    for step in range(600):
        o = 2 * torch.rand(64, 2, generator=g) - 1
        a = 4 * torch.rand(64, 2, generator=g) - 2
        r = -((a.sum(-1) - o.sum(-1)) ** 2)
        batch = {"terminated": torch.ones(64)}
        for i in range(2):
            batch |= {
                f"obs_{i}": o[:, i : i + 1],
                f"action_{i}": a[:, i : i + 1],
                f"next_obs_{i}": o[:, i : i + 1],
                f"reward_{i}": r,
            }
        metrics = maddpg_update(agents, batch, 0.95, 0.01, update_actor=step % 2 == 0)
    assert math.isfinite(metrics["critic/loss"])
    assert any(
        not torch.equal(p, q)
        for p, q in zip(before_actor, agents[1].actor.parameters(), strict=True)
    )
    final = error()  # measured (seed 0): 1.266 → 0.060
    assert final < 0.25 * start, (start, final)


# ---- config and routing -----------------------------------------------------------------
def test_config_defaults_are_the_recipe_s():
    defaults = recipe_defaults("ddpg")
    assert set(defaults) >= {"lr", "tau", "batch_size", "buffer_size", "learning_starts"}
    for key, value in defaults.items():
        assert OffPolicyConfig.model_fields[key].get_default(call_default_factory=True) == value
    assert OffPolicyConfig().gamma == recipes.get("ddpg").advantage_options["gamma"].value


def test_routing_sends_ddpg_to_the_off_policy_config():
    assert is_off_policy("ddpg") and not is_off_policy("ppo") and not is_off_policy(None)
    cfg = routing.run_config(None, {"algo": "ddpg", "task": "Pendulum-v1"})
    assert isinstance(cfg, OffPolicyConfig) and cfg.tau == 0.005
    with pytest.raises(ValueError, match="on-policy"):
        load(OffPolicyConfig, None, {"algo": "ppo"})


def test_ddpg_needs_box_actions(tmp_path):
    cfg = OffPolicyConfig(task="CartPole-v1", run_dir=str(tmp_path), progress=False, report_to=[])
    with pytest.raises(ValueError, match="Box"):
        train(cfg)


# ---- a short run: learns something, resumes 2 + 2 = 4 -----------------------------------
FAST = dict(
    algo="ddpg",
    task="Pendulum-v1",
    learning_starts=50,
    batch_size=32,
    hidden=[16, 16],
    log_every=50,
    eval_every=100,
    eval_episodes=1,
    max_episode_steps=60,  # episodes end (truncated) inside the run
    progress=False,
    report_to=[],
    seed=3,
)


def test_ddpg_resumes_two_plus_two_as_four(tmp_path):
    straight = OffPolicyConfig(**FAST, total_steps=200, run_dir=str(tmp_path / "a"))
    result = train(straight)
    assert result.env_steps == 200 and [e["env_steps"] for e in result.evals] == [0, 100, 200]
    rows = [r for r in read_metrics(straight.run_dir, drop=WALL_CLOCK) if r["kind"] == "train"]
    assert [r["replay/size"] for r in rows] == [50, 100, 150, 200]
    assert all(math.isfinite(r["critic/loss"]) for r in rows[1:])
    assert rows[-1]["rollout/episode_length"] == 60
    first = OffPolicyConfig(**FAST, total_steps=100, run_dir=str(tmp_path / "b"))
    train(first)
    train(first.model_copy(update={"total_steps": 200}), resume=True)
    assert_same_metrics(straight.run_dir, first.run_dir)
    actor = load_actor(straight.run_dir)
    again = evaluate_policy(actor, "Pendulum-v1", 1, 10_000, max_episode_steps=60)
    assert again["eval/return_mean"] == pytest.approx(result.evals[-1]["eval/return_mean"])
    # the SB3-style API reads a DDPG run too: predict gives μ(s), one file round-trips
    import policylab

    policy = policylab.load_policy(straight.run_dir)
    obs = [1.0, 0.0, 0.5]
    expected = actor.mode(torch.tensor([obs])).numpy()[0]
    assert policy.predict(obs)[0] == pytest.approx(expected)  # deterministic either way
    again = policylab.ControlPolicy.load(policy.save(tmp_path / "ddpg.pt"))
    assert again.predict(obs, deterministic=True)[0] == pytest.approx(expected)


def test_ou_noise_changes_the_run_not_the_initial_actor(tmp_path):
    base = dict(FAST, total_steps=100, eval_every=0)
    a = train(OffPolicyConfig(**base, run_dir=str(tmp_path / "g")))
    b = train(
        OffPolicyConfig(**base, noise="ou", exploration_noise=0.5, run_dir=str(tmp_path / "o"))
    )
    assert a.evals[0]["eval/return_mean"] == b.evals[0]["eval/return_mean"]  # same init
    ra = [r for r in read_metrics(a.run_dir, drop=WALL_CLOCK) if r["kind"] == "train"][-1]
    rb = [r for r in read_metrics(b.run_dir, drop=WALL_CLOCK) if r["kind"] == "train"][-1]
    assert ra["critic/loss"] != rb["critic/loss"]


def test_cli_trains_and_resumes_ddpg(tmp_path, capsys):
    from policylab.cli import main

    run = str(tmp_path / "cli")
    args = ["train", "--algo", "ddpg", "--task", "Pendulum-v1", "total_steps=100"]
    args += ["learning_starts=50", "batch_size=16", "hidden=[8]", "eval_every=0"]
    args += ["eval_episodes=1", "progress=false", "report_to=[]", f"run_dir={run}"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "Pendulum-v1: evaluation return" in out and "run folder" in out
    assert main(["train", "--resume", run, "total_steps=150"]) == 0
    evals = [r for r in read_metrics(run) if r["kind"] == "eval"]
    assert [r["env_steps"] for r in evals] == [0, 100, 150]
    assert main(["describe", "ddpg"]) == 0
    assert "td_target" in capsys.readouterr().out


def test_a_ddpg_policy_is_evaluated_in_its_own_environment(tmp_path):
    """env_kwargs and max_episode_steps of an off-policy run reach evaluate_policy(policy,
    task id), as they do for a PPO run."""
    import policylab

    cfg = OffPolicyConfig(
        **{**FAST, "max_episode_steps": 30},
        env_kwargs={"g": 2.0},
        total_steps=60,
        run_dir=str(tmp_path / "r"),
    )
    train(cfg)
    policy = policylab.load_policy(cfg.run_dir)
    assert policy.config.env_kwargs == {"g": 2.0}
    _, lengths = policylab.evaluate_policy(
        policy, "Pendulum-v1", n_eval_episodes=2, return_episode_rewards=True
    )
    assert lengths == [30, 30]
