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

from icl_gd.platform.departures import DEPARTURES, IRIE, VON_OSWALD, Departure
from icl_gd.core.results import atomic_write_text, replace_marked_block, write_json
from icl_gd.platform.claims.authors import AuthorsValue, Comparison, agreement, authors_values
from icl_gd.platform.claims.model import ClaimResult, Verdict

PAPERS = (VON_OSWALD, IRIE)


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


def format_value(value: float) -> str:
    if not math.isfinite(value):
        return str(value)
    return f"{value:.3g}" if abs(value) >= 1e-3 or value == 0 else f"{value:.2e}"


def value_text(result: ClaimResult) -> str:
    """``mean ± std (n seeds, 95% CI [lo, hi])`` (geometric ``mean ×/÷ factor`` for log-scale statistics), or the
    one value, or ``-`` when nothing was measured. When a seed's value is not finite (a roll-out that diverged)
    there is no mean to show: the per-seed values instead, so a reader sees which seeds ("inf ± nan" said none)."""
    spread = result.spread
    if spread is None:
        return "-"
    if len(spread.values) == 1:
        return format_value(spread.values[0])
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


def threshold_text(result: ClaimResult) -> str:
    return f"{result.claim.direction.value} {format_value(result.claim.threshold)}"


def claims_only(results: Sequence[ClaimResult]) -> list[ClaimResult]:
    """The papers' claims and ours (what the summary line counts), without the construction checks."""
    return [r for r in results if not r.claim.is_construction]


def construction_checks(results: Sequence[ClaimResult]) -> list[ClaimResult]:
    return [r for r in results if r.claim.is_construction]


def summary_line(results: Sequence[ClaimResult], noun: str = "claim") -> str:
    counts = {v: sum(r.verdict is v for r in results) for v in Verdict}
    return (f"{len(results)} {noun}{'s' if len(results) != 1 else ''}: {counts[Verdict.HOLDS]} hold, "
            f"{counts[Verdict.FAILS]} fail, {counts[Verdict.INCONCLUSIVE]} inconclusive")


def claims_summary(results: Sequence[ClaimResult]) -> str:
    """The headline: the claims' counts (construction checks apart, after a semicolon when there are any)."""
    line = summary_line(claims_only(results))
    checks = construction_checks(results)
    return line + (f"; {summary_line(checks, 'construction check')}" if checks else "")


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
    return theirs, agreement(result.claim, result.spread, theirs)


def authors_text(result: ClaimResult) -> str:
    """Their value (mean of their seeds, the seeds' values) and the agreement verdict, in one line."""
    theirs, compared = comparison(result)
    if theirs is None or not theirs.values:
        return compared.agreement.value
    values = ", ".join(format_value(v) for v in theirs.values)
    seeds = theirs.provenance.get("seeds", [])
    return f"{values} (seed{'s' if len(seeds) != 1 else ''} {', '.join(map(str, seeds))}): {compared.agreement.value}"


def _claim_json(r: ClaimResult, root: Path) -> dict:
    theirs, compared = comparison(r)
    return {
        "id": r.claim.id, "paper": r.claim.paper, "location": r.claim.location, "kind": r.claim.kind.value,
        "quote": r.claim.quote, "statement": r.claim.statement, "follows": r.claim.follows,
        "measures": r.claim.measures, "verdict": r.verdict.value, "note": r.note,
        "threshold": r.claim.threshold, "direction": r.claim.direction.value,
        "threshold_source": r.claim.threshold_source,
        "values": list(r.spread.values) if r.spread else [],
        "mean": r.spread.mean if r.spread else None, "std": r.spread.std if r.spread else None,
        "scale": ("log" if r.spread.on_log_scale else "linear") if r.spread else None,
        "interval": list(r.spread.interval) if r.spread and r.spread.interval else None,
        "authors_code": {"value": theirs.as_json() if theirs else None, "agreement": compared.agreement.value,
                         "note": compared.note, "difference": compared.difference,
                         "interval": list(compared.interval) if compared.interval else None},
        "runs": _run_links(r, root),
    }


