"""In a sequence, one causal linear self-attention layer is one GD step on the past pairs, and the mesa layer is
ridge regression on them, at every position (von Oswald et al. 2023b, Prop. 1 and §5); checked in float64 against
the referees of ``icl_gd.regression.sequence.referees``, which compute the same answers from prefix sums, never
from attention.

Tokens e_t = (p_t, s_t, s_{t-1}) (``sequence.layers.sequence_tokens``, D = 3d, s_0 = 0) and, written as blocks of
the three slots,

    W_Q = [0, I, 0],   W_K = [0, 0, I],   W_V = [0, I, -W0],   P = η [I; 0; 0]      (d × 3d; P 3d × d)

with the prediction slot started at p_t = W0 s_t: the query reads s_t, the key s_{t'-1}, the value
s_{t'} - W0 s_{t'-1}, and the layer writes into the prediction slot

    W0 s_t + η Σ_{t'≤t} (s_{t'} - W0 s_{t'-1}) s_{t'-1}ᵀ s_t = (W0 - η ∇L_t(W0)) s_t,
    L_t(W) = ½ Σ_{i<t} ‖s_{i+1} - W s_i‖²,

the pair t' = 1 having key s_0 = 0: one GD step with rate η from W0 on the pairs so far, read at s_t. W0 enters
through the prediction slot as Prop. 1's does through the query's y slot (``constructions/prop1.py``); with W0 = 0
the tokens are the authors' constructed tokens with the prediction slot at 0. The mesa layer with the same keys,
queries and projection and the values s_{t'} (W_V = [0, I, 0], λ > 0) holds Φ_t = ridge on the pairs i < t and
writes Φ_t s_t: the ridge referee's prediction.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from icl_gd.core.config import require_positive_int
from icl_gd.regression.lsa import LSAWeights
from icl_gd.regression.online.mesa import MesaWeights
from icl_gd.regression.sequence.layers import (causal_linear_attention, causal_mesa, read_prediction,
                                               sequence_tokens)
from icl_gd.regression.sequence.referees import GDReferee, RidgeReferee
from icl_gd.regression.sequence.tasks import LinearDynamicsTask
from icl_gd.regression.tasks import Stream

from icl_gd.constructions.delta_rule import compare_each, log_uniform
from icl_gd.constructions.verify import CheckResult, IdentityCheck, merge

F64 = torch.float64
Attention = Callable[[LSAWeights, torch.Tensor], torch.Tensor]
Mesa = Callable[[MesaWeights, torch.Tensor, torch.Tensor], torch.Tensor]


def _blocks(d: int, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """The d × d blocks 0 and I the weights are written in."""
    return torch.zeros(d, d, dtype=dtype), torch.eye(d, dtype=dtype)


def gd_step_weights(d: int, eta: float, W0: torch.Tensor | None = None, dtype: torch.dtype = F64) -> LSAWeights:
    """The module docstring's weights, one head, key size d: W_Q, W_K, W_V (1, d, 3d), P (1, 3d, d)."""
    require_positive_int("d", d)
    O, I = _blocks(d, dtype)
    W0 = O if W0 is None else W0.to(dtype)
    W_Q = torch.cat([O, I, O], dim=1)
    W_K = torch.cat([O, O, I], dim=1)
    W_V = torch.cat([O, I, -W0], dim=1)
    P = eta * torch.cat([I, O, O], dim=0)
    return LSAWeights(W_Q[None], W_K[None], W_V[None], P[None])


def gd_step_predictions(inputs: torch.Tensor, eta: float, W0: torch.Tensor | None = None,
                        attention: Attention = causal_linear_attention) -> torch.Tensor:
    """(B, T, d) the constructed layer's prediction of s_{t+1} at every position, from inputs (B, T, d)."""
    d = inputs.shape[-1]
    initial = None if W0 is None else inputs @ W0.to(inputs).T
    tokens = sequence_tokens(inputs, initial)
    return read_prediction(attention(gd_step_weights(d, eta, W0, inputs.dtype), tokens), d)


def ridge_mesa_weights(d: int, lam: float, dtype: torch.dtype = F64) -> tuple[MesaWeights, torch.Tensor]:
    """The mesa layer of ridge on the pairs: W_Q = [0, I, 0], W_K = [0, 0, I], W_V = [0, I, 0] (d, 3d), λ, and
    P = [I; 0; 0] (3d, d)."""
    require_positive_int("d", d)
    O, I = _blocks(d, dtype)
    weights = MesaWeights(W_Q=torch.cat([O, I, O], 1), W_K=torch.cat([O, O, I], 1), W_V=torch.cat([O, I, O], 1),
                          lam=lam)
    return weights, torch.cat([I, O, O], 0)


