"""DiLoCo / DiLoCoX pieces (papers/seed_agents.md §A10): the spec's five exact cases, then
properties of compression and links."""

import pytest
import torch

from policylab.distributed.compression import (
    Compressor,
    adaptive_rank,
    dequantize_int8,
    payload_bytes,
    power_iteration,
    quantize_int8,
)
from policylab.distributed.diloco import Delay, OuterLoop
from policylab.distributed.links import Link, simulated_seconds, traffic_factor
from policylab.models import TinyConfig, build_model, build_tokenizer


def test_outer_step_is_nesterov_sgd():
    # §A10 test 1: b = 0.2, θ = 1 − 0.7·(0.2 + 0.9·0.2) = 0.734;
    # b = 0.9·0.2 + 0.1 = 0.28, θ = 0.734 − 0.7·(0.1 + 0.9·0.28) = 0.4876
    theta = torch.nn.Parameter(torch.tensor([1.0]))
    outer = OuterLoop([theta], lr=0.7, momentum=0.9)
    outer.step([torch.tensor([0.2])])
    assert theta.item() == pytest.approx(0.734, abs=1e-6)
    outer.step([torch.tensor([0.1])])
    assert theta.item() == pytest.approx(0.4876, abs=1e-6)


def test_pseudo_gradient_is_global_minus_local():
    theta = torch.nn.Parameter(torch.tensor([1.0, 2.0]))
    outer = OuterLoop([theta])
    with torch.no_grad():
        theta -= torch.tensor([0.25, -0.5])
    assert outer.pseudo_gradients()[0].tolist() == [0.25, -0.5]


def tiny_shapes():
    model = build_model(build_tokenizer(), TinyConfig(), seed=0)
    return [p.shape for p in model.parameters()]


def test_payload_sizes_of_the_tiny_model():
    # §A10 test 2: 866,048 parameters, 29 matrices, 1,152 norm weights
    shapes = tiny_shapes()
    matrices = [s for s in shapes if len(s) == 2]
    assert sum(s.numel() for s in shapes) * 4 == 3_464_192
    assert len(matrices) == 29
    assert payload_bytes(shapes, [8] * 29) == 83_752 + 232 + 4_608 == 88_592
    assert 3_464_192 / 88_592 == pytest.approx(39.10, abs=0.005)
    assert 500 * 3_464_192 == 1_732_096_000
    assert 1_732_096_000 // 88_592 == 19_551
    # one 128×384 matrix: 196,608 B → (128 + 384)·8 + 8 = 4,104 B (47.91×)
    assert payload_bytes([torch.Size([128, 384])], [8]) == 4_104
    assert 128 * 384 * 4 / 4_104 == pytest.approx(47.91, abs=0.005)


def test_encoded_payload_has_the_counted_size():
    shapes = tiny_shapes()
    deltas = [torch.randn(s) for s in shapes]
    payload = Compressor(shapes).encode(deltas, [8] * 29)
    assert payload.dtype == torch.uint8 and payload.numel() == 88_592


def test_adaptive_rank_by_energy():
    # §A10 test 3: squares (16, 4, 1, 1) / 22 → cumulative (0.7273, 0.9091, …) → r = 2
    assert adaptive_rank(torch.tensor([4.0, 2.0, 1.0, 1.0]), 0.9) == 2
    assert adaptive_rank(torch.tensor([4.0, 2.0, 1.0, 1.0]), 0.95) == 3
    assert adaptive_rank(torch.tensor([10.0, 0.1, 0.1]), 0.5) == 2  # clipped up to 2
    assert adaptive_rank(torch.ones(100), 1.0) == 32  # clipped down to 32
    with pytest.raises(ValueError, match="rank_energy=1.5"):
        adaptive_rank(torch.ones(3), 1.5)


def delayed_sequence(delay: int, rounds: int = 5) -> list[float]:
    """θ on f(θ) = θ²/2: H = 5 inner SGD steps of η 0.1, outer SGD lr 1, no momentum."""
    theta = torch.nn.Parameter(torch.tensor(1.0))
    outer, queue = OuterLoop([theta], lr=1.0, momentum=0.0), Delay(delay)
    seen = [theta.item()]
    for _ in range(rounds):
        inner = torch.optim.SGD([theta], lr=0.1)
        for _ in range(5):
            inner.zero_grad()
            (theta**2 / 2).backward()
            inner.step()
        outer.step(queue.push(outer.pseudo_gradients()))
        seen.append(theta.item())
    return seen


