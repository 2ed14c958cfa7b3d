"""Models that see the inputs through a learned feature map m (von Oswald et al. 2023, Prop. 2, App. A.7-A.8).

- ``MLPFeatureMap``: m(x) = E x + W₂ σ(W₁ E x + b₁) + b₂, a token embedding followed by a residual MLP, applied to
  each token's input x alone.
- ``FeatureLSAModel``: each token (x, y) becomes (m(x), y) (the query (m(x_q), 0)), then an LSA stack reads
  ŷ = -(query's y slot). With the Prop. 1 weights on top this is one GD step on a linear read-out of m
  (Proposition 2, ``constructions/prop2.py``).
- ``MetaLearnedReadout``: the baseline; m and an initial read-out W₀ are meta-learned, and on each task the
  read-out takes one GD step of rate η on the context's features before predicting W₁ m(x_q).

- ``EmbeddedTokenLSAModel``: the authors' sine model: an embedding + residual MLP of **whole tokens** (x, y), one LSA
  layer, ŷ = minus the last coordinate; the frozen-attention baseline is the same model with the Prop. 1 layer
  (``icl_gd.constructions.prop2.frozen_gd_baseline``).

All answer the one predictor call: tokens (B, N+1, d_x + d_y) in the concatenated layout, ŷ (B, d_y) out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import torch
from torch import nn

from icl_gd.core.errors import ConfigError
from icl_gd.core.config import require_positive_ints
from icl_gd.regression.gd import gd_predict
from icl_gd.regression.lsa import LSAConfig, LSAModel, _truncated_normal

_ACTIVATIONS = {"relu": nn.ReLU, "gelu": nn.GELU, "tanh": nn.Tanh}


@dataclass(frozen=True)
class FeatureMapConfig:
    """m: R^d_x -> R^d_features; ``hidden`` is the MLP's hidden width (0: the embedding alone)."""

    d_x: int = 1
    d_features: int = 40
    hidden: int = 160
    activation: Literal["relu", "gelu", "tanh"] = "gelu"

    def __post_init__(self) -> None:
        require_positive_ints(self, "d_x", "d_features")
        if not isinstance(self.hidden, int) or self.hidden < 0:
            raise ConfigError(f"hidden must be a non-negative integer, got {self.hidden!r}")
        if self.activation not in _ACTIVATIONS:
            raise ConfigError(f"activation {self.activation!r} is not one of {', '.join(_ACTIVATIONS)}")


class MLPFeatureMap(nn.Module):
    """m(x) = z + W₂ σ(W₁ z + b₁) + b₂ with z = E x: (..., d_x) -> (..., d_features)."""

    def __init__(self, config: FeatureMapConfig, generator: torch.Generator | None = None) -> None:
        super().__init__()
        self.config = config
        gen = generator if generator is not None else torch.Generator().manual_seed(0)
        self.embed = nn.Linear(config.d_x, config.d_features, bias=False)
        self.mlp = (
            nn.Sequential(nn.Linear(config.d_features, config.hidden), _ACTIVATIONS[config.activation](),
                          nn.Linear(config.hidden, config.d_features))
            if config.hidden > 0 else None
        )
        with torch.no_grad():  # PyTorch's default (Kaiming-uniform) law, drawn from our generator
            for module in self.modules():
                if isinstance(module, nn.Linear):
                    bound = 1.0 / module.in_features ** 0.5
                    module.weight.uniform_(-bound, bound, generator=gen)
                    if module.bias is not None:
                        module.bias.uniform_(-bound, bound, generator=gen)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = self.embed(x)
        return z if self.mlp is None else z + self.mlp(z)


