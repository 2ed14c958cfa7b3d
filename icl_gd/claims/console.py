"""What ``icl-gd reproduce`` prints around a ``Reproduction``'s verbs: each function here is one of the command's
modes (list, plan, run, rejudge), a few lines over the wing's objects."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from icl_gd.claims.estimates import FILE_NAME as ESTIMATES_FILE
from icl_gd.claims.estimates import merge_into_kept
from icl_gd.claims.kept import quick_agreement
from icl_gd.claims.plan import select_claims
from icl_gd.claims.quick import comparison_lines, selection_lines, write_comparison
from icl_gd.claims.report import check_gallery_page, check_table_page
from icl_gd.claims.reproduction import (Checks, Execution, Reproduction, judged_later, refuse_damaged_runs,
                                        usable_out)
from icl_gd.core.errors import ConfigError
from icl_gd.core.study import StudyRegistry

Echo = Callable[[str], None]
_KINDS = {"paper": "the paper's", "ours": "ours", "construction": "construction check", "beyond": "beyond the papers"}

__all__ = ["Execution", "Reproduction", "judge_finished", "list_claims", "print_plan", "rejudge", "reproduce",
           "update_budget"]


def list_claims(echo: Echo) -> None:
    echo("claims (the paper's or ours), then construction checks; locations: von Oswald et al. in arXiv "
         "2212.07677v2 (31 May 2023)")
    for claim in select_claims(None):
        echo(f"{claim.id:30s} {_KINDS[claim.kind.value]:18s} {claim.author}, {claim.location}")
        echo(f"{'':30s} {claim.statement}")


def print_plan(reproduction: Reproduction, registry: StudyRegistry, peak: str | None, echo: Echo) -> None:
    """The plan, then each plan's estimate beside its products floor at ``peak`` (``--peak``)."""
    from icl_gd.claims.plan_floor import floor_lines, plan_floors
    from icl_gd.platform.floor import parse_peak

    chosen = parse_peak(peak)  # a bad --peak is refused before anything is printed
    plan = reproduction.plan()
    for line in _selection(reproduction) + plan.lines(reproduction.budget, reproduction.execution.backend):
        echo(line)
    for line in floor_lines(plan_floors(plan, registry), chosen, plan.workers, reproduction.execution.threads or 1):
        echo(line)


def reproduce(reproduction: Reproduction, registry: StudyRegistry, checks: Checks, table: Path | None,
              update_estimates: bool, echo: Echo, headline: Path | None = None,
              gallery: Path | None = None) -> int:
    """Plan, run, judge and report; 0 when every run finished, 1 when one failed."""
    if table is not None:
        check_table_page(table)  # before anything runs
    if gallery is not None:
        check_gallery_page(gallery)
    refuse_damaged_runs(reproduction.claims, reproduction.root, reproduction.quick)  # before hours of runs
    plan = reproduction.plan()
    for line in _selection(reproduction) + plan.lines(reproduction.budget, reproduction.execution.backend):
        echo(line)
    outcome = reproduction.run(registry, checks, echo, plan)
    judgement = reproduction.judge(outcome)
    written = judgement.report(reproduction.root, table, headline, gallery)
    if update_estimates:
        updated = merge_into_kept(reproduction.root / ESTIMATES_FILE)
        echo(f"updated the kept estimates of {len(updated)} plans from {reproduction.root / ESTIMATES_FILE}")
    beside = comparison_lines(judgement.results, reproduction.not_rerun) if reproduction.against_kept else []
    if beside:
        written = [*written, write_comparison(reproduction.root, beside)]
    echo(f"{judgement.summary}; wrote {', '.join(str(p) for p in written)}")
    for line in beside:  # the last line: how many re-run claims read as the kept table does
        echo(line)
    if reproduction.quick and (agreement := quick_agreement(list(judgement.results))):
        echo(f"{agreement} (report.md shows each claim's kept verdict beside this reading)")
    return 1 if outcome.failures else 0


def judge_finished(reproduction: Reproduction, table: Path | None, echo: Echo, headline: Path | None = None,
                   gallery: Path | None = None) -> None:
    """Judge the claims from the runs already finished under the reproduction's folder, run nothing, and write the
    report (into the folder) and / or the table."""
    if table is not None:
        check_table_page(table)
    if not (reproduction.root / "runs").is_dir():
        raise ConfigError(f"--judge-finished: {reproduction.root} holds no runs/ folder")
    judgement = reproduction.judge()
    written = judgement.report(reproduction.root, table, headline, gallery)
    echo(f"{judgement.summary}; wrote {', '.join(str(p) for p in written)}")


def rejudge(source: Path, out: Path | None, table: Path | None, echo: Echo, headline: Path | None = None,
            gallery: Path | None = None) -> None:
    """Decide every verdict again from ``source`` (a kept claims.json) and write the report and / or the table."""
    from icl_gd.claims.rejudge import load_claims_json

    if out is None and table is None and headline is None and gallery is None:
        raise ConfigError("--rejudge needs somewhere to write: --out DIR, --update-table PAGE and / or "
                          "--update-headline PAGE and / or --update-gallery PAGE")
    if out is not None:
        usable_out(Path(out))
    if table is not None:
        check_table_page(table)
    loaded = load_claims_json(Path(source))
    for claim_id, before, after in loaded.changed:
        echo(f"icl-gd: {claim_id}: recorded {before}, {after} by today's rule (the claim changed since that run)")
    echo(f"icl-gd: the claims' declared tests (failed seeds, degenerate references) read from the runs under "
         f"{loaded.runs_root}" if loaded.runs_root else
         "icl-gd: the runs are not beside this claims.json: the declared tests are taken as it recorded them")
    judgement = judged_later(loaded.judgement, Path(source))
    written = judgement.report(out, table, headline, gallery)
    h = judgement.header
    echo(f"wrote {', '.join(str(p) for p in written)}")
    echo(f"{judgement.summary} (re-judged from {source}, measured by `{h.command}` at commit {h.commit} on {h.date})")


def _selection(reproduction: Reproduction) -> list[str]:
    """For --quick: what it re-runs, by which bound, and what it shows from the kept table instead."""
    return selection_lines(reproduction.claims, reproduction.not_rerun) if reproduction.against_kept else []


def update_budget(page: Path, echo: Echo) -> None:
    """Write what each budget costs by the kept estimates into ``page``'s budget block (``budget.write_budget``)."""
    from icl_gd.claims.budget import write_budget

    echo(write_budget(page))
    echo(f"wrote the budget block of {page}")
