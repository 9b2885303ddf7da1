"""policylab.testtime: LatentSeek and DMLR-text (papers/seed_agents.md §A9 "Tests" 1–4 with
their numbers, worked by hand below), then properties of the loops on the shipped model."""

import hashlib
import math

import pytest
import torch

from policylab import tasks, testtime
from policylab.models import load_model


@pytest.fixture(scope="module")
def tiny():
    model, tok = load_model("tiny")
    model.eval()
    return model, tok


def _ids(tok, text: str) -> list[int]:
    return tok(text, add_special_tokens=False)["input_ids"]


def _weights_hash(model) -> str:
    digest = hashlib.sha256()
    for name, p in sorted(model.state_dict().items()):
        digest.update(name.encode() + p.detach().numpy().tobytes())
    return digest.hexdigest()


# ---- Test 1: the reward -------------------------------------------------------------------


def test_reward_answer_and_completeness_fail_gives_minus_one_half():
    # failed weights 1 (answer) + 2 (completeness) = 3 of Σw = 6 → −0.5
    passed = {"calculation": True, "answer": False, "completeness": False, "understanding": True}
    assert testtime.verifier_reward(passed) == -0.5
    # a failed format rule adds −2 before the division: −(3 + 2)/6 = −0.8333333
    assert testtime.verifier_reward(passed, format_ok=False) == pytest.approx(-0.8333333, abs=1e-7)
    all_pass = dict.fromkeys(testtime.VERIFIER_WEIGHTS, True)
    assert testtime.verifier_reward(all_pass) == 0.0


def test_reward_needs_every_verdict():
    with pytest.raises(ValueError, match="no verdict for completeness"):
        testtime.verifier_reward({"calculation": True, "answer": True, "understanding": True})


def test_all_pass_is_above_the_threshold_so_latentseek_stops_with_zero_iterations(tiny):
    model, tok = tiny
    calls = []

    def reward(text):
        calls.append(text)
        return testtime.verifier_reward(dict.fromkeys(testtime.VERIFIER_WEIGHTS, True))

    solved = testtime.latentseek(model, tok, _ids(tok, "45+74="), reward)
    assert 0.0 > -0.2  # R = 0 > threshold −0.2
    assert (solved.iterations, solved.reward_calls, solved.rewards) == (0, 1, [0.0])
    assert solved.completion == solved.initial == calls[0]


# ---- Test 2: the update length ------------------------------------------------------------


def test_update_length():
    assert testtime.update_length(37, 0.1) == 3  # ⌊3.7⌋
    assert testtime.update_length(37, 0.2) == 7  # ⌊7.4⌋
    assert testtime.update_length(5, 0.1) == 0  # ρL = 0.5 < 1
    assert testtime.update_length(5000, 0.1) == 300  # the cap


def test_zero_update_length_returns_the_original_answer(tiny):
    model, tok = tiny
    solved = testtime.latentseek(model, tok, _ids(tok, "45+74="), lambda t: -1.0, rho=0.01)
    assert solved.iterations == 0 and solved.completion == solved.initial
    assert solved.rewards == [-1.0]


# ---- Test 3: one step on a toy ------------------------------------------------------------


def test_one_latentseek_step_on_a_toy():
    # W = I₂, z = (2, 1): p = softmax(2, 1) = (e/(e+1), 1/(e+1)) = (0.7310586, 0.2689414);
    # loss = −R·log p₀ with R = −0.5 → ∇_z = −R·(e₀ − p) = 0.5·(0.2689414, −0.2689414)
    # = (0.1344707, −0.1344707); Adam's first step moves each coordinate by lr against the
    # gradient's sign: z = (2 − 0.03, 1 + 0.03) = (1.97, 1.03)
    z = torch.tensor([[2.0, 1.0]], dtype=torch.float64, requires_grad=True)
    head = torch.eye(2, dtype=torch.float64)
    p = torch.softmax(z.detach() @ head.T, -1)[0]
    assert p.tolist() == pytest.approx([0.7310586, 0.2689414], abs=1e-7)
    optimizer = torch.optim.Adam([z], lr=0.03)
    testtime.latent_step(z, head, -0.5, optimizer)
    assert z.grad[0].tolist() == pytest.approx([0.1344707, -0.1344707], abs=1e-7)
    assert z.detach()[0].tolist() == pytest.approx([1.97, 1.03], abs=1e-6)


# ---- Test 4: DMLR's confidence ------------------------------------------------------------


def test_topk_entropy_and_confidence():
    # top-2 of (3, 2, 1, 0): p = (e³, e²)/(e³ + e²) = (0.7310586, 0.2689414);
    # H = −Σ p log p = 0.5822031, C = −H
    logits = torch.tensor([3.0, 2.0, 1.0, 0.0], dtype=torch.float64)
    assert float(testtime.topk_entropy(logits, 2)) == pytest.approx(0.5822031, abs=1e-7)
    decoded = testtime.Decoded([[7]], [logits[None]], [torch.zeros(1, 2)], 1)
    assert testtime.confidence(decoded, 2) == pytest.approx([-0.5822031], abs=1e-7)
    # k = V: the full entropy; k = 1: a certain choice
    assert float(testtime.topk_entropy(torch.zeros(4), 4)) == pytest.approx(math.log(4))
    assert float(testtime.topk_entropy(logits, 1)) == 0.0


# ---- oracle rewards -----------------------------------------------------------------------


def test_oracle_reward_is_zero_right_minus_one_wrong():
    task = tasks.get("arithmetic")
    example = {"prompt": "45+74=", "answer": "119"}
    oracle = testtime.OracleReward(task, example)
    assert oracle("<answer>119</answer>") == 0.0
    assert oracle("<answer>129</answer>") == -1.0
    assert oracle("119") == -1.0  # no answer block: the verifier's 0 → wrong
    assert oracle.calls == 3 and oracle.flips == 0 and oracle.unparsed == 1


