"""Two gloo processes on this machine: the replicas stay identical in every mode and the
counted bytes equal the payload formula (papers/seed_agents.md §A10)."""

import math

import pytest
import torch

from policylab.distributed.compression import payload_bytes
from policylab.distributed.diloco_sft import LowCommConfig, launch
from policylab.models import TinyConfig, build_model, build_tokenizer

SMALL = dict(hidden_size=32, num_hidden_layers=1, batch_size=4, pool_size=200, eval_n=16)


@pytest.mark.slow
def test_two_workers_ddp_diloco_dilocox():
    configs = [
        LowCommConfig(mode="ddp", inner_steps=3, eval_every=3, record_params=True, **SMALL),
        LowCommConfig(
            mode="diloco", inner_steps=4, local_steps=2, eval_every=2, record_params=True, **SMALL
        ),
        LowCommConfig(
            mode="dilocox",
            inner_steps=6,
            local_steps=2,
            eval_every=2,
            rank_every=2,
            record_params=True,
            **SMALL,
        ),
    ]
    # dilocox without its delay and compression is diloco, bit for bit
    plain = LowCommConfig(
        mode="dilocox",
        inner_steps=4,
        local_steps=2,
        eval_every=2,
        delay=0,
        compress=False,
        record_params=True,
        **SMALL,
    )
    ddp, diloco, dilocox, undone = launch([*configs, plain], workers=2)
    arch = TinyConfig(hidden_size=32, intermediate_size=96, num_hidden_layers=1)
    shapes = [p.shape for p in build_model(build_tokenizer(), arch).parameters()]
    fp32 = sum(s.numel() for s in shapes) * 4

    for runs, syncs in ((ddp, 3), (diloco, 2), (dilocox, 3)):
        first, second = runs
        assert len(first["history"]) == len(second["history"]) == syncs
        for mine, theirs in zip(first["history"], second["history"], strict=True):
            assert torch.equal(mine, theirs)  # identical after each step / outer step
        assert not torch.equal(first["history"][0], first["history"][-1])  # it trains
        assert math.isfinite(first["loss/held_out"])

    for mine, theirs in zip(diloco[0]["history"], undone[0]["history"], strict=True):
        assert torch.equal(mine, theirs)

    assert ddp[0]["comm/bytes_total"] == 3 * fp32
    assert diloco[0]["comm/bytes_total"] == 2 * fp32
    ranks = dilocox[0]["comm/ranks"]
    matrices = sum(len(s) == 2 for s in shapes)
    probes = 2  # before rounds 0 and 2 (rank_every=2): one int32 rank per matrix each
    expected = sum(payload_bytes(shapes, r) for r in ranks) + probes * 4 * matrices
    assert len(ranks) == 3 and dilocox[0]["comm/bytes_total"] == expected
    assert dilocox[0]["comm/bytes_total"] == dilocox[1]["comm/bytes_total"]
    assert dilocox[0]["comm/compression_ratio"] > 1


def test_config_errors_name_the_field():
    with pytest.raises(ValueError, match="mode='fsdp'"):
        LowCommConfig(mode="fsdp")
    with pytest.raises(ValueError, match="eval_every=30 is not a multiple of local_steps=50"):
        LowCommConfig(mode="diloco", eval_every=30)
    with pytest.raises(ValueError, match="delay=-1"):
        LowCommConfig(mode="dilocox", delay=-1)
    with pytest.raises(ValueError, match="link_gbps=-1"):
        LowCommConfig(link_gbps=-1)
