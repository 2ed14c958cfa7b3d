"""The scripts that fold the authors' code's JSON lines into authors_values.json (docs/authors_check/record_*.py):
each claim's value computed from synthetic runs by hand, the records written with their provenance, and every
recorded id a registered claim. They need no JAX, so they run here on made-up driver output."""

from __future__ import annotations

import inspect
import json
import re
import sys
from pathlib import Path

import pytest

from icl_gd.claims import CLAIMS

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "docs" / "authors_check"))

import _record  # noqa: E402
import record_ood_laws  # noqa: E402
import record_recurrent  # noqa: E402
import record_separate  # noqa: E402
import record_separate_tokens  # noqa: E402
import record_sine  # noqa: E402
import record_variants  # noqa: E402
import draw_sine_functions  # noqa: E402

PROV = {"versions": "jax 0.10.2", "python": "3.11.7", "device": "cpu", "date": "2026-12-02", "wall_s": 60}


def _run(seed: int, layers: int = 1, **fields) -> dict:
    base = {"layers": layers, "recurrent": True, "seed": seed, "steps": 5000, "n_context": 10, "layernorm": False,
            "softmax": False, "heads": 1, "gd_lr": 0.9, "loss_gd": 0.2, "provenance": PROV}
    return {**base, **fields}


@pytest.fixture
def values_file(tmp_path, monkeypatch):
    path = tmp_path / "authors_values.json"
    path.write_text(json.dumps({"_about": "test"}))
    monkeypatch.setattr(_record, "VALUES", path)
    return path


def _lines(tmp_path: Path, runs: list[dict]) -> list[str]:
    paths = []
    for i, run in enumerate(runs):
        path = tmp_path / f"run{i}.json"
        path.write_text(json.dumps(run) + "\n")
        paths.append(str(path))
    return paths


def test_softmax_records_pair_heads_by_seed(tmp_path, values_file):
    # catches 1 and 2 heads swapped (the sign of both differences flips) or pairing by file order instead of seed
    runs = [_run(1, softmax=True, heads=2, loss_trained=0.25, loss_rel_gap_trained_vs_gd=0.25, cos_sensitivity=0.97),
            _run(0, softmax=True, heads=1, loss_trained=0.30, loss_rel_gap_trained_vs_gd=0.50, cos_sensitivity=0.90),
            _run(0, softmax=True, heads=2, loss_trained=0.22, loss_rel_gap_trained_vs_gd=0.10, cos_sensitivity=0.99),
            _run(1, softmax=True, heads=1, loss_trained=0.28, loss_rel_gap_trained_vs_gd=0.40, cos_sensitivity=0.95)]
    record_variants.main(_lines(tmp_path, runs))
    data = json.loads(values_file.read_text())
    assert data["vo-softmax-one-head"]["values"] == pytest.approx([0.50, 0.40])
    assert data["vo-softmax-heads"]["values"] == pytest.approx([0.10 - 0.50, 0.25 - 0.40])
    assert data["vo-softmax-heads-alignment"]["values"] == pytest.approx([0.99 - 0.90, 0.97 - 0.95])
    assert data["vo-softmax-heads"]["seeds"] == [0, 1]
    assert data["vo-softmax-heads"]["commit"] == _record.COMMIT and data["vo-softmax-heads"]["same_setup"] is True


def test_gamma_vs_n_is_the_worst_relative_deviation_and_needs_every_n(tmp_path, values_file, capsys):
    gammas = {10: 0.170, 25: 0.110, 50: 0.056, 100: 0.0300}  # worst: N = 25, |0.110 - 0.099| / 0.099
    runs = [_run(0, layers=2, n_context=n, trained_gamma=g, trained_eta=1.0) for n, g in gammas.items()]
    runs.append(_run(1, layers=2, n_context=10, trained_gamma=0.2, trained_eta=1.0))  # seed 1 lacks N = 25..100
    record_variants.main(_lines(tmp_path, runs))
    record = json.loads(values_file.read_text())["vo-gamma-vs-n"]
    assert record["values"] == pytest.approx([0.011 / 0.099])
    assert record["seeds"] == [0]
    assert "seed 1: γ N=10 0.2000" in capsys.readouterr().out


def test_layernorm_record_and_unknown_runs_refused(tmp_path, values_file):
    runs = [_run(s, layernorm=True, loss_trained=0.3, loss_rel_gap_trained_vs_gd=0.5 + s) for s in (0, 1)]
    record_variants.main(_lines(tmp_path, runs))
    assert json.loads(values_file.read_text())["vo-layernorm"]["values"] == [0.5, 1.5]
    with pytest.raises(SystemExit, match="none of the set-ups"):
        record_variants.main(_lines(tmp_path, [_run(0, layers=3, recurrent=False)]))


