"""The reproduction report as one self-contained HTML page: every figure embedded (base64 PNG), so it can be
mailed or archived as one file."""

from __future__ import annotations

import html
from collections.abc import Sequence
from pathlib import Path

from icl_gd.claims.report_markdown import (CHECKS_INTRO, VARIANTS, departures_of, figures_of, rejudged_text,
                                           runs_text)
from icl_gd.claims.links import PageLinks, embedded_png
from icl_gd.claims.readings import counted_note, reading_lines
from icl_gd.claims.summary import (AGREEMENT_RULE, SECTION_INTRO, SECTIONS, ClaimResult, ReportHeader, claims_summary,
                                   comparison, construction_checks, draws_note, flip_text,
                                   other_setups_text, parts_of, section_line, sentence_of, their_values,
                                   threshold_text, value_text, variants)
from icl_gd.claims.kept import kept_text, quick_agreement


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


def _html_row(r: ClaimResult, links: PageLinks, with_authors: bool, sub: str = "",
              results: Sequence[ClaimResult] = ()) -> str:
    """One row; ``sub``: "variant" or "part" for a sub-row; a sentence's own row shows the sentence's verdict."""
    variant = bool(sub)
    esc = html.escape
    runs = links.runs(r)
    links = ", ".join(f'<a href="{esc(link)}">{esc(Path(link).name)}</a>' for link in runs)
    quote = f"<blockquote>\u201c{esc(r.claim.quote)}\u201d</blockquote>" if r.claim.quote and not variant else ""
    follows = f'<div class="details">set-up: {esc(r.claim.follows)}</div>' if r.claim.follows else ""
    details = f'<div class="details">runs: {links}</div>' if links else ""
    kind = {"ours": " " + _badge("ours", "kind"),
            "beyond": " " + _badge("beyond the papers", "kind")}.get(r.claim.kind.value, "")
    kind += " " + _badge(sub, "kind") if sub else ""
    counted = r.headline_verdict.value  # the figure's reading where the claim has one, then the stated tolerance's
    verdicts = _badge(counted, counted) + (f"<br><small>{esc(counted_note(r))}</small>" if counted_note(r) else "")
    verdicts += "".join(f'<div class="details">{esc(line)}</div>' for line in reading_lines(r))
    sentence = sentence_of(r, results) if not sub else None
    if sentence is not None and sentence.parts:
        verdicts = (_badge(f"sentence: {sentence.verdict.value}", sentence.verdict.value)
                    + f"<br><small>{esc(sentence.note)}</small><br>this condition: " + verdicts)
    if flip_text(r):
        verdicts += f'<div class="details">{esc(flip_text(r))}</div>'
    if kept_text(r):
        verdicts += f'<div class="details">{esc(kept_text(r))}</div>'
    draws = f'<div class="details">{esc(draws_note(r))}</div>' if draws_note(r) else ""
    if with_authors:
        theirs, compared_ = comparison(r)
        recorded = (f"<br><small>their code: {esc(their_values(theirs))}"
                        f" ({esc(str(theirs.provenance.get('steps', '?')))} steps, "
                        f"{esc(str(theirs.provenance.get('date', '')))})</small>") if theirs and theirs.values else ""
        their_verdict = ("<br>" + _badge(f"theirs: {compared_.verdict.value}", compared_.verdict.value)
                         + (f"<br><small>{esc(compared_.verdict_note)}</small>" if compared_.verdict_note else "")
                         ) if compared_.verdict else ""
        verdicts += (their_verdict + "<br>" + _badge(f"authors' code: {compared_.agreement.value}",
                                                     compared_.agreement.value)
                     + recorded + (f"<br><small>{esc(compared_.note)}</small>" if compared_.note else "")
                     + (f"<br><small>their code {esc(others)}</small>" if (others := other_setups_text(r)) else ""))
    arrow = "↳ " if variant else ""
    return (f'<tr class="{r.verdict.value.replace(" ", "-")}{" variant" if variant else ""}"><td>{arrow}'
            f"<code>{esc(r.claim.id)}</code>{kind}</td>"
            f"<td>{esc(r.claim.author)}, {esc(r.claim.location)}</td>"
            f"<td>{esc(r.claim.statement)}{quote}{follows}{details}</td>"
            f"<td>{esc(value_text(r))}<br><small><i>{esc(r.claim.measures)}</i></small>"
            + (f'<div class="details">{esc(r.details)}</div>' if r.details else "") + draws + "</td>"
            f"<td>{esc(threshold_text(r))}<br><small>{esc(r.claim.threshold_source)}; form: "
            f"{esc(r.claim.form.value)}</small></td>"
            f"<td>{verdicts}</td></tr>")


