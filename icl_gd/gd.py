"""Gradient descent on the in-context regression loss L(W) = 1/(2N) Σ_i ‖W x_i - y_i‖², batched over tasks.

Shapes: B tasks, N context pairs, d inputs, d_y outputs. W: (B, d_y, d). Step sizes follow PROTOCOL's
convention: η multiplies the gradient of the 1/(2N)-normalised loss, so one step from 0 is (η/N) Σ y_i x_iᵀ.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from .errors import ConfigError, DivergenceError


def regression_gradient(W: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """∇L(W) = (1/N) Σ_i (W x_i - y_i) x_iᵀ: (B, d_y, d) from W (B, d_y, d), x (B, N, d), y (B, N, d_y)."""
    residual = x @ W.transpose(1, 2) - y  # (B, N, d_y)
    return residual.transpose(1, 2) @ x / x.shape[1]


def gd_step(W: torch.Tensor, x: torch.Tensor, y: torch.Tensor, eta: float | torch.Tensor) -> torch.Tensor:
    """One GD step W - η ∇L(W)."""
    return W - eta * regression_gradient(W, x, y)


def initial_weights(x: torch.Tensor, y: torch.Tensor, W0: torch.Tensor | None) -> torch.Tensor:
    """W0 broadcast to (B, d_y, d); zeros when None."""
    B, _, d = x.shape
    if W0 is None:
        return x.new_zeros(B, y.shape[-1], d)
    return W0.to(x).expand(B, y.shape[-1], d)


def gd_weights_per_step(
    x: torch.Tensor, y: torch.Tensor, etas: Sequence[float] | torch.Tensor, W0: torch.Tensor | None = None
) -> list[torch.Tensor]:
    """[W_0, W_1, ..., W_K] for K = len(etas) steps, each (B, d_y, d)."""
    W = initial_weights(x, y, W0)
    out = [W]
    for eta in etas:
        W = gd_step(W, x, y, eta)
        out.append(W)
    return out


def gd_predict(
    x: torch.Tensor, y: torch.Tensor, x_query: torch.Tensor, etas: Sequence[float] | torch.Tensor,
    W0: torch.Tensor | None = None,
) -> torch.Tensor:
    """ŷ (B, d_y) = W_K x_q after K = len(etas) steps from W0."""
    W = gd_weights_per_step(x, y, etas, W0)[-1]
    return (W @ x_query[..., None])[..., 0]


def gd_predictions_per_step(
    x: torch.Tensor, y: torch.Tensor, x_query: torch.Tensor, etas: Sequence[float] | torch.Tensor,
    W0: torch.Tensor | None = None,
) -> torch.Tensor:
    """(K+1, B, d_y) predictions W_k x_q after each of k = 0..K steps."""
    return torch.stack([(W @ x_query[..., None])[..., 0] for W in gd_weights_per_step(x, y, etas, W0)])


def optimal_one_step_eta(
    x: torch.Tensor, y: torch.Tensor, x_query: torch.Tensor, y_query: torch.Tensor, W0: torch.Tensor | None = None
) -> float:
    """The η minimising the mean one-step query loss over the given tasks, in closed form.

    After one step ŷ = a + η g with a = W0 x_q and g = -∇L(W0) x_q, so the loss is quadratic in η and
    η* = Σ g·(y_q - a) / Σ g·g.
    """
    x, y, x_query, y_query = (t.double() for t in (x, y, x_query, y_query))
    W = initial_weights(x, y, None if W0 is None else W0.double())
    a = (W @ x_query[..., None])[..., 0]
    g = -(regression_gradient(W, x, y) @ x_query[..., None])[..., 0]
    denom = (g * g).sum()
    if denom <= 0:
        raise ConfigError("cannot tune η: the one-step direction is zero on every task")
    return float((g * (y_query - a)).sum() / denom)


def tune_gd_etas(
    x: torch.Tensor, y: torch.Tensor, x_query: torch.Tensor, y_query: torch.Tensor, n_steps: int,
    shared: bool = True, W0: torch.Tensor | None = None, max_iter: int = 200,
) -> list[float]:
    """Step sizes minimising the mean K-step query loss on the given (held-out) tasks.

    A batched L-BFGS on all K step sizes at once (float64), started from the closed-form one-step η; with
    ``shared`` one η serves every step. Returns K values.
    """
    if n_steps <= 0:
        raise ConfigError(f"n_steps must be positive, got {n_steps}")
    x, y, x_query, y_query = (t.double() for t in (x, y, x_query, y_query))
    eta0 = optimal_one_step_eta(x, y, x_query, y_query, W0)
    if n_steps == 1:
        return [eta0]
    # Several GD steps with the one-step optimum overshoot; start lower, where the loss is well-behaved.
    params = torch.full((1 if shared else n_steps,), eta0 * 0.75, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([params], lr=1.0, max_iter=max_iter, line_search_fn="strong_wolfe",
                            tolerance_grad=1e-12, tolerance_change=1e-15)

    def loss_fn() -> torch.Tensor:
        opt.zero_grad()
        etas = params.expand(n_steps)
        pred = gd_predict(x, y, x_query, etas, W0)
        loss = 0.5 * ((pred - y_query) ** 2).sum(-1).mean()
        loss.backward()
        return loss

    opt.step(loss_fn)
    etas = params.detach().expand(n_steps)
    if not torch.isfinite(etas).all():
        raise DivergenceError("tuning GD step sizes diverged (non-finite η)")
    return [float(e) for e in etas]
