"""The reproduction report: ``claims.json`` for machines, ``report.md`` and a self-contained ``report.html``.

All three are rendered from the same ``ClaimResult`` list and written atomically; the HTML embeds its figures
(base64 PNG), so it can be mailed or archived as one file.
"""

from __future__ import annotations

import base64
import html
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from icl_gd.claims.departures import DEPARTURES, IRIE, VON_OSWALD, Departure
from icl_gd.core.results import atomic_write_text, replace_marked_block, write_json
from icl_gd.claims.formatting import format_value
from icl_gd.claims.authors import AuthorsValue, Comparison, agreement, authors_values, compared
from icl_gd.claims.claim import Kind
from icl_gd.claims.verdict import ClaimResult, Spread, Verdict



@dataclass(frozen=True)
class ReportHeader:
    command: str
    commit: str
    date: str
    quick: bool
    wall_s: float
    failed_runs: tuple[str, ...] = ()
    # set when the verdicts were decided again from an earlier run's claims.json (``--rejudge``): by which command,
    # at which commit and when; command, commit, date and wall_s above are then that earlier run's
    rejudged: str = ""
    # what the runs themselves measured (their timings.json), e.g. "91 runs: 812 CPU min, ...": a call that reuses
    # finished runs takes seconds (wall_s), so the budget's cost is this line
    runs_measured: str = ""


def _spread_text(spread: Spread) -> str:
    if len(spread.values) == 1:
        return f"{format_value(spread.values[0])} (1 seed)"
    if not all(math.isfinite(v) for v in spread.values):
        return (f"{', '.join(format_value(v) for v in spread.values)} ({len(spread.values)} seeds, in seed order; "
                "no mean: a value is not finite)")
    if spread.on_log_scale:  # geometric mean ×/÷ geometric std
        text = (f"{format_value(spread.mean)} ×/÷ {format_value(math.exp(spread.std))} "
                f"({len(spread.values)} seeds, geometric")
    else:
        text = f"{format_value(spread.mean)} ± {format_value(spread.std)} ({len(spread.values)} seeds"
    interval = spread.interval
    if interval is not None:
        text += f", 95% CI [{format_value(interval[0])}, {format_value(interval[1])}]"
    return text + ")"


def value_text(result: ClaimResult) -> str:
    """``mean ± std (n seeds, 95% CI [lo, hi])`` (geometric ``mean ×/÷ factor`` for log-scale statistics), or the
    one value and its seed count, or ``-`` when nothing was measured. When a seed's value is not finite (a roll-out
    that diverged) there is no mean to show: the per-seed values instead, so a reader sees which seeds. Seeds whose
    training failed are left out of the summary and listed after it."""
    if result.spread is None:
        return "-"
    if not result.failed_seeds:
        return _spread_text(result.spread)
    kept = result.kept
    left = ", ".join(f"seed {i} {format_value(result.spread.values[i])}" for i, _ in result.failed_seeds)
    return (_spread_text(kept) if kept else "no trained seed") + f"; left out, training failed: {left}"


def threshold_text(result: ClaimResult) -> str:
    return f"{result.claim.direction.value} {format_value(result.claim.threshold)}"


def claims_only(results: Sequence[ClaimResult]) -> list[ClaimResult]:
    """The papers' claims, ours and beyond the papers, without the construction checks."""
    return [r for r in results if not r.claim.is_construction]


def construction_checks(results: Sequence[ClaimResult]) -> list[ClaimResult]:
    return [r for r in results if r.claim.is_construction]


def primaries(results: Sequence[ClaimResult]) -> list[ClaimResult]:
    """Each claim once: the claims that are not a variant of another present in ``results``."""
    present = {r.claim.id for r in results}
    return [r for r in claims_only(results) if r.claim.variant_of not in present]


def variants(result: ClaimResult, results: Sequence[ClaimResult]) -> list[ClaimResult]:
    return [r for r in results if r.claim.variant_of == result.claim.id]


def _counts(results: Sequence[ClaimResult]) -> dict[str, int]:
    return {v.value: sum(r.verdict is v for r in results) for v in Verdict}


