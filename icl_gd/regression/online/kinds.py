"""A kind of trained fast-weight layer, as one entry of a study's table: its name and label, its trained module
(``icl_gd.regression.online.learned``), the reference whose algorithm it runs with explicit weights
(``icl_gd.regression.online.references.REFERENCES``), that construction at the reference's tuned parameter, the
layer that runs its weights and their interpolation (``icl_gd.regression.online.interpolation``). A study fills the
table: the constructions are ``icl_gd.constructions``', which the library does not import.

Shapes: D token width (d + d_y), d_k key width (d here), d_v value width (d_y); tokens (B, N+1, D) -> ŷ (B, d_v).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from torch import nn

from icl_gd.regression.tokens import ConcatLayout


@dataclass(frozen=True)
class LayerKind:
    """A trained layer: ``name`` (in metrics and tables), ``label`` (in figures), its module
    (``trained(initial settings, layout, seed)``), the reference whose algorithm it runs (``algorithm``, a
    reference's name), those weights at the reference's tuned parameter (``construction(layout, parameter)``,
    float64), the layer that runs weights of its kind (``layer(weights)``) and the weights (1 - α) · gauge-fixed
    trained + α · constructed (``interpolate(trained weights, constructed, α)``)."""

    name: str
    label: str
    trained: Callable[[Any, ConcatLayout, int], nn.Module]
    algorithm: str
    construction: Callable[[ConcatLayout, float], Any]
    layer: Callable[[Any], nn.Module]
    interpolate: Callable[[Any, Any, float], Any]

    def between(self, model: nn.Module, constructed: Any, alpha: float) -> nn.Module:
        """The float64 layer between the gauge-fixed trained ``model`` (α = 0) and its construction (α = 1)."""
        return self.layer(self.interpolate(model.weights(), constructed, alpha))


def widths(layout: ConcatLayout) -> tuple[int, int, int]:
    """(D, d_k, d_v) of a trained layer on ``layout``'s tokens: keys of width d, values of width d_y."""
    return layout.d_model, layout.d_x, layout.d_y
