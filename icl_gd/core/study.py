"""The study contract shared by every study family: what a study is, where it runs, and the run it writes.

A study is a name, a default config and ``run(config, ctx)``. ``StudyRun`` owns what every run writes the same
way whatever the family (regression or dual form): the seed list, tidy tables (``{name}.csv``, ``curves.csv`` with
``CURVE_COLUMNS``), per-seed metrics, checkpoints and finished parts a rerun resumes from
(``icl_gd.core.checkpoints``), figures (PNG + PDF) and ``metrics.json`` with the mean and spread over seeds,
written last because its presence marks the run finished. A family's run (``RegressionRun``) adds its own data and
references on top.

Studies are found through a ``StudyRegistry`` that the caller hands to the runner, so nothing in the library
imports the studies.
"""

from __future__ import annotations

import importlib
import platform
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from icl_gd.core.errors import ConfigError
from icl_gd.core.metric_name import in_part
from icl_gd.core.results import mean_over_seeds, write_csv, write_json, write_metrics
from icl_gd.core.shared import SharedResults

if TYPE_CHECKING:  # torch is imported when a study runs, not when one is listed (the CLI starts fast)
    import torch

CURVE_COLUMNS = ["step", "seed", "model", "metric", "value"]
PRECISIONS = ("float32", "float64")  # of a declared training's matrix products
T = TypeVar("T")
DEFAULT_PRESET = "default"  # every study's own settings; other presets (``paper``) are named in ``Study.presets``


@dataclass(frozen=True)
class RunContext:
    """Where and how a study runs. ``out`` exists and is writable when ``run`` is called."""

    out: Path
    device: torch.device
    progress: bool = True
    figures: bool = True  # False: no figure is drawn (numbers and tables unchanged; drawing is most of a tiny run)
    label: str = ""  # what ran, in words (``run_label``): every figure's title line
    # Where the runs of one sweep keep what their seed does not change (``icl_gd.core.shared``); None: computed here.
    shared: SharedResults | None = None


@dataclass(frozen=True)
class MemoryPart:
    """At least ``bytes`` that one part of a run needs, sized by the config key ``key`` (dotted, as ``icl-gd config``
    shows it) whose value is ``value``: the key a refusal tells the user to lower."""

    key: str
    value: int
    bytes: int


@dataclass(frozen=True)
class RunMemory:
    """What a run will hold, declared by its study from its config (``Study.memory``): ``seeds`` seeds under the
    config key ``seeds_key``, ``evaluations`` curve rows per seed (``curves.csv``), and on the device the ``device``
    parts (its largest tensors; none: the study declares only its seeds). ``icl_gd.platform.memory`` checks it
    against the free memory before the run starts."""

    seeds_key: str
    seeds: int
    evaluations: int = 0
    device: tuple[MemoryPart, ...] = ()


@dataclass(frozen=True)
class TrainingWork:
    """One training a run does for each seed, declared by its study from its config (``Study.training_work``):
    ``steps`` optimiser steps of the models labelled ``label``. ``fresh_training(n)`` returns a call that trains fresh
    copies of those models for ``n`` steps as the run does (sampling, forward, backward, clipping, the optimiser;
    no evaluation, no checkpoint), the copies made before the call: what ``icl_gd.platform.floor`` counts the
    products of and the benchmarks time. ``precision``: the dtype the step's products run in (``float32`` or
    ``float64``), whose peak its floor is taken at."""

    label: str
    steps: int
    fresh_training: Callable[[int], Callable[[], object]]
    precision: str = "float32"

    def __post_init__(self) -> None:
        if self.precision not in PRECISIONS:
            raise ConfigError(f"training precision {self.precision!r} is not one of {', '.join(PRECISIONS)}")