def summary_line(results: Sequence[ClaimResult], noun: str = "claim") -> str:
    counts = _counts(results)
    text = (f"{len(results)} {noun}{'s' if len(results) != 1 else ''}: {counts['holds']} hold, "
            f"{counts['fails']} fail, {counts['inconclusive']} inconclusive")
    return text + (f", {counts['no valid reference']} no valid reference" if counts["no valid reference"] else "")


@dataclass(frozen=True)
class Section:
    """One section of the report: a paper's claims (``kind`` paper), ours, or beyond the papers."""

    key: str
    title: str
    kind: Kind
    paper: str | None = None

    def members(self, results: Sequence[ClaimResult]) -> list[ClaimResult]:
        """The section's claims, each once (variants are sub-rows of theirs)."""
        return [r for r in primaries(results) if r.claim.kind is self.kind
                and (self.paper is None or r.claim.paper == self.paper)]


SECTIONS = (Section("von-oswald", VON_OSWALD, Kind.PAPER, VON_OSWALD), Section("irie", IRIE, Kind.PAPER, IRIE),
            Section("ours", "Our own checks", Kind.OURS), Section("beyond", "Beyond the papers", Kind.BEYOND))
_SECTION_INTRO = {
    "ours": "Checks the papers do not make (our controls, our extensions, our readings of a set-up the paper does "
            "not use): outside the papers' counts.",
    "beyond": "Statements of later work (quoted, with their paper) or ours beyond both papers: outside the papers' "
              "counts."}


def paper_summary(results: Sequence[ClaimResult], paper: str) -> dict:
    """One paper's headline: its claims (each sentence once) by verdict; of those with the authors' code run at the
    claim's set-up, how many reach the same verdict in both; which fail in both, only in icl-gd, only in theirs."""
    members = [r for r in primaries(results) if r.claim.kind is Kind.PAPER and r.claim.paper == paper]
    run = [(r, comparison(r)[1]) for r in members if compared(comparison(r)[0])]
    ours_fail = {r.claim.id for r, _ in run if r.verdict is Verdict.FAILS}
    theirs_fail = {r.claim.id for r, c in run if c.verdict is Verdict.FAILS}
    order = [r.claim.id for r, _ in run]
    return {"claims": len(members), **_counts(members), "authors_code_run": len(run),
            "same_verdict": sum(r.verdict is c.verdict for r, c in run),
            "fails_in_both": [i for i in order if i in ours_fail & theirs_fail],
            "fails_only_in_icl_gd": [i for i in order if i in ours_fail - theirs_fail],
            "fails_only_in_theirs": [i for i in order if i in theirs_fail - ours_fail]}


def paper_headline(results: Sequence[ClaimResult], paper: str) -> str:
    """``paper_summary`` as a sentence."""
    s = paper_summary(results, paper)
    members = [r for r in primaries(results) if r.claim.kind is Kind.PAPER and r.claim.paper == paper]
    total, counts = summary_line(members).split(": ", 1)
    text = f"{total} judged: {counts}"
    if s["authors_code_run"]:
        text += (f"; the authors' code run for {s['authors_code_run']}: the same verdict in {s['same_verdict']}")
        lists = [("fail in both codes", s["fails_in_both"]), ("fail only in icl-gd", s["fails_only_in_icl_gd"]),
                 ("fail only in theirs", s["fails_only_in_theirs"])]
        text += "".join(f"; {name}: {', '.join(ids) if ids else 'none'}" for name, ids in lists)
    return text


def claims_summary(results: Sequence[ClaimResult]) -> str:
    """The headline: each paper's claims (each sentence once), then ours and beyond the papers, then the
    construction checks, each counted on its own."""
    parts = []
    for section in SECTIONS:
        members = section.members(results)
        if not members:
            continue
        if section.paper:
            total, counts = summary_line(members).split(": ", 1)
            parts.append(f"{section.title}: {total} judged: {counts}")
        else:
            parts.append(f"{section.title}: {summary_line(members, 'check' if section.kind is Kind.OURS else 'claim')}")
    checks = construction_checks(results)
    if checks:
        parts.append(summary_line(checks, "construction check"))
    return "; ".join(parts) if parts else summary_line([])


