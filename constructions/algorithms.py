"""The float64 identities of the algorithms beyond GD and GD++ (``icl_gd.regression.algorithms``): Iterative Newton
(Fu et al. 2023), preconditioned GD (Ahn et al. 2023) and GD in closed form for many steps, each against a closed
form or against the algorithm it reduces to.

- Newton converges to least squares: after enough iterations W = Yᵀ X (XᵀX)⁻¹ (N > d, random shapes).
- k Newton iterations are 2^k steps of GD preconditioned by P = XᵀX with η = α N (I - M_k S = (I - α S²)^(2^k)):
  the reason a GD step count matching Newton grows exponentially.
- Preconditioned GD with P = I is GD (one step and K steps, with W0).
- One preconditioned GD step with P = (XᵀX / N)⁻¹ and η = 1 from 0 is least squares (Newton's method proper on a
  quadratic loss).
- GD's closed form in the eigenbasis equals the explicit loop at every step count checked.
"""

from __future__ import annotations

import torch

from icl_gd.regression.algorithms import (NewtonPredictor, Preconditioner, PreconditionedGDPredictor, descent_step_size,
                                          gd_weights_at_steps, gram, newton_alpha, newton_weights_per_step,
                                          preconditioned_gd_weights_per_step)
from icl_gd.regression.baselines import LeastSquaresPredictor
from icl_gd.regression.gd import gd_weights_per_step
from icl_gd.regression.tasks import LinearRegressionTask, Stream, UniformInputs
from icl_gd.regression.tokens import ConcatLayout

from icl_gd.constructions.prop1 import check_batch, random_shapes
from icl_gd.constructions.verify import CheckResult, IdentityCheck, compare, merge


