"""The mesa layer is ridge regression: its Sherman-Morrison fast weights against a direct solve on every prefix of
the context, in float64 on random shapes (relative error ≤ 1e-12) and in float32 at a stated tolerance, its read-out
against ``RidgePredictor``, one-line errors for bad input, and the check seen telling a wrong λ apart."""

import re

import pytest
import torch

from icl_gd.constructions.delta_rule import compare_each
from icl_gd.constructions.mesa import IDENTITY_CHECKS, ridge_weights
from icl_gd.constructions.prop1 import check_batch
from icl_gd.constructions.verify import all_checks
from icl_gd.core.errors import ConfigError
from icl_gd.regression.baselines import RidgePredictor
from icl_gd.regression.online.mesa import MesaLayer, MesaWeights, mesa_fast_weights
from icl_gd.regression.online.algorithms import predictions_per_token, ridge_weights_per_prefix
from icl_gd.regression.tokens import ConcatLayout

FLOAT64 = 1e-12
FLOAT32 = 5e-5  # λ in {0.3, 3}, inputs U(-1, 1), the float32 test's shapes: measured up to 5.8e-6

# (B, N, d, d_y): a lone task and token, N < d (the Gram singular without λ), N > d, more outputs than inputs, wide
SHAPES = [(1, 1, 1, 1), (3, 4, 9, 2), (4, 20, 5, 1), (2, 6, 3, 7), (8, 40, 12, 1), (5, 30, 16, 3)]


def _task(B, N, d, d_y, seed=0):
    data, _ = check_batch(d, d_y, N, B, seed, with_W0=False)
    return data, ConcatLayout(d, d_y).tokens(data)


def _rel(actual, expected, keep=2):
    return compare_each(actual.double(), expected, 1.0, keep).max_rel_error


@pytest.mark.parametrize("lam", [0.3, 1.0, 3.0])
@pytest.mark.parametrize("B,N,d,d_y", SHAPES)
def test_mesa_layer_is_ridge_at_every_prefix_float64(B, N, d, d_y, lam):
    data, tokens = _task(B, N, d, d_y, seed=N)
    layer = MesaLayer(ridge_weights(d, d_y, lam))
    want = ridge_weights_per_prefix(data.x_context, data.y_context, lam)
    assert _rel(layer.fast_weights(tokens), want) <= FLOAT64
    assert _rel(layer.predictions_per_token(tokens), predictions_per_token(want, data.x_query), keep=1) <= FLOAT64
    ridge = RidgePredictor(ConcatLayout(d, d_y), lam)(tokens)
    assert _rel(layer(tokens)[None], ridge[None], keep=1) <= FLOAT64


@pytest.mark.parametrize("B,N,d,d_y", SHAPES[1:])
def test_float32_mesa_layer_is_close_to_float64_ridge(B, N, d, d_y):
    data, tokens = _task(B, N, d, d_y, seed=N + 1)
    for lam in (0.3, 3.0):
        layer = MesaLayer(ridge_weights(d, d_y, lam))  # float64 weights: they follow the float32 tokens
        got = layer.fast_weights(tokens.float())
        assert got.dtype == torch.float32
        want = ridge_weights_per_prefix(data.x_context, data.y_context, lam)
        assert _rel(got, want) <= FLOAT32
        assert _rel(layer.predictions_per_token(tokens.float()), predictions_per_token(want, data.x_query),
                    keep=1) <= FLOAT32


def test_the_registered_check_passes():
    (check,) = [c for c in all_checks() if c.name == IDENTITY_CHECKS[0].name]
    result = check.run()
    assert result.passed and result.tolerance == FLOAT64, result


def test_a_wrong_regulariser_or_order_is_seen():
    """The fast weights depend on λ (and, before the last token, on which tokens came first)."""
    data, tokens = _task(4, 10, 5, 2, seed=3)
    got = MesaLayer(ridge_weights(5, 2, 1.0)).fast_weights(tokens)
    x, y = data.x_context, data.y_context
    assert _rel(got, ridge_weights_per_prefix(x, y, 1.0)) <= FLOAT64
    assert _rel(got[1:], ridge_weights_per_prefix(x, y, 1.5)[1:]) > 0.01
    backwards = ridge_weights_per_prefix(x.flip(1), y.flip(1), 1.0)
    assert _rel(got[1:-1], backwards[1:-1]) > 0.01 and _rel(got[-1:], backwards[-1:]) <= FLOAT64


def test_the_empty_context_predicts_zero_and_p0_is_the_inverse_regulariser():
    data, tokens = _task(3, 4, 2, 1)
    layer = MesaLayer(ridge_weights(2, 1, 0.5))
    assert layer(tokens[:, -1:]).abs().max() == 0
    # one token: Φ_1 = v kᵀ / (λ + kᵀk) in closed form (Sherman-Morrison from P_0 = I / λ)
    k, v = data.x_context[:, :1], data.y_context[:, :1]
    one = v.transpose(1, 2) @ k / (0.5 + (k * k).sum(-1, keepdim=True))
    assert _rel(mesa_fast_weights(k, v, 0.5)[1:], one[None]) <= FLOAT64


@pytest.mark.parametrize("lam", [0.0, -1.0, float("nan"), float("inf")])
def test_a_bad_regulariser_is_a_one_line_error(lam):
    data, tokens = _task(2, 4, 3, 1)
    x, y = data.x_context, data.y_context
    for call in (lambda: ridge_weights(3, 1, lam), lambda: ridge_weights_per_prefix(x, y, lam),
                 lambda: mesa_fast_weights(x, y, lam)):
        with pytest.raises(ConfigError, match="λ must be") as info:
            call()
        assert "\n" not in str(info.value)


def test_bad_shapes_are_one_line_errors():
    data, tokens = _task(2, 4, 3, 1)
    cases = [
        (lambda: MesaLayer(ridge_weights(3, 1, 1.0))(tokens[..., :3]), "reads tokens (B, N+1, 4)"),
        (lambda: ridge_weights_per_prefix(data.x_context, data.y_context[:, :2], 1.0), "must agree on B and N"),
        (lambda: MesaWeights(torch.ones(3, 4), torch.ones(2, 4), torch.ones(1, 4), 1.0), "mesa weights need"),
        (lambda: MesaWeights(torch.ones(3, 4), torch.ones(3, 4), torch.ones(1, 5), 1.0), "mesa weights need"),
        (lambda: ridge_weights(3, 0, 1.0), "d_y must be a positive integer"),
    ]
    for call, message in cases:
        with pytest.raises(ConfigError, match=re.escape(message)) as info:
            call()
        assert "\n" not in str(info.value)
