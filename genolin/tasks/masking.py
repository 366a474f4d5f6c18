"""Masked-token prediction: a self-supervised term any task can add to its training loss (``mlm_weight`` > 0).

    mask_tokens:        ids (B, N), mask (B, N) -> corrupted ids (B, N), chosen (B, N) bool
    masked_token_loss:  hidden (B, N, d) of the corrupted ids, the embedding table (V, d), ids (B, N), chosen
                        -> mean cross-entropy of the original k-mer at the chosen tokens (scalar)

Chosen tokens come in spans of ceil(k / stride) tokens (each started with probability ``prob / span`` at a real
k-mer token), so an overlapping k-mer cannot be read off its neighbours (DNABERT masks k contiguous tokens for
the same reason). As in BERT, 80 % of the chosen tokens become [MASK], 10 % a random k-mer, 10 % stay as they
are. The classifier and track heads see the corrupted ids in the same forward pass (masking doubles as input
noise); validation and prediction never mask. The prediction head is the embedding table itself (logits = hidden
x E^T over the 4^k k-mer rows), so a run adds no weights and its checkpoints keep their shape.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from genolin.tokenize import MASK, N_SPECIAL


def mask_tokens(ids: torch.Tensor, mask: torch.Tensor, prob: float, *, k: int, stride: int,
                generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(corrupted ids, chosen): spans of ceil(k / stride) tokens started at real k-mer tokens with probability
    prob / span; chosen tokens are real k-mers only (never padding or [UNK])."""
    kmer = mask & (ids >= N_SPECIAL)
    span = max(1, math.ceil(k / stride))
    draw = torch.rand(ids.shape, device=ids.device, generator=generator)
    starts = (draw < prob / span) & kmer
    if span > 1:  # a start at j covers j .. j + span - 1
        starts = F.max_pool1d(F.pad(starts.float(), (span - 1, 0)).unsqueeze(1), span, stride=1).squeeze(1) > 0
    chosen = starts & kmer
    how = torch.rand(ids.shape, device=ids.device, generator=generator)
    n_kmers = 4**k
    random_kmers = N_SPECIAL + torch.randint(0, n_kmers, ids.shape, device=ids.device, generator=generator)
    corrupted = torch.where(chosen & (how < 0.8), torch.full_like(ids, MASK), ids)
    corrupted = torch.where(chosen & (how >= 0.8) & (how < 0.9), random_kmers, corrupted)
    return corrupted, chosen


def masked_token_loss(hidden: torch.Tensor, embedding: torch.Tensor, ids: torch.Tensor, chosen: torch.Tensor
                      ) -> torch.Tensor:
    """Cross-entropy of the original k-mers at the chosen tokens, logits = hidden x E[k-mers]^T; 0 (with a
    gradient path) when nothing was chosen."""
    if not bool(chosen.any()):
        return hidden.sum() * 0.0
    h = hidden[chosen].float()  # (M, d)
    logits = h @ embedding[N_SPECIAL:].float().T  # (M, 4^k)
    return F.cross_entropy(logits, ids[chosen] - N_SPECIAL)


__all__ = ["mask_tokens", "masked_token_loss"]