def _run_links(result: ClaimResult, root: Path) -> list[str]:
    seen: list[str] = []
    for d in result.run_dirs:
        rel = Path(d).relative_to(root).as_posix() if Path(d).is_relative_to(root) else str(d)
        if rel not in seen:
            seen.append(rel)
    return seen


def _figures(results: Sequence[ClaimResult], paper: str) -> list[tuple[str, Path]]:
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


def comparison(result: ClaimResult) -> tuple[AuthorsValue | None, Comparison]:
    theirs = authors_values().get(result.claim.id)
    return theirs, agreement(result.claim, result.spread, theirs, [i for i, _ in result.failed_seeds])


def _their_values(theirs: AuthorsValue) -> str:
    values = ", ".join(format_value(v) for v in theirs.values)
    seeds = theirs.provenance.get("seeds", [])
    return f"{values} (seed{'s' if len(seeds) != 1 else ''} {', '.join(map(str, seeds))})"


def authors_text(result: ClaimResult) -> str:
    """Their values (per seed), their verdict under the claim's rule and the agreement verdict with its reason."""
    theirs, compared_ = comparison(result)
    if theirs is None or not theirs.values:
        return compared_.agreement.value
    if compared_.verdict is None:
        return f"{_their_values(theirs)}: {compared_.agreement.value}"
    verdict = compared_.verdict.value + (f" ({compared_.verdict_note})" if compared_.verdict_note else "")
    return (f"{_their_values(theirs)}: theirs {verdict}; {compared_.agreement.value}"
            + (f" ({compared_.note})" if compared_.note else ""))


def _interval_json(spread: Spread | None) -> dict | None:
    if spread is None or spread.interval is None:
        return None
    return {"low": spread.interval[0], "high": spread.interval[1], "seeds": len(spread.values)}


def _claim_json(r: ClaimResult, root: Path) -> dict:
    theirs, compared_ = comparison(r)
    kept = r.kept
    margin = r.claim.margin
    training = r.claim.training
    return {
        "id": r.claim.id, "paper": r.claim.paper, "location": r.claim.location, "kind": r.claim.kind.value,
        "variant_of": r.claim.variant_of or None,
        "quote": r.claim.quote, "statement": r.claim.statement, "follows": r.claim.follows,
        "measures": r.claim.measures, "verdict": r.verdict.value, "note": r.note,
        "threshold": r.claim.threshold, "direction": r.claim.direction.value,
        "threshold_source": r.claim.threshold_source,
        "values": list(r.spread.values) if r.spread else [],
        "seeds": len(kept.values) if kept else 0,
        "mean": kept.mean if kept else None, "std": kept.std if kept else None,
        "scale": ("log" if kept.on_log_scale else "linear") if kept else None,
        "interval": _interval_json(kept),
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
        "runs": _run_links(r, root),
    }


def summary_json(results: Sequence[ClaimResult]) -> dict:
    """``claims.json``'s summary: the headline, each paper's counts (``by_paper``), ours, beyond, the checks."""
    return {"text": claims_summary(results),
            "by_paper": {s.paper: paper_summary(results, s.paper) for s in SECTIONS
                         if s.paper and s.members(results)},
            "ours": {"claims": len(m := SECTIONS[2].members(results)), **_counts(m)},
            "beyond": {"claims": len(m := SECTIONS[3].members(results)), **_counts(m)},
            "variants": len(claims_only(results)) - len(primaries(results)),
            "construction_checks": {"checks": len(c := construction_checks(results)), **_counts(c)}}


def claims_json(results: Sequence[ClaimResult], header: ReportHeader, root: Path) -> dict:
    return {
        "summary": summary_json(results), "agreement_rule": AGREEMENT_RULE,
        "command": header.command, "commit": header.commit, "date": header.date, "quick": header.quick,
        "wall_seconds": header.wall_s, "runs_measured": header.runs_measured, "failed_runs": list(header.failed_runs),
        "rejudged": header.rejudged,
        "claims": [_claim_json(r, root) for r in claims_only(results)],
        "construction_checks": [_claim_json(r, root) for r in construction_checks(results)],
    }


