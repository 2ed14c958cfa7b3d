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


def format_value(value: float) -> str:
    if not math.isfinite(value):
        return str(value)
    return f"{value:.3g}" if abs(value) >= 1e-3 or value == 0 else f"{value:.2e}"


def value_text(result: ClaimResult) -> str:
    """``mean ± std (n seeds, 95% CI [lo, hi])`` (geometric ``mean ×/÷ factor`` for log-scale statistics), or the
    one value, or ``-`` when nothing was measured."""
    spread = result.spread
    if spread is None:
        return "-"
    if len(spread.values) == 1:
        return format_value(spread.values[0])
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


def summary_line(results: Sequence[ClaimResult]) -> str:
    counts = {v: sum(r.verdict is v for r in results) for v in Verdict}
    return (f"{len(results)} claim{'s' if len(results) != 1 else ''}: {counts[Verdict.HOLDS]} hold, {counts[Verdict.FAILS]} fail, "
            f"{counts[Verdict.INCONCLUSIVE]} inconclusive")


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


def claims_json(results: Sequence[ClaimResult], header: ReportHeader, root: Path) -> dict:
    return {
        "summary": summary_line(results),
        "command": header.command, "commit": header.commit, "date": header.date, "quick": header.quick,
        "wall_seconds": header.wall_s, "failed_runs": list(header.failed_runs),
        "claims": [{
            "id": r.claim.id, "paper": r.claim.paper, "source": r.claim.source, "statement": r.claim.statement,
            "measures": r.claim.measures, "verdict": r.verdict.value, "note": r.note,
            "threshold": r.claim.threshold, "direction": r.claim.direction.value,
            "values": list(r.spread.values) if r.spread else [],
            "mean": r.spread.mean if r.spread else None, "std": r.spread.std if r.spread else None,
            "scale": ("log" if r.spread.on_log_scale else "linear") if r.spread else None,
            "interval": list(r.spread.interval) if r.spread and r.spread.interval else None,
            "runs": _run_links(r, root),
        } for r in results],
    }


def claims_table_markdown(results: Sequence[ClaimResult], root: Path, link_runs: bool = True) -> str:
    lines = ["| claim | source | statement | measured | threshold | verdict |",
             "|---|---|---|---|---|---|"]
    for r in results:
        runs = _run_links(r, root)
        claim = f"[{r.claim.id}]({runs[0]})" if link_runs and runs else f"`{r.claim.id}`"
        verdict = f"**{r.verdict.value}**" + (f" ({r.note})" if r.note else "")
        paper = "von Oswald" if r.claim.paper == VON_OSWALD else "Irie"
        lines.append(f"| {claim} | {paper}, {r.claim.source} | {r.claim.statement} | {value_text(r)} "
                     f"<br>*{r.claim.measures}* | {threshold_text(r)} | {verdict} |")
    return "\n".join(lines)


def _departures(paper: str) -> list[Departure]:
    return [d for d in DEPARTURES if d.paper == paper]


def render_markdown(results: Sequence[ClaimResult], header: ReportHeader, root: Path) -> str:
    parts = ["# Does icl-gd reproduce the papers?", "",
             f"**{summary_line(results)}.**" + (" (`--quick` budget: claims that need the full budget are "
                                                 "inconclusive by design.)" if header.quick else ""), "",
             f"Produced by `{header.command}` at commit `{header.commit}` on {header.date} "
             f"({header.wall_s / 60:.1f} min).", ""]
    if header.failed_runs:
        parts += ["Failed runs:", *[f"- {f}" for f in header.failed_runs], ""]
    parts += ["## Claims", "", claims_table_markdown(results, root), ""]
    for paper in PAPERS:
        paper_results = [r for r in results if r.claim.paper == paper]
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


_CSS = """body{font-family:system-ui,sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;width:100%;margin:1em 0}th,td{border:1px solid #ccc;padding:4px 8px;vertical-align:top;
font-size:14px}th{background:#f3f3f3}.holds{background:#e3f6e3}.fails{background:#fbe0e0}
.inconclusive{background:#fff6d6}figure{display:inline-block;margin:0.5em;max-width:560px}img{max-width:100%}
figcaption{font-size:13px;color:#555}"""


def render_html(results: Sequence[ClaimResult], header: ReportHeader, root: Path) -> str:
    esc = html.escape
    rows = []
    for r in results:
        runs = ", ".join(f'<a href="{esc(link)}">{esc(Path(link).name)}</a>' for link in _run_links(r, root))
        note = f"<br><small>{esc(r.note)}</small>" if r.note else ""
        rows.append(
            f'<tr class="{r.verdict.value}"><td><code>{esc(r.claim.id)}</code></td>'
            f"<td>{esc(r.claim.paper)}, {esc(r.claim.source)}</td><td>{esc(r.claim.statement)}</td>"
            f"<td>{esc(value_text(r))}<br><small><i>{esc(r.claim.measures)}</i></small></td>"
            f"<td>{esc(threshold_text(r))}</td><td><b>{r.verdict.value}</b>{note}</td><td>{runs}</td></tr>")
    body = ["<h1>Does icl-gd reproduce the papers?</h1>",
            f'<p id="summary"><b>{esc(summary_line(results))}.</b>'
            + (" (--quick budget: claims that need the full budget are inconclusive by design.)"
               if header.quick else "") + "</p>",
            f"<p>Produced by <code>{esc(header.command)}</code> at commit <code>{esc(header.commit)}</code> on "
            f"{esc(header.date)} ({header.wall_s / 60:.1f} min).</p>"]
    if header.failed_runs:
        body.append("<p>Failed runs:</p><ul>" + "".join(f"<li>{esc(f)}</li>" for f in header.failed_runs)
                    + "</ul>")
    body.append('<h2>Claims</h2><table id="claims"><thead><tr><th>claim</th><th>source</th><th>statement</th>'
                "<th>measured</th><th>threshold</th><th>verdict</th><th>runs</th></tr></thead><tbody>"
                + "".join(rows) + "</tbody></table>")
    for paper in PAPERS:
        paper_results = [r for r in results if r.claim.paper == paper]
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


def readme_block(results: Sequence[ClaimResult], header: ReportHeader) -> str:
    """The README's "Does it reproduce?" block: provenance, summary line and the claims table (no run links: the
    runs live in the report's directory, not in the repository)."""
    budget = " (`--quick` budget: claims that need the full budget are inconclusive by design)" if header.quick else ""
    return "\n".join([README_START, "",
                      f"Generated by `{header.command}` at commit `{header.commit}` on {header.date}{budget}.", "",
                      f"**{summary_line(results)}.**", "", claims_table_markdown(results, Path("."), link_runs=False),
                      "", README_END])


def update_readme(readme: Path, block: str) -> None:
    """Replace the claims-table block of ``readme`` (markers included) with ``block`` (atomically)."""
    replace_marked_block(readme, README_START, README_END, block, "--update-readme")


def write_report(root: Path, results: Sequence[ClaimResult], header: ReportHeader) -> None:
    """Write ``claims.json``, ``report.md`` and ``report.html`` under ``root`` (each atomically)."""
    write_json(root / "claims.json", claims_json(results, header, root))
    atomic_write_text(root / "report.md", render_markdown(results, header, root))
    atomic_write_text(root / "report.html", render_html(results, header, root))
