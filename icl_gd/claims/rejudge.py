"""Re-judge a finished reproduction from its ``claims.json``, without its run directories.

A full-budget ``icl-gd reproduce`` takes hours; its run directories are scratch, but the authors' code's records
(``authors_values.json``) keep growing after it. ``claims.json`` holds every claim's per-seed values, which is all
the verdicts need: the first (the claim's rule over our seeds) is decided again by today's registry, the second
(agreement with the authors' code) against today's records. Nothing is measured here.

The declared tests of a claim (a seed whose training failed, a reference that degenerated) need more than the
statistic's values: they are read again from the runs' ``metrics.json`` when the runs are still beside the
claims.json (its folder, or the ``--out`` folder its command names), else taken from what the claims.json recorded.
"""

from __future__ import annotations

import json
import math
import shlex
from dataclasses import dataclass
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from icl_gd.core.errors import ConfigError
from icl_gd.claims.claim import Claim
from icl_gd.claims.evidence import MissingEvidence
from icl_gd.claims.verdict import (ClaimResult, FigureResult, Spread, Verdict, check_seeds,
                                   evaluate_claim, figure_of, judge_values, read_on_figure)
from icl_gd.claims.registry import ALL_CHECKS
from icl_gd.claims.evidence import SeedEvidence, seed_evidence
from icl_gd.claims.plan import draws_text, plan_dirs
from icl_gd.claims.report import Judgement, ReportHeader


@dataclass(frozen=True)
class Rejudged:
    """The rebuilt verdicts with the source run's provenance in their header (command, commit, date, budget, wall
    and measured time as its claims.json recorded them), each claim whose verdict today's rule changes: ``(id,
    recorded verdict, verdict now)``, and where the runs' metrics were read for the declared tests (None: not
    found)."""

    judgement: Judgement
    changed: tuple[tuple[str, str, str], ...]
    runs_root: Path | None = None

    @property
    def results(self) -> tuple[ClaimResult, ...]:
        return self.judgement.results

    @property
    def header(self) -> ReportHeader:
        return self.judgement.header


def _value(raw: Any, where: str) -> float:
    # claims.json writes inf as "inf" and NaN as null (core.results.to_jsonable)
    if raw is None:
        return math.nan
    if isinstance(raw, str) and raw in ("inf", "-inf"):
        return float(raw)
    if isinstance(raw, bool) or not isinstance(raw, (int, float)):
        raise ConfigError(f"{where}: {raw!r} is not a number")
    return float(raw)


def load_claims_json(path: Path) -> Rejudged:
    """Rebuild every claim's result from ``path`` (a claims.json written by ``icl-gd reproduce``): its per-seed
    values, decided again by the registered claim (same rule, so the same verdict unless the claim changed since),
    and its recorded note where no value was measured. A claim the registry no longer knows is a ConfigError: its
    rule is gone, so it cannot be judged."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"--rejudge {path}: no such file")
    try:
        data = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"--rejudge {path}: not JSON ({exc})") from None
    required = ("claims", "construction_checks", "command", "commit", "date", "quick")
    if not isinstance(data, dict) or any(k not in data for k in required):
        raise ConfigError(f"--rejudge {path}: not a claims.json of icl-gd reproduce (it needs {', '.join(required)})")
    known = {c.id: c for c in ALL_CHECKS}
    entries = list(data["claims"]) + list(data["construction_checks"])
    unknown = [e.get("id") for e in entries if e.get("id") not in known]
    if unknown:
        raise ConfigError(f"--rejudge {path}: claim {unknown[0]!r} is not registered any more; rerun the reproduction")
    quick = bool(data["quick"])
    root = runs_root(path, str(data["command"]))
    by_id = {e["id"]: e for e in entries}
    results, changed = [], []
    for claim in ALL_CHECKS:  # registry order, as a reproduction writes them
        entry = by_id.get(claim.id)
        evidence = kept_evidence(claim, root, quick)
        if entry is None:  # a claim the table predates: measured from the kept runs where they are all there
            if evidence is None:
                continue
            result = evaluate_claim(claim, evidence, quick, _draws(claim, evidence))
            changed.append((claim.id, "not in the table", result.verdict.value))
            results.append(result)
            continue
        values = tuple(_value(v, f"--rejudge {path}: {claim.id} values") for v in entry.get("values") or ())
        recorded = entry.get("measures")
        if values and recorded and recorded != claim.measures and evidence is not None:
            # another statistic: read from the runs
            kept = evidence[:len(values)]
            result = evaluate_claim(claim, kept, quick, _draws(claim, kept))
        elif values and recorded and recorded != claim.measures:  # another statistic and no runs to read it from
            result = ClaimResult(claim, Verdict.INCONCLUSIVE, None, f"its values measure {recorded}, not today's "
                                 "statistic: rerun its runs", tuple(Path(r) for r in entry.get("runs") or ()))
        elif values:
            failed, problem, checked, run_dirs, details = _tests(claim, entry, root, quick)
            verdict, note = judge_values(claim, values, failed, problem, quick, planned=True)
            per_plan = [d[:len(values)] for d in plan_dirs(claim, root, quick)] if root is not None else []
            draws = draws_text(claim, per_plan) or str(entry.get("draws") or "")  # the runs' configs first
            figure = (figure_of(claim, evidence[:len(values)], failed, problem, quick) if evidence is not None
                      else _recorded_figure(claim, entry, failed, problem, quick))
            result = ClaimResult(claim, verdict, Spread(values, log=claim.log_scale), note, run_dirs, failed,
                                 checked, details, quick, draws, figure)
        else:
            result = ClaimResult(claim, Verdict.INCONCLUSIVE, None, entry.get("note") or "no value measured",
                                 tuple(Path(r) for r in entry.get("runs") or ()))
        if entry.get("verdict") != result.verdict.value:
            changed.append((claim.id, str(entry.get("verdict")), result.verdict.value))
        results.append(result)
    header = ReportHeader(command=str(data["command"]), commit=str(data["commit"]), date=str(data["date"]), quick=quick,
                          wall_s=float(data.get("wall_seconds") or 0.0),
                          runs_measured=str(data.get("runs_measured") or ""))
    return Rejudged(Judgement(tuple(results), header), tuple(changed), root)


def kept_evidence(claim: Claim, root: Path | None, quick: bool) -> list[SeedEvidence] | None:
    """Every seed's evidence of ``claim`` from the kept runs under ``root``, None when one of its runs is missing."""
    if root is None:
        return None
    per_plan = plan_dirs(claim, root, quick)
    if not all((d / "metrics.json").is_file() for plan in per_plan for d in plan):
        return None
    return seed_evidence(per_plan)


