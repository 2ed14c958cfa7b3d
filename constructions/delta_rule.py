"""The delta rule is online GD: exact constructions of fast-weight layers (``icl_gd.regression.online.delta_rule``) that
learn the in-context regression task token by token, each checked in float64 against the algorithm it runs
(``icl_gd.regression.online.algorithms``). The papers state the online-learning reading; the constructions and checks are
ours.

With the keys and the query reading a token's x part, the values its y part and the writing strength the step size,

    W_Q = W_K,j = [I_d, 0] (d, D),   W_V,j = [0, I_dy] (d_y, D),   β = η,

the layer's state after t context tokens is the online learner's weight after t pairs, S_t = W_t (d_y, d), at every
t and any step size, so its read-out S_N x_q is the learner's prediction:

- DeltaNet (α = 1, n_h = 1) is online GD on ℓ_t(W) = ½‖W x_t - y_t‖², one step per token, in order, from W = 0.
- Key and value both divided by the key's norm: normalised LMS, W_t = W_{t-1} + η (y_t - W_{t-1} x_t) x_tᵀ / ‖x_t‖².
  The key alone divided by its norm (DeltaNet's normalisation) is not normalised LMS: it is online GD on the
  unit-norm inputs, ℓ_t(W) = ½‖W x̂_t - y_t‖², x̂_t = x_t / ‖x_t‖, read out at the raw query.
- Gated DeltaNet's decay α_t: online GD with weight decay, W ← α_t W and then a GD step from α_t W.
- DeltaProduct with n_h writes per token, all of the same key and value (x_t, y_t), strengths β_{t,j} = η_{t,j}: n_h
  GD steps on ℓ_t per token (DeltaProduct itself projects each write's key and value separately; here they are
  equal, since a regression token carries one pair).
- The dual form: S_N q = Σ_t β_t e_t (k_tᵀ q) with e_t = v_t - S_{t-1} k_t, the errors found from keys and values
  alone (``delta_rule_dual``), against the layer's recurrence.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch

from icl_gd.core.config import require_positive_int
from icl_gd.regression.online.delta_rule import DeltaRuleLayer, DeltaRuleWeights, delta_rule_dual
from icl_gd.regression.online.algorithms import (normalised_lms_weights_per_token, online_gd_weights_per_token,
                                      predictions_per_token)
from icl_gd.regression.tasks import RegressionBatch
from icl_gd.regression.tokens import ConcatLayout

from icl_gd.constructions.prop1 import check_batch, random_shapes
from icl_gd.constructions.verify import CheckResult, IdentityCheck, merge

TOLERANCE = 1e-12


def online_gd_weights(
    d_x: int, d_y: int, eta: float | torch.Tensor, decay: float | torch.Tensor = 1.0, steps_per_token: int = 1,
    normalise: str = "none", dtype: torch.dtype = torch.float64,
) -> DeltaRuleWeights:
    """The delta-rule weights of online GD (module docstring): n_h = ``steps_per_token`` writes of (x_t, y_t) per
    token with β = ``eta`` (broadcastable to (N, n_h)), decay α = ``decay`` (broadcastable to (N,)) and
    ``normalise`` as ``DeltaRuleWeights``'s."""
    for name, value in (("d_x", d_x), ("d_y", d_y), ("steps_per_token", steps_per_token)):
        require_positive_int(name, value)
    D, n_h = d_x + d_y, steps_per_token
    eye = torch.eye(D, dtype=dtype)
    read_x, read_y = eye[:d_x], eye[d_x:]
    return DeltaRuleWeights(W_Q=read_x.clone(), W_K=read_x.expand(n_h, d_x, D).clone(),
                            W_V=read_y.expand(n_h, d_y, D).clone(), beta=eta, alpha=decay,
                            normalise=normalise)


def compare_each(actual: torch.Tensor, expected: torch.Tensor, tolerance: float, keep: int = 2,
                 scale: torch.Tensor | None = None) -> CheckResult:
    """Max absolute error, and the largest relative error of any one slice over the ``keep`` leading dimensions
    (prefix t, and task b with ``keep`` = 2): max|a - e| / max|e| within the slice, so a task whose weights stay small
    is not hidden behind one whose weights grow. ``scale`` (the shape of ``expected``), when given, stands for |e|:
    the size of what e was computed from, where e is a difference that may cancel."""
    diff = (actual - expected).abs().flatten(keep).amax(-1)
    size = (expected if scale is None else scale).abs().flatten(keep).amax(-1)
    relative = torch.where(size > 0, diff / size.clamp_min(torch.finfo(size.dtype).tiny), diff)
    return CheckResult(diff.max().item(), relative.max().item(), tolerance)


