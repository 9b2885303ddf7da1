"""d2-AnyOrder's attention-mask builder and the `any_order` estimator
(papers/seed_generative.md G0.4, G1.4, G1.10 D1)."""

import math

import pytest
import torch

from policylab.policies.masked_lm import MaskedDiffusionLM, MDMConfig
from policylab.policies.mdm_anyorder import any_order_inputs, reveal_order
from policylab.policies.mdm_logprob import MDMLogprobConfig, mdm_logprob

PAD, A, B, M, P = 0, 1, 2, 3, 4  # toy vocabulary of the D1 toy (test_mdm_logprob.py)

# --- the builder on a hand-built case: P = 2, L = 4 -------------------------------------

PROMPT = torch.tensor([[7, 8]])
RESPONSE = torch.tensor([[10, 11, 12, 13]])
# step 0 reveals positions 1 and 3 (a tie, ordered by position), step 1 position 2,
# step 2 position 0 -> reveal order [1, 3, 2, 0]
REVEAL = torch.tensor([[2, 0, 1, 0]])
MASK_ID = 9

# columns: 0-1 prompt | 2-5 y in reveal order (positions 1, 3, 2, 0) | 6-9 masks
PAIRS = [
    [1, 1, 0, 0, 0, 0, 0, 0, 0, 0],  # prompt rows see the prompt
    [1, 1, 0, 0, 0, 0, 0, 0, 0, 0],
    [1, 1, 1, 0, 0, 0, 0, 0, 0, 0],  # revealed rows: causal in reveal order
    [1, 1, 1, 1, 0, 0, 0, 0, 0, 0],
    [1, 1, 1, 1, 1, 0, 0, 0, 0, 0],
    [1, 1, 1, 1, 1, 1, 0, 0, 0, 0],
    [1, 1, 0, 0, 0, 0, 1, 0, 0, 0],  # masks of pair 0: prompt and self
    [1, 1, 0, 0, 0, 0, 0, 1, 0, 0],
    [1, 1, 1, 1, 0, 0, 0, 0, 1, 0],  # masks of pair 1: + the revealed tokens of pair 0
    [1, 1, 1, 1, 0, 0, 0, 0, 0, 1],
]


def test_hand_case_pairs():
    x = any_order_inputs(PROMPT, RESPONSE, REVEAL, MASK_ID, tokens_per_step=2)
    assert x.order.tolist() == [[1, 3, 2, 0]]
    assert x.inverse.tolist() == [[3, 0, 2, 1]]
    assert x.input_ids.tolist() == [[7, 8, 11, 13, 12, 10, 9, 9, 9, 9]]
    assert x.position_ids.tolist() == [[0, 1, 3, 5, 4, 2, 3, 5, 4, 2]]
    assert x.gather.tolist() == [[9, 6, 8, 7]]
    assert x.attn_mask.shape == (1, 10, 10) and x.attn_mask.dtype == torch.bool
    assert x.attn_mask[0].long().tolist() == PAIRS


def test_hand_case_grouped_by_reveal_step():
    # groups [0, 0, 1, 2]: the last mask (position 0, step 2) also sees position 2 (step 1)
    x = any_order_inputs(PROMPT, RESPONSE, REVEAL, MASK_ID, tokens_per_step=None)
    expected = [row[:] for row in PAIRS]
    expected[9][4] = 1
    assert x.attn_mask[0].long().tolist() == expected
    # one token per step: each mask sees every earlier revealed token
    one = any_order_inputs(PROMPT, RESPONSE, REVEAL, MASK_ID, tokens_per_step=1)
    assert one.attn_mask[0, 6:, 2:6].long().tolist() == [
        [0, 0, 0, 0],
        [1, 0, 0, 0],
        [1, 1, 0, 0],
        [1, 1, 1, 0],
    ]