@dataclass(frozen=True)
class Study:
    """``run(config, ctx)`` writes every result file under ``ctx.out`` (``metrics.json`` last) and returns
    the ``mean`` metrics it wrote."""

    name: str
    summary: str
    default_config: Callable[[], Any]
    run: Callable[[Any, RunContext], dict[str, Any]]
    # Intra-op CPU threads when --threads is not given; None keeps torch's default (all cores). Studies of tiny
    # matrices use 1: they gain nothing from intra-op threads, the batch prefetcher uses the other core, and
    # two threads on a busy machine make every step wait on the slowest core (measured 50x slower).
    default_threads: int | None = None
    # Named set-ups beside ``default_config`` (``--preset NAME``), e.g. ``paper``: the published set-up, as the
    # authors' code ran it. Each is a zero-argument factory of the same config type.
    presets: Mapping[str, Callable[[], Any]] = field(default_factory=dict)
    # The ``mean`` metrics the one-line summary of a run shows (``headline_metrics``); empty: every ``loss_*``
    # metric and the common headline keys.
    headline: tuple[str, ...] = ()
    # What the platform needs from a config, declared instead of guessed: the run's memory (checked before the run
    # starts; None: not checked) and the training settings the config resolves to (``config.json``
    # ``resolved_training`` and ``icl-gd config``; None: the study has none to show).
    memory: Callable[[Any], RunMemory] | None = None
    resolved_training: Callable[[Any], Any] | None = None
    # What a run trains per seed (``TrainingWork``), for the products floor of ``icl-gd reproduce --plan``; None:
    # the study has no FLOP model yet.
    training_work: Callable[[Any], Sequence[TrainingWork]] | None = None
    # ``KEY=VALUE`` overrides that shrink any preset of the study to a run of seconds which still writes every
    # metric and table (the claims' tests run each claim's plan so, to check it reads what the study writes).
    tiny: tuple[str, ...] = ()

    def preset_names(self) -> list[str]:
        return [DEFAULT_PRESET, *self.presets]

    def config(self, preset: str = DEFAULT_PRESET) -> Any:
        """The config of a named preset (``default`` is ``default_config()``); unknown names raise ConfigError."""
        if preset == DEFAULT_PRESET:
            return self.default_config()
        if preset not in self.presets:
            raise ConfigError(f"--preset {preset!r} is not a preset of {self.name}; "
                              f"known: {', '.join(self.preset_names())}")
        return self.presets[preset]()


DEFAULT_HEADLINE = ("lr_gd", "eta_trained", "cos_sensitivity", "test_accuracy", "verify_max_rel_error")


def headline_metrics(study: Study, mean: Mapping[str, Any], limit: int = 8) -> dict[str, float]:
    """The numbers a run's one-line summary shows: ``study.headline``'s metrics, in that order (without one, every
    ``loss_*`` metric and ``DEFAULT_HEADLINE``'s, in ``mean``'s order), at most ``limit``."""
    keys = study.headline or [k for k in mean if k.startswith("loss_") or k in DEFAULT_HEADLINE]
    return dict([(k, mean[k]) for k in keys if isinstance(mean.get(k), float)][:limit])


@dataclass(frozen=True)
class StudyRegistry:
    """Study name -> the module that defines it as ``STUDY``. Modules are imported only when a study is asked
    for (the CLI starts fast); the registry is a plain value, so a sweep can hand it to a worker process."""

    modules: Mapping[str, str]

    def names(self) -> list[str]:
        return list(self.modules)

    def get(self, name: str) -> Study:
        if name not in self.modules:
            raise ConfigError(f"unknown study {name!r}; known studies: {', '.join(self.modules)}")
        return importlib.import_module(self.modules[name]).STUDY

    def card(self, name: str) -> tuple[str, list[str]]:
        """A study's summary and preset names, for ``icl-gd studies``: read from its module's ``STUDY = Study(...)``
        (or a family's builder of it, e.g. ``regression_study(...)``) without importing the module (and torch) where
        they are written there as literals, else from ``get``."""
        card = _literal_card(self.modules[name]) if name in self.modules else None
        if card is None:  # not literals there (or an unknown name: get says so)
            study = self.get(name)
            return study.summary, study.preset_names()
        return card


