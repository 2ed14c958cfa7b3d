"""The reproduction report in Markdown: ``report.md`` and the claims page's generated block (``docs/claims.md``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from icl_gd.claims.departures import DEPARTURES, Departure
from icl_gd.claims.kept import kept_text, quick_agreement
from icl_gd.claims.links import PageLinks
from icl_gd.claims.readings import counted_note, reading_lines
from icl_gd.claims.summary import (AGREEMENT_RULE, SECTION_INTRO, SECTIONS, ClaimResult, ReportHeader, Section,
                                   authors_text, claims_summary, construction_checks, draws_note, flip_text, parts_of,
                                   primaries, section_line, sentence_of, summary_line, threshold_text, value_text,
                                   variants)


def figures_of(results: Sequence[ClaimResult], paper: str) -> list[tuple[str, Path]]:
    """(caption, path) of every existing figure the paper's claims name, each once."""
    figures: list[tuple[str, Path]] = []
    for result in results:
        if result.claim.paper != paper or not result.run_dirs:
            continue
        for name in result.claim.figures:
            path = Path(result.run_dirs[0]) / name
            if path.is_file() and path not in [p for _, p in figures]:
                figures.append((f"{result.claim.id}: {Path(result.run_dirs[0]).name}/{name}", path))
    return figures


def _md(text: str) -> str:
    return text.replace("|", "\\|")


_TABLE_HEAD = ["| claim | location | statement (*the paper's words*) | measured | threshold (source) | verdict | "
               "authors' code |", "|---|---|---|---|---|---|---|"]


def _md_row(r: ClaimResult, links: PageLinks, link_runs: bool, sub: str = "",
            results: Sequence[ClaimResult] = ()) -> str:
    """One row; ``sub``: "variant" or "part" for a sub-row; a sentence's own row (with ``results`` holding its
    parts) shows the sentence's verdict first, then its own condition's."""
    runs = links.runs(r)
    claim = f"[{r.claim.id}]({runs[0]})" if link_runs and runs else f"`{r.claim.id}`"
    claim = f"↳ {claim} ({sub})" if sub else claim
    own = f"**{r.headline_verdict.value}**" + (f" ({_md(counted_note(r))})" if counted_note(r) else "")
    sentence = sentence_of(r, results) if not sub else None
    if sentence is not None and sentence.parts:
        own = f"**sentence {sentence.verdict.value}** ({_md(sentence.note)}); this condition: {own}"
    flip = flip_text(r)
    readings = "".join(f" <br>{_md(line)}" for line in reading_lines(r))
    verdict = own + readings + (f" <br>{_md(flip)}" if flip else "") + \
        (f" <br>{_md(kept_text(r))}" if kept_text(r) else "")
    quote = f" <br>*\u201c{_md(r.claim.quote)}\u201d*" if r.claim.quote and not sub else ""
    follows = f" <br>set-up: {_md(r.claim.follows)}" if r.claim.follows.startswith("our reading") else ""
    details = f" <br>{_md(r.details)}" if r.details else ""
    draws = f" <br>{_md(draws_note(r))}" if draws_note(r) else ""
    return (f"| {claim} | {r.claim.author}, {_md(r.claim.location)} | {_md(r.claim.statement)}{quote}{follows} | "
            f"{value_text(r)} <br>*{_md(r.claim.measures)}*{details}{draws} | {threshold_text(r)} "
            f"<br>({_md(r.claim.threshold_source)}; form: {r.claim.form.value}) | {verdict} | "
            f"{_md(authors_text(r))} |")


def claims_table_markdown(results: Sequence[ClaimResult], links: PageLinks, link_runs: bool = True,
                          members: Sequence[ClaimResult] | None = None) -> str:
    """One row per counted sentence (``members``, default every one): location, statement and quote, our value,
    threshold, its source and form, the verdict with its flip point, the authors' code's values with their verdict
    and the agreement; the sentence's other conditions (parts) and its variants as sub-rows under it."""
    lines = list(_TABLE_HEAD)
    for r in primaries(results) if members is None else members:
        lines.append(_md_row(r, links, link_runs, results=results))
        lines += [_md_row(p, links, link_runs, "part") for p in parts_of(r, results)]
        lines += [_md_row(v, links, link_runs, "variant") for v in variants(r, results)]
        lines += [_md_row(v, links, link_runs, "variant of a part") for p in parts_of(r, results)
                  for v in variants(p, results)]
    return "\n".join(lines)


def construction_table_markdown(results: Sequence[ClaimResult]) -> str:
    lines = ["| check | location | statement | measured | threshold | verdict |", "|---|---|---|---|---|---|"]
    for r in construction_checks(results):
        verdict = f"{r.verdict.value}" + (f" ({_md(r.note)})" if r.note else "")
        flip = f" <br>{_md(flip_text(r))}" if flip_text(r) else ""
        lines.append(f"| `{r.claim.id}` | {r.claim.author}, {_md(r.claim.location)} | "
                     f"{_md(r.claim.statement)} | {value_text(r)} <br>*{_md(r.claim.measures)}* | "
                     f"{threshold_text(r)} | {verdict}{flip} |")
    return "\n".join(lines)


def departures_of(paper: str) -> list[Departure]:
    return [d for d in DEPARTURES if d.paper == paper]


CHECKS_INTRO = ("Identities of icl-gd's own code (`icl-gd verify`'s float64 checks and the dual forms of trained "
                 "networks): checked on every run, not counted among the claims.")
