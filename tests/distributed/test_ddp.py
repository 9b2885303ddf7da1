"""Data-parallel learners (distributed/ddp.py): two gloo processes compute the single-process
loss and gradients on the same batch; a round rolled out in shares is the whole round on
every rank; a workers=2 run writes one folder and resumes; a failing rank fails the job.

Each test starts 2 processes with torch.multiprocessing (file store in tmp_path, 1 thread
each); the workers are this module's functions, so they import it by name."""

from __future__ import annotations

import time
from dataclasses import replace

import pytest
import torch

from policylab.algebra.aggregate import global_normaliser
from policylab.config import ConfigError, TrainConfig, load
from policylab.distributed import launch
from policylab.distributed.ddp import DataParallel, ShardedWorkflow, check
from policylab.models import TinyConfig, build_model, build_tokenizer
from policylab.policies.language_model import LanguageModelPolicy
from policylab.recipes.compose import components
from policylab.rollouts import Rollouts
from policylab.trainers.llm_update import update
from policylab.trainers.run import read_metrics
from policylab.workflows.single_turn import RolloutInfo
from run_testing import FAST_LLM

GROUPS, G, T = 4, 4, 6  # 16 rows: 2 groups per rank
CASES = {  # (algorithm, loss overrides): a token-mean loss, and batch-whitened advantages
    "grpo token-mean": ("grpo", {"loss_agg_mode": "token-mean"}),
    "grpo token-sum": ("grpo", {"loss_agg_mode": "token-sum"}),  # normaliser 1, not W
    "reinforce_pp": ("reinforce_pp", {}),
}


def fixed_batch(vocab: int) -> Rollouts:
    """The same ragged batch in every process: random tokens, lengths, rewards, log-probs."""
    gen = torch.Generator().manual_seed(7)
    rows = GROUPS * G
    lengths = torch.randint(1, T + 1, (rows,), generator=gen)
    mask = (torch.arange(T) < lengths.unsqueeze(1)).float()
    prompts = [torch.randint(3, vocab, (int(n),), generator=gen).tolist() for n in (3, 4, 5, 2)]
    return Rollouts(
        rewards=torch.randint(0, 3, (rows,), generator=gen).float() / 2,
        response_mask=mask,
        group_ids=torch.arange(GROUPS).repeat_interleave(G),
        response_ids=torch.randint(3, vocab, (rows, T), generator=gen) * mask.long(),
        logprobs=-torch.rand(rows, T, generator=gen) * 3 * mask,
        ref_logprobs=-torch.rand(rows, T, generator=gen) * 3 * mask,
        extras={"prompt_ids": [p for p in prompts for _ in range(G)]},
    )


def learn_once(case: str, distributed: str) -> dict:
    """One `update` of a fixed random Llama on the fixed batch (SGD, so the step is linear
    in the gradient): its gradients, the parameters after the step, its metrics, and the
    sum over ranks of each rank's loss on its share (the global normaliser)."""
    algo, loss_overrides = CASES[case]
    tokenizer = build_tokenizer()
    arch = TinyConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2)
    policy = LanguageModelPolicy(build_model(tokenizer, arch, seed=0), tokenizer)
    parts = components(algo, max_new_tokens=T, loss_overrides=loss_overrides)
    batch = fixed_batch(len(tokenizer))
    advantages = parts.advantage.estimate(batch).advantages  # the whole batch, every rank
    workers = 2 if distributed == "ddp" else 1
    # one process: micro-batches of 8 rows = the two ranks' shares, so the weighted
    # metrics list is the one the two ranks gather
    rows = 0 if distributed == "ddp" else GROUPS * G // 2
    fields = {"model": "tiny", "micro_batch_rows": rows, "distributed": distributed}
    cfg = load(TrainConfig, None, {**FAST_LLM, **fields, "workers": workers})
    optimiser = torch.optim.SGD(policy.parameters(), lr=0.5)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimiser, lambda _: 1.0)
    share, share_adv = batch, advantages
    if distributed == "ddp":
        share, share_adv = DataParallel(launch.current()).share(batch, advantages)
    mode, L_max = parts.loss.options.loss_agg_mode, parts.loss.options.L_max
    logp = policy.evaluate(share.extras["prompt_ids"], share.response_ids, mask=share.response_mask)
    loss, _ = parts.loss(
        logprobs=logp.logprobs,
        old_logprobs=share.logprobs,
        advantages=share_adv,
        response_mask=share.response_mask,
        ref_logprobs=share.ref_logprobs,
        rollouts=share,
        normaliser=global_normaliser(batch.response_mask, mode, L_max=L_max),
    )
    loss_sum = launch.all_reduce_sum(loss.detach().clone())
    metrics = update(
        policy, optimiser, scheduler, parts.loss, batch, advantages, cfg, torch.Generator()
    )
    named = dict(policy.named_parameters())
    return {
        "grads": {k: p.grad.clone() for k, p in named.items() if p.grad is not None},
        "params": {k: p.detach().clone() for k, p in named.items()},
        "metrics": metrics,
        "loss": float(loss_sum),
    }