def test_permutation_and_inverse():
    x = any_order_inputs(PROMPT, RESPONSE, REVEAL, MASK_ID)
    assert x.order.gather(1, x.inverse).tolist() == [[0, 1, 2, 3]]
    # the revealed block read back through the inverse is the response
    assert x.input_ids[:, 2:6].gather(1, x.inverse).tolist() == RESPONSE.tolist()
    # the mask that predicts position t carries t's position id
    assert x.position_ids.gather(1, x.gather).tolist() == [[2, 3, 4, 5]]


def test_left_padded_prompt():
    x = any_order_inputs(
        torch.tensor([[PAD, 7]]), RESPONSE, REVEAL, MASK_ID, tokens_per_step=2, pad_id=PAD
    )
    # positions count real tokens (as MaskedDiffusionLM.forward): the pad does not shift them
    assert x.position_ids.tolist() == [[0, 0, 2, 4, 3, 1, 2, 4, 3, 1]]
    assert x.attn_mask[0, :, 0].long().tolist() == [1] + [0] * 9  # the pad: only itself
    assert x.attn_mask[0, :, 1].all()  # the real prompt token: everyone


def random_case(seed, rows=4, width=3, length=7, steps=4):
    g = torch.Generator().manual_seed(seed)
    real = torch.randint(1, width + 1, (rows,), generator=g)
    prompt = torch.randint(10, 20, (rows, width), generator=g)
    prompt = torch.where(torch.arange(width) < width - real[:, None], PAD, prompt)
    response = torch.randint(10, 20, (rows, length), generator=g)
    reveal = torch.randint(0, steps, (rows, length), generator=g)
    return prompt, response, reveal


@pytest.mark.parametrize("tokens_per_step", [None, 1, 2, 3])
@pytest.mark.parametrize("seed", range(5))
def test_mask_properties(seed, tokens_per_step):
    prompt, response, reveal = random_case(seed)
    rows, width = prompt.shape
    length = response.shape[1]
    x = any_order_inputs(prompt, response, reveal, MASK_ID, tokens_per_step, pad_id=PAD)
    attn = x.attn_mask
    order = x.order
    # the order sorts by reveal step, ties by position
    steps = reveal.gather(1, order)
    assert (steps[:, 1:] >= steps[:, :-1]).all()
    ties = steps[:, 1:] == steps[:, :-1]
    assert (order[:, 1:] > order[:, :-1])[ties].all()
    group = (
        steps
        if tokens_per_step is None
        else (torch.arange(length) // tokens_per_step).expand(rows, -1)
    )
    valid = prompt != PAD
    for b in range(rows):
        for row in range(width + 2 * length):
            # every row sees the whole real prompt; a pad is seen by its own row only
            assert attn[b, row, :width][valid[b]].all()
            pads = (~valid[b]).nonzero().flatten().tolist()
            assert all(attn[b, row, c] == (row == c) for c in pads)
        for l in range(length):
            mrow, own = width + length + l, width + l
            # a mask never sees its own token, nor any token of its group or later
            sees = attn[b, mrow, width : width + length]
            assert not sees[l]
            assert (sees == (group[b] < group[b, l])).all()
            # nor any other mask
            assert attn[b, mrow, width + length :].nonzero().flatten().tolist() == [l]
            # revealed tokens: causal in reveal order, and they never see a mask
            assert (attn[b, own, width : width + length] == (torch.arange(length) <= l)).all()
            assert not attn[b, own, width + length :].any()
        # prompt rows see no completion column
        assert not attn[b, :width, width:].any()


def test_reveal_order_ties_by_position():
    order, inverse = reveal_order(torch.tensor([[1, 1, 0, 1, 0]]))
    assert order.tolist() == [[2, 4, 0, 1, 3]]
    assert inverse.tolist() == [[2, 3, 0, 4, 1]]


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"tokens_per_step": 0}, "tokens_per_step"),
        ({"tokens_per_step": 1.5}, "tokens_per_step"),
        ({"reveal": torch.tensor([[0, 1]])}, "reveal"),
        ({"reveal": torch.tensor([[0, -1, 0, 0]])}, "reveal"),
    ],
)
def test_bad_input(kw, match):
    args = {"reveal": REVEAL, "tokens_per_step": 2} | kw
    with pytest.raises(ValueError, match=match):
        any_order_inputs(PROMPT, RESPONSE, args["reveal"], MASK_ID, args["tokens_per_step"])


