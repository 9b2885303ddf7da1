"""Packed rows: the learner's forward over prompt + responses without padding, each
prompt computed once for all the responses that share it.

The padded forward (models.py `response_forward`) left-pads prompts and right-pads
responses into one [B, P + T] input: with ragged responses (GRPO on short answers) about
40 % of those tokens are padding, each of a group's G rows recomputes the same prompt, and
every row also runs its last response token, whose output predicts nothing. Here the rows
that share a prompt become one segment: the prompt once, then each row's response up to
its last real token (that token excluded) as a branch. A branch token attends to the
prompt and to its own branch's earlier tokens, never to a sibling branch, and its position
id continues the prompt's, so it sees exactly what it sees in its padded row. Segments are
laid end to end into a few rows of at most `capacity` tokens (first fit, longest first);
the forward gets the [R, 1, C, C] mask itself (a boolean mask under sdpa, an additive one
under eager attention: what the HF Llama/Qwen2 models accept as a custom 4-D mask). The LM
head runs only on the hidden states that predict a response token (`logits_to_keep`-style),
where the padded path computes it at every position.

The result is the padded path's: the same per-token log-probs, entropy, loss and
gradients to float32 rounding (tests/test_packing.py), not to the bit — the matrix
shapes differ — so it is a switch (TrainConfig.packing), off by default.

A row whose attended response positions are not a prefix (an observation mask with
gaps) has no segment form; `pack` returns None for such a batch and the caller keeps the
padded path."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from policylab.devices import autocast_for, checkpointing_for
from policylab.logprobs import selective_logprobs

# the shortest packed row by default: short segments (GRPO on short answers: ~12 tokens)
# share rows instead of each taking one; measured on the tiny model, 48–256 all beat one
# segment per row (~25 % less forward + backward time than padding), 48 best [ours]
MIN_CAPACITY = 48


@dataclass
class Packed:
    """A batch of B rows as R packed rows of C tokens, and where each scored token is."""

    input_ids: torch.Tensor  # [R, C] segments end to end, tail filled with pad
    position_ids: torch.Tensor  # [R, C] the positions each token has in its padded row
    segment: torch.Tensor  # [R, C] which segment (prompt + branches) a token belongs to
    branch: torch.Tensor  # [R, C] −1 on a prompt, else the branch (batch row) it starts
    query: torch.Tensor  # [N] flat index (r·C + c) of the position predicting each token
    rows: torch.Tensor  # [N] the batch row of each scored token
    cols: torch.Tensor  # [N] its response position t
    targets: torch.Tensor  # [N] its token id
    shape: tuple[int, int]  # (B, T) of the padded response tensors

    @property
    def tokens(self) -> int:
        """Tokens the forward runs, tail padding included."""
        return self.input_ids.numel()

    def allowed(self) -> torch.Tensor:
        """[R, 1, C, C] True where query q may attend to key k: the same segment, k ≤ q,
        and k on the prompt or on q's own branch."""
        C = self.input_ids.shape[1]
        causal = torch.ones(C, C, dtype=torch.bool).tril()
        same = self.segment.unsqueeze(-1) == self.segment.unsqueeze(-2)
        on_path = (self.branch.unsqueeze(-2) == -1) | (
            self.branch.unsqueeze(-1) == self.branch.unsqueeze(-2)
        )
        return (same & on_path & causal).unsqueeze(1)


