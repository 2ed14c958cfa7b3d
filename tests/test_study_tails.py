"""Each regression study's ``STUDY`` is built by ``regression_study``: its memory estimate and resolved training
equal what the study once declared by hand (the expressions are written out here, not taken from the builder),
and no regression study declares the shared fields by hand again."""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from icl_gd.core.config import apply_overrides
from icl_gd.core.study import RunMemory, _literal_card
from icl_gd.regression.config import QuickRegressionConfig, RegressionConfig
from icl_gd.regression.memory import fast_weight_memory, regression_memory
from icl_gd.studies import REGISTRY

ROOT = Path(__file__).resolve().parents[1]

# What each study declared before the builder: its memory estimate (None: not estimated) and resolved training.
DECLARED: dict[str, tuple[Callable[[Any], RunMemory] | None, Callable[[Any], Any]]] = {
    "single-layer": (lambda c: regression_memory(c, d=c.task.d, heads=c.model.heads, batched_seeds=c.batched_seeds),
                     RegressionConfig.train_config),
    "multi-layer": (lambda c: regression_memory(c, d=c.task.d, heads=c.model.heads, batched_seeds=c.batched_seeds),
                    RegressionConfig.train_config),
    "sine": (lambda c: regression_memory(c, d=1, heads=1), QuickRegressionConfig.train_config),
    "separate-tokens": (lambda c: regression_memory(c, d=c.task.d, heads=max(c.model.heads)),
                        QuickRegressionConfig.train_config),
    "softmax-heads": (lambda c: regression_memory(c, d=c.task.d, heads=max(c.model.heads)),
                      QuickRegressionConfig.train_config),
    "which-algorithm": (lambda c: regression_memory(c, d=c.task.d, heads=c.model.heads,
                                                    batched_seeds=c.model.block == "lsa"),
                        RegressionConfig.train_config),
    "foreign-transformer": (None, RegressionConfig.train_config),
    "online-layers": (fast_weight_memory, RegressionConfig.train_config),
    "preconditioner": (lambda c: regression_memory(c, d=c.task.d, heads=c.model.heads),
                       RegressionConfig.train_config),
}
# Regression-family studies built as a plain ``Study``, each for a reason of its own: plateaus trains by full-batch
# GD on an exact quadratic form with a step size per layer (no TrainingConfig), finite-tasks solves its layer in
# closed form (no training), sequence trains five causal models on sequences whose memory the regression estimate
# does not describe. They still run on one intra-op thread.
OWN_BUILD = {"plateaus.py", "finite_tasks.py", "sequence.py"}
# Overrides beside each preset that reach the batched-seeds term (S seeds' batches held at once).
VARIANTS: dict[str, list[list[str]]] = {
    "single-layer": [["evaluation.seeds=3", "batched_seeds=true"]],
    "multi-layer": [["evaluation.seeds=3"], ["evaluation.seeds=3", "batched_seeds=false"]],
    "which-algorithm": [["evaluation.seeds=3"], ["evaluation.seeds=3", "model.block=transformer"]],
}


def _module_path(name: str) -> Path:
    return ROOT / "studies" / f"{REGISTRY.modules[name].rsplit('.', 1)[-1]}.py"


def _is_regression_study(path: Path) -> bool:
    """A study of the regression family: it imports from ``icl_gd.regression`` (the dual form's never do)."""
    return any(isinstance(node, ast.ImportFrom) and (node.module or "").startswith("icl_gd.regression")
               for node in ast.walk(ast.parse(path.read_text())))


def _study_call(path: Path) -> ast.Call:
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["STUDY"]:
            assert isinstance(node.value, ast.Call), path.name
            return node.value
    raise AssertionError(f"{path.name} defines no STUDY")


def test_the_regression_studies_are_those_declared_here():
    found = {name for name in REGISTRY.names() if _is_regression_study(_module_path(name))}
    own = {name for name in found if _module_path(name).name in OWN_BUILD}
    assert found - own == set(DECLARED) and {_module_path(name).name for name in own} == OWN_BUILD


@pytest.mark.parametrize("name", sorted(DECLARED))
def test_memory_and_resolved_training_are_what_the_study_declared_by_hand(name):
    study = REGISTRY.get(name)
    memory, resolved_training = DECLARED[name]
    assert study.default_threads == 1
    assert (study.memory is None) == (memory is None)
    for preset in study.preset_names():
        for overrides in [[], ["evaluation.seeds=3"], *VARIANTS.get(name, [])]:
            config = apply_overrides(study.config(preset), overrides)
            assert study.resolved_training(config) == resolved_training(config), (preset, overrides)
            if memory is not None:
                assert study.memory(config) == memory(config), (preset, overrides)


@pytest.mark.parametrize("path", sorted((ROOT / "studies").glob("*.py")), ids=lambda p: p.name)
def test_no_regression_study_declares_the_shared_fields_by_hand(path):
    """Threads, the memory estimate and the resolved training are ``regression_study``'s to fill in."""
    if not _is_regression_study(path) or path.name == "__init__.py":
        pytest.skip("not a regression study")
    source = path.read_text()
    if path.name in OWN_BUILD:  # a plain Study: its one thread is declared by hand, and nothing else shared
        assert "default_threads=1," in source and "regression_memory(" not in source, path.name
        return
    for by_hand in ("default_threads=", "memory=lambda", "resolved_training=", "regression_memory("):
        assert by_hand not in source, f"{path.name} writes {by_hand!r}: pass what is particular to regression_study"
    if any(isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["STUDY"]
           for node in ast.parse(source).body):
        assert getattr(_study_call(path).func, "id", None) == "regression_study", path.name


@pytest.mark.parametrize("name", sorted(DECLARED))
def test_the_studies_listing_reads_a_built_study_without_importing_it(name):
    """``icl-gd studies`` reads summary and presets from ``regression_study(summary=..., presets=...)`` literally."""
    assert _literal_card(REGISTRY.modules[name]) is not None
