"""Test oracles: second, slower implementations kept only so tests can compare the library with them. They hold
every unit in RAM or pass over the units once per quantity, so they are for the small stores of the tests.
"""

from __future__ import annotations

import numpy as np

from icl_gd.dual.layer import PROVENANCE_FIELDS, DualLayer


def rebuild_weights(layer: DualLayer, compact: bool = True, block_rows: int = 32768) -> tuple[np.ndarray, np.ndarray | None]:
    """``(W (out, in), b (out,) or None)`` = a W_0 + Σ v kᵀ in float64, as ``verification.rebuild_and_outputs``
    computes them (same products, same order).

    ``compact`` uses the per-example compression on compressed layers (one key, summed values per example);
    otherwise every (example, step) unit is summed, which must agree to round-off.
    """
    W = layer.initial_scale_w * layer.initial_weight.astype(np.float64)
    b0 = layer.initial_bias
    b = None if b0 is None else layer.initial_scale_b * b0.astype(np.float64)
    if compact and layer.store.info["compressed"]:
        _, keys = layer.compact_keys()
        _, values, bias_values = layer.example_values(block_rows)
        W = W + values.T @ keys.astype(np.float64)
        if b is not None:
            b = b + bias_values.sum(axis=0)
        return W, b
    for block in layer.blocks(block_rows):
        W += block.value.T @ block.key
        if b is not None:
            b += block.bias_value.sum(axis=0)
    return W, b


def dual_outputs(layer: DualLayer, queries: np.ndarray, block_rows: int = 32768) -> np.ndarray:
    """``(nq, out)``: a W_0 q + a_b b_0 + Σ_u v_u (k_u·q) + Σ_u v^b_u for ``queries (nq, in)``, in float64, as
    ``verification.rebuild_and_outputs`` computes them."""
    q = np.asarray(queries, dtype=np.float64)
    out = layer.initial_scale_w * q @ layer.initial_weight.T.astype(np.float64)
    if layer.initial_bias is not None:
        out = out + layer.initial_scale_b * layer.initial_bias
    for block in layer.blocks(block_rows):
        attention = block.key @ q.T  # (b, nq): k_u · q
        out += attention.T @ block.value
        if block.bias_value is not None:
            out += block.bias_value.sum(axis=0)
    return out


def dense_scores(layer: DualLayer, queries: np.ndarray, readouts: np.ndarray) -> tuple[np.ndarray, np.ndarray, dict]:
    """The full ``(units, nq)`` attention |k·q (+1)| and contribution matrices in float64, plus provenance: what
    ``queries.scan_units`` computes block by block."""
    blocks = list(layer.blocks(dtype="float64"))
    key = np.concatenate([b.key for b in blocks])
    value = np.concatenate([b.value for b in blocks])
    q = np.asarray(queries, np.float64)
    r = np.asarray(readouts, np.float64)
    raw = key @ q.T
    contribution = (value @ r.T) * raw
    if layer.has_bias:
        contribution += np.concatenate([b.bias_value for b in blocks]) @ r.T
    attention = np.abs(raw + (1.0 if layer.has_bias else 0.0))
    prov = {f: np.concatenate([getattr(b, f) for b in blocks]) for f in PROVENANCE_FIELDS}
    return attention, contribution, prov


def iterated_predictions_loop(layer, tokens, n_applications: int, damping: float, update: str, d_y: int) -> list:
    """ŷ after each of 1..n applications of ``layer``, the plain way: the whole update of the whole tokens on every
    application, e <- e + λ·Δ(e) (Δ's y slots only with ``update="y"``), as ``iteration.iterated_predictions``."""
    import torch

    e, out = tokens, []
    with torch.no_grad():
        for _ in range(n_applications):
            delta = damping * layer.attention_update(e)
            if update == "y":
                delta = torch.cat([torch.zeros_like(delta[..., :-d_y]), delta[..., -d_y:]], dim=-1)
            e = e + delta
            out.append(-e[:, -1, -d_y:])
    return out