# --- the estimator ------------------------------------------------------------------------


def test_registered():
    assert "any_order" in mdm_logprob


def test_refuses_a_model_without_any_order_support_before_any_work():
    model = MaskedDiffusionLM(MDMConfig(d_model=16, n_layers=1, n_heads=2, d_ff=32))
    assert not hasattr(model, "supports_any_order")
    g = torch.Generator().manual_seed(3)
    state = g.get_state()
    with pytest.raises(ValueError, match="any-order causal decoding.*later issue"):
        mdm_logprob.entry("any_order").fn(
            model,
            torch.tensor([[20, 21]]),
            torch.tensor([[22, 23]]),
            torch.tensor([[0, 1]]),
            MDMLogprobConfig(steps=2),
            generator=g,
        )
    assert torch.equal(g.get_state(), state)  # no prompt-mask draw was made


class ToyAnyOrder(torch.nn.Module):
    """D1's toy (L = 2, {a, b}) as an any-order model: the mask row predicting position q
    reads the completion state from the revealed tokens it may attend to (M elsewhere),
    then D1's table. Logits depend only on what the row sees, so a leak changes them."""

    mask_id, pad_id = M, PAD
    supports_any_order = True

    def __init__(self):
        super().__init__()
        self.calls = []

    def forward(self, input_ids, position_ids, attn_mask):
        self.calls.append(tuple(input_ids.shape))
        rows, total = input_ids.shape
        length = (total - 1) // 2  # one prompt token
        logits = torch.zeros(rows, total, 5, dtype=torch.float64)
        for i in range(rows):
            for r in range(1 + length, total):
                z = [M] * length
                for c in range(1, 1 + length):
                    if attn_mask[i, r, c]:
                        z[int(position_ids[i, c]) - 1] = int(input_ids[i, c])
                q = int(position_ids[i, r]) - 1
                table = {(M, M): 0.6, (M, A): 0.7} if q == 0 else {(M, M): 0.5, (A, M): 0.9}
                p = table.get(tuple(z), 0.5)
                logits[i, r, A], logits[i, r, B] = math.log(p), math.log(1 - p)
                logits[i, r, [PAD, M, P]] = -1e9
        return logits


def toy(response, reveal, **kw):
    model = ToyAnyOrder()
    logp, passes = mdm_logprob.entry("any_order").fn(
        model,
        torch.tensor([[P]]),
        torch.tensor([response]),
        torch.tensor([reveal]),
        MDMLogprobConfig(prompt_mask_p=0.0, steps=2),
        **kw,
    )
    assert passes == 1 and model.calls == [(1, 1 + 2 * 2)]  # one pass of length P + 2L
    return logp.sum().item()


def test_d1_toy_equals_exact_steps():
    # step 0 reveals pos0 = a, step 1 pos1 = a: exact log 0.6 + log 0.9
    assert toy([A, A], [0, 1]) == pytest.approx(-0.6161861, abs=1e-7)
    assert toy([A, A], [0, 1], tokens_per_step=1) == pytest.approx(-0.6161861, abs=1e-7)
    # pos1 = a first, then pos0 = b: log 0.5 + log 0.3
    assert toy([B, A], [1, 0]) == pytest.approx(-1.8971200, abs=1e-7)
    # d2's pairs put both tokens in one group: both scored from (M, M), d1's one_step value
    assert toy([A, A], [0, 1], tokens_per_step=2) == pytest.approx(-1.2039728, abs=1e-7)


