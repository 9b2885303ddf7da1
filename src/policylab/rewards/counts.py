"""What the reward functions made of a batch, counted per function, and the watch that
stops a run whose rewards score nothing.

A sample is *scored* when at least one reward function returned a finite number for it.
Per function: `failed` samples raised (any exception but KeyboardInterrupt) or timed out
and got `failure_reward`; `nonfinite` ones returned NaN, ±inf or a value beyond float32
(the dtype of the batch), left out like `missing` ones (None, "cannot score")."""

from __future__ import annotations

import logging
import threading
from collections import Counter
from dataclasses import dataclass, field

log = logging.getLogger(__name__)


@dataclass
class RewardCounts:
    names: tuple[str, ...] = ()  # the reward functions, in the order of the config
    rows: int = 0
    scored: int = 0  # rows at least one function gave a finite value
    failed: Counter[str] = field(default_factory=Counter)
    nonfinite: Counter[str] = field(default_factory=Counter)
    missing: Counter[str] = field(default_factory=Counter)

    def __add__(self, other: RewardCounts) -> RewardCounts:
        return RewardCounts(
            tuple(dict.fromkeys(self.names + other.names)),
            self.rows + other.rows,
            self.scored + other.scored,
            self.failed + other.failed,
            self.nonfinite + other.nonfinite,
            self.missing + other.missing,
        )

    def metrics(self) -> dict[str, float]:
        """reward/failed/<name> and reward/nonfinite/<name> for every function (0 included,
        so that each is a curve), and reward/scored_frac."""
        out = {"reward/scored_frac": self.scored / self.rows if self.rows else 0.0}
        for name in self.names:
            out[f"reward/failed/{name}"] = float(self.failed[name])
            out[f"reward/nonfinite/{name}"] = float(self.nonfinite[name])
        return out

    def explain(self) -> str:
        """What each function did with the rows, e.g. "'f' returned None for 16 of 16"."""
        said = []
        for name in self.names:
            for count, what in (
                (self.failed[name], "raised or timed out on"),
                (self.nonfinite[name], "returned a non-finite value for"),
                (self.missing[name], "returned None for"),
            ):
                if count:
                    said.append(f"{name!r} {what} {count} of {self.rows}")
        return "; ".join(said)


class UnscoredSteps:
    """Warns at each step in which no sample got a valid reward, and raises after `limit`
    such steps in a row (0: never): without a valid reward every advantage is zero and
    the policy does not change, so such a run would spend its whole budget learning
    nothing."""

    def __init__(self, limit: int) -> None:
        self.limit, self.run = limit, 0

    def check(self, step: int, counts: RewardCounts | None) -> None:
        """`counts` of the step's rollouts; None (a workflow without reward functions,
        e.g. environments' own rewards) is not checked."""
        if counts is None or not counts.rows or counts.scored:
            self.run = 0
            return
        self.run += 1
        why = counts.explain()
        log.warning("step %d: no sample got a valid reward (%s)", step, why)
        if self.limit and self.run >= self.limit:
            raise UnscoredRunError(
                f"no sample got a valid reward in {self.run} consecutive steps (steps "
                f"{step - self.run + 1}-{step}): {why}. A reward function returns one finite "
                "number per completion (None where it cannot score); its errors are in the "
                "log above. Stopping (max_unscored_steps = "
                f"{self.limit}; 0 never stops)."
            )


class UnscoredRunError(ValueError):
    """A run's reward functions scored no sample in max_unscored_steps steps in a row."""


class FaultLedger:
    """Samples a reward function scored with its failure value for a reason of the sample
    itself (a completion that is not JSON, a click off the screen), keyed
    "<function>/<reason>": recorded where the function decides it, read by the trainer once
    a step (`take`: the counts since the last read, logged as reward/fault/<key>). One per
    process (`FAULTS`); a reward run in another process (a Ray reward pool) records in its
    own."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._since: Counter[str] = Counter()

    def record(self, key: str) -> None:
        with self._lock:
            self._since[key] += 1

    def take(self) -> dict[str, float]:
        """reward/fault/<key> → samples since the last take (then cleared)."""
        with self._lock:
            out = {f"reward/fault/{key}": float(n) for key, n in sorted(self._since.items())}
            self._since.clear()
        return out


FAULTS = FaultLedger()