def test_recurrent_ten_records_only_its_registered_claim(tmp_path, values_file):
    runs = [_run(s, layers=10, gdpp_steps=1000, loss_trained=0.1, loss_gdpp=0.05, loss_rel_gap_trained_vs_gd=-0.1,
                 loss_rel_gap_trained_vs_gdpp=1.0, cos_sensitivity=0.9, cos_sensitivity_gdpp=0.95 + s / 100,
                 ood_gap_gdpp=0.1, ood_gap_gdpp_their_grid=0.1) for s in (0, 1, 2)]
    record_recurrent.main(_lines(tmp_path, runs))
    data = json.loads(values_file.read_text())
    assert set(data) - {"_about"} == {"vo-recurrent10-gdpp-aligned-authors-tuning"}
    assert data["vo-recurrent10-gdpp-aligned-authors-tuning"]["values"] == pytest.approx([0.95, 0.96, 0.97])
    with pytest.raises(SystemExit, match="no registered claim"):
        record_recurrent.main(_lines(tmp_path, [_run(0, layers=4, gd_lr=1.0, gdpp_steps=1)]))


def test_every_id_a_record_script_can_write_is_registered():
    # catches a typo in a claim id in a record script: the report would never show that record
    registered = {c.id for c in CLAIMS}
    for module in (record_ood_laws, record_recurrent, record_separate, record_variants):
        source = inspect.getsource(module)
        written = set(re.findall(r'"(vo-[a-z0-9-]+)"', source)) | {
            f"vo-recurrent{k}-{suffix}" for k in (2, 3)
            for suffix in ("beats-gd", "gdpp")}
        assert written <= registered, sorted(written - registered)


def test_wall_time_is_summed_per_seed():
    # a statistic of two runs a seed (1 and 2 heads) reports one wall time a seed, not one a run
    runs = [_run(s, softmax=True, heads=h, provenance={**PROV, "wall_s": 10 * h + s}) for s in (0, 1) for h in (1, 2)]
    assert _record.provenance(runs, "setup", "driver")["wall_s_per_seed"] == [30, 32]


def test_five_separate_layers_records_signed_gd_gap_absolute_gdpp_gap_and_cosine(tmp_path, values_file):
    # catches the GD gap recorded unsigned (the claim's threshold is a sign), the GD++ gap recorded signed (its
    # statistic is absolute) or the cosine taken against GD instead of GD++
    runs = [_run(s, layers=5, recurrent=False, steps=50_000, gdpp_steps=30_000, loss_trained=0.05, loss_gdpp=0.06,
                 loss_rel_gap_trained_vs_gd=-0.4 - s / 10, loss_rel_gap_trained_vs_gdpp=-1 / 6 + s / 100,
                 cos_sensitivity=0.9, cos_sensitivity_gdpp=0.98) for s in (2, 1)]
    record_separate.main(_lines(tmp_path, runs))
    data = json.loads(values_file.read_text())
    assert set(data) - {"_about"} == {"vo-deep-separate", "vo-deep-separate-gdpp-loss-authors-tuning",
                                      "vo-deep-separate-gdpp-aligned-authors-tuning"}
    assert data["vo-deep-separate"]["values"] == pytest.approx([-0.5, -0.6])
    assert data["vo-deep-separate"]["seeds"] == [1, 2]
    assert data["vo-deep-separate-gdpp-loss-authors-tuning"]["values"] == pytest.approx([1 / 6 - 0.01, 1 / 6 - 0.02])
    assert data["vo-deep-separate-gdpp-aligned-authors-tuning"]["values"] == pytest.approx([0.98, 0.98])
    assert "30000 Adam steps" in data["vo-deep-separate"]["setup"]
    with pytest.raises(SystemExit, match="five separate"):  # a recurrent stack is another claim's set-up
        record_separate.main(_lines(tmp_path, [{**runs[0], "recurrent": True}]))


def test_layernorm_between_two_separate_layers_is_vo_layernorm_2(tmp_path, values_file):
    # catches the two-layer LayerNorm run recorded as the one-layer claim (vo-layernorm) or dropped
    runs = [_run(s, layers=2, recurrent=False, steps=50_000, layernorm=True, loss_trained=0.12,
                 loss_rel_gap_trained_vs_gd=0.3 + s) for s in (1, 2)]
    record_variants.main(_lines(tmp_path, runs))
    data = json.loads(values_file.read_text())
    assert set(data) - {"_about"} == {"vo-layernorm-2"}
    assert data["vo-layernorm-2"]["values"] == pytest.approx([1.3, 2.3])