VARIANTS = ("Each sentence of a paper is one counted row. A sub-row (↳ part) is another condition of the same "
             "sentence ('surpasses GD *but* matches GD++'): the sentence holds when every condition holds and fails "
             "when one fails. A sub-row (↳ variant) tests the same sentence another way (e.g. against a reference "
             "tuned otherwise) and is not counted. The flip point of a verdict gives the thresholds at which it "
             "would hold or fail: the ends of its 95% interval.")


def _section_markdown(section: Section, results: Sequence[ClaimResult], links: PageLinks, link_runs: bool,
                      heading: str = "##") -> list[str]:
    members = section.members(results)
    if not members:
        return []
    line = section_line(section, results)
    parts = [f"{heading} {section.title}", "", f"**{line}.**", ""]
    if section.key in SECTION_INTRO:
        parts += [SECTION_INTRO[section.key], ""]
    return parts + [claims_table_markdown(results, links, link_runs, members), ""]


def render_markdown(results: Sequence[ClaimResult], header: ReportHeader, links: PageLinks) -> str:
    agreement = quick_agreement(list(results)) if header.quick else ""
    parts = ["# Does icl-gd reproduce the papers?", "",
             f"**{claims_summary(results)}.**" + (" (`--smoke` budget: claims that need the full budget are "
                                                   "inconclusive by design.)" if header.quick else "")
             + (f" {agreement}." if agreement else ""), "",
             f"Produced by `{header.command}` at commit `{header.commit}` on {header.date} "
             f"({header.wall_s / 60:.1f} min{runs_text(header)}){rejudged_text(header)}.", "",
             f"The authors' code column: {AGREEMENT_RULE}. {VARIANTS}", "",
             "The papers' figures beside ours, with their claims: [figures.md](figures.md).", ""]
    if header.failed_runs:
        parts += ["Failed runs:", *[f"- {f}" for f in header.failed_runs], ""]
    for section in SECTIONS:
        section_parts = _section_markdown(section, results, links, True)
        if not section_parts:
            continue
        parts += section_parts
        if section.paper:
            for caption, path in figures_of(results, section.paper):
                parts += [f"![{caption}]({links.below(path)})",
                          f"*{caption}*", ""]
            departures = departures_of(section.paper)
            if departures:
                parts += ["Departures from the paper's set-up:", "", "| study | key | paper | ours | why |",
                          "|---|---|---|---|---|"]
                parts += [f"| {d.study} | {d.key} | {d.paper_value} | {d.ours} | {d.why} |" for d in departures]
                parts.append("")
    if construction_checks(results):
        parts += ["## Construction checks", "", CHECKS_INTRO, "", construction_table_markdown(results), ""]
    return "\n".join(parts)


README_CLAIMS_JSON = Path("claims-table.json")


def readme_claims_json(readme: Path) -> Path:
    return Path(readme).parent / README_CLAIMS_JSON


README_START = "<!-- claims-table:start (written by icl-gd reproduce --update-table; do not edit by hand) -->"
README_END = "<!-- claims-table:end -->"


def runs_text(header: ReportHeader) -> str:
    return f"; {header.runs_measured}" if header.runs_measured else ""


def rejudged_text(header: ReportHeader) -> str:
    return f"; verdicts decided again from its claims.json by {header.rejudged}" if header.rejudged else ""


# Where ``--update-table PAGE`` keeps the table's claims.json (per-seed values): beside the page, so ``--rejudge``
# can redo the authors' code column when their records grow, without the runs.
def readme_block(results: Sequence[ClaimResult], header: ReportHeader, page: str = "docs/claims.md") -> str:
    """The claims page's generated block (``docs/claims.md``): provenance, summary line, the claims table and the
    construction checks' (no run links: the runs live in the report's directory, not in the repository)."""
    budget = " (`--smoke` budget: claims that need the full budget are inconclusive by design)" if header.quick else ""
    data = README_CLAIMS_JSON.as_posix()
    runs = f" ({header.runs_measured})" if header.runs_measured else ""
    lines = [README_START, "", f"Generated by `{header.command}` at commit `{header.commit}` on {header.date}{budget}"
             f"{runs}{rejudged_text(header)}. Per-seed values: [{data}]({data}) (`icl-gd reproduce --rejudge "
             f"{Path(page).parent.as_posix()}/{data} --update-table {page}` decides the verdicts again from them, "
             "against today's records of the authors' code).",
             "", f"**{claims_summary(results)}.**", "", f"The authors' code column: {AGREEMENT_RULE}. {VARIANTS}", ""]
    for section in SECTIONS:
        lines += _section_markdown(section, results, PageLinks(Path(".")), False, heading="###")
    if construction_checks(results):
        lines += [CONSTRUCTION_HEADING, "", CHECKS_INTRO, "", construction_table_markdown(results), ""]
    return "\n".join(lines + [README_END])


CONSTRUCTION_HEADING = "### Construction checks"

HEADLINE_START = "<!-- headline:start (written by icl-gd reproduce --update-headline; do not edit by hand) -->"
HEADLINE_END = "<!-- headline:end -->"


def headline_block(results: Sequence[ClaimResult]) -> str:
    """The README's headline: each paper's counted sentences by verdict and by form, with the authors' code beside
    them (``summary.by_paper`` in words), then ours, beyond the papers and the construction checks."""
    lines = [HEADLINE_START, ""]
    for section in SECTIONS:
        members = section.members(results)
        if not members:
            continue
        line = section_line(section, results)
        lines.append(f"- **{section.title}**: {line}.")
    checks = construction_checks(results)
    if checks:
        lines.append(f"- **Construction checks**: {summary_line(checks, 'check')}.")
    return "\n".join([*lines, "", HEADLINE_END])


