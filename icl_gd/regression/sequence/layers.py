"""Causal layers over a sequence, each read at every position (von Oswald et al. 2023b, §2 and §5): linear
self-attention and the mesa layer, the layers whose constructions (``icl_gd.constructions.sequence``) run the
referees' GD step and ridge regression.

Tokens are the paper's constructed tokens with one slot for the prediction, e_t = (p_t, s_t, s_{t-1}) (D = 3d,
s_0 = 0), p_t the slot the layer writes its prediction of s_{t+1} into and the read-out reads back, as the authors'
code reads the first slot (src/train.py, ``calculate_loss``: ``logits[:, :, :obs_dim]``). Their tokens
(0, s_t, s_t, s_{t-1}) carry s_t twice (src/data/constr_data.py, ``ConstructedFullSeqGenerator``); once suffices.

- Causal linear self-attention: e_t ↦ e_t + Σ_h P_h Σ_{t'≤t} (W_V,h e_{t'}) (W_K,h e_{t'})ᵀ (W_Q,h e_t),
  every position t attending to itself and the positions before it; no softmax, no normalisation.
- The causal mesa layer: e_t ↦ e_t + P Φ_t (W_Q e_t), Φ_t = argmin_Φ ½ Σ_{t'≤t} ‖v_{t'} - Φ k_{t'}‖² + (λ/2)‖Φ‖²_F
  with k = W_K e, v = W_V e, by the Sherman-Morrison recurrence (``icl_gd.regression.online.mesa``).

Shapes: B sequences, T positions, d the sequence's width, D the token's, H heads, k key size.
"""

from __future__ import annotations

import torch
from torch import nn

from icl_gd.core.errors import ConfigError
from icl_gd.regression.lsa import LSAWeights
from icl_gd.regression.online.mesa import MesaWeights, mesa_fast_weights


def previous_states(inputs: torch.Tensor) -> torch.Tensor:
    """(B, T, d) s_{t-1} at every position t of inputs (B, T, d), s_0 = 0."""
    if inputs.ndim != 3:
        raise ConfigError(f"sequences are inputs (B, T, d), got {tuple(inputs.shape)}")
    return nn.functional.pad(inputs[:, :-1], (0, 0, 1, 0))


def pair_tokens(current: torch.Tensor, previous: torch.Tensor, initial: torch.Tensor | None = None) -> torch.Tensor:
    """(B, T, 3d) tokens e_t = (p_t, current_t, previous_t) from the pairs (B, T, d) each: the tokens of a sequence
    (``sequence_tokens``) or of its pairs in another order (``icl_gd.regression.sequence.order``)."""
    if current.ndim != 3 or previous.shape != current.shape:
        raise ConfigError(f"pairs are two tensors (B, T, d) of one shape, got {tuple(current.shape)} and "
                          f"{tuple(previous.shape)}")
    first = torch.zeros_like(current) if initial is None else initial.to(current)
    return torch.cat([first, current, previous.to(current)], dim=-1)


def sequence_tokens(inputs: torch.Tensor, initial: torch.Tensor | None = None) -> torch.Tensor:
    """(B, T, 3d) tokens e_t = (p_t, s_t, s_{t-1}) from inputs (B, T, d): s_0 = 0 and p_t = ``initial`` (B, T, d),
    zero when None."""
    if inputs.ndim != 3:
        raise ConfigError(f"sequence tokens are built from inputs (B, T, d), got {tuple(inputs.shape)}")
    return pair_tokens(inputs, previous_states(inputs), initial)


def read_prediction(tokens: torch.Tensor, d: int) -> torch.Tensor:
    """(B, T, d) the prediction slot p_t of every token (B, T, 3d): the prediction of s_{t+1}."""
    return tokens[..., :d]


def causal_mask(T: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """(T, T) True where position t (row) reads position t' (column): t' ≤ t."""
    return torch.ones(T, T, dtype=torch.bool, device=device).tril()


def causal_linear_attention(weights: LSAWeights, tokens: torch.Tensor) -> torch.Tensor:
    """One causal linear self-attention layer (module docstring) on tokens (B, T, D); weights W_Q, W_K, W_V
    (H, k, D), P (H, D, k), in the tokens' dtype and device."""
    w = weights.to(tokens.device, tokens.dtype)
    if tokens.ndim != 3 or tokens.shape[-1] != w.W_Q.shape[-1]:
        raise ConfigError(f"the layer reads tokens (B, T, {w.W_Q.shape[-1]}), got {tuple(tokens.shape)}")
    q, k, v = (torch.einsum("hkD,btD->bhtk", W, tokens) for W in (w.W_Q, w.W_K, w.W_V))
    scores = (q @ k.transpose(-1, -2)).masked_fill(~causal_mask(tokens.shape[1], tokens.device), 0.0)  # (B, H, T, T)
    return tokens + torch.einsum("hDk,bhtk->btD", w.P, scores @ v)


def causal_mesa(weights: MesaWeights, P: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """One causal mesa layer (module docstring) on tokens (B, T, D): W_Q, W_K (d_k, D), W_V (d_v, D), λ from
    ``weights``, the projection P (D, d_v)."""
    if tokens.ndim != 3 or tokens.shape[-1] != weights.W_K.shape[-1] or P.shape != (tokens.shape[-1],
                                                                                     weights.W_V.shape[0]):
        raise ConfigError(f"the mesa layer reads tokens (B, T, {weights.W_K.shape[-1]}) with P "
                          f"({weights.W_K.shape[-1]}, {weights.W_V.shape[0]}), got tokens {tuple(tokens.shape)} "
                          f"and P {tuple(P.shape)}")
    keys, values, queries = (tokens @ W.to(tokens).T for W in (weights.W_K, weights.W_V, weights.W_Q))
    phi = mesa_fast_weights(keys, values, weights.lam)[1:]  # (T, B, d_v, d_k): Φ_t after tokens 1..t
    read = torch.einsum("tbvk,btk->btv", phi, queries)
    return tokens + read @ P.to(tokens).T
