"""The authors' own stored simulations of Lu et al. (PNAS 2025)'s task-diversity figure: g_task = e_ICL - e_IDG
against κ = K/d at α = τ = 10, ρ = 0.01 for d = 10, 32 and 64, of their trained linear attention and of the dMMSE
estimator (``lu_simulations.json``, with its provenance: repository, commit, the CSV each series came from and what
each column is)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from icl_gd.core.errors import ConfigError

LU_SIMULATIONS = Path(__file__).with_name("lu_simulations.json")
ESTIMATORS = ("linear attention", "dMMSE")


@dataclass(frozen=True)
class StoredSeries:
    """One stored curve: ``estimator`` (one of ``ESTIMATORS``) at token dimension ``d``, each value the mean of
    ``draws`` draws; ``kappas``, ``means`` and ``spreads`` (the population std of single draws, not a standard error)
    in κ order, in their scaling (plain squared error, x ~ N(0, I/d)); ``path`` the CSV in their repository."""

    estimator: str
    d: int
    draws: int
    kappas: tuple[float, ...]
    means: tuple[float, ...]
    spreads: tuple[float, ...]
    path: str

    def at(self, kappa: float) -> tuple[float, float] | None:
        """(mean, spread) at ``kappa``, None where the series has no point there."""
        for k, mean, spread in zip(self.kappas, self.means, self.spreads):
            if abs(k - kappa) <= 1e-9 * max(1.0, abs(kappa)):
                return mean, spread
        return None


@dataclass(frozen=True)
class StoredSimulations:
    """The file: its ``repository`` and ``commit``, the ``settings`` every series shares (α, τ, ρ, their ridge λ)
    and the ``series``."""

    repository: str
    commit: str
    settings: dict
    series: tuple[StoredSeries, ...]

    def series_of(self, estimator: str, d: int) -> StoredSeries | None:
        """The ``estimator``'s series at ``d``, None when none is stored."""
        if estimator not in ESTIMATORS:
            raise ConfigError(f"estimator must be one of {', '.join(ESTIMATORS)}, got {estimator!r}")
        return next((s for s in self.series if s.estimator == estimator and s.d == d), None)

    @property
    def dimensions(self) -> tuple[int, ...]:
        return tuple(sorted({s.d for s in self.series}))


def load_lu_simulations(path: Path = LU_SIMULATIONS) -> StoredSimulations:
    """Read ``lu_simulations.json`` (or ``path``); ConfigError when a series is malformed (unknown estimator, κ not
    increasing, columns of different lengths)."""
    try:
        raw = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(f"cannot read the stored simulations {path}: {exc}") from None
    series = []
    for entry in raw["series"]:
        kappas, means, spreads = (tuple(float(row[i]) for row in entry["rows"]) for i in range(3))
        if entry["estimator"] not in ESTIMATORS or list(kappas) != sorted(set(kappas)):
            raise ConfigError(f"malformed stored series {entry['path']!r} in {path}")
        series.append(StoredSeries(estimator=entry["estimator"], d=int(entry["d"]), draws=int(entry["draws"]),
                                   kappas=kappas, means=means, spreads=spreads, path=entry["path"]))
    return StoredSimulations(repository=raw["repository"], commit=raw["commit"], settings=dict(raw["settings"]),
                             series=tuple(series))
