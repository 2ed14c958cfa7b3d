"""Every claim's statistic against what its study really writes: each distinct (study, preset, overrides) that a
claim's full or --quick plan runs is run once at the study's own tiny budget (``Study.tiny``), and every claim
computes its statistic from that run without MissingEvidence. A typo in a metric key, a renamed metric or a table a
study stops writing fails here, not in a report hours later. Beside it, every claim computes its statistic from the
kept full-budget runs (docs/full-run): a metric name changed in its builder (so in the study and the claim at once)
no longer reads the results kept under the old name, and fails here too.

Plans that differ only in keys the tiny budget sets, or in sizes that do not change which metrics a study writes
(``n_context``, ``layers`` of a stack of the same kind), share one tiny run.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from icl_gd.core.errors import ICLGDError
from icl_gd.claims import ALL_CHECKS, Claim, SeedEvidence
from icl_gd.claims.claim import VERIFY_STUDY, RunPlan
from icl_gd.claims.evidence import MissingEvidence
from icl_gd.core.results import read_json
from icl_gd.studies import REGISTRY

SIZES = {"n_context", "layers", "train_tasks"}  # a fixed training set changes no metric key (test_vo_measurements)
KEPT_RUNS = Path(__file__).resolve().parents[1] / "docs" / "full-run" / "runs"


def _key(override: str) -> str:
    return override.split("=", 1)[0].split(".")[-1]


def _tiny_keys(study: str) -> set[str]:
    return {_key(o) for o in REGISTRY.get(study).tiny}


def _group(plan: RunPlan, quick: bool) -> tuple:
    kept = tuple(o for o in plan.run_overrides(quick) if _key(o) not in _tiny_keys(plan.study) | SIZES)
    return plan.study, plan.run_preset(quick), kept


def _groups() -> dict[tuple, tuple[RunPlan, bool, list[tuple[Claim, int]]]]:
    """group -> (the first plan that needs it, quick?, [(claim, plan index)] whose statistic reads it)."""
    groups: dict[tuple, tuple[RunPlan, bool, list[tuple[Claim, int]]]] = {}
    for claim in ALL_CHECKS:
        for index, plan in enumerate(claim.runs):
            if plan.study == VERIFY_STUDY:
                continue
            for quick in (False, True):
                groups.setdefault(_group(plan, quick), (plan, quick, []))[2].append((claim, index))
    return groups


GROUPS = _groups()


def test_every_study_declares_a_tiny_budget():
    """A study without one would run a claim's plan at its full budget here (minutes to hours)."""
    assert all(REGISTRY.get(name).tiny for name in REGISTRY.names()), \
        [name for name in REGISTRY.names() if not REGISTRY.get(name).tiny]


@pytest.fixture(scope="module")
def tiny_runs(tmp_path_factory):
    """group -> the tiny run's directory (or the reason it could not run here)."""
    from icl_gd.studies import run

    out, runs = tmp_path_factory.mktemp("tiny"), {}
    for i, (group, (plan, quick, _)) in enumerate(GROUPS.items()):
        tiny = REGISTRY.get(plan.study).tiny
        overrides = [o for o in plan.run_overrides(quick) if _key(o) not in _tiny_keys(plan.study)] + list(tiny)
        try:
            runs[group] = run(plan.study, out / f"run{i}", preset=plan.run_preset(quick), overrides=overrides,
                              seeds=1, threads=1, figures=False).path  # figures: not what a statistic reads
        except ICLGDError as exc:  # e.g. Fashion-MNIST is not installed: say so instead of failing
            runs[group] = f"{type(exc).__name__}: {exc}"
    return runs


