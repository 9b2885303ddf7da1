"""StepTool (agents spec §A2): step scores placed at the end of each turn (the code's
multiplier rule, spec T1; the paper's rule), discounting through the existing `gae`
estimator (spec T2), and TRL's adaptive KL coefficient."""

from __future__ import annotations

import pytest
import torch
from algebra_testing import close

from policylab import Rollouts
from policylab.algebra.advantages import GAEOptions, gae_returns, value_targets
from policylab.algebra.catalogue import advantage_estimators
from policylab.algebra.steptool import AdaptiveKL, place_step_scores

F64 = torch.float64
# spec T1 layout: turn 0 = 3 generated tokens + 2 observation tokens, turn 1 = 2 generated
T1_MASK = torch.tensor([[1, 1, 1, 0, 0, 1, 1]])
T1_SEG = torch.tensor([[0, 0, 0, 0, 0, 1, 1]])
# spec T2 layout: call, tool text, call, tool text, final answer
T2_MASK = torch.tensor([[1, 1, 0, 0, 1, 1, 0, 1]])
T2_SEG = torch.tensor([[0, 0, 0, 0, 1, 1, 1, 2]])


def test_spec_t1_code_placement():
    # n = 2 segments, S = 3 scores. Walking from the last: j = 0, the last segment
    # (ends at 6), gets score[2]·0 = 0.0·0; j = 1, the first segment (ends at 2), gets
    # score[1]·1 = 0.8333…; score[0] is never placed.
    scores = [[0.8333333333333334, 0.8333333333333334, 0.0]]
    rho = place_step_scores(T1_MASK, T1_SEG, scores, placement="code")
    close(rho, [[0.0, 0.0, 0.8333333, 0.0, 0.0, 0.0, 0.0]], atol=1e-7)
    # score 0 is unused: changing it changes nothing
    other = place_step_scores(T1_MASK, T1_SEG, [[9.0, 0.8333333333333334, 0.0]], placement="code")
    assert torch.equal(rho, other)


def test_code_placement_weights_each_segment_by_the_segments_after_it():
    # n = 3 segments, S = 4 scores (a, b, c, d) = (0.1, 0.2, 0.3, 0.4): the segment s gets
    # score[s + 1]·(n − 1 − s) → ends 0.2·2 = 0.4, 0.3·1 = 0.3, 0.4·0 = 0
    mask = torch.tensor([[1, 0, 1, 1, 0, 1]])
    seg = torch.tensor([[0, 0, 1, 1, 1, 2]])
    rho = place_step_scores(
        mask, seg, torch.tensor([[0.1, 0.2, 0.3, 0.4]], dtype=F64), placement="code"
    )
    close(rho, [[0.4, 0.0, 0.0, 0.3, 0.0, 0.0]], atol=1e-12)
    # fewer scores than segments + 1: the earliest segments get nothing (the code's loop
    # runs out of scores): S = 2 → the last gets b·0, the middle a·1, the first nothing
    rho = place_step_scores(mask, seg, [[0.5, 0.7]], placement="code")
    close(rho, [[0.0, 0.0, 0.0, 0.5, 0.0, 0.0]], atol=1e-7)


def test_paper_placement_puts_each_score_at_its_turns_last_generated_token():
    # scores (1.0, 0.5, 1.0) of the three steps → positions 1, 5, 7; the tool text at
    # positions 2, 3 and 6 receives nothing
    rho = place_step_scores(T2_MASK, T2_SEG, [[1.0, 0.5, 1.0]])
    close(rho, [[0.0, 1.0, 0.0, 0.0, 0.0, 0.5, 0.0, 1.0]], atol=0.0)


def test_spec_t2_gae_returns_through_the_existing_estimator():
    # V ≡ 0, γ 0.99, λ 1: the return skips the tool text (masked positions neither discount
    # nor receive credit): ret_7 = 1; ret_5 = 0.5 + 0.99·1 = 1.49; ret_4 = 0.99·1.49 = 1.4751;
    # ret_1 = 1 + 0.99·1.4751 = 2.460349; ret_0 = 0.99·2.460349 = 2.43574551
    expected = [[2.43574551, 2.460349, 0.0, 0.0, 1.4751, 1.49, 0.0, 1.0]]
    rho = place_step_scores(T2_MASK, T2_SEG, torch.tensor([[1.0, 0.5, 1.0]], dtype=F64))
    batch = Rollouts(
        rewards=torch.zeros(1, dtype=F64),
        response_mask=T2_MASK,
        token_rewards=rho,
        values=torch.zeros(1, 8, dtype=F64),
        segment_ids=T2_SEG,
    )
    cfg = GAEOptions(gamma=0.99, lam=1.0, whiten=False)
    close(advantage_estimators.get("gae")(batch, cfg), expected, atol=1e-12)  # Â = ret − 0
    close(value_targets(batch, cfg), expected, atol=1e-12)
    close(gae_returns(rho, batch.values, T2_MASK, 0.99, 1.0), expected, atol=1e-12)


def test_segments_without_generated_tokens_and_padding_do_not_count():
    # row 0: segment 0 generated, segment 1 observation only, segment 2 generated, padding;
    # row 1: one segment. Ragged scores: two for row 0, one for row 1.
    mask = torch.tensor([[1, 0, 1, 0], [1, 1, 0, 0]])
    seg = torch.tensor([[0, 1, 2, -1], [0, 0, -1, -1]])
    rho = place_step_scores(mask, seg, [[0.25, 0.75], [1.0]])
    close(rho, [[0.25, 0.0, 0.75, 0.0], [0.0, 1.0, 0.0, 0.0]], atol=0.0)


def test_paper_placement_needs_one_score_per_segment():
    with pytest.raises(ValueError, match="row 0 has 2 segments .* but 3 scores"):
        place_step_scores(T1_MASK, T1_SEG, [[0.1, 0.2, 0.3]])
    with pytest.raises(ValueError, match="placement"):
        place_step_scores(T1_MASK, T1_SEG, [[0.1, 0.2]], placement="both")
    with pytest.raises(ValueError, match="rows"):
        place_step_scores(T1_MASK, T1_SEG, [[0.1, 0.2], [0.3, 0.4]])


def test_adaptive_kl_hand_case():
    kl = AdaptiveKL()  # β₀ 0.3, target 6, horizon 10,000
    # KL 9: e = clip(9/6 − 1 = 0.5) = 0.2; β = 0.3·(1 + 0.2·8/10⁴) = 0.300048
    close(kl.update(9.0, 8), 0.300048, atol=1e-15)
    # KL 3: e = clip(−0.5) = −0.2; β = 0.300048·(1 − 0.2·256/10⁴) = 0.300048·0.99488
    close(kl.update(3.0, 256), 0.29851175424, atol=1e-15)
    # KL 6.6: e = 0.1 (inside the clip); β ·= 1 + 0.1·100/10⁴ = 1.001
    close(kl.update(6.6, 100), 0.29881026599424, atol=1e-15)
    assert kl.value == pytest.approx(0.29881026599424, abs=1e-15)
    # KL at the target leaves β unchanged
    assert kl.update(6.0, 1000) == pytest.approx(0.29881026599424, abs=1e-15)


def test_adaptive_kl_state_round_trip():
    kl = AdaptiveKL(value=0.2, target=4.0, horizon=500)
    kl.update(10.0, 50)
    again = AdaptiveKL()
    again.load_state_dict(kl.state_dict())
    assert again == kl
    assert again.update(1.0, 5) == kl.update(1.0, 5)
    with pytest.raises(ValueError, match="target"):
        AdaptiveKL(target=0.0)