AGREEMENT_RULE = ("their verdict: the claim's rule on their seeds; agrees / differs: whether the 95% interval of "
                  "the difference between our seeds' mean and the authors' code's (pooled two-sample t; log scale for "
                  "ratios) contains 0 or lies within the claim's margin; a value that is not finite on either side "
                  "differs; seeds whose training failed (the claim's declared test) are left out of both; cannot "
                  "tell: fewer than three values in all, outside the margin, or a NaN; not run: no record of their "
                  "code at this claim's set-up (icl_gd/claims/authors_values.json)")


def _md(text: str) -> str:
    return text.replace("|", "\\|")


_TABLE_HEAD = ["| claim | location | statement (*the paper's words*) | measured | threshold (source) | verdict | "
               "authors' code |", "|---|---|---|---|---|---|---|"]


def _md_row(r: ClaimResult, root: Path, link_runs: bool, variant: bool = False) -> str:
    runs = _run_links(r, root)
    claim = f"[{r.claim.id}]({runs[0]})" if link_runs and runs else f"`{r.claim.id}`"
    claim = f"↳ {claim} (variant)" if variant else claim
    verdict = f"**{r.verdict.value}**" + (f" ({_md(r.note)})" if r.note else "")
    quote = f" <br>*\u201c{_md(r.claim.quote)}\u201d*" if r.claim.quote and not variant else ""
    follows = f" <br>set-up: {_md(r.claim.follows)}" if r.claim.follows.startswith("our reading") else ""
    details = f" <br>{_md(r.details)}" if r.details else ""
    return (f"| {claim} | {r.claim.author}, {_md(r.claim.location)} | {_md(r.claim.statement)}{quote}{follows} | "
            f"{value_text(r)} <br>*{_md(r.claim.measures)}*{details} | {threshold_text(r)} "
            f"<br>({_md(r.claim.threshold_source)}) | {verdict} | {_md(authors_text(r))} |")


def claims_table_markdown(results: Sequence[ClaimResult], root: Path, link_runs: bool = True,
                          members: Sequence[ClaimResult] | None = None) -> str:
    """One row per claim (``members``, default every claim once): location, statement and quote, our value,
    threshold and its source, our verdict, the authors' code's values with their verdict and the agreement; each
    variant as a sub-row under its claim."""
    lines = list(_TABLE_HEAD)
    for r in primaries(results) if members is None else members:
        lines.append(_md_row(r, root, link_runs))
        lines += [_md_row(v, root, link_runs, variant=True) for v in variants(r, results)]
    return "\n".join(lines)


def construction_table_markdown(results: Sequence[ClaimResult]) -> str:
    lines = ["| check | location | statement | measured | threshold | verdict |", "|---|---|---|---|---|---|"]
    for r in construction_checks(results):
        verdict = f"{r.verdict.value}" + (f" ({_md(r.note)})" if r.note else "")
        lines.append(f"| `{r.claim.id}` | {r.claim.author}, {_md(r.claim.location)} | "
                     f"{_md(r.claim.statement)} | {value_text(r)} <br>*{_md(r.claim.measures)}* | "
                     f"{threshold_text(r)} | {verdict} |")
    return "\n".join(lines)


def _departures(paper: str) -> list[Departure]:
    return [d for d in DEPARTURES if d.paper == paper]


_CHECKS_INTRO = ("Identities of icl-gd's own code (`icl-gd verify`'s float64 checks and the dual forms of trained "
                 "networks): checked on every run, not counted among the claims.")
_VARIANTS = ("A sub-row (↳) tests the same sentence another way (e.g. against a reference tuned otherwise); the "
             "claim's own row carries its verdict, which the counts use.")


def _section_markdown(section: Section, results: Sequence[ClaimResult], root: Path, link_runs: bool,
                      heading: str = "##") -> list[str]:
    members = section.members(results)
    if not members:
        return []
    if section.paper:
        line = paper_headline(results, section.paper)
    else:
        line = summary_line(members, "check" if section.kind is Kind.OURS else "claim")
    parts = [f"{heading} {section.title}", "", f"**{line}.**", ""]
    if section.key in _SECTION_INTRO:
        parts += [_SECTION_INTRO[section.key], ""]
    return parts + [claims_table_markdown(results, root, link_runs, members), ""]


