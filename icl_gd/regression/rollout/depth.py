"""A trained layer applied past its training depth, with damping, beside GD (and GD++) run as long (von Oswald et
al. 2023, §3: the single trained layer iterated 50 times with damping λ = 0.75, against 50 GD steps of size λη).

For each damping λ and n = 1..max_applications: the trained layer applied n times, e <- e + λ·Δ(e)
(``iteration.iterated_predictions``; ``update="y"`` adds only the update's y slots, the authors' ``y_update``),
and each reference's one step (η, γ) taken n times as (λη, λγ). Rows {damping, applications, model, loss} for
``depth.csv``; ``depth_metrics`` reads the last and the least loss per damping off them.

The mean loss over tasks after many damped steps is decided by the few tasks on which the repeated step is
unstable (``gd_instability``), so whether one test set holds such a task decides it. The same curves are therefore
also taken on several independent test draws of the same size (``rollout_draws.csv``, a ``draw`` column), and the
tasks beyond the stability bound of each draw are named (``unstable_task_rows``, ``rollout_tasks.csv``).
``past_training_depth`` is all of it for a run's single trained layer: the rows of the three tables and the
metrics the run records.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from icl_gd.core.errors import ConfigError
from icl_gd.core.progress import phased
from icl_gd.core.shared import TABLES
from icl_gd.regression.baselines import ContextLayout
from icl_gd.regression.gd import GDPPParams, gd_predictions_per_step, gdpp_predictions_per_step
from icl_gd.regression.rollout.iteration import UPDATES, iterated_predictions
from icl_gd.regression.lsa import LSALayer
from icl_gd.regression.metrics import regression_loss
from icl_gd.regression.study import RegressionRun
from icl_gd.regression.tasks import Stream


@dataclass(frozen=True)
class DepthSweep:
    """n = 1..``max_applications`` applications for each damping λ in ``dampings`` (each in (0, 1]); ``update``
    is ``all`` (the whole update) or ``y`` (its y slots only; a GD++ reference then drops its x transform too)."""

    max_applications: int
    dampings: tuple[float, ...]
    update: str = "all"

    def __post_init__(self) -> None:
        if not isinstance(self.max_applications, int) or self.max_applications <= 0:
            raise ConfigError(f"max_applications must be a positive integer, got {self.max_applications!r}")
        if not self.dampings or any(not 0 < g <= 1 for g in self.dampings):
            raise ConfigError(f"dampings must be values in (0, 1], got {self.dampings!r}")
        if self.update not in UPDATES:
            raise ConfigError(f"iterate_update must be one of {', '.join(UPDATES)}, got {self.update!r}")


@phased("trained layer's depth curves")
def trained_depth_rows(sweep: DepthSweep, layer: LSALayer, tokens: torch.Tensor, targets: torch.Tensor,
                       d_y: int) -> list[dict[str, Any]]:
    """Model ``trained``: ``layer`` applied n times to ``tokens (B, T, D)`` with its update scaled by λ (no
    clipping), scored against ``targets (B, d_y)``."""
    rows = []
    for damping in sweep.dampings:
        predictions = iterated_predictions(layer, tokens, sweep.max_applications, damping, sweep.update, d_y)
        rows += depth_rows({"trained": predictions}, targets, damping)
    return rows


@phased("GD/GD++ depth curves")
def reference_depth_rows(sweep: DepthSweep, layout: ContextLayout, tokens: torch.Tensor, targets: torch.Tensor,
                         references: Mapping[str, GDPPParams]) -> list[dict[str, Any]]:
    """Each reference's first step (η, γ) taken n times as (λη, λγ) on the tasks of ``tokens``, computed in float64
    and read in the tokens' dtype (as every reference predictor); γ = 0 (always, under ``update="y"``) is plain GD,
    computed as GD. They do not depend on the training seed: compute them once."""
    n, rows = sweep.max_applications, []
    x, y, x_query = (t.double() for t in layout.split(tokens))
    for damping in sweep.dampings:
        curves = {}
        for name, params in references.items():
            eta = damping * params.etas[0]
            gamma = damping * params.gammas[0] if sweep.update == "all" else 0.0
            steps = (gd_predictions_per_step(x, y, x_query, [eta] * n) if gamma == 0.0 else
                     gdpp_predictions_per_step(x, y, x_query, [eta] * n, [gamma] * n))
            curves[name] = steps[1:].to(tokens.dtype)
        rows += depth_rows(curves, targets, damping)
    return rows


def median_task_loss(prediction: torch.Tensor, targets: torch.Tensor) -> float:
    """The median over tasks of 0.5 ‖ŷ - y‖² (B, d_y each): the typical task's loss, which one diverging task in
    ten thousand cannot move (the mean, ``regression_loss``, it can). A task whose prediction overflowed to NaN
    counts as an infinite loss: ``torch.median`` returns NaN when any element is NaN, which would have let that
    one task make the median infinite (it did, on one seed's roll-out at 10 000 tasks)."""
    losses = 0.5 * ((prediction.double() - targets.double()) ** 2).sum(-1)
    return float(torch.nan_to_num(losses, nan=float("inf"), posinf=float("inf")).median())


def depth_rows(curves: Mapping[str, Sequence[torch.Tensor]], targets: torch.Tensor, damping: float
               ) -> list[dict[str, Any]]:
    """Rows {damping, applications, model, loss, median_loss} of each model's predictions after n = 1, 2, ...
    applications: the mean (the paper's) and the median over tasks of the loss."""
    rows = []
    for name, predictions in curves.items():
        for n, prediction in enumerate(predictions, start=1):
            loss, median = regression_loss(prediction, targets), median_task_loss(prediction, targets)
            rows.append({"damping": damping, "applications": n, "model": name,  # NaN only after overflow
                         "loss": loss if loss == loss else float("inf"),
                         "median_loss": median})  # never NaN: median_task_loss counts NaN as inf
    return rows


def depth_metrics(rows: Sequence[dict[str, Any]], dampings: Sequence[float]) -> dict[str, list[float]]:
    """Per model of the rows (in their order), one value per damping: ``depth_loss_<model>``, the mean loss after
    the last application, ``depth_median_loss_<model>`` the median over tasks there, and ``depth_min_loss_<model>``,
    the least mean loss over all applications."""
    out: dict[str, list[float]] = {}
    for name in dict.fromkeys(r["model"] for r in rows):
        mine = [[r for r in rows if r["model"] == name and r["damping"] == g] for g in dampings]
        out[f"depth_loss_{name}"] = [rs[-1]["loss"] for rs in mine]
        out[f"depth_median_loss_{name}"] = [rs[-1]["median_loss"] for rs in mine]
        out[f"depth_min_loss_{name}"] = [min(r["loss"] for r in rs) for rs in mine]
    return out


def gd_instability(x_context: torch.Tensor, eta: float, dampings: Sequence[float]) -> dict[str, list[float]]:
    """Why repeated GD steps blow up on a few tasks: a step of size λη on L(W) = 1/(2N) Σ ‖W x_i - y_i‖² maps the
    error W - W* by I - λη XᵀX / N, which grows without bound when λη λ_max(XᵀX / N) > 2, however well η suits
    one step. Per damping λ: ``gd_unstable_share``, the share of the tasks ``x_context (B, N, d)`` where that
    holds, and ``gd_max_contraction_rate``, the largest λη λ_max(XᵀX / N) among them (< 2: every task converges)."""
    x = x_context.double()
    top = torch.linalg.eigvalsh(x.transpose(1, 2) @ x / x.shape[1])[:, -1]  # (B,) λ_max(XᵀX / N)
    rates = [damping * eta * top for damping in dampings]
    return {"gd_unstable_share": [float((r > 2).double().mean()) for r in rates],
            "gd_max_contraction_rate": [float(r.max()) for r in rates]}


def unstable_task_rows(x_context: torch.Tensor, eta: float, dampings: Sequence[float], most: int = 10
                       ) -> list[dict[str, Any]]:
    """The tasks of ``x_context (B, N, d)`` on which GD's repeated step λη diverges: λ_max(XᵀX) above the bound
    2N / (λη) (``gd_instability``'s condition). Per damping λ, a row {damping, bound, beyond_count, task,
    lambda_max, beyond_bound} for each such task (the ``most`` largest λ_max of them; ``beyond_count`` counts them
    all), or for the task of the largest λ_max when none is beyond (beyond_bound False), so every damping names how
    close its worst task comes."""
    x = x_context.double()
    n = x.shape[1]
    top = torch.linalg.eigvalsh(x.transpose(1, 2) @ x)[:, -1]  # (B,) λ_max(XᵀX)
    order = torch.argsort(top, descending=True).tolist()
    rows = []
    for damping in dampings:
        bound = 2 * n / (damping * eta)
        count = int((top > bound).sum())
        rows += [{"damping": damping, "bound": bound, "beyond_count": count, "task": task,
                  "lambda_max": float(top[task]), "beyond_bound": bool(top[task] > bound)}
                 for task in order[:max(1, min(count, most))]]
    return rows


def diverges(losses: Sequence[float]) -> bool:
    """Whether a roll-out's loss curve (after n = 1, 2, ... applications) diverges: its last loss not finite or
    above its first (a damped repeated step that converges ends below where it started)."""
    return bool(losses) and (not math.isfinite(losses[-1]) or losses[-1] > losses[0])


def divergence_shares(rows: Sequence[Mapping[str, Any]], models: Sequence[str] = ("trained", "gd")
                      ) -> dict[tuple[float, str], tuple[int, int]]:
    """(damping, model) -> (draws whose curve ``diverges``, draws) over the rows of ``rollout_draws.csv`` (or of
    ``depth.csv``: one draw), each row {seed?, draw?, damping, applications, model, loss}; values may be strings
    (as read back from a CSV)."""
    curves: dict[tuple[float, str, int, int], dict[int, float]] = {}
    for row in rows:
        if row["model"] in models:
            key = (float(row["damping"]), str(row["model"]), int(row.get("seed") or 0), int(row.get("draw") or 0))
            curves.setdefault(key, {})[int(row["applications"])] = float(row["loss"])
    counts: dict[tuple[float, str], tuple[int, int]] = {}
    for (damping, model, _, _), by_n in sorted(curves.items()):
        bad, total = counts.get((damping, model), (0, 0))
        counts[(damping, model)] = (bad + diverges([by_n[n] for n in sorted(by_n)]), total + 1)
    return counts


@dataclass(frozen=True)
class RolloutDraw:
    """One draw of test tasks: contexts ``x_context (B, N, d)``, their ``tokens (B, T, D)``, ``targets (B, d_y)``."""

    x_context: torch.Tensor
    tokens: torch.Tensor
    targets: torch.Tensor


def rollout_draws(run: RegressionRun, count: int) -> list[RolloutDraw]:
    """``count`` independent draws of ``n_test`` tasks each: draw 0 is the run's test set, draw k > 0 step k of
    ``Stream.ROLLOUT`` (the same ``test_seed``)."""
    ev = run.config.evaluation
    draws = [RolloutDraw(run.test_batch.x_context, run.test.tokens, run.test.targets)]
    for k in range(1, count):
        batch, tokens = run.token_task.batch_tokens(ev.n_test, ev.test_seed, k, Stream.ROLLOUT, run.device)
        draws.append(RolloutDraw(batch.x_context, tokens, batch.y_query))
    return draws


@dataclass(frozen=True)
class PastTrainingDepth:
    """What a run records of its single trained layer past the training depth (``past_training_depth``; empty:
    a run whose model has more than one distinct layer).

    ``common``: ``gd_instability`` on the test tasks, the same for every seed; ``metrics``: per seed,
    ``depth_metrics`` of its curves on the test tasks; ``tables``: the rows of ``depth.csv`` (column ``seed``),
    ``rollout_draws.csv`` (``seed``, ``draw``) and ``rollout_tasks.csv`` (``draw``)."""

    common: dict[str, list[float]] = field(default_factory=dict)
    metrics: dict[int, dict[str, list[float]]] = field(default_factory=dict)
    tables: dict[str, list[dict[str, Any]]] = field(default_factory=dict)


def past_training_depth(run: RegressionRun, sweep: DepthSweep, eta: float, layers: Mapping[int, LSALayer],
                        n_draws: int) -> PastTrainingDepth:
    """Each seed's one distinct trained layer (``layers``: seed -> layer) applied n = 1..``sweep.max_applications``
    times per damping λ beside GD of step λη run as long (η: GD's tuned step), on ``n_draws`` independent test
    draws (``rollout_draws``): draw 0, the run's test set, gives ``depth.csv`` and the metrics, every draw
    ``rollout_draws.csv``; each draw's tasks beyond GD's stability bound give ``rollout_tasks.csv``. GD's curves
    depend on no training seed: the run's ``seed_independent`` value ``gd_depth_rows``."""
    draws, layout = rollout_draws(run, n_draws), run.layout
    gd = {"gd": GDPPParams((eta,), (0.0,))}
    gd_rows = run.seed_independent("gd_depth_rows", lambda: [
        reference_depth_rows(sweep, layout, draw.tokens, draw.targets, gd) for draw in draws], TABLES)
    tasks = [{"draw": k, **row} for k, draw in enumerate(draws)
             for row in unstable_task_rows(draw.x_context, eta, sweep.dampings)]
    tables: dict[str, list[dict[str, Any]]] = {"depth": [], "rollout_draws": [], "rollout_tasks": tasks}
    metrics = {}
    for seed, layer in layers.items():
        curves = [trained_depth_rows(sweep, layer, draw.tokens, draw.targets, layout.d_y) + gd_rows[k]
                  for k, draw in enumerate(draws)]  # curves[0]: the test set's
        tables["depth"] += [{"seed": seed, **row} for row in curves[0]]
        tables["rollout_draws"] += [{"seed": seed, "draw": k, **row} for k, rows in enumerate(curves) for row in rows]
        metrics[seed] = depth_metrics(curves[0], sweep.dampings)
    return PastTrainingDepth(gd_instability(draws[0].x_context, eta, sweep.dampings), metrics, tables)
