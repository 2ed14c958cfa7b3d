"""``benchmarks/reference_spread.py`` at a tiny size: every reference tuned on independent tuning sets, the spread of
their test losses summarised, and the one-step reference's spread shrinking as the tuning sets grow 16x."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import reference_spread as bench  # noqa: E402

from icl_gd.core.errors import ConfigError  # noqa: E402
from icl_gd.core.results import to_jsonable  # noqa: E402
from icl_gd.regression.config import EvaluationConfig, RegressionTaskConfig  # noqa: E402

SIZES = (256, 4096)
# Four sets, not two: the sample std of two losses is too noisy a ratio (over 40 test seeds, 8 showed no shrinkage
# from 256 to 4096 tasks with two sets, none with four).
TINY = {"repeats": 4, "n_tunes": SIZES, "n_test": 1024}


@pytest.fixture(scope="module")
def tiny() -> bench.SpreadResult:
    return bench.measure_spread(bench.default_config(**TINY))


def test_the_defaults_are_the_multi_layer_studys():
    config = bench.default_config()
    ev = EvaluationConfig()
    assert config.task == RegressionTaskConfig() and config.n_steps == 2
    assert config.seed == ev.test_seed and config.n_tunes == (ev.n_tune, 4 * ev.n_tune)
    assert config.repeats == 5 and config.n_test == 100_000 and config.bar == pytest.approx(0.002)
    assert bench.default_config(["task.d=5", "layers=3"]).task.d == 5
    assert bench.default_config(["layers=3"]).n_steps == 3


@pytest.mark.slow
def test_every_reference_and_size_is_summarised(tiny):
    assert [(s.reference, s.n_tune) for s in tiny.spreads] == [
        (name, n) for name in bench.REFERENCE_NAMES for n in SIZES]
    table = bench.references(2)
    for s in tiny.spreads:
        ref = table[s.reference]
        assert [t.seed for t in s.tunings] == [tiny.config.seed + r for r in range(4)]
        assert all(len(t.etas) == len(t.gammas) == ref.n_steps for t in s.tunings)
        assert all(g == 0 for t in s.tunings for g in t.gammas) != ref.gdpp
        if ref.shared:
            assert all(len(set(t.etas)) == 1 for t in s.tunings)
        losses = [t.test_loss for t in s.tunings]
        assert min(losses) <= s.mean <= max(losses) and s.std >= 0
        assert s.relative_spread == pytest.approx(s.std / s.mean)
        assert s.relative_range == pytest.approx((max(losses) - min(losses)) / s.mean)
        assert s.fraction_of_tolerance == pytest.approx(s.relative_spread / 0.02)
        assert s.under_bar == (s.n_tune_for_bar is None) == (s.relative_spread < 0.002)
        assert s.n_tune_for_bar is None or s.n_tune_for_bar > s.n_tune
        assert (s.reference == "gd1") == all(t.population_loss is not None for t in s.tunings)
    assert set(tiny.slopes) == set(bench.REFERENCE_NAMES)
    assert len(bench.table_lines(tiny)) == 2 + len(tiny.spreads) + 1 + len(SIZES)
    json.dumps(to_jsonable(tiny))


@pytest.mark.slow
def test_the_one_step_reference_is_scored_against_its_population_optimum(tiny):
    assert [c.n_tune for c in tiny.population] == list(SIZES)
    for c in tiny.population:
        assert c.eta_star == pytest.approx(120 / 19.8) and c.population_loss == pytest.approx(10 / 24 * 9.8 / 19.8)  # E L(η*), closed form
        assert all(excess >= 0 for excess in c.population_excess)  # η* minimises E L(η)
    small, large = tiny.population
    assert max(map(abs, large.eta_gaps)) < max(map(abs, small.eta_gaps))


@pytest.mark.slow
def test_the_one_step_spread_shrinks_as_the_tuning_sets_grow(tiny):
    # Independent tuning sets: the spread is there, and falls with 16x the tasks. Sets drawn from one seed would
    # all tune the same η: no spread at either size.
    small, large = (s for s in tiny.spreads if s.reference == "gd1")
    assert 0 < large.relative_spread < small.relative_spread
    assert len({t.etas for t in small.tunings}) == 4


def test_the_command_writes_its_config_seed_and_machine(tmp_path, capsys):
    out = tmp_path / "spread.json"
    bench.main(["--repeats", "2", "--n-tune", "64,128", "--n-test", "256", "--references", "gd1", "--out", str(out)])
    written = json.loads(out.read_text())
    assert written["seed"] == 2023 and written["result"]["config"]["n_tunes"] == [64, 128]
    assert {"torch", "numpy", "source", "load", "uptime"} <= set(written["machine_before"])
    assert written["cpu_s"] > 0 and len(written["result"]["spreads"]) == 2
    assert "| gd1 | 128 |" in capsys.readouterr().out


@pytest.mark.parametrize("change", [{"repeats": 1}, {"references": ("gd3",)}, {"n_tunes": ()},
                                    {"tolerance": 0}])
def test_a_bad_config_is_refused(change):
    with pytest.raises(ConfigError):
        replace(bench.default_config(**TINY), **change)
