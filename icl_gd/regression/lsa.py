"""Linear self-attention (von Oswald et al. 2023, §2, App. A.1 Eq. 6) and stacks of it.

One LSA layer maps every token e_j (the query included) to

    e_j + damping · Σ_h P_h W_V,h Σ_i e_i (W_K,h e_i)ᵀ (W_Q,h e_j),

summed over the context tokens i (every token but the last: the query attends but is not attended); no
softmax, no 1/√d, no 1/N, no bias, no mask. Options: softmax attention over the context instead (the same layer
and model interface), several heads, a key size, a damping factor, activation clipping. How the linear path is
computed (context and query held apart, widths padded) is private to this module.
Shapes: B tasks, T tokens, D = d_model, H heads, k key size.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn

from icl_gd.core.config import require_positive, require_positive_ints
from icl_gd.core.errors import ConfigError
from icl_gd.regression.tokens import query_prediction


@dataclass(frozen=True)
class LSAWeights:
    """One layer's weights, as the paper writes them. W_Q, W_K, W_V: (H, k, D); P: (H, D, k)."""

    W_Q: torch.Tensor
    W_K: torch.Tensor
    W_V: torch.Tensor
    P: torch.Tensor

    @property
    def n_heads(self) -> int:
        return self.W_Q.shape[0]

    def to(self, device=None, dtype=None) -> "LSAWeights":
        return LSAWeights(*(t.to(device, dtype) for t in (self.W_Q, self.W_K, self.W_V, self.P)))

    def products(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(QK, PV), each (H, D, D): QK = W_Qᵀ W_K (score of query j on key i is e_jᵀ QK e_i), PV = P W_V."""
        return self.W_Q.transpose(-1, -2) @ self.W_K, self.P @ self.W_V

    @staticmethod
    def from_products(QK: torch.Tensor, PV: torch.Tensor) -> "LSAWeights":
        """Weights realising given products: W_Q = QKᵀ, W_K = I, W_V = I, P = PV (key size D)."""
        H, D, _ = QK.shape
        eye = torch.eye(D, dtype=QK.dtype, device=QK.device).expand(H, D, D).clone()
        return LSAWeights(QK.transpose(-1, -2).clone(), eye, eye.clone(), PV.clone())


@dataclass(frozen=True)
class LSAConfig:
    """Architecture of an LSA model. ``key_size`` None means d_model."""

    d_model: int
    d_y: int = 1
    n_layers: int = 1
    recurrent: bool = False
    n_heads: int = 1
    key_size: int | None = None
    softmax: bool = False
    scaled_logits: bool = False  # softmax logits divided by sqrt(key size), as the authors' code does
    damping: float = 1.0
    clip_activations: float | None = None
    init_scale: float = 0.002

    def __post_init__(self) -> None:
        require_positive_ints(self, "d_model", "d_y", "n_layers", "n_heads")
        if self.key_size is not None and self.key_size <= 0:
            raise ConfigError(f"key_size must be a positive integer, got {self.key_size!r}")
        require_positive("damping", self.damping)
        require_positive("init_scale", self.init_scale)
        if self.clip_activations is not None:
            require_positive("clip_activations", self.clip_activations)

    @property
    def resolved_key_size(self) -> int:
        return self.key_size or self.d_model


def _truncated_normal(shape: Sequence[int], fan_in: int, scale: float, gen: torch.Generator) -> torch.Tensor:
    """Variance-scaling init: truncated normal (±2σ) with variance ``scale / fan_in`` after truncation."""
    std = math.sqrt(scale / fan_in) / 0.87962566103423978  # the truncated law's std is 0.8796 σ
    out = torch.empty(*shape)
    return nn.init.trunc_normal_(out, std=std, a=-2 * std, b=2 * std, generator=gen)


def _project_heads(W: torch.Tensor, e: torch.Tensor) -> torch.Tensor:
    """(B, H, T, k) = W_h e_t for W (H, k, D), e (B, T, D); one matmul (einsum would batch tiny GEMMs)."""
    H, k, D = W.shape
    return (e @ W.reshape(H * k, D).T).unflatten(-1, (H, k)).transpose(1, 2)


def _combine_heads(P: torch.Tensor, heads: torch.Tensor) -> torch.Tensor:
    """(B, T, D) = Σ_h P_h heads_h for P (H, D, k), heads (B, H, T, k)."""
    H, D, k = P.shape
    return heads.transpose(1, 2).flatten(-2) @ P.transpose(0, 1).reshape(D, H * k).T


def _padded_width(D: int) -> int:
    """D rounded up to a multiple of 4: the width the linear path computes in (see ``_linear_split_update``)."""
    return -(-D // 4) * 4


def split_padded(tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Tokens (B, T, D) held apart as fresh tensors: context (B, N, W) and query (B, W), zero-padded to the width W
    the linear path computes in (D rounded up to a multiple of 4). ``LSALayer.linear_update`` acts on them; the
    tokens are ``torch.cat([context, query[:, None]], 1)[..., :D]``. Fresh: a caller may update them in place."""
    return _split_padded(tokens, _padded_width(tokens.shape[-1]))


def _split_padded(tokens: torch.Tensor, width: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(context (B, N, width), query (B, width)) from tokens (B, T, D), zero-padded to ``width`` columns."""
    # Each part padded straight from its view: one pass over the tokens (padding the whole and copying the two
    # slices out contiguous was four). Not an in-place write into a fresh buffer: that would break under vmap.
    pad = (0, width - tokens.shape[-1])
    return nn.functional.pad(tokens[:, :-1], pad), nn.functional.pad(tokens[:, -1], pad)


GRAM_MAX_WIDTH = 16  # measured: through C at width 12 a step is ~1.4x faster; at 40, C's O(N W²) costs more


def _gram_pays(context: torch.Tensor, first: bool) -> bool:
    """Whether ``_query_columns_update`` (through C) beats the elementwise query path: narrow tokens that are data
    (``first``: a first layer's context, no gradient flows into it, so C needs no backward pass). A later layer's
    context carries the gradient of the layers before it: that is read from the layer's place, not from
    ``requires_grad`` alone, which reads False inside ``torch.func.vmap`` (seeds in one batch, ``ensemble.py``)."""
    carries_grad = context.requires_grad or not first
    return context.shape[-1] <= GRAM_MAX_WIDTH and not (torch.is_grad_enabled() and carries_grad)


def _query_columns_update(context: torch.Tensor, query: torch.Tensor, KQ_t: torch.Tensor, PV_rows: torch.Tensor,
                          ) -> torch.Tensor:
    """Δq restricted to c columns, (B, c) = Σ_h (KQ_h e_q)ᵀ C (PV_h's c rows)ᵀ with C = Σ_i e_i e_iᵀ (B, W, W).

    context (B, N, W), query (B, W), KQ_t (W, H·W) = [KQ_1ᵀ … KQ_Hᵀ], PV_rows (H, c, W). Every product is a GEMM
    over flattened tasks except C (one batched GEMM); elementwise work is on (B, W, H·c) only, and C needs no
    gradient when the context is data (a first layer), so the backward pass never touches (B, N, W) tensors.
    """
    B, _, W = context.shape
    H, c, _ = PV_rows.shape
    C = context.transpose(1, 2) @ context  # (B, W, W), symmetric
    P = PV_rows.permute(2, 0, 1).reshape(W, H * c)
    if _seed_batched(P):  # Pᵀ Cᵀ: per seed a (H·c, W) by (W, B·W) product, not a batched matrix-vector one
        CP = (P.T @ C.reshape(B * W, W).T).T.view(B, W, H, c)
    else:
        CP = (C.reshape(B * W, W) @ P).view(B, W, H, c)
    u = (query @ KQ_t).view(B, H, W).transpose(1, 2)  # (B, W, H): column h is KQ_h e_q
    return (u[..., None] * CP).sum((1, 2))


def _seed_batched(tensor: torch.Tensor) -> bool:
    """Whether ``tensor`` is a per-seed slice inside ``torch.func.vmap`` (seeds in one batch, ``ensemble.py``).

    There a product with a narrow matrix (H·c = 1 columns) runs as MKL's batched ``bmm`` of matrix-vector products,
    about 5x slower than the one matrix-vector product of a lone model; turned around (the narrow matrix on the
    left) it is a batch of S wide products. Measured for the single layer's training step, 3 seeds in one batch,
    one core under load 4: 5.1 ms a seed against 6.8 ms. A lone model keeps its product (and its numbers)."""
    is_batched = getattr(torch._C._functorch, "is_batchedtensor", None)
    return bool(is_batched is not None and is_batched(tensor))


def _add_damped(x: torch.Tensor, update: torch.Tensor, damping: float, clip: float | None) -> torch.Tensor:
    """x + damping · update, clamped to ±clip; the multiply by an undamped 1.0 (an exact no-op) is skipped, as it
    costs a pass over the tensor forward and backward."""
    update = update if damping == 1.0 else damping * update
    if clip is None:
        return x + update
    return AddClamped.apply(x, update, clip)[0]


class AddClamped(torch.autograd.Function):
    """(x + update).clamp(-clip, clip) for x and update of one shape, and a bool mask (True where the sum was kept).

    The same numbers as autograd's add then clamp, forward and backward (a test checks them bit for bit): the
    gradient passes where the sum lies in [-clip, clip] (NaN: nowhere), zero elsewhere. Autograd's clamp backward
    keeps the float sum and compares it with both bounds in the backward pass (three passes over it, then the
    select); here the forward pass keeps the mask (``clamped == sum``: one pass, a quarter of the memory) and the
    backward pass is the select alone. Deep clipped LSA stacks clamp context and query after every layer."""

    generate_vmap_rule = True  # seeds in one batch vmap the model (``ensemble.py``)

    @staticmethod
    def forward(x: torch.Tensor, update: torch.Tensor, clip: float) -> tuple[torch.Tensor, torch.Tensor]:
        total = x + update
        clamped = total.clamp(-clip, clip)
        return clamped, clamped == total

    @staticmethod
    def setup_context(ctx, inputs, output) -> None:
        ctx.mark_non_differentiable(output[1])
        ctx.save_for_backward(output[1])

    @staticmethod
    def backward(ctx, grad: torch.Tensor, _grad_mask: torch.Tensor | None):
        (kept,) = ctx.saved_tensors
        passed = torch.where(kept, grad, 0)
        return passed, passed, None


class LSALayer(nn.Module):
    """One (linear or softmax) self-attention layer; ``forward`` maps tokens (B, T, D) to (B, T, D)."""

    def __init__(self, config: LSAConfig, generator: torch.Generator | None = None) -> None:
        super().__init__()
        self.config = config
        H, k, D = config.n_heads, config.resolved_key_size, config.d_model
        gen = generator if generator is not None else torch.Generator().manual_seed(0)
        scale = config.init_scale / config.n_layers
        self.W_Q = nn.Parameter(_truncated_normal((H, k, D), D, scale, gen))
        self.W_K = nn.Parameter(_truncated_normal((H, k, D), D, scale, gen))
        self.W_V = nn.Parameter(_truncated_normal((H, k, D), D, scale, gen))
        self.P = nn.Parameter(_truncated_normal((H, D, k), H * k, scale, gen))

    # ------------------------------------------------------------------ weights as the paper writes them
    def weights(self) -> LSAWeights:
        return LSAWeights(self.W_Q.detach().clone(), self.W_K.detach().clone(),
                          self.W_V.detach().clone(), self.P.detach().clone())

    @torch.no_grad()
    def load_weights(self, weights: LSAWeights) -> "LSALayer":
        for name in ("W_Q", "W_K", "W_V", "P"):
            param, value = getattr(self, name), getattr(weights, name)
            if param.shape != value.shape:
                raise ConfigError(f"{name} has shape {tuple(value.shape)}, the layer needs {tuple(param.shape)}")
            param.copy_(value)
        return self

    # ------------------------------------------------------------------ forward
    def attention_update(self, e: torch.Tensor) -> torch.Tensor:
        """The residual update (B, T, D) before damping, attending over tokens[:, :-1]."""
        if self.config.softmax:
            return self._softmax_update(e)
        d_context, d_query = self.linear_update(*split_padded(e))
        return torch.cat([d_context, d_query[:, None]], dim=1)[..., :e.shape[-1]]

    def linear_update(self, context: torch.Tensor, query: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """A linear layer's update of tokens held apart (``split_padded``): (ΔX (B, N, W), Δq (B, W)) before
        damping, the padded columns zero. ``ConfigError`` on a softmax layer (its update needs the whole tokens)."""
        if self.config.softmax:
            raise ConfigError("linear_update needs a linear layer; a softmax layer's update is attention_update")
        d_context, d_query = self._linear_split_update(context, query, update_context=True)
        return d_context, d_query

    def _linear_products(self, width: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(KQ, PV), each (H, width, width): KQ_h = W_K,hᵀ W_Q,h and PV_h = P_h W_V,h, zero-padded from D."""
        pad = (0, width - self.config.d_model, 0, width - self.config.d_model)
        KQ = self.W_K.transpose(-1, -2) @ self.W_Q
        return nn.functional.pad(KQ, pad), nn.functional.pad(self.P @ self.W_V, pad)

    def _linear_split_update(self, context: torch.Tensor, query: torch.Tensor, update_context: bool,
                            query_columns: slice | None = None, first: bool = False,
                            ) -> tuple[torch.Tensor | None, torch.Tensor]:
        """Linear attention on tokens held apart: context (B, N, W) and query (B, W), W >= D zero-padded.
        Returns (ΔX (B, N, W) or None when ``update_context`` is False, Δq (B, W)), before damping.

        Linear attention is associative: summarising the context once as C = Σ_i e_i e_iᵀ (B, W, W) makes the
        layer cost O(T W²) instead of O(T² W). Rows are e_jᵀ KQ_hᵀ C PV_hᵀ (C is symmetric): a GEMM over all
        context tokens and heads, a batched product with C (the query's row joins it), a GEMM back. The query
        alone (a last layer) needs no C: scores e_iᵀ KQ_h e_q, then their weighted sum of the e_i, elementwise
        (batched mat-vecs are slower on CPU). Measured on a 2-core CPU for the K = 2 model: holding
        context and query apart (no slicing, no zero-filled slice gradients) and padding W to a multiple of 4
        (small GEMMs at width 11 run 3x slower than at 12 in MKL) took a training step from 7.4 to about 4 ms.
        The padded coordinates start at zero and stay zero: the padded rows and columns of KQ and PV are zero.

        ``query_columns`` (with ``update_context`` False): Δq's columns in that slice only, (B, c), the ones a loss
        reads (ŷ's y slot). ``_query_columns_update`` computes them through C, with no pass over the (B, N, W)
        context in the backward pass: one LSA layer's training step runs about 2x faster. ``first``: the context is
        the model's input (``_gram_pays``).
        """
        W = context.shape[-1]
        KQ, PV = self._linear_products(W)
        H = KQ.shape[0]
        KQ_t = KQ.transpose(1, 2).transpose(0, 1).reshape(W, H * W)  # [KQ_1ᵀ … KQ_Hᵀ]
        if query_columns is not None and not update_context and _gram_pays(context, first):
            return None, _query_columns_update(context, query, KQ_t, PV[:, query_columns])
        PV_t = PV.transpose(1, 2).reshape(H * W, W)  # [PV_1ᵀ; …; PV_Hᵀ]
        if query_columns is not None:
            PV_t = PV_t[:, query_columns]
        if H == 1:  # the common case, in 3-d shapes: broadcasting over a head axis of size 1 is slow on CPU
            u = query @ KQ_t  # (B, W): e_qᵀ KQᵀ
            if not update_context:
                scores = (context * u[:, None]).sum(-1, keepdim=True)  # (B, N, 1): e_iᵀ KQ e_q
                return None, (context * scores).sum(1) @ PV_t
            C = context.transpose(1, 2) @ context  # (B, W, W)
            rows = torch.cat([context @ KQ_t, u[:, None]], dim=1) @ C @ PV_t  # (B, N+1, W)
            d_context, d_query = rows.split([context.shape[1], 1], dim=1)
            return d_context, d_query[:, 0]
        u = (query @ KQ_t).unflatten(-1, (H, W))  # (B, H, W): rows e_qᵀ KQ_hᵀ
        if not update_context:
            scores = (context[:, None] * u[:, :, None]).sum(-1, keepdim=True)  # (B, H, N, 1)
            read = (context[:, None] * scores).sum(2)  # (B, H, W): Σ_i e_i score_i
            return None, read.flatten(1) @ PV_t
        C = context.transpose(1, 2) @ context
        projected = (context @ KQ_t).unflatten(-1, (H, W)).transpose(1, 2)  # (B, H, N, W)
        d_query = (u[..., None] * C[:, None]).sum(2).flatten(1) @ PV_t
        return (projected @ C[:, None]).transpose(1, 2).flatten(-2) @ PV_t, d_query

    def explicit_update(self, e: torch.Tensor) -> torch.Tensor:
        """The same update written token by token (queries, keys, values, scores); for checks and softmax."""
        if self.config.softmax:
            return self._softmax_update(e)
        q = torch.einsum("hkd,btd->bhtk", self.W_Q, e)
        k = torch.einsum("hkd,btd->bhtk", self.W_K, e[:, :-1])
        v = torch.einsum("hkd,btd->bhtk", self.W_V, e[:, :-1])
        scores = q @ k.transpose(-1, -2)  # (B, H, T, N)
        heads = scores @ v  # (B, H, T, k)
        return torch.einsum("hdk,bhtk->btd", self.P, heads)

    def _softmax_update(self, e: torch.Tensor) -> torch.Tensor:
        q = _project_heads(self.W_Q, e)
        k = _project_heads(self.W_K, e[:, :-1])
        v = _project_heads(self.W_V, e[:, :-1])
        attn = torch.softmax(self._logits(q @ k.transpose(-1, -2)), dim=-1)  # (B, H, T, N)
        return _combine_heads(self.P, attn @ v)

    def _logits(self, scores: torch.Tensor) -> torch.Tensor:
        """Softmax logits: the scores, divided by sqrt(key size) when ``scaled_logits``."""
        return scores / math.sqrt(self.config.resolved_key_size) if self.config.scaled_logits else scores

    def query_update(self, e: torch.Tensor) -> torch.Tensor:
        """The update (B, D) of the last token only, before damping; what a final layer needs for ŷ.

        Linear: Σ_h PV_h Σ_i e_i (e_iᵀ KQ_h e_q), O(N D) per task and head (``_linear_split_update``).
        """
        context, e_q = e[:, :-1], e[:, -1]
        if self.config.softmax:
            q = _project_heads(self.W_Q, e_q[:, None])  # (B, H, 1, k)
            k = _project_heads(self.W_K, context)
            v = _project_heads(self.W_V, context)
            attn = torch.softmax(self._logits(q @ k.transpose(-1, -2)), dim=-1)  # (B, H, 1, N)
            return _combine_heads(self.P, attn @ v)[:, 0]
        context, query = split_padded(e)
        return self._linear_split_update(context, query, update_context=False)[1][:, :e.shape[-1]]

    def attention_map(self, e: torch.Tensor) -> torch.Tensor:
        """(B, H, T, N) attention weights (softmax) or raw scores (linear)."""
        q = torch.einsum("hkd,btd->bhtk", self.W_Q, e)
        k = torch.einsum("hkd,btd->bhtk", self.W_K, e[:, :-1])
        scores = q @ k.transpose(-1, -2)
        return torch.softmax(self._logits(scores), dim=-1) if self.config.softmax else scores

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return tokens + self.config.damping * self.attention_update(tokens)


class LSAModel(nn.Module):
    """K LSA layers, separate or tied (one layer applied K times), reading out ŷ = -last token's y slot.

    ``forward(tokens)`` gives ŷ (B, d_y); ``forward(tokens, return_tokens=True)`` also gives the list of the
    K+1 token states (input first). ``n_applications`` overrides K for a recurrent model (run past its depth).
    """

    def __init__(self, config: LSAConfig, seed: int = 0) -> None:
        super().__init__()
        self.config = config
        gen = torch.Generator().manual_seed(seed)
        n_distinct = 1 if config.recurrent else config.n_layers
        self.layers = nn.ModuleList(LSALayer(config, gen) for _ in range(n_distinct))

    def layer_sequence(self, n_applications: int | None = None) -> list[LSALayer]:
        K = n_applications or self.config.n_layers
        if self.config.recurrent:
            return [self.layers[0]] * K
        if K != self.config.n_layers:
            raise ConfigError(f"a non-recurrent model has {self.config.n_layers} layers, cannot apply {K}")
        return list(self.layers)

    def forward(self, tokens: torch.Tensor, return_tokens: bool = False, n_applications: int | None = None):
        layers = self.layer_sequence(n_applications)
        if self.config.softmax:
            return self._forward_tokens(tokens, layers, return_tokens)
        return self._forward_linear(tokens, layers, return_tokens)

    def _forward_linear(self, tokens: torch.Tensor, layers: list[LSALayer], return_tokens: bool):
        """Linear layers on context and query held apart, padded once (``LSALayer._linear_split_update``)."""
        D, clip = tokens.shape[-1], self.config.clip_activations
        context, query = split_padded(tokens)
        states = [tokens]
        for i, layer in enumerate(layers):
            # Without return_tokens only the query's final state is needed: the last layer updates it alone.
            update_context = return_tokens or i < len(layers) - 1
            if not update_context:  # and only its y slot, which ŷ reads (ŷ = minus it, ``query_prediction``)
                y_slot = slice(D - self.config.d_y, D)
                _, d_y = layer._linear_split_update(context, query, False, query_columns=y_slot, first=i == 0)
                return -_add_damped(query[:, y_slot], d_y, layer.config.damping, clip)
            d_context, d_query = layer._linear_split_update(context, query, update_context)
            query = _add_damped(query, d_query, layer.config.damping, clip)
            if update_context:
                context = _add_damped(context, d_context, layer.config.damping, clip)
            if return_tokens:
                states.append(torch.cat([context, query[:, None]], dim=1)[..., :D])
        # ŷ = minus the query's y slot (``query_prediction``), read straight off the padded query row: indexing
        # a token view here would add zero-filled gradients to every backward pass.
        prediction = -query[:, D - self.config.d_y : D]
        return (prediction, states) if return_tokens else prediction

    def _forward_tokens(self, tokens: torch.Tensor, layers: list[LSALayer], return_tokens: bool):
        states = [tokens]
        clip = self.config.clip_activations
        full_layers = layers if return_tokens else layers[:-1]
        for layer in full_layers:
            tokens = layer(tokens)
            if clip is not None:
                tokens = tokens.clamp(-clip, clip)
            states.append(tokens)
        if return_tokens:
            query = tokens[:, -1]
        else:
            last = layers[-1]
            query = tokens[:, -1] + last.config.damping * last.query_update(tokens)
            if clip is not None:
                query = query.clamp(-clip, clip)
        prediction = query_prediction(query[:, None], slice(-self.config.d_y, None))
        return (prediction, states) if return_tokens else prediction

    def weights(self) -> list[LSAWeights]:
        return [layer.weights() for layer in self.layers]

    def load_weights(self, weights: LSAWeights | Sequence[LSAWeights]) -> "LSAModel":
        """Load one weight set per distinct layer (one for a recurrent model)."""
        weights = [weights] if isinstance(weights, LSAWeights) else list(weights)
        if len(weights) != len(self.layers):
            raise ConfigError(f"model has {len(self.layers)} distinct layers, got {len(weights)} weight sets")
        for layer, w in zip(self.layers, weights):
            layer.load_weights(w)
        return self
