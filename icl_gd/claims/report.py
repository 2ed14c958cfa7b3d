"""The reproduction report: ``claims.json`` for machines, ``report.md`` and a self-contained ``report.html``, the
figures gallery, and the claims page's table; all rendered from one ``Judgement`` and written atomically."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from icl_gd.claims.report_html import render_html
from icl_gd.claims.report_markdown import (CONSTRUCTION_HEADING, HEADLINE_END, HEADLINE_START, README_END,
                                           README_START, headline_block, readme_block, readme_claims_json,
                                           render_markdown)
from icl_gd.claims.gallery import gallery_html, gallery_markdown
from icl_gd.claims.links import PageLinks
from icl_gd.claims.readings import NUMBERS_END, NUMBERS_START, figure_text, numbers_block, precision_text
from icl_gd.claims.summary import (AGREEMENT_RULE, ReportHeader, claims_only, claims_summary, comparison,
                                   construction_checks, counted_conditions, sentence_of, summary_json, value_text)
from icl_gd.claims.verdict import ClaimResult, Spread, Verdict
from icl_gd.core.errors import ConfigError
from icl_gd.core.results import atomic_write_text, marked_block_span, replace_marked_block, write_json


@dataclass(frozen=True)
class Judgement:
    """Every selected claim's verdict (``results``) and where the values came from (``header``)."""

    results: tuple[ClaimResult, ...]
    header: ReportHeader

    @property
    def summary(self) -> str:
        return claims_summary(self.results)

    def report(self, out: Path | None = None, table: Path | None = None, headline: Path | None = None,
               gallery: Path | None = None) -> list[Path]:
        """Write the report into ``out`` (claims.json, report.md, report.html, figures.md / .html) and / or the
        claims table into the page ``table`` (between its markers) with its per-seed values beside it
        (``claims-table.json``), and / or the headline into the page ``headline`` (the README), and / or the
        papers' figures into the page ``gallery`` (docs/figures.md, the whole page); returns the files written."""
        written = []
        if table is not None:
            check_table_page(table)
        if headline is not None:
            marked_block_span(Path(headline), HEADLINE_START, HEADLINE_END, "--update-headline")
        if gallery is not None:
            check_gallery_page(gallery)
        if out is not None:
            Path(out).mkdir(parents=True, exist_ok=True)
            write_report(Path(out), self.results, self.header)
            written += [Path(out) / n for n in ("report.md", "report.html", "claims.json", "figures.html")]
        if table is not None:
            update_readme(table, readme_block(self.results, self.header, page_name(table)))
            data = readme_claims_json(table)
            data.parent.mkdir(parents=True, exist_ok=True)
            write_json(data, claims_json(self.results, self.header, PageLinks(Path(table).parent)))
            written += [Path(table), data]
        if headline is not None:
            replace_marked_block(Path(headline), HEADLINE_START, HEADLINE_END, headline_block(self.results),
                                 "--update-headline")
            written.append(Path(headline))
        for page in {Path(p) for p in (table, headline) if p is not None}:  # the pages that quote the numbers
            if NUMBERS_START in page.read_text():
                replace_marked_block(page, NUMBERS_START, NUMBERS_END,
                                     numbers_block(counted_conditions(self.results)), "--update-headline")
        if gallery is not None:
            atomic_write_text(Path(gallery), gallery_markdown(self.results, PageLinks(Path(gallery).parent),
                                                              GALLERY_SOURCE))
            written.append(Path(gallery))
        return written


GALLERY_SOURCE = ("Written by `icl-gd reproduce --update-gallery PAGE` from the runs it judged (for the project's "
                  "page, the kept full-budget runs in [full-run](full-run/README.md)); a run folder that keeps no "
                  "figures (docs/full-run keeps tables and metrics) has its figures listed, not shown: `icl-gd run` "
                  "or `icl-gd reproduce --out DIR` draws them. Figures kept in the repository are shown.")


def check_gallery_page(page: Path) -> None:
    """Before anything runs or is written: the gallery page's folder exists and the page is not a folder."""
    if not Path(page).parent.is_dir() or Path(page).is_dir():
        raise ConfigError(f"--update-gallery {page}: not a page in an existing folder")


def check_table_page(page: Path) -> None:
    """Before anything runs or is written: the page exists and has both claims-table markers (ConfigError)."""
    marked_block_span(Path(page), README_START, README_END, "--update-table")


def page_name(page: Path) -> str:
    """The page as a user names it: relative to the working directory where it lies below it."""
    try:
        return Path(page).resolve().relative_to(Path.cwd()).as_posix()
    except ValueError:
        return Path(page).as_posix()


def _interval_json(spread: Spread | None) -> dict | None:
    if spread is None or spread.interval is None:
        return None
    return {"low": spread.interval[0], "high": spread.interval[1], "seeds": len(spread.values)}


