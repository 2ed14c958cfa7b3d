"""GD / GD++ in each task's eigenbasis (``icl_gd.regression.spectral``) against the step-by-step algorithm
(``icl_gd.regression.gd``): the tuners evaluate their losses this way, so a wrong sign, a missing 1/N or a query
left untransformed here would silently tune every GD++ baseline to the wrong schedule."""

from __future__ import annotations

import pytest
import torch

from icl_gd.core.errors import ConfigError
from icl_gd.regression.gd import gd_predict, gdpp_predict
from icl_gd.regression.metrics import query_loss
from icl_gd.regression.spectral import TaskSpectrum, spectral_gd_predict, spectral_gdpp_predict

# (B, N, d, d_y, K): N < d (rank-deficient Gram), N = d, N > d, several outputs, one step
SHAPES = [(40, 4, 9, 3, 3), (50, 10, 10, 1, 5), (30, 17, 6, 2, 7), (25, 8, 5, 1, 1)]


def _tasks(B, N, d, d_y, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, N, d, generator=g, dtype=dtype)
    y = x @ torch.randn(B, d, d_y, generator=g, dtype=dtype) + 0.1 * torch.randn(B, N, d_y, generator=g, dtype=dtype)
    return x, y, torch.randn(B, d, generator=g, dtype=dtype), torch.randn(B, d_y, generator=g, dtype=dtype)


def _schedule(K, N, d, seed, dtype=torch.float64):
    """Step sizes of order N/λ̄ and transforms of order 1/λ̄ (λ̄ ~ N for unit inputs): the regime the tuners
    search, where each step moves every direction by O(1)."""
    g = torch.Generator().manual_seed(seed)
    etas = (0.3 + torch.rand(K, generator=g, dtype=dtype)) * N / max(N, d)
    gammas = 0.3 * torch.rand(K, generator=g, dtype=dtype) / max(N, d)
    return etas, gammas


def _relative(a, b):
    return float((a - b).abs().max() / b.abs().max())


@pytest.mark.parametrize("shape", SHAPES)
def test_spectral_gdpp_equals_step_by_step_gdpp_float64(shape):
    B, N, d, d_y, K = shape
    x, y, xq, _ = _tasks(B, N, d, d_y, torch.float64, seed=sum(shape))
    etas, gammas = _schedule(K, N, d, seed=K)
    step_by_step = gdpp_predict(x, y, xq, etas, gammas)
    assert _relative(spectral_gdpp_predict(TaskSpectrum.of(x, y, xq), etas, gammas), step_by_step) < 1e-12


@pytest.mark.parametrize("shape", SHAPES)
def test_spectral_gd_equals_step_by_step_gd_float64(shape):
    B, N, d, d_y, K = shape
    x, y, xq, _ = _tasks(B, N, d, d_y, torch.float64, seed=sum(shape) + 1)
    etas, _ = _schedule(K, N, d, seed=K + 1)
    spectrum = TaskSpectrum.of(x, y, xq)
    assert _relative(spectral_gd_predict(spectrum, etas), gd_predict(x, y, xq, etas)) < 1e-12
    # plain GD is GD++ with every γ = 0
    assert _relative(spectral_gdpp_predict(spectrum, etas, torch.zeros(K, dtype=torch.float64)),
                     gd_predict(x, y, xq, etas)) < 1e-12


@pytest.mark.parametrize("shape", SHAPES[:3])
def test_spectral_gdpp_float32_is_close_to_float64(shape):
    B, N, d, d_y, K = shape
    x, y, xq, _ = _tasks(B, N, d, d_y, torch.float64, seed=7)
    etas, gammas = _schedule(K, N, d, seed=8)
    exact = gdpp_predict(x, y, xq, etas, gammas)
    single = spectral_gdpp_predict(TaskSpectrum.of(x.float(), y.float(), xq.float()), etas.float(), gammas.float())
    assert single.dtype == torch.float32
    assert _relative(single.double(), exact) < 1e-4


def test_gradients_in_eta_and_gamma_equal_step_by_step():
    """The tuners differentiate the loss in (η, γ): both paths give the same gradient."""
    B, N, d, d_y, K = 60, 10, 10, 1, 4
    x, y, xq, yq = _tasks(B, N, d, d_y, torch.float64, seed=3)
    etas0, gammas0 = _schedule(K, N, d, seed=4)
    grads = []
    for spectral in (False, True):
        etas, gammas = etas0.clone().requires_grad_(), gammas0.clone().requires_grad_()
        prediction = (spectral_gdpp_predict(TaskSpectrum.of(x, y, xq), etas, gammas) if spectral
                      else gdpp_predict(x, y, xq, etas, gammas))
        query_loss(prediction, yq).backward()
        grads.append(torch.cat([etas.grad, gammas.grad]))
    assert _relative(grads[1], grads[0]) < 1e-11


def test_scaled_spectrum_is_the_stretched_tasks_and_tasks_picks_rows():
    x, y, xq, _ = _tasks(30, 6, 8, 2, torch.float64, seed=5)
    etas, gammas = _schedule(3, 6, 8, seed=6)
    root = 1.25 ** 0.5
    stretched = gdpp_predict(x * root, y * root, xq * root, etas, gammas)
    spectrum = TaskSpectrum.of(x, y, xq)
    assert _relative(spectral_gdpp_predict(spectrum.scaled(1.25), etas, gammas), stretched) < 1e-12
    part = slice(10, 17)
    assert _relative(spectral_gdpp_predict(spectrum.tasks(part), etas, gammas),
                     gdpp_predict(x[part], y[part], xq[part], etas, gammas)) < 1e-12


def test_mismatched_or_empty_schedules_are_config_errors():
    x, y, xq, _ = _tasks(5, 4, 3, 1, torch.float64, seed=0)
    spectrum = TaskSpectrum.of(x, y, xq)
    with pytest.raises(ConfigError, match="as many"):
        spectral_gdpp_predict(spectrum, [0.1, 0.2], [0.0])
    with pytest.raises(ConfigError, match="at least one"):
        spectral_gd_predict(spectrum, [])