def _literal_card(module: str) -> tuple[str, list[str]] | None:
    """(summary, preset names) of the ``STUDY = Study(name, summary, ..., presets={...})`` in ``module``'s source when
    both are literals there (a string; a dict with string keys, or none); None when they are not, or on any doubt.
    A family's builder (``STUDY = regression_study(...)``) is read the same way where it takes ``summary=`` and
    ``presets=`` by keyword, as ``Study`` does."""
    import ast
    import importlib.util

    try:
        spec = importlib.util.find_spec(module)
        tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8")) if spec and spec.origin else None
    except (ImportError, OSError, SyntaxError, ValueError):
        return None
    for node in tree.body if tree is not None else ():
        if (isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["STUDY"]
                and isinstance(node.value, ast.Call)):
            call = node.value
            keywords = {k.arg: k.value for k in call.keywords}
            # a positional summary is ``Study``'s second argument; a builder's positionals are its own
            positional = call.args[1] if len(call.args) > 1 and getattr(call.func, "id", None) == "Study" else None
            summary = keywords.get("summary", positional)
            presets = keywords.get("presets")
            if not (isinstance(summary, ast.Constant) and isinstance(summary.value, str)):
                return None
            if presets is None:
                return summary.value, [DEFAULT_PRESET]
            if not isinstance(presets, ast.Dict) or not all(isinstance(k, ast.Constant) and isinstance(k.value, str)
                                                            for k in presets.keys):
                return None
            return summary.value, [DEFAULT_PRESET, *(k.value for k in presets.keys)]
    return None


def resolve_study_config(study: Study, preset: str = DEFAULT_PRESET, overrides: Iterable[str] = (),
                         **values: Any) -> Any:
    """The config a run uses: the preset, then ``values`` (``--steps``/``--seeds``; None = not given), then the
    ``KEY=VALUE`` overrides. One function for ``icl-gd run``, ``icl-gd config`` and sweeps, so they agree."""
    from icl_gd.core.config import apply_overrides, set_values

    config = study.config(preset)
    config = set_values(config, **{k: v for k, v in values.items() if v is not None})
    return apply_overrides(config, list(overrides))


def _config_value(config: Any, key: str) -> Any:
    for part in key.split("."):
        config = getattr(config, part)
    return config


def run_label(study: Study, preset: str, config: Any) -> str:
    """What ran, in words, for a figure's title: "single-layer · paper preset · 3 seeds (from seed 2) · 5000
    training steps" (steps, else epochs, from every key of that name, or the steps the config resolves to where
    those keys are unset; seeds from ``seeds``)."""
    from icl_gd.core.config import config_keys

    keys = config_keys(config)
    parts = [study.name, f"{preset} preset"]
    seeds_key = next((k for k in keys if k.rsplit(".", 1)[-1] == "seeds"), None)
    if seeds_key is not None:
        seeds = _config_value(config, seeds_key)
        first = _config_value(config, seeds_key[:-1]) if seeds_key[:-1] in keys else 0
        parts.append(f"{seeds} seed{'s' if seeds != 1 else ''}" + (f" (from seed {first})" if first else ""))
    for unit in ("steps", "epochs"):
        values = [_config_value(config, k) for k in keys if k.rsplit(".", 1)[-1] == unit]
        values = list(dict.fromkeys(v for v in values if v is not None))
        if not values and unit == "steps" and study.resolved_training is not None:
            values = [v for v in [getattr(study.resolved_training(config), "steps", None)] if v is not None]
        if values:
            parts.append(f"{' / '.join(str(v) for v in values)} training {unit if values != [1] else unit[:-1]}")
            break
    return " · ".join(parts)