def test_noisy_oracle_flips_at_its_rate_and_is_seeded():
    task = tasks.get("arithmetic")
    example = {"prompt": "45+74=", "answer": "119"}
    always = testtime.OracleReward(task, example, flip=1.0)
    assert always("<answer>119</answer>") == -1.0 and always("<answer>1</answer>") == 0.0
    a = testtime.OracleReward(task, example, flip=0.2, seed=3)
    b = testtime.OracleReward(task, example, flip=0.2, seed=3)
    labels = [a("<answer>119</answer>") for _ in range(2000)]
    assert labels == [b("<answer>119</answer>") for _ in range(2000)]
    # 2000 draws at 0.2: sd √(2000·0.2·0.8) ≈ 17.9, so 400 ± 4 sd
    assert 328 < a.flips < 472 and labels.count(-1.0) == a.flips
    with pytest.raises(ValueError, match="flip=1.5"):
        testtime.OracleReward(task, example, flip=1.5)


# ---- properties on the shipped model ------------------------------------------------------


def test_hidden_states_reproduce_the_greedy_answer(tiny):
    # z_j = h_j must decode to the answer's tokens: argmax(W h_j) = y_j (positions right)
    model, tok = tiny
    out = testtime.decode(
        model,
        model.get_input_embeddings()(torch.tensor([_ids(tok, "45+74=")])),
        max_new_tokens=24,
        eos_id=tok.eos_token_id,
    )
    head = model.get_output_embeddings().weight
    again = (out.hidden[0] @ head.T).argmax(-1).tolist()
    assert again[: len(out.ids[0])] == out.ids[0] and again[-1] == tok.eos_token_id
    assert tok.decode(out.ids[0]) == "<answer>129</answer>"


def test_latentseek_moves_the_answer_and_never_changes_the_weights(tiny):
    model, tok = tiny
    before = _weights_hash(model)
    task = tasks.get("arithmetic")
    oracle = testtime.OracleReward(task, {"prompt": "45+74=", "answer": "119"})
    solved = testtime.latentseek(model, tok, _ids(tok, "45+74="), oracle, rho=0.5, start=1)
    assert _weights_hash(model) == before
    # the tiny model answers 129; pushing the leading digits away reaches 119
    assert solved.initial == "<answer>129</answer>"
    assert solved.completion == "<answer>119</answer>" and solved.rewards[-1] == 0.0
    assert solved.rewards[:-1] == [-1.0] * solved.iterations
    assert solved.reward_calls == solved.decodes == solved.iterations + 1


def test_best_of_n_stops_at_the_first_accepted_sample(tiny):
    model, tok = tiny
    seen = []

    def reward(text):
        seen.append(text)
        return 0.0 if len(seen) == 3 else -1.0

    g = torch.Generator().manual_seed(0)
    solved = testtime.best_of_n(model, tok, _ids(tok, "45+74="), reward, n=10, generator=g)
    assert solved.reward_calls == 3 and solved.completion == seen[2]
    assert solved.decodes == 10  # the ten are decoded in one batch


def test_latent_confidence_pg_step_is_the_score_function_estimate(tiny, monkeypatch):
    # M = 2 with C = (1, 0): C̄ = 0.5, so z₁ − z₀ = η·((0.5)ε₁ + (−0.5)ε₂)/2/σ
    # = 0.1·0.25·(ε₁ − ε₂)/0.1 = 0.25·(ε₁ − ε₂)
    model, tok = tiny
    monkeypatch.setattr(testtime, "confidence", lambda decoded, k: [1.0, 0.0][: len(decoded.ids)])
    ids = _ids(tok, "45+74=~")
    z0 = model.get_input_embeddings()(torch.tensor(ids[-1:])).detach()
    eps = torch.randn(2, 1, z0.shape[-1], generator=torch.Generator().manual_seed(5))
    solved = testtime.latent_confidence_pg(
        model,
        tok,
        ids,
        K=1,
        M=2,
        sigma=0.1,
        lr=0.1,
        steps=1,
        generator=torch.Generator().manual_seed(5),
    )
    assert torch.allclose(solved.latent - z0, 0.25 * (eps[0] - eps[1]), atol=1e-6)
    assert (solved.iterations, solved.decodes) == (1, 3)


def test_latent_confidence_pg_without_steps_is_the_greedy_answer(tiny):
    model, tok = tiny
    ids = _ids(tok, "45+74=~~~~")
    solved = testtime.latent_confidence_pg(model, tok, ids, steps=0)
    assert solved.completion == testtime.greedy(model, tok, ids).completion
    assert solved.decodes == 1
    with pytest.raises(ValueError, match="K=7 pause positions"):
        testtime.latent_confidence_pg(model, tok, _ids(tok, "1+2="), K=7)


def test_best_of_m_by_confidence_takes_the_most_confident(tiny, monkeypatch):
    model, tok = tiny
    monkeypatch.setattr(testtime, "confidence", lambda decoded, k: [0.0, -1.0, 2.0, 1.0])
    g = torch.Generator().manual_seed(1)
    solved = testtime.best_of_m_by_confidence(model, tok, _ids(tok, "45+74="), m=4, generator=g)
    g = torch.Generator().manual_seed(1)
    embeds = model.get_input_embeddings()(torch.tensor([_ids(tok, "45+74=")])).expand(4, -1, -1)
    again = testtime.decode(
        model, embeds, max_new_tokens=24, eos_id=tok.eos_token_id, temperature=1.0, generator=g
    )
    assert solved.completion == tok.decode(again.ids[2]) and solved.confidence == 2.0
