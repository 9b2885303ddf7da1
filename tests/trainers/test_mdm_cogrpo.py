"""Co-GRPO on the masked diffusion LM (papers/seed_generative.md G1.5, provisional):
decoding with a sampled schedule, the joint row (tokens then schedule columns), r = 1 at
(θ_old, φ_old), the schedule coefficient 0 giving d2_exact's loss, training and resume."""

import json

import pytest
import torch

from policylab.algebra.aggregate import global_normaliser
from policylab.algebra.mdm_schedule import joint_row
from policylab.api import train
from policylab.engines.base import Sampling
from policylab.engines.mdm import MDMEngine
from policylab.models import build_tokenizer
from policylab.policies.masked_lm import MaskedDiffusionLM, MDMConfig, MDMSampling
from policylab.policies.mdm_logprob import MDMLogprobConfig, exact_steps
from policylab.policies.mdm_schedule import SchedulePolicy, token_temperatures
from policylab.recipes.compose import components
from policylab.trainers import mdm as mdm_trainer
from policylab.trainers.mdm_schedule import cat_columns


@pytest.fixture(scope="module")
def tiny():
    torch.manual_seed(0)
    return MaskedDiffusionLM(MDMConfig(d_model=32, n_layers=1, n_heads=2, d_ff=64))


@pytest.fixture(scope="module")
def mdm_dir(tiny, tmp_path_factory):
    folder = tmp_path_factory.mktemp("mdm") / "tiny"
    tiny.save(folder)
    return folder


PROMPTS = [[5, 6, 7], [8, 9]]


def test_schedule_sets_reveal_counts_and_engine_returns_actions(tiny):
    sampling = MDMSampling(length=6, steps=3)
    actions = torch.zeros(2, 3, 2)
    actions[0, :, 1] = 20.0  # q ≈ 1: row 0 reveals all 6 at step 0
    actions[1, :, 1] = -20.0  # q ≈ 0: row 1 reveals 1, 1, then the last step the other 4
    out = tiny.generate(PROMPTS, sampling, torch.Generator().manual_seed(0), schedule=actions)
    assert out.reveal[0].tolist() == [0] * 6
    assert sorted(out.reveal[1].tolist()) == [0, 1, 2, 2, 2, 2]
    with pytest.raises(ValueError, match="schedule has shape"):
        tiny.generate(PROMPTS, sampling, schedule=torch.zeros(2, 4, 2))
    engine = MDMEngine(tiny, build_tokenizer(), steps=3)
    policy = SchedulePolicy(3, 1.0)
    sampled = engine.generate(PROMPTS, 2, Sampling(1.0, max_new_tokens=6), None, policy)
    assert sampled.schedule_actions.shape == (4, 3, 2)
    greedy = engine.generate(PROMPTS, 2, Sampling(0.0, max_new_tokens=6), None, policy)
    assert torch.equal(greedy.schedule_actions, policy.mean_actions(4))  # greedy: the mean


def batch(tiny, policy, seed=0):
    engine = MDMEngine(tiny, build_tokenizer(), steps=3)
    gen = torch.Generator().manual_seed(seed)
    out = engine.generate(PROMPTS, 4, Sampling(1.0, max_new_tokens=6), gen, policy)
    from policylab.policies.masked_lm import left_pad

    prompts = left_pad([p for p in PROMPTS for _ in range(4)], tiny.pad_id)
    return out, prompts


def token_logp(tiny, out, prompts):
    cfg = MDMLogprobConfig(prompt_mask_p=0.15, steps=3)
    tau = token_temperatures(out.schedule_actions, out.reveal)
    gen = torch.Generator().manual_seed(7)
    return exact_steps(
        tiny, prompts, out.response_ids, out.reveal, cfg, generator=gen, temperature=tau
    )[0]


def test_ratio_is_one_at_theta_old_phi_old(tiny):
    policy = SchedulePolicy(3, 1.0)
    out, prompts = batch(tiny, policy)
    adv = torch.tensor([1.0, -1.0, 0.5, -0.5, 2.0, 0.0, -2.0, 0.0])
    with torch.no_grad():
        old = cat_columns(token_logp(tiny, out, prompts), policy.log_prob(out.schedule_actions))
    logp, mask, a = joint_row(
        token_logp(tiny, out, prompts),
        policy.log_prob(out.schedule_actions),
        out.response_mask,
        adv,
        1.0,
    )
    loss_fn = components("co_grpo_provisional", max_new_tokens=6).loss.with_options(kl_coef=0.0)
    _, m = loss_fn(logprobs=logp, old_logprobs=old, advantages=a, response_mask=mask)
    assert m["pg/ratio_min"] == m["pg/ratio_max"] == pytest.approx(1.0, abs=1e-6)
    assert mask.shape == (8, 6 + 3) and mask[:, 6:].eq(1).all()


