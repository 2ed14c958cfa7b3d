"""A sweep's result files: ``sweep.csv`` (one row per run), ``summary.csv`` (mean, std and 95% interval over
seeds per grid point, one row per metric) and ``figures/sweep_<key>.{png,pdf}`` (headline metrics against each
grid key, seed bands)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from icl_gd.core.results import write_csv
from icl_gd.core.stats import spread
from icl_gd.platform.sweep.progress import HEADLINE_METRICS

MAX_PANELS = 6


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _point(record: Any, grid_keys: Sequence[str]) -> dict[str, Any]:
    values = record.spec.values()
    return {"study": record.spec.study, "preset": record.spec.preset, **{k: values.get(k, "") for k in grid_keys}}


def sweep_rows(records: Sequence[Any], grid_keys: Sequence[str]) -> list[dict[str, Any]]:
    """One row per run: run_id, study, preset, grid values, seed, status, error, wall_s, every scalar metric."""
    rows = []
    for record in records:
        scalars = {k: v for k, v in record.metrics.items() if _number(v)}
        rows.append({"run_id": record.spec.run_id(), **_point(record, grid_keys),
                     "seed": record.spec.values().get("seed", ""), "status": record.status,
                     "error": record.error or "", "wall_s": round(record.wall_s, 3), **scalars})
    return rows


def summary_rows(records: Sequence[Any], grid_keys: Sequence[str]) -> list[dict[str, Any]]:
    """Tidy rows per grid point and metric over the runs that finished: n, mean, std (n-1), and the 95% interval
    of the mean (Student t; empty for one seed)."""
    groups: dict[tuple, dict[str, list[float]]] = {}
    points: dict[tuple, dict[str, Any]] = {}
    for record in records:
        if record.status == "failed":
            continue
        point = _point(record, grid_keys)
        key = tuple(point.values())
        points[key] = point
        metrics = groups.setdefault(key, {})
        for name, value in record.metrics.items():
            if _number(value) and math.isfinite(value):
                metrics.setdefault(name, []).append(float(value))
    rows = []
    for key, metrics in groups.items():
        for name, values in metrics.items():
            s = spread(values)
            rows.append({**points[key], "metric": name, "n": s.n, "mean": s.mean, "std": _blank(s.std),
                         "ci95_low": _blank(s.low), "ci95_high": _blank(s.high)})
    return rows


def _blank(value: float | None) -> float | str:
    return "" if value is None else value


def headline_panels(records: Sequence[Any]) -> list[list[str]]:
    """The metrics the figures show, by panel: the headline losses present together (or, without any, the first
    ``loss_`` ones), then every other headline metric on its own."""
    present = {k for r in records for k, v in r.metrics.items() if _number(v)}
    chosen = [k for k in HEADLINE_METRICS if k in present]
    losses = [k for k in chosen if k.startswith("loss_")] or sorted(k for k in present if k.startswith("loss_"))[:3]
    panels = ([losses] if losses else []) + [[k] for k in chosen if not k.startswith("loss_")]
    return panels[:MAX_PANELS]


def write_sweep_results(root: Path, records: Sequence[Any], grid_keys: Sequence[str]) -> None:
    """Write ``sweep.csv``, ``summary.csv`` and the figures under ``root`` (atomically, each)."""
    root = Path(root)
    write_csv(root / "sweep.csv", sweep_rows(records, grid_keys))
    summary = summary_rows(records, grid_keys)
    write_csv(root / "summary.csv", summary)
    panels = headline_panels(records)
    if not summary or not panels:
        return
    from icl_gd.core.plotting import save_figure

    for key in grid_keys:
        save_figure(sweep_figure(summary, key, [k for k in grid_keys if k != key], panels), root, f"sweep_{key}")


def sweep_figure(summary: list[dict[str, Any]], key: str, other_keys: Sequence[str], panels: Sequence[list[str]]):
    """One panel per group of metrics: each one's mean over seeds against ``key``, one line per metric and value
    of the other grid keys (and study/preset when the sweep mixes them), the band its 95% interval (mean ± std
    where that is missing)."""
    from icl_gd.core.plotting import plt  # the headless backend and the house style

    cols = min(3, len(panels))
    rows_n = math.ceil(len(panels) / cols)
    fig, axes = plt.subplots(rows_n, cols, figsize=(4.2 * cols, 3.2 * rows_n), squeeze=False)
    mixed = {f for f in ("study", "preset") if len({r[f] for r in summary}) > 1}
    line_keys = [*sorted(mixed), *other_keys]
    x_values = list(dict.fromkeys(r[key] for r in summary))
    numeric = all(_is_float(v) for v in x_values)
    position = {v: (float(v) if numeric else i) for i, v in enumerate(x_values)}
    for ax, metrics in zip(axes.flat, panels):
        lines: dict[tuple, list[dict[str, Any]]] = {}
        for r in summary:
            if r["metric"] in metrics:
                lines.setdefault((r["metric"], *(r[k] for k in line_keys)), []).append(r)
        for label, points in lines.items():
            points.sort(key=lambda r: position[r[key]])
            xs = [position[r[key]] for r in points]
            mean = [r["mean"] for r in points]
            low = [r["ci95_low"] if r["ci95_low"] != "" else r["mean"] - (r["std"] or 0) for r in points]
            high = [r["ci95_high"] if r["ci95_high"] != "" else r["mean"] + (r["std"] or 0) for r in points]
            name = ", ".join([label[0]] * (len(metrics) > 1) + [f"{k}={v}" for k, v in zip(line_keys, label[1:])])
            ax.plot(xs, mean, marker="o", label=name)
            ax.fill_between(xs, low, high, alpha=0.25)
        if numeric and min(position.values()) > 0 and max(position.values()) / min(position.values()) >= 8:
            ax.set_xscale("log", base=2)
        if not numeric:
            ax.set_xticks(range(len(x_values)), x_values)
        else:
            ax.set_xticks([position[v] for v in x_values], x_values)
        ax.set_xlabel(key)
        ax.set_title("loss" if len(metrics) > 1 else metrics[0])
        if line_keys or len(metrics) > 1:
            ax.legend(fontsize=6)
    for ax in list(axes.flat)[len(panels):]:
        ax.set_visible(False)
    n_seeds = max((r["n"] for r in summary), default=0)
    fig.suptitle(f"mean over seeds (up to {n_seeds}), band: 95% interval of the mean")
    fig.tight_layout()
    return fig


def _is_float(value: Any) -> bool:
    try:
        float(value)
        return True
    except (TypeError, ValueError):
        return False
