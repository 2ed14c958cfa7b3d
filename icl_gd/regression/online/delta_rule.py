"""The delta rule: a fast-weight layer that learns while it reads (Schlag, Irie & Schmidhuber 2021, "Linear
Transformers Are Secretly Fast Weight Programmers"), in DeltaNet's form (Yang et al. 2024), with Gated DeltaNet's
decay (Yang, Kautz & Hatamizadeh 2024) and DeltaProduct's several writes per token (Siems et al. 2025).

The layer projects every context token e_t (D) to n_h keys k_{t,j} = W_K,j e_t (d_k) and values v_{t,j} = W_V,j e_t
(d_v), optionally normalised (``normalise``: "keys", k / ‖k‖ as DeltaNet does; "pair", k / ‖k‖ and v / ‖k‖, the
write of normalised LMS), and writes them into a fast-weight matrix S (d_v, d_k), S_0 = 0:

    S ← α_t S,   then for j = 1..n_h:   S ← S + β_{t,j} (v_{t,j} - S k_{t,j}) k_{t,j}ᵀ.

- n_h = 1, α = 1: DeltaNet's S_t = S_{t-1} + β_t (v_t - S_{t-1} k_t) k_tᵀ.
- n_h = 1: Gated DeltaNet's S_t = S_{t-1} α_t (I - β_t k_t k_tᵀ) + β_t v_t k_tᵀ, that is
  S_t = α_t S_{t-1} + β_t (v_t - α_t S_{t-1} k_t) k_tᵀ: the decay comes first and the write corrects the decayed state.
- α = 1, n_h > 1: DeltaProduct, n_h delta steps per token, each on its own key and value, each step from the state
  the previous one left (a product of n_h generalised Householder matrices). With α < 1 as well, this module
  decays once per token, before its n_h steps.
- Normalising the pair makes a write S + (β / ‖k‖²)(v - S k) kᵀ, normalised LMS's step; normalising the keys
  alone makes it S + β (v - S k̂) k̂ᵀ, k̂ = k / ‖k‖: plain LMS on the unit-norm keys, which on the raw keys is
  normalised LMS on the values ‖k‖ v, a different learner.

The last token is the query: it reads ŷ = S_N q, q = W_Q e_{N+1} (d_k), and writes nothing, so the layer answers
the call of every predictor (tokens (B, N+1, D) in, ŷ (B, d_v) out). A language model's layer reads o_t = S_t q_t at
every position; here only the query reads. β and α are given (per write (n_h,), or per token and write (N, n_h);
α per token (N,)), where DeltaNet and Gated DeltaNet compute them from the token.

The dual form (``delta_rule_dual``): unrolled, the state is a sum of outer products of the keys with the write
errors e_{t,j} = v_{t,j} - S k_{t,j} (S the state just before the write), so the read-out is attention over every
written key with the errors as values, unnormalised:

    S_N q = Σ_{t,j} (Π_{s>t} α_s) β_{t,j} e_{t,j} (k_{t,j}ᵀ q),

and each error is its value minus the same attention of its own key over the earlier errors, a unit lower-triangular
system (the representation DeltaNet's parallel form builds on). Shapes: B tasks, N context tokens, D token width.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
from torch import nn

from icl_gd.core.errors import ConfigError
from icl_gd.regression.online.algorithms import schedule


@dataclass(frozen=True)
class DeltaRuleWeights:
    """W_Q (d_k, D); W_K (n_h, d_k, D); W_V (n_h, d_v, D); ``beta``, the writing strengths, broadcastable to
    (N, n_h); ``alpha``, the decay in [0, 1], broadcastable to (N,); ``normalise``: "none", "keys" (k / ‖k‖) or
    "pair" (k / ‖k‖ and v / ‖k‖); the query is never normalised."""

    W_Q: torch.Tensor
    W_K: torch.Tensor
    W_V: torch.Tensor
    beta: torch.Tensor | float
    alpha: torch.Tensor | float = 1.0
    normalise: Literal["none", "keys", "pair"] = "none"

    def __post_init__(self) -> None:
        if self.normalise not in ("none", "keys", "pair"):
            raise ConfigError(f"normalise must be 'none', 'keys' or 'pair', got {self.normalise!r}")
        if self.W_K.ndim != 3 or self.W_V.ndim != 3 or self.W_Q.ndim != 2:
            raise ConfigError(f"delta-rule weights need W_Q (d_k, D), W_K (n_h, d_k, D), W_V (n_h, d_v, D), got "
                              f"{tuple(self.W_Q.shape)}, {tuple(self.W_K.shape)}, {tuple(self.W_V.shape)}")
        n_h, d_k, D = self.W_K.shape
        if self.W_Q.shape != (d_k, D) or self.W_V.shape[0] != n_h or self.W_V.shape[-1] != D:
            raise ConfigError(f"delta-rule weights disagree: W_Q {tuple(self.W_Q.shape)}, W_K {tuple(self.W_K.shape)}, "
                              f"W_V {tuple(self.W_V.shape)}")

    @property
    def n_h(self) -> int:
        return self.W_K.shape[0]

    @property
    def d_model(self) -> int:
        return self.W_K.shape[-1]


@dataclass(frozen=True)
class DeltaRuleWrites:
    """What the context writes and the query reads: keys (B, N, n_h, d_k), values (B, N, n_h, d_v), beta
    (B, N, n_h), alpha (B, N), query (B, d_k)."""

    keys: torch.Tensor
    values: torch.Tensor
    beta: torch.Tensor
    alpha: torch.Tensor
    query: torch.Tensor


def delta_rule_states(keys: torch.Tensor, values: torch.Tensor, beta: torch.Tensor, alpha: torch.Tensor
                      ) -> torch.Tensor:
    """(N+1, B, d_v, d_k) states S_0 = 0, ..., S_N of the recurrence in the module docstring, from keys
    (B, N, n_h, d_k), values (B, N, n_h, d_v), beta (B, N, n_h), alpha (B, N)."""
    B, N, n_h, d_k = keys.shape
    S = keys.new_zeros(B, values.shape[-1], d_k)
    out = [S]
    for t in range(N):
        S = alpha[:, t, None, None] * S
        for j in range(n_h):
            k, v = keys[:, t, j, :, None], values[:, t, j, :, None]  # (B, d_k, 1), (B, d_v, 1)
            S = S + beta[:, t, j, None, None] * (v - S @ k) @ k.transpose(1, 2)
        out.append(S)
    return torch.stack(out)


@dataclass(frozen=True)
class DeltaRuleDual:
    """The dual form's parts: ``errors`` e_{t,j} (B, N, n_h, d_v), the values of the attention, and ``output``
    S_N q (B, d_v)."""

    errors: torch.Tensor
    output: torch.Tensor


def delta_rule_dual(writes: DeltaRuleWrites) -> DeltaRuleDual:
    """The read-out S_N q as attention over the written keys with the write errors as values (module docstring),
    computed from keys and values alone: no state is formed. The N·n_h writes are taken in order as one sequence
    m = 1..M, the decay α_t on the first write of token t; with D_ms = Π_{s<r≤m} a_r, the errors solve
    e_m + Σ_{s<m} D_ms β_s (k_mᵀ k_s) e_s = v_m and S_N q = Σ_s D_Ms β_s e_s (k_sᵀ q)."""
    B, N, n_h, d_k = writes.keys.shape
    M, d_v = N * n_h, writes.values.shape[-1]
    k = writes.keys.reshape(B, M, d_k)
    v = writes.values.reshape(B, M, d_v)
    b = writes.beta.reshape(B, M)
    first = torch.zeros(n_h, dtype=torch.bool, device=k.device)
    first[0] = True
    a = torch.where(first, writes.alpha[..., None], torch.ones_like(writes.beta)).reshape(B, M)
    index = torch.arange(M, device=k.device)
    later = index[None, :] > index[:, None]  # (s, r): r after s
    decay = torch.cumprod(torch.where(later, a[:, None, :], torch.ones_like(a[:, None, :])), dim=-1)  # (B, s, m)
    decay = decay.transpose(1, 2)  # (B, m, s) = Π_{s<r≤m} a_r
    scores = decay * (k @ k.transpose(1, 2)) * b[:, None, :]  # (B, m, s) = D_ms β_s k_mᵀ k_s
    errors = torch.linalg.solve_triangular(torch.tril(scores, -1), v, upper=False, unitriangular=True)
    weights = decay[:, -1] * b * (k @ writes.query[..., None])[..., 0]  # (B, M) = D_Ms β_s k_sᵀ q
    output = (weights[..., None] * errors).sum(1)
    return DeltaRuleDual(errors.reshape(B, N, n_h, d_v), output)


class DeltaRuleLayer(nn.Module):
    """The delta-rule layer of the module docstring: tokens (B, N+1, D), the query last, -> ŷ = S_N q (B, d_v).
    Any dtype and device: the weights follow the tokens."""

    def __init__(self, weights: DeltaRuleWeights) -> None:
        super().__init__()
        self.weights = weights

    def writes(self, tokens: torch.Tensor) -> DeltaRuleWrites:
        """Keys, values, strengths and decay of the N context tokens and the query of the last token."""
        w = self.weights
        if tokens.ndim != 3 or tokens.shape[-1] != w.d_model or tokens.shape[1] < 1:
            raise ConfigError(f"the delta-rule layer reads tokens (B, N+1, {w.d_model}), got {tuple(tokens.shape)}")
        B, T, _ = tokens.shape
        context = tokens[:, :-1]
        keys = torch.einsum("hkD,bnD->bnhk", w.W_K.to(tokens), context)
        values = torch.einsum("hvD,bnD->bnhv", w.W_V.to(tokens), context)
        if w.normalise != "none":
            norms = keys.norm(dim=-1, keepdim=True)
            if (norms == 0).any():
                raise ConfigError("normalised keys need nonzero keys: a key k = 0 has no direction")
            keys = keys / norms
            values = values / norms if w.normalise == "pair" else values
        beta = schedule(w.beta, "the writing strength β", (B, T - 1, w.n_h), tokens)
        alpha = schedule(w.alpha, "the decay α", (B, T - 1), tokens, upper=1.0)
        return DeltaRuleWrites(keys, values, beta, alpha, tokens[:, -1] @ w.W_Q.to(tokens).T)

    def states(self, tokens: torch.Tensor) -> torch.Tensor:
        """(N+1, B, d_v, d_k) fast weights S_0 = 0, ..., S_N."""
        w = self.writes(tokens)
        return delta_rule_states(w.keys, w.values, w.beta, w.alpha)

    def predictions_per_token(self, tokens: torch.Tensor) -> torch.Tensor:
        """(N+1, B, d_v) read-outs S_t q after t = 0..N context tokens."""
        w = self.writes(tokens)
        return (delta_rule_states(w.keys, w.values, w.beta, w.alpha) @ w.query[None, :, :, None])[..., 0]

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.predictions_per_token(tokens)[-1]