def test_schedule_gradient_nonzero_and_coef_zero_is_d2_exact(tiny):
    loss_fn = components("co_grpo_provisional", max_new_tokens=6).loss.with_options(kl_coef=0.0)
    policy = SchedulePolicy(3, 1.0)
    out, prompts = batch(tiny, policy, seed=1)
    adv = torch.tensor([1.0, -1.0, 0.5, -0.5, 2.0, 0.0, -2.0, 0.0])
    with torch.no_grad():
        old_tok = token_logp(tiny, out, prompts) - 0.05  # off θ_old, so r ≠ 1
        old_phi = policy.log_prob(out.schedule_actions) - 0.05

    def grads(coef):
        tiny.zero_grad(set_to_none=True)
        policy.zero_grad(set_to_none=True)
        tok = token_logp(tiny, out, prompts)
        logp, mask, a = joint_row(
            tok, policy.log_prob(out.schedule_actions), out.response_mask, adv, coef
        )
        loss, _ = loss_fn(
            logprobs=logp,
            old_logprobs=cat_columns(old_tok, old_phi),
            advantages=a,
            response_mask=mask,
            normaliser=global_normaliser(mask, "token-mean"),
        )
        loss.backward()
        return loss.detach(), [p.grad.clone() for p in tiny.parameters()], policy.mean.grad

    loss1, _, phi1 = grads(1.0)
    assert phi1 is not None and phi1.abs().sum() > 0  # the schedule learns
    loss0, theta0, phi0 = grads(0.0)
    assert phi0 is None or phi0.abs().sum() == 0
    # d2_exact on the same rows: token columns only
    tiny.zero_grad(set_to_none=True)
    tok = token_logp(tiny, out, prompts)
    d2, _ = loss_fn(
        logprobs=tok, old_logprobs=old_tok, advantages=adv, response_mask=out.response_mask
    )
    d2.backward()
    assert float(loss0) == pytest.approx(float(d2.detach()), abs=1e-7)
    for g, p in zip(theta0, tiny.parameters(), strict=True):
        assert torch.allclose(g, p.grad, atol=1e-8)


@pytest.fixture
def parity_reward(monkeypatch):
    """A reward with variance on an untrained model (completion length parity), so the
    advantages, hence φ's gradient, are non-zero."""
    real_get = mdm_trainer.tasks.get

    def get(name, **knobs):
        task = real_get(name, **knobs)

        class Parity(type(task)):
            def reward(self, prompts, completions, **columns):
                return [float(len(c) % 2) for c in completions]

        task.__class__ = Parity
        return task

    monkeypatch.setattr(mdm_trainer.tasks, "get", get)


def fields(mdm_dir, run_dir, **kw):
    base = dict(
        task="arithmetic", model=str(mdm_dir), steps=2, prompts_per_step=3, samples_per_prompt=4,
        eval_n=6, train_pool=40, run_dir=str(run_dir), progress=False, report_to=[], lr=1e-3,
    )  # fmt: skip
    return {**base, **kw}


def rows(run_dir, kind="train"):
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["kind"] == kind]


def test_train_moves_theta_and_phi_with_ratio_one(mdm_dir, tmp_path, parity_reward):
    train(algo="co_grpo_provisional", **fields(mdm_dir, tmp_path / "r", epochs=1))
    first = rows(tmp_path / "r")[0]
    assert first["pg/ratio_min"] == pytest.approx(1.0, abs=1e-6)
    assert first["pg/ratio_max"] == pytest.approx(1.0, abs=1e-6)
    assert first["estimator/passes_per_row"] == 3  # exact_steps at S = L/2 = 3
    phi = torch.load(tmp_path / "r" / "model" / "schedule.pt")
    assert not torch.equal(phi["mean"], SchedulePolicy(3, 1.0).mean.detach())
    before = MaskedDiffusionLM.load(mdm_dir)
    after = MaskedDiffusionLM.load(tmp_path / "r" / "model")
    moved = [
        not torch.equal(a, b) for a, b in zip(before.parameters(), after.parameters(), strict=True)
    ]
    assert all(moved)


def test_resume_keeps_phi_and_its_optimiser(mdm_dir, tmp_path, parity_reward):
    train(algo="co_grpo_provisional", **fields(mdm_dir, tmp_path / "a", steps=4, save_every=2))
    halves = fields(mdm_dir, tmp_path / "b", steps=2, save_every=2)
    train(algo="co_grpo_provisional", **halves)
    train(algo="co_grpo_provisional", resume=True, **{**halves, "steps": 4})
    drop = ("time/rollout_s", "time/score_s", "time/learn_s", "time/elapsed_s")
    a, b = rows(tmp_path / "a"), rows(tmp_path / "b")
    assert a[-1]["schedule/q_0"] != pytest.approx(1 / 3)  # φ moved
    assert [{k: v for k, v in r.items() if k not in drop} for r in a] == [
        {k: v for k, v in r.items() if k not in drop} for r in b
    ]
