"""Condition numbers of X Xᵀ before and after GD++ transforms (icl_gd.conditioning): known answers, the
eigenvalue map against the explicit transform, and the GD++ algorithm's own inputs."""

import math

import pytest
import torch

from icl_gd.regression.conditioning import (condition_numbers, condition_per_step, context_gram, equalising_gamma,
                                 gdpp_transformed_inputs, summarise, transformed_eigenvalue)
from icl_gd.core.errors import ConfigError
from icl_gd.regression.gd import gdpp_step


def _inputs_with_spectrum(eigenvalues, n=6, seed=0):
    """x (1, n, d) whose X Xᵀ has exactly the given eigenvalues (random orthonormal bases on both sides)."""
    gen = torch.Generator().manual_seed(seed)
    d = len(eigenvalues)
    U, _ = torch.linalg.qr(torch.randn(n, d, generator=gen, dtype=torch.float64))
    V, _ = torch.linalg.qr(torch.randn(d, d, generator=gen, dtype=torch.float64))
    return (U @ torch.diag(torch.tensor(eigenvalues, dtype=torch.float64).sqrt()) @ V.T)[None]


def test_known_condition_number_and_the_equalising_gamma_makes_it_one():
    # Catches: κ computed as λ_max/λ_min of X instead of X Xᵀ (would give 2), or the transform applied as
    # (I - γ XXᵀ) once instead of on both sides of the Gram (κ would not reach 1).
    x = _inputs_with_spectrum([1.0, 4.0, 4.0, 1.0])
    assert float(condition_numbers(context_gram(x))[0]) == pytest.approx(4.0, rel=1e-12)
    gamma = equalising_gamma(1.0, 4.0)
    assert gamma == pytest.approx(1 / 7, rel=1e-14)
    after = gdpp_transformed_inputs(x, [gamma])[-1]
    assert float(condition_numbers(context_gram(after))[0]) == pytest.approx(1.0, rel=1e-10)


def test_eigenvalue_map_matches_the_explicit_transform_on_random_inputs():
    # Catches: a transform that uses X's Gram of the wrong side (N x N instead of d x d) or drops the square.
    gen = torch.Generator().manual_seed(3)
    x = torch.rand(5, 12, 4, generator=gen, dtype=torch.float64) - 0.5
    gamma = 0.3
    before = torch.linalg.eigvalsh(context_gram(x))
    after = torch.linalg.eigvalsh(context_gram(gdpp_transformed_inputs(x, [gamma])[1]))
    want = torch.sort(transformed_eigenvalue(before, gamma), dim=-1).values
    assert torch.allclose(after, want, rtol=1e-10, atol=1e-14)


def test_transformed_inputs_are_the_gdpp_algorithms_inputs():
    # The transform sequence must be the one GD++ itself applies (icl_gd.gd.gdpp_step), step after step.
    gen = torch.Generator().manual_seed(4)
    x = torch.rand(3, 10, 5, generator=gen, dtype=torch.float64) - 0.5
    gammas = [0.4, 0.9, 0.2]
    x_all, r, pred = torch.cat([x, x[:, :1]], dim=1), torch.zeros(3, 10, 1, dtype=torch.float64), torch.zeros(3, 1)
    ours = gdpp_transformed_inputs(x, gammas)
    for k, gamma in enumerate(gammas):
        x_all, r, pred = gdpp_step(x_all, r, pred.double(), 0.0, gamma, torch.zeros(3, 1, 5, dtype=torch.float64))
        assert torch.allclose(ours[k + 1], x_all[:, :-1], rtol=1e-12, atol=0)


def test_gamma_of_the_inverse_largest_eigenvalue_scale_lowers_kappa_on_uniform_tasks():
    # γ = 1/(3 λ_max): s(1-γs)² is increasing up to 1/(3γ), so the extreme eigenvalues stay extreme and κ becomes
    # κ (1-γ s_max)² / (1-γ s_min)² < κ on every task. Catches a sign error in the transform (κ would grow).
    gen = torch.Generator().manual_seed(5)
    x = torch.rand(200, 10, 10, generator=gen, dtype=torch.float64) - 0.5
    gram = context_gram(x)
    lam_max = torch.linalg.eigvalsh(gram)[:, -1]
    gamma = float(1 / (3 * lam_max.max()))
    before = condition_numbers(gram)
    after = condition_numbers(context_gram(gdpp_transformed_inputs(x, [gamma])[1]))
    assert bool((after < before).all())


def test_singular_gram_is_infinite_and_summaries_say_so():
    x = torch.zeros(2, 3, 2, dtype=torch.float64)
    x[0, :, 0] = 1.0  # rank 1
    x[1] = torch.tensor([[1.0, 0.0], [0.0, 10.0], [0.0, 0.0]])  # κ = 100
    kappa = condition_numbers(context_gram(x))
    assert math.isinf(float(kappa[0])) and float(kappa[1]) == pytest.approx(100.0)
    s = summarise(kappa)
    assert s["log10_mean"] == pytest.approx(2.0) and s["inf_fraction"] == 0.5
    assert [round(r["log10_mean"], 6) for r in condition_per_step([x[1:], x[1:] * 3])] == [2.0, 2.0]


def test_bad_arguments_raise_config_errors():
    with pytest.raises(ConfigError):
        equalising_gamma(4.0, 1.0)
    with pytest.raises(ConfigError):
        context_gram(torch.zeros(3, 4))
