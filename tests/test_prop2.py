"""Proposition 2: any feature map + the Prop. 1 layer = one GD step on the read-out = kernel regression."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from icl_gd.constructions.prop2 import (TunedReadout, check_feature_gd, feature_gd_model, feature_kernel,
                                 kernel_regression_prediction, optimal_kernel_eta, prop2_on_features, psd_part,
                                 random_mlp, trained_readout_kernel, tuned_readout_eta)
from icl_gd.constructions.verify import all_checks
from icl_gd.core.errors import ConfigError
from icl_gd.regression.sine.features import FeatureMapConfig, MetaLearnedReadout, feature_lsa_model
from icl_gd.regression.gd import optimal_one_step_eta
from icl_gd.regression.metrics import regression_loss


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


def _readout_step_by_hand(features, y, W0, eta, metric=None):
    """ŷ = W₀ m_q + (η/N) Σ_i (y_i - W₀ m_i) m_iᵀ S m_q for features (B, N+1, d_f) (the query's last), y (B, N, d_y)."""
    m, m_q = features[:, :-1], features[:, -1]
    S = torch.eye(m.shape[-1], dtype=m.dtype) if metric is None else metric
    residual = y - torch.einsum("of,bnf->bno", W0, m)
    return (torch.einsum("of,bf->bo", W0, m_q)
            + eta / m.shape[1] * torch.einsum("bno,bnf,fg,bg->bo", residual, m, S, m_q))


def test_meta_learned_readout_matches_construction_with_its_own_w0():
    """The baseline (one GD step on W₀'s read-out of m) is Prop. 2 with the same m, W₀ and η, and both are the
    step written out in features."""
    base = MetaLearnedReadout(FeatureMapConfig(d_features=12, hidden=20), eta=0.8, seed=1).double()
    with torch.no_grad():
        base.W0.copy_(torch.randn(1, 12, dtype=torch.float64))
    tokens = torch.randn(6, 11, 2, dtype=torch.float64)
    tokens[:, -1, 1] = 0
    eta = float(base.eta.detach())  # 0.8 as stored (a float32 parameter made float64)
    model = feature_gd_model(base.feature_map, 1, 12, 1, 10, eta, base.W0.detach())
    with torch.no_grad():
        torch.testing.assert_close(model(tokens), base(tokens), rtol=1e-12, atol=1e-12)
        want = _readout_step_by_hand(base.feature_map(tokens[..., :1]), tokens[:, :-1, 1:], base.W0, eta)
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


# ---------------------------------------------------------------------------------------------------- trained features
def _trained_like_model(d_features=6, seed=0):
    """A feature model as training leaves it: random LSA weights (large init) and a non-zero initial read-out."""
    model = feature_lsa_model(FeatureMapConfig(d_features=d_features, hidden=8), seed=seed, init_scale=1.0).double()
    with torch.no_grad():
        model.W0.copy_(torch.randn(1, d_features, generator=torch.Generator().manual_seed(seed), dtype=torch.float64))
    return model


def _sine_like_tasks(n_tasks, n_context, seed, dtype=torch.float64):
    gen = torch.Generator().manual_seed(seed)
    x = torch.rand(n_tasks, n_context + 1, 1, generator=gen, dtype=dtype) * 4 - 2
    y = torch.sin(x + torch.rand(n_tasks, 1, 1, generator=gen, dtype=dtype) * 3)
    tokens = torch.cat([x, y], dim=-1)
    tokens[:, -1, 1] = 0
    return tokens, y[:, -1]


def test_trained_readout_kernel_of_the_construction_is_eta_over_n_identity():
    """For the Prop. 1 weights on features, ŷ = (η/N) Σ y_i m_iᵀ m_q, so S = (η/N) I."""
    m = feature_lsa_model(FeatureMapConfig(d_features=6, hidden=8)).double()
    constructed = feature_gd_model(m.feature_map, 1, 6, 1, 10, 0.7)
    torch.testing.assert_close(trained_readout_kernel(constructed), 0.07 * torch.eye(6, dtype=torch.float64))
    S = torch.diag(torch.tensor([2.0, 1.0, -1.0], dtype=torch.float64))
    part, lost = psd_part(S)
    torch.testing.assert_close(part, torch.diag(torch.tensor([2.0, 1.0, 0.0], dtype=torch.float64)))
    assert lost == pytest.approx(0.25)


def test_trained_readout_kernel_is_the_y_times_feature_part_of_the_update():
    """With the other blocks of the products zeroed, a random layer's ŷ is exactly Σ_i y_i m_iᵀ S m_q."""
    model = _trained_like_model()
    model.W0 = None
    with torch.no_grad():
        for layer in model.lsa.layers:
            layer.W_K[..., 6:] = 0  # keys and queries read features only
            layer.W_Q[..., 6:] = 0
            layer.P[:, :6] = 0  # the update writes the y slot only ...
            layer.W_V[..., :6] = 0  # ... from the y slot only
    tokens, _ = _sine_like_tasks(5, 9, seed=1)
    features = model.feature_map(tokens[..., :1])
    S = trained_readout_kernel(model)
    want = torch.einsum("bno,bnf,fg,bg->bo", tokens[:, :-1, 1:], features[:, :-1], S, features[:, -1])
    with torch.no_grad():
        torch.testing.assert_close(model(tokens), want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("with_metric", [False, True])
def test_prop2_on_features_is_the_tuned_readout_step_of_the_models_features(with_metric):
    """The built model is one read-out step on the trained model's m from its W₀ (N = 7 read from the tokens,
    d_f from the model), with the η that minimises the tuning tasks' loss."""
    model = _trained_like_model()
    tokens, targets = _sine_like_tasks(256, 7, seed=2)
    metric = psd_part(trained_readout_kernel(model))[0] if with_metric else None
    built, eta = prop2_on_features(model, tokens, targets, metric)
    with torch.no_grad():
        features = model.feature_map(tokens[..., :1])
        want = _readout_step_by_hand(features, tokens[:, :-1, 1:], model.W0, eta, metric)
        torch.testing.assert_close(built(tokens), want, rtol=1e-10, atol=1e-12)
        loss = {e: regression_loss(_readout_step_by_hand(features, tokens[:, :-1, 1:], model.W0, e, metric), targets)
                for e in (eta, 0.98 * eta, 1.02 * eta)}
    assert loss[eta] < loss[0.98 * eta] and loss[eta] < loss[1.02 * eta]


def test_prop2_on_features_builds_in_the_tokens_dtype():
    model = _trained_like_model().float()
    tokens, targets = _sine_like_tasks(64, 10, seed=3, dtype=torch.float32)
    built, _ = prop2_on_features(model, tokens, targets)
    with torch.no_grad():
        assert built(tokens).dtype == torch.float32


def test_tuned_readout_eta_minimises_the_baselines_loss():
    base = MetaLearnedReadout(FeatureMapConfig(d_features=8, hidden=16), eta=0.3, seed=2).double()
    with torch.no_grad():
        base.W0.copy_(torch.randn(1, 8, generator=torch.Generator().manual_seed(4), dtype=torch.float64) * 0.3)
    tokens, targets = _sine_like_tasks(256, 10, seed=4)
    eta = tuned_readout_eta(base, tokens, targets)
    with torch.no_grad():
        torch.testing.assert_close(TunedReadout(base, float(base.eta))(tokens), base(tokens))
        loss = {e: regression_loss(TunedReadout(base, e)(tokens), targets) for e in (eta, 0.98 * eta, 1.02 * eta)}
    assert loss[eta] < loss[0.98 * eta] and loss[eta] < loss[1.02 * eta]
