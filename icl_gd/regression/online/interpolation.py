"""Interpolating a trained fast-weight layer with its construction (the online analogue of
``icl_gd.regression.interpolation``, von Oswald et al. 2023, §3).

A delta-rule or mesa layer computes the same read-out under a gauge: the keys rotated and scaled, k → c R k (R
orthogonal, c > 0), with the step size β → β / c² (the delta rule; β unchanged when keys and values are divided by
the key's norm) or the regulariser λ → c² λ (the mesa layer), which scales the fast weights by 1/c; the values
scaled by a ≠ 0 (a sign included), which scales the fast weights by a; and the query q → (c / a) R q, which undoes
both in the read-out. The trained layer is brought to its construction's gauge first: R and c from the orthogonal
Procrustes problem min ‖c R W_K - W_K'‖_F, a from min ‖a W_V - W_V'‖_F (the construction's weights primed), then
every weight is averaged with mixing weight α (0 = trained, 1 = constructed): W_Q, W_K, W_V, β, the decay α_t, λ.
The gauge-fixed trained layer (α = 0) computes what the trained one does.
"""

from __future__ import annotations

import torch

from icl_gd.core.errors import ConfigError
from icl_gd.regression.online.delta_rule import DeltaRuleWeights
from icl_gd.regression.online.mesa import MesaWeights


def procrustes_gauge(W_K: torch.Tensor, K_ref: torch.Tensor) -> tuple[torch.Tensor, float]:
    """(R (d_k, d_k) orthogonal, c > 0) minimising ‖c R W_K - K_ref‖_F; W_K and K_ref (d_k, D)."""
    if W_K.shape != K_ref.shape:
        raise ConfigError(f"a trained layer of keys {tuple(W_K.shape)} cannot be gauge-fixed to a construction of "
                          f"keys {tuple(K_ref.shape)}")
    A, B = W_K.double(), K_ref.double()
    U, _, Vh = torch.linalg.svd(B @ A.T)
    R = U @ Vh
    c = float((B * (R @ A)).sum() / (A * A).sum())
    if not c > 0:
        raise ConfigError("the trained keys have no component along the construction's: no gauge to fix")
    return R, c


def value_gauge(W_V: torch.Tensor, V_ref: torch.Tensor) -> float:
    """a ≠ 0 minimising ‖a W_V - V_ref‖_F; W_V and V_ref (d_v, D)."""
    a = float((W_V.double() * V_ref.double()).sum() / (W_V.double() ** 2).sum())
    if a == 0:
        raise ConfigError("the trained values have no component along the construction's: no gauge to fix")
    return a


def _gauge_fixed(W_Q: torch.Tensor, W_K: torch.Tensor, W_V: torch.Tensor, K_ref: torch.Tensor, V_ref: torch.Tensor
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, float]:
    """(W_Q, W_K, W_V) in the construction's gauge (module docstring), and c."""
    R, c = procrustes_gauge(W_K, K_ref)
    a = value_gauge(W_V, V_ref)
    return (c / a) * R @ W_Q.double(), c * R @ W_K.double(), a * W_V.double(), c


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
    W_Q, W_K, W_V, c = _gauge_fixed(trained.W_Q.detach(), trained.W_K[0].detach(), trained.W_V[0].detach(),
                                    constructed.W_K[0], constructed.W_V[0])
    beta_gauge = 1.0 if trained.normalise == "pair" else 1 / c ** 2
    beta = torch.as_tensor(trained.beta, dtype=torch.float64).detach() * beta_gauge
    decay = torch.as_tensor(trained.alpha, dtype=torch.float64).detach()
    return DeltaRuleWeights(W_Q=_mix(W_Q, constructed.W_Q, alpha), W_K=_mix(W_K, constructed.W_K[0], alpha)[None],
                            W_V=_mix(W_V, constructed.W_V[0], alpha)[None], beta=_mix(beta, constructed.beta, alpha),
                            alpha=_mix(decay, constructed.alpha, alpha), normalise=trained.normalise)


def interpolate_mesa(trained: MesaWeights, constructed: MesaWeights, alpha: float) -> MesaWeights:
    """Float64 mesa weights (1 - α) · gauge-fixed trained + α · constructed (module docstring)."""
    _check_alpha(alpha)
    W_Q, W_K, W_V, c = _gauge_fixed(trained.W_Q.detach(), trained.W_K.detach(), trained.W_V.detach(),
                                    constructed.W_K, constructed.W_V)
    lam = float(torch.as_tensor(trained.lam).detach()) * c ** 2
    return MesaWeights(W_Q=_mix(W_Q, constructed.W_Q, alpha), W_K=_mix(W_K, constructed.W_K, alpha),
                       W_V=_mix(W_V, constructed.W_V, alpha), lam=(1 - alpha) * lam + alpha * float(constructed.lam))