def claims_json(results: Sequence[ClaimResult], header: ReportHeader, root: Path) -> dict:
    return {
        "summary": claims_summary(results), "agreement_rule": AGREEMENT_RULE,
        "command": header.command, "commit": header.commit, "date": header.date, "quick": header.quick,
        "wall_seconds": header.wall_s, "runs_measured": header.runs_measured, "failed_runs": list(header.failed_runs),
        "rejudged": header.rejudged,
        "claims": [_claim_json(r, root) for r in claims_only(results)],
        "construction_checks": [_claim_json(r, root) for r in construction_checks(results)],
    }


AGREEMENT_RULE = ("agrees / differs: whether the 95% interval of the difference between our seeds' mean and the "
                  "authors' code's (pooled two-sample t; log scale for ratios) contains 0; cannot tell: fewer than "
                  "three values in all; not run: no record of their code at this claim's set-up "
                  "(icl_gd/platform/claims/authors_values.json)")


def _md(text: str) -> str:
    return text.replace("|", "\\|")


def claims_table_markdown(results: Sequence[ClaimResult], root: Path, link_runs: bool = True) -> str:
    """The claims (paper's and ours), one row each: location, statement and quote, our value, threshold and its
    source, our verdict, and the authors' code's value with the agreement verdict."""
    lines = ["| claim | location | statement (*the paper's words*) | measured | threshold (source) | verdict | "
             "authors' code |", "|---|---|---|---|---|---|---|"]
    for r in claims_only(results):
        runs = _run_links(r, root)
        claim = f"[{r.claim.id}]({runs[0]})" if link_runs and runs else f"`{r.claim.id}`"
        verdict = f"**{r.verdict.value}**" + (f" ({_md(r.note)})" if r.note else "")
        kind = {"ours": " (ours)", "beyond": " (beyond the papers)"}.get(r.claim.kind.value, "")
        quote = f" <br>*\u201c{_md(r.claim.quote)}\u201d*" if r.claim.quote else ""
        lines.append(f"| {claim}{kind} | {r.claim.author}, {_md(r.claim.location)} | "
                     f"{_md(r.claim.statement)}{quote} | {value_text(r)} <br>*{_md(r.claim.measures)}* | "
                     f"{threshold_text(r)} <br>({_md(r.claim.threshold_source)}) | {verdict} | "
                     f"{_md(authors_text(r))} |")
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


def render_markdown(results: Sequence[ClaimResult], header: ReportHeader, root: Path) -> str:
    parts = ["# Does icl-gd reproduce the papers?", "",
             f"**{claims_summary(results)}.**" + (" (`--quick` budget: claims that need the full budget are "
                                                   "inconclusive by design.)" if header.quick else ""), "",
             f"Produced by `{header.command}` at commit `{header.commit}` on {header.date} "
             f"({header.wall_s / 60:.1f} min{_runs_text(header)}){_rejudged_text(header)}.", ""]
    if header.failed_runs:
        parts += ["Failed runs:", *[f"- {f}" for f in header.failed_runs], ""]
    parts += ["## Claims", "", claims_table_markdown(results, root), "",
              f"The authors' code column: {AGREEMENT_RULE}.", ""]
    if construction_checks(results):
        parts += ["## Construction checks", "", _CHECKS_INTRO, "", construction_table_markdown(results), ""]
    for paper in PAPERS:
        paper_results = claims_only([r for r in results if r.claim.paper == paper])
        if not paper_results:
            continue
        parts += [f"## {paper}", "", summary_line(paper_results) + ".", ""]
        for caption, path in _figures(results, paper):
            parts += [f"![{caption}]({path.relative_to(root).as_posix() if path.is_relative_to(root) else path})",
                      f"*{caption}*", ""]
        departures = _departures(paper)
        if departures:
            parts += ["Departures from the paper's set-up:", "", "| study | key | paper | ours | why |",
                      "|---|---|---|---|---|"]
            parts += [f"| {d.study} | {d.key} | {d.paper_value} | {d.ours} | {d.why} |" for d in departures]
            parts.append("")
    return "\n".join(parts)


