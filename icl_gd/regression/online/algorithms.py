"""Online learners of in-context regression: one pass over the context pairs, in order, each pair seen once. These
are the algorithms the fast-weight layers of ``icl_gd.regression.online.delta_rule`` and
``icl_gd.regression.online.mesa`` run (their constructions and float64 checks: ``icl_gd.constructions.delta_rule``,
``icl_gd.constructions.mesa``).

Shapes: B tasks, N context pairs (one token each), d inputs, d_y outputs, n steps per token. W: (B, d_y, d), ŷ = W x_q.
Each learner returns its weights after every prefix of the context, W_0 = 0 (nothing seen) to W_N: (N+1, B, d_y, d).

The loss of pair t is ℓ_t(W) = ½‖W x_t - y_t‖², whose gradient (W x_t - y_t) x_tᵀ is ``gd.regression_gradient`` on
a context of that one pair (its 1/N is then 1).

- Online GD (LMS, the Widrow-Hoff rule), with weight decay and several steps per token: for t = 1..N,

      W ← α_t W,   then for j = 1..n:   W ← W - η_{t,j} ∇ℓ_t(W).

  With α = 1 and n = 1 this is plain online GD, W_t = W_{t-1} - η_t (W_{t-1} x_t - y_t) x_tᵀ.
- Normalised LMS: online GD with the step η / ‖x_t‖², W_t = W_{t-1} + η (y_t - W_{t-1} x_t) x_tᵀ / ‖x_t‖².
- Ridge regression on every prefix, by a direct solve: W_t = (Σ_{s≤t} y_s x_sᵀ)(Σ_{s≤t} x_s x_sᵀ + λ I)⁻¹, the
  minimiser of Σ_{s≤t} ℓ_s(W) + (λ/2)‖W‖²_F (recursive least squares reaches the same W_t pair by pair); the
  solve is ``baselines.ridge_solve``, ``RidgePredictor``'s.
"""

from __future__ import annotations

import torch

from icl_gd.core.config import require_positive, require_positive_int
from icl_gd.core.errors import ConfigError
from icl_gd.regression.baselines import ridge_solve
from icl_gd.regression.gd import regression_gradient


def schedule(value: float | torch.Tensor, name: str, shape: tuple[int, ...], like: torch.Tensor,
             upper: float | None = None) -> torch.Tensor:
    """``value`` (a number, or a tensor that broadcasts to ``shape``) as a tensor of ``shape`` in ``like``'s dtype
    and device; every entry finite, non-negative and, with ``upper``, at most ``upper``."""
    t = value.to(like) if isinstance(value, torch.Tensor) else torch.tensor(value, dtype=like.dtype, device=like.device)
    try:
        t = torch.broadcast_to(t, shape)
    except RuntimeError:
        raise ConfigError(f"{name} has shape {tuple(t.shape)}, which does not broadcast to {shape}") from None
    bad = ~torch.isfinite(t) | (t < 0)
    if upper is not None:
        bad |= t > upper
    if bad.any():
        bound = f"in [0, {upper:g}]" if upper is not None else "finite and non-negative"
        raise ConfigError(f"{name} must be {bound}, got {t[bad].flatten()[0].item()!r}")
    return t


def require_context(x: torch.Tensor, y: torch.Tensor) -> None:
    """x (B, N, d) and y (B, N, d_y) must agree on B and N."""
    if x.ndim != 3 or y.ndim != 3 or x.shape[:2] != y.shape[:2]:
        raise ConfigError(f"inputs (B, N, d) and labels (B, N, d_y) must agree on B and N, got {tuple(x.shape)} and "
                          f"{tuple(y.shape)}")


def online_gd_weights_per_token(
    x: torch.Tensor, y: torch.Tensor, eta: float | torch.Tensor, decay: float | torch.Tensor = 1.0,
    steps_per_token: int = 1,
) -> torch.Tensor:
    """(N+1, B, d_y, d) weights of online GD from W = 0 on x (B, N, d), y (B, N, d_y): per token t, W ← α_t W, then
    n = ``steps_per_token`` steps W ← W - η_{t,j} ∇ℓ_t(W). ``eta`` broadcasts to (B, N, n) (a number: one step
    size for all), ``decay`` α to (B, N), in [0, 1]."""
    require_context(x, y)
    require_positive_int("steps_per_token", steps_per_token)
    B, N, d = x.shape
    etas = schedule(eta, "the step size η", (B, N, steps_per_token), x)
    alphas = schedule(decay, "the decay α", (B, N), x, upper=1.0)
    W = x.new_zeros(B, y.shape[-1], d)
    out = [W]
    for t in range(N):
        x_t, y_t = x[:, t:t + 1], y[:, t:t + 1]  # (B, 1, d), (B, 1, d_y): a context of the one pair t
        W = alphas[:, t, None, None] * W
        for j in range(steps_per_token):
            W = W - etas[:, t, j, None, None] * regression_gradient(W, x_t, y_t)
        out.append(W)
    return torch.stack(out)


def normalised_lms_weights_per_token(x: torch.Tensor, y: torch.Tensor, eta: float | torch.Tensor) -> torch.Tensor:
    """(N+1, B, d_y, d) weights of normalised LMS from W = 0: online GD with the step η_t / ‖x_t‖² (``eta``
    broadcasts to (B, N)); every input must be nonzero."""
    require_context(x, y)
    etas = schedule(eta, "the step size η", x.shape[:2], x)
    norms = (x * x).sum(-1)  # (B, N)
    if (norms == 0).any():
        raise ConfigError("normalised LMS needs nonzero inputs: x_t = 0 has no direction to normalise")
    return online_gd_weights_per_token(x, y, (etas / norms)[..., None])


def ridge_weights_per_prefix(x: torch.Tensor, y: torch.Tensor, lam: float) -> torch.Tensor:
    """(N+1, B, d_y, d) ridge weights W_t = Y_tᵀ X_t (X_tᵀ X_t + λ I)⁻¹ on the first t pairs, t = 0..N, each by a
    direct solve (W_0 = 0)."""
    require_context(x, y)
    require_positive("the ridge regulariser λ", lam)
    B, N, d = x.shape
    grams = torch.cumsum(x[..., :, None] * x[..., None, :], dim=1)  # (B, N, d, d): Σ_{s≤t} x_s x_sᵀ
    cross = torch.cumsum(y[..., :, None] * x[..., None, :], dim=1)  # (B, N, d_y, d): Σ_{s≤t} y_s x_sᵀ
    W = ridge_solve(grams, cross.transpose(-1, -2), lam).transpose(-1, -2)  # the Gram is symmetric
    return torch.cat([x.new_zeros(1, B, y.shape[-1], d), W.transpose(0, 1)])


def predictions_per_token(weights: torch.Tensor, x_query: torch.Tensor) -> torch.Tensor:
    """(N+1, B, d_y) predictions W_t x_q of weights (N+1, B, d_y, d) on queries x_query (B, d)."""
    return (weights @ x_query[None, :, :, None])[..., 0]