def test_fixed_task_runs_record_their_own_claim_by_set_size(tmp_path, values_file):
    # catches M = 128 and 2048 crossed, the loss gap recorded instead of the cosine, or a fixed-set run taken for
    # the fresh-task LayerNorm claim
    runs = [_run(s, fixed_tasks=m, loss_trained=0.3, loss_rel_gap_trained_vs_gd=0.4,
                 cos_sensitivity=(0.2 if m == 128 else 0.97) + s / 100) for m in (2048, 128) for s in (0, 1)]
    runs.append(_run(2, fixed_tasks=2048, layernorm=True, cos_sensitivity=0.5, loss_trained=0.3,
                     loss_rel_gap_trained_vs_gd=0.4))
    with pytest.raises(SystemExit, match="1 of the JSON lines"):
        record_variants.main(_lines(tmp_path, runs))
    record_variants.main(_lines(tmp_path, runs[:-1]))
    data = json.loads(values_file.read_text())
    assert set(data) - {"_about"} == {"vo-fixed-tasks-128-fails", "vo-fixed-tasks-2048-aligned"}
    assert data["vo-fixed-tasks-128-fails"]["values"] == pytest.approx([0.20, 0.21])
    assert data["vo-fixed-tasks-2048-aligned"]["values"] == pytest.approx([0.97, 0.98])
    assert "fixed batch of 2048 tasks" in data["vo-fixed-tasks-2048-aligned"]["setup"]


def test_unseen_laws_one_layer_against_gd_two_recurrent_layers_against_gdpp(tmp_path, values_file):
    # catches the two-layer claim recorded against GD instead of GD++ (or the one-layer claim against GD++), and a
    # variant run (LayerNorm) taken for the linear layer
    laws = dict(ood_gap_laws_gd_their_grid=0.0, ood_gap_laws_gdpp_their_grid=0.0)
    runs = [_run(s, layers=1, ood_gap_laws_gd=0.01 + s / 100, **laws) for s in (0, 1)]
    runs += [_run(s, layers=2, gdpp_steps=1000, ood_gap_laws_gd=0.5, ood_gap_laws_gdpp=0.2 + s / 10, **laws)
             for s in (0, 1)]
    record_ood_laws.main(_lines(tmp_path, runs))
    data = json.loads(values_file.read_text())
    assert data["vo-ood-unseen-laws"]["values"] == pytest.approx([0.01, 0.02])
    assert data["vo-recurrent2-ood-unseen-laws-gdpp"]["values"] == pytest.approx([0.2, 0.3])
    with pytest.raises(SystemExit, match="one linear layer"):
        record_ood_laws.main(_lines(tmp_path, [_run(0, layernorm=True, ood_gap_laws_gd=0.1, **laws)]))


def test_a_run_with_gd_eta_set_by_hand_is_not_recorded(tmp_path, values_file):
    # catches a --gd-eta diagnosis (GD's η not their scan's) recorded as their code's value
    runs = [_run(s, layers=1, ood_gap_laws_gd=0.01, ood_gap_laws_gd_their_grid=0.0, gd_lr_scanned=s != 1)
            for s in (0, 1)]
    with pytest.raises(SystemExit, match="diagnosis"):
        record_ood_laws.main(_lines(tmp_path, runs))
    assert "vo-ood-unseen-laws" not in json.loads(values_file.read_text())


# ----------------------------------------------------------------------------- sine and separate tokens (Fig. 4, 5)
def _separate_run(seed: int, steps: int, **fields) -> dict:
    plan = record_separate_tokens.plan_budget()
    base = {"driver": "separate_tokens", "seed": seed, "steps": steps, "batch_size": plan["batch_size"],
            "n_tune": plan["n_tune"], "n_copy": plan["n_copy"], "complete": True, "legacy_prng": True,
            "loss_trained": 0.21, "loss_gd": 0.20, "eta_gd": 6.0, "rel_gap_trained_vs_gd": 0.05,
            "loss_gd_2steps": 0.14, "eta_gd_2steps": [4.0, 11.6], "rel_gap_trained_vs_gd_2steps": 0.5,
            "loss_zero": 0.416, "copy_ours": {"next": 8.0, "other_per_token": 0.2, "ratio": 40.0},
            "copy_authors": {"own": 3.1, "next": 0.5, "other": 0.01}, "provenance": PROV}
    return {**base, **fields}


