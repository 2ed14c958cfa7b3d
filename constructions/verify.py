"""The registry of exact identities that ``icl-gd verify`` checks in float64.

Each construction module exposes ``IDENTITY_CHECKS``: a tuple of ``IdentityCheck``. Adding a module is one
line in ``CHECK_MODULES``. Some checks are statistical, not exact: the population one-step GD reference
(``icl_gd.constructions.population_gd``) and the one-layer theory's closed forms
(``icl_gd.constructions.theory``) against Monte Carlo, at tolerances of about four standard errors.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch

CHECK_MODULES: tuple[str, ...] = (
    "icl_gd.constructions.dual_form",
    "icl_gd.constructions.dual_lm",
    "icl_gd.constructions.prop1",
    "icl_gd.constructions.prop2",
    "icl_gd.constructions.prop3",
    "icl_gd.constructions.gdpp",
    "icl_gd.constructions.algorithms",
    "icl_gd.constructions.population_gd",
    "icl_gd.constructions.theory",
    "icl_gd.constructions.theory_plateaus",
    "icl_gd.constructions.theory_asymptotics",
    "icl_gd.constructions.delta_rule",
    "icl_gd.constructions.mesa",
    "icl_gd.constructions.sequence",
)


@dataclass(frozen=True)
class CheckResult:
    max_abs_error: float
    max_rel_error: float
    tolerance: float  # on the relative error
    detail: str = ""  # what a statistical check compared, printed under its line (e.g. the values themselves)

    @property
    def passed(self) -> bool:
        return self.max_rel_error <= self.tolerance


@dataclass(frozen=True)
class IdentityCheck:
    name: str
    run: Callable[[], CheckResult]


def compare(actual: torch.Tensor, expected: torch.Tensor, tolerance: float) -> CheckResult:
    """Max absolute error, and relative error = max|a - e| / max|e| (norm-wise, so zeros in e are harmless)."""
    diff = (actual - expected).abs().max().item()
    scale = expected.abs().max().item()
    return CheckResult(diff, diff / scale if scale > 0 else diff, tolerance)


def merge(results: list[CheckResult], detail: str = "") -> CheckResult:
    return CheckResult(
        max(r.max_abs_error for r in results),
        max(r.max_rel_error for r in results),
        min(r.tolerance for r in results),
        detail,
    )


def all_checks() -> Iterator[IdentityCheck]:
    for module in CHECK_MODULES:
        yield from importlib.import_module(module).IDENTITY_CHECKS
