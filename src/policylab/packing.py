"""Packed rows: the learner's forward over (prompt + response) segments without padding.

The padded forward (models.py `response_forward`) left-pads prompts and right-pads
responses into one [B, P + T] input: with ragged responses (GRPO on short answers) about
40 % of those tokens are padding, and every row also runs its last response token, whose
output predicts nothing. Here each row becomes one segment, prompt + response up to its
last real token (that token excluded), and segments are laid end to end into a few rows
of at most `capacity` tokens (first fit, longest first). Position ids restart at 0 in
each segment; with no attention mask, transformers (>= 4.54, masking_utils
`find_packed_sequence_indices`) reads the restarts as segment boundaries and attends
block-diagonally and causally, under sdpa and eager attention (and flash-attention's
varlen path). The LM head runs only on the hidden states that predict a response token
(`logits_to_keep`-style), which the padded path computes for every position.

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
    position_ids: torch.Tensor  # [R, C] 0.. per segment; the tail continues the last one
    query: torch.Tensor  # [N] flat index (r·C + c) of the position predicting each token
    rows: torch.Tensor  # [N] the batch row of each scored token
    cols: torch.Tensor  # [N] its response position t
    targets: torch.Tensor  # [N] its token id
    shape: tuple[int, int]  # (B, T) of the padded response tensors

    @property
    def tokens(self) -> int:
        """Tokens the forward runs, tail padding included."""
        return self.input_ids.numel()


def pack(
    prompt_ids: list[list[int]],
    response_ids: torch.Tensor,
    response_mask: torch.Tensor,
    *,
    pad_id: int,
    observation_mask: torch.Tensor | None = None,
    capacity: int | None = None,
) -> Packed | None:
    """Segments of `prompt_ids` (B lists) and `response_ids` [B, T] packed into rows of at
    most `capacity` tokens (default: the longest segment or MIN_CAPACITY, whichever is
    larger); None when some row's attended response positions
    (response_mask ∨ observation_mask) are not a prefix of its row.

    Row b's segment is prompt_b + response_b[: n_b − 1], n_b its attended length: the
    query at segment offset len(prompt_b) − 1 + t predicts response token t, and is scored
    where response_mask[b, t] > 0."""
    B, T = response_ids.shape
    seen = response_mask > 0
    if observation_mask is not None:
        seen = seen | (observation_mask > 0)
    lengths = seen.sum(-1)
    prefix = torch.arange(T).unsqueeze(0) < lengths.unsqueeze(-1)
    if not torch.equal(seen, prefix):
        return None
    lengths = lengths.tolist()
    sizes = [len(p) + max(n - 1, 0) for p, n in zip(prompt_ids, lengths, strict=True)]
    width = capacity or max(max(sizes), MIN_CAPACITY)
    if width < max(sizes):
        raise ValueError(f"capacity={capacity} is below the longest segment ({max(sizes)})")
    # first fit, longest first: a handful of rows, each at most `width` tokens
    bins: list[list[int]] = []
    room: list[int] = []
    for b in sorted(range(B), key=lambda i: -sizes[i]):
        if lengths[b] == 0:  # nothing attended, nothing scored: no segment
            continue
        home = next((r for r, free in enumerate(room) if free >= sizes[b]), None)
        if home is None:
            bins.append([])
            room.append(width)
            home = len(bins) - 1
        bins[home].append(b)
        room[home] -= sizes[b]
    ids = torch.full((max(len(bins), 1), width), pad_id, dtype=torch.long)
    positions = torch.zeros_like(ids)
    query, rows, cols = [], [], []
    response = response_ids.tolist()
    scored = (response_mask > 0).tolist()
    for r, members in enumerate(bins):
        at = 0
        for b in members:
            p, n = prompt_ids[b], lengths[b]
            segment = list(p) + response[b][: n - 1]
            ids[r, at : at + len(segment)] = torch.tensor(segment)
            positions[r, at : at + len(segment)] = torch.arange(len(segment))
            for t in range(n):
                if scored[b][t]:
                    query.append(r * width + at + len(p) - 1 + t)
                    rows.append(b)
                    cols.append(t)
            at += len(segment)
        # the pad tail is a segment of its own (positions from 0): nothing real attends to it
        positions[r, at:] = torch.arange(width - at)
    rows_t, cols_t = torch.tensor(rows, dtype=torch.long), torch.tensor(cols, dtype=torch.long)
    return Packed(
        ids,
        positions,
        torch.tensor(query, dtype=torch.long),
        rows_t,
        cols_t,
        response_ids[rows_t, cols_t],
        (B, T),
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
    """models.py `response_forward` on a `Packed` batch: a `ResponseForward` of [B, T]
    tensors (0 wherever the response mask is 0), log-probs with gradient. The LM head
    (`model.get_output_embeddings()`) runs on the N scored positions only."""
    from policylab.models import ResponseForward

    device = next(model.parameters()).device
    home = home or torch.device("cpu")
    B, T = packed.shape
    ids, positions = packed.input_ids.to(device), packed.position_ids.to(device)
    query = packed.query.to(device)
    with autocast_for(model), checkpointing_for(model):
        # attention_mask=None: transformers builds the block-diagonal causal mask from the
        # position ids' restarts; logits_to_keep=1 keeps the full-width head off [R, C]
        output = model(
            input_ids=ids,
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

    out = ResponseForward(spread(logp[0]).to(home))
    if with_entropy:
        out.entropy = spread(entropy[0]).to(home)
    if with_hidden:
        out.hidden = spread(hidden)
    if with_head:
        out.head_input = (spread(hidden.detach().float()) / temperature).to(home)
        out.logits = (spread(logits.detach().float()) / temperature).to(home)
    return out
