"""Transformer blocks around the (linear or softmax) attention layer: attention, LayerNorm and an MLP per layer,
as in the authors' code (von Oswald et al. 2023, ``src/transformer.py``: ``trans_block`` with
``only_attention=False``, ``use_layer_norm=True``).

One block maps tokens h (B, T, D) to

    h <- clip(h + λ · Attn(LN₁(h)))          keys and values from the context rows of LN₁(h) (not the query)
    h <- clip(h + λ · MLP(LN₂(h)))           MLP: D -> w·D -> D, GELU (tanh form, jax.nn.gelu's default)

pre-LayerNorm with a learned scale and offset. As in the authors' code, the first of K separate blocks has no LN₁
(the raw tokens enter it) unless ``norm_first_block`` (App. A.9's one-layer model: "a single linear
self-attention layer succeeding LayerNorm"), while a recurrent (tied) block normalises every time; the MLP is always normalised; the
damping λ and the activation clipping apply to both residual updates; ŷ = minus the query's y slot. With neither
LayerNorm nor MLP a block is exactly an ``LSALayer`` (tested). Shapes: B tasks, T tokens, D = d_model.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from icl_gd.core.config import require_positive_ints, setting
from icl_gd.core.errors import ConfigError
from icl_gd.regression.lsa import LSAConfig, LSALayer, LSAModel, LSAWeights, _truncated_normal
from icl_gd.regression.config import LSAStackConfig
from icl_gd.regression.tokens import query_prediction


@dataclass(frozen=True)
class TransformerConfig:
    """A stack of transformer blocks; ``attention`` is the attention part's config (layers, tying, heads, softmax,
    damping, clipping, init scale)."""

    attention: LSAConfig
    layer_norm: bool = True
    mlp: bool = True
    widening_factor: int = 4
    mlp_bias: bool = False
    norm_first_block: bool = False

    def __post_init__(self) -> None:
        require_positive_ints(self, "widening_factor")


class MLP(nn.Module):
    """D -> w·D -> D with a tanh-form GELU between; weights from the attention's truncated-normal init."""

    def __init__(self, d_model: int, widening_factor: int, bias: bool, init_scale: float,
                 generator: torch.Generator) -> None:
        super().__init__()
        hidden = widening_factor * d_model
        self.inner = nn.Linear(d_model, hidden, bias=bias)
        self.outer = nn.Linear(hidden, d_model, bias=bias)
        with torch.no_grad():
            for linear, fan_in in ((self.inner, d_model), (self.outer, hidden)):
                linear.weight.copy_(_truncated_normal(linear.weight.shape, fan_in, init_scale, generator))
                if bias:
                    linear.bias.zero_()

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.outer(nn.functional.gelu(self.inner(h), approximate="tanh"))


class TransformerBlock(nn.Module):
    """Attention + LayerNorm + MLP, composed: ``forward`` maps tokens (B, T, D) to (B, T, D)."""

    def __init__(self, config: TransformerConfig, generator: torch.Generator, norm_attention_input: bool) -> None:
        super().__init__()
        attention = config.attention
        D = attention.d_model
        self.attention = LSALayer(attention, generator)
        self.norm_attention = nn.LayerNorm(D) if config.layer_norm and norm_attention_input else nn.Identity()
        self.norm_mlp = nn.LayerNorm(D) if config.layer_norm else nn.Identity()
        self.mlp = (MLP(D, config.widening_factor, config.mlp_bias, attention.init_scale / attention.n_layers,
                        generator) if config.mlp else None)
        self.damping, self.clip = attention.damping, attention.clip_activations

    def _add(self, h: torch.Tensor, update: torch.Tensor) -> torch.Tensor:
        h = h + (update if self.damping == 1.0 else self.damping * update)
        return h if self.clip is None else h.clamp(-self.clip, self.clip)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        h = self._add(h, self.attention.attention_update(self.norm_attention(h)))
        if self.mlp is not None:
            h = self._add(h, self.mlp(self.norm_mlp(h)))
        return h


class TransformerModel(nn.Module):
    """K transformer blocks, separate or tied, with ``LSAModel``'s interface: ``forward(tokens)`` gives ŷ (B, d_y);
    ``return_tokens=True`` also gives the K+1 token states; ``n_applications`` runs a tied block past K."""

    def __init__(self, config: TransformerConfig, seed: int = 0) -> None:
        super().__init__()
        self.config = config
        attention = config.attention
        gen = torch.Generator().manual_seed(seed)
        if attention.recurrent:
            self.layers = nn.ModuleList([TransformerBlock(config, gen, norm_attention_input=True)])
        else:
            self.layers = nn.ModuleList(TransformerBlock(config, gen, norm_attention_input=i > 0 or config.norm_first_block)
                                        for i in range(attention.n_layers))

    def layer_sequence(self, n_applications: int | None = None) -> list[TransformerBlock]:
        K = n_applications or self.config.attention.n_layers
        if self.config.attention.recurrent:
            return [self.layers[0]] * K
        if K != self.config.attention.n_layers:
            raise ConfigError(f"a non-recurrent model has {self.config.attention.n_layers} layers, cannot apply {K}")
        return list(self.layers)

    def forward(self, tokens: torch.Tensor, return_tokens: bool = False, n_applications: int | None = None):
        states, h = [tokens], tokens
        for block in self.layer_sequence(n_applications):
            h = block(h)
            states.append(h)
        prediction = query_prediction(h[:, -1:], slice(-self.config.attention.d_y, None))
        return (prediction, states) if return_tokens else prediction

    def attention_weights(self) -> list[LSAWeights]:
        """Each distinct block's attention weights (they act on normalised tokens: no GD++ read-off applies)."""
        return [block.attention.weights() for block in self.layers]


BLOCKS = ("lsa", "transformer")


@dataclass(frozen=True)
class BlockStackConfig(LSAStackConfig):
    """K layers of LSA (the paper's stack) or of transformer blocks (attention + LayerNorm + MLP)."""

    block: str = setting("lsa", "lsa: attention-only layers; transformer: attention + LayerNorm + MLP per layer "
                                "(the authors' block: pre-LN, MLP width 4x, GELU, no biases)")
    softmax: bool = setting(False, "softmax attention instead of linear (either block), logits / sqrt(key size) as "
                                   "in the authors' code")
    layer_norm: bool = setting(True, "transformer blocks: LayerNorm before the attention and the MLP")
    mlp: bool = setting(True, "transformer blocks: the MLP after the attention")
    widening_factor: int = setting(4, "transformer blocks: MLP hidden width / token width (the authors' 4)")
    norm_first_block: bool = setting(False, "transformer blocks: a LayerNorm before the first separate block's "
                                            "attention too (App. A.9's one-layer model; the authors' code skips it)")

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.block not in BLOCKS:
            raise ConfigError(f"block must be one of {', '.join(BLOCKS)}, got {self.block!r}")
        require_positive_ints(self, "widening_factor")

    def lsa_config(self, layout: Any) -> LSAConfig:
        config = super().lsa_config(layout)
        return dataclasses.replace(config, softmax=True, scaled_logits=True) if self.softmax else config

    def build(self, layout: Any, seed: int) -> nn.Module:
        """The untrained model for ``layout`` and ``seed``: an ``LSAModel`` or a ``TransformerModel``."""
        if self.block == "lsa":
            return LSAModel(self.lsa_config(layout), seed=seed)
        return TransformerModel(TransformerConfig(self.lsa_config(layout), layer_norm=self.layer_norm, mlp=self.mlp,
                                                  widening_factor=self.widening_factor,
                                                  norm_first_block=self.norm_first_block), seed=seed)
