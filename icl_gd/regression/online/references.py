"""Online learners as references: online GD and normalised LMS (``icl_gd.regression.online.algorithms``) answering
the one predictor call (tokens (B, N+1, D) in, ŷ (B, d_y) out), their step sizes tuned on held-out tasks, the query
loss after every prefix of the context for any predictor, and the table of the learners a trained fast-weight layer
is measured against (``REFERENCES``: these two, ridge, one batch GD step and least squares, each with its tuning).

The step size is tuned by ``tune_gd``'s L-BFGS (``icl_gd.regression.tuning.tune_step_size``): the η minimising the
mean query loss on the held-out tasks (float64, strong Wolfe), here over log η (η > 0). Shapes: B tasks, N context
pairs, d inputs, d_y outputs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from icl_gd.regression.baselines import (ContextLayout, GDPredictor, LeastSquaresPredictor, RidgePredictor,
                                         tune_ridge)
from icl_gd.regression.gd import optimal_one_step_eta
from icl_gd.regression.metrics import Predictor, query_loss
from icl_gd.regression.online.algorithms import (normalised_lms_weights_per_token, online_gd_weights_per_token,
                                                 predictions_per_token)
from icl_gd.regression.tuning import tune_step_size


class OnlineGDPredictor(nn.Module):
    """Online GD (LMS) from W = 0 with step size ``eta`` and decay ``decay`` (``online_gd_weights_per_token``), one
    pass over the context in order, read from tokens of any ``layout``; float64 inside, ŷ in the tokens' dtype."""

    def __init__(self, layout: ContextLayout, eta: float, decay: float = 1.0) -> None:
        super().__init__()
        self.layout, self.eta, self.decay = layout, float(eta), float(decay)

    def predictions_per_token(self, tokens: torch.Tensor) -> torch.Tensor:
        """(N+1, B, d_y) predictions W_t x_q after t = 0..N context pairs."""
        x, y, x_query = (t.double() for t in self.layout.split(tokens))
        weights = online_gd_weights_per_token(x, y, self.eta, self.decay)
        return predictions_per_token(weights, x_query).to(tokens.dtype)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.predictions_per_token(tokens)[-1]


class NormalisedLMSPredictor(nn.Module):
    """Normalised LMS from W = 0, step η / ‖x_t‖² (``normalised_lms_weights_per_token``), read from tokens of any
    ``layout``; float64 inside, ŷ in the tokens' dtype."""

    def __init__(self, layout: ContextLayout, eta: float) -> None:
        super().__init__()
        self.layout, self.eta = layout, float(eta)

    def predictions_per_token(self, tokens: torch.Tensor) -> torch.Tensor:
        """(N+1, B, d_y) predictions W_t x_q after t = 0..N context pairs."""
        x, y, x_query = (t.double() for t in self.layout.split(tokens))
        return predictions_per_token(normalised_lms_weights_per_token(x, y, self.eta), x_query).to(tokens.dtype)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.predictions_per_token(tokens)[-1]


def tune_online_gd(x: torch.Tensor, y: torch.Tensor, x_query: torch.Tensor, y_query: torch.Tensor) -> float:
    """Online GD's η minimising the mean query loss on the given (held-out) tasks x (B, N, d), y (B, N, d_y),
    x_query (B, d), y_query (B, d_y); from η = 1 / mean ‖x‖² (about the population optimum, 1/(E‖x‖² + 2σ²),
    for Gaussian inputs)."""
    x, y, x_query, y_query = (t.double() for t in (x, y, x_query, y_query))

    def loss(eta: torch.Tensor) -> torch.Tensor:
        return query_loss(predictions_per_token(online_gd_weights_per_token(x, y, eta), x_query)[-1], y_query)

    return tune_step_size(loss, 1.0 / float((x * x).sum(-1).mean()))


