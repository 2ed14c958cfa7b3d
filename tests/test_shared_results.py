"""Results a seed does not change, computed once per sweep: the store's keys (what must recompute, what may be read),
its damaged files, and a sweep whose later seeds read the multi-layer study's tuned references and write the numbers
of runs that tuned them themselves."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from icl_gd.core.errors import ICLGDNotice
from icl_gd.core.results import read_json
from icl_gd.core.shared import TABLES, Codec, SharedResults
from icl_gd.platform.runner import execute_run
from icl_gd.platform.sweep import RunSpec, run_sweep
from icl_gd.studies import REGISTRY


class Counted:
    """A computation that counts its calls and returns a float64 value JSON must keep exactly."""

    def __init__(self, value: float = 0.1 + 0.2) -> None:
        self.calls, self.value = 0, value

    def __call__(self) -> dict:
        self.calls += 1
        return {"x": self.value}


def _value(shared: SharedResults, compute: Counted, depends_on: dict | None = None) -> dict:
    return shared.value("probe", depends_on or {"n": 1}, compute, Codec(dict, lambda v: {"x": v["x"]}))


def test_a_second_store_on_the_same_folder_reads_the_first_ones_value_bit_for_bit(tmp_path):
    compute = Counted(1 / 3)
    first = _value(SharedResults(tmp_path), compute)
    second = _value(SharedResults(tmp_path), compute)  # another run: another object on the same folder
    assert compute.calls == 1 and second == first and second["x"].hex() == (1 / 3).hex()


def test_anything_in_the_key_changing_computes_afresh(tmp_path, monkeypatch):
    import torch

    compute = Counted()
    _value(SharedResults(tmp_path), compute)
    _value(SharedResults(tmp_path), compute, {"n": 2})  # another config
    assert compute.calls == 2
    monkeypatch.setattr("icl_gd.core.shared.source_digest", lambda: "edited code")
    _value(SharedResults(tmp_path), compute)
    assert compute.calls == 3
    monkeypatch.undo()
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(threads + 1)  # the same products summed in another order
        _value(SharedResults(tmp_path), compute)
    finally:
        torch.set_num_threads(threads)
    assert compute.calls == 4
    _value(SharedResults(tmp_path), compute)  # and the first key's file is still read
    assert compute.calls == 4


@pytest.mark.parametrize("damage", ["truncated", "another key", "refused value"])
def test_a_damaged_or_foreign_file_is_computed_again_and_replaced(tmp_path, damage):
    compute = Counted()
    _value(SharedResults(tmp_path), compute)
    (path,) = tmp_path.glob("probe-*.json")
    record = read_json(path)
    if damage == "truncated":
        path.write_text(path.read_text()[:20])
    elif damage == "another key":
        record["key"]["depends_on"] = {"n": 99}
        path.write_text(json.dumps(record))
    else:
        record["value"] = {"y": 1.0}  # decode raises KeyError
        path.write_text(json.dumps(record))
    with pytest.warns(ICLGDNotice, match="computing it again"):
        assert _value(SharedResults(tmp_path), compute) == {"x": compute.value}
    assert compute.calls == 2 and read_json(path)["value"] == {"x": compute.value}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # replaced: read again without a notice
        _value(SharedResults(tmp_path), compute)
    assert compute.calls == 2


def test_tables_keep_every_float_bit_for_bit_infinities_and_nan_included(tmp_path):
    tables = [[{"damping": 0.75, "applications": 3, "model": "gd", "loss": float("inf"), "median_loss": 1 / 3}],
              [{"loss": float("nan"), "x": -0.0, "n": None, "ok": True}]]
    SharedResults(tmp_path).value("rows", {}, lambda: tables, TABLES)
    back = SharedResults(tmp_path).value("rows", {}, lambda: pytest.fail("computed again"), TABLES)

    def exact(t):
        return [[{k: (v.hex() if isinstance(v, float) else v) for k, v in row.items()} for row in table] for table in t]

    assert exact(back) == exact(tables)
    with pytest.raises(TypeError):
        TABLES.encode([[{"tensor": [1.0]}]])  # not a plain value: refused, not stored approximately


def test_a_schedule_keeps_each_entrys_type_and_bits_and_refuses_what_no_tuner_returns(tmp_path):
    from icl_gd.regression.gd import GDPPParams
    from icl_gd.regression.study import SCHEDULE

    schedule = GDPPParams((1 / 3, 2), (0, 0.1 + 0.2))
    SharedResults(tmp_path).value("gdpp", {}, lambda: schedule, SCHEDULE)
    back = SharedResults(tmp_path).value("gdpp", {}, lambda: pytest.fail("computed again"), SCHEDULE)
    assert [(type(v), v.hex() if isinstance(v, float) else v) for v in back.etas + back.gammas] == \
        [(type(v), v.hex() if isinstance(v, float) else v) for v in schedule.etas + schedule.gammas]
    for bad in ({"etas": [None], "gammas": [0.0]}, {"etas": [True], "gammas": [0.0]}, {"etas": [], "gammas": []},
                {"etas": [1.0, 2.0], "gammas": [0.0]}):
        with pytest.raises(ValueError):
            SCHEDULE.decode(bad)


_REGRESSION = ("steps=12", "batch_size=32", "n_test=128", "n_tune=256", "eval_every=6", "n_ood=32",
               "max_applications=3")
GD, GDPP, ADAM, DEPTH = ("tuning GD step sizes", "tuning GD++ step sizes and transforms",
                         "tuning GD++ the authors' way (grid scan, then Adam)", "GD/GD++ depth curves")
# study, its tiny overrides, the seed-independent phases a run that computes them enters (and how often), those a
# later seed of the sweep still enters (its own: GD++ re-tuned from its trained schedule; single-layer's GD step,
# which is not shared), the shared files, and the tables the two must write alike
CASES = [
    ("multi-layer", (*_REGRESSION, "layers=2", "recurrent=true", "gdpp_adam_steps=3"),
     {GD: 1, GDPP: 2, ADAM: 1, DEPTH: 1}, {GD: 0, GDPP: 1, ADAM: 0, DEPTH: 0}, 4, ("curves", "depth", "ood")),
    ("single-layer", (*_REGRESSION, "interpolation_points=3", "rollout_draws=2"),
     {GD: 1, GDPP: 0, ADAM: 0, DEPTH: 2}, {GD: 1, GDPP: 0, ADAM: 0, DEPTH: 0}, 1,
     ("curves", "depth", "rollout_draws", "interpolation")),
]


def _calls(run_dir: Path) -> dict[str, int]:
    """How often the run entered each phase that computes a seed-independent result."""
    calls = read_json(run_dir / "timings.json")["attempts"][-1]["phase_calls"]
    return {phase: calls.get(phase, 0) for phase in (GD, GDPP, ADAM, DEPTH)}


@pytest.mark.parametrize("study, overrides, computing, reading, n_shared, tables", CASES, ids=[c[0] for c in CASES])
@pytest.mark.slow
def test_a_sweeps_later_seed_reads_the_references_and_writes_the_numbers_of_a_lone_run(
        tmp_path, study, overrides, computing, reading, n_shared, tables):
    specs = [RunSpec(study, "default", (*overrides, f"seed={s}", "seeds=1")) for s in (0, 1)]
    records = run_sweep(specs, tmp_path / "sweep", registry=REGISTRY, workers=1, progress=False, figures=False)
    assert [r.status for r in records] == ["done", "done"]
    first, second = (r.run_dir for r in records)
    assert _calls(first) == computing and _calls(second) == reading
    assert len(list((tmp_path / "sweep" / "shared").glob("*.json"))) == n_shared
    alone = tmp_path / "alone"  # the second seed as its own run, computing everything itself
    execute_run(REGISTRY, study, alone, "default", specs[1].overrides, threads=1, progress=False, figures=False)
    assert _calls(alone) == computing
    assert read_json(second / "metrics.json")["seeds"] == read_json(alone / "metrics.json")["seeds"]
    for table in tables:
        assert (second / f"{table}.csv").read_text() == (alone / f"{table}.csv").read_text(), table
