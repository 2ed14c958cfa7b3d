"""Study `finite-tasks` (beyond the papers): linear attention pretrained on K = κd tasks at finite d, trained exactly,
against Lu, Letey, Zavatone-Veth, Maiti & Pehlevan (PNAS 2025)'s asymptotic curves and their stored simulations.

On the axes of the authors' stored figure (α = τ = 10, ρ = 0.01, κ from 0.2 to 32; their scaling: x ~ N(0, I/d),
noise variance ρ, plain squared error), for every token dimension d of ``dims`` and every seed, the layer
ŷ = x_qᵀ Γ h is fitted to its n = τd² pretraining contexts by least squares (where gradient descent from Γ = 0
converges: ``icl_gd.regression.task_diversity.finite_tasks``) and scored exactly on fresh tasks (ICL) and on its K
pretraining tasks (IDG), beside ridge per context (the Bayes predictor for fresh tasks) and dMMSE (the Bayes
predictor for the K tasks) on sampled test contexts:

- ``kappa.csv``: one row per (seed, d, κ): the six errors, g_task = e_ICL - e_IDG, the d → ∞ curves
  (``icl_gd.regression.task_diversity.asymptotics``) and the authors' stored g_task at that d where they stored one;
- ``metrics.json``: per d the mean and worst relative gap of e_ICL and e_IDG to their curves over the κ grid and
  the mean gap of g_task to the stored simulations (on the scale of e_ICL); at the largest and smallest d what the
  claims read; at the smallest and largest κ (largest d) the ratios that show the task-diversity transition.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from icl_gd.core.config import check_settings, positive_int, require_non_negative, require_positive, setting
from icl_gd.core.errors import ConfigError
from icl_gd.core.plotting import legend_outside, plt
from icl_gd.core.study import RunContext, RunMemory, Study, StudyRun
from icl_gd.regression import metric_names as names
from icl_gd.regression.task_diversity.asymptotics import asymptotic_errors
from icl_gd.regression.task_diversity.finite_tasks import LU_KAPPAS, FiniteTaskConfig, run_finite_tasks
from icl_gd.regression.task_diversity.lu_simulations import load_lu_simulations

ERRORS = ("icl", "idg")


def _require_dims(name: str, dims: tuple[int, ...]) -> None:
    if not isinstance(dims, tuple) or not dims or list(dims) != sorted(set(dims)) \
            or any(not isinstance(d, int) or isinstance(d, bool) or not 2 <= d <= 256 for d in dims):
        raise ConfigError(f"{name} must be increasing integers in 2..256, got {dims!r}")


def _require_kappas(name: str, kappas: tuple[float, ...]) -> None:
    if not isinstance(kappas, tuple) or not kappas or list(kappas) != sorted(set(kappas)) \
            or any(not isinstance(k, (int, float)) or isinstance(k, bool) or not k > 0 for k in kappas):
        raise ConfigError(f"{name} must be increasing positive task diversities, got {kappas!r}")


@dataclass(frozen=True)
class FiniteTasksConfig:
    """The κ sweep at every d of ``dims``; each seed is one independent draw of tasks, pretraining contexts and
    test contexts at every (d, κ)."""

    dims: tuple[int, ...] = setting((10, 32), "token dimensions d (the authors stored d = 10, 32, 64)",
                                    check=_require_dims)
    alpha: float = setting(10.0, "context length ℓ = round(α d)", check=require_positive)
    tau: float = setting(10.0, "pretraining contexts n = round(τ d²)", check=require_positive)
    rho: float = setting(0.01, "label noise variance ρ (their scaling: x ~ N(0, I/d))", check=require_positive)
    ridge: float = setting(0.0, "ridge λ, penalty (n/d) λ ‖Γ‖² on the summed squared error; 0: least squares",
                           check=require_non_negative)
    kappas: tuple[float, ...] = setting(LU_KAPPAS, "task diversities κ; K = ⌊κ d⌋ tasks", check=_require_kappas)
    test_contexts: int = positive_int(1000, "test contexts per (d, κ, seed) and law for ridge and dMMSE")
    seeds: int = positive_int(2, "independent draws (tasks, pretraining contexts, test contexts)")
    seed: int = setting(0, "first seed; seeds are seed, seed+1, ...", check=require_non_negative)
    test_seed: int = setting(2023, "seed of the baselines' test contexts", check=require_non_negative)

    def __post_init__(self) -> None:
        check_settings(self)
        for d in self.dims:
            self.law(d)

    def law(self, d: int) -> FiniteTaskConfig:
        """One draw of the κ sweep at dimension d."""
        return FiniteTaskConfig(d=d, alpha=self.alpha, tau=self.tau, rho=self.rho, ridge=self.ridge,
                                kappas=tuple(float(k) for k in self.kappas), draws=1,
                                test_contexts=self.test_contexts)


def kappa_rows(config: FiniteTasksConfig, seed: int, device: Any) -> list[dict[str, Any]]:
    """One row per (d, κ) of one seed (``FiniteTaskResult.rows``) with the authors' stored g_task at that d
    (``stored_task_generalisation``, None where they stored none)."""
    stored = load_lu_simulations()
    rows = []
    for d in config.dims:
        series = stored.series_of("linear attention", d)
        dmmse = stored.series_of("dMMSE", d)
        for row in run_finite_tasks(config.law(d), seed, device, test_seed=config.test_seed + seed).rows():
            theirs = series.at(row["kappa"]) if series is not None else None
            theirs_dmmse = dmmse.at(row["kappa"]) if dmmse is not None else None
            rows.append({**row, "stored_task_generalisation": None if theirs is None else theirs[0],
                         "stored_dmmse_task_generalisation": None if theirs_dmmse is None else theirs_dmmse[0]})
    return rows


def seed_metrics(rows: list[dict[str, Any]], dims: tuple[int, ...]) -> dict[str, float]:
    """A seed's readings of ``kappa_rows``: per d, the mean and worst |e - e∞| / e∞ over the κ grid of e_ICL and
    e_IDG and the mean |g_task - g_task stored| / e∞_ICL over the κ where the authors stored one (NaN where none);
    the same at the largest and smallest d under d-free names; at the largest d, e_ICL / e_IDG at the smallest κ
    (the layer's and dMMSE's) and g_task / e_IDG at the largest κ."""
    out: dict[str, float] = {}
    for d in dims:
        own = [r for r in rows if r["d"] == d]
        for error in ERRORS:  # e∞_IDG is None at λ > 0 (only its ridgeless limit is implemented): NaN
            gaps = [abs(r[error] / r[f"theory_{error}"] - 1) if r[f"theory_{error}"] else math.nan for r in own]
            out[names.asymptotic_gap(error, "mean", d)] = float(np.mean(gaps))
            out[names.asymptotic_gap(error, "worst", d)] = float(max(gaps))
        stored = [abs(r["task_generalisation"] - r["stored_task_generalisation"]) / r["theory_icl"] for r in own
                  if r["stored_task_generalisation"] is not None]
        out[names.stored_gap(d)] = float(np.mean(stored)) if stored else math.nan
    for which, d in (("largest", dims[-1]), ("smallest", dims[0])):
        out[names.asymptotic_gap("icl", "mean", which)] = out[names.asymptotic_gap("icl", "mean", d)]
        out[names.stored_gap(which)] = out[names.stored_gap(d)]
    largest = [r for r in rows if r["d"] == dims[-1]]
    low, high = min(largest, key=lambda r: r["kappa"]), max(largest, key=lambda r: r["kappa"])
    out[names.error_ratio("icl", "idg", "smallest")] = low["icl"] / low["idg"]
    out[names.error_ratio("dmmse_icl", "dmmse_idg", "smallest")] = low["dmmse_icl"] / low["dmmse_idg"]
    out[names.error_ratio("task_generalisation", "idg", "largest")] = high["task_generalisation"] / high["idg"]
    out[names.error_ratio("icl", "ridge_icl", "largest")] = high["icl"] / high["ridge_icl"]
    return out


def run(config: FiniteTasksConfig, ctx: RunContext) -> dict[str, Any]:
    run = StudyRun(ctx, [config.seed + i for i in range(config.seeds)])
    for seed in run.seeds:
        rows = kappa_rows(config, seed, ctx.device)
        run.add_rows("kappa", rows, seed=seed)
        run.record(seed, seed_metrics(rows, config.dims))
    return run.finish(lambda mean: [("finite_tasks", finite_tasks_figure(config, run.tables["kappa"]))])


def finite_tasks_figure(config: FiniteTasksConfig, rows: list[dict[str, Any]]) -> Any:
    """Left: e_ICL (filled) and e_IDG (open) of the trained layer against κ, mean over seeds, one colour per d, the
    d → ∞ curves (lines), ridge's and dMMSE's e_ICL at the largest d. Right: g_task = e_ICL - e_IDG, ours (filled),
    the authors' stored simulations at the same d (crosses) and the curve."""
    grid = np.geomspace(min(config.kappas) * 0.75, max(config.kappas) * 1.25, 60)
    curves = [asymptotic_errors(config.alpha, float(k), config.tau, config.rho, config.ridge) for k in grid]
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    left.plot(grid, [c.icl for c in curves], color="black", lw=1.2, label="e_ICL, d → ∞")
    if config.ridge == 0:
        left.plot(grid, [c.idg for c in curves], color="black", lw=1.2, ls="--", label="e_IDG, d → ∞")
        right.plot(grid, [c.task_generalisation for c in curves], color="black", lw=1.2, label="d → ∞")

    def mean(d: int, key: str) -> tuple[list[float], list[float]]:
        kappas = sorted({r["kappa"] for r in rows if r["d"] == d})
        values = [[r[key] for r in rows if r["d"] == d and r["kappa"] == k] for k in kappas]
        keep = [(k, float(np.mean(v))) for k, v in zip(kappas, values) if all(x is not None for x in v)]
        return [k for k, _ in keep], [v for _, v in keep]

    for i, d in enumerate(config.dims):
        color = f"C{i}"
        left.plot(*mean(d, "icl"), "o", color=color, ms=5, label=f"trained, e_ICL, d = {d}")
        left.plot(*mean(d, "idg"), "o", color=color, ms=5, mfc="none", label=f"trained, e_IDG, d = {d}")
        right.plot(*mean(d, "task_generalisation"), "o-", color=color, ms=5, lw=0.8, label=f"trained, d = {d}")
        stored = mean(d, "stored_task_generalisation")
        if stored[0]:
            right.plot(*stored, "x", color=color, ms=8, label=f"authors' stored, d = {d}")
    largest = config.dims[-1]
    left.plot(*mean(largest, "ridge_icl"), "s", color="grey", ms=4, label=f"ridge (Bayes, fresh tasks), d = {largest}")
    left.plot(*mean(largest, "dmmse_icl"), "^", color="grey", ms=4, label=f"dMMSE, e_ICL, d = {largest}")
    for ax, label in ((left, "error E(ŷ - y)², their scaling"), (right, "g_task = e_ICL - e_IDG")):
        ax.set(xscale="log", xlabel="task diversity κ = K/d", ylabel=label)
        ax.axvline(1, color="red", ls=":", lw=1)
    left.set_yscale("log")
    left.set_title(f"α = {config.alpha:g}, τ = {config.tau:g}, ρ = {config.rho:g}", fontsize=9)
    right.set_title("crosses: Lu et al.'s stored simulations (their reduced model)", fontsize=9)
    legend_outside(right, fontsize=7)
    left.legend(fontsize=6)
    fig.tight_layout()
    return fig


def full_config() -> FiniteTasksConfig:
    """The sizes of the authors' stored simulations (d = 10, 32, 64), three seeds, 2000 test contexts."""
    return FiniteTasksConfig(dims=(10, 32, 64), seeds=3, test_contexts=2000)


def run_memory(config: FiniteTasksConfig) -> RunMemory:
    """Its seeds; the largest tensors (d² × d² Gram matrix, 512 × ℓ × d test inputs) are under 300 MB at d = 64."""
    return RunMemory(seeds_key="seeds", seeds=config.seeds)


STUDY = Study(
    name="finite-tasks",
    summary="linear attention pretrained on K = κd tasks at finite d, trained exactly, against Lu et al.'s "
            "asymptotic ICL and IDG curves and their stored simulations (beyond the papers)",
    default_config=FiniteTasksConfig,
    run=run,
    default_threads=1,
    presets={"full": full_config},
    headline=(names.asymptotic_gap("icl", "mean", "largest"), names.stored_gap("largest"),
              names.error_ratio("icl", "idg", "smallest"), names.error_ratio("task_generalisation", "idg", "largest")),
    memory=run_memory,
    tiny=("dims=6,10", "kappas=0.2,32", "test_contexts=16", "seeds=1"),
)
