"""Order sensitivity: how much a predictor's answer moves when its context is read in another order.

A batch learner (one GD step on the whole context, least squares, ridge, an LSA layer) is a function of the set of
context pairs: permuting them leaves ŷ unchanged. An online learner (online GD, normalised LMS, the delta rule) sees
the pairs in order and weighs late ones more, so ŷ moves. For tokens (B, N+1, D), the query last, and P
permutations π_1..π_P drawn from ``seed`` (one per task and permutation, the query never moved):

    order sensitivity = (1/P) Σ_p mean_b ‖ŷ_b(π_p) - ŷ_b‖₁ / mean_b ‖ŷ_b‖₁,

the mean movement relative to the mean size of the predictions (0 for a batch learner, up to round-off).
"""

from __future__ import annotations

import torch

from icl_gd.core.config import require_positive_int
from icl_gd.regression.metrics import Predictor


def permuted_contexts(tokens: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """``tokens`` (B, N+1, D) with each task's N context tokens in a random order of its own (drawn from
    ``generator``), the query last."""
    B, T, _ = tokens.shape
    order = torch.argsort(torch.rand(B, T - 1, generator=generator), dim=1).to(tokens.device)  # (B, N)
    context = torch.gather(tokens[:, :-1], 1, order[..., None].expand(-1, -1, tokens.shape[-1]))
    return torch.cat([context, tokens[:, -1:]], dim=1)


def order_sensitivity(predictor: Predictor, tokens: torch.Tensor, n_permutations: int = 4, seed: int = 0) -> float:
    """The module docstring's order sensitivity of ``predictor`` (the one call) on ``tokens`` (B, N+1, D), over
    ``n_permutations`` permutations drawn from ``seed``."""
    require_positive_int("n_permutations", n_permutations)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        original = predictor(tokens).double()
        scale = original.abs().sum(-1).mean()
        moved = [(predictor(permuted_contexts(tokens, generator)).double() - original).abs().sum(-1).mean()
                 for _ in range(n_permutations)]
    return float(torch.stack(moved).mean() / scale)
