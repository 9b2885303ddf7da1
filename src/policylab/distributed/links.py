"""Simulated slow links between workers (papers/seed_agents.md §A10, [ours]): the time a
collective would take on a network of per-worker bandwidth b and latency ℓ, accounted
rather than slept.

    cost(P) = ℓ·(N − 1) + f·P·8 / b,   f = 2(N − 1)/N (ring all-reduce), N − 1 (all-gather),
                                          1 (broadcast, [ours]: each worker forwards P once)

Simulated wall-clock = Σ measured compute + Σ non-overlapped communication. A collective
that overlaps the next round's local training (DiLoCoX's one-step delay) is exposed only
for the part exceeding that round's compute (`simulated_seconds`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

KINDS = ("all_reduce", "all_gather", "broadcast")


def traffic_factor(kind: str, workers: int) -> float:
    """f: bytes each worker sends per payload byte, for a collective of `kind`."""
    if workers < 1:
        raise ValueError(f"workers={workers!r} is invalid; accepted: an integer >= 1")
    if kind == "all_reduce":
        return 2 * (workers - 1) / workers
    if kind == "all_gather":
        return workers - 1
    if kind == "broadcast":
        return 1.0 if workers > 1 else 0.0
    raise ValueError(f"collective kind={kind!r} is invalid; accepted: {', '.join(KINDS)}")


@dataclass(frozen=True)
class Link:
    """Per-worker bandwidth (`gbps`, 10⁹ bit/s) and latency (`latency_ms`); defaults 1 Gbps
    and 50 ms [ours, §A10]."""

    gbps: float = 1.0
    latency_ms: float = 50.0

    def __post_init__(self) -> None:
        if not self.gbps > 0:
            raise ValueError(f"link_gbps={self.gbps!r} is invalid; accepted: a number > 0")
        if not self.latency_ms >= 0:
            raise ValueError(f"link_latency_ms={self.latency_ms!r} is invalid; accepted: >= 0")

    def seconds(self, payload_bytes: int, workers: int, kind: str) -> float:
        """ℓ·(N − 1) + f·P·8/b for one collective of `payload_bytes` per worker."""
        factor = traffic_factor(kind, workers)
        latency = self.latency_ms / 1000 * (workers - 1)
        return latency + factor * payload_bytes * 8 / (self.gbps * 1e9)


def simulated_seconds(
    compute: Sequence[float], comm: Sequence[float], overlap: bool
) -> tuple[float, float]:
    """(simulated wall-clock, overlapped fraction of communication) for rounds with measured
    compute c_t, each followed by a collective costing m_t.

    Without overlap: Σ c_t + Σ m_t. With overlap (one-step delay), m_t runs during round
    t + 1's compute: exposed max(0, m_t − c_{t+1}); the last round's collective has nothing to
    hide behind. E.g. c = (1, 1, 1), m = (0.5, 1.5, 0.5): 3 + 0 + 0.5 + 0.5 = 4.0."""
    if len(compute) != len(comm):
        raise ValueError(f"{len(compute)} compute times for {len(comm)} collectives")
    if overlap:
        following = list(compute[1:]) + [0.0]
        exposed = sum(max(0.0, m - c) for m, c in zip(comm, following, strict=True))
    else:
        exposed = sum(comm)
    total_comm = sum(comm)
    overlapped = 1 - exposed / total_comm if total_comm else 0.0
    return sum(compute) + exposed, overlapped
