import numpy as np
import pytest
import torch

from icl_gd.regression.baselines import GDPredictor, LeastSquaresPredictor, RidgePredictor, ZeroPredictor
from icl_gd.core.errors import ConfigError
from icl_gd.regression.gd import gd_predict, gd_predictions_per_step, gd_step, optimal_one_step_eta, regression_gradient
from icl_gd.regression.tuning import tune_gd
from icl_gd.regression.metrics import regression_loss
from icl_gd.regression.tasks import LinearRegressionTask, NormalInputs, Stream
from icl_gd.regression.tokens import ConcatLayout, ConcatTokenTask


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
    assert 5.7 < eta < 6.4  # η* ≈ 6.06 for the default task (d = N = 10, x ~ U(-0.5, 0.5))


def test_gaussian_inputs_optimum_matches_theory():
    # x ~ N(0, I) gives η* = N/(N+d+1) (0.476 for d = N = 10), up to sampling error.
    b = _data(40_000, inputs=NormalInputs())
    eta = optimal_one_step_eta(b.x_context, b.y_context, b.x_query, b.y_query)
    assert abs(eta - 10 / 21) < 0.02


def _one_step_by_hand(x, y, x_query, eta, W0=None):
    """ŷ = W0 x_q + (η/N) Σ_i (y_i - W0 x_i) x_iᵀ x_q, from inner products alone."""
    if W0 is None:
        W0 = torch.zeros(y.shape[-1], x.shape[-1], dtype=x.dtype)
    residual = y - torch.einsum("od,bnd->bno", W0, x)
    return torch.einsum("od,bd->bo", W0, x_query) + eta / x.shape[1] * torch.einsum(
        "bno,bnd,bd->bo", residual, x, x_query)


def _two_steps_by_hand(x, y, x_query, eta_1, eta_2):
    """Two GD steps from 0 as a polynomial in the inner products: W_2 = (η₁+η₂)/N YᵀX - η₁η₂/N² YᵀX XᵀX, so
    ŷ = (η₁+η₂)/N Σ_i y_i x_iᵀx_q - η₁η₂/N² Σ_ij y_j (x_jᵀx_i)(x_iᵀx_q)."""
    N = x.shape[1]
    to_query = torch.einsum("bnd,bd->bn", x, x_query)
    gram = torch.einsum("bjd,bid->bji", x, x)
    first = torch.einsum("bno,bn->bo", y, to_query)
    second = torch.einsum("bjo,bji,bi->bo", y, gram, to_query)
    return (eta_1 + eta_2) / N * first - eta_1 * eta_2 / N ** 2 * second


def _best_shared_two_step_eta(x, y, x_query, y_query):
    """The η minimising the mean query loss of two GD steps of size η from 0, by calculus, in numpy: per task
    ŷ(η) = η a - η² b (``_two_steps_by_hand`` at η₁ = η₂ = η: a = (2/N) Σ_i y_i x_iᵀx_q,
    b = (1/N²) Σ_ij y_j (x_jᵀx_i)(x_iᵀx_q)), so Σ (ŷ - y_q)² is a quartic in η; its minimum is at the real root of
    the derivative (a cubic) where the quartic is least."""
    x, y, x_query, y_query = (np.asarray(t, dtype=np.float64) for t in (x, y, x_query, y_query))
    N = x.shape[1]
    to_query = np.einsum("bnd,bd->bn", x, x_query)
    gram = np.einsum("bjd,bid->bji", x, x)
    a = (2 / N * np.einsum("bno,bn->bo", y, to_query)).ravel()
    b = (np.einsum("bjo,bji,bi->bo", y, gram, to_query) / N ** 2).ravel()
    t = y_query.ravel()
    quartic = np.array([b @ b, -2 * a @ b, a @ a + 2 * b @ t, -2 * a @ t, t @ t])  # Σ (η a - η² b - t)²
    critical = np.roots(np.polyder(quartic))
    real = critical[np.abs(critical.imag) < 1e-9].real
    return float(real[np.argmin(np.polyval(quartic, real))])


def _loss(b, etas):
    return regression_loss(gd_predict(b.x_context, b.y_context, b.x_query, list(etas)), b.y_query)


