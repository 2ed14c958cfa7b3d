"""What the report says of each claim and of each paper, in the words every format shares: a claim's value,
threshold and the authors' code's column, the sections and counts of the headline (``claims.json``'s summary)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from icl_gd.claims.authors import (Agreement, AuthorsValue, Comparison, agreement, authors_values, compared,
                                   judged_at_other_setups)
from icl_gd.claims.claim import FORM_ORDER, Form, Kind
from icl_gd.claims.departures import IRIE, VON_OSWALD
from icl_gd.claims.formatting import format_value
from icl_gd.claims.readings import findings, findings_text
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


def flip_text(result: ClaimResult) -> str:
    """Where the verdict would change ("flip point: holds for a bar above X, fails for a bar below Y (now T)"), or
    "" without an interval."""
    flip = result.flip
    return f"flip point: {flip.text()}" if flip is not None else ""


def draws_note(result: ClaimResult) -> str:
    """The replicates' test draws, in words, where they are shared (independent ones need no warning)."""
    return f"test draw {result.draws}" if result.draws.startswith(("shared", "partly")) else ""


def sentence_of(result: ClaimResult, results: Sequence[ClaimResult]) -> Sentence:
    return Sentence(result, tuple(parts_of(result, results)))


def claims_only(results: Sequence[ClaimResult]) -> list[ClaimResult]:
    """The papers' claims, ours and beyond the papers, without the construction checks."""
    return [r for r in results if not r.claim.is_construction]


def construction_checks(results: Sequence[ClaimResult]) -> list[ClaimResult]:
    return [r for r in results if r.claim.is_construction]


def part_ids(results: Sequence[ClaimResult]) -> set[str]:
    """The ids named as a part of a sentence whose claim is present."""
    return {part for r in results for part in r.claim.parts}


def primaries(results: Sequence[ClaimResult]) -> list[ClaimResult]:
    """Each sentence once: the claims that are neither a variant nor a part of another present in ``results``."""
    present, parts = {r.claim.id for r in results}, part_ids(results)
    return [r for r in claims_only(results) if r.claim.variant_of not in present and r.claim.id not in parts]


def variants(result: ClaimResult, results: Sequence[ClaimResult]) -> list[ClaimResult]:
    return [r for r in results if r.claim.variant_of == result.claim.id]


def parts_of(result: ClaimResult, results: Sequence[ClaimResult]) -> list[ClaimResult]:
    """The results of the sentence's other conditions, in the order the claim names them."""
    by_id = {r.claim.id: r for r in results}
    return [by_id[p] for p in result.claim.parts if p in by_id]


@dataclass(frozen=True)
class Sentence:
    """One counted sentence: its claim's result (``head``) and its parts'; the sentence holds when every condition
    holds, fails when one fails, has no valid reference when one has none and none fails, and is inconclusive
    otherwise. ``form``: the most demanding of its conditions' forms (``claim.FORM_ORDER``)."""

    head: ClaimResult
    parts: tuple[ClaimResult, ...] = ()

    @property
    def conditions(self) -> tuple[ClaimResult, ...]:
        return (self.head, *self.parts)

    @property
    def verdict(self) -> Verdict:
        """As the figures show it (each condition's figure reading where it has one): what the headline counts."""
        return _combined([r.headline_verdict for r in self.conditions])

    @property
    def stated_verdict(self) -> Verdict:
        """At each condition's stated tolerance (its rule), the reading the authors' code is compared on."""
        return _combined([r.verdict for r in self.conditions])

    @property
    def note(self) -> str:
        """For a sentence of several conditions: each condition's verdict."""
        if not self.parts:
            return ""
        return "its conditions: " + ", ".join(f"{r.claim.id} {r.headline_verdict.value}" for r in self.conditions)

    @property
    def form(self) -> Form:
        return min((r.claim.form for r in self.conditions), key=FORM_ORDER.index)

    @property
    def unsettled_at_maximum(self) -> bool:
        """Inconclusive with no more seeds planned for any inconclusive condition (each at its maximum; the maximum
        caps the seeds run, those whose training failed included)."""
        return self.verdict is Verdict.INCONCLUSIVE and all(
            r.spread is not None and len(r.spread.values) >= r.claim.seed_limit
            for r in self.conditions if r.headline_verdict is Verdict.INCONCLUSIVE)