def learn_every_case() -> dict:
    return {case: learn_once(case, "ddp") for case in CASES}


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory):
    return launch.spawn(
        learn_every_case, 2, store=tmp_path_factory.mktemp("store"), timeout_s=120, threads=1
    )


@pytest.mark.slow
@pytest.mark.parametrize("case", list(CASES))
def test_two_ranks_compute_the_single_process_loss_and_gradients(two_ranks, case):
    torch.set_num_threads(1)
    one, two = learn_once(case, "none"), two_ranks[case]
    assert one["grads"].keys() == two["grads"].keys() and len(one["grads"]) > 0
    for name, grad in one["grads"].items():
        assert grad.abs().max() > 0 or name.endswith("bias"), name  # a gradient to compare
        torch.testing.assert_close(two["grads"][name], grad, atol=1e-6, rtol=1e-5, msg=name)
        torch.testing.assert_close(two["params"][name], one["params"][name], atol=1e-6, rtol=0)
    assert two["loss"] == pytest.approx(one["loss"], abs=1e-6, rel=1e-6)
    assert one["loss"] != 0.0
    for key in ("loss", "grad_norm", "entropy"):
        assert two["metrics"][key] == pytest.approx(one["metrics"][key], abs=1e-6, rel=1e-6)


# ---- rollouts in shares --------------------------------------------------------------------
class FakeWorkflow:
    """Rollouts that are a function of the examples: reward x, response length x + 1."""

    def __init__(self) -> None:
        self.generator = torch.Generator()

    def __call__(self, examples):
        xs = [e["x"] for e in examples for _ in range(2)]
        width = max(xs) + 1
        batch = Rollouts(
            rewards=torch.tensor(xs, dtype=torch.float32),
            response_mask=(torch.arange(width) <= torch.tensor(xs).unsqueeze(1)).float(),
            group_ids=torch.arange(len(examples)).repeat_interleave(2),
            extras={"prompt_ids": [[x] for x in xs]},
        )
        info = RolloutInfo([str(x) for x in xs], [str(x) for x in xs], {}, sum(xs), 1.0, 2.0)
        return batch, info


EXAMPLES = [{"x": x} for x in (3, 0, 5, 1)]


def roll_out_in_shares():
    fake = FakeWorkflow()
    calls = []
    fake_call = fake.__call__
    sharded = ShardedWorkflow(
        lambda ex: calls.append([e["x"] for e in ex]) or fake_call(ex),
        launch.current(),
        torch.Generator().manual_seed(0),
        fake.generator,
    )
    batch, info = sharded(EXAMPLES)
    return batch, info, launch.all_gather_objects(calls)


@pytest.mark.slow
def test_a_round_rolled_out_in_shares_is_the_whole_round_on_every_rank(tmp_path):
    batch, info, shares = launch.spawn(roll_out_in_shares, 2, store=tmp_path, threads=1)
    whole, whole_info = FakeWorkflow()(EXAMPLES)
    assert shares == [[[3, 0]], [[5, 1]]]  # each rank rolled out its own two prompts
    assert batch.group_ids.tolist() == [0, 0, 1, 1, 2, 2, 3, 3]
    assert torch.equal(batch.rewards, whole.rewards)
    assert torch.equal(batch.response_mask, whole.response_mask)  # padded to the widest
    assert batch.extras["prompt_ids"] == whole.extras["prompt_ids"]
    assert info.completions == whole_info.completions
    assert info.generated_tokens == whole_info.generated_tokens
    assert (info.generate_s, info.score_s) == (1.0, 2.0)  # the slowest rank's, not a sum


