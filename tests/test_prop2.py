"""Proposition 2: any feature map + the Prop. 1 layer = one GD step on the read-out = kernel regression."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from constructions.prop2 import (check_feature_gd, feature_gd_model, feature_kernel, kernel_regression_prediction,
                                 optimal_kernel_eta, random_mlp)
from constructions.verify import all_checks
from icl_gd.errors import ConfigError
from icl_gd.feature_models import FeatureMapConfig, MetaLearnedReadout
from icl_gd.gd import gd_predict, optimal_one_step_eta


@settings(max_examples=25, deadline=None)
@given(d_x=st.integers(1, 4), d_f=st.integers(1, 48), hidden=st.integers(0, 64), d_y=st.integers(1, 3),
       n=st.integers(1, 30), eta=st.floats(0.01, 3.0), activation=st.sampled_from(["relu", "gelu", "tanh"]),
       with_W0=st.booleans(), with_metric=st.booleans(), seed=st.integers(0, 10_000))
def test_feature_gd_is_readout_gd_and_kernel_regression_float64(d_x, d_f, hidden, d_y, n, eta, activation,
                                                                 with_W0, with_metric, seed):
    result = check_feature_gd(d_x, d_f, hidden, d_y, n, 4, eta, activation, with_W0, seed, with_metric)
    assert result.max_rel_error <= 1e-12, result


@settings(max_examples=10, deadline=None)
@given(d_f=st.integers(4, 40), n=st.integers(2, 20), seed=st.integers(0, 10_000))
def test_feature_gd_float32(d_f, n, seed):
    result = check_feature_gd(1, d_f, 32, 1, n, 8, 0.5, "gelu", True, seed, with_metric=seed % 2 == 0,
                              dtype=torch.float32, tolerance=1e-5)
    assert result.max_rel_error <= 1e-5, result


def test_kernel_is_feature_inner_product_and_symmetric():
    m = random_mlp(2, 8, 16, "tanh", seed=0)
    x = torch.randn(3, 5, 2, dtype=torch.float64)
    k = feature_kernel(m)
    gram = torch.stack([k(x, x[:, j]) for j in range(5)], dim=-1)  # (3, 5, 5)
    torch.testing.assert_close(gram, gram.transpose(1, 2), rtol=1e-13, atol=1e-13)
    torch.testing.assert_close(gram, m(x) @ m(x).transpose(1, 2), rtol=1e-13, atol=1e-13)


def test_meta_learned_readout_matches_construction_with_its_own_w0():
    """The baseline (one GD step on W₀'s read-out of m) is Prop. 2 with the same m, W₀ and η."""
    base = MetaLearnedReadout(FeatureMapConfig(d_features=12, hidden=20), eta=0.8, seed=1).double()
    with torch.no_grad():
        base.W0.copy_(torch.randn(1, 12, dtype=torch.float64))
    tokens = torch.randn(6, 11, 2, dtype=torch.float64)
    tokens[:, -1, 1] = 0
    eta = float(base.eta.detach())  # 0.8 as stored (a float32 parameter made float64)
    model = feature_gd_model(base.feature_map, 1, 12, 1, 10, eta, base.W0.detach())
    with torch.no_grad():
        torch.testing.assert_close(model(tokens), base(tokens), rtol=1e-12, atol=1e-12)
        m = base.feature_map(tokens[..., :1])
        want = gd_predict(m[:, :-1], tokens[:, :-1, 1:], m[:, -1], [eta], base.W0)
        torch.testing.assert_close(base(tokens), want, rtol=1e-12, atol=1e-12)


def test_kernel_prediction_without_prior_is_zero_on_zero_labels():
    m = random_mlp(1, 4, 8, "relu", seed=2)
    x = torch.randn(2, 6, 1, dtype=torch.float64)
    pred = kernel_regression_prediction(feature_kernel(m), x, torch.zeros(2, 6, 1, dtype=torch.float64),
                                        torch.randn(2, 1, dtype=torch.float64), 1.0)
    assert torch.equal(pred, torch.zeros(2, 1, dtype=torch.float64))


def test_prop2_registered_in_verify():
    names = [c.name for c in all_checks()]
    assert any(n.startswith("prop2:") for n in names)
    for check in all_checks():
        if check.name.startswith("prop2:"):
            assert check.run().passed


def test_bad_sizes_raise():
    with pytest.raises(ConfigError):
        feature_gd_model(random_mlp(1, 4, 0, "relu", 0), 1, 0, 1, 10, 1.0)
    with pytest.raises(ConfigError, match="activation"):
        FeatureMapConfig(activation="sigmoid")


def test_closed_form_kernel_eta_is_the_readout_eta_and_a_minimum():
    m = random_mlp(1, 10, 16, "gelu", seed=3)
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(64, 9, 1, generator=gen, dtype=torch.float64)
    y = torch.sin(x) * torch.rand(64, 1, 1, generator=gen, dtype=torch.float64)
    W0 = torch.randn(1, 10, generator=gen, dtype=torch.float64) * 0.1
    prior = lambda inputs: m(inputs) @ W0.T  # noqa: E731
    eta = optimal_kernel_eta(feature_kernel(m), x[:, :-1], y[:, :-1], x[:, -1], y[:, -1], prior)
    with torch.no_grad():
        f = m(x)
        reference = optimal_one_step_eta(f[:, :-1], y[:, :-1], f[:, -1], y[:, -1], W0)
    assert eta == pytest.approx(reference, rel=1e-10)

    def loss(e):
        with torch.no_grad():
            pred = kernel_regression_prediction(feature_kernel(m), x[:, :-1], y[:, :-1], x[:, -1], e, prior)
        return float(((pred - y[:, -1]) ** 2).mean())

    assert loss(eta) < loss(eta * 1.05) and loss(eta) < loss(eta * 0.95)


def test_bad_metric_shape_raises():
    with pytest.raises(ConfigError, match="metric"):
        feature_gd_model(random_mlp(1, 4, 0, "relu", 0), 1, 4, 1, 10, 1.0, metric=torch.eye(3, dtype=torch.float64))
