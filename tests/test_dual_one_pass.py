"""Less reading, same numbers: a selected pass over the units reads only the units it picks, the scorers share the
pass's k·q instead of computing it again, and a compressed layer's keys are read once per layer."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from icl_gd.constructions.dual_form import DualCase, train_recorded
from icl_gd.core.errors import ConfigError
from icl_gd.dual.analysis import TheirScoreTotals
from icl_gd.dual.layer import PROVENANCE_FIELDS, dual_layer
from icl_gd.dual.removal import UnitSelection, removal_delta
from icl_gd.dual.scan import ScoreFunction, scan_units


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """A three-layer recorded run: ``input`` compressed (one key per example), ``hidden`` and ``output`` not."""
    return train_recorded(DualCase(), tmp_path_factory.mktemp("recorded"))


@pytest.mark.parametrize("name", ["input", "hidden", "output"])
def test_selected_blocks_are_exactly_the_picked_units_of_the_whole_pass(recorded, name):
    """Keys, values and provenance of a selected pass equal the whole pass's units masked afterwards, bit for bit
    (a mask applied to the wrong column, or a key gathered for the wrong example, moves them)."""
    layer = dual_layer(recorded.store[name])
    assert bool(layer.store.info["compressed"]) == (name == "input")
    steps = layer.n_steps
    selection = UnitSelection(steps=(steps // 3, 2 * steps // 3), classes=(0, 1, 2, 3, 4))
    whole = list(layer.blocks(block_rows=7))
    masks = [selection.mask(b) for b in whole]
    picked = list(layer.blocks(block_rows=7, select=selection.mask))
    assert 0 < sum(m.sum() for m in masks) < sum(len(m) for m in masks)  # some picked, some not
    assert len(picked) < len(whole)  # whole blocks skipped
    for field in ("row", "key", "value", "bias_value", *PROVENANCE_FIELDS):
        expected = np.concatenate([getattr(b, field)[m] for b, m in zip(whole, masks)])
        got = np.concatenate([getattr(b, field) for b in picked])
        assert got.dtype == expected.dtype and np.array_equal(got, expected), field


def test_removal_delta_is_the_sum_over_the_selected_units(recorded):
    """ΔW = Σ over the selected units of v kᵀ, in float64, against a dense sum over the whole pass's units."""
    layer = dual_layer(recorded.store["hidden"])
    selection = UnitSelection(steps=(2, layer.n_steps - 1), classes=(1, 3, 5, 7))
    dW, db = removal_delta(layer, selection, block_rows=7)
    units = list(layer.blocks())
    mask = np.concatenate([selection.mask(b) for b in units])
    key, value, bias = (np.concatenate([getattr(b, f) for b in units])[mask] for f in ("key", "value", "bias_value"))
    np.testing.assert_allclose(dW, value.T @ key, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(db, bias.sum(0), rtol=1e-12, atol=1e-15)
    assert np.abs(dW).max() > 0
    nothing = removal_delta(layer, UnitSelection(steps=(layer.n_steps, layer.n_steps)))
    assert not nothing[0].any() and not nothing[1].any()


def test_compact_keys_are_read_once_and_read_only(recorded):
    layer = dual_layer(recorded.store["input"])
    ids, keys = layer.compact_keys()
    assert layer.compact_keys()[1] is keys
    with pytest.raises(ValueError):
        keys[0, 0] = 1.0
    assert np.all(np.diff(ids) > 0)


def test_scorers_that_take_dot_get_the_plain_products_and_others_still_work(recorded):
    """A scorer whose add takes ``dot`` gets k·q without the bias's +1 (so |dot + 1| is the attention); a scorer
    written for three arguments is still fed."""
    layer = dual_layer(recorded.store["hidden"])
    assert layer.has_bias
    q = np.random.default_rng(0).normal(size=(4, int(layer.store.info["in_features"])))
    r = np.ones((4, int(layer.store.info["out_features"])))
    dots, attentions, plain = [], [], []

    def with_dot(block, attention, contribution, dot):
        dots.append(dot.clone())
        attentions.append(attention.clone())

    scan_units(layer, q, r, k=2, block_rows=7, scorers=[ScoreFunction(with_dot),
                                                        ScoreFunction(lambda b, a, c: plain.append(len(b.row)))])
    key = np.concatenate([b.key for b in layer.blocks()])
    dot, attention = torch.cat(dots, 1).double().numpy(), torch.cat(attentions, 1).double().numpy()
    np.testing.assert_allclose(dot, q @ key.T, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(attention, np.abs(torch.cat(dots, 1).add(1.0).numpy()).astype(np.float64))
    assert sum(plain) == len(key)


def test_their_score_from_the_pass_equals_their_score_computed_alone(recorded):
    """TheirScoreTotals fed the pass's k·q gives the bits it computes on its own (the same float32 product)."""
    layer = dual_layer(recorded.store["hidden"])
    q = np.random.default_rng(1).normal(size=(6, int(layer.store.info["in_features"])))
    r = np.ones((6, int(layer.store.info["out_features"])))
    alone, riding = TheirScoreTotals(q, 10), TheirScoreTotals(q, 10)
    for block in layer.blocks(block_rows=7, dtype="float32"):
        alone.add(block)
    scan_units(layer, q, r, k=2, block_rows=7, scorers=[riding])
    np.testing.assert_allclose(riding.by_class(), alone.by_class(), rtol=1e-6, atol=0)
    assert riding.by_class().sum() > 0
    with pytest.raises(ConfigError, match="6"):
        scan_units(layer, q[:3], r[:3], k=2, block_rows=7, scorers=[TheirScoreTotals(q, 10)])
