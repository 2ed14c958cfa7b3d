"""Proposition 3: softmax copy layer + Prop. 1 layer on separate tokens = one GD step, exact as β -> ∞."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from constructions.prop3 import (check_copied_tokens, check_copy_then_gd, copy_layer_weights, copy_leak_bound,
                                 prop3_model, score_gap)
from constructions.verify import all_checks
from icl_gd.errors import ConfigError
from icl_gd.gd import gd_predict
from icl_gd.separate_tokens import SeparateLayout, SinusoidalPositions
from icl_gd.tasks import LinearRegressionTask, Stream


@settings(max_examples=25, deadline=None)
@given(d_x=st.integers(1, 8), d_y=st.integers(1, 4), n=st.integers(1, 16), eta=st.floats(0.01, 3.0),
       seed=st.integers(0, 10_000))
def test_copy_then_gd_is_one_gd_step_float64(d_x, d_y, n, eta, seed):
    result = check_copy_then_gd(d_x, d_y, n, 4, eta, beta=25.0, seed=seed)
    assert result.max_rel_error <= 1e-12, result


@pytest.mark.parametrize("positions", [SinusoidalPositions(n_frequencies=1), SinusoidalPositions(n_frequencies=3)])
def test_fewer_frequencies_need_larger_beta_but_are_exact_in_the_limit(positions):
    layout = SeparateLayout(5, 1, 8, positions)
    beta = 40.0 / score_gap(layout)  # e^{-40}·15 ≈ 6e-17 off-target mass
    result = check_copy_then_gd(5, 1, 8, 8, 0.7, beta=beta, seed=1, positions=positions)
    assert result.max_rel_error <= 1e-12, result


def test_copied_tokens_float64_and_float32():
    assert check_copied_tokens(10, 1, 10, 16, beta=20.0, seed=0).max_rel_error <= 1e-12
    result = check_copy_then_gd(10, 1, 10, 64, 0.6, beta=20.0, seed=0, dtype=torch.float32, tolerance=1e-5)
    assert result.max_rel_error <= 1e-5, result


def test_score_gap_of_full_cyclic_encoding():
    # With F = N frequencies of period 2N+1, Σ_f cos(2π f m / T) = -1/2 for every m ≠ 0: Δ = N + 1/2.
    for n in (2, 5, 10):
        assert score_gap(SeparateLayout(1, 1, n)) == pytest.approx(n + 0.5, abs=1e-12)


def test_copy_error_shrinks_within_the_construction_bound():
    """|ŷ - ŷ_GD| ≤ ε max|y| (1 + 2 (η/N) Σ_i |x_i·x_q|) per task, ε = (2N-1) e^{-βΔ}, for every β."""
    d, n, eta = 10, 10, 0.6
    task = LinearRegressionTask(d=d, n_context=n)
    data = task.sample(256, seed=4, stream=Stream.TEST, dtype=torch.float64)
    layout = SeparateLayout(d, 1, n)
    tokens = layout.tokens(data)
    want = gd_predict(data.x_context, data.y_context, data.x_query, [eta])
    max_y = data.y_context.abs().amax(dim=(1, 2))
    dots = (data.x_context @ data.x_query[..., None])[..., 0].abs().sum(-1)
    errors = []
    for beta in (0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 4.0):
        with torch.no_grad():
            got = prop3_model(layout, eta, beta)(tokens)
        err = (got - want).abs()[:, 0]
        bound = copy_leak_bound(layout, beta) * max_y * (1 + 2 * eta / n * dots)
        assert torch.all(err <= bound * (1 + 1e-9) + 1e-14), beta  # + float64 round-off
        errors.append(float(err.max()))
    assert all(b < a for a, b in zip(errors, errors[1:])), errors
    assert errors[0] > 0.1 and errors[-1] < 1e-12  # far from GD when hot, at GD once βΔ ≫ 1


def test_bad_beta_raises():
    with pytest.raises(ConfigError, match="beta"):
        copy_layer_weights(SeparateLayout(2, 1, 3), beta=0.0)


def test_prop3_registered_in_verify():
    checks = [c for c in all_checks() if c.name.startswith("prop3:")]
    assert len(checks) >= 2 and all(c.run().passed for c in checks)
