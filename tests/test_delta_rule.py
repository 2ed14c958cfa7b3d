"""The delta rule is online GD: DeltaNet, normalised writes and keys, Gated DeltaNet's decay, DeltaProduct's writes
per token and the dual form, each against its algorithm in float64 on random shapes (every prefix, every task,
relative error ≤ 1e-12), in float32 at a stated tolerance, with one-line errors for bad input, and each check seen
telling a wrong order, a wrong decay, a wrong step count and a wrong attention apart from the right ones."""

import re
import runpy
from pathlib import Path

import pytest
import torch

from icl_gd.constructions.delta_rule import IDENTITY_CHECKS, compare_each, error_scale, online_gd_weights
from icl_gd.constructions.prop1 import check_batch
from icl_gd.constructions.verify import all_checks
from icl_gd.core.errors import ConfigError
from icl_gd.regression.online.delta_rule import DeltaRuleLayer, DeltaRuleWeights, delta_rule_dual, delta_rule_states
from icl_gd.regression.online.algorithms import (normalised_lms_weights_per_token, online_gd_weights_per_token,
                                      predictions_per_token)
from icl_gd.regression.tokens import ConcatLayout

ROOT = Path(__file__).resolve().parents[1]
FLOAT64 = 1e-12
FLOAT32 = 5e-6  # η = 3 / d on inputs U(-1, 1)^d (η E‖x‖² = 1), the float32 test's shapes: measured up to 4.1e-7

# (B, N, d, d_y): a lone task and token, more outputs than inputs, N < d, N > d, wide
SHAPES = [(1, 1, 1, 1), (3, 7, 4, 2), (2, 5, 3, 6), (4, 6, 12, 1), (8, 24, 10, 1), (5, 30, 16, 3)]
ETAS = [0.03, 0.7, 3.0, 12.0]  # 12 on inputs U(-1, 1)^d: |1 - η‖x‖²| up to 12 d - 1, the weights grow without bound


def _task(B, N, d, d_y, seed=0, dtype=torch.float64):
    data, _ = check_batch(d, d_y, N, B, seed, with_W0=False, dtype=dtype)
    return data, ConcatLayout(d, d_y).tokens(data)


def _rel(actual, expected, keep=2, scale=None):
    """The largest relative error of any (prefix, task) slice (``compare_each``)."""
    return compare_each(actual.double(), expected, 1.0, keep, scale).max_rel_error


def _assert_layer_runs(layer, tokens, data, weights, tolerance=FLOAT64):
    assert _rel(layer.states(tokens), weights) <= tolerance
    assert _rel(layer.predictions_per_token(tokens), predictions_per_token(weights, data.x_query), keep=1) <= tolerance
    assert _rel(layer(tokens)[None], predictions_per_token(weights, data.x_query)[-1:], keep=1) <= tolerance


# ------------------------------------------------------------------------------------------------------- float64
@pytest.mark.parametrize("eta", ETAS)
@pytest.mark.parametrize("B,N,d,d_y", SHAPES)
def test_deltanet_is_online_gd_float64(B, N, d, d_y, eta):
    data, tokens = _task(B, N, d, d_y, seed=N)
    layer = DeltaRuleLayer(online_gd_weights(d, d_y, eta))
    _assert_layer_runs(layer, tokens, data, online_gd_weights_per_token(data.x_context, data.y_context, eta))


@pytest.mark.parametrize("B,N,d,d_y", SHAPES)
def test_normalised_pairs_are_normalised_lms_float64(B, N, d, d_y):
    data, tokens = _task(B, N, d, d_y, seed=N + 1)
    eta = torch.linspace(0.05, 3.0, N, dtype=torch.float64)  # a step size per token
    layer = DeltaRuleLayer(online_gd_weights(d, d_y, eta[:, None], normalise="pair"))
    _assert_layer_runs(layer, tokens, data, normalised_lms_weights_per_token(data.x_context, data.y_context, eta))


@pytest.mark.parametrize("B,N,d,d_y", SHAPES)
def test_normalised_keys_are_online_gd_on_unit_norm_inputs_float64(B, N, d, d_y):
    data, tokens = _task(B, N, d, d_y, seed=N + 2)
    x = data.x_context
    layer = DeltaRuleLayer(online_gd_weights(d, d_y, 0.8, normalise="keys"))
    weights = online_gd_weights_per_token(x / x.norm(dim=-1, keepdim=True), data.y_context, 0.8)
    _assert_layer_runs(layer, tokens, data, weights)