def mesa_predictions(inputs: torch.Tensor, lam: float, mesa: Mesa = causal_mesa) -> torch.Tensor:
    """(B, T, d) the constructed mesa layer's prediction of s_{t+1} at every position."""
    d = inputs.shape[-1]
    weights, P = ridge_mesa_weights(d, lam, inputs.dtype)
    return read_prediction(mesa(weights, P, sequence_tokens(inputs)), d)


# ---------------------------------------------------------------------------------------------------- checks
def random_sequences(seed: int, n_trials: int, dtype: torch.dtype = F64):
    """(trial, inputs (B, T, d), generator) for ``n_trials`` random sizes, B in [1, 8], T in [1, 24], d in [1, 8],
    entries N(0, 1): the identities hold for any sequence, not only for a dynamical system's."""
    gen = torch.Generator().manual_seed(seed)
    for trial in range(n_trials):
        B, T, d = (int(torch.randint(1, high, (), generator=gen)) for high in (9, 25, 9))
        yield trial, torch.randn(B, T, d, generator=gen, dtype=F64).to(dtype), gen


def authors_sequences(n_sequences: int = 16, dtype: torch.dtype = F64) -> torch.Tensor:
    """(B, 50, 10) test sequences of the authors' default task."""
    return LinearDynamicsTask().sample(n_sequences, seed=0, stream=Stream.TEST, dtype=dtype).inputs


GDFactory = Callable[[float, "torch.Tensor | None"], Callable[[torch.Tensor], torch.Tensor]]


def check_gd_step(seed: int = 61, n_trials: int = 24, dtype: torch.dtype = F64, tolerance: float = 1e-12,
                  attention: Attention = causal_linear_attention, referee: GDFactory = GDReferee) -> CheckResult:
    """The constructed layer's prediction at every position of every sequence against ``referee``(η, W0) (one GD
    step from prefix sums, in float64), relative per (sequence, position): random sizes with η log-uniform in
    [0.01, 0.5] and W0 N(0, 0.3²) in odd trials (0 in even ones), then the authors' task at η = 0.03."""
    cases = [(x, float(log_uniform(gen, (), 0.01, 0.5)), 0.3 * torch.randn(x.shape[-1], x.shape[-1], generator=gen,
                                                                            dtype=F64) if trial % 2 else None)
             for trial, x, gen in random_sequences(seed, n_trials, dtype)]
    cases.append((authors_sequences(dtype=dtype), 0.03, None))
    return merge([compare_each(gd_step_predictions(x, eta, W0, attention), referee(eta, W0)(x.to(F64)), tolerance)
                  for x, eta, W0 in cases])


def check_mesa_ridge(seed: int = 62, n_trials: int = 24, dtype: torch.dtype = F64, tolerance: float = 1e-12,
                     mesa: Mesa = causal_mesa, low: float = 0.3, high: float = 3.0) -> CheckResult:
    """The constructed mesa layer's prediction at every position against ``RidgeReferee`` (a direct solve per
    prefix, float64), relative per (sequence, position), λ log-uniform in [low, high] (the regularised Grams'
    condition numbers stay below about 100 in these draws)."""
    results = []
    for _, x, gen in random_sequences(seed, n_trials, dtype):
        lam = float(log_uniform(gen, (), low, high))
        results.append(compare_each(mesa_predictions(x, lam, mesa), RidgeReferee(lam)(x.to(F64)), tolerance))
    return merge(results)


def check_mesa_authors(dtype: torch.dtype = F64, tolerance: float = 1e-9, mesa: Mesa = causal_mesa) -> CheckResult:
    """The mesa layer at the authors' λ = 0.001 on their task (d = 10, T = 50) against ridge by a direct solve: the
    Gram is near singular until 10 pairs are in (condition numbers up to about 1e4), so the two orders of
    rounding differ by more than at λ ≥ 0.3."""
    x = authors_sequences(dtype=dtype)
    return compare_each(mesa_predictions(x, 1e-3, mesa), RidgeReferee(1e-3)(x.to(F64)), tolerance)


IDENTITY_CHECKS = (
    IdentityCheck("sequence: causal linear attention = one GD step from W0, every position", check_gd_step),
    IdentityCheck("sequence: causal mesa layer = ridge on the past pairs, every position", check_mesa_ridge),
    IdentityCheck("sequence: mesa layer = ridge at the authors' λ = 0.001, d = 10, T = 50", check_mesa_authors),
    # float32: relative 1e-4 per (sequence, position), about 800 float32 roundings; measured 3e-5 and 2e-5.
    IdentityCheck("sequence: float32 attention = one GD step (float64 referee)",
                  lambda: check_gd_step(dtype=torch.float32, tolerance=1e-4)),
    IdentityCheck("sequence: float32 mesa layer = ridge (float64 referee)",
                  lambda: check_mesa_ridge(dtype=torch.float32, tolerance=1e-4)),
)
