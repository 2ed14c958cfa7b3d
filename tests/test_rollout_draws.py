"""The roll-out judged over independent test draws (``OverDraws``): a seed's value is the median of the roll-out
statistic over its draws, so a draw whose mean loss one ill-conditioned task decides cannot decide the seed alone;
the draws' tasks beyond GD's stability bound (``unstable_task_rows``) are named in the claim's details."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest
import torch

from icl_gd.claims import SeedEvidence, Verdict, evaluate_claim
from icl_gd.claims.evidence import MissingEvidence
from icl_gd.claims.registry import ALL_CHECKS
from icl_gd.claims.statistics import OverDraws, RolloutGap, RolloutRise, median_of
from icl_gd.regression.rollout.depth import unstable_task_rows

GAP = OverDraws(RolloutGap(0.75, "gd"))
RISE = OverDraws(RolloutRise(0.75, ("trained", "gd")))


def _write(path: Path, rows: list[dict]) -> None:
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def _gap_rows(gaps: list[float]) -> list[dict]:
    """rollout_draws.csv rows whose draw k has RolloutGap ``gaps[k]`` at λ = 0.75 (inf: the trained layer's loss
    overflows at n = 3); a λ = 1 decoy whose gap is 9 in every draw."""
    rows = []
    for draw, gap in enumerate(gaps):
        for damping in (1.0, 0.75):
            for n in (1, 2, 3):
                gd = 1.0 / n
                if damping != 0.75:
                    trained = 10 * gd
                elif math.isinf(gap):
                    trained = math.inf if n == 3 else gd
                else:
                    trained = gd * (1 + gap * (n == 2))
                rows += [{"seed": 0, "draw": draw, "damping": damping, "applications": n, "model": m, "loss": loss,
                          "median_loss": 0.5 * loss} for m, loss in (("gd", gd), ("trained", trained))]
    return rows


def _run(tmp_path: Path, gaps: list[float], name: str = "run") -> SeedEvidence:
    run_dir = tmp_path / name
    run_dir.mkdir()
    _write(run_dir / "rollout_draws.csv", _gap_rows(gaps))
    tasks = [{"draw": k, "damping": 0.75, "bound": 4.415, "beyond_count": int(math.isinf(g)), "task": 100 + k,
              "lambda_max": 4.6 if math.isinf(g) else 4.1, "beyond_bound": math.isinf(g)} for k, g in enumerate(gaps)]
    _write(run_dir / "rollout_tasks.csv", tasks)
    return SeedEvidence(({},), (run_dir,))


def test_every_draw_holding_gives_their_median_and_says_all_hold(tmp_path):
    evidence = _run(tmp_path, [0.010, 0.012, 0.011, 0.013, 0.009])
    assert GAP.per_draw(evidence) == pytest.approx([0.010, 0.012, 0.011, 0.013, 0.009])
    assert GAP(evidence) == pytest.approx(0.011)  # the median, not the mean (0.011 too) nor draw 0 (0.010)
    details = GAP.details([evidence], lambda v: v < 0.02)
    assert "5 of 5 hold" in details and "5 of 5 draws hold" in details
    assert "draw 0: none (worst task 100 λ_max 4.100)" in details


def test_non_finite_draws_move_the_median_only_when_they_are_half_of_them(tmp_path):
    two = _run(tmp_path, [math.inf, 0.010, 0.012, math.inf, 0.011], "two")
    assert GAP(two) == pytest.approx(0.012)  # a mean over draws would be inf, draw 0 alone inf
    details = GAP.details([two], lambda v: v < 0.02)
    assert "inf, 0.01, 0.012, inf, 0.011 (3 of 5 hold)" in details
    assert "draw 0: 1 (task 100 λ_max 4.600)" in details and "2N/(λη) = 4.415" in details
    three = _run(tmp_path, [0.010, math.inf, math.inf, 0.012, math.inf], "three")
    assert math.isinf(GAP(three))


def test_mixed_draws_give_the_middle_draw_and_count_the_holding_ones(tmp_path):
    evidence = _run(tmp_path, [0.05, 0.010, 0.030, 0.015, 0.012])
    assert GAP(evidence) == pytest.approx(0.015)  # not draw 0's 0.05, not the max, not the min
    assert "0.05, 0.01, 0.03, 0.015, 0.012 (3 of 5 hold)" in GAP.details([evidence], lambda v: v < 0.02)


def test_the_median_of_an_even_count_is_the_mean_of_the_middle_two():
    assert median_of([4.0, 1.0, 3.0, 2.0]) == pytest.approx(2.5)
    assert median_of([1.0, math.inf]) == math.inf
    assert median_of([3.0]) == 3.0


def test_the_rise_is_judged_per_draw_too(tmp_path):
    rows = []
    for draw, rise in enumerate([-0.5, 0.2, -0.4]):  # every model's loss 1, 1 + rise, ... in each draw
        rows += [{"seed": 0, "draw": draw, "damping": 0.75, "applications": n, "model": m, "loss": loss,
                  "median_loss": loss} for m in ("trained", "gd") for n, loss in ((1, 1.0), (2, 1.0 + rise))]
    (tmp_path / "r").mkdir()
    _write(tmp_path / "r" / "rollout_draws.csv", rows)
    evidence = SeedEvidence(({},), (tmp_path / "r",))
    assert RISE.per_draw(evidence) == pytest.approx([-0.5, 0.2, -0.4])
    assert RISE(evidence) == pytest.approx(-0.4)


def test_a_run_without_draws_cannot_be_measured(tmp_path):
    (tmp_path / "old").mkdir()
    with pytest.raises(MissingEvidence, match="rollout_draws.csv"):
        GAP(SeedEvidence(({},), (tmp_path / "old",)))


def test_the_rollout_claims_read_every_draw_and_report_them(tmp_path):
    claim = next(c for c in ALL_CHECKS if c.id == "vo-rollout-matches-gd")
    seeds = [_run(tmp_path, gaps, f"seed{i}") for i, gaps in
             enumerate([[math.inf, 0.010, 0.012, 0.011, 0.013], [0.011, 0.010, 0.012, math.inf, 0.013],
                        [0.012, 0.011, 0.013, 0.010, 0.009]])]
    result = evaluate_claim(claim, seeds)
    assert result.verdict is Verdict.HOLDS, result.note
    assert result.spread.values == pytest.approx((0.012, 0.012, 0.011))
    assert "13 of 15 draws hold" in result.details


def test_unstable_task_rows_name_the_tasks_beyond_the_bound():
    gen = torch.Generator().manual_seed(0)
    x = torch.rand(6, 10, 3, generator=gen, dtype=torch.float64) - 0.5  # λ_max(XᵀX) well below 10
    x[2] *= 10  # λ_max x 100
    x[4] *= 20
    eta, damping = 1.0, 0.5
    top = torch.linalg.eigvalsh(x.transpose(1, 2) @ x)[:, -1]
    bound = 2 * 10 / (damping * eta)  # 40
    assert top[2] > bound and top[4] > bound and (top[[0, 1, 3, 5]] < bound).all()
    rows = unstable_task_rows(x, eta, (damping, 0.01))
    beyond = [r for r in rows if r["damping"] == damping]
    assert [r["task"] for r in beyond] == [4, 2] and all(r["beyond_bound"] for r in beyond)
    assert beyond[0]["beyond_count"] == 2 and beyond[0]["bound"] == pytest.approx(bound)
    assert beyond[0]["lambda_max"] == pytest.approx(float(top[4]))
    calm = [r for r in rows if r["damping"] == 0.01]  # bound 2000: none beyond, the worst task named
    assert [(r["task"], r["beyond_bound"], r["beyond_count"]) for r in calm] == [(4, False, 0)]
    assert [r["task"] for r in unstable_task_rows(x, eta, (damping,), most=1)] == [4]


def test_a_diverging_draw_is_counted_as_such():
    from icl_gd.regression.rollout.depth import divergence_shares, diverges

    assert diverges([1.0, 0.5, 2.0]) and diverges([1.0, 0.5, float("inf")]) and diverges([1.0, float("nan")])
    assert not diverges([1.0, 2.0, 0.9]) and not diverges([])  # a bump that comes back down converged
    rows = []
    for draw, curve in enumerate(([1.0, 0.8, 0.7], [1.0, 1.5, 3.0], [1.0, 0.9, float("inf")])):
        for n, loss in enumerate(curve, start=1):
            rows.append({"seed": "0", "draw": str(draw), "damping": "0.75", "applications": str(n),
                         "model": "trained", "loss": str(loss)})
            rows.append({"seed": "0", "draw": str(draw), "damping": "0.75", "applications": str(n),
                         "model": "gd", "loss": "0.5"})
    shares = divergence_shares(rows)
    assert shares[(0.75, "trained")] == (2, 3) and shares[(0.75, "gd")] == (0, 3)


def test_the_damping_scans_shares_on_the_single_layer_page_are_the_kept_scans():
    """docs/studies/single-layer.md's shares of the damping scan are rollout_shares_table of docs/rollout-scan."""
    import csv as _csv

    from icl_gd.claims.rollout import SHARES_END, SHARES_START, rollout_shares_table

    root = Path(__file__).resolve().parents[1]
    with (root / "docs" / "rollout-scan" / "rollout_draws.csv").open() as handle:
        table = rollout_shares_table(list(_csv.DictReader(handle)))
    page = (root / "docs" / "studies" / "single-layer.md").read_text()
    assert page[page.index(SHARES_START):page.index(SHARES_END) + len(SHARES_END)] == table
    # GD's curve of a draw counts once although three trained seeds were scored on it: 20 draws, not 60
    assert "| 0.75 | 43 of 60 (" in table and "| 5 of 20 (" in table


def test_falling_and_diverging_shares_count_each_method_on_each_draw():
    from icl_gd.claims.rollout import falling_shares, falls_at_every_step

    assert falls_at_every_step([3.0, 2.0, 1.0]) and not falls_at_every_step([3.0, 3.5, 1.0])
    assert not falls_at_every_step([3.0, float("inf")])
    draws = [{"trained": [1.0, 0.5], "gd": [1.0, 2.0]}, {"trained": [1.0, 0.9], "gd": [1.0, 0.8]}]
    text = falling_shares(draws)
    assert "trained: falls at every step on 2 of 2" in text and "gd: falls at every step on 1 of 2" in text
    assert "gd: falls at every step on 1 of 2 (0.500 [0.013, 0.987])" in text and "both fall at every step on 1 of 2" in text
