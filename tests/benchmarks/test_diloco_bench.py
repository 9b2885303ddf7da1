"""benchmarks/diloco.py: bytes to reach L*, and the verdict against §A10's criterion."""

import importlib.util
from pathlib import Path

import pytest

PATH = Path(__file__).parents[2] / "benchmarks" / "diloco.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("diloco_bench", PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_bytes_to_reach_is_the_first_point_at_or_below(bench):
    curve = [{"bytes": 10, "loss": 3.0}, {"bytes": 20, "loss": 2.0}, {"bytes": 30, "loss": 1.9}]
    assert bench.bytes_to_reach(curve, 2.0) == 20
    assert bench.bytes_to_reach(curve, 1.0) is None


def test_arm_names(bench):
    assert bench.arm("dilocox@100", 50) == ("dilocox", 100, {})
    assert bench.arm("diloco", 50) == ("diloco", 50, {})
    assert bench.arm("dilocox@50+nodelay+fp32", 9) == (
        "dilocox",
        50,
        {"delay": 0, "compress": False},
    )
    with pytest.raises(SystemExit, match="fsdp"):
        bench.arm("fsdp@5", 50)
    with pytest.raises(SystemExit, match="nodelay"):
        bench.arm("dilocox@5+fast", 50)


def test_verdict(bench):
    # 100× fewer bytes and gaps (1 %, 1.2 %): mean 1.1 %, se 0.1 % → held
    assert bench.verdict("dilocox@50", [0.010, 0.012], [5, 5], [200, 150]) == "held"
    # gaps (1 %, 3 %): mean 2 % ± 2·1 % straddles 2 %
    assert bench.verdict("dilocox@50", [0.01, 0.03], [5, 5], [200, 150]) == "inside the noise"
    assert bench.verdict("dilocox@50", [0.10, 0.11], [5, 5], [200, 150]) == "not held"
    assert bench.verdict("dilocox@50", [0.0, 0.0], [5, None], [200]) == "not held"
    assert bench.verdict("dilocox@50", [0.0, 0.0], [5, 5], [200, 99]) == "not held"
    assert bench.verdict("ddp", [0.0], [5], [1]) == "(reference)"
    assert bench.verdict("dilocox@50+fp32", [0.0], [5], [200]) == "(ablation)"
