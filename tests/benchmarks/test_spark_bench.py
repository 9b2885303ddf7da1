"""benchmarks/spark.py's best-of-n selection by the model's own pairwise verdicts."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))

from spark import most_wins  # noqa: E402


def test_most_wins_counts_both_orders_and_breaks_ties_to_the_earliest():
    # answers 0 and 3 judged both ways: "2" on (0, 3) and "1" on (3, 0) are wins for 3;
    # (0, 1) "1" and (1, 0) "2" are wins for 0; (1, 3) "2", (3, 1) "1" two more for 3
    said = {(0, 1): "1", (1, 0): "2", (0, 3): "2", (3, 0): "1", (1, 3): "2", (3, 1): "1"}
    assert most_wins(4, said) == 3  # wins: 0 → 2, 3 → 4
    assert most_wins(4, {(0, 1): "x", (1, 0): None}) == 0  # no verdict: nobody wins, tie → 0
    assert most_wins(3, {(1, 2): "1", (2, 1): "1"}) == 1  # 1 and 2 one win each → earliest
