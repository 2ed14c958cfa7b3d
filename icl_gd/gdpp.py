"""GD++ (von Oswald et al. 2023, PROTOCOL §1): a GD step on inputs that are themselves transformed each step.

Step k acts on every token's input (the query's included) and on the context's residual labels at once, all
from the step's incoming state (as one LSA layer does):

    ΔW_k  = -η_k ∇L(W0; X_k, R_k) = (η_k/N) Σ_i (r_i - W0 x_i) x_iᵀ          (B, d_y, d)
    r_i  <- r_i - ΔW_k x_i           ŷ <- ŷ + ΔW_k x_q                       (residuals, prediction)
    x_j  <- (I - γ_k X_k X_kᵀ) x_j   for every token j, X_k X_kᵀ = Σ_i x_i x_iᵀ  (no 1/N: γ as PROTOCOL writes it)

starting from x = the task's inputs, r = y and ŷ = W0 x_q. With every γ_k = 0 the inputs never move, r_i stays
y_i - (W_k - W0) x_i and this is plain GD (``icl_gd.gd``). Shapes: B tasks, N context pairs, d inputs, d_y
outputs, K steps.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn

from .errors import ConfigError, DivergenceError
from .gd import initial_weights, regression_gradient, tune_gd_etas
from .lsa import LSAWeights
from .tokens import ConcatLayout


@dataclass(frozen=True)
class GDPPParams:
    """Per-step step sizes η_k and input-transform strengths γ_k (equal entries when shared across steps)."""

    etas: tuple[float, ...]
    gammas: tuple[float, ...]

    def __post_init__(self) -> None:
        if len(self.etas) == 0 or len(self.etas) != len(self.gammas):
            raise ConfigError(f"GD++ needs as many η as γ (at least one), got {len(self.etas)} and {len(self.gammas)}")

    @property
    def n_steps(self) -> int:
        return len(self.etas)


def _as_steps(values: Sequence[float] | torch.Tensor, name: str) -> list:
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
    gammas: Sequence[float] | torch.Tensor, W0: torch.Tensor | None = None,
) -> torch.Tensor:
    """(K+1, B, d_y) predictions after each of k = 0..K GD++ steps; x (B, N, d), y (B, N, d_y), x_query (B, d)."""
    etas, gammas = _as_steps(etas, "η"), _as_steps(gammas, "γ")
    if len(etas) != len(gammas):
        raise ConfigError(f"GD++ needs as many η as γ, got {len(etas)} and {len(gammas)}")
    W = initial_weights(x, y, W0)
    x_all = torch.cat([x, x_query[:, None]], dim=1)
    prediction = (W @ x_query[..., None])[..., 0]
    r = y
    out = [prediction]
    for eta, gamma in zip(etas, gammas):
        x_all, r, prediction = gdpp_step(x_all, r, prediction, eta, gamma, W)
        out.append(prediction)
    return torch.stack(out)


def gdpp_predict(
    x: torch.Tensor, y: torch.Tensor, x_query: torch.Tensor, etas: Sequence[float] | torch.Tensor,
    gammas: Sequence[float] | torch.Tensor, W0: torch.Tensor | None = None,
) -> torch.Tensor:
    """ŷ (B, d_y) after K = len(etas) GD++ steps."""
    return gdpp_predictions_per_step(x, y, x_query, etas, gammas, W0)[-1]


class GDPPPredictor(nn.Module):
    """K GD++ steps on each task's context, read from concatenated tokens (B, N+1, D) -> ŷ (B, d_y).

    Computed in float64 whatever the tokens' dtype (ŷ is returned in it): the reference is the yardstick, so its
    numbers carry no float32 round-off, whose size grows with the step sizes (tuned per-step η reach the hundreds
    at K = 4).
    """

    def __init__(self, layout: ConcatLayout, params: GDPPParams, W0: torch.Tensor | None = None) -> None:
        super().__init__()
        self.layout = layout
        self.params = params
        self.W0 = W0

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.predictions_per_step(tokens)[-1]

    def predictions_per_step(self, tokens: torch.Tensor) -> torch.Tensor:
        """(K+1, B, d_y) predictions after each step."""
        x, y, xq = (t.double() for t in self.layout.split(tokens))
        W0 = None if self.W0 is None else self.W0.double()
        return gdpp_predictions_per_step(x, y, xq, self.params.etas, self.params.gammas, W0).to(tokens.dtype)


# ---------------------------------------------------------------------------------------------------- tuning
def _query_loss(prediction: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return 0.5 * ((prediction - target) ** 2).sum(-1).mean()


def tune_gd(
    x: torch.Tensor, y: torch.Tensor, x_query: torch.Tensor, y_query: torch.Tensor, n_steps: int,
    shared: bool = True, W0: torch.Tensor | None = None, max_iter: int = 200,
) -> GDPPParams:
    """Plain GD's step sizes (one η, or one per step) tuned on held-out tasks, as GD++ parameters with γ = 0.

    Per-step tuning starts from the tuned shared η: K GD steps from W0 form a polynomial in XᵀX symmetric in
    the η_k, so equal η_k are a critical point of the per-step problem; the search leaves it through a start
    with alternating ±30% perturbations, and keeps the shared solution if that is no better.
    """
    etas = tune_gd_etas(x, y, x_query, y_query, n_steps, shared=True, W0=W0)
    best = GDPPParams(tuple(etas), (0.0,) * n_steps)
    if shared or n_steps == 1:
        return best
    start = GDPPParams(tuple(e * (1.3 if k % 2 == 0 else 0.7) for k, e in enumerate(etas)), best.gammas)
    candidate = _lbfgs(x, y, x_query, y_query, start, shared=False, tune_gamma=False, W0=W0, max_iter=max_iter)
    return min((best, candidate), key=lambda p: gdpp_loss(x, y, x_query, y_query, p, W0))


def gdpp_loss(
    x: torch.Tensor, y: torch.Tensor, x_query: torch.Tensor, y_query: torch.Tensor, params: GDPPParams,
    W0: torch.Tensor | None = None,
) -> float:
    """Mean query loss 0.5·‖ŷ - y_q‖² of GD++ with ``params`` on the given tasks (float64)."""
    x, y, x_query, y_query = (t.double() for t in (x, y, x_query, y_query))
    W0 = None if W0 is None else W0.double()
    with torch.no_grad():
        return float(_query_loss(gdpp_predict(x, y, x_query, params.etas, params.gammas, W0), y_query))


def _lbfgs(
    x: torch.Tensor, y: torch.Tensor, x_query: torch.Tensor, y_query: torch.Tensor, start: GDPPParams,
    shared: bool, tune_gamma: bool, W0: torch.Tensor | None, max_iter: int,
) -> GDPPParams:
    """L-BFGS (float64, strong Wolfe) on the K-step query loss over η (and γ when ``tune_gamma``)."""
    x, y, x_query, y_query = (t.double() for t in (x, y, x_query, y_query))
    W0 = None if W0 is None else W0.double()
    n_steps = start.n_steps
    n_free = 1 if shared else n_steps
    etas = torch.tensor(start.etas[:n_free], dtype=torch.float64, requires_grad=True)
    gammas = torch.tensor(start.gammas[:n_free], dtype=torch.float64, requires_grad=tune_gamma)
    opt = torch.optim.LBFGS([etas, gammas] if tune_gamma else [etas], lr=1.0, max_iter=max_iter,
                            line_search_fn="strong_wolfe", tolerance_grad=1e-10, tolerance_change=1e-12)

    def closure() -> torch.Tensor:
        opt.zero_grad()
        pred = gdpp_predict(x, y, x_query, etas.expand(n_steps), gammas.expand(n_steps), W0)
        loss = _query_loss(pred, y_query)
        loss.backward()
        return loss

    opt.step(closure)
    etas, gammas = etas.detach().expand(n_steps), gammas.detach().expand(n_steps)
    if not (torch.isfinite(etas).all() and torch.isfinite(gammas).all()):
        raise DivergenceError("tuning GD/GD++ diverged (non-finite η or γ)")
    return GDPPParams(tuple(float(e) for e in etas), tuple(float(g) for g in gammas))


def tune_gdpp(
    x: torch.Tensor, y: torch.Tensor, x_query: torch.Tensor, y_query: torch.Tensor, n_steps: int,
    shared: bool = True, W0: torch.Tensor | None = None, start: GDPPParams | None = None, max_iter: int = 200,
    gamma_starts: Sequence[float] = (0.0, 0.25, 0.5),
) -> GDPPParams:
    """(η_k, γ_k) minimising the mean K-step query loss of GD++ on the given (held-out) tasks.

    A batched L-BFGS (float64) over all step sizes and transforms at once, from a few starts: the η of ``start``
    (by default tuned plain GD, itself started from the closed-form one-step η), in its order and reversed, with
    γ_k = c / λ̄ for each c in ``gamma_starts``, λ̄ = mean eigenvalue of X Xᵀ over the tasks (the last step's γ
    never matters and starts at 0). The loss has several basins (per step, a small η with a strong transform can
    beat a large η with a weak one), so a single start can stall in the worse one; the search is still local,
    not a proof of the global optimum. The best result on these tasks wins, the start included, so it is never
    worse than tuned GD. With ``shared`` one (η, γ) serves every step (a recurrent model).
    """
    if not isinstance(n_steps, int) or n_steps <= 0:
        raise ConfigError(f"n_steps must be a positive integer, got {n_steps!r}")
    if start is None:
        start = tune_gd(x, y, x_query, y_query, n_steps, shared=shared, W0=W0, max_iter=max_iter)
    if start.n_steps != n_steps:
        raise ConfigError(f"start has {start.n_steps} steps, tuning asked for {n_steps}")
    gram_scale = float((x.double() ** 2).sum(dim=(1, 2)).mean() / x.shape[-1])  # λ̄ = tr(X Xᵀ) / d
    # K GD steps are symmetric in the η_k, GD++ steps are not: the reversed order is an equally good start.
    eta_starts = list(dict.fromkeys([start.etas, start.etas[::-1]]))
    candidates = [start]
    for etas in eta_starts:
        for c in gamma_starts:
            gammas = tuple(c / gram_scale if (shared or k < n_steps - 1) else 0.0 for k in range(n_steps))
            try:
                candidates.append(_lbfgs(x, y, x_query, y_query, GDPPParams(etas, gammas), shared=shared,
                                         tune_gamma=True, W0=W0, max_iter=max_iter))
            except DivergenceError:
                continue  # a start that runs off to infinity is simply not a candidate
    losses = [gdpp_loss(x, y, x_query, y_query, p, W0) for p in candidates]
    finite = [(loss, i) for i, loss in enumerate(losses) if loss == loss and loss < float("inf")]
    return candidates[min(finite)[1]]


# ---------------------------------------------------------------------------------------------------- reading
def gdpp_params_from_weights(weights: LSAWeights, d_x: int, d_y: int, n_context: int) -> tuple[float, float]:
    """The (η, γ) a layer implements, read off its weights by projecting onto the GD++ construction.

    The construction's products are KQ_xx = b I, PV_xx = -γ/b I, PV_yy = -(η/N)/b I (any gauge b). The update
    of token j is PV C KQ e_j, so only products PV·KQ are gauge-free: per head, b = mean diag of KQ's x-block,
    η = -N · b · mean diag of PV's y-block, γ = -b · mean diag of PV's x-block, summed over heads.
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