# ---- a training run on two processes ---------------------------------------------------------
@pytest.mark.slow
def test_a_two_worker_run_writes_one_folder_and_resumes(small_model_dir, tmp_path):
    from policylab.trainers.llm import train

    folder = tmp_path / "runs" / "ddp"
    fields = {**FAST_LLM, "model": small_model_dir, "run_dir": str(folder)}
    cfg = load(TrainConfig, None, {**fields, "steps": 2, "distributed": "ddp", "workers": 2})
    result = train(cfg)
    assert result.run_dir == str(folder) and result.steps == 2
    assert [p.name for p in (tmp_path / "runs").iterdir()] == ["ddp"]
    rows = read_metrics(folder, kind="train")
    assert [r["step"] for r in rows] == [1, 2]
    # the budget counts every rank's samples: the step's whole batch, once
    per_step = cfg.prompts_per_step * cfg.samples_per_prompt
    assert [r["budget/samples"] for r in rows] == [per_step, 2 * per_step]
    assert all("grad_norm" in r and "reward/mean" in r for r in rows)

    resumed = train(replace_steps(cfg, 3), resume=True)
    assert resumed.steps == 3
    assert [r["step"] for r in read_metrics(folder, kind="train")] == [1, 2, 3]
    assert (folder / "model").is_dir()


def replace_steps(cfg: TrainConfig, steps: int) -> TrainConfig:
    return cfg.model_copy(update={"steps": steps})


# ---- faults ------------------------------------------------------------------------------------
def one_rank_fails():
    if launch.current().rank == 1:
        raise ValueError("rank 1 fails on purpose")
    launch.all_reduce_sum(torch.ones(1))  # rank 0 waits here for a partner that is gone
    return "unreachable"


@pytest.mark.slow
def test_a_failing_rank_fails_the_job_with_its_error_and_no_hang(tmp_path):
    started = time.monotonic()
    with pytest.raises(launch.WorkerFailed, match="rank 1 of 2 raised") as err:
        launch.spawn(one_rank_fails, 2, store=tmp_path, timeout_s=60, threads=1)
    assert "rank 1 fails on purpose" in str(err.value)
    assert time.monotonic() - started < 60  # well before the collective's timeout


def test_ddp_options_are_checked_before_anything_starts():
    with pytest.raises(ValueError, match="workers=3 must divide prompts_per_step=4"):
        load(TrainConfig, None, {**FAST_LLM, "distributed": "ddp", "workers": 3})
    with pytest.raises(ValueError, match="set distributed=ddp"):
        load(TrainConfig, None, {**FAST_LLM, "workers": 2})
    with pytest.raises(ValueError, match="distributed='fsdp' is not valid"):
        load(TrainConfig, None, {**FAST_LLM, "distributed": "fsdp"})
    with pytest.raises(ValueError, match="engine='vllm' with distributed='ddp'"):
        load(TrainConfig, None, {**FAST_LLM, "distributed": "ddp", "workers": 2, "engine": "vllm"})


@pytest.mark.parametrize(
    "fields, refused",
    [({"sampler": "vas"}, "stage 'vas'"), ({"algo": "capo"}, "stage 'capo'")],
)
def test_what_ddp_does_not_support_is_refused_before_a_model_loads(fields, refused):
    from policylab.trainers.llm import compose

    cfg = load(TrainConfig, None, {**FAST_LLM, **fields, "distributed": "ddp", "workers": 2})
    with pytest.raises(ConfigError, match=f"distributed=ddp does not support {refused}"):
        check(compose(cfg), launch.World(0, 2))
    check(compose(cfg), launch.SINGLE)  # one process: everything is supported


def test_single_process_defaults_are_unchanged():
    cfg = load(TrainConfig, None, dict(FAST_LLM))
    assert (cfg.distributed, cfg.workers) == ("none", 1)
    assert launch.current() == launch.SINGLE
    assert replace(launch.SINGLE, rank=1).is_main is False


def test_objects_given_in_python_are_refused_with_spawned_workers(tmp_path):
    import policylab
    from policylab.models import load_model

    model, tokenizer = load_model("tiny")
    with pytest.raises(ConfigError, match="pickled copy"):
        policylab.train(
            model=model,
            tokenizer=tokenizer,
            distributed="ddp",
            workers=2,
            run_dir=str(tmp_path / "r"),
            **{k: v for k, v in FAST_LLM.items() if k != "model"},
        )