def render_html(results: Sequence[ClaimResult], header: ReportHeader, links: PageLinks) -> str:
    esc = html.escape
    head = ("<thead><tr><th>claim</th><th>location</th><th>statement, the paper's words</th><th>measured</th>"
            "<th>threshold (source)</th><th>{}</th></tr></thead>")
    body = ["<h1>Does icl-gd reproduce the papers?</h1>",
            f'<p id="summary"><b>{esc(claims_summary(results))}.</b>'
            + (" (--smoke budget: claims that need the full budget are inconclusive by design.)"
               if header.quick else "")
            + (f" {esc(quick_agreement(list(results)))}." if header.quick and quick_agreement(list(results)) else "")
            + "</p>",
            f"<p>Produced by <code>{esc(header.command)}</code> at commit <code>{esc(header.commit)}</code> on "
            f"{esc(header.date)} ({header.wall_s / 60:.1f} min{esc(runs_text(header))})"
            f"{esc(rejudged_text(header))}.</p>",
            '<p>The papers\' figures beside ours, with their claims: <a href="figures.html">figures.html</a>.</p>',
            f"<p><small>The authors' code: {esc(AGREEMENT_RULE)}. {esc(VARIANTS)}</small></p>"]
    if header.failed_runs:
        body.append("<p>Failed runs:</p><ul>" + "".join(f"<li>{esc(f)}</li>" for f in header.failed_runs)
                    + "</ul>")
    for section in SECTIONS:
        members = section.members(results)
        if not members:
            continue
        line = section_line(section, results)
        rows = "".join(_html_row(r, links, True, results=results)
                       + "".join(_html_row(p, links, True, "part") for p in parts_of(r, results))
                       + "".join(_html_row(v, links, True, "variant") for v in variants(r, results))
                       + "".join(_html_row(v, links, True, "variant of a part") for p in parts_of(r, results)
                                 for v in variants(p, results)) for r in members)
        intro = f"<p>{esc(SECTION_INTRO[section.key])}</p>" if section.key in SECTION_INTRO else ""
        body.append(f'<h2>{esc(section.title)}</h2><p class="headline"><b>{esc(line)}.</b></p>{intro}'
                    f'<table id="claims-{section.key}">' + _COLUMNS
                    + head.format("verdicts: ours, the authors' code") + f"<tbody>{rows}</tbody></table>")
        if not section.paper:
            continue
        for caption, path in figures_of(results, section.paper):
            body.append(f'<figure><img alt="{esc(caption)}" src="{embedded_png(path)}">'
                        f"<figcaption>{esc(caption)}</figcaption></figure>")
        departures = departures_of(section.paper)
        if departures:
            body.append("<h3>Departures from the paper's set-up</h3><table><tr><th>study</th><th>key</th>"
                        "<th>paper</th><th>ours</th><th>why</th></tr>"
                        + "".join(f"<tr><td>{esc(d.study)}</td><td>{esc(d.key)}</td><td>{esc(d.paper_value)}</td>"
                                  f"<td>{esc(d.ours)}</td><td>{esc(d.why)}</td></tr>" for d in departures)
                        + "</table>")
    if construction_checks(results):
        body.append(f"<h2>Construction checks</h2><p>{esc(CHECKS_INTRO)}</p>"
                    '<table id="construction-checks">' + _COLUMNS + head.format("verdict") + "<tbody>"
                    + "".join(_html_row(r, links, False) for r in construction_checks(results)) + "</tbody></table>")
    return ("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>icl-gd: reproduction report"
            f"</title><style>{_CSS}</style></head><body>" + "\n".join(body) + "</body></html>\n")


