"""Interpolating a trained fast-weight layer with its construction (the online analogue of
``icl_gd.regression.interpolation``, von Oswald et al. 2023, §3).

A delta-rule or mesa layer computes the same read-out under a gauge: the keys and the query rotated together
(k → R k, q → R q, R orthogonal) and scaled together (k → c k, q → c q) with the step size β → β / c² (the delta
rule; β unchanged when keys and values are normalised by the key's norm) or the regulariser λ → c² λ (the mesa
layer). The trained layer is brought to its construction's gauge first: R and c from the orthogonal Procrustes
problem min ‖c R [W_K, W_Q] - [W_K', W_Q']‖_F (the construction's blocks primed), then every weight is averaged
with mixing weight α (0 = trained, 1 = constructed): W_Q, W_K, W_V, β, the decay α_t, λ. The gauge-fixed trained
layer (α = 0) computes what the trained one does.
"""

from __future__ import annotations

import torch

from icl_gd.core.errors import ConfigError
from icl_gd.regression.delta_rule import DeltaRuleWeights
from icl_gd.regression.mesa import MesaWeights


def procrustes_gauge(W_K: torch.Tensor, W_Q: torch.Tensor, K_ref: torch.Tensor, Q_ref: torch.Tensor
                     ) -> tuple[torch.Tensor, float]:
    """(R (d_k, d_k) orthogonal, c > 0) minimising ‖c R [W_K, W_Q] - [K_ref, Q_ref]‖_F; W_K, W_Q, K_ref, Q_ref
    (d_k, D)."""
    if W_K.shape != K_ref.shape or W_Q.shape != Q_ref.shape:
        raise ConfigError(f"a trained layer of keys {tuple(W_K.shape)} cannot be gauge-fixed to a construction of "
                          f"keys {tuple(K_ref.shape)}")
    A = torch.cat([W_K, W_Q], dim=1).double()
    B = torch.cat([K_ref, Q_ref], dim=1).double()
    U, _, Vh = torch.linalg.svd(B @ A.T)
    R = U @ Vh
    c = float((B * (R @ A)).sum() / (A * A).sum())
    if not c > 0:
        raise ConfigError("the trained keys have no component along the construction's: no gauge to fix")
    return R, c


def _mix(a: torch.Tensor | float, b: torch.Tensor | float, alpha: float) -> torch.Tensor:
    return (1 - alpha) * torch.as_tensor(a, dtype=torch.float64) + alpha * torch.as_tensor(b, dtype=torch.float64)


def _check_alpha(alpha: float) -> None:
    if not 0.0 <= alpha <= 1.0:
        raise ConfigError(f"mixing weight must be in [0, 1], got {alpha}")


def interpolate_delta_rule(trained: DeltaRuleWeights, constructed: DeltaRuleWeights, alpha: float
                           ) -> DeltaRuleWeights:
    """Float64 delta-rule weights (1 - α) · gauge-fixed trained + α · constructed (module docstring); one write per
    token in both, the same ``normalise``."""
    _check_alpha(alpha)
    if trained.n_h != 1 or constructed.n_h != 1 or trained.normalise != constructed.normalise:
        raise ConfigError("interpolation needs one write per token and the same normalisation in both layers")
    t = {name: getattr(trained, name).detach().double() for name in ("W_Q", "W_K", "W_V")}
    R, c = procrustes_gauge(t["W_K"][0], t["W_Q"], constructed.W_K[0].double(), constructed.W_Q.double())
    beta_gauge = 1.0 if trained.normalise == "pair" else 1 / c ** 2
    beta = torch.as_tensor(trained.beta, dtype=torch.float64).detach() * beta_gauge
    decay = torch.as_tensor(trained.alpha, dtype=torch.float64).detach()
    return DeltaRuleWeights(
        W_Q=_mix(c * R @ t["W_Q"], constructed.W_Q, alpha),
        W_K=_mix(c * R @ t["W_K"][0], constructed.W_K[0], alpha)[None],
        W_V=_mix(t["W_V"], constructed.W_V, alpha),
        beta=_mix(beta, constructed.beta, alpha), alpha=_mix(decay, constructed.alpha, alpha),
        normalise=trained.normalise)


def interpolate_mesa(trained: MesaWeights, constructed: MesaWeights, alpha: float) -> MesaWeights:
    """Float64 mesa weights (1 - α) · gauge-fixed trained + α · constructed (module docstring)."""
    _check_alpha(alpha)
    t = {name: getattr(trained, name).detach().double() for name in ("W_Q", "W_K", "W_V")}
    R, c = procrustes_gauge(t["W_K"], t["W_Q"], constructed.W_K.double(), constructed.W_Q.double())
    lam = float(torch.as_tensor(trained.lam).detach()) * c ** 2
    return MesaWeights(W_Q=_mix(c * R @ t["W_Q"], constructed.W_Q, alpha),
                       W_K=_mix(c * R @ t["W_K"], constructed.W_K, alpha),
                       W_V=_mix(t["W_V"], constructed.W_V, alpha),
                       lam=(1 - alpha) * lam + alpha * float(constructed.lam))