@pytest.mark.parametrize("group", list(GROUPS), ids=lambda g: " ".join((g[0], g[1], *g[2])))
@pytest.mark.slow
def test_every_claim_computes_its_statistic_from_its_study_run(tiny_runs, group):
    run_dir = tiny_runs[group]
    if isinstance(run_dir, str):
        pytest.skip(f"the tiny run could not start here: {run_dir}")
    metrics = read_json(run_dir / "metrics.json")["mean"]
    for claim, index in GROUPS[group][2]:
        # the claim's other plans (e.g. γ at several N) read the same tiny run: this group's keys are what is tested
        evidence = SeedEvidence(tuple(metrics for _ in claim.runs), tuple(run_dir for _ in claim.runs))
        try:
            value = claim.statistic(evidence)
        except MissingEvidence as exc:
            pytest.fail(f"{claim.id} (plan {index}, {' '.join(group[2])}): {exc}")
        assert isinstance(value, float), claim.id


@pytest.mark.slow
def test_a_typo_in_a_metric_key_fails(tiny_runs):
    """The check above is not vacuous: a claim reading a key its study does not write is caught."""
    from dataclasses import replace

    from icl_gd.claims.statistics import metric
    from icl_gd.regression import metric_names as names

    group = next(g for g in GROUPS if g[0] == "single-layer")
    claim = next(c for c, _ in GROUPS[group][2] if c.id == "vo-single-loss")
    typo = replace(claim, statistic=metric(names.rel_gap("trained", "gd_typo")))
    metrics = read_json(tiny_runs[group] / "metrics.json")["mean"]
    with pytest.raises(MissingEvidence):
        typo.statistic(SeedEvidence((metrics,), (tiny_runs[group],)))


@pytest.mark.slow
def test_no_tiny_run_draws_a_figure(tiny_runs):
    """``figures=False`` reaches every study, including dual-form and dual-form-lm, which draw outside
    ``StudyRun.finish`` and so need their own guard (dropping either guard writes PNGs here)."""
    ran = {group[0] for group, run_dir in tiny_runs.items() if not isinstance(run_dir, str)}
    drawn = {" ".join((group[0], *group[2])): sorted(str(p.relative_to(run_dir)) for p in run_dir.rglob("*")
                                                     if p.suffix in {".png", ".pdf", ".svg"})
             for group, run_dir in tiny_runs.items() if not isinstance(run_dir, str)}
    assert not any(drawn.values()), {k: v for k, v in drawn.items() if v}
    assert "dual-form" in ran, ran  # its tiny run needs nothing beyond the test extra (scikit-learn's digits)
    if "dual-form-lm" not in ran:  # its plans run the book set-up: Debian's dict-devil, which pip cannot install
        reasons = sorted({run_dir for group, run_dir in tiny_runs.items() if group[0] == "dual-form-lm"})
        pytest.skip(f"dual-form-lm's guard is untested here: {'; '.join(reasons)}")


def _kept_run(plan: RunPlan) -> Path:
    """Seed 0's kept full-budget run of ``plan`` (named as ``reproduce`` names its runs)."""
    from icl_gd.platform.sweep.plan import RunSpec

    return KEPT_RUNS / RunSpec(plan.study, plan.preset, (*plan.overrides, "seed=0", "seeds=1")).run_id()


@pytest.mark.parametrize("claim", [c for c in ALL_CHECKS if all(p.study != VERIFY_STUDY for p in c.runs)],
                         ids=lambda c: c.id)
def test_every_claim_reads_the_kept_results_by_their_names(claim):
    """The kept runs were written under today's metric names: a claim that no longer reads them means a name was
    changed in its builder (in the study and the claim at once), and the kept results, the authors' values and every
    report reading them would silently lose it. Keep a written name byte-identical, or rerun what reads it."""
    runs = [_kept_run(plan) for plan in claim.runs]
    missing = [str(r) for r in runs if not (r / "metrics.json").is_file()]
    if missing:
        pytest.skip(f"no kept run: {', '.join(missing)}")
    evidence = SeedEvidence(tuple(read_json(r / "metrics.json")["mean"] for r in runs), tuple(runs))
    try:
        claim.statistic(evidence)
    except MissingEvidence as exc:
        pytest.fail(f"{claim.id}: {exc}")
