"""The model on separate x and y tokens (von Oswald et al. 2023, §4, Prop. 3, App. A.5): a softmax-attention
layer that should copy each label next to its input, then a linear LSA layer that should do one GD step; and the
analyses of the copy layer (gradient norms of each output token with respect to its own, its right neighbour's
and the other input tokens).

Layouts and tasks: ``icl_gd.regression.separate.tokens``. Shapes: B tasks, T = 2N+1 tokens, D the token width.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from icl_gd.core.config import require_positive
from icl_gd.core.errors import ConfigError
from icl_gd.regression.lsa import LSAConfig, LSALayer
from icl_gd.regression.separate.tokens import AuthorsSeparateLayout, SeparateLayout


@dataclass(frozen=True)
class SeparateModelConfig:
    """A softmax-attention layer (``n_heads`` heads) then a linear LSA layer, on separate tokens."""

    n_heads: int = 1
    key_size: int | None = None
    init_scale: float = 0.002
    scaled_logits: bool = False  # the copy layer's logits divided by sqrt(key size) (the authors')

    def __post_init__(self) -> None:
        if not isinstance(self.n_heads, int) or self.n_heads <= 0:
            raise ConfigError(f"n_heads must be a positive integer, got {self.n_heads!r}")
        if self.key_size is not None and self.key_size <= 0:
            raise ConfigError(f"key_size must be a positive integer, got {self.key_size!r}")
        require_positive("init_scale", self.init_scale)


class SeparateTokenModel(nn.Module):
    """``copy`` (softmax attention) then ``gd`` (linear LSA), both residual; ŷ = ``layout.prediction`` (minus the
    query's y slot, or its last coordinate in the authors' layout).

    ``forward(tokens)`` gives ŷ (B, d_y); with ``return_tokens`` also [input, after copy, after gd] (B, T, D).
    """

    def __init__(self, layout: SeparateLayout | AuthorsSeparateLayout,
                 config: SeparateModelConfig = SeparateModelConfig(), seed: int = 0) -> None:
        super().__init__()
        self.layout = layout
        self.config = config
        gen = torch.Generator().manual_seed(seed)
        D = layout.d_model
        # n_layers=2 in both configs: the authors' init variance 0.002 / (layers · fan_in).
        self.copy = LSALayer(LSAConfig(d_model=D, d_y=layout.d_y, n_layers=2, n_heads=config.n_heads,
                                       key_size=config.key_size, softmax=True, scaled_logits=config.scaled_logits,
                                       init_scale=config.init_scale), gen)
        self.gd = LSALayer(LSAConfig(d_model=D, d_y=layout.d_y, n_layers=2, init_scale=config.init_scale), gen)

    def forward(self, tokens: torch.Tensor, return_tokens: bool = False):
        copied = self.copy(tokens)
        if return_tokens:
            final = self.gd(copied)
            return self.layout.prediction(final), [tokens, copied, final]
        # Only the query's final state is read: update it alone (O(N D) instead of O(N D²) per task).
        query = copied[:, -1] + self.gd.config.damping * self.gd.query_update(copied)
        return self.layout.prediction(query[:, None])


# ---------------------------------------------------------------------------------------------------- analysis
@dataclass(frozen=True)
class CopyAnalysis:
    """Gradient norms of a layer's update at output token k with respect to its input tokens.

    ``norms`` (T, T): mean over tasks of ‖∂u_k/∂e_j‖_F (u_k the attention update of token k, residual excluded).
    Per output token k (T,): ``own`` = j = k; ``next`` = j = k+1 (NaN for the last token); ``other`` = the joint
    norm over every j ∉ {k, k+1}; ``other_per_token`` = its mean per such token; ``own_with_residual`` =
    ‖I + ∂u_k/∂e_k‖_F, the whole layer's output.
    """

    norms: torch.Tensor
    own: torch.Tensor
    next: torch.Tensor
    other: torch.Tensor
    other_per_token: torch.Tensor
    own_with_residual: torch.Tensor


def copy_analysis(layer: nn.Module, tokens: torch.Tensor) -> CopyAnalysis:
    """Per-task Jacobians of ``layer``'s update (tokens (B, T, D) -> (B, T, D)) by ``torch.func``, then the norms.

    The "others" of token k exclude k+1: counting the neighbour among them would hide the copy.
    """
    B, T, D = tokens.shape

    def update(e: torch.Tensor) -> torch.Tensor:  # (T, D) -> (T, D)
        return layer(e[None])[0] - e

    with torch.enable_grad():
        J = torch.func.vmap(torch.func.jacrev(update))(tokens.detach()).detach()  # (B, T, D, T, D)
    eye = torch.eye(D, dtype=tokens.dtype, device=tokens.device)
    diag = torch.diagonal(J, dim1=1, dim2=3).permute(0, 3, 1, 2)  # (B, T, D, D): ∂u_k/∂e_k
    per_pair = J.pow(2).sum(dim=(2, 4))  # (B, T, T): squared norms ‖∂u_k/∂e_j‖²
    k = torch.arange(T, device=tokens.device)
    next_mask = torch.zeros(T, T, dtype=torch.bool, device=tokens.device)
    next_mask[k[:-1], k[:-1] + 1] = True
    own_mask = torch.eye(T, dtype=torch.bool, device=tokens.device)
    other_mask = ~(own_mask | next_mask)
    own = per_pair.diagonal(dim1=1, dim2=2).sqrt()
    nxt = torch.full((B, T), float("nan"), dtype=tokens.dtype, device=tokens.device)
    nxt[:, :-1] = per_pair[:, k[:-1], k[:-1] + 1].sqrt()
    other = (per_pair * other_mask).sum(-1).sqrt()
    other_per_token = (per_pair.sqrt() * other_mask).sum(-1) / other_mask.sum(-1)
    own_res = (diag + eye).pow(2).sum(dim=(-1, -2)).sqrt()
    return CopyAnalysis(per_pair.sqrt().mean(0), own.mean(0), nxt.mean(0), other.mean(0),
                        other_per_token.mean(0), own_res.mean(0))


@dataclass(frozen=True)
class AuthorsCopyAnalysis:
    """The authors' copy analysis (``analyse_copy``), averaged over output tokens k = 0..2N-2: with g_kj = ‖mean
    over tasks of ∂(Σ_d out_k[d])/∂e_j‖ (out the layer's output, residual included; e_j's **data** coordinates
    only: their positions are added inside the model, so they are no input to differentiate), ``own`` = g_kk,
    ``next`` = g_k,k+1, ``other`` = Σ_{j ∉ {k, k+1}} g_kj / (T-2); ``other_with_next`` = Σ_{j ≠ k} g_kj / (T-2),
    their sum, which counts the neighbour k+1 among the others (their bug, kept to show what it does)."""

    own: float
    next: float
    other: float
    other_with_next: float


def authors_copy_analysis(layer: nn.Module, tokens: torch.Tensor, data: slice = slice(None)) -> AuthorsCopyAnalysis:
    """``layer`` maps tokens (B, T, D) to (B, T, D); tokens (B, T, D); ``data`` the coordinates that are the
    model's inputs (a layout's ``data_slot``; all by default). One backward pass per output token k.

    Theirs averages the gradient over all 10 000 test tasks before its norm: with few tasks the norm of the mean
    keeps the sampling noise (about 1/√B of a task's norm), which inflates ``other`` most."""
    B, T, D = tokens.shape
    inputs = tokens.detach().clone().requires_grad_(True)
    with torch.enable_grad():
        out = layer(inputs)
        own = nxt = other = other_with_next = 0.0
        ks = range(T - 2)  # k = 0..2N-2, as theirs: k+1 is then a token of the context
        for k in ks:
            (grad,) = torch.autograd.grad(out[:, k].sum(), inputs, retain_graph=True)  # (B, T, D): per task
            g = grad[..., data].mean(0).norm(dim=-1)  # (T,): ‖mean over tasks of the gradient‖ per input token
            others = torch.ones(T, dtype=torch.bool, device=tokens.device)
            others[k] = False
            with_next = float(g[others].sum())
            others[k + 1] = False
            own, nxt = own + float(g[k]), nxt + float(g[k + 1])
            other += float(g[others].sum()) / (T - 2)
            other_with_next += with_next / (T - 2)
    n = len(ks)
    return AuthorsCopyAnalysis(own / n, nxt / n, other / n, other_with_next / n)