def least_squares_weights(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """W = Yᵀ X (XᵀX)⁻¹ (B, d_y, d), by a direct solve (full-rank contexts)."""
    return torch.linalg.solve(gram(x), x.transpose(1, 2) @ y).transpose(1, 2)


def _full_rank_shapes(seed: int, n_trials: int):
    """(trial, d_x, d_y, N, generator) with d_x ≥ 2 (Newton's α needs it) and N ≥ d_x + 4, so every context has
    full rank and a modest condition."""
    for trial, d_x, d_y, n, gen in random_shapes(seed, n_trials, high=12):
        yield trial, d_x + 1, d_y, d_x + 5 + n, gen


def check_newton_converges(seed: int = 11, n_iterations: int = 60, tolerance: float = 1e-12) -> CheckResult:
    """Newton's weights after ``n_iterations`` against the least-squares solve, and NewtonPredictor against
    LeastSquaresPredictor on the same tokens (random shapes)."""
    results = []
    for trial, d_x, d_y, n, _ in _full_rank_shapes(seed, 10):
        data, _ = check_batch(d_x, d_y, n, 16, seed + trial, with_W0=False)
        x, y = data.x_context, data.y_context
        results.append(compare(newton_weights_per_step(x, y, n_iterations)[-1], least_squares_weights(x, y),
                               tolerance))
        layout = ConcatLayout(d_x, d_y)
        tokens = layout.tokens(data)
        results.append(compare(NewtonPredictor(layout, n_iterations)(tokens), LeastSquaresPredictor(layout)(tokens),
                               tolerance))
    return merge(results)


def check_newton_is_preconditioned_gd(seed: int = 12, max_iterations: int = 5, tolerance: float = 1e-12) -> CheckResult:
    """W after k = 0..``max_iterations`` Newton iterations against 2^k preconditioned GD steps with P = XᵀX (per
    task) and η = α N (d = N = 10 tasks as in the studies, and random shapes)."""
    results = []
    shapes = [(10, 1, 10)] + [(d_x + 1, d_y, n) for _, d_x, d_y, n, _ in random_shapes(seed, 5, high=10)]
    for trial, (d_x, d_y, n) in enumerate(shapes):
        data, _ = check_batch(d_x, d_y, n, 16, seed + trial, with_W0=False, inputs_width=1.0)
        x, y = data.x_context, data.y_context
        S = gram(x)
        newton = newton_weights_per_step(x, y, max_iterations)
        for k in range(max_iterations + 1):
            steps = (newton_alpha(S) * n)[None].expand(2 ** k, -1)[..., None, None]  # (2^k, B, 1, 1): per-task η
            pgd = preconditioned_gd_weights_per_step(x, y, S, list(steps))[-1]
            results.append(compare(newton[k], pgd, tolerance))
    return merge(results)


def check_identity_preconditioner_is_gd(seed: int = 13, tolerance: float = 1e-12) -> CheckResult:
    """Preconditioned GD with P = I against GD: one step and four steps (per-step η), with W0, random shapes; and
    PreconditionedGDPredictor on tokens against GD's prediction."""
    results = []
    for trial, d_x, d_y, n, gen in random_shapes(seed, 10):
        etas = [float(v) for v in torch.rand(4, generator=gen, dtype=torch.float64) * 2]
        data, W0 = check_batch(d_x, d_y, n, 16, seed + trial, with_W0=bool(trial % 2))
        x, y = data.x_context, data.y_context
        eye = torch.eye(d_x, dtype=torch.float64)
        for steps in (etas[:1], etas):
            pgd = preconditioned_gd_weights_per_step(x, y, eye, steps, W0)
            results.append(compare(torch.stack(pgd), torch.stack(gd_weights_per_step(x, y, steps, W0)), tolerance))
        layout = ConcatLayout(d_x, d_y)
        got = PreconditionedGDPredictor(layout, Preconditioner(eye, tuple(etas)), W0)(layout.tokens(data))
        W = gd_weights_per_step(x, y, etas, W0)[-1]
        results.append(compare(got, (W @ data.x_query[..., None])[..., 0], tolerance))
    return merge(results)


def check_inverse_preconditioner_is_least_squares(seed: int = 14, tolerance: float = 1e-12) -> CheckResult:
    """One step with P = (XᵀX / N)⁻¹ (per task), η = 1, from W = 0, against the least-squares solve."""
    results = []
    for trial, d_x, d_y, n, _ in _full_rank_shapes(seed, 10):
        data, _ = check_batch(d_x, d_y, n, 16, seed + trial, with_W0=False)
        x, y = data.x_context, data.y_context
        P = torch.linalg.inv(gram(x) / n)
        results.append(compare(preconditioned_gd_weights_per_step(x, y, P, [1.0])[-1], least_squares_weights(x, y),
                               tolerance))
    return merge(results)


def check_gd_closed_form(seed: int = 15, tolerance: float = 1e-12) -> CheckResult:
    """GD's eigenbasis closed form against the explicit loop after k = 0..40 steps of the descent step size, on the
    default task (d = N = 10, U(-0.5, 0.5), so near-singular contexts occur) and on random shapes (N < d too)."""
    results = []
    task = LinearRegressionTask(d=10, n_context=10, inputs=UniformInputs(1.0))
    batches = [task.sample(64, seed, stream=Stream.TEST, dtype=torch.float64)]
    batches += [check_batch(d_x, d_y, n, 16, seed + trial, with_W0=False)[0]
                for trial, d_x, d_y, n, _ in random_shapes(seed, 6)]
    for data in batches:
        x, y = data.x_context, data.y_context
        eta = descent_step_size(x)
        steps = list(range(41))
        loop = torch.stack(gd_weights_per_step(x, y, [eta] * 40))
        results.append(compare(gd_weights_at_steps(x, y, eta, steps), loop, tolerance))
    return merge(results)


IDENTITY_CHECKS = (
    IdentityCheck("newton: 60 iterations = least squares (random shapes, N > d)", check_newton_converges),
    IdentityCheck("newton: k iterations = 2^k GD steps preconditioned by XᵀX (k = 0..5)",
                  check_newton_is_preconditioned_gd),
    IdentityCheck("preconditioned gd: P = I is GD (1 and 4 steps, W0, random shapes)",
                  check_identity_preconditioner_is_gd),
    IdentityCheck("preconditioned gd: one step with P = (XᵀX/N)⁻¹ is least squares",
                  check_inverse_preconditioner_is_least_squares),
    IdentityCheck("gd closed form: eigenbasis = explicit loop (0..40 steps)", check_gd_closed_form),
)