def render_markdown(results: Sequence[ClaimResult], header: ReportHeader, root: Path) -> str:
    parts = ["# Does icl-gd reproduce the papers?", "",
             f"**{claims_summary(results)}.**" + (" (`--quick` budget: claims that need the full budget are "
                                                   "inconclusive by design.)" if header.quick else ""), "",
             f"Produced by `{header.command}` at commit `{header.commit}` on {header.date} "
             f"({header.wall_s / 60:.1f} min{_runs_text(header)}){_rejudged_text(header)}.", "",
             f"The authors' code column: {AGREEMENT_RULE}. {_VARIANTS}", "",
             "The papers' figures beside ours, with their claims: [figures.md](figures.md).", ""]
    if header.failed_runs:
        parts += ["Failed runs:", *[f"- {f}" for f in header.failed_runs], ""]
    for section in SECTIONS:
        section_parts = _section_markdown(section, results, root, True)
        if not section_parts:
            continue
        parts += section_parts
        if section.paper:
            for caption, path in _figures(results, section.paper):
                parts += [f"![{caption}]({path.relative_to(root).as_posix() if path.is_relative_to(root) else path})",
                          f"*{caption}*", ""]
            departures = _departures(section.paper)
            if departures:
                parts += ["Departures from the paper's set-up:", "", "| study | key | paper | ours | why |",
                          "|---|---|---|---|---|"]
                parts += [f"| {d.study} | {d.key} | {d.paper_value} | {d.ours} | {d.why} |" for d in departures]
                parts.append("")
    if construction_checks(results):
        parts += ["## Construction checks", "", _CHECKS_INTRO, "", construction_table_markdown(results), ""]
    return "\n".join(parts)


_CSS = """body{font-family:system-ui,sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;color:#222;
overflow-wrap:anywhere}
table{border-collapse:collapse;width:100%;margin:1em 0;table-layout:fixed}th,td{border:1px solid #ccc;padding:4px 6px;
vertical-align:top;font-size:13px;overflow-wrap:anywhere}th{background:#f3f3f3;text-align:left}
tr.holds{background:#f2fbf2}tr.fails{background:#fdf0f0}tr.inconclusive{background:#fffbea}
tr.no-valid-reference{background:#f0f0f5}tr.variant td:first-child{padding-left:1.5em}
blockquote{margin:4px 0 0 0;padding:2px 6px;border-left:3px solid #999;color:#444;font-style:italic}
.badge{display:inline-block;border-radius:9px;padding:1px 8px;margin:1px 0;font-size:12px;font-weight:600;color:#fff}
.badge.holds,.badge.agrees{background:#2e7d32}.badge.fails,.badge.differs{background:#c62828}
.badge.inconclusive,.badge.cannot-tell{background:#b8860b}.badge.not-run,.badge.no-valid-reference{background:#777}
.badge.kind{background:#1565c0}.details{font-size:12px;color:#555;margin-top:4px}
small{color:#555}figure{display:inline-block;margin:0.5em;max-width:560px}img{max-width:100%}
figcaption{font-size:13px;color:#555}"""
_COLUMNS = ('<colgroup><col style="width:13%"><col style="width:15%"><col style="width:27%"><col style="width:15%">'
            '<col style="width:12%"><col style="width:18%"></colgroup>')


def _badge(text: str, cls: str) -> str:
    return f'<span class="badge {cls.replace(" ", "-")}">{html.escape(text)}</span>'