class FeatureLSAModel(nn.Module):
    """Tokens (x, y) -> (m(x), y), then ``lsa``; ŷ = -(last token's y slot). ``W0`` (d_y, d_f), if given,
    starts the query's y slot at -W₀ m(x_q) (Prop. 1 from a non-zero initial read-out); with ``learn_W0`` it is
    a trained parameter (the query's embedding then carries an initial prediction, as the authors' embedding +
    MLP on whole tokens can), otherwise a fixed buffer."""

    def __init__(self, feature_map: nn.Module, lsa: LSAModel, d_x: int, W0: torch.Tensor | None = None,
                 learn_W0: bool = False) -> None:
        super().__init__()
        self.feature_map = feature_map
        self.lsa = lsa
        self.d_x = d_x
        if learn_W0:
            if W0 is None:
                raise ConfigError("learn_W0 needs an initial W0")
            self.W0 = nn.Parameter(W0.clone())
        else:
            self.register_buffer("W0", None if W0 is None else W0.clone())

    def feature_tokens(self, tokens: torch.Tensor) -> torch.Tensor:
        """(B, T, d_f + d_y) tokens (m(x_i), y_i) from tokens (B, T, d_x + d_y)."""
        x, y = tokens[..., : self.d_x], tokens[..., self.d_x :]
        features = self.feature_map(x)
        if self.W0 is not None:
            y = torch.cat([y[:, :-1], -(features[:, -1:] @ self.W0.T)], dim=1)
        return torch.cat([features, y], dim=-1)

    def forward(self, tokens: torch.Tensor, return_tokens: bool = False):
        return self.lsa(self.feature_tokens(tokens), return_tokens=return_tokens)


def feature_lsa_model(features: FeatureMapConfig, d_y: int = 1, seed: int = 0, init_scale: float = 0.002,
                      initial_readout: bool = True) -> FeatureLSAModel:
    """A trainable embedding+MLP followed by one LSA layer (the authors' small-variance LSA init); with
    ``initial_readout`` the query's y slot starts at -W₀ m(x_q), W₀ trained from zero."""
    gen = torch.Generator().manual_seed(seed)
    lsa = LSAModel(LSAConfig(d_model=features.d_features + d_y, d_y=d_y, init_scale=init_scale), seed=seed + 1)
    W0 = torch.zeros(d_y, features.d_features) if initial_readout else None
    return FeatureLSAModel(MLPFeatureMap(features, gen), lsa, features.d_x, W0=W0, learn_W0=initial_readout)