def test_tuned_shared_k_step_eta_beats_the_one_step_eta_and_is_the_minimum_of_the_quartic():
    b = _data(3000)
    args = (b.x_context, b.y_context, b.x_query, b.y_query)
    eta1 = optimal_one_step_eta(*args)
    shared = tune_gd(*args, n_steps=2, shared=True)
    assert shared.etas[0] == shared.etas[1] and shared.gammas == (0.0, 0.0)
    assert _loss(b, shared.etas) < _loss(b, [eta1, eta1])
    # L-BFGS from 0.75 η* (as the studies' shared references are tuned) finds the minimum the quartic has
    assert shared.etas[0] == pytest.approx(_best_shared_two_step_eta(*args), rel=1e-7)
    assert tune_gd(*args, n_steps=1).etas == (eta1,) == tune_gd(*args, n_steps=1, shared=False).etas
    with pytest.raises(ConfigError):
        tune_gd(*args, n_steps=0)


def test_per_step_tuning_leaves_the_equal_step_diagonal():
    """The K-step loss is symmetric in the η_k, so L-BFGS from equal η stays on the diagonal (per-step tuning
    then returned the shared η twice). Tuned per step on 4000 tasks, two GD steps on the default task are ~10%
    better than the shared η on other tasks, with step sizes ~4 and ~12."""
    tune, test = _data(4000), LinearRegressionTask().sample(4000, 0, 0, Stream.TEST, dtype=torch.float64)
    args = (tune.x_context, tune.y_context, tune.x_query, tune.y_query)
    shared, per_step = tune_gd(*args, n_steps=2, shared=True), tune_gd(*args, n_steps=2, shared=False)
    assert per_step.gammas == (0.0, 0.0)
    assert max(per_step.etas) > 2 * min(per_step.etas)  # measured 11.72 / 4.10
    assert _loss(test, per_step.etas) < 0.95 * _loss(test, shared.etas)  # measured 0.1419 vs 0.1581 (-10.2%)


@pytest.mark.parametrize("n_steps", [3, 4])
def test_per_step_tuning_is_never_worse_than_shared(n_steps):
    b = LinearRegressionTask(d=5, n_context=8, inputs=NormalInputs()).sample(500, 1, 0, Stream.TUNE,
                                                                             dtype=torch.float64)
    args = (b.x_context, b.y_context, b.x_query, b.y_query)
    shared, per_step = tune_gd(*args, n_steps, shared=True), tune_gd(*args, n_steps, shared=False)
    assert _loss(b, per_step.etas) <= _loss(b, shared.etas)
    assert list(per_step.etas) == sorted(per_step.etas) and len(set(per_step.etas)) == n_steps


def test_gd_predictor_is_gd_written_out_in_inner_products():
    """GDPredictor on tokens against GD written with einsum: one step (with and without W0) and two steps."""
    task = LinearRegressionTask(d=5, n_context=12, d_y=2)
    batch, tokens = ConcatTokenTask(task).batch_tokens(64, 0, dtype=torch.float64)
    x, y, xq = batch.x_context, batch.y_context, batch.x_query
    layout = ConcatLayout(5, 2)
    W0 = torch.randn(2, 5, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    torch.testing.assert_close(GDPredictor(layout, [0.7])(tokens), _one_step_by_hand(x, y, xq, 0.7))
    torch.testing.assert_close(GDPredictor(layout, [0.7], W0)(tokens), _one_step_by_hand(x, y, xq, 0.7, W0))
    torch.testing.assert_close(GDPredictor(layout, [1.0, 0.5])(tokens), _two_steps_by_hand(x, y, xq, 1.0, 0.5))


def test_baselines_share_one_call():
    task = LinearRegressionTask(d=5, n_context=12)
    batch, tokens = ConcatTokenTask(task).batch_tokens(64, 0, dtype=torch.float64)
    layout = ConcatLayout(5)
    torch.testing.assert_close(LeastSquaresPredictor(layout)(tokens), batch.y_query)  # noiseless, N > d
    ridge = RidgePredictor(layout, 1e-9)(tokens)
    torch.testing.assert_close(ridge, batch.y_query, atol=1e-6, rtol=1e-6)
    assert (ZeroPredictor(layout)(tokens) == 0).all()
    many_steps = GDPredictor(layout, [2.0] * 2000)(tokens)  # converges to least squares, which is y_q here
    torch.testing.assert_close(many_steps, batch.y_query, atol=1e-8, rtol=1e-8)
    with pytest.raises(ConfigError):
        RidgePredictor(layout, 0.0)
    with pytest.raises(ConfigError):
        GDPredictor(layout, [])