def test_separate_token_records_take_the_claims_statistics_and_their_plan_decides_same_setup(tmp_path,
                                                                                             values_file):
    steps = record_separate_tokens.plan_budget()["steps"]
    runs = [_separate_run(1, steps, rel_gap_trained_vs_gd=-0.01, loss_trained=0.198, loss_zero=0.42,
                          copy_ours={"next": 4.0, "other_per_token": 0.1, "ratio": 40.0}),
            _separate_run(0, steps, rel_gap_trained_vs_gd=0.03, rel_gap_trained_vs_gd_2steps=0.55,
                          copy_ours={"next": 7.9, "other_per_token": 0.45, "ratio": 17.6},
                          copy_authors_all={"own": 3.0, "next": 0.6, "other": 0.02})]
    record_separate_tokens.main(_lines(tmp_path, runs))
    data = json.loads(values_file.read_text())
    assert data["vo-separate-one-step"]["values"] == pytest.approx([0.03, 0.01])  # |gap|, seed order
    assert data["vo-separate-not-two-steps"]["values"] == pytest.approx([0.55, 0.5])
    assert data["vo-separate-copy"]["values"] == pytest.approx([17.6, 40.0])
    # their own measure: next / other of their analyse_copy on all their test tasks, the first 1000 as a fallback
    assert data["vo-separate-copy-their-measure"]["values"] == pytest.approx([0.6 / 0.02, 0.5 / 0.01])
    assert "(10 000 tasks)" in data["vo-separate-copy-their-measure"]["measured"]
    assert "(1000 tasks)" in data["vo-separate-copy-their-measure"]["measured"]
    one = data["vo-separate-one-step"]
    assert one["seeds"] == [0, 1] and one["same_setup"] is True
    assert one["trained_loss"] == pytest.approx([0.21, 0.198]) and one["untrained_loss"] == pytest.approx(0.418)
    # the notebook's 10 000 steps are not the claims' plan: kept beside the plan's record, which stays the record
    record_separate_tokens.main(_lines(tmp_path, [_separate_run(s, 10_000, rel_gap_trained_vs_gd=0.02 + s / 100)
                                                  for s in (0, 1, 2)]))
    kept = json.loads(values_file.read_text())["vo-separate-one-step"]
    assert kept["values"] == pytest.approx([0.03, 0.01]) and kept["same_setup"] is True
    (short,) = kept["other_setups"]
    assert short["same_setup"] is False and f"the plan {steps}" in short["setup"]
    assert short["values"] == pytest.approx([0.02, 0.03, 0.04]) and short["steps"] == 10_000
    # recording the notebook's length again replaces its earlier record, not the plan's
    record_separate_tokens.main(_lines(tmp_path, [_separate_run(0, 10_000, rel_gap_trained_vs_gd=0.07)]))
    kept = json.loads(values_file.read_text())["vo-separate-one-step"]
    assert kept["values"] == pytest.approx([0.03, 0.01]) and len(kept["other_setups"]) == 1
    assert kept["other_setups"][0]["values"] == pytest.approx([0.07])


def test_a_run_at_the_plan_keeps_an_earlier_run_at_another_set_up_beside_it(tmp_path, values_file):
    # catches the first run at the claims' plan erasing the shorter run recorded before it (or keeping it as the
    # record, compared with ours)
    steps = record_separate_tokens.plan_budget()["steps"]
    record_separate_tokens.main(_lines(tmp_path, [_separate_run(0, 10_000, rel_gap_trained_vs_gd=0.09)]))
    record_separate_tokens.main(_lines(tmp_path, [_separate_run(0, steps, rel_gap_trained_vs_gd=0.02)]))
    record = json.loads(values_file.read_text())["vo-separate-one-step"]
    assert record["same_setup"] is True and record["values"] == pytest.approx([0.02])
    assert [o["values"] for o in record["other_setups"]] == [pytest.approx([0.09])]
    assert record["other_setups"][0]["same_setup"] is False


def _sine_run(seed: int, steps: int, baseline_steps: int, gap: float) -> dict:
    fresh = {"rel_gap_trained_vs_meta": gap, "loss_trained": 0.0013, "loss_meta": 0.002, "cos_sensitivity": 0.98,
             "pred_diff": 0.01, "function_rel_rms": 0.12}
    return {"driver": "sine", "seed": seed, "steps": steps, "baseline_steps": baseline_steps, "batch_size": 2048,
            "baseline_batch_size": 2048, "complete": True, "legacy_prng": True, "provenance": PROV,
            "final": {"fresh_test_set": fresh, "notebook_test_set": dict(fresh, loss_trained=0.0012)}}