def tune_normalised_lms(x: torch.Tensor, y: torch.Tensor, x_query: torch.Tensor, y_query: torch.Tensor) -> float:
    """Normalised LMS's η minimising the mean query loss on the given (held-out) tasks, from η = 1/2."""
    x, y, x_query, y_query = (t.double() for t in (x, y, x_query, y_query))

    def loss(eta: torch.Tensor) -> torch.Tensor:
        return query_loss(predictions_per_token(normalised_lms_weights_per_token(x, y, eta), x_query)[-1], y_query)

    return tune_step_size(loss, 0.5)


# ---------------------------------------------------------------------------------------------------- the table
Tuner = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], float]


@dataclass(frozen=True)
class ReferenceLearner:
    """A learner the trained layers are measured against: ``name`` (in metrics and tables), ``label`` (in figures),
    its predictor at its tuned parameter (``predictor(layout, parameter)``, the parameter None where nothing is
    tuned), how that parameter is tuned (``tune(x, y, x_query, y_query)`` on held-out tasks) and the metric it is
    recorded as (``parameter``). ``online``: it reads the context in order, so its order sensitivity is the
    learner's own (a batch learner's is round-off)."""

    name: str
    label: str
    predictor: Callable[[ContextLayout, float | None], nn.Module]
    tune: Tuner | None = None
    parameter: str | None = None
    online: bool = False


REFERENCES = (
    ReferenceLearner("online_gd", "online GD (η tuned)", OnlineGDPredictor, tune_online_gd, "eta_online_gd",
                     online=True),
    ReferenceLearner("nlms", "normalised LMS (η tuned)", NormalisedLMSPredictor, tune_normalised_lms, "eta_nlms",
                     online=True),
    ReferenceLearner("ridge", "ridge (λ tuned)", RidgePredictor, tune_ridge, "lambda_ridge"),
    ReferenceLearner("gd", "one batch GD step (η tuned)", lambda layout, eta: GDPredictor(layout, [eta]),
                     optimal_one_step_eta, "eta_gd"),
    ReferenceLearner("least_squares", "least squares", lambda layout, _: LeastSquaresPredictor(layout)),
)
REFERENCE = {r.name: r for r in REFERENCES}


def tuned_parameters(x: torch.Tensor, y: torch.Tensor, x_query: torch.Tensor, y_query: torch.Tensor
                     ) -> dict[str, float]:
    """{name: parameter} of every reference with one to tune, tuned on the given (held-out) tasks x (B, N, d),
    y (B, N, d_y), x_query (B, d), y_query (B, d_y), in the table's order."""
    return {r.name: r.tune(x, y, x_query, y_query) for r in REFERENCES if r.tune is not None}


# ---------------------------------------------------------------------------------------------------- per prefix
def prefix_tokens(tokens: torch.Tensor, t: int) -> torch.Tensor:
    """Tokens (B, t+1, D) of the first ``t`` context tokens of ``tokens`` (B, N+1, D) and its query, last."""
    return torch.cat([tokens[:, :t], tokens[:, -1:]], dim=1)


def predictions_per_prefix(predictor: Predictor, tokens: torch.Tensor) -> torch.Tensor:
    """(N, B, d_y) predictions of ``predictor`` (the one call) on its query after the first t = 1..N context tokens:
    each prefix given to it as a context of its own (``prefix_tokens``), so any predictor answers, whatever it
    computes inside."""
    with torch.no_grad():
        return torch.stack([predictor(prefix_tokens(tokens, t)) for t in range(1, tokens.shape[1])])


def loss_per_position(predictor: Predictor, tokens: torch.Tensor, targets: torch.Tensor) -> list[float]:
    """The mean query loss ½‖ŷ_t - y_q‖² after t = 1..N context tokens (``predictions_per_prefix``); targets
    (B, d_y)."""
    predictions = predictions_per_prefix(predictor, tokens)
    return [float(v) for v in query_loss(predictions.double(), targets.double())]