def _figure_json(r: ClaimResult) -> dict | None:
    """The sentence as its figure shows it and at the measurement's precision (None: no figure reading)."""
    f = r.figure
    if f is None:
        return None
    return {"verdict": f.verdict.value, "note": f.note, "axis": f.reading.axis.text(), "measures": f.judged.measures,
            "direction": f.judged.direction.value, "threshold": f.judged.threshold,
            "values": list(f.spread.values) if f.spread else [], "mean": f.spread.mean if f.spread else None,
            "interval": _interval_json(f.spread), "flip_point": f.flip.as_json() if f.flip else None,
            "signed_measures": getattr(f.reading.signed, "measures", ""),
            "signed_values": list(f.signed.values) if f.signed else [],
            "signed_mean": f.signed.mean if f.signed else None, "signed_interval": _interval_json(f.signed),
            "differs_at_precision": f.differs, "side": f.side, "text": figure_text(f),
            "precision_text": precision_text(f)}


def _claim_json(r: ClaimResult, links: PageLinks, results: Sequence[ClaimResult] = ()) -> dict:
    theirs, compared_ = comparison(r)
    kept = r.kept
    margin = r.claim.margin
    training = r.claim.training
    return {
        "id": r.claim.id, "paper": r.claim.paper, "location": r.claim.location, "kind": r.claim.kind.value,
        "variant_of": r.claim.variant_of or None, "parts": list(r.claim.parts), "form": r.claim.form.value,
        "quote": r.claim.quote, "statement": r.claim.statement, "follows": r.claim.follows,
        "measures": r.claim.measures, "verdict": r.verdict.value, "note": r.note,
        "threshold": r.claim.threshold, "direction": r.claim.direction.value,
        "threshold_source": r.claim.threshold_source,
        "values": list(r.spread.values) if r.spread else [],
        "seeds": len(kept.values) if kept else 0,
        "mean": kept.mean if kept else None, "std": kept.std if kept else None,
        "scale": ("log" if kept.on_log_scale else "linear") if kept else None,
        "interval": _interval_json(kept),
        "flip_point": r.flip.as_json() if r.flip else None,
        "seeds_to_settle": r.projected_seeds, "max_seeds": r.claim.seed_limit,
        "draws": r.draws,
        "failed_seeds": [{"seed": i, "reason": reason} for i, reason in r.failed_seeds],
        "details": r.details,
        "training_test": training.source if training else None,
        "checked": r.checked,
        "reference": {"valid": r.verdict is not Verdict.NO_VALID_REFERENCE,
                      "note": r.note if r.verdict is Verdict.NO_VALID_REFERENCE else ""}
        if r.claim.reference else None,
        "authors_code": {"value": theirs.as_json() if theirs else None,
                         "verdict": compared_.verdict.value if compared_.verdict else None,
                         "verdict_note": compared_.verdict_note,
                         "failed_seeds": [{"seed": theirs.seed_label(i), "reason": reason}
                                          for i, reason in compared_.failed_seeds] if theirs else [],
                         "agreement": compared_.agreement.value, "note": compared_.note,
                         "margin": {"value": margin.value, "source": margin.source} if margin else None,
                         "difference": compared_.difference,
                         "interval": list(compared_.interval) if compared_.interval else None},
        "runs": links.runs(r),
        "figure": _figure_json(r),
    } | ({"sentence": {"verdict": sentence.verdict.value, "form": sentence.form.value, "note": sentence.note}}
         if (sentence := sentence_of(r, results)).parts else {})


def claims_json(results: Sequence[ClaimResult], header: ReportHeader, links: PageLinks) -> dict:
    return {
        "summary": summary_json(results), "agreement_rule": AGREEMENT_RULE,
        "command": header.command, "commit": header.commit, "date": header.date, "quick": header.quick,
        "wall_seconds": header.wall_s, "runs_measured": header.runs_measured, "failed_runs": list(header.failed_runs),
        "rejudged": header.rejudged,
        "claims": [_claim_json(r, links, results) for r in claims_only(results)],
        "construction_checks": [_claim_json(r, links) for r in construction_checks(results)],
    }


def update_readme(readme: Path, block: str) -> None:
    """Replace the claims-table block of ``readme`` (markers included) with ``block`` (atomically)."""
    replace_marked_block(readme, README_START, README_END, block, "--update-table")


def write_report(root: Path, results: Sequence[ClaimResult], header: ReportHeader) -> None:
    """Write ``claims.json``, ``report.md``, ``report.html`` and the papers' figures beside our runs'
    (``figures.md``, ``figures.html``: ``icl_gd.claims.gallery``) into ``root`` (each atomically)."""
    links = PageLinks(Path(root))
    write_json(links.folder / "claims.json", claims_json(results, header, links))
    pages = {"report.md": render_markdown(results, header, links), "report.html": render_html(results, header, links),
             "figures.md": gallery_markdown(results, links), "figures.html": gallery_html(results)}
    for name, text in pages.items():
        atomic_write_text(links.folder / name, text)


# The report's public face: what a notebook or a test renders or writes (the formats live in their own modules).
__all__ = ["CONSTRUCTION_HEADING", "Judgement", "README_END", "README_START", "ReportHeader", "check_table_page",
           "claims_json", "readme_block", "render_html", "render_markdown", "update_readme", "value_text",
           "write_report"]