def error_scale(keys: torch.Tensor, values: torch.Tensor, beta: torch.Tensor, errors: torch.Tensor) -> torch.Tensor:
    """(B, N, d_v) sizes |v_t| + Σ_{s<t} β_s |k_tᵀ k_s| |e_s| of the terms whose sum is e_t = v_t - S_{t-1} k_t
    (keys (B, N, d_k), values and errors (B, N, d_v), beta (B, N); a decay α ≤ 1 only shrinks the terms). The read
    S_{t-1} k_t is such a sum, and where the weights grow its terms cancel to many digits, so this, not |e_t|, is
    the size a rounding error in e_t is relative to."""
    terms = torch.tril((keys @ keys.transpose(1, 2)).abs() * beta[:, None, :], -1)  # (B, t, s)
    return values.abs() + terms @ errors.abs()


def log_uniform(generator: torch.Generator, shape: tuple[int, ...], low: float, high: float) -> torch.Tensor:
    """Float64 draws of ``shape``, log-uniform in [low, high]."""
    u = torch.rand(shape, generator=generator, dtype=torch.float64)
    return low * (high / low) ** u


def cases(seed: int, n_trials: int, inputs_width: float = 2.0
          ) -> Iterator[tuple[RegressionBatch, torch.Tensor, torch.Generator]]:
    """(batch, its concatenated tokens (B, N+1, d+d_y), generator) for ``n_trials`` random (B, N, d, d_y): B in
    [1, 8], N, d, d_y in [1, 15], inputs U(-width/2, width/2), float64."""
    for trial, d_x, d_y, n, gen in random_shapes(seed, n_trials):
        B = int(torch.randint(1, 9, (), generator=gen))
        data, _ = check_batch(d_x, d_y, n, B, seed + trial, with_W0=False, inputs_width=inputs_width)
        yield data, ConcatLayout(d_x, d_y).tokens(data), gen


def _layer_against(layer: DeltaRuleLayer, tokens: torch.Tensor, data: RegressionBatch, weights: torch.Tensor,
                   tolerance: float) -> list[CheckResult]:
    """The layer's states and read-outs at every t against an algorithm's weights (N+1, B, d_y, d)."""
    predictions = predictions_per_token(weights, data.x_query)
    return [compare_each(layer.states(tokens), weights, tolerance),
            compare_each(layer.predictions_per_token(tokens), predictions, tolerance, keep=1)]


def check_online_gd(seed: int = 31, n_trials: int = 16, tolerance: float = TOLERANCE) -> CheckResult:
    """DeltaNet's layer against online GD, one step per token: one η per trial, log-uniform in [0.01, 10] (large
    steps make both grow by up to |1 - η‖x‖²| per token)."""
    results = []
    for data, tokens, gen in cases(seed, n_trials):
        d_x, d_y = data.x.shape[-1], data.y.shape[-1]
        eta = float(log_uniform(gen, (), 0.01, 10.0))
        layer = DeltaRuleLayer(online_gd_weights(d_x, d_y, eta))
        weights = online_gd_weights_per_token(data.x_context, data.y_context, eta)
        results += _layer_against(layer, tokens, data, weights, tolerance)
    return merge(results)


def check_normalised_lms(seed: int = 32, n_trials: int = 16, tolerance: float = TOLERANCE) -> CheckResult:
    """Normalised pairs (k, v) / ‖k‖ against normalised LMS, with a step size per token, log-uniform in [0.01, 4]."""
    results = []
    for data, tokens, gen in cases(seed, n_trials):
        d_x, d_y, N = data.x.shape[-1], data.y.shape[-1], data.x_context.shape[1]
        eta = log_uniform(gen, (N,), 0.01, 4.0)
        layer = DeltaRuleLayer(online_gd_weights(d_x, d_y, eta[:, None], normalise="pair"))
        weights = normalised_lms_weights_per_token(data.x_context, data.y_context, eta)
        results += _layer_against(layer, tokens, data, weights, tolerance)
    return merge(results)


def check_normalised_keys(seed: int = 36, n_trials: int = 16, tolerance: float = TOLERANCE) -> CheckResult:
    """Normalised keys k / ‖k‖ against online GD on the unit-norm inputs x_t / ‖x_t‖ (labels and query as they
    are), one η per trial, log-uniform in [0.01, 4]."""
    results = []
    for data, tokens, gen in cases(seed, n_trials):
        d_x, d_y = data.x.shape[-1], data.y.shape[-1]
        eta = float(log_uniform(gen, (), 0.01, 4.0))
        layer = DeltaRuleLayer(online_gd_weights(d_x, d_y, eta, normalise="keys"))
        x = data.x_context
        weights = online_gd_weights_per_token(x / x.norm(dim=-1, keepdim=True), data.y_context, eta)
        results += _layer_against(layer, tokens, data, weights, tolerance)
    return merge(results)


