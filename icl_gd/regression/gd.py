"""Gradient descent and GD++ on the in-context regression loss L(W) = 1/(2N) Σ_i ‖W x_i - y_i‖², batched over
tasks, the closed-form one-step η and the (η, γ) read-off from LSA weights (their L-BFGS tuners:
``icl_gd.regression.tuning``).

Shapes: B tasks, N context pairs, d inputs, d_y outputs, K steps. W: (B, d_y, d). Step sizes follow von Oswald et
al. 2023, Eq. 3: η multiplies the gradient of the 1/(2N)-normalised loss, so one step from 0 is (η/N) Σ y_i x_iᵀ.

GD++ (von Oswald et al. 2023, §3, App. A.10) is a GD step on inputs that are themselves transformed each step.
Step k acts on every token's input (the query's included) and on the context's residual labels at once, all
from the step's incoming state (as one LSA layer does):

    ΔW_k  = -η_k ∇L(W0; X_k, R_k) = (η_k/N) Σ_i (r_i - W0 x_i) x_iᵀ          (B, d_y, d)
    r_i  <- r_i - ΔW_k x_i           ŷ <- ŷ + ΔW_k x_q                       (residuals, prediction)
    x_j  <- (I - γ_k X_k X_kᵀ) x_j   for every token j, X_k X_kᵀ = Σ_i x_i x_iᵀ  (no 1/N, as App. A.10)

starting from x = the task's inputs, r = y and ŷ = W0 x_q. With every γ_k = 0 the inputs never move, r_i stays
y_i - (W_k - W0) x_i and this is plain GD.

Per eigenvalue (W0 = 0): the steps keep the singular vectors of the context inputs X_k and act on each
eigenvalue s of X_k X_kᵀ alone. Step k multiplies the residual's component along it by (1 - η_k s_k / N) and
moves the eigenvalue to s_{k+1} = s_k (1 - γ_k s_k)², so K steps multiply it by ∏_k (1 - η_k s_k / N) (for
noiseless labels the query error's component too). A schedule tuned on some tasks can keep this product small up
to their largest eigenvalue and let it explode just past it; ``tuning.tune_gdpp`` guards against that.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from icl_gd.core.errors import ConfigError
from icl_gd.regression.lsa import LSAWeights
from icl_gd.regression.metrics import query_loss


# ---------------------------------------------------------------------------------------------------- GD
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
    x, y, x_query, y_query = in_float64(x, y, x_query, y_query)
    W = initial_weights(x, y, None if W0 is None else W0.double())
    a = (W @ x_query[..., None])[..., 0]
    g = -(regression_gradient(W, x, y) @ x_query[..., None])[..., 0]
    denom = (g * g).sum()
    if denom <= 0:
        raise ConfigError("cannot tune η: the one-step direction is zero on every task")
    return float((g * (y_query - a)).sum() / denom)


# ---------------------------------------------------------------------------------------------------- GD++
@dataclass(frozen=True)
class GDPPParams:
    """Per-step step sizes η_k and input-transform strengths γ_k (equal entries when shared across steps).
    Plain GD is GD++ with every γ_k = 0."""

    etas: tuple[float, ...]
    gammas: tuple[float, ...]

    def __post_init__(self) -> None:
        if len(self.etas) == 0 or len(self.etas) != len(self.gammas):
            raise ConfigError(f"GD++ needs as many η as γ (at least one), got {len(self.etas)} and {len(self.gammas)}")

    @property
    def n_steps(self) -> int:
        return len(self.etas)


def as_steps(values: Sequence[float] | torch.Tensor, name: str) -> list:
    values = list(values) if not isinstance(values, torch.Tensor) else list(values.unbind(0))
    if not values:
        raise ConfigError(f"GD++ needs at least one {name}")
    return values


def gdpp_step(
    x_all: torch.Tensor, r: torch.Tensor, prediction: torch.Tensor, eta: float | torch.Tensor,
    gamma: float | torch.Tensor, W0: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One GD++ step on the state (x_all (B, N+1, d) query last, r (B, N, d_y), prediction (B, d_y)).

    ``W0`` is (B, d_y, d). Returns the next (x_all, r, prediction).
    """
    x = x_all[:, :-1]
    delta = -eta * regression_gradient(W0, x, r)  # (B, d_y, d): one GD step from W0 on (X_k, R_k)
    r = r - x @ delta.transpose(1, 2)
    prediction = prediction + (delta @ x_all[:, -1, :, None])[..., 0]
    gram = x.transpose(1, 2) @ x  # (B, d, d) = X_k X_kᵀ, symmetric
    x_all = x_all - gamma * (x_all @ gram)
    return x_all, r, prediction