def pack(
    prompt_ids: list[list[int]],
    response_ids: torch.Tensor,
    response_mask: torch.Tensor,
    *,
    pad_id: int,
    observation_mask: torch.Tensor | None = None,
    capacity: int | None = None,
) -> Packed | None:
    """The rows of `prompt_ids` (B lists) and `response_ids` [B, T] as segments, one per
    distinct prompt, packed into rows of at most `capacity` tokens (default: the longest
    segment or MIN_CAPACITY, whichever is larger); None when some row's attended response
    positions (response_mask ∨ observation_mask) are not a prefix of its row.

    A segment is the prompt p, then for each row b with that prompt the branch
    response_b[: n_b − 1] (n_b its attended length) at positions len(p) … len(p) + n_b − 2.
    Response token 0 is predicted at the prompt's last token (one query shared by the
    branches), token t ≥ 1 at branch offset t − 1; scored where response_mask[b, t] > 0."""
    B, T = response_ids.shape
    seen = response_mask > 0
    if observation_mask is not None:
        seen = seen | (observation_mask > 0)
    lengths = seen.sum(-1)
    prefix = torch.arange(T).unsqueeze(0) < lengths.unsqueeze(-1)
    if not torch.equal(seen, prefix):
        return None
    lengths = lengths.tolist()
    groups: dict[tuple[int, ...], list[int]] = {}
    for b in range(B):
        if lengths[b]:  # nothing attended, nothing scored: no branch
            groups.setdefault(tuple(prompt_ids[b]), []).append(b)
    segments = list(groups.items())
    sizes = [len(p) + sum(lengths[b] - 1 for b in members) for p, members in segments]
    width = capacity or max(max(sizes, default=1), MIN_CAPACITY)
    if width < max(sizes, default=0):
        raise ValueError(f"capacity={capacity} is below the longest segment ({max(sizes)})")
    # first fit, longest first: a handful of rows, each at most `width` tokens
    bins: list[list[int]] = []
    room: list[int] = []
    for s in sorted(range(len(segments)), key=lambda i: -sizes[i]):
        home = next((r for r, free in enumerate(room) if free >= sizes[s]), None)
        if home is None:
            bins.append([])
            room.append(width)
            home = len(bins) - 1
        bins[home].append(s)
        room[home] -= sizes[s]
    # the rows as Python lists, one tensor each at the end (a per-token torch op costs
    # more than the whole layout); a row's pad tail is a segment (−1) of its own
    ids, positions, segment, branch = [], [], [], []
    query, rows, cols = [], [], []
    response = response_ids.tolist()
    scored = (response_mask > 0).tolist()
    for r, members in enumerate(bins or [[]]):
        row_ids, row_pos, row_seg, row_branch = [], [], [], []
        for s in members:
            p, branches = segments[s]
            last_prompt = r * width + len(row_ids) + len(p) - 1
            row_ids += p
            row_pos += range(len(p))
            row_branch += [-1] * len(p)
            for b in branches:
                n, at = lengths[b], r * width + len(row_ids)
                row_ids += response[b][: n - 1]
                row_pos += range(len(p), len(p) + n - 1)
                row_branch += [b] * (n - 1)
                for t in range(n):
                    if scored[b][t]:
                        query.append(last_prompt if t == 0 else at + t - 1)
                        rows.append(b)
                        cols.append(t)
            row_seg += [s] * (len(row_ids) - len(row_seg))
        tail = width - len(row_ids)
        ids.append(row_ids + [pad_id] * tail)
        positions.append(row_pos + list(range(tail)))
        segment.append(row_seg + [-1] * tail)
        branch.append(row_branch + [-1] * tail)
    rows_t, cols_t = torch.tensor(rows, dtype=torch.long), torch.tensor(cols, dtype=torch.long)
    return Packed(
        torch.tensor(ids, dtype=torch.long),
        torch.tensor(positions, dtype=torch.long),
        torch.tensor(segment, dtype=torch.long),
        torch.tensor(branch, dtype=torch.long),
        torch.tensor(query, dtype=torch.long),
        rows_t,
        cols_t,
        response_ids[rows_t, cols_t],
        (B, T),
    )


def attention_mask(model, packed: Packed, device) -> torch.Tensor:
    """The custom 4-D mask in the form `model`'s attention reads: boolean (True = attend)
    under sdpa, additive (0 or the dtype's minimum) under eager."""
    allowed = packed.allowed().to(device)
    kind = getattr(model.config, "_attn_implementation", None) or "eager"
    if kind == "sdpa":
        return allowed
    if kind == "eager":
        dtype = next(model.parameters()).dtype
        return torch.zeros(allowed.shape, dtype=dtype, device=device).masked_fill(
            ~allowed, torch.finfo(dtype).min
        )
    raise ValueError(
        f"packing=true needs sdpa or eager attention (a custom 4-D mask); the model uses "
        f"{kind!r}: load it with attn_implementation='sdpa' or set packing=false"
    )


def packed_forward(
    model,
    packed: Packed,
    *,
    temperature: float = 1.0,
    with_entropy: bool = False,
    with_head: bool = False,
    with_hidden: bool = False,
    home: torch.device | None = None,
):
    """models.py `response_forward` on a `Packed` batch: the fields of its `ResponseForward`
    as a dict ("logprobs", and "entropy", "hidden", "head_input", "logits" when asked) of [B, T]
    tensors (0 wherever the response mask is 0), log-probs with gradient. The LM head
    (`model.get_output_embeddings()`) runs on the N scored positions only."""
    device = next(model.parameters()).device
    home = home or torch.device("cpu")
    B, T = packed.shape
    ids, positions = packed.input_ids.to(device), packed.position_ids.to(device)
    query = packed.query.to(device)
    with autocast_for(model), checkpointing_for(model):
        # logits_to_keep=1 keeps the full-width head off [R, C]: it runs below, on N rows
        output = model(
            input_ids=ids,
            attention_mask=attention_mask(model, packed, device),
            position_ids=positions,
            output_hidden_states=True,
            use_cache=False,
            logits_to_keep=1,
        )
        hidden = output.hidden_states[-1].reshape(-1, output.hidden_states[-1].shape[-1])
        hidden = hidden[query]  # [N, d]: only the states that predict a response token
        logits = model.get_output_embeddings()(hidden)  # [N, V]
    logp, entropy = selective_logprobs(
        logits.unsqueeze(0), packed.targets.to(device).unsqueeze(0), temperature, with_entropy
    )
    where = (packed.rows.to(device), packed.cols.to(device))

    def spread(values: torch.Tensor) -> torch.Tensor:  # [N, ...] → [B, T, ...], 0 elsewhere
        return values.new_zeros((B, T, *values.shape[1:])).index_put(where, values)

    out = {"logprobs": spread(logp[0]).to(home)}
    if with_entropy:
        out["entropy"] = spread(entropy[0]).to(home)
    if with_hidden:
        out["hidden"] = spread(hidden)
    if with_head:
        out["head_input"] = (spread(hidden.detach().float()) / temperature).to(home)
        out["logits"] = (spread(logits.detach().float()) / temperature).to(home)
    return out