def _draws(claim: Claim, evidence: Sequence[SeedEvidence]) -> str:
    return draws_text(claim, [[e.run_dirs[p] for e in evidence] for p in range(len(claim.runs))])


def _recorded_figure(claim: Claim, entry: dict, failed: tuple[tuple[int, str], ...], problem: str, quick: bool
                     ) -> FigureResult | None:
    """The figure reading from the values a claims.json recorded (its ``figure`` entry), when the runs are gone."""
    recorded = entry.get("figure") or {}
    if claim.figure is None or not recorded.get("values"):
        return None
    values = [_value(v, f"{claim.id} figure values") for v in recorded["values"]]
    signed = [_value(v, f"{claim.id} signed values") for v in recorded.get("signed_values") or ()]
    return read_on_figure(claim, values, signed, failed, problem, quick)


def runs_root(path: Path, command: str) -> Path | None:
    """The folder holding the reproduction's ``runs/``: the claims.json's own, or the ``--out`` of its command
    (as given, or from the claims.json's folder or the one above it, e.g. the README's beside docs/)."""
    candidates = [path.parent]
    try:
        tokens = shlex.split(command)
    except ValueError:
        tokens = []
    if "--out" in tokens[:-1]:
        out = Path(tokens[tokens.index("--out") + 1])
        candidates += [out] if out.is_absolute() else [out, path.parent / out, path.parent.parent / out]
    return next((c for c in candidates if (c / "runs").is_dir()), None)


def _tests(claim: Claim, entry: dict, root: Path | None, quick: bool
           ) -> tuple[tuple[tuple[int, str], ...], str, bool, tuple[Path, ...], str]:
    """(failed seeds, reference problem, whether the tests ran, run directories, details) for one claim: from its
    runs when ``root`` holds them all, else as the claims.json recorded them."""
    recorded = str(entry.get("details") or "")
    if root is not None:
        per_plan = plan_dirs(claim, root, quick)
        dirs = tuple(d for plan in per_plan for d in plan)
        if all((d / "metrics.json").is_file() for d in dirs):
            evidence = seed_evidence(per_plan)[:len(entry.get("values") or ())]
            run_dirs = tuple(d for e in evidence for d in e.run_dirs)
            describe = getattr(claim.statistic, "details", None)
            try:
                details = describe(evidence, claim.passes) if describe else recorded
            except MissingEvidence:
                details = recorded
            try:
                failed, problem = check_seeds(claim, evidence)
            except MissingEvidence:
                return (), "", False, run_dirs, details
            return failed, problem, True, run_dirs, details
    run_dirs = tuple(Path(r) for r in entry.get("runs") or ())
    if "failed_seeds" not in entry:
        return (), "", False, run_dirs, recorded
    failed = tuple((int(f["seed"]), str(f["reason"])) for f in entry["failed_seeds"])
    reference = entry.get("reference") or {}
    problem = "" if reference.get("valid", True) else str(reference.get("note", "")).removeprefix(
        "no valid reference: ")
    return failed, problem, bool(entry.get("checked", True)), run_dirs, recorded


__all__ = ["Rejudged", "load_claims_json"]