def _html_row(r: ClaimResult, root: Path, with_authors: bool, variant: bool = False) -> str:
    esc = html.escape
    runs = _run_links(r, root)
    links = ", ".join(f'<a href="{esc(link)}">{esc(Path(link).name)}</a>' for link in runs)
    note = f"<br><small>{esc(r.note)}</small>" if r.note else ""
    quote = f"<blockquote>\u201c{esc(r.claim.quote)}\u201d</blockquote>" if r.claim.quote and not variant else ""
    follows = f'<div class="details">set-up: {esc(r.claim.follows)}</div>' if r.claim.follows else ""
    details = f'<div class="details">runs: {links}</div>' if links else ""
    kind = {"ours": " " + _badge("ours", "kind"),
            "beyond": " " + _badge("beyond the papers", "kind")}.get(r.claim.kind.value, "")
    kind += " " + _badge("variant", "kind") if variant else ""
    verdicts = _badge(r.verdict.value, r.verdict.value) + note
    if with_authors:
        theirs, compared_ = comparison(r)
        their_values = (f"<br><small>their code: {esc(_their_values(theirs))}"
                        f" ({esc(str(theirs.provenance.get('steps', '?')))} steps, "
                        f"{esc(str(theirs.provenance.get('date', '')))})</small>") if theirs and theirs.values else ""
        their_verdict = ("<br>" + _badge(f"theirs: {compared_.verdict.value}", compared_.verdict.value)
                         + (f"<br><small>{esc(compared_.verdict_note)}</small>" if compared_.verdict_note else "")
                         ) if compared_.verdict else ""
        verdicts += (their_verdict + "<br>" + _badge(f"authors' code: {compared_.agreement.value}",
                                                     compared_.agreement.value)
                     + their_values + (f"<br><small>{esc(compared_.note)}</small>" if compared_.note else ""))
    arrow = "↳ " if variant else ""
    return (f'<tr class="{r.verdict.value.replace(" ", "-")}{" variant" if variant else ""}"><td>{arrow}'
            f"<code>{esc(r.claim.id)}</code>{kind}</td>"
            f"<td>{esc(r.claim.author)}, {esc(r.claim.location)}</td>"
            f"<td>{esc(r.claim.statement)}{quote}{follows}{details}</td>"
            f"<td>{esc(value_text(r))}<br><small><i>{esc(r.claim.measures)}</i></small>"
            + (f'<div class="details">{esc(r.details)}</div>' if r.details else "") + "</td>"
            f"<td>{esc(threshold_text(r))}<br><small>{esc(r.claim.threshold_source)}</small></td>"
            f"<td>{verdicts}</td></tr>")


def render_html(results: Sequence[ClaimResult], header: ReportHeader, root: Path) -> str:
    esc = html.escape
    head = ("<thead><tr><th>claim</th><th>location</th><th>statement, the paper's words</th><th>measured</th>"
            "<th>threshold (source)</th><th>{}</th></tr></thead>")
    body = ["<h1>Does icl-gd reproduce the papers?</h1>",
            f'<p id="summary"><b>{esc(claims_summary(results))}.</b>'
            + (" (--quick budget: claims that need the full budget are inconclusive by design.)"
               if header.quick else "") + "</p>",
            f"<p>Produced by <code>{esc(header.command)}</code> at commit <code>{esc(header.commit)}</code> on "
            f"{esc(header.date)} ({header.wall_s / 60:.1f} min{esc(_runs_text(header))})"
            f"{esc(_rejudged_text(header))}.</p>",
            '<p>The papers\' figures beside ours, with their claims: <a href="figures.html">figures.html</a>.</p>',
            f"<p><small>The authors' code: {esc(AGREEMENT_RULE)}. {esc(_VARIANTS)}</small></p>"]
    if header.failed_runs:
        body.append("<p>Failed runs:</p><ul>" + "".join(f"<li>{esc(f)}</li>" for f in header.failed_runs)
                    + "</ul>")
    for section in SECTIONS:
        members = section.members(results)
        if not members:
            continue
        line = paper_headline(results, section.paper) if section.paper else \
            summary_line(members, "check" if section.kind is Kind.OURS else "claim")
        rows = "".join(_html_row(r, root, True) + "".join(_html_row(v, root, True, variant=True)
                                                          for v in variants(r, results)) for r in members)
        intro = f"<p>{esc(_SECTION_INTRO[section.key])}</p>" if section.key in _SECTION_INTRO else ""
        body.append(f'<h2>{esc(section.title)}</h2><p class="headline"><b>{esc(line)}.</b></p>{intro}'
                    f'<table id="claims-{section.key}">' + _COLUMNS
                    + head.format("verdicts: ours, the authors' code") + f"<tbody>{rows}</tbody></table>")
        if not section.paper:
            continue
        for caption, path in _figures(results, section.paper):
            data = base64.b64encode(path.read_bytes()).decode("ascii")
            body.append(f'<figure><img alt="{esc(caption)}" src="data:image/png;base64,{data}">'
                        f"<figcaption>{esc(caption)}</figcaption></figure>")
        departures = _departures(section.paper)
        if departures:
            body.append("<h3>Departures from the paper's set-up</h3><table><tr><th>study</th><th>key</th>"
                        "<th>paper</th><th>ours</th><th>why</th></tr>"
                        + "".join(f"<tr><td>{esc(d.study)}</td><td>{esc(d.key)}</td><td>{esc(d.paper_value)}</td>"
                                  f"<td>{esc(d.ours)}</td><td>{esc(d.why)}</td></tr>" for d in departures)
                        + "</table>")
    if construction_checks(results):
        body.append(f"<h2>Construction checks</h2><p>{esc(_CHECKS_INTRO)}</p>"
                    '<table id="construction-checks">' + _COLUMNS + head.format("verdict") + "<tbody>"
                    + "".join(_html_row(r, root, False) for r in construction_checks(results)) + "</tbody></table>")
    return ("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>icl-gd: reproduction report"
            f"</title><style>{_CSS}</style></head><body>" + "\n".join(body) + "</body></html>\n")