def test_normalised_keys_alone_are_not_normalised_lms():
    """DeltaNet's key normalisation leaves the value as it is: on the raw inputs that is not normalised LMS (which
    divides the value by the key's norm as well)."""
    data, tokens = _task(4, 12, 5, 2, seed=3)
    nlms = normalised_lms_weights_per_token(data.x_context, data.y_context, 0.8)
    keys_only = DeltaRuleLayer(online_gd_weights(5, 2, 0.8, normalise="keys")).states(tokens)
    pair = DeltaRuleLayer(online_gd_weights(5, 2, 0.8, normalise="pair")).states(tokens)
    assert _rel(pair, nlms) <= FLOAT64 and _rel(keys_only, nlms) > 0.05


@pytest.mark.parametrize("B,N,d,d_y", SHAPES)
def test_gated_deltanet_is_online_gd_with_weight_decay_float64(B, N, d, d_y):
    data, tokens = _task(B, N, d, d_y, seed=N + 3)
    gen = torch.Generator().manual_seed(N)
    alpha = torch.rand(N, generator=gen, dtype=torch.float64)  # a decay per token in [0, 1]
    eta = 10 ** (2 * torch.rand(N, 1, generator=gen, dtype=torch.float64) - 1)  # a step size per token in [0.1, 10]
    layer = DeltaRuleLayer(online_gd_weights(d, d_y, eta, decay=alpha))
    _assert_layer_runs(layer, tokens, data,
                       online_gd_weights_per_token(data.x_context, data.y_context, eta, decay=alpha))


@pytest.mark.parametrize("decay", [1.0, 0.9])
@pytest.mark.parametrize("n_h", [1, 2, 3, 5])
@pytest.mark.parametrize("B,N,d,d_y", SHAPES)
def test_deltaproduct_is_several_gd_steps_per_token_float64(B, N, d, d_y, n_h, decay):
    data, tokens = _task(B, N, d, d_y, seed=N + 4)
    eta = torch.linspace(0.05, 2.0, N * n_h, dtype=torch.float64).reshape(N, n_h)  # per token and write
    layer = DeltaRuleLayer(online_gd_weights(d, d_y, eta, decay=decay, steps_per_token=n_h))
    weights = online_gd_weights_per_token(data.x_context, data.y_context, eta, decay=decay, steps_per_token=n_h)
    _assert_layer_runs(layer, tokens, data, weights)


@pytest.mark.parametrize("eta", ETAS)
@pytest.mark.parametrize("B,N,d,d_y", SHAPES)
def test_dual_form_is_attention_over_keys_with_the_errors_float64(B, N, d, d_y, eta):
    """S_N q = Σ_t β_t e_t (k_tᵀ q), e_t = v_t - S_{t-1} k_t: the errors against the recurrence's, the read-out
    against the layer's and against the sum written out."""
    data, tokens = _task(B, N, d, d_y, seed=N + 5)
    layer = DeltaRuleLayer(online_gd_weights(d, d_y, eta))
    writes = layer.writes(tokens)
    dual = delta_rule_dual(writes)
    k, v, q = writes.keys[:, :, 0], writes.values[:, :, 0], writes.query
    S = layer.states(tokens)  # (N+1, B, d_y, d)
    errors = v - torch.einsum("tbvk,btk->btv", S[:-1], k)
    scale = error_scale(k, v, writes.beta[..., 0], errors).transpose(0, 1)  # the size of the terms e_t sums
    assert _rel(dual.errors[:, :, 0].transpose(0, 1), errors.transpose(0, 1), scale=scale) <= FLOAT64
    written_out = (eta * errors * (k @ q[..., None])).sum(1)
    assert _rel(dual.output[None], layer(tokens)[None], keep=1) <= FLOAT64
    assert _rel(written_out[None], layer(tokens)[None], keep=1) <= FLOAT64