_CSS = """body{font-family:system-ui,sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;color:#222;
overflow-wrap:anywhere}
table{border-collapse:collapse;width:100%;margin:1em 0;table-layout:fixed}th,td{border:1px solid #ccc;padding:4px 6px;
vertical-align:top;font-size:13px;overflow-wrap:anywhere}th{background:#f3f3f3;text-align:left}
tr.holds{background:#f2fbf2}tr.fails{background:#fdf0f0}tr.inconclusive{background:#fffbea}
blockquote{margin:4px 0 0 0;padding:2px 6px;border-left:3px solid #999;color:#444;font-style:italic}
.badge{display:inline-block;border-radius:9px;padding:1px 8px;margin:1px 0;font-size:12px;font-weight:600;color:#fff}
.badge.holds,.badge.agrees{background:#2e7d32}.badge.fails,.badge.differs{background:#c62828}
.badge.inconclusive,.badge.cannot-tell{background:#b8860b}.badge.not-run{background:#777}
.badge.kind{background:#1565c0}.details{font-size:12px;color:#555;margin-top:4px}
small{color:#555}figure{display:inline-block;margin:0.5em;max-width:560px}img{max-width:100%}
figcaption{font-size:13px;color:#555}"""
_COLUMNS = ('<colgroup><col style="width:13%"><col style="width:15%"><col style="width:27%"><col style="width:15%">'
            '<col style="width:12%"><col style="width:18%"></colgroup>')


def _badge(text: str, cls: str) -> str:
    return f'<span class="badge {cls.replace(" ", "-")}">{html.escape(text)}</span>'


def _html_row(r: ClaimResult, root: Path, with_authors: bool) -> str:
    esc = html.escape
    runs = _run_links(r, root)
    links = ", ".join(f'<a href="{esc(link)}">{esc(Path(link).name)}</a>' for link in runs)
    note = f"<br><small>{esc(r.note)}</small>" if r.note else ""
    quote = f"<blockquote>\u201c{esc(r.claim.quote)}\u201d</blockquote>" if r.claim.quote else ""
    follows = f'<div class="details">set-up: {esc(r.claim.follows)}</div>' if r.claim.follows else ""
    details = f'<div class="details">runs: {links}</div>' if links else ""
    kind = {"ours": " " + _badge("ours", "kind"),
            "beyond": " " + _badge("beyond the papers", "kind")}.get(r.claim.kind.value, "")
    verdicts = _badge(r.verdict.value, r.verdict.value) + note
    if with_authors:
        theirs, compared = comparison(r)
        their_values = (f"<br><small>their code: {esc(', '.join(format_value(v) for v in theirs.values))}"
                        f" ({esc(str(theirs.provenance.get('steps', '?')))} steps, "
                        f"{esc(str(theirs.provenance.get('date', '')))})</small>") if theirs and theirs.values else ""
        verdicts += ("<br>" + _badge(f"authors' code: {compared.agreement.value}", compared.agreement.value)
                     + their_values + (f"<br><small>{esc(compared.note)}</small>" if compared.note else ""))
    return (f'<tr class="{r.verdict.value}"><td><code>{esc(r.claim.id)}</code>{kind}</td>'
            f"<td>{esc(r.claim.author)}, {esc(r.claim.location)}</td>"
            f"<td>{esc(r.claim.statement)}{quote}{follows}{details}</td>"
            f"<td>{esc(value_text(r))}<br><small><i>{esc(r.claim.measures)}</i></small></td>"
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
            f"{esc(_rejudged_text(header))}.</p>"]
    if header.failed_runs:
        body.append("<p>Failed runs:</p><ul>" + "".join(f"<li>{esc(f)}</li>" for f in header.failed_runs)
                    + "</ul>")
    body.append('<h2>Claims</h2><table id="claims">' + _COLUMNS + head.format("verdicts: ours, the authors' code")
                + "<tbody>" + "".join(_html_row(r, root, True) for r in claims_only(results)) + "</tbody></table>"
                + f"<p><small>The authors' code: {esc(AGREEMENT_RULE)}.</small></p>")
    if construction_checks(results):
        body.append(f"<h2>Construction checks</h2><p>{esc(_CHECKS_INTRO)}</p>"
                    '<table id="construction-checks">' + _COLUMNS + head.format("verdict") + "<tbody>"
                    + "".join(_html_row(r, root, False) for r in construction_checks(results)) + "</tbody></table>")
    for paper in PAPERS:
        paper_results = claims_only([r for r in results if r.claim.paper == paper])
        if not paper_results:
            continue
        body.append(f"<h2>{esc(paper)}</h2><p>{esc(summary_line(paper_results))}.</p>")
        for caption, path in _figures(results, paper):
            data = base64.b64encode(path.read_bytes()).decode("ascii")
            body.append(f'<figure><img alt="{esc(caption)}" src="data:image/png;base64,{data}">'
                        f"<figcaption>{esc(caption)}</figcaption></figure>")
        departures = _departures(paper)
        if departures:
            body.append("<h3>Departures from the paper's set-up</h3><table><tr><th>study</th><th>key</th>"
                        "<th>paper</th><th>ours</th><th>why</th></tr>"
                        + "".join(f"<tr><td>{esc(d.study)}</td><td>{esc(d.key)}</td><td>{esc(d.paper_value)}</td>"
                                  f"<td>{esc(d.ours)}</td><td>{esc(d.why)}</td></tr>" for d in departures)
                        + "</table>")
    return ("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>icl-gd: reproduction report"
            f"</title><style>{_CSS}</style></head><body>" + "\n".join(body) + "</body></html>\n")