def _combined(verdicts: list[Verdict]) -> Verdict:
    """A sentence of several conditions: fails when one fails, holds when all hold."""
    if Verdict.FAILS in verdicts:
        return Verdict.FAILS
    if all(v is Verdict.HOLDS for v in verdicts):
        return Verdict.HOLDS
    return Verdict.NO_VALID_REFERENCE if Verdict.NO_VALID_REFERENCE in verdicts else Verdict.INCONCLUSIVE


def sentences(results: Sequence[ClaimResult], members: Sequence[ClaimResult] | None = None) -> list[Sentence]:
    """The counted sentences of ``members`` (default every counted claim of ``results``) with their parts."""
    return [Sentence(r, tuple(parts_of(r, results))) for r in (primaries(results) if members is None else members)]


def _counts(counted: Sequence[ClaimResult] | Sequence[Sentence]) -> dict[str, int]:
    return {v.value: sum(r.verdict is v for r in counted) for v in Verdict}


FORM_GROUPS = ("matches or aligns", "is not", "direction", "a stated size")


def by_form(counted: Sequence[Sentence]) -> dict[str, dict[str, int]]:
    """The sentences' counts by the group of their form (``Form.group``): what kind of statement each verdict is
    about ("matches or aligns" weighs more than a direction)."""
    groups: dict[str, list[Sentence]] = {}
    for sentence in counted:
        groups.setdefault(sentence.form.group, []).append(sentence)
    return {g: {"claims": len(groups[g]), **_counts(groups[g])} for g in (*FORM_GROUPS, "identity") if g in groups}


def form_text(counted: Sequence[Sentence]) -> str:
    """"of the 14 'matches or aligns' sentences: 9 hold, 3 fail, 2 inconclusive; ..." """
    parts = []
    for group, c in by_form(counted).items():
        parts.append(f"of the {c['claims']} '{group}' sentence{'s' if c['claims'] != 1 else ''}: {c['holds']} hold, "
                     f"{c['fails']} fail, {c['inconclusive']} inconclusive"
                     + (f", {c['no valid reference']} no valid reference" if c["no valid reference"] else ""))
    return "; ".join(parts)


def summary_line(results: Sequence[ClaimResult] | Sequence[Sentence], noun: str = "claim") -> str:
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
        """The section's claims, each sentence once (variants and parts are sub-rows of theirs)."""
        return [r for r in primaries(results) if r.claim.kind is self.kind
                and (self.paper is None or r.claim.paper == self.paper)]


SECTIONS = (Section("von-oswald", VON_OSWALD, Kind.PAPER, VON_OSWALD), Section("irie", IRIE, Kind.PAPER, IRIE),
            Section("ours", "Our own checks", Kind.OURS), Section("beyond", "Beyond the papers", Kind.BEYOND))
SECTION_INTRO = {
    "ours": "Checks the papers do not make (our controls, our extensions, our readings of a set-up the paper does "
            "not use): outside the papers' counts.",
    "beyond": "Statements of later work (quoted, with their paper) or ours beyond both papers: outside the papers' "
              "counts."}


def paper_summary(results: Sequence[ClaimResult], paper: str) -> dict:
    """One paper's headline: its claims (each sentence once) by verdict; of those with the authors' code run at the
    claim's set-up, how many reach the same verdict in both; which fail in both, only in icl-gd, only in theirs (the
    other code holding), and which fail in one code where the other is inconclusive."""
    members = [r for r in primaries(results) if r.claim.kind is Kind.PAPER and r.claim.paper == paper]
    counted = sentences(results, members)
    # a condition two sentences share (e.g. the five-layer GD++ loss, part of two sentences) is one run of theirs
    conditions = list({c.claim.id: c for s in counted for c in s.conditions}.values())
    run = [(r, comparison(r)[1]) for r in conditions if compared(comparison(r)[0]) and r.at_full_setup]
    ours_fail = {r.claim.id for r, _ in run if r.verdict is Verdict.FAILS}
    theirs_fail = {r.claim.id for r, c in run if c.verdict is Verdict.FAILS}
    # a verdict one code has not settled (e.g. one seed of theirs: no interval) is not a disagreement
    ours_open = {r.claim.id for r, _ in run if r.verdict is Verdict.INCONCLUSIVE}
    theirs_open = {r.claim.id for r, c in run if c.verdict is Verdict.INCONCLUSIVE}
    order = [r.claim.id for r, _ in run]
    inconclusive = [s for s in counted if s.verdict is Verdict.INCONCLUSIVE]
    stated = {v.value: sum(s.stated_verdict is v for s in counted) for v in Verdict}
    return {"claims": len(counted), **_counts(counted), "at_stated_tolerance": stated,
            "findings": findings(conditions),
            "unsettled_at_maximum": sum(s.unsettled_at_maximum for s in inconclusive),
            "unsettled_more_seeds_planned": sum(not s.unsettled_at_maximum for s in inconclusive),
            "by_form": by_form(counted), "authors_code_run": len(run),
            "same_verdict": sum(r.verdict is c.verdict for r, c in run),
            "fails_in_both": [i for i in order if i in ours_fail & theirs_fail],
            "fails_only_in_icl_gd": [i for i in order if i in ours_fail - theirs_fail - theirs_open],
            "fails_only_in_theirs": [i for i in order if i in theirs_fail - ours_fail - ours_open],
            "fails_in_icl_gd_theirs_inconclusive": [i for i in order if i in ours_fail & theirs_open],
            "fails_in_theirs_icl_gd_inconclusive": [i for i in order if i in theirs_fail & ours_open]}


