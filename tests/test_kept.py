"""A --quick reading beside the kept full-budget verdict of the same claim."""

from __future__ import annotations

import json

from icl_gd.claims import CLAIMS, Verdict
from icl_gd.claims import kept as kept_module
from icl_gd.claims.kept import KEPT_TABLE, KeptVerdict, kept_text, kept_verdicts, quick_agreement, quick_side
from icl_gd.claims.report import ReportHeader, write_report
from icl_gd.claims.verdict import ClaimResult, Spread

LOSS = next(c for c in CLAIMS if c.id == "vo-single-loss")  # holds below 0.02


def _quick(value: float) -> ClaimResult:
    return ClaimResult(LOSS, Verdict.INCONCLUSIVE, Spread((value,)), "on the --quick budget", quick=True)


def test_a_quick_reading_is_set_beside_the_kept_verdict_and_its_side(tmp_path, monkeypatch):
    held = KeptVerdict("holds", 0.0017, (0.0013, 0.0022), 10, "2026-12-05, commit abc")
    assert quick_side(_quick(0.004), held) is True and quick_side(_quick(0.05), held) is False
    assert quick_side(_quick(0.004), KeptVerdict("inconclusive", 0.02, None, 3, "x")) is None
    monkeypatch.setattr(kept_module, "kept_verdicts", lambda: {LOSS.id: held})
    text = kept_text(_quick(0.05))
    assert text.startswith("kept full budget: holds, mean 0.0017 [0.0013, 0.0022] (10 seeds, 2026-12-05")
    assert text.endswith("this reading is on the other side of the threshold")
    assert kept_text(ClaimResult(LOSS, Verdict.HOLDS, Spread((0.001, 0.002, 0.001)))) == ""  # full budget: nothing
    assert quick_agreement([_quick(0.004)]).startswith("Beside the kept full-budget table: 1 of the 1 claims")
    assert quick_agreement([_quick(0.05)]).endswith("0 of the 1 claims it settled read on the same side of their "
                                                    "threshold here; on the other side: vo-single-loss")
    write_report(tmp_path, [_quick(0.004)], ReportHeader("icl-gd reproduce --quick", "abc", "today", True, 1.0))
    md = (tmp_path / "report.md").read_text()
    assert "kept full budget: holds" in md and "1 of the 1 claims it settled read on the same side" in md


def test_the_kept_table_is_read_from_the_checkout_and_a_quick_table_is_not_kept(tmp_path):
    table = json.loads(KEPT_TABLE.read_text())
    kept = kept_verdicts()
    assert kept[LOSS.id].verdict == next(c["verdict"] for c in table["claims"] if c["id"] == LOSS.id)
    quick = tmp_path / "quick.json"
    quick.write_text(json.dumps({**table, "quick": True}))
    assert kept_verdicts(quick) == {}
    assert kept_verdicts(tmp_path / "missing.json") == {}
