"""docs/adding-a-claim.md runs as written: its declaration builds a claim over an existing study, and that claim is
judged from the kept full-budget runs (docs/full-run) through the same code a reproduction uses."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "adding-a-claim.md"


def _blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.S)


def test_the_page_s_claim_declares_and_judges_from_the_kept_runs(monkeypatch, capsys):
    from icl_gd.claims.verdict import Verdict

    declaration, judging = _blocks()
    namespace: dict = {}
    exec(compile(declaration, str(PAGE), "exec"), namespace)
    claim = namespace["BEATS_ZERO"]
    assert claim.id == "ours-single-beats-zero" and claim.measures == "(L_trained - L_0) / L_0"
    assert not claim.settled_by_quick and claim.training is not None
    monkeypatch.chdir(ROOT)
    exec(compile(judging, str(PAGE), "exec"), namespace)
    result = namespace["result"]
    assert len(result.spread.values) >= 10 and all(v < 0 for v in result.spread.values)  # it learned something
    low, high = result.spread.interval
    expected = Verdict.HOLDS if high < -0.5 else Verdict.FAILS if low > -0.5 else Verdict.INCONCLUSIVE
    assert result.verdict is expected  # the rule read by hand from the same interval
    verdict, mean = capsys.readouterr().out.split()
    assert verdict == expected.value and float(mean) == pytest.approx(result.spread.mean)


def test_the_page_s_statistic_is_what_the_study_writes():
    """A claim reading a metric the study does not write is a MissingEvidence, not a silent value: the declaration's
    builder calls must name real keys of the kept single-layer runs."""
    from icl_gd.claims.evidence import MissingEvidence, seed_evidence
    from icl_gd.claims.plan import plan_dirs
    from icl_gd.claims.statistics import rel_gap

    namespace: dict = {}
    exec(compile(_blocks()[0], str(PAGE), "exec"), namespace)
    evidence = seed_evidence(plan_dirs(namespace["BEATS_ZERO"], ROOT / "docs" / "full-run", quick=False))[0]
    with pytest.raises(MissingEvidence):
        rel_gap("loss_trained", "loss_zero_typo")(evidence)
