"""Means and spreads over seeds: the one home of every mean, sample std and 95% interval the package reports
(``metrics.json``, a sweep's ``summary.csv``, a claim's verdict, the dual form's vote table).

The mean is ``statistics.fmean`` (exactly rounded), the std the sample std (n - 1, ``statistics.stdev``) and the
interval the Student-t 95% interval of the mean, mean ± t(0.975, n-1)·std/√n. Below two values there is no std
and no interval (None), as ``metrics.json`` has always written it. On the log scale (``log=True``) they are taken
of the logs: the geometric mean, the std of the logs and exp(mean log ± t·sd log / √n).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

QUANTILE = 0.975  # of Student's t: a two-sided 95% interval


@dataclass(frozen=True)
class Spread:
    """``n`` values summarised: ``mean``, sample ``std`` and the 95% interval ``low``..``high`` of the mean (None
    below two values; the interval also None when a value is not finite). With ``log`` every figure is on the log
    scale except ``mean``, ``low`` and ``high``, which are brought back (geometric mean, interval)."""

    mean: float
    std: float | None
    low: float | None
    high: float | None
    n: int
    log: bool = False

    @property
    def interval(self) -> tuple[float, float] | None:
        return None if self.low is None or self.high is None else (self.low, self.high)


def mean(values: Sequence[float]) -> float:
    """The mean (``statistics.fmean``: exactly rounded, so independent of the order of the values); NaN for
    values of both infinite signs."""
    try:
        return statistics.fmean(values)
    except ValueError:  # inf + -inf
        return math.nan


def sample_std(values: Sequence[float]) -> float | None:
    """The sample standard deviation (n - 1), None below two values, NaN when a value is not finite."""
    if len(values) < 2:
        return None
    return statistics.stdev(values) if all(math.isfinite(v) for v in values) else math.nan


def t_half_width(std: float, n: int) -> float:
    """Half the width of the 95% Student-t interval of a mean of ``n`` values: t(0.975, n - 1) · std / √n."""
    from scipy.stats import t

    return float(t.ppf(QUANTILE, n - 1)) * std / math.sqrt(n)


def spread(values: Sequence[float], log: bool = False) -> Spread:
    """Mean, sample std and 95% t-interval of ``values`` (at least one); on the log scale with ``log`` (every
    value must then be positive)."""
    values = [float(v) for v in values]
    if not values:
        raise ValueError("spread of no values")
    scaled = [math.log(v) for v in values] if log else values
    centre, std = mean(scaled), sample_std(scaled)
    back = math.exp if log else (lambda v: v)
    if std is None or not all(math.isfinite(v) for v in values):
        return Spread(back(centre), std, None, None, len(values), log)
    half = t_half_width(std, len(values))
    return Spread(back(centre), std, back(centre - half), back(centre + half), len(values), log)


def share_interval(passing: int, n: int) -> tuple[float, float]:
    """The exact (Clopper-Pearson) 95% interval of a proportion ``passing`` / ``n``."""
    from scipy.stats import binomtest

    ci = binomtest(passing, n).proportion_ci(confidence_level=0.95, method="exact")
    return float(ci.low), float(ci.high)