def test_sine_records_take_the_fresh_test_set_and_need_the_plans_budget_for_both_models(tmp_path, values_file):
    steps = record_sine.plan_steps()
    record_sine.main(_lines(tmp_path, [_sine_run(0, steps, steps, -0.36)]))
    data = json.loads(values_file.read_text())
    assert data["vo-sine"]["values"] == pytest.approx([0.36]) and data["vo-sine"]["same_setup"] is True
    assert data["vo-sine-alignment"]["values"] == pytest.approx([0.98])
    assert data["vo-sine-function"]["values"] == pytest.approx([0.12])
    # a baseline trained shorter than the plan is another set-up: kept beside the plan's run, not instead of it
    record_sine.main(_lines(tmp_path, [_sine_run(0, steps, steps // 2, -0.5)]))
    record = json.loads(values_file.read_text())["vo-sine"]
    assert record["same_setup"] is True and record["values"] == pytest.approx([0.36])
    assert record["other_setups"][0]["same_setup"] is False
    assert record["other_setups"][0]["values"] == pytest.approx([0.5])


def test_every_recorder_writes_only_registered_claims_of_its_figure():
    for module, ids in ((record_separate_tokens, {"vo-separate-one-step", "vo-separate-not-two-steps",
                                                   "vo-separate-copy", "vo-separate-copy-their-measure"}),
                        (record_sine, {"vo-sine", "vo-sine-alignment", "vo-sine-function"})):
        named = set(re.findall(r'"(vo-[a-z0-9-]+)"', inspect.getsource(module)))
        assert named == ids and ids <= {c.id for c in CLAIMS}, named


def test_table_prints_each_seed_and_writes_nothing(tmp_path, values_file, capsys):
    # catches --table writing records (it is for the README) or a row per file instead of per seed in seed order
    runs = [_separate_run(1, 10_000, loss_trained=0.41, loss_zero=0.416), _separate_run(0, 10_000)]
    record_separate_tokens.main(_lines(tmp_path, runs) + ["--table"])
    rows = capsys.readouterr().out.strip().splitlines()
    assert [row.split("|")[1].strip() for row in rows[2:]] == ["0", "1"]
    assert "(plateau)" in rows[3] and "(plateau)" not in rows[2]  # 0.41 is not 10% below the zero predictor's
    record_sine.main(_lines(tmp_path, [_sine_run(0, 100, 100, -0.36)]) + ["--table"])
    assert "| 0 | 100 + 100 |" in capsys.readouterr().out
    assert json.loads(values_file.read_text()) == {"_about": "test"}


def test_sine_functions_are_drawn_from_a_finished_run_only(tmp_path):
    # catches drawing a run cut short (no functions yet) or a separate-token file as Fig. 4
    grid = [i / 10 for i in range(-50, 50)]
    run = dict(_sine_run(0, 100, 100, -0.36), functions={
        "phase": 0.3, "amplitude": 1.2, "context_x": [0.1 * i for i in range(10)], "context_y": [0.0] * 10,
        "query_x": grid, "query_y": [0.0] * 100, "meta": [0.1] * 100, "meta_init": [0.0] * 100,
        "trained": [0.2] * 100, "trained_init": [0.0] * 100, "truth_x": grid, "truth_y": [0.5] * 100})
    (path,) = _lines(tmp_path, [run])
    draw_sine_functions.main([path, "--out", str(tmp_path / "f.png")])
    assert (tmp_path / "f.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    (cut,) = _lines(tmp_path, [_sine_run(0, 100, 100, -0.36)])
    with pytest.raises(SystemExit, match="no 'functions'"):
        draw_sine_functions.main([cut, "--out", str(tmp_path / "g.png")])


def test_every_record_compared_for_agreement_names_its_raw_output_or_says_it_has_none():
    """The sine records keep their driver's file (and it is in the repository); the 40 000-step separate-token record
    kept none, and its row says so."""
    from icl_gd.claims.authors import authors_values
    from icl_gd.claims.summary import raw_output_text

    root = Path(__file__).resolve().parents[1]
    records = authors_values()
    sine = raw_output_text(records["vo-sine"])
    assert sine == "their driver's raw output: docs/authors_check/driver_output/sine_s0.json"
    for record in records.values():
        for path in record.provenance.get("raw_output") or []:
            assert (root / path).is_file(), path
    assert raw_output_text(records["vo-separate-one-step"]).startswith("no raw driver output kept")