def paper_headline(results: Sequence[ClaimResult], paper: str) -> str:
    """``paper_summary`` as a sentence."""
    s = paper_summary(results, paper)
    members = [r for r in primaries(results) if r.claim.kind is Kind.PAPER and r.claim.paper == paper]
    counted = sentences(results, members)
    total, counts = summary_line(counted).split(": ", 1)
    text = f"{total} judged as their figures show them: {counts}{unsettled_text(s)}; {form_text(counted)}"
    stated = s["at_stated_tolerance"]
    text += (f"; at the stated tolerances: {stated['holds']} hold, {stated['fails']} fail, "
             f"{stated['inconclusive']} inconclusive; {findings_text(s['findings'])}")
    if s["authors_code_run"]:
        text += (f"; the authors' code run for {s['authors_code_run']} of their conditions (at the stated "
                 f"tolerances): the same verdict in {s['same_verdict']}")
        lists = [("fail in both codes", s["fails_in_both"]), ("fail only in icl-gd", s["fails_only_in_icl_gd"]),
                 ("fail only in theirs", s["fails_only_in_theirs"])]
        text += "".join(f"; {name}: {', '.join(ids) if ids else 'none'}" for name, ids in lists)
        open_lists = [("fail in icl-gd, theirs inconclusive", s["fails_in_icl_gd_theirs_inconclusive"]),
                      ("fail in theirs, icl-gd inconclusive", s["fails_in_theirs_icl_gd_inconclusive"])]
        text += "".join(f"; {name}: {', '.join(ids)}" for name, ids in open_lists if ids)
    return text


def unsettled_text(summary: dict) -> str:
    """"(2 unsettled at their maximum of seeds, 3 with more seeds planned)" for a paper's inconclusive ones."""
    at_max, more = summary["unsettled_at_maximum"], summary["unsettled_more_seeds_planned"]
    if not at_max and not more:
        return ""
    return f" ({at_max} unsettled at their maximum of seeds, {more} with more seeds planned)"


def section_line(section: Section, results: Sequence[ClaimResult]) -> str:
    """A section's headline: a paper's (``paper_headline``), or the counts of ours / beyond the papers."""
    if section.paper:
        return paper_headline(results, section.paper)
    counted = sentences(results, section.members(results))
    return summary_line(counted, "check" if section.kind is Kind.OURS else "claim")


def claims_summary(results: Sequence[ClaimResult]) -> str:
    """The headline: each paper's claims (each sentence once), then ours and beyond the papers, then the
    construction checks, each counted on its own."""
    parts = []
    for section in SECTIONS:
        members = section.members(results)
        if not members:
            continue
        counted = sentences(results, members)
        if section.paper:
            total, counts = summary_line(counted).split(": ", 1)
            parts.append(f"{section.title}: {total} judged: {counts}")
        else:
            parts.append(f"{section.title}: {summary_line(counted, 'check' if section.kind is Kind.OURS else 'claim')}")
    checks = construction_checks(results)
    if checks:
        parts.append(summary_line(checks, "construction check"))
    return "; ".join(parts) if parts else summary_line([])


