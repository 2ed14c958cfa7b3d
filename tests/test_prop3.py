"""Proposition 3: softmax copy layer + Prop. 1 layer on separate tokens = one GD step, exact as β -> ∞."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from icl_gd.constructions.prop3 import (check_copied_tokens, check_copy_then_gd, copy_layer_weights, copy_leak_bound,
                                 prop3_model, score_gap)
from icl_gd.constructions.verify import all_checks
from icl_gd.core.errors import ConfigError
from icl_gd.regression.gd import gd_predict
from icl_gd.regression.separate.tokens import SeparateLayout, SinusoidalPositions
from icl_gd.regression.tasks import LinearRegressionTask, Stream


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


# ---------------------------------------------------------------------------------------------------- authors' layout
def test_authors_layout_construction_is_one_gd_step_in_float64_on_random_shapes():
    from icl_gd.constructions.prop3 import check_authors_layout

    gen = torch.Generator().manual_seed(31)
    for trial in range(6):
        d_x, n = int(torch.randint(1, 14, (1,), generator=gen)), int(torch.randint(2, 14, (1,), generator=gen))
        P = 2 * int(torch.randint(2, 7, (1,), generator=gen))
        result = check_authors_layout(d_x, n, P, 16, float(torch.rand((), generator=gen)) * 2, beta=None,
                                      seed=trial)
        assert result.passed and result.max_rel_error < 1e-12, (d_x, n, P, result)


def test_authors_layout_construction_in_float32():
    from icl_gd.constructions.prop3 import check_authors_layout

    result = check_authors_layout(10, 10, 10, 64, 0.6, beta=150.0, seed=3, dtype=torch.float32, tolerance=1e-5)
    assert result.passed, result


def test_authors_copy_layer_fills_input_tokens_and_zeroes_the_query_read_out():
    from icl_gd.constructions.prop3 import authors_prop3_model
    from icl_gd.regression.separate.tokens import AuthorsSeparateLayout

    task = LinearRegressionTask(d=4, n_context=6)
    data = task.sample(8, seed=1, stream=Stream.TEST, dtype=torch.float64)
    layout = AuthorsSeparateLayout(4, 6, own_label_slot=True)
    assert layout.d_model == 4 + 1 + 10 and layout.y_slot == slice(4, 5)
    tokens = layout.tokens(data)
    assert tokens[0, -1, -1] != 0  # the read-out coordinate starts at the positional offset
    with torch.no_grad():
        _, states = authors_prop3_model(layout, 1.0, beta=150.0)(tokens, return_tokens=True)
    copied = states[1]
    assert torch.allclose(copied[:, 0:-1:2, 4:5], data.y_context, atol=1e-13)  # x_i's slot now holds y_i
    assert torch.allclose(copied[:, -1, -1], torch.zeros(8, dtype=torch.float64), atol=1e-13)  # offset cancelled
    assert torch.equal(copied[:, :, :4], tokens[:, :, :4])  # inputs untouched


def test_authors_shared_label_slot_has_no_exact_construction_and_low_beta_is_not_exact():
    from icl_gd.constructions.prop3 import authors_prop3_model, check_authors_layout
    from icl_gd.regression.separate.tokens import AuthorsSeparateLayout

    with pytest.raises(ConfigError, match="own_label_slot"):
        authors_prop3_model(AuthorsSeparateLayout(10, 10), 1.0, beta=150.0)
    assert not check_authors_layout(10, 10, 10, 16, 0.6, beta=2.0, seed=0).passed  # a soft copy is not one step
