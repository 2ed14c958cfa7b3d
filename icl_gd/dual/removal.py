"""What did a set of training patterns add to a layer, and what do predictions do without it? Key removal in the
dual form: Σ over selected units of v kᵀ (and v^b) is exactly what those units contributed to W (and b), so
subtracting it removes them from the layer.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from icl_gd.dual.layer import DualLayer, UnitProvenance


@dataclass(frozen=True)
class UnitSelection:
    """A set of units to remove; every given criterion must hold (``None`` = any). ``steps`` is [start, stop)."""

    examples: tuple[int, ...] | None = None
    classes: tuple[int, ...] | None = None
    tasks: tuple[int, ...] | None = None
    epochs: tuple[int, ...] | None = None
    steps: tuple[int, int] | None = None

    def mask(self, block: UnitProvenance) -> np.ndarray:
        """Which of a block's units (its provenance, ``(b,)`` each) the selection picks, ``(b,)`` booleans."""
        keep = np.ones(len(block.step), dtype=bool)
        for values, column in ((self.examples, block.example), (self.classes, block.label),
                               (self.tasks, block.task), (self.epochs, block.epoch)):
            if values is not None:
                keep &= np.isin(column, np.asarray(values))
        if self.steps is not None:
            keep &= (block.step >= self.steps[0]) & (block.step < self.steps[1])
        return keep


def removal_delta(layer: DualLayer, selection: UnitSelection, block_rows: int = 32768) -> tuple[np.ndarray, np.ndarray | None]:
    """``(ΔW (out, in), Δb (out,) or None)`` = Σ over selected units of v kᵀ and v^b, in float64:
    what those training patterns added to the layer."""
    d_in, d_out = int(layer.store.info["in_features"]), int(layer.store.info["out_features"])
    dW = np.zeros((d_out, d_in))
    db = np.zeros(d_out) if layer.has_bias else None
    # The mask is read before any key or value is converted, so a restriction to a few steps reads little.
    for block in layer.blocks(block_rows, select=selection.mask):
        dW += block.value.T @ block.key
        if db is not None:
            db += block.bias_value.sum(axis=0)
    return dW, db


def restriction_delta(layer: DualLayer, stop: int, block_rows: int = 32768) -> tuple[np.ndarray, np.ndarray | None]:
    """What the units of steps ``stop`` onwards added: subtracting it restricts the layer's attention to the keys of
    the steps before ``stop`` (``stop=0``: no key, the initial weights; ``stop=n_steps``: every key, ΔW = 0)."""
    return removal_delta(layer, UnitSelection(steps=(stop, max(stop, layer.n_steps))), block_rows)


@contextmanager
def keys_removed(removals: Sequence[tuple[nn.Linear, np.ndarray, np.ndarray | None]]) -> Iterator[None]:
    """Within the block, each module's weights lack the given (ΔW, Δb); restored exactly afterwards."""
    saved = [(m, m.weight.detach().clone(), None if m.bias is None else m.bias.detach().clone()) for m, _, _ in removals]
    try:
        with torch.no_grad():
            for module, dW, db in removals:
                module.weight -= torch.as_tensor(dW, dtype=module.weight.dtype, device=module.weight.device)
                if db is not None and module.bias is not None:
                    module.bias -= torch.as_tensor(db, dtype=module.bias.dtype, device=module.bias.device)
        yield
    finally:
        with torch.no_grad():
            for module, weight, bias in saved:
                module.weight.copy_(weight)
                if bias is not None:
                    module.bias.copy_(bias)