README_START = "<!-- claims-table:start (written by icl-gd reproduce --update-table; do not edit by hand) -->"
README_END = "<!-- claims-table:end -->"


def _runs_text(header: ReportHeader) -> str:
    return f"; {header.runs_measured}" if header.runs_measured else ""


def _rejudged_text(header: ReportHeader) -> str:
    return f"; verdicts decided again from its claims.json by {header.rejudged}" if header.rejudged else ""


# Where ``--update-table PAGE`` keeps the table's claims.json (per-seed values): beside the page, so ``--rejudge``
# can redo the authors' code column when their records grow, without the runs.
README_CLAIMS_JSON = Path("claims-table.json")


def readme_claims_json(readme: Path) -> Path:
    return Path(readme).parent / README_CLAIMS_JSON


def readme_block(results: Sequence[ClaimResult], header: ReportHeader, page: str = "docs/claims.md") -> str:
    """The claims page's generated block (``docs/claims.md``): provenance, summary line, the claims table and the
    construction checks' (no run links: the runs live in the report's directory, not in the repository)."""
    budget = " (`--quick` budget: claims that need the full budget are inconclusive by design)" if header.quick else ""
    data = README_CLAIMS_JSON.as_posix()
    runs = f" ({header.runs_measured})" if header.runs_measured else ""
    lines = [README_START, "", f"Generated by `{header.command}` at commit `{header.commit}` on {header.date}{budget}"
             f"{runs}{_rejudged_text(header)}. Per-seed values: [{data}]({data}) (`icl-gd reproduce --rejudge "
             f"{Path(page).parent.as_posix()}/{data} --update-table {page}` decides the verdicts again from them, "
             "against today's records of the authors' code).",
             "", f"**{claims_summary(results)}.**", "", f"The authors' code column: {AGREEMENT_RULE}. {_VARIANTS}", ""]
    for section in SECTIONS:
        lines += _section_markdown(section, results, Path("."), False, heading="###")
    if construction_checks(results):
        lines += [CONSTRUCTION_HEADING, "", _CHECKS_INTRO, "", construction_table_markdown(results), ""]
    return "\n".join(lines + [README_END])


CONSTRUCTION_HEADING = "### Construction checks"


def update_readme(readme: Path, block: str) -> None:
    """Replace the claims-table block of ``readme`` (markers included) with ``block`` (atomically)."""
    replace_marked_block(readme, README_START, README_END, block, "--update-table")


def write_report(root: Path, results: Sequence[ClaimResult], header: ReportHeader) -> None:
    """Write ``claims.json``, ``report.md``, ``report.html`` and the papers' figures beside our runs'
    (``figures.md``, ``figures.html``: ``icl_gd.claims.gallery``) under ``root`` (each atomically)."""
    from icl_gd.claims.gallery import write_gallery

    write_gallery(root, results)
    write_json(root / "claims.json", claims_json(results, header, root))
    atomic_write_text(root / "report.md", render_markdown(results, header, root))
    atomic_write_text(root / "report.html", render_html(results, header, root))
