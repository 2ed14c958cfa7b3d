"""One trained layer applied again and again, with damping, beside GD run as long (von Oswald et al. 2023, §3: the
single trained layer iterated 50 times with damping λ = 0.75, against 50 GD steps of step size λη).

``update="y"`` adds only the update's y slots, as the authors' ``y_update`` (their figure): the layer then acts on
the labels alone, the way a GD step does; ``update="all"`` adds the whole update (the x slots move too). Shapes:
B tasks, T tokens, D = d_x + d_y.
"""

from __future__ import annotations

import torch

from icl_gd.core.errors import ConfigError
from icl_gd.regression.lsa import LSALayer, split_padded
from icl_gd.regression.tokens import query_prediction

UPDATES = ("all", "y")


@torch.no_grad()
def iterated_predictions(layer: LSALayer, tokens: torch.Tensor, n_applications: int, damping: float,
                         update: str = "all", d_y: int = 1) -> list[torch.Tensor]:
    """ŷ (B, d_y) after each of 1..n applications of ``layer``: e <- e + λ·Δ(e) (Δ's y slots only with
    ``update="y"``), reading ŷ = minus the query's y slot."""
    if update not in UPDATES:
        raise ConfigError(f"update must be one of {', '.join(UPDATES)}, got {update!r}")
    if not isinstance(n_applications, int) or n_applications <= 0:
        raise ConfigError(f"n_applications must be a positive integer, got {n_applications!r}")
    if not damping > 0:
        raise ConfigError(f"damping must be positive, got {damping!r}")
    if not layer.config.softmax:
        return _iterated_linear(layer, tokens, n_applications, damping, update, d_y)
    e, out = tokens, []
    for _ in range(n_applications):
        delta = damping * layer.attention_update(e)
        if update == "y":
            delta = torch.cat([torch.zeros_like(delta[..., :-d_y]), delta[..., -d_y:]], dim=-1)
        e = e + delta
        out.append(query_prediction(e[:, -1:], slice(-d_y, None)))
    return out


def _iterated_linear(layer: LSALayer, tokens: torch.Tensor, n_applications: int, damping: float, update: str,
                     d_y: int) -> list[torch.Tensor]:
    """``iterated_predictions`` of a linear layer, with the same values: context and query are held apart and
    zero-padded once (``split_padded``), as ``LSALayer.attention_update`` pads them on every call, and each
    application adds λ·Δ (``LSALayer.linear_update``) to the updated columns in place (the padded ones stay exactly
    zero). A roll-out over 10 000 tasks of 100 tokens then allocates its products alone, not the padded copies,
    concatenations and sums of every application."""
    D = tokens.shape[-1]
    context, query = split_padded(tokens)  # fresh tensors: safe to update in place
    columns = slice(0, D) if update == "all" else slice(D - d_y, D)
    out = []
    for _ in range(n_applications):
        d_context, d_query = layer.linear_update(context, query)
        context[..., columns].add_(d_context[..., columns].mul_(damping))  # λ·Δ, then e + λ·Δ, as the loop above
        query[:, columns].add_(d_query[:, columns].mul_(damping))
        out.append(query_prediction(query[:, None], slice(D - d_y, D)))  # a new tensor, not a view
    return out
