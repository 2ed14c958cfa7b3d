"""Pure metrics: losses, input sensitivities, alignment between a model and a reference (von Oswald et al. 2023, §3).

Shapes: B tasks, T tokens, D token width, d_x inputs, d_y outputs. A predictor is anything that maps tokens
(B, T, D) to ŷ (B, d_y). Alignment compares raw query outputs f = -ŷ; |f - f_ref| = |ŷ - ŷ_ref| and the
cosine of sensitivities is sign-free, so both are computed on ŷ.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from icl_gd.core.errors import ConfigError

Predictor = Callable[[torch.Tensor], torch.Tensor]
"""The one predictor call: tokens (B, T, D) in, ŷ (B, d_y) out. Baselines, constructed and trained models answer it."""


def query_loss(prediction: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """0.5 · mean over tasks of ‖ŷ - y‖² (von Oswald et al. 2023, Eq. 5, with the 1/2 of their code),
    differentiable. ŷ, y: (..., B, d_y) -> (...): a leading seed axis (S, B, d_y) gives each seed's own loss (S,)."""
    return 0.5 * ((prediction - target) ** 2).sum(-1).mean(-1)


def regression_loss(prediction: torch.Tensor, target: torch.Tensor) -> float:
    """``query_loss`` of one set of tasks as a float."""
    return float(query_loss(prediction, target))


# Tasks x layers per autograd pass of the sensitivities: the graph holds every layer's states for every task, so
# a deep predictor is scored EVAL_TASK_LAYERS // depth tasks at a time (exact: tasks are independent). Up to 20
# layers at n_test = 10 000 this is one pass, as it always was.
EVAL_TASK_LAYERS = 200_000


def predictor_depth(predictor: Predictor) -> int:
    """The layers or steps a predictor applies: an LSA model's ``config.n_layers``, GD's ``etas``, GD++'s
    ``params``, a wrapper's ``predictor``'s; 1 when it does not say."""
    n_layers = getattr(getattr(predictor, "config", None), "n_layers", None)
    if isinstance(n_layers, int):
        return n_layers
    etas = getattr(predictor, "etas", None) or getattr(getattr(predictor, "params", None), "etas", None)
    if etas is not None:
        return len(etas)
    inner = getattr(predictor, "predictor", None)
    return predictor_depth(inner) if inner is not None else 1


def predictions_and_sensitivities(
    predictor: Predictor, tokens: torch.Tensor, d_x: int, query_index: int = -1,
) -> tuple[torch.Tensor, torch.Tensor]:
    """ŷ (B, d_y) and s = ∂ŷ/∂x_q (B, d_x) of the first output, x_q = tokens[:, query_index, :d_x].

    Tasks are independent, so the gradient of Σ_b ŷ_b with respect to every query at once is per-task exact;
    a deep predictor goes through in chunks of tasks (``EVAL_TASK_LAYERS``) so its graph stays small.
    """
    size = max(1, EVAL_TASK_LAYERS // predictor_depth(predictor))
    if tokens.shape[0] > size:
        parts = [predictions_and_sensitivities_of(predictor, tokens[a:a + size], d_x, query_index)
                 for a in range(0, tokens.shape[0], size)]
        return torch.cat([p for p, _ in parts]), torch.cat([s for _, s in parts])
    return predictions_and_sensitivities_of(predictor, tokens, d_x, query_index)


def predictions_and_sensitivities_of(
    predictor: Predictor, tokens: torch.Tensor, d_x: int, query_index: int = -1,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``predictions_and_sensitivities`` in one autograd pass over all the tasks; ConfigError when no gradient
    reaches the query from ŷ."""
    with torch.enable_grad():
        tokens = tokens.detach().clone()
        x_q = tokens[:, query_index, :d_x].clone().requires_grad_(True)
        tokens[:, query_index, :d_x] = x_q
        prediction = predictor(tokens)
        grad = None
        if prediction.requires_grad:
            (grad,) = torch.autograd.grad(prediction[:, 0].sum(), x_q, allow_unused=True)
    if grad is None:
        raise ConfigError("the predictor's ŷ does not depend on the query x_q through autograd (a constant output, "
                          "or one computed outside torch, e.g. after .detach() or in numpy): its sensitivity "
                          "∂ŷ/∂x_q cannot be measured")
    return prediction.detach(), grad.detach()


@dataclass(frozen=True)
class Alignment:
    """Mean |f - f_ref|, mean cos(s, s_ref) and mean ‖s - s_ref‖₂ over tasks."""

    pred_diff: float
    cos_sensitivity: float
    sensitivity_diff: float


def alignment(pred: torch.Tensor, pred_ref: torch.Tensor, sens: torch.Tensor, sens_ref: torch.Tensor) -> Alignment:
    """Alignment of (ŷ (B, d_y), s (B, d_x)) with a reference's."""
    cos = torch.nn.functional.cosine_similarity(sens, sens_ref, dim=-1, eps=1e-12)
    return Alignment(
        pred_diff=float((pred - pred_ref).abs().sum(-1).mean()),
        cos_sensitivity=float(cos.mean()),
        sensitivity_diff=float((sens - sens_ref).norm(dim=-1).mean()),
    )
