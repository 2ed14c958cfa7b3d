import pytest
import torch

from icl_gd.baselines import GDPredictor, LeastSquaresPredictor, RidgePredictor, ZeroPredictor
from icl_gd.errors import ConfigError
from icl_gd.gd import (gd_predict, gd_predictions_per_step, gd_step, optimal_one_step_eta, regression_gradient,
                       tune_gd_etas)
from icl_gd.metrics import regression_loss
from icl_gd.tasks import LinearRegressionTask, NormalInputs, Stream
from icl_gd.tokens import ConcatLayout, ConcatTokenTask


def _data(n=4000, seed=0, **kw):
    task = LinearRegressionTask(**kw)
    return task.sample(n, seed, 0, Stream.TUNE, dtype=torch.float64)


def test_gradient_matches_autograd():
    b = _data(8, d_y=3)
    W = torch.randn(8, 3, 10, dtype=torch.float64, requires_grad=True)
    loss = 0.5 * ((b.x_context @ W.transpose(1, 2) - b.y_context) ** 2).sum((1, 2)) / b.x_context.shape[1]
    (auto,) = torch.autograd.grad(loss.sum(), W)
    torch.testing.assert_close(regression_gradient(W.detach(), b.x_context, b.y_context), auto)


def test_gd_converges_to_least_squares_when_overdetermined():
    b = _data(16, n_context=60, d=5)
    W = torch.zeros(16, 1, 5, dtype=torch.float64)
    for _ in range(3000):
        W = gd_step(W, b.x_context, b.y_context, 8.0)
    torch.testing.assert_close(W, b.w, atol=1e-8, rtol=1e-8)
    per_step = gd_predictions_per_step(b.x_context, b.y_context, b.x_query, [1.0, 2.0])
    assert per_step.shape == (3, 16, 1) and (per_step[0] == 0).all()


def test_closed_form_eta_is_the_minimum_of_the_quadratic():
    b = _data()
    eta = optimal_one_step_eta(b.x_context, b.y_context, b.x_query, b.y_query)

    def loss(e):
        return regression_loss(gd_predict(b.x_context, b.y_context, b.x_query, [e]), b.y_query)

    assert loss(eta) < loss(eta * 1.01) and loss(eta) < loss(eta * 0.99)
    assert 5.7 < eta < 6.4  # PROTOCOL §2: η* ≈ 6.06 for the default task


def test_gaussian_inputs_optimum_matches_theory():
    # PROTOCOL §2: x ~ N(0, I) gives η* = N/(N+d+1) (0.476 for d = N = 10), up to sampling error.
    b = _data(40_000, inputs=NormalInputs())
    eta = optimal_one_step_eta(b.x_context, b.y_context, b.x_query, b.y_query)
    assert abs(eta - 10 / 21) < 0.02


def test_tuned_k_step_etas_beat_the_one_step_eta_and_shared_vs_per_step():
    b = _data(3000)
    args = (b.x_context, b.y_context, b.x_query, b.y_query)
    eta1 = optimal_one_step_eta(*args)
    shared = tune_gd_etas(*args, n_steps=2, shared=True)
    per_step = tune_gd_etas(*args, n_steps=2, shared=False)
    assert len(shared) == 2 and shared[0] == shared[1]

    def loss(etas):
        return regression_loss(gd_predict(b.x_context, b.y_context, b.x_query, etas), b.y_query)

    assert loss(shared) < loss([eta1, eta1])
    assert loss(per_step) <= loss(shared) + 1e-9
    assert tune_gd_etas(*args, n_steps=1) == [eta1]
    with pytest.raises(ConfigError):
        tune_gd_etas(*args, n_steps=0)


def test_baselines_share_one_call():
    task = LinearRegressionTask(d=5, n_context=12)
    batch, tokens = ConcatTokenTask(task).batch_tokens(64, 0, dtype=torch.float64)
    layout = ConcatLayout(5)
    torch.testing.assert_close(LeastSquaresPredictor(layout)(tokens), batch.y_query)  # noiseless, N > d
    ridge = RidgePredictor(layout, 1e-9)(tokens)
    torch.testing.assert_close(ridge, batch.y_query, atol=1e-6, rtol=1e-6)
    assert (ZeroPredictor(layout)(tokens) == 0).all()
    gd = GDPredictor(layout, [1.0, 0.5])(tokens)
    torch.testing.assert_close(gd, gd_predict(batch.x_context, batch.y_context, batch.x_query, [1.0, 0.5]))
    with pytest.raises(ConfigError):
        RidgePredictor(layout, 0.0)
    with pytest.raises(ConfigError):
        GDPredictor(layout, [])
