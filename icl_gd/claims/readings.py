"""The two readings of a counted sentence in words and counts (docs/verdicts.md, "Two readings of a sentence"): as
its figure shows it (what the headline counts), at the measurement's precision (findings beside the headline), and
the side of every fail and finding."""

from __future__ import annotations

from collections.abc import Sequence

from icl_gd.claims.claim import Direction, Form
from icl_gd.claims.formatting import format_value
from icl_gd.claims.verdict import ClaimResult, FigureResult, Spread, Verdict


def _interval(spread: Spread | None, percent: bool = False) -> str:
    if spread is None or not spread.values:
        return "no value"
    show = (lambda v: f"{v:+.2%}") if percent else format_value
    interval = spread.interval
    return show(spread.mean) + (f" [{show(interval[0])}, {show(interval[1])}]" if interval else " (one seed)")


def precision_text(figure: FigureResult) -> str:
    """"+0.17% [+0.13%, +0.20%], model worse: ... (differs: finer than the figure shows)"."""
    if figure.signed is None:
        return "no value"
    shown = _interval(figure.signed, percent=figure.reading.equality)
    what = "the signed gap" if figure.reading.equality else "the cosine"
    differs = ("; the interval excludes 0: finer than the figure shows" if figure.finer_than_figure else
               "; the interval excludes 0" if figure.differs else "")
    return f"{what} {shown}, {figure.side}{differs}"


def figure_text(figure: FigureResult) -> str:
    """The figure reading in one line: its verdict, value in units of the figure's resolution, flip point, axis."""
    flip = figure.flip
    flips = f"; {flip.text()}" if flip else ""
    return (f"as the figure shows it: {_interval(figure.spread)} of the figure's "
            f"resolution{flips} [{figure.reading.axis.text()}]")


def side_of(result: ClaimResult) -> str:
    """Which side of its sentence a claim lies on: its figure reading's side, else from its rule's direction."""
    if result.figure is not None and result.figure.side:
        return result.figure.side
    kept = result.kept
    if kept is None:
        return ""
    if result.claim.form is Form.DIRECTION:
        passing = "below" if result.claim.direction is Direction.BELOW else "above"
        on = "the sentence's side" if result.claim.passes(kept.mean) else "the other side"
        return f"on {on} ({format_value(kept.mean)}, the sentence's direction is {passing} " \
               f"{format_value(result.claim.threshold)})"
    return ("below the bar" if kept.mean < result.claim.threshold else "above the bar") + \
        f" ({format_value(kept.mean)} against {format_value(result.claim.threshold)})"


def findings(conditions: Sequence[ClaimResult]) -> dict:
    """Of counted sentences' conditions: which differ at the measurement's precision while their figure shows no
    difference (and of those, which in the model's favour), and every fail with its side."""
    finer = [r for r in conditions if r.figure is not None and r.figure.finer_than_figure]
    favour = [r for r in finer if r.figure.signed is not None and r.figure.signed.mean < 0]
    fails = [r for r in conditions if r.headline_verdict is Verdict.FAILS]
    return {"finer_than_figure": [r.claim.id for r in finer],
            "finer_in_models_favour": [r.claim.id for r in favour],
            "fails_with_side": [{"id": r.claim.id, "side": side_of(r)} for r in fails]}


def findings_text(found: dict) -> str:
    finer, favour = found["finer_than_figure"], found["finer_in_models_favour"]
    text = (f"finer than the figure shows: {len(finer)} sentence{'s' if len(finer) != 1 else ''} differ, of which "
            f"{len(favour)} in the model's favour" + (f" ({', '.join(finer)})" if finer else ""))
    sides = "; ".join(f"{f['id']}: {f['side']}" for f in found["fails_with_side"])
    return text + (f"; the fails and their side: {sides}" if sides else "")


def reading_lines(result: ClaimResult) -> list[str]:
    """What a row shows under its counted verdict: for a claim with a figure reading, that reading's detail, the
    measurement's precision and the stated tolerance's verdict; for one without, the side of a fail."""
    if result.figure is not None:
        stated = result.verdict.value + (f" ({result.note})" if result.note else "")
        return [figure_text(result.figure), "at the measurement's precision: " + precision_text(result.figure),
                f"at the stated tolerance (the authors' code is compared on it): {stated}"]
    if result.verdict is Verdict.FAILS and (side := side_of(result)):
        return [f"side: {side}"]
    return []


def counted_note(result: ClaimResult) -> str:
    """The note of the verdict the headline counts (the figure reading's where the claim has one)."""
    return result.figure.note if result.figure is not None else result.note


NUMBERS_START = "<!-- numbers:start (written by icl-gd reproduce from the claims table; do not edit by hand) -->"
NUMBERS_END = "<!-- numbers:end -->"


def _where(location: str) -> str:
    """The figure or section a location ends on ("Fig. 3(b)"), or the whole location where that is ambiguous."""
    last = location.rsplit("; ", 1)[-1]
    return last if last.count("(") == last.count(")") else location


def number_line(result: ClaimResult) -> str:
    """One condition's numbers in words, every value from its result: its counted verdict, its figure reading, the
    signed gap with its interval and side, the stated tolerance's verdict."""
    seeds = len(result.kept.values) if result.kept else 0
    head = f"`{result.claim.id}` ({_where(result.claim.location)}; {seeds} seeds): **{result.headline_verdict.value}**"
    if result.figure is None:
        side = f"; {side_of(result)}" if result.verdict is Verdict.FAILS and side_of(result) else ""
        value = _interval(result.kept) if result.kept else "no value"
        return f"{head}, {value} against {format_value(result.claim.threshold)}{side}"
    f = result.figure
    return (f"{head} as the figure shows it ({_interval(f.spread)} of its resolution); at the measurement's "
            f"precision {precision_text(f)}; at the stated tolerance: {result.verdict.value}")


def numbers_block(conditions_by_paper: Sequence[tuple[str, Sequence[ClaimResult]]]) -> str:
    """The pages' "in numbers": for each paper, every counted condition that fails or has no valid reference under
    either reading, or differs finer than its figure shows (``number_line``)."""
    lines = [NUMBERS_START, ""]
    for paper, conditions in conditions_by_paper:
        shown = [r for r in conditions if Verdict.FAILS in (r.headline_verdict, r.verdict)
                 or Verdict.NO_VALID_REFERENCE in (r.headline_verdict, r.verdict)
                 or (r.figure is not None and r.figure.finer_than_figure)]
        lines.append(f"{paper}: {len(shown)} of {len(conditions)} counted conditions fail under a reading, have no "
                     "valid reference, or differ finer than their figure shows" + (":" if shown else "."))
        lines += ([""] + [f"- {number_line(r)}" for r in shown] if shown else []) + [""]
        shared = [r for r in conditions if r.draws and not r.draws.startswith("independent")]
        if shared:
            lines += [f"{paper}: counted conditions whose seeds do not each have a test draw of their own:", ""]
            lines += [f"- `{r.claim.id}`: {r.draws}" for r in shared] + [""]
    return "\n".join([*lines, NUMBERS_END])
