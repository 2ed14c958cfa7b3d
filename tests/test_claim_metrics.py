"""Every claim's statistic against what its study really writes: each distinct (study, preset, overrides) that a
claim's full or --quick plan runs is run once at a tiny budget, and every claim computes its statistic from that run
without MissingEvidence. A typo in a metric key, a renamed metric or a table a study stops writing fails here, not in
a report hours later.

Plans that differ only in budget keys (steps, test-set sizes, ...) or in sizes that do not change which metrics a
study writes (``n_context``, ``layers`` of a stack of the same kind) share one tiny run.
"""

from __future__ import annotations

import pytest

from icl_gd.core.errors import ICLGDError
from icl_gd.claims import ALL_CHECKS, Claim, SeedEvidence
from icl_gd.claims.claim import VERIFY_STUDY, RunPlan
from icl_gd.claims.evidence import MissingEvidence
from icl_gd.core.results import read_json

BUDGET = {"steps", "n_test", "n_tune", "eval_every", "n_ood", "epochs", "n_queries", "hidden", "key_dtype", "second_task",
          "train_examples", "batch_size", "gdpp_adam_steps", "subsets", "retrain_seeds", "loo_queries", "tuned_steps"}
SIZES = {"n_context", "layers", "train_tasks"}  # a fixed training set changes no metric key (test_vo_measurements)
_REGRESSION = ("steps=12", "batch_size=32", "n_test=128", "n_tune=256", "eval_every=6")
TINY = {
    "single-layer": (*_REGRESSION, "n_ood=32", "max_applications=3", "interpolation_points=3"),
    "multi-layer": (*_REGRESSION, "n_ood=32", "max_applications=3", "gdpp_adam_steps=3"),
    "sine": _REGRESSION,
    "separate-tokens": (*_REGRESSION, "n_copy=16"),
    "softmax-heads": _REGRESSION,
    "which-algorithm": (*_REGRESSION, "n_contexts=20", "n_queries=10", "newton_steps=3", "gd_steps=1,2",
                        "tuned_steps=2"),
    "dual-form": ("dataset=digits", "second_task=permuted", "train_examples=200", "hidden=16", "epochs=1", "n_queries=10",
                  "n_figure_queries=0"),
    "dual-form-lm": (*(f"{s}.data.{k}" for s in ("book", "wiki") for k in ("max_train_tokens=3000", "max_eval_tokens=2000")),
                     "book.training.steps=3", "wiki.training.steps=3", "n_queries=8", "context=20", "n_passages=1"),
    # its config has two `steps` keys (training's, the comparison's): each named in full
    "foreign-transformer": ("training.steps=12", *(o for o in _REGRESSION if not o.startswith("steps=")),
                            "compare.steps=2", "newton_steps=2", "n_contexts=20", "n_queries=4", "gd_steps=1,2",
                            "tuned_steps=2", "width=8", "layers=2"),
    "spotlights": ("train_examples=200", "hidden=8", "epochs=1", "n_queries=4", "subsets=4", "retrain_seeds=1",
                   "loo_queries=1", "loo_k=40", "methods="),
}


def _key(override: str) -> str:
    return override.split("=", 1)[0].split(".")[-1]


def _group(plan: RunPlan, quick: bool) -> tuple:
    kept = tuple(o for o in plan.run_overrides(quick) if _key(o) not in BUDGET | SIZES)
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


@pytest.fixture(scope="module")
def tiny_runs(tmp_path_factory):
    """group -> the tiny run's directory (or the reason it could not run here)."""
    from icl_gd.studies import run

    out, runs = tmp_path_factory.mktemp("tiny"), {}
    for i, (group, (plan, quick, _)) in enumerate(GROUPS.items()):
        overrides = [o for o in plan.run_overrides(quick) if _key(o) not in BUDGET] + list(TINY[plan.study])
        try:
            runs[group] = run(plan.study, out / f"run{i}", preset=plan.run_preset(quick), overrides=overrides,
                              seeds=1, threads=1, figures=False).path  # figures: not what a statistic reads
        except ICLGDError as exc:  # e.g. Fashion-MNIST is not installed: say so instead of failing
            runs[group] = f"{type(exc).__name__}: {exc}"
    return runs


@pytest.mark.parametrize("group", list(GROUPS), ids=lambda g: " ".join((g[0], g[1], *g[2])))
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


def test_a_typo_in_a_metric_key_fails(tiny_runs):
    """The check above is not vacuous: a claim reading a key its study does not write is caught."""
    from dataclasses import replace

    from icl_gd.claims.statistics import metric

    group = next(g for g in GROUPS if g[0] == "single-layer")
    claim = next(c for c, _ in GROUPS[group][2] if c.id == "vo-single-loss")
    typo = replace(claim, statistic=metric("loss_rel_gap_trained_vs_gd_typo"))
    metrics = read_json(tiny_runs[group] / "metrics.json")["mean"]
    with pytest.raises(MissingEvidence):
        typo.statistic(SeedEvidence((metrics,), (tiny_runs[group],)))


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
