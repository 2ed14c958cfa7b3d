"""Check the dual form against the primal network, in float64.

- Weights: W_T =? a_W W_0 + Σ_u v_u k_uᵀ (and b_T =? a_b b_0 + Σ_u v^b_u), rebuilt from the key store.
- Outputs: W_T q + b_T =? a_W W_0 q + a_b b_0 + Σ_u v_u (k_u·q) + Σ_u v^b_u, the dual (attention) form.
- Residual: R = W_T - (rebuilt weights). For SGD it is round-off; for Adam-type optimizers it is not, and
  ``unexplained_share`` reports, per output unit j, ‖R_j‖ / ‖W_T,j - a W_0,j‖ (weight row and bias together;
  a row that moved by round-off only, e.g. a dead ReLU unit, is measured against ‖W_T,j‖ instead).

Errors are norm-wise like ``icl_gd.constructions.verify.compare``: max|actual - expected| / max|expected|.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from icl_gd.core.errors import ConfigError
from icl_gd.dual.layer import DualLayer


@dataclass(frozen=True)
class DualVerification:
    """How well the dual form reproduces one layer. ``unexplained_share`` is ``(out,)``."""

    layer: str
    exact: bool  # recorded under an optimizer with an exact dual form (SGD)
    weight_max_abs_error: float
    weight_max_rel_error: float
    output_max_abs_error: float
    output_max_rel_error: float
    unexplained_share: np.ndarray

    @property
    def max_rel_error(self) -> float:
        return max(self.weight_max_rel_error, self.output_max_rel_error)

    @property
    def max_unexplained_share(self) -> float:
        return float(np.max(self.unexplained_share)) if self.unexplained_share.size else 0.0


def _errors(actual: np.ndarray, expected: np.ndarray) -> tuple[float, float]:
    diff = float(np.max(np.abs(actual - expected))) if expected.size else 0.0
    scale = float(np.max(np.abs(expected))) if expected.size else 0.0
    return diff, diff / scale if scale > 0 else diff


def _checked_queries(layer: DualLayer, queries: np.ndarray) -> np.ndarray:
    q = np.asarray(queries, dtype=np.float64)
    if q.ndim != 2 or q.shape[1] != layer.initial_weight.shape[1]:
        raise ConfigError(f"queries must be (nq, {layer.initial_weight.shape[1]}), got {q.shape}")
    return q


def _initial_outputs(layer: DualLayer, q: np.ndarray) -> np.ndarray:
    """``(nq, out)``: a_W W_0 q + a_b b_0, the initial weights' part of the dual outputs."""
    out = layer.initial_scale_w * q @ layer.initial_weight.T.astype(np.float64)
    if layer.initial_bias is not None:
        out = out + layer.initial_scale_b * layer.initial_bias
    return out


def rebuild_and_outputs(layer: DualLayer, queries: np.ndarray,
                        block_rows: int = 32768) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
    """``(W, b, outputs)`` from one pass over the stored units, in float64: the rebuilt weights
    W = a_W W_0 + Σ_u v_u k_uᵀ (on a compressed layer: per-example value sums times the example's one key) and
    b = a_b b_0 + Σ_u v^b_u, and the dual outputs a_W W_0 q + a_b b_0 + Σ_u v_u (k_u·q) + Σ_u v^b_u for
    ``queries (nq, in)``. Blocked over units, so the (units × queries) attention matrix is never held whole."""
    q = _checked_queries(layer, queries)
    W = layer.initial_scale_w * layer.initial_weight.astype(np.float64)
    b0 = layer.initial_bias
    b = None if b0 is None else layer.initial_scale_b * b0.astype(np.float64)
    out = _initial_outputs(layer, q)
    compressed = bool(layer.store.info["compressed"])
    if compressed:  # as ``DualLayer.example_values``: per-example value sums, added in row order
        ids, keys = layer.compact_keys()
        values = torch.zeros(len(ids), int(layer.store.info["out_features"]), dtype=torch.float64)
        bias_values = torch.zeros_like(values) if layer.has_bias else None
    for block in layer.blocks(block_rows):
        attention = block.key @ q.T  # (b, nq)
        out += attention.T @ block.value
        bias_sum = None if block.bias_value is None else block.bias_value.sum(axis=0)
        if bias_sum is not None:
            out += bias_sum
        if compressed:
            pos = torch.from_numpy(np.searchsorted(ids, block.example))
            values.index_add_(0, pos, torch.from_numpy(block.value))
            if bias_values is not None:
                bias_values.index_add_(0, pos, torch.from_numpy(block.bias_value))
            continue
        W += block.value.T @ block.key
        if b is not None:
            b += bias_sum
    if compressed:
        W = W + values.numpy().T @ keys.astype(np.float64)
        if b is not None:
            b = b + bias_values.numpy().sum(axis=0)
    return W, b, out


def verify_layer(
    layer: DualLayer,
    queries: np.ndarray,
    weight: np.ndarray | None = None,
    bias: np.ndarray | None = None,
    block_rows: int = 32768,
) -> DualVerification:
    """Compare the rebuilt weights and the dual outputs on ``queries (nq, in)`` with the primal layer.

    ``weight``/``bias`` are the layer's parameters at the layer's step (the stored final ones by default);
    ``block_rows`` units are held in RAM at a time (lower it for wide values, e.g. a language model's output).
    """
    if weight is None:
        weight = layer.store.array("final_weight")
        bias = layer.store.arrays.get("final_bias")
    weight = np.asarray(weight, dtype=np.float64)
    bias = None if bias is None else np.asarray(bias, dtype=np.float64)
    q = _checked_queries(layer, queries)
    W, b, dual = rebuild_and_outputs(layer, q, block_rows)
    w_abs, w_rel = _errors(np.concatenate([W, b[:, None]], 1) if b is not None else W,
                           np.concatenate([weight, bias[:, None]], 1) if bias is not None else weight)
    primal = q @ weight.T + (0.0 if bias is None else bias)
    o_abs, o_rel = _errors(dual, primal)
    residual = weight - W
    moved = weight - layer.initial_scale_w * layer.initial_weight
    res2 = (residual**2).sum(axis=1)
    moved2 = (moved**2).sum(axis=1)
    if bias is not None:
        res2 += (bias - b) ** 2
        moved2 += (bias - layer.initial_scale_b * layer.initial_bias) ** 2
    size2 = (weight**2).sum(axis=1) + (0.0 if bias is None else bias**2)
    # A row that never learnt (a dead ReLU unit) moved by round-off only: measure it against its own size.
    still = moved2 <= 1e-24 * size2
    denominator = np.sqrt(np.where(still, size2, moved2))
    share = np.sqrt(res2) / np.where(denominator > 0, denominator, 1.0)
    return DualVerification(
        layer=layer.name, exact=bool(layer.store.info["exact"]), weight_max_abs_error=w_abs,
        weight_max_rel_error=w_rel, output_max_abs_error=o_abs, output_max_rel_error=o_rel,
        unexplained_share=share,
    )
