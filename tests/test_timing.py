"""timings.json: each attempt at a run, its wall / CPU time and its phases, appended however the attempt ends."""

from __future__ import annotations

import json

import pytest

from icl_gd.core.progress import phase, progress_bar
from icl_gd.core.timing import TIMINGS_FILE, measured_wall_s, read_timings, run_timing, timed


def test_attempts_append_with_nested_phase_paths_and_outcomes(tmp_path):
    with run_timing(tmp_path):
        with phase("tuning GD"):
            with timed("inner"):
                pass
            with timed("inner"):
                pass
        with progress_bar(3, "seed 0", enabled=False) as update:
            update(1, 0.5)
    with pytest.raises(ValueError, match="boom"):  # the attempt's own error comes through
        with run_timing(tmp_path):
            raise ValueError("boom")
    with pytest.raises(KeyboardInterrupt):
        with run_timing(tmp_path):
            raise KeyboardInterrupt
    first, failed, interrupted = read_timings(tmp_path)
    assert first["outcome"] == "finished" and failed["outcome"] == "failed (ValueError)"
    assert interrupted["outcome"] == "interrupted"
    assert list(first["phases_wall_s"]) == ["tuning GD", "tuning GD > inner", "training"]
    assert first["phase_calls"] == {"tuning GD": 1, "tuning GD > inner": 2, "training": 1}
    assert failed["phases_wall_s"] == {}  # a new attempt starts a new clock
    whole = json.loads((tmp_path / TIMINGS_FILE).read_text())
    assert whole["wall_s"] == pytest.approx(sum(a["wall_s"] for a in (first, failed, interrupted)), abs=2e-3)
    assert measured_wall_s(tmp_path) == pytest.approx(whole["wall_s"], abs=2e-3)


def test_outside_a_run_nothing_is_recorded(tmp_path):
    with timed("alone"), phase("also alone"):
        pass
    assert read_timings(tmp_path) == [] and measured_wall_s(tmp_path) is None