class Linear:
    """A model double over max_len positions: the logits at position q are
    Σ W[q, position, token] over the (position, token) pairs of the state it scores.

    `standard(ids, attention_mask)` is a masked diffusion LM (every non-pad token of the
    sequence, M included); `any_order(input_ids, position_ids, attn_mask)` gives the mask
    row predicting q the keys it may attend to, plus M at every completion position it
    sees no token for. The two agree exactly when the row sees the prompt and the tokens
    revealed before q's step and nothing else, so a leak (or a hole) changes the result."""

    supports_any_order = True
    pad_id, mask_id = PAD, M

    def __init__(self, max_len=16, vocab=20, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.w = torch.randn(max_len, max_len, vocab, vocab, generator=g, dtype=torch.float64)
        self.passes = 0

    def standard(self, ids, attention_mask):
        positions = (attention_mask.long().cumsum(1) - 1).clamp(min=0)
        logits = torch.zeros(*ids.shape, self.w.shape[-1], dtype=torch.float64)
        for i in range(ids.shape[0]):
            keys = [
                (int(p), int(t))
                for p, t, a in zip(positions[i], ids[i], attention_mask[i], strict=True)
                if a
            ]
            for row in range(ids.shape[1]):
                q = int(positions[i, row])
                logits[i, row] = sum(self.w[q, p, t] for p, t in keys)
        return logits

    def __call__(self, input_ids, position_ids, attn_mask, *, length):
        self.passes += 1
        rows, total = input_ids.shape
        logits = torch.zeros(rows, total, self.w.shape[-1], dtype=torch.float64)
        for i in range(rows):
            first = int(position_ids[i, total - 2 * length :].min())  # completion's first
            for row in range(total - length, total):
                q = int(position_ids[i, row])
                seen = attn_mask[i, row].nonzero().flatten().tolist()
                keys = [(int(position_ids[i, c]), int(input_ids[i, c])) for c in seen]
                done = {p for p, t in keys if p >= first}
                keys += [(p, M) for p in range(first, first + length) if p not in done]
                logits[i, row] = sum(self.w[q, p, t] for p, t in keys)
        return logits


class AnyOrderDouble(torch.nn.Module):
    supports_any_order = True
    pad_id, mask_id = PAD, M

    def __init__(self, linear, length):
        super().__init__()
        self.linear, self.length = linear, length

    def forward(self, input_ids, position_ids, attn_mask):
        return self.linear(input_ids, position_ids, attn_mask, length=self.length)


class StandardDouble(torch.nn.Module):
    pad_id, mask_id = PAD, M

    def __init__(self, linear):
        super().__init__()
        self.linear = linear

    def forward(self, ids, attention_mask=None):
        return self.linear.standard(ids, attention_mask)


def linear_case(seed, rows=3, width=3, length=5, steps=4, one_per_step=False):
    g = torch.Generator().manual_seed(seed)
    real = torch.randint(1, width + 1, (rows,), generator=g)
    prompt = torch.randint(5, 20, (rows, width), generator=g)
    prompt = torch.where(torch.arange(width) < width - real[:, None], PAD, prompt)
    response = torch.randint(5, 20, (rows, length), generator=g)
    if one_per_step:
        reveal = torch.stack([torch.randperm(length, generator=g) for _ in range(rows)])
    else:
        reveal = torch.randint(0, steps, (rows, length), generator=g)
    return prompt, response, reveal


@pytest.mark.parametrize("prompt_mask_p", [0.0, 0.4])
@pytest.mark.parametrize("seed", range(3))
def test_equals_exact_steps_on_an_exact_any_order_double(seed, prompt_mask_p):
    """Variable tokens per step, ties, left padding, prompt re-masking: any_order (groups by
    reveal step) equals exact_steps in 1 pass instead of S."""
    prompt, response, reveal = linear_case(seed)
    linear = Linear(seed=seed)
    cfg = MDMLogprobConfig(prompt_mask_p=prompt_mask_p, steps=4)
    exact, passes = mdm_logprob.entry("exact_steps").fn(
        StandardDouble(linear),
        prompt,
        response,
        reveal,
        cfg,
        generator=torch.Generator().manual_seed(11),
    )
    anyorder, one = mdm_logprob.entry("any_order").fn(
        AnyOrderDouble(linear, response.shape[1]),
        prompt,
        response,
        reveal,
        cfg,
        generator=torch.Generator().manual_seed(11),
    )
    assert (passes, one, linear.passes) == (4, 1, 1)
    torch.testing.assert_close(anyorder, exact, rtol=0, atol=1e-9)


def test_pairs_equal_exact_steps_when_each_step_reveals_two():
    # d2's sampler: exactly 2 tokens per step -> pairs in reveal order are the steps
    prompt, response, _ = linear_case(5, length=6)
    reveal = torch.tensor([[2, 0, 1, 0, 2, 1], [0, 1, 2, 2, 1, 0], [1, 1, 0, 0, 2, 2]])
    linear = Linear(seed=5)
    cfg = MDMLogprobConfig(prompt_mask_p=0.0, steps=3)
    exact, _ = mdm_logprob.entry("exact_steps").fn(
        StandardDouble(linear), prompt, response, reveal, cfg
    )
    pairs, _ = mdm_logprob.entry("any_order").fn(
        AnyOrderDouble(linear, 6), prompt, response, reveal, cfg, tokens_per_step=2
    )
    torch.testing.assert_close(pairs, exact, rtol=0, atol=1e-9)


@pytest.mark.parametrize("leak", ["own_token", "later_group", "pad", "no_prompt"])
def test_the_double_detects_a_leaking_mask(leak):
    """The equality above can fail: each one-entry change of the mask moves the result."""
    prompt, response, reveal = linear_case(1, one_per_step=True)
    prompt[0, 0] = PAD  # row 0 has a left pad
    b = 0
    width, length = prompt.shape[1], response.shape[1]
    linear = Linear(seed=1)
    cfg = MDMLogprobConfig(prompt_mask_p=0.0, steps=length)
    exact, _ = mdm_logprob.entry("exact_steps").fn(
        StandardDouble(linear), prompt, response, reveal, cfg
    )
    x = any_order_inputs(prompt, response, reveal, M, None, pad_id=PAD)
    attn = x.attn_mask.clone()
    row = width + length + 2  # the mask at order index 2
    col = {
        "own_token": width + 2,
        "later_group": width + 3,
        "pad": 0,
        "no_prompt": width - 1,
    }[leak]
    attn[b, row, col] = leak != "no_prompt"
    logits = linear(x.input_ids, x.position_ids, attn, length=length)
    at = logits.gather(1, x.gather[..., None].expand(-1, -1, logits.shape[-1]))
    logp = at.log_softmax(-1).gather(-1, response[..., None])[..., 0]
    position = int(x.order[b, 2])
    assert abs(logp[b, position] - exact[b, position]) > 1e-6
    # the unchanged builder's mask reproduces exact_steps on the same double
    clean = linear(x.input_ids, x.position_ids, x.attn_mask, length=length)
    at = clean.gather(1, x.gather[..., None].expand(-1, -1, clean.shape[-1]))
    ok = at.log_softmax(-1).gather(-1, response[..., None])[..., 0]
    torch.testing.assert_close(ok, exact, rtol=0, atol=1e-9)


def test_temperature_per_token():
    prompt, response, reveal = linear_case(2)
    linear = Linear(seed=2)
    cfg = MDMLogprobConfig(prompt_mask_p=0.0, steps=4)
    tau = torch.full(response.shape, 0.5, dtype=torch.float64)
    hot, _ = mdm_logprob.entry("any_order").fn(
        AnyOrderDouble(linear, 5), prompt, response, reveal, cfg, temperature=tau
    )
    half, _ = mdm_logprob.entry("any_order").fn(
        AnyOrderDouble(linear, 5),
        prompt,
        response,
        reveal,
        MDMLogprobConfig(prompt_mask_p=0.0, steps=4, temperature=0.5),
    )
    torch.testing.assert_close(hot, half)