def gdpp_predictions_per_step(
    x: torch.Tensor, y: torch.Tensor, x_query: torch.Tensor, etas: Sequence[float] | torch.Tensor,
    gammas: Sequence[float] | torch.Tensor, W0: torch.Tensor | None = None, clip: float | None = None,
) -> torch.Tensor:
    """(K+1, B, d_y) predictions after each of k = 0..K GD++ steps; x (B, N, d), y (B, N, d_y), x_query (B, d).

    ``clip``: after each step every token coordinate is clamped to ±clip, as the LSA stack with
    ``clip_activations`` (and the authors' transformer with ``clip > 0``) clamps its token states after each layer:
    the inputs x_j, the context's residuals r_i (their y slots) and the query's y slot, -ŷ. From W0 = 0 only (with a
    W0 the y slots do not hold r and -ŷ)."""
    etas, gammas = as_steps(etas, "η"), as_steps(gammas, "γ")
    if len(etas) != len(gammas):
        raise ConfigError(f"GD++ needs as many η as γ, got {len(etas)} and {len(gammas)}")
    if clip is not None and not (clip > 0 and W0 is None):
        raise ConfigError(f"clipped GD++ needs clip > 0 and W0 = 0, got clip {clip!r}"
                          f"{'' if W0 is None else ' and a W0'}")
    W = initial_weights(x, y, W0)
    x_all = torch.cat([x, x_query[:, None]], dim=1)
    prediction = (W @ x_query[..., None])[..., 0]
    r = y
    out = [prediction]
    for eta, gamma in zip(etas, gammas):
        x_all, r, prediction = gdpp_step(x_all, r, prediction, eta, gamma, W)
        if clip is not None:
            x_all, r, prediction = x_all.clamp(-clip, clip), r.clamp(-clip, clip), prediction.clamp(-clip, clip)
        out.append(prediction)
    return torch.stack(out)


def gdpp_predict(
    x: torch.Tensor, y: torch.Tensor, x_query: torch.Tensor, etas: Sequence[float] | torch.Tensor,
    gammas: Sequence[float] | torch.Tensor, W0: torch.Tensor | None = None, clip: float | None = None,
) -> torch.Tensor:
    """ŷ (B, d_y) after K = len(etas) GD++ steps (``clip``: as ``gdpp_predictions_per_step``)."""
    return gdpp_predictions_per_step(x, y, x_query, etas, gammas, W0, clip)[-1]


def gdpp_loss(
    x: torch.Tensor, y: torch.Tensor, x_query: torch.Tensor, y_query: torch.Tensor, params: GDPPParams,
    W0: torch.Tensor | None = None,
) -> float:
    """Mean query loss 0.5·‖ŷ - y_q‖² of GD++ with ``params`` on the given tasks (float64)."""
    x, y, x_query, y_query = in_float64(x, y, x_query, y_query)
    W0 = None if W0 is None else W0.double()
    with torch.no_grad():
        return float(query_loss(gdpp_predict(x, y, x_query, params.etas, params.gammas, W0), y_query))


def in_float64(*tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return tuple(t.double() for t in tensors)


# ---------------------------------------------------------------------------------------------------- reading
def gdpp_params_from_weights(weights: LSAWeights, d_x: int, d_y: int, n_context: int) -> tuple[float, float]:
    """The (η, γ) a layer implements, read off its weights by projecting onto the GD++ construction.

    The construction's products are KQ_xx = b I, PV_xx = -γ/b I, PV_yy = -(η/N)/b I (any gauge b). The update
    of token j is PV C KQ e_j, so only products PV·KQ are gauge-free: per head, b = mean diag of KQ's x-block,
    η = -N · b · mean diag of PV's y-block, γ = -b · mean diag of PV's x-block, summed over heads. For the
    Prop. 1 layer (GD) γ = 0 and η is its step size.
    """
    QK, PV = weights.products()  # (H, D, D) each
    D = d_x + d_y
    if QK.shape[-1] != D:
        raise ConfigError(f"weights have d_model {QK.shape[-1]}, expected d_x + d_y = {D}")
    b = torch.diagonal(QK[:, :d_x, :d_x], dim1=-2, dim2=-1).mean(-1)  # (H,)
    pv_x = torch.diagonal(PV[:, :d_x, :d_x], dim1=-2, dim2=-1).mean(-1)
    pv_y = torch.diagonal(PV[:, d_x:, d_x:], dim1=-2, dim2=-1).mean(-1)
    eta = float((-n_context * b * pv_y).sum())
    gamma = float((-b * pv_x).sum())
    return eta, gamma
