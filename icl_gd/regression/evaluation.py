"""Scoring predictors on a fixed test set against cached references; tidy rows for curves.csv.

A ``EvalSet`` holds tokens (B, T, D) and targets (B, d_y); a ``Reference`` caches a predictor's ŷ and input
sensitivities on it, so the alignment of many models (or one model at many steps) costs one pass each.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from icl_gd.regression import metric_names as names
from icl_gd.regression.metrics import Alignment, Predictor, alignment, predictions_and_sensitivities, regression_loss


@dataclass(frozen=True)
class EvalSet:
    tokens: torch.Tensor  # (B, T, D)
    targets: torch.Tensor  # (B, d_y)
    d_x: int


@dataclass(frozen=True)
class Scored:
    """A predictor's ŷ (B, d_y), sensitivities (B, d_x) and loss on a test set."""

    prediction: torch.Tensor
    sensitivity: torch.Tensor
    loss: float

    def alignment_with(self, reference: "Scored") -> Alignment:
        return alignment(self.prediction, reference.prediction, self.sensitivity, reference.sensitivity)


def score(predictor: Predictor, test: EvalSet) -> Scored:
    pred, sens = predictions_and_sensitivities(predictor, test.tokens, test.d_x)
    return Scored(pred, sens, regression_loss(pred, test.targets))


def scored_rows(step: int, seed: int, model: str, scored: Scored, references: Mapping[str, Scored]) -> list[dict[str, Any]]:
    """Tidy rows (step, seed, model, metric, value): the loss and the alignment with every reference."""
    rows = [{"step": step, "seed": seed, "model": model, "metric": "loss", "value": scored.loss}]
    for ref_name, ref in references.items():
        a = scored.alignment_with(ref)
        for metric in ("pred_diff", "cos_sensitivity", "sensitivity_diff"):
            rows.append({"step": step, "seed": seed, "model": model, "metric": f"{metric}_vs_{ref_name}",
                         "value": getattr(a, metric)})
    return rows


def alignment_metrics(prefix: str, scored: Scored, reference: Scored, suffix: str = "") -> dict[str, float]:
    """Every alignment measure of ``scored`` against ``reference`` (``metric_names.alignment``):
    ``{prefix}pred_diff{suffix}``, ``{prefix}cos_sensitivity{suffix}``, ``{prefix}sensitivity_diff{suffix}``."""
    a = scored.alignment_with(reference)
    return {names.alignment(measure, prefix, suffix): getattr(a, measure) for measure in names.ALIGNMENT}


def relative_prediction_rms(scored: Scored, reference: Scored) -> float:
    """√(mean ‖ŷ - ŷ_ref‖²) / √(mean ‖ŷ_ref‖²) over the test tasks: how far one learned function is from another,
    relative to the reference's size (the test queries cover the input range, so this is their L2 distance over
    it; 0 when the functions coincide, about √2 for unrelated functions of equal size)."""
    difference = ((scored.prediction.double() - reference.prediction.double()) ** 2).sum(-1).mean()
    size = (reference.prediction.double() ** 2).sum(-1).mean()
    return float((difference / size).sqrt())


def predictor_dtype(predictor: Any) -> torch.dtype | None:
    """The dtype of a module's first floating parameter (its inputs are cast to it); None for a plain callable."""
    if isinstance(predictor, torch.nn.Module):
        for param in predictor.parameters():
            if param.is_floating_point():
                return param.dtype
    return None