README_START = "<!-- claims-table:start (written by icl-gd reproduce --update-readme; do not edit by hand) -->"
README_END = "<!-- claims-table:end -->"


def _runs_text(header: ReportHeader) -> str:
    return f"; {header.runs_measured}" if header.runs_measured else ""


def _rejudged_text(header: ReportHeader) -> str:
    return f"; verdicts decided again from its claims.json by {header.rejudged}" if header.rejudged else ""


# Where ``--update-readme README`` keeps the table's claims.json (per-seed values), relative to the README's folder,
# so ``--rejudge`` can redo the authors' code column when their records grow, without the runs.
README_CLAIMS_JSON = Path("docs") / "claims-table.json"


def readme_claims_json(readme: Path) -> Path:
    return Path(readme).parent / README_CLAIMS_JSON


def readme_block(results: Sequence[ClaimResult], header: ReportHeader) -> str:
    """The README's "Does it reproduce?" block: provenance, summary line, the claims table and the construction
    checks' (no run links: the runs live in the report's directory, not in the repository)."""
    budget = " (`--quick` budget: claims that need the full budget are inconclusive by design)" if header.quick else ""
    data = README_CLAIMS_JSON.as_posix()
    runs = f" ({header.runs_measured})" if header.runs_measured else ""
    lines = [README_START, "", f"Generated by `{header.command}` at commit `{header.commit}` on {header.date}{budget}"
             f"{runs}{_rejudged_text(header)}. Per-seed values: [{data}]({data}) (`icl-gd reproduce --rejudge {data} "
             "--update-readme README.md` decides the verdicts again from them, against today's records of the "
             "authors' code).",
             "", f"**{claims_summary(results)}.**", "", claims_table_markdown(results, Path("."), link_runs=False), "",
             f"The authors' code column: {AGREEMENT_RULE}.", ""]
    if construction_checks(results):
        lines += [CONSTRUCTION_HEADING, "", _CHECKS_INTRO, "", construction_table_markdown(results), ""]
    return "\n".join(lines + [README_END])


CONSTRUCTION_HEADING = "### Construction checks"


def update_readme(readme: Path, block: str) -> None:
    """Replace the claims-table block of ``readme`` (markers included) with ``block`` (atomically)."""
    replace_marked_block(readme, README_START, README_END, block, "--update-readme")


def write_report(root: Path, results: Sequence[ClaimResult], header: ReportHeader) -> None:
    """Write ``claims.json``, ``report.md`` and ``report.html`` under ``root`` (each atomically)."""
    write_json(root / "claims.json", claims_json(results, header, root))
    atomic_write_text(root / "report.md", render_markdown(results, header, root))
    atomic_write_text(root / "report.html", render_html(results, header, root))