def check_gated(seed: int = 33, n_trials: int = 16, tolerance: float = TOLERANCE) -> CheckResult:
    """Gated DeltaNet's decay against online GD with weight decay: α_t uniform in [0, 1] and η_t log-uniform in
    [0.01, 10], both per token."""
    results = []
    for data, tokens, gen in cases(seed, n_trials):
        d_x, d_y, N = data.x.shape[-1], data.y.shape[-1], data.x_context.shape[1]
        eta = log_uniform(gen, (N, 1), 0.01, 10.0)
        alpha = torch.rand(N, generator=gen, dtype=torch.float64)
        layer = DeltaRuleLayer(online_gd_weights(d_x, d_y, eta, decay=alpha))
        weights = online_gd_weights_per_token(data.x_context, data.y_context, eta, decay=alpha)
        results += _layer_against(layer, tokens, data, weights, tolerance)
    return merge(results)


def check_product(seed: int = 34, n_trials: int = 16, tolerance: float = TOLERANCE) -> CheckResult:
    """DeltaProduct's n_h writes per token (n_h = 2..4) against n_h online GD steps per token, a step size per token
    and write, log-uniform in [0.01, 4]; every other trial with a decay per token as well."""
    results = []
    for trial, (data, tokens, gen) in enumerate(cases(seed, n_trials)):
        d_x, d_y, N = data.x.shape[-1], data.y.shape[-1], data.x_context.shape[1]
        n_h = 2 + trial % 3
        eta = log_uniform(gen, (N, n_h), 0.01, 4.0)
        alpha = torch.rand(N, generator=gen, dtype=torch.float64) if trial % 2 else 1.0
        layer = DeltaRuleLayer(online_gd_weights(d_x, d_y, eta, decay=alpha, steps_per_token=n_h))
        weights = online_gd_weights_per_token(data.x_context, data.y_context, eta, decay=alpha, steps_per_token=n_h)
        results += _layer_against(layer, tokens, data, weights, tolerance)
    return merge(results)


def check_dual(seed: int = 35, n_trials: int = 16, tolerance: float = TOLERANCE) -> CheckResult:
    """The dual form against the recurrence: the read-out S_N q, and the errors e_t against v_t - α_t S_{t-1} k_t
    from the layer's states, relative to the size of the terms they sum (``error_scale``). Plain DeltaNet (η
    log-uniform in [0.01, 10]) in the first half of the trials; then a decay per token, and from the twelfth trial on
    n_h = 2 or 3 writes per token (read-out only)."""
    results = []
    for trial, (data, tokens, gen) in enumerate(cases(seed, n_trials)):
        d_x, d_y, N = data.x.shape[-1], data.y.shape[-1], data.x_context.shape[1]
        n_h = 1 if trial < 12 else 2 + trial % 2
        eta = float(log_uniform(gen, (), 0.01, 10.0)) if n_h == 1 else log_uniform(gen, (N, n_h), 0.01, 4.0)
        alpha = 1.0 if trial < n_trials // 2 else torch.rand(N, generator=gen, dtype=torch.float64)
        layer = DeltaRuleLayer(online_gd_weights(d_x, d_y, eta, decay=alpha, steps_per_token=n_h))
        writes = layer.writes(tokens)
        dual = delta_rule_dual(writes)
        results.append(compare_each(dual.output[None], layer(tokens)[None], tolerance, keep=1))
        if n_h == 1:
            states = layer.states(tokens)[:-1]  # (N, B, d_v, d_k): S_{t-1}
            reads = torch.einsum("tbvk,btk->btv", states, writes.keys[:, :, 0]) * writes.alpha[..., None]
            errors = writes.values[:, :, 0] - reads  # (B, N, d_v)
            scale = error_scale(writes.keys[:, :, 0], writes.values[:, :, 0], writes.beta[..., 0], errors)
            results.append(compare_each(dual.errors[:, :, 0].transpose(0, 1), errors.transpose(0, 1), tolerance,
                                        scale=scale.transpose(0, 1)))
    return merge(results)


IDENTITY_CHECKS = (
    IdentityCheck("delta rule: DeltaNet = online GD, one step per token", check_online_gd),
    IdentityCheck("delta rule: normalised (k, v)/‖k‖ = normalised LMS", check_normalised_lms),
    IdentityCheck("delta rule: normalised keys = online GD on unit-norm inputs", check_normalised_keys),
    IdentityCheck("delta rule: Gated DeltaNet = online GD with weight decay", check_gated),
    IdentityCheck("delta rule: DeltaProduct n_h writes = n_h GD steps per token", check_product),
    IdentityCheck("delta rule: dual form, attention over keys with the errors", check_dual),
)
