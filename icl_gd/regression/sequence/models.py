"""Trainable causal models of a sequence (von Oswald et al. 2023b, §3-§5), each answering the referees' call, inputs
(B, T, d) -> predictions (B, T, d) of the next token, prediction t from s_1..s_t only:

- ``CausalLSAStack``: L layers of causal linear self-attention (``layers.causal_linear_attention``, H heads of key
  size k) on the tokens e_t = (p_t, s_t, s_{t-1}), no MLP, no normalisation; the prediction slot starts at
  p_t = A s_t with A (d, d) learned (``initial=True``), the W0 of one GD step (``constructions/sequence.py``);
- ``CausalMesaModel``: one causal mesa layer (``layers.causal_mesa``) with learned projections and λ = exp l;
- ``SoftmaxTransformer``: a small causal softmax Transformer (pre-LayerNorm blocks with an MLP) on a linear
  embedding of (s_t, s_{t-1}), read out linearly.

Each model also reads a sequence as its pairs, ``from_pairs(current, previous)`` with (s_t, s_{t-1}) at position t
(``forward(inputs)`` is ``from_pairs(inputs, s_{t-1})``): the pairs in another order measure its order sensitivity
(``icl_gd.regression.sequence.order``).

Initial weights are N(0, init_scale² / D) from ``seed`` (the authors draw N(0, 0.0002²); ours are larger so that
the default budget trains). Shapes: B sequences, T positions, d the sequence's width, D = 3d the token's.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from icl_gd.core.config import require_positive, require_positive_int
from icl_gd.regression.lsa import LSAWeights
from icl_gd.regression.online.mesa import MesaWeights
from icl_gd.regression.sequence.layers import (causal_linear_attention, causal_mask, causal_mesa, pair_tokens,
                                               previous_states, read_prediction)


def _normal(gen: torch.Generator, *shape: int, std: float) -> nn.Parameter:
    return nn.Parameter(std * torch.randn(*shape, generator=gen))


class CausalLSAStack(nn.Module):
    """L causal linear self-attention layers, W_Q, W_K, W_V (L, H, k, D), P (L, H, D, k), and A (d, d) the prediction
    slot's start (zero, and learned where ``initial``)."""

    def __init__(self, d: int, layers: int, heads: int, key_size: int, seed: int, init_scale: float = 1.0,
                 initial: bool = True) -> None:
        super().__init__()
        for name, value in (("d", d), ("layers", layers), ("heads", heads), ("key_size", key_size)):
            require_positive_int(name, value)
        require_positive("init_scale", init_scale)
        gen, D = torch.Generator().manual_seed(seed), 3 * d
        std = init_scale / math.sqrt(D)
        self.d = d
        self.W_Q, self.W_K, self.W_V = (_normal(gen, layers, heads, key_size, D, std=std) for _ in range(3))
        self.P = _normal(gen, layers, heads, D, key_size, std=std)
        self.A = nn.Parameter(torch.zeros(d, d)) if initial else None

    @property
    def n_layers(self) -> int:
        return self.W_Q.shape[0]

    def layer(self, index: int) -> LSAWeights:
        """Layer ``index``'s weights (differentiable)."""
        return LSAWeights(self.W_Q[index], self.W_K[index], self.W_V[index], self.P[index])

    def tokens(self, inputs: torch.Tensor, previous: torch.Tensor | None = None) -> torch.Tensor:
        """(B, T, 3d) the input tokens (p_t, s_t, s_{t-1}), p_t = A s_t; ``previous`` (B, T, d) the s_{t-1} of each
        position (None: those of the sequence ``inputs``)."""
        previous = previous_states(inputs) if previous is None else previous
        return pair_tokens(inputs, previous, None if self.A is None else inputs @ self.A.to(inputs).T)

    def residual_stream(self, inputs: torch.Tensor, previous: torch.Tensor | None = None) -> list[torch.Tensor]:
        """[tokens, after layer 1, ..., after layer L], each (B, T, 3d)."""
        streams = [self.tokens(inputs, previous)]
        for index in range(self.n_layers):
            streams.append(causal_linear_attention(self.layer(index), streams[-1]))
        return streams

    def from_pairs(self, current: torch.Tensor, previous: torch.Tensor) -> torch.Tensor:
        """(B, T, d) predictions from the pairs (s_t, s_{t-1}) at each position (module docstring)."""
        return read_prediction(self.residual_stream(current, previous)[-1], self.d)

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        return self.from_pairs(inputs, previous_states(inputs))