def comparison(result: ClaimResult) -> tuple[AuthorsValue | None, Comparison]:
    """Their record and the agreement with it; runs at another set-up than the record's (``--smoke``'s, another
    data set among them) are not compared with it."""
    theirs = authors_values().get(result.claim.id)
    if theirs is not None and not result.at_full_setup:
        return theirs, Comparison(Agreement.NOT_RUN, "these --smoke runs are not the set-up of their recorded run "
                                                     "(the full budget's)")
    return theirs, agreement(result.claim, result.spread, theirs, [i for i, _ in result.failed_seeds])


def their_values(theirs: AuthorsValue) -> str:
    values = ", ".join(format_value(v) for v in theirs.values)
    seeds = theirs.provenance.get("seeds", [])
    return f"{values} (seed{'s' if len(seeds) != 1 else ''} {', '.join(map(str, seeds))})"


def other_setups_text(result: ClaimResult) -> str:
    """Their runs at other set-ups than the claim's (e.g. their notebook's length): values and their verdict under
    the claim's rule, marked as not compared ('' when there are none)."""
    theirs = authors_values().get(result.claim.id)
    return "; ".join(
        f"at {other.provenance.get('steps', '?')} steps: {their_values(other)}, theirs {verdict.value}"
        + (f" ({note})" if note else "") + " (another set-up: not compared)"
        for other, verdict, note in judged_at_other_setups(result.claim, theirs))


def authors_text(result: ClaimResult) -> str:
    """Their values (per seed), their verdict under the claim's rule and the agreement verdict with its reason;
    then their runs at other set-ups, not compared."""
    theirs, compared_ = comparison(result)
    others = other_setups_text(result)
    others = f". Their code {others}" if others else ""
    if theirs is None or not theirs.values:
        return compared_.agreement.value + others
    if compared_.verdict is None:
        at = "" if theirs.same_setup else f" at {theirs.provenance.get('steps', '?')} steps"
        return (f"{their_values(theirs)}{at}: {compared_.agreement.value}"
                + (f" ({compared_.note})" if compared_.note else "") + others)
    verdict = compared_.verdict.value + (f" ({compared_.verdict_note})" if compared_.verdict_note else "")
    return (f"{their_values(theirs)}: theirs {verdict}; {compared_.agreement.value}"
            + (f" ({compared_.note})" if compared_.note else "") + f"; {raw_output_text(theirs)}" + others)


def raw_output_text(theirs: AuthorsValue) -> str:
    """Where the driver's raw output of a record compared for agreement is kept, or that it has none."""
    kept = theirs.provenance.get("raw_output") or []
    return (f"their driver's raw output: {', '.join(kept)}" if kept else
            "no raw driver output kept (the values as recorded in icl_gd/claims/authors_values.json)")


def summary_json(results: Sequence[ClaimResult]) -> dict:
    """``claims.json``'s summary: the headline, each paper's counts (``by_paper``), ours, beyond, the checks."""
    return {"text": claims_summary(results),
            "by_paper": {s.paper: paper_summary(results, s.paper) for s in SECTIONS
                         if s.paper and s.members(results)},
            "ours": {"claims": len(m := sentences(results, SECTIONS[2].members(results))), **_counts(m),
                     "by_form": by_form(m)},
            "beyond": {"claims": len(m := sentences(results, SECTIONS[3].members(results))), **_counts(m),
                       "by_form": by_form(m)},
            "variants": sum(1 for r in claims_only(results) if r.claim.variant_of),
            "parts": len(part_ids(claims_only(results)) & {r.claim.id for r in results}),
            "construction_checks": {"checks": len(c := construction_checks(results)), **_counts(c)}}


AGREEMENT_RULE = ("their verdict: the claim's rule on their seeds; agrees / differs: whether the 95% interval of "
                  "the difference between our seeds' mean and the authors' code's (pooled two-sample t; log scale for "
                  "ratios) contains 0 or lies within the claim's margin; a value that is not finite on either side "
                  "differs; seeds whose training failed (the claim's declared test) are left out of both; cannot "
                  "tell: fewer than three values in all, outside the margin, or a NaN; not run: no record of their "
                  "code at this claim's set-up (icl_gd/claims/authors_values.json)")


def counted_conditions(results: Sequence[ClaimResult]) -> list[tuple[str, list[ClaimResult]]]:
    """Each paper's counted sentences' conditions, each once (a sentence's head and its parts)."""
    out = []
    for section in SECTIONS:
        if section.paper and (members := section.members(results)):
            conditions = {c.claim.id: c for s in sentences(results, members) for c in s.conditions}
            out.append((section.paper, list(conditions.values())))
    return out