def test_one_step_delay_on_a_quadratic():
    # §A10 test 4: c = 1 − 0.9⁵ = 0.40951; synchronous θ_t = 0.59049^t;
    # delayed θ_{t+1} = θ_t − c·θ_{t−1}
    assert delayed_sequence(0, 3) == pytest.approx([1, 0.59049, 0.3486784, 0.2058911], abs=1e-6)
    expected = [1, 1, 0.59049, 0.18098, -0.0608316, -0.1349447]
    assert delayed_sequence(1) == pytest.approx(expected, abs=1e-6)


def test_delay_queue_drains_what_is_pending():
    queue = Delay(1)
    assert queue.push("a") is None
    assert queue.push("b") == "a"
    assert queue.drain() == ["b"]
    with pytest.raises(ValueError, match="delay=-1"):
        Delay(-1)


def test_int8_round_trip():
    # §A10 test 5: scale 1/127, q = round(x·127) = (38, −127, 1)
    q, scale = quantize_int8(torch.tensor([0.3, -1.0, 0.004]))
    assert q.tolist() == [38, -127, 1] and scale == pytest.approx(1 / 127)
    restored = dequantize_int8(q, scale)
    assert restored.tolist() == pytest.approx([0.2992126, -1.0, 0.0078740], abs=1e-7)
    # the spec lists x̂ − x = (−0.0007874, 0, 0.0038740); error feedback carries e = x − x̂
    error = torch.tensor([0.3, -1.0, 0.004]) - restored
    assert error.tolist() == pytest.approx([0.0007874, 0.0, -0.0038740], abs=1e-7)


def test_zero_tensor_quantizes_to_zero():
    q, scale = quantize_int8(torch.zeros(3))
    assert scale == 0.0 and dequantize_int8(q, scale).tolist() == [0.0, 0.0, 0.0]


def test_power_iteration_recovers_a_low_rank_matrix():
    gen = torch.Generator().manual_seed(0)
    m = torch.randn(20, 2, generator=gen) @ torch.randn(2, 30, generator=gen)
    p, q = power_iteration(m, torch.randn(30, 2, generator=gen))
    assert torch.allclose(p @ q.T, m, atol=1e-4)


def test_error_feedback_carries_what_was_not_sent():
    # residual e = M − Ĉ(M); and over rounds Σ sent + e = Σ Δ exactly
    gen = torch.Generator().manual_seed(1)
    shapes = [torch.Size([16, 12]), torch.Size([5])]
    compressor = Compressor(shapes, seed=0)
    sent, total = [torch.zeros(s) for s in shapes], [torch.zeros(s) for s in shapes]
    for _ in range(4):
        deltas = [torch.randn(s, generator=gen) for s in shapes]
        decoded = compressor.decode(compressor.encode(deltas, [2]), [2])
        for i in range(2):
            sent[i] += decoded[i]
            total[i] += deltas[i]
    assert torch.allclose(sent[0] + compressor.errors[0], total[0], atol=1e-5)
    assert torch.equal(sent[1], total[1])  # vectors travel exactly
    assert compressor.errors[0].abs().sum() > 0


def test_link_costs():
    # 3,464,192 B all-reduced by 2 workers at 1 Gbps, 50 ms: 0.05 + 1·27,713,536/1e9 s
    link = Link(gbps=1.0, latency_ms=50.0)
    assert link.seconds(3_464_192, 2, "all_reduce") == pytest.approx(0.077713536)
    # all-gather among 4: 3·0.05 + 3·1,000·8/1e9
    assert link.seconds(1_000, 4, "all_gather") == pytest.approx(0.150024)
    assert traffic_factor("all_reduce", 4) == 1.5
    with pytest.raises(ValueError, match="kind='scatter'"):
        traffic_factor("scatter", 2)
    with pytest.raises(ValueError, match="link_gbps=0"):
        Link(gbps=0)


def test_simulated_seconds_hides_comm_behind_the_next_round():
    assert simulated_seconds([1, 1, 1], [0.5, 1.5, 0.5], overlap=False) == (5.5, 0.0)
    seconds, overlapped = simulated_seconds([1, 1, 1], [0.5, 1.5, 0.5], overlap=True)
    assert seconds == pytest.approx(4.0)  # 3 + 0 + 0.5 + 0.5
    assert overlapped == pytest.approx(1 - 1.0 / 2.5)
