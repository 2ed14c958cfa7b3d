"""The mesa layer is ridge regression at every token: an exact construction of the mesa layer
(``icl_gd.regression.online.mesa``, von Oswald et al. 2023) on the in-context regression task, checked in float64 against
ridge regression solved directly on every prefix of the context (``icl_gd.regression.online.algorithms``).

With the keys and the query reading a token's x part and the values its y part,

    W_Q = W_K = [I_d, 0] (d, D),   W_V = [0, I_dy] (d_y, D),

the layer's fast weights after t context tokens, kept by the Sherman-Morrison recurrence from P_0 = I / λ, are
the ridge weights W_t = Y_tᵀ X_t (X_tᵀ X_t + λ I)⁻¹ of the first t pairs, at every t; its read-out Φ_N x_q is
ridge regression's prediction, the one ``baselines.RidgePredictor`` computes.
"""

from __future__ import annotations

import torch

from icl_gd.core.config import require_positive_int
from icl_gd.regression.baselines import RidgePredictor
from icl_gd.regression.online.mesa import MesaLayer, MesaWeights
from icl_gd.regression.online.algorithms import predictions_per_token, ridge_weights_per_prefix
from icl_gd.regression.tokens import ConcatLayout

from icl_gd.constructions.delta_rule import cases, compare_each, log_uniform
from icl_gd.constructions.verify import CheckResult, IdentityCheck, merge


def ridge_weights(d_x: int, d_y: int, lam: float, dtype: torch.dtype = torch.float64) -> MesaWeights:
    """The mesa weights of ridge regression with regulariser λ (module docstring)."""
    require_positive_int("d_x", d_x)
    require_positive_int("d_y", d_y)
    eye = torch.eye(d_x + d_y, dtype=dtype)
    return MesaWeights(W_Q=eye[:d_x].clone(), W_K=eye[:d_x].clone(), W_V=eye[d_x:].clone(), lam=lam)


def check_mesa_is_ridge(seed: int = 41, n_trials: int = 16, tolerance: float = 1e-12) -> CheckResult:
    """The mesa layer's fast weights and read-outs at every t against ridge by a direct solve, and its read-out at
    t = N against ``RidgePredictor``; λ log-uniform in [0.3, 3] (the regularised Grams' condition numbers stay
    below 20 in these draws)."""
    results = []
    for data, tokens, gen in cases(seed, n_trials):
        d_x, d_y = data.x.shape[-1], data.y.shape[-1]
        lam = float(log_uniform(gen, (), 0.3, 3.0))
        layer = MesaLayer(ridge_weights(d_x, d_y, lam))
        weights = ridge_weights_per_prefix(data.x_context, data.y_context, lam)
        results += [compare_each(layer.fast_weights(tokens), weights, tolerance),
                    compare_each(layer.predictions_per_token(tokens),
                                 predictions_per_token(weights, data.x_query), tolerance, keep=1),
                    compare_each(layer(tokens)[None], RidgePredictor(ConcatLayout(d_x, d_y), lam)(tokens)[None],
                                 tolerance, keep=1)]
    return merge(results)


IDENTITY_CHECKS = (
    IdentityCheck("mesa: Sherman-Morrison layer = ridge by a solve, every t", check_mesa_is_ridge),
)
