"""Trainable fast-weight layers: the delta rule (``icl_gd.regression.online.delta_rule``) and the mesa layer
(``icl_gd.regression.online.mesa``) with every projection, the writing strength β, the decay α and the regulariser λ as
parameters. Each module builds the library's frozen weights from its parameters at every call and runs the library's
layer on them, so a trained module is the layer of its ``weights()`` exactly, and the constructions
(``icl_gd.constructions.delta_rule``, ``icl_gd.constructions.mesa``) are points of the same parameter space.

β, α and λ are one learned number each, the same at every token: a learned constant step size (β = exp b), a decay
α = sigmoid(a) in (0, 1) and λ = exp l. Shapes: B tasks, N context tokens, D token width (d + d_y), d_k key width,
d_v value width (the prediction's, d_y); tokens (B, N+1, D), the query last, -> ŷ (B, d_v).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Literal

import torch
from torch import nn

from icl_gd.core.config import require_open_unit, require_positive, require_positive_int
from icl_gd.regression.online.delta_rule import DeltaRuleLayer, DeltaRuleWeights
from icl_gd.regression.online.mesa import MesaLayer, MesaWeights


def _projection(generator: torch.Generator, rows: int, columns: int, scale: float) -> nn.Parameter:
    """A (rows, columns) parameter with i.i.d. N(0, scale² / columns) entries."""
    return nn.Parameter(torch.randn(rows, columns, generator=generator) * (scale / math.sqrt(columns)))


class LearnedDeltaRule(nn.Module):
    """The delta rule S ← S + β (v - S k) kᵀ (one write per token, no decay) with learned W_Q, W_K (d_k, D),
    W_V (d_v, D) and step size β; ``normalise`` as ``DeltaRuleWeights``'s ("pair": normalised LMS's write).
    Initialised from ``seed``: projections N(0, init_scale² / D), β = ``beta``."""

    def __init__(self, d_model: int, d_k: int, d_v: int, seed: int, normalise: Literal["none", "keys", "pair"] = "none",
                 beta: float = 0.1, init_scale: float = 1.0) -> None:
        super().__init__()
        for name, value in (("d_model", d_model), ("d_k", d_k), ("d_v", d_v)):
            require_positive_int(name, value)
        require_positive("the initial step size β", beta)
        require_positive("init_scale", init_scale)
        gen = torch.Generator().manual_seed(seed)
        self.W_Q = _projection(gen, d_k, d_model, init_scale)
        self.W_K = _projection(gen, d_k, d_model, init_scale)
        self.W_V = _projection(gen, d_v, d_model, init_scale)
        self.log_beta = nn.Parameter(torch.tensor(math.log(beta)))
        self.normalise = normalise

    @property
    def beta(self) -> torch.Tensor:
        return self.log_beta.exp()

    def decay(self) -> torch.Tensor | float:
        """α, the decay per token: 1 (none) here."""
        return 1.0

    def weights(self) -> DeltaRuleWeights:
        """The layer's weights (differentiable in the parameters): W_K and W_V with one write (n_h = 1)."""
        return DeltaRuleWeights(W_Q=self.W_Q, W_K=self.W_K[None], W_V=self.W_V[None], beta=self.beta,
                                alpha=self.decay(), normalise=self.normalise)

    def predictions_per_token(self, tokens: torch.Tensor) -> torch.Tensor:
        """(N+1, B, d_v) read-outs S_t q after t = 0..N context tokens."""
        return DeltaRuleLayer(self.weights()).predictions_per_token(tokens)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return DeltaRuleLayer(self.weights())(tokens)


class LearnedGatedDeltaRule(LearnedDeltaRule):
    """Gated DeltaNet's write S ← α S, then S ← S + β (v - S k) kᵀ, with a learned decay α = sigmoid(a) besides
    ``LearnedDeltaRule``'s parameters; initialised at α = ``alpha``."""

    def __init__(self, d_model: int, d_k: int, d_v: int, seed: int, beta: float = 0.1, alpha: float = 0.95,
                 init_scale: float = 1.0) -> None:
        super().__init__(d_model, d_k, d_v, seed, "none", beta, init_scale)
        require_open_unit("the initial decay α", alpha)
        self.decay_logit = nn.Parameter(torch.tensor(math.log(alpha / (1 - alpha))))

    def decay(self) -> torch.Tensor:
        return torch.sigmoid(self.decay_logit)


class LearnedMesa(nn.Module):
    """The mesa layer Φ_t = (Σ v kᵀ)(Σ k kᵀ + λ I)⁻¹ with learned W_Q, W_K (d_k, D), W_V (d_v, D) and regulariser
    λ = exp l; initialised from ``seed`` (projections N(0, init_scale² / D), λ = ``lam``)."""

    def __init__(self, d_model: int, d_k: int, d_v: int, seed: int, lam: float = 1.0, init_scale: float = 1.0
                 ) -> None:
        super().__init__()
        for name, value in (("d_model", d_model), ("d_k", d_k), ("d_v", d_v)):
            require_positive_int(name, value)
        require_positive("the initial regulariser λ", lam)
        gen = torch.Generator().manual_seed(seed)
        self.W_Q = _projection(gen, d_k, d_model, init_scale)
        self.W_K = _projection(gen, d_k, d_model, init_scale)
        self.W_V = _projection(gen, d_v, d_model, init_scale)
        self.log_lam = nn.Parameter(torch.tensor(math.log(lam)))

    @property
    def lam(self) -> torch.Tensor:
        return self.log_lam.exp()

    def weights(self) -> MesaWeights:
        """The layer's weights, differentiable in the parameters (λ a 0-d tensor)."""
        return MesaWeights(W_Q=self.W_Q, W_K=self.W_K, W_V=self.W_V, lam=self.lam)

    def predictions_per_token(self, tokens: torch.Tensor) -> torch.Tensor:
        """(N+1, B, d_v) read-outs Φ_t q after t = 0..N context tokens."""
        with _checked_in_the_graph():
            return MesaLayer(self.weights()).predictions_per_token(tokens)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        with _checked_in_the_graph():
            return MesaLayer(self.weights())(tokens)


@contextmanager
def _checked_in_the_graph() -> Iterator[None]:
    """The mesa layer checks λ > 0 as a number; λ here is a 0-d tensor in the autograd graph, whose reading torch
    warns about (the check reads its value, never its gradient)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Converting a tensor with requires_grad=True to a scalar")
        yield