@pytest.mark.parametrize("n_h", [1, 3])
@pytest.mark.parametrize("B,N,d,d_y", SHAPES)
def test_dual_form_with_decay_and_writes_per_token_float64(B, N, d, d_y, n_h):
    data, tokens = _task(B, N, d, d_y, seed=N + 6)
    gen = torch.Generator().manual_seed(N)
    alpha = torch.rand(N, generator=gen, dtype=torch.float64)
    alpha[N // 2] = 0.0  # a full reset
    eta = 0.05 + 2 * torch.rand(N, n_h, generator=gen, dtype=torch.float64)
    layer = DeltaRuleLayer(online_gd_weights(d, d_y, eta, decay=alpha, steps_per_token=n_h))
    assert _rel(delta_rule_dual(layer.writes(tokens)).output[None], layer(tokens)[None], keep=1) <= FLOAT64


def test_the_registered_checks_pass():
    names = {c.name for c in IDENTITY_CHECKS}
    registered = [c for c in all_checks() if c.name in names]
    assert len(registered) == len(IDENTITY_CHECKS) == 6
    for check in registered:
        result = check.run()
        assert result.passed and result.tolerance == FLOAT64, (check.name, result)


# ------------------------------------------------------------------------------------------------------- float32
@pytest.mark.parametrize("variant", ["deltanet", "pair", "gated", "product", "dual"])
@pytest.mark.parametrize("B,N,d,d_y", SHAPES[1:])
def test_float32_layers_are_close_to_the_float64_algorithms(B, N, d, d_y, variant):
    data, tokens = _task(B, N, d, d_y, seed=N + 7)
    x, y, eta = data.x_context, data.y_context, 3.0 / d  # η E‖x‖² = 1: the weights converge (float32 would overflow
    # where they grow as they may in float64, by up to |1 - η‖x‖²| a token)
    alpha = torch.linspace(0.6, 1.0, N, dtype=torch.float64)
    weights, want = {
        "deltanet": (online_gd_weights(d, d_y, eta), online_gd_weights_per_token(x, y, eta)),
        "dual": (online_gd_weights(d, d_y, eta), online_gd_weights_per_token(x, y, eta)),
        "pair": (online_gd_weights(d, d_y, eta, normalise="pair"), normalised_lms_weights_per_token(x, y, eta)),
        "gated": (online_gd_weights(d, d_y, eta, decay=alpha), online_gd_weights_per_token(x, y, eta, decay=alpha)),
        "product": (online_gd_weights(d, d_y, eta, steps_per_token=3),
                    online_gd_weights_per_token(x, y, eta, steps_per_token=3)),
    }[variant]
    layer = DeltaRuleLayer(weights)  # float64 weights: they follow the float32 tokens
    tokens32 = tokens.float()
    if variant == "dual":
        got = delta_rule_dual(layer.writes(tokens32)).output
        assert got.dtype == torch.float32
        assert _rel(got[None], predictions_per_token(want, data.x_query)[-1:], keep=1) <= FLOAT32
        return
    assert layer.states(tokens32).dtype == torch.float32
    _assert_layer_runs(layer, tokens32, data, want, tolerance=FLOAT32)


# -------------------------------------------------------------------------------------------- the checks can fail
def test_a_wrong_order_of_tokens_is_seen():
    """Online GD depends on the order: the layer on the context read backwards misses the algorithm."""
    data, tokens = _task(4, 10, 5, 1, seed=9)
    backwards = torch.cat([tokens[:, :-1].flip(1), tokens[:, -1:]], dim=1)
    want = online_gd_weights_per_token(data.x_context, data.y_context, 0.5)
    layer = DeltaRuleLayer(online_gd_weights(5, 1, 0.5))
    assert _rel(layer.states(tokens), want) <= FLOAT64 and _rel(layer.states(backwards)[-1:], want[-1:]) > 0.01


def test_a_wrong_decay_or_step_count_is_seen():
    data, tokens = _task(4, 10, 5, 2, seed=10)
    x, y = data.x_context, data.y_context
    gated = DeltaRuleLayer(online_gd_weights(5, 2, 0.5, decay=0.8)).states(tokens)
    assert _rel(gated, online_gd_weights_per_token(x, y, 0.5, decay=0.8)) <= FLOAT64
    assert _rel(gated[1:], online_gd_weights_per_token(x, y, 0.5)[1:]) > 0.01
    product = DeltaRuleLayer(online_gd_weights(5, 2, 0.5, steps_per_token=2)).states(tokens)
    assert _rel(product[1:], online_gd_weights_per_token(x, y, 1.0)[1:]) > 0.01  # two steps of η ≠ one of 2η


def test_attention_with_the_values_instead_of_the_errors_is_seen():
    """Linear attention over the same keys with the values themselves (Σ β v_t k_tᵀ q) is not the delta rule."""
    data, tokens = _task(4, 10, 5, 1, seed=11)
    layer = DeltaRuleLayer(online_gd_weights(5, 1, 0.5))
    w = layer.writes(tokens)
    hebbian = (0.5 * w.values[:, :, 0] * (w.keys[:, :, 0] @ w.query[..., None])).sum(1)
    assert _rel(hebbian[None], layer(tokens)[None], keep=1) > 0.01


# ------------------------------------------------------------------------------------------------------ bad input
@pytest.mark.parametrize("eta, message", [(-0.1, "must be finite and non-negative, got -0.1"),
                                          (float("nan"), "must be finite and non-negative, got nan"),
                                          (float("inf"), "must be finite and non-negative, got inf")])
def test_a_bad_step_size_is_a_one_line_error(eta, message):
    data, tokens = _task(2, 4, 3, 1)
    for call in (lambda: online_gd_weights_per_token(data.x_context, data.y_context, eta),
                 lambda: normalised_lms_weights_per_token(data.x_context, data.y_context, eta),
                 lambda: DeltaRuleLayer(online_gd_weights(3, 1, eta))(tokens)):
        with pytest.raises(ConfigError, match=re.escape(message)) as info:
            call()
        assert "\n" not in str(info.value)


def test_bad_schedules_and_shapes_are_one_line_errors():
    data, tokens = _task(2, 4, 3, 1)
    x, y = data.x_context, data.y_context
    cases = [
        (lambda: online_gd_weights_per_token(x, y, 0.5, decay=1.5), "the decay α must be in [0, 1], got 1.5"),
        (lambda: online_gd_weights_per_token(x, y, 0.5, decay=-0.5), "the decay α must be in [0, 1], got -0.5"),
        (lambda: online_gd_weights_per_token(x, y[:, :3], 0.5), "must agree on B and N"),
        (lambda: online_gd_weights_per_token(x, y[:1], 0.5), "must agree on B and N"),
        (lambda: online_gd_weights_per_token(x, y, torch.ones(5)), "does not broadcast to (2, 4, 1)"),
        (lambda: online_gd_weights_per_token(x, y, 0.5, steps_per_token=0), "steps_per_token must be a positive"),
        (lambda: normalised_lms_weights_per_token(x * 0, y, 0.5), "normalised LMS needs nonzero inputs"),
        (lambda: DeltaRuleLayer(online_gd_weights(3, 1, 0.5))(tokens[..., :3]), "reads tokens (B, N+1, 4)"),
        (lambda: DeltaRuleLayer(online_gd_weights(3, 1, torch.ones(3, 2)))(tokens), "does not broadcast to (2, 4, 1)"),
        (lambda: DeltaRuleLayer(online_gd_weights(3, 1, 0.5, normalise="pair"))(tokens * 0), "nonzero keys"),
        (lambda: online_gd_weights(3, 1, 0.5, normalise="values"), "normalise must be 'none', 'keys' or 'pair'"),
        (lambda: online_gd_weights(0, 1, 0.5), "d_x must be a positive integer"),
        (lambda: DeltaRuleWeights(torch.ones(3, 4), torch.ones(1, 3, 4), torch.ones(1, 1, 5), 0.5),
         "delta-rule weights disagree"),
        (lambda: DeltaRuleWeights(torch.ones(3, 4), torch.ones(3, 4), torch.ones(1, 1, 4), 0.5),
         "delta-rule weights need W_Q (d_k, D)"),
    ]
    for call, message in cases:
        with pytest.raises(ConfigError, match=re.escape(message)) as info:
            call()
        assert "\n" not in str(info.value)


def test_the_recurrence_starts_from_zero_and_the_empty_context_predicts_zero():
    data, tokens = _task(3, 4, 2, 1)
    layer = DeltaRuleLayer(online_gd_weights(2, 1, 0.5))
    assert layer(tokens[:, -1:]).abs().max() == 0  # only the query: S_0 q = 0
    w = layer.writes(tokens)
    assert delta_rule_states(w.keys, w.values, w.beta, w.alpha)[0].abs().max() == 0


# ----------------------------------------------------------------------------------------------------------- docs
def test_the_docs_page_example_runs(tmp_path):
    page = (ROOT / "docs" / "online-learners.md").read_text()
    code = re.search(r"<!-- online-learners-example -->\n```python\n(.*?)```", page, re.DOTALL).group(1)
    (tmp_path / "example.py").write_text(code)
    namespace = runpy.run_path(str(tmp_path / "example.py"))
    assert len(namespace["errors"]) == 6 and max(namespace["errors"].values()) <= FLOAT64
