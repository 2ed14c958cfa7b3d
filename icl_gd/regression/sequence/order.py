"""Order sensitivity in a sequence: how much a causal model's last prediction moves when the pairs it has read come
in another order, measured as the online layers measure it (``icl_gd.regression.online.order``).

A sequence's order is its content: permuting the states s_t makes other pairs (s_i, s_{i+1}), another regression
problem. What can be permuted is the pairs themselves. Every token the models and referees read holds one pair,
(s_t, s_{t-1}) at position t (s_0 = 0), so a sequence is read as its pairs (``from_pairs(current, previous)``) and
the pairs of positions 1..T-1 are put in a random order of each sequence's own, position T (the query s_T with its
own pair) kept last. A learner that fits the set of pairs (least squares, ridge, one GD step from W0, the mesa layer,
one causal linear-attention layer: a sum over the positions) answers at T as before, up to round-off; online GD
reads the pairs in order and moves; a deeper causal stack moves too, since a token's state after its first layer
depends on the positions before it. For P permutations drawn from ``seed``:

    order sensitivity = (1/P) Σ_p mean_b ‖ŝ_b(π_p) - ŝ_b‖₁ / mean_b ‖ŝ_b‖₁,   ŝ the prediction at position T.

Shapes: B sequences, T positions, d the width.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from icl_gd.core.config import require_positive_int
from icl_gd.core.errors import ConfigError
from icl_gd.regression.online.order import order_sensitivity as online_order_sensitivity
from icl_gd.regression.online.order import permuted_contexts
from icl_gd.regression.sequence.layers import previous_states

PairPredictor = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]  # (current, previous) (B, T, d) -> (B, T, d)


def permuted_pairs(current: torch.Tensor, previous: torch.Tensor, generator: torch.Generator
                   ) -> tuple[torch.Tensor, torch.Tensor]:
    """The pairs (B, T, d) each with positions 1..T-1 of each sequence in a random order of its own (drawn from
    ``generator``, on the CPU), position T kept last; a pair's two states move together (the online layers'
    ``permuted_contexts`` on the tokens (current, previous))."""
    d = current.shape[-1]
    moved = permuted_contexts(torch.cat([current, previous], dim=-1), generator)
    return moved[..., :d], moved[..., d:]


def order_sensitivity(from_pairs: PairPredictor, inputs: torch.Tensor, n_permutations: int = 4,
                      seed: int = 0) -> float:
    """The module docstring's order sensitivity of ``from_pairs`` on the sequences ``inputs`` (B, T, d), T ≥ 3
    (two pairs to swap before the last), over ``n_permutations`` permutations drawn from ``seed``: the online layers'
    measure (``icl_gd.regression.online.order``) on the tokens (current, previous), read at the last position."""
    require_positive_int("n_permutations", n_permutations)
    if inputs.ndim != 3 or inputs.shape[1] < 3:
        raise ConfigError(f"order sensitivity reads sequences (B, T, d) with T ≥ 3, got {tuple(inputs.shape)}")
    d = inputs.shape[-1]

    def last_prediction(tokens: torch.Tensor) -> torch.Tensor:
        return from_pairs(tokens[..., :d], tokens[..., d:])[:, -1]

    tokens = torch.cat([inputs, previous_states(inputs)], dim=-1)
    with torch.no_grad():
        original = last_prediction(tokens)
    if not torch.isfinite(original).all() or original.abs().sum() == 0:
        raise ConfigError("order sensitivity needs finite predictions that are not all zero at the last position")
    return online_order_sensitivity(last_prediction, tokens, n_permutations, seed)