class CausalMesaModel(nn.Module):
    """One causal mesa layer: W_Q, W_K (k, D), W_V (k, D), P (D, k), λ = exp(log_lam), A (d, d) as above."""

    def __init__(self, d: int, key_size: int, seed: int, lam: float = 1.0, init_scale: float = 1.0) -> None:
        super().__init__()
        require_positive_int("d", d)
        require_positive_int("key_size", key_size)
        require_positive("the initial regulariser λ", lam)
        gen, D = torch.Generator().manual_seed(seed), 3 * d
        std = init_scale / math.sqrt(D)
        self.d = d
        self.W_Q, self.W_K, self.W_V = (_normal(gen, key_size, D, std=std) for _ in range(3))
        self.P = _normal(gen, D, key_size, std=std)
        self.log_lam = nn.Parameter(torch.tensor(math.log(lam)))
        self.A = nn.Parameter(torch.zeros(d, d))

    @property
    def lam(self) -> torch.Tensor:
        return self.log_lam.exp()

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        return self.from_pairs(inputs, previous_states(inputs))

    def from_pairs(self, current: torch.Tensor, previous: torch.Tensor) -> torch.Tensor:
        """(B, T, d) predictions from the pairs (s_t, s_{t-1}) at each position (module docstring)."""
        import warnings

        tokens = pair_tokens(current, previous, current @ self.A.to(current).T)
        with warnings.catch_warnings():  # MesaWeights checks λ > 0 as a number; here λ is in the autograd graph
            warnings.filterwarnings("ignore", message="Converting a tensor with requires_grad=True to a scalar")
            weights = MesaWeights(self.W_Q, self.W_K, self.W_V, self.lam)
            return read_prediction(causal_mesa(weights, self.P, tokens), self.d)


class SoftmaxTransformer(nn.Module):
    """``layers`` pre-LayerNorm blocks (causal softmax attention with ``heads`` heads, MLP of width 4 · ``width``)
    on x_t = E (s_t, s_{t-1}) (E (width, 2d)), read out by R (d, width); no positional encoding (the causal mask
    orders the tokens)."""

    def __init__(self, d: int, width: int, heads: int, layers: int, seed: int) -> None:
        super().__init__()
        for name, value in (("d", d), ("width", width), ("heads", heads), ("layers", layers)):
            require_positive_int(name, value)
        with torch.random.fork_rng(devices=[]):  # torch's initialisers draw from the global generator: seed a copy
            torch.manual_seed(seed)
            self.embed = nn.Linear(2 * d, width)
            block = nn.TransformerEncoderLayer(width, heads, 4 * width, dropout=0.0, batch_first=True,
                                               norm_first=True)
            self.blocks = nn.TransformerEncoder(block, layers, enable_nested_tensor=False)
            self.readout = nn.Linear(width, d)

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        return self.from_pairs(inputs, previous_states(inputs))

    def from_pairs(self, current: torch.Tensor, previous: torch.Tensor) -> torch.Tensor:
        """(B, T, d) predictions from the pairs (s_t, s_{t-1}) at each position (module docstring)."""
        x = self.embed(torch.cat([current, previous.to(current)], dim=-1))
        mask = ~causal_mask(current.shape[1], current.device)  # True: not attended
        return self.readout(self.blocks(x, mask=mask, is_causal=True))