def write_resolved_config(ctx: RunContext, study: Study, config: Any, preset: str = DEFAULT_PRESET) -> None:
    """Write ``config.json``: the preset, the config (seeds included), the training settings it resolves to
    (``study.resolved_training``), device and versions (the source's git commit among them)."""
    import torch

    from icl_gd import __version__
    from icl_gd.core.provenance import source_commit

    resolved = study.resolved_training(config) if study.resolved_training is not None else None
    write_json(ctx.out / "config.json", {
        "study": study.name,
        "preset": preset,
        "config": config,
        "resolved_training": resolved,
        "device": str(ctx.device),
        "threads": torch.get_num_threads(),
        "figures": ctx.figures,
        "command": sys.argv,
        "versions": {"icl_gd": __version__, "commit": source_commit(), "python": platform.python_version(),
                     "torch": torch.__version__, "platform": platform.platform()},
    })


class StudyRun:
    """One run of any study, from its seeds to ``metrics.json``.

    ``tables`` maps a table's name to its tidy rows (``{name}.csv``; ``curves`` has the columns
    ``CURVE_COLUMNS``); ``per_seed`` maps a seed to its metrics. ``finish`` writes them all.
    """

    def __init__(self, ctx: RunContext, seeds: Sequence[int]) -> None:
        self.ctx = ctx
        self.device = ctx.device
        self.seeds = list(seeds)
        self.tables: dict[str, list[dict[str, Any]]] = {"curves": []}
        self.per_seed: dict[int, dict[str, Any]] = {}

    def record(self, seed: int, metrics: Mapping[str, Any], part: str | None = None) -> None:
        """Add per-seed metrics (``metrics.json`` ``seeds``; mean and std over seeds); those of one ``part`` of a
        run (a setting, a set-up) as ``<part>.<metric>``."""
        named = metrics if part is None else {in_part(part, key): value for key, value in metrics.items()}
        self.per_seed.setdefault(seed, {}).update({str(key): value for key, value in named.items()})

    def add_rows(self, table: str, rows: Iterable[Mapping[str, Any]], **fixed: Any) -> None:
        """Append tidy rows to ``{table}.csv``, each prefixed with the ``fixed`` columns (e.g. ``seed=0``)."""
        self.tables.setdefault(table, []).extend({**fixed, **row} for row in rows)

    def checkpoint(self, name: str) -> Path:
        """Where a training loop keeps its checkpoint ``name`` (``checkpoints/{name}.pt``)."""
        return self.ctx.out / "checkpoints" / f"{name}.pt"

    def resumable(self, part: str, fingerprint: str, compute: Callable[[], T]) -> T:
        """``compute()``, saved under ``results/{part}.pt`` with ``fingerprint`` (``config_fingerprint`` of
        everything that made it), so a rerun of an interrupted run reuses each part that finished (a damaged or
        stale file is set aside with a notice and the part computed again: ``icl_gd.core.checkpoints``)."""
        from icl_gd.core.checkpoints import load_checkpoint, save_checkpoint

        path = self.ctx.out / "results" / f"{part}.pt"
        result = load_checkpoint(path, fingerprint)
        if result is None:
            result = compute()
            save_checkpoint(path, fingerprint, result)
        return result

    def finish(self, figures: Callable[[dict[str, Any]], Iterable[tuple[str, Any]]] | None = None,
               reductions: Mapping[str, Callable[[list[float]], float]] | None = None,
               columns: Mapping[str, Sequence[str]] | None = None) -> dict[str, Any]:
        """Write every table (``columns`` fixes a table's column order; ``curves`` has ``CURVE_COLUMNS``), then the
        figures ``figures(mean)`` yields as (name, figure), then ``metrics.json`` (last: it marks the run
        finished). No figure is drawn when the run's context says ``figures=False``. Returns the mean metrics."""
        from icl_gd.core.plotting import save_figure

        columns = {"curves": CURVE_COLUMNS, **(columns or {})}
        for name, rows in self.tables.items():
            if rows:
                write_csv(self.ctx.out / f"{name}.csv", rows, list(columns[name]) if name in columns else None)
        mean = mean_over_seeds(self.per_seed, reductions)
        for name, figure in (figures(mean) if figures and self.ctx.figures else ()):
            save_figure(figure, self.ctx.out, name, self.ctx.label)
        return write_metrics(self.ctx.out, self.per_seed, reductions)