class MetaLearnedReadout(nn.Module):
    """ŷ = W₁ m(x_q), W₁ = W₀ - η ∇L(W₀), L(W) = 1/(2N) Σ_i ‖W m(x_i) - y_i‖²; m, W₀ and η are meta-learned."""

    def __init__(self, features: FeatureMapConfig, d_y: int = 1, eta: float = 1.0, seed: int = 0) -> None:
        super().__init__()
        gen = torch.Generator().manual_seed(seed)
        self.d_x = features.d_x
        self.feature_map = MLPFeatureMap(features, gen)
        self.W0 = nn.Parameter(torch.zeros(d_y, features.d_features))
        self.eta = nn.Parameter(torch.tensor(float(eta)))

    def features(self, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(m(x_i) (B, N, d_f), y_i (B, N, d_y), m(x_q) (B, d_f)) from tokens (B, N+1, d_x + d_y)."""
        m = self.feature_map(tokens[..., : self.d_x])
        return m[:, :-1], tokens[:, :-1, self.d_x :], m[:, -1]

    def predict(self, tokens: torch.Tensor, eta: float | torch.Tensor) -> torch.Tensor:
        """ŷ (B, d_y) after one GD step of rate ``eta`` on the read-out."""
        m_ctx, y_ctx, m_q = self.features(tokens)
        eta = eta if isinstance(eta, torch.Tensor) else torch.tensor(float(eta), dtype=m_q.dtype)
        return gd_predict(m_ctx, y_ctx, m_q, eta.reshape(1), self.W0)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.predict(tokens, self.eta)


# ---------------------------------------------------------------------------------------------------- whole tokens
class TokenEmbeddingMLP(nn.Module):
    """The authors' input map on **whole tokens** (y included): e = E t (no bias), then
    e <- e + W₂ σ(W₁ e + b₁) + b₂: tokens (..., d_in) -> (..., width). Init as theirs: truncated normal of variance ``init_scale`` / fan_in,
    biases zero."""

    def __init__(self, d_in: int, width: int, hidden: int, activation: str = "gelu", init_scale: float = 0.002,
                 generator: torch.Generator | None = None) -> None:
        super().__init__()
        if min(d_in, width, hidden) <= 0:
            raise ConfigError(f"sizes must be positive, got d_in={d_in}, width={width}, hidden={hidden}")
        if activation not in _ACTIVATIONS:
            raise ConfigError(f"activation {activation!r} is not one of {', '.join(_ACTIVATIONS)}")
        gen = generator if generator is not None else torch.Generator().manual_seed(0)
        self.embed = nn.Linear(d_in, width, bias=False)
        self.mlp = nn.Sequential(nn.Linear(width, hidden), _ACTIVATIONS[activation](), nn.Linear(hidden, width))
        with torch.no_grad():
            for module in self.modules():
                if isinstance(module, nn.Linear):
                    module.weight.copy_(_truncated_normal(module.weight.shape, module.in_features, init_scale, gen))
                    if module.bias is not None:
                        module.bias.zero_()

    def authors_baseline_init_(self, generator: torch.Generator) -> "TokenEmbeddingMLP":
        """Re-draw the weights as the authors' sine *baseline* starts (their ``create_weights`` with an input MLP),
        not as their trained model: plain normals, E and W₁ of variance 0.002 / d_in (the token's fan-in, theirs 2,
        for both), W₂ of variance 0.002 / width (theirs 40), zero biases. At 2 -> 40 -> 160 that makes W₁ 4.5x and
        W₂ 2x the trained model's std."""
        d_in, width = self.embed.in_features, self.embed.out_features
        with torch.no_grad():
            for weight, variance in ((self.embed.weight, 0.002 / d_in), (self.mlp[0].weight, 0.002 / d_in),
                                     (self.mlp[2].weight, 0.002 / width)):
                weight.copy_(torch.randn(weight.shape, generator=generator, dtype=weight.dtype) * math.sqrt(variance))
            self.mlp[0].bias.zero_()
            self.mlp[2].bias.zero_()
        return self

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        e = self.embed(tokens)
        return e + self.mlp(e)


class EmbeddedTokenLSAModel(nn.Module):
    """Tokens (B, T, d_in) -> ``embedding`` of every token (B, T, D) -> ``lsa`` (an ``LSAModel`` of width D, d_y = 1):
    ŷ (B, 1) is minus the query's **last coordinate** after the layers (the authors' sine model)."""

    def __init__(self, embedding: TokenEmbeddingMLP, lsa: LSAModel) -> None:
        super().__init__()
        if lsa.config.d_y != 1:
            raise ConfigError(f"the read-out is one coordinate, the LSA model has d_y = {lsa.config.d_y}")
        self.embedding = embedding
        self.lsa = lsa

    def forward(self, tokens: torch.Tensor, return_tokens: bool = False):
        return self.lsa(self.embedding(tokens), return_tokens=return_tokens)


def embedded_token_lsa_model(width: int, hidden: int, d_in: int = 2, activation: str = "gelu", seed: int = 0,
                             init_scale: float = 0.002) -> EmbeddedTokenLSAModel:
    """The authors' sine model: embedding + residual MLP on whole tokens, one LSA layer (key size = width)."""
    gen = torch.Generator().manual_seed(seed)
    embedding = TokenEmbeddingMLP(d_in, width, hidden, activation, init_scale, gen)
    lsa = LSAModel(LSAConfig(d_model=width, d_y=1, init_scale=init_scale), seed=seed + 1)
    return EmbeddedTokenLSAModel(embedding, lsa)
