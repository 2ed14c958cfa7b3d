"""Faults a user meets in a first hour, each held to the house rule: a user mistake is one line naming the bad value
and exit 2, checked before any training; a failure inside icl-gd (a diverged training) exits 1 naming what to
change; nothing ends in a traceback or in silence."""

from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from icl_gd.cli import app


def _invoke(args):
    result = CliRunner().invoke(app, [str(a) for a in args])
    return result.exit_code, result.output


def _one_error_line(text):
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return len(lines) == 1 and lines[0].startswith("icl-gd: error: ") and "Traceback" not in text


# ------------------------------------------------------------------ online-layers' model settings
@pytest.mark.parametrize("key, value", [("decay", "2"), ("decay", "-0.5"), ("decay", "1"), ("beta", "-1"),
                                        ("beta", "0"), ("lam", "-1"), ("init_scale", "0"), ("init_scale", "1e9")])
def test_online_layers_model_settings_are_refused_in_the_config(key, value):
    code, output = _invoke(["config", "online-layers", "--set", f"model.{key}={value}"])
    assert code == 2, output
    assert _one_error_line(output) and key in output, output


def test_online_layers_bad_decay_is_refused_before_any_training(tmp_path):
    out = tmp_path / "run"
    code, output = _invoke(["run", "online-layers", "--out", out, "--steps", "20", "--set", "model.decay=2",
                            "--no-progress", "--no-figures"])
    assert code == 2, output
    assert _one_error_line(output) and "decay" in output, output
    assert not out.exists() or not any(out.iterdir())


# ------------------------------------------------------------------ reproduce --out FILE
@pytest.mark.parametrize("extra", [[], ["--plan"], ["--judge-finished"]])
def test_reproduce_refuses_an_out_that_is_a_file_as_run_does(tmp_path, extra):
    out = tmp_path / "a-file"
    out.write_text("mine\n")
    code, output = _invoke(["reproduce", "--out", out, "--only", "vo-single-loss", "--no-progress", *extra])
    assert code == 2, output
    assert _one_error_line(output) and f"--out {out} exists and is not a directory" in output, output
    assert out.read_text() == "mine\n"


def test_reproduce_refuses_an_out_below_a_file(tmp_path):
    (tmp_path / "a-file").write_text("mine\n")
    out = tmp_path / "a-file" / "below"
    code, output = _invoke(["reproduce", "--out", out, "--only", "vo-single-loss", "--no-progress"])
    assert code == 2, output
    assert _one_error_line(output) and str(out) in output, output


def test_rejudge_refuses_an_out_that_is_a_file(tmp_path):
    out = tmp_path / "a-file"
    out.write_text("mine\n")
    root = Path(__file__).resolve().parents[1]
    code, output = _invoke(["reproduce", "--rejudge", root / "docs" / "claims-table.json", "--out", out])
    assert code == 2, output
    assert _one_error_line(output) and "exists and is not a directory" in output, output
    assert out.read_text() == "mine\n"


# ------------------------------------------------------------------ online-layers' memory, estimated before it runs
def test_online_layers_declares_its_memory_and_a_huge_d_is_refused_before_it_runs():
    from icl_gd.core.errors import ConfigError
    from icl_gd.core.study import resolve_study_config
    from icl_gd.platform.memory import check_memory, estimate_run_memory
    from icl_gd.studies import get_study

    spec = get_study("online-layers")
    for preset in spec.preset_names():  # the presets' runs fit in a GiB: never refused on a laptop
        parts = estimate_run_memory(spec, resolve_study_config(spec, preset, []))
        assert {"training.batch_size", "evaluation.n_test", "evaluation.n_tune"} <= set(parts), parts
        assert 0 < max(parts.values()) < 2**30, (preset, parts)
    huge = resolve_study_config(spec, "default", ["task.d=100000"])
    # the batch's tokens alone: 512 tasks of 21 tokens of width 100 001 in float32
    assert estimate_run_memory(spec, huge)["training.batch_size"] >= 512 * 21 * 100_001 * 4
    with pytest.raises(ConfigError, match="needs at least"):
        check_memory(spec, huge, torch.device("cpu"), available=24 * 2**30)


def test_online_layers_with_a_huge_d_is_one_line_and_leaves_nothing(tmp_path):
    out = tmp_path / "run"
    code, output = _invoke(["run", "online-layers", "--out", out, "--set", "task.d=100000", "--no-progress"])
    assert code == 2, output
    assert _one_error_line(output) and "needs at least" in output and "GiB" in output, output
    assert not out.exists()


# ------------------------------------------------------------------ a diverged training is a training failure
ONLINE_TINY = ["--steps", "20", "--set", "batch_size=32", "--set", "n_test=128", "--set", "n_tune=128",
               "--set", "eval_every=10", "--set", "n_context=6", "--no-progress", "--no-figures"]


@pytest.mark.parametrize("setting, named", [("model.beta=1e9", "model.*"), ("training.lr=1e9", "training.lr")])
def test_a_diverged_training_is_exit_1_naming_the_setting_not_an_internal_value(tmp_path, setting, named):
    code, output = _invoke(["run", "online-layers", "--out", tmp_path / "run", "--set", setting, *ONLINE_TINY])
    assert code == 1, output
    assert _one_error_line(output), output
    assert "diverged at step" in output and named in output, output
    assert "got nan" not in output and "tensor(" not in output and "grad_fn" not in output, output


# ------------------------------------------------------------------ compare: --seed and --checkpoint
LEAST_SQUARES = ("import torch\ndef build():\n"
                 "    return lambda x, y, q: (q[:, None] @ torch.linalg.pinv(x) @ y[..., None])[:, 0, 0]\n")
LINEAR_MODULE = ("import torch\ndef build(d):\n    m = torch.nn.Linear(d, 1)\n    m.layout = 'arguments'\n"
                 "    m.forward = lambda x, y, q: torch.nn.Linear.forward(m, q)[:, 0]\n    return m\n")


def test_compare_refuses_a_negative_seed_naming_it(tmp_path):
    model_file = tmp_path / "ls_model.py"
    model_file.write_text(LEAST_SQUARES)
    out = tmp_path / "cmp"
    code, output = _invoke(["compare", "--model", f"{model_file}:build", "--out", out, "--seed", "-1",
                            "--d", "3", "--n", "6", "--steps", "1", "--no-figures"])
    assert code == 2, output
    assert _one_error_line(output) and "--seed" in output and "-1" in output and "--model" not in output, output
    assert not out.exists()


@pytest.mark.parametrize("content", [b"not a checkpoint at all", b"PK\x03\x04 truncated zip"])
def test_compare_refuses_a_corrupt_checkpoint_with_exit_2_naming_the_file(tmp_path, content):
    model_file = tmp_path / "linear_model.py"
    model_file.write_text(LINEAR_MODULE)
    checkpoint = tmp_path / "weights.pt"
    checkpoint.write_bytes(content)
    out = tmp_path / "cmp"
    code, output = _invoke(["compare", "--model", f"{model_file}:build", "--checkpoint", checkpoint, "--out", out,
                            "--d", "3", "--n", "6", "--steps", "1", "--no-figures"])
    assert code == 2, output
    assert _one_error_line(output) and f"--checkpoint {checkpoint}" in output, output
    assert not out.exists()


# ------------------------------------------------------------------ reproduce --judge-finished on a damaged folder
def _finished_folder(root, broken):
    """A reproduce folder holding the runs of claim vo-single-loss, ``broken`` of them with a metrics.json that is
    not a run's, and a claims.json of an earlier judgement."""
    from icl_gd.claims.plan import plan_dirs, select_claims

    (claim,) = select_claims(["vo-single-loss"])
    dirs = [d for plan in plan_dirs(claim, root, False) for d in plan]
    for i, d in enumerate(dirs):
        d.mkdir(parents=True)
        (d / "metrics.json").write_text(broken[i] if i < len(broken) else '{"mean": {}, "std": {}, "seeds": {}}')
    (root / "claims.json").write_text("the earlier judgement\n")
    return dirs


@pytest.mark.parametrize("broken", [["{not json"], ["[]", "", '{"std": {}}']])
def test_judge_finished_names_the_damaged_runs_and_keeps_claims_json(tmp_path, broken):
    dirs = _finished_folder(tmp_path, broken)
    code, output = _invoke(["reproduce", "--judge-finished", "--out", tmp_path, "--only", "vo-single-loss"])
    assert code != 0, output
    assert _one_error_line(output), output
    for d in dirs[:len(broken)]:
        assert d.name in output, output
    assert dirs[len(broken)].name not in output
    assert (tmp_path / "claims.json").read_text() == "the earlier judgement\n"
    assert not (tmp_path / "report.md").exists()


def test_judge_finished_and_rejudge_together_are_refused(tmp_path):
    root = Path(__file__).resolve().parents[1]
    code, output = _invoke(["reproduce", "--judge-finished", "--rejudge", root / "docs" / "claims-table.json",
                            "--out", tmp_path / "out"])
    assert code == 2, output
    assert _one_error_line(output) and "--judge-finished" in output and "--rejudge" in output, output
    assert not (tmp_path / "out").exists()


# ------------------------------------------------------------------ compare: --steps bounded, progress shown
def test_compare_refuses_steps_beyond_its_bound_with_the_reason(tmp_path):
    model_file = tmp_path / "ls_model.py"
    model_file.write_text(LEAST_SQUARES)
    code, output = _invoke(["compare", "--model", f"{model_file}:build", "--out", tmp_path / "cmp", "--steps",
                            "100000"])
    assert code == 2, output
    assert _one_error_line(output) and "steps" in output and "64" in output and "100000" in output, output
    assert not (tmp_path / "cmp").exists()
    code, output = _invoke(["compare", "--help"])
    assert "64" in output


def test_compare_says_how_far_its_tuning_has_come_on_stderr(tmp_path, monkeypatch):
    import icl_gd.core.progress as progress

    monkeypatch.setattr(progress, "QUIET_S", 0.0)  # a line at once and then every 50 ms instead of 5 s and 30 s
    monkeypatch.setattr(progress, "EVERY_S", 0.05)
    model_file = tmp_path / "ls_model.py"
    model_file.write_text(LEAST_SQUARES)
    result = CliRunner().invoke(app, ["compare", "--model", f"{model_file}:build", "--out", str(tmp_path / "cmp"),
                                      "--d", "3", "--n", "6", "--steps", "2", "--no-figures"])
    assert result.exit_code == 0, result.output
    assert "icl-gd: tuning the references: running for" in result.stderr, result.stderr
    assert "step counts tuned" in result.stderr, result.stderr
    assert "icl-gd:" not in result.stdout


# ------------------------------------------------------------------ help texts
HELP_COMMANDS = ["run", "sweep", "config", "studies", "verify", "reproduce", "compare"]


@pytest.mark.parametrize("command", HELP_COMMANDS)
def test_help_texts_show_what_was_written_not_emoji(command):
    import re

    result = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert not re.search("[\U0001F000-\U0001FAFF\u2600-\u27BF]", result.output), result.output
    if command == "compare":
        assert "FILE.py:FACTORY" in result.output, result.output


def test_plan_with_fixed_seeds_says_no_more_seeds_run(tmp_path):
    args = ["reproduce", "--plan", "--out", tmp_path / "out", "--only", "vo-single-loss"]
    code, output = _invoke(args)
    assert code == 0 and "more runs" in output, output  # the plan may grow while the claim is unsettled
    code, output = _invoke([*args, "--fixed-seeds"])
    assert code == 0, output
    assert "more runs" not in output and "more seeds" not in output.replace("no more seeds", ""), output
    assert "--fixed-seeds: each plan runs its declared seeds only" in output, output


@pytest.mark.parametrize("command", ["run", "sweep", "config"])
def test_preset_help_names_every_studys_presets_from_the_registry(command):
    from icl_gd.studies import REGISTRY

    result = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "400"})
    text = " ".join(result.output.split())
    assert "default, or paper" not in text
    for name in REGISTRY.names():
        for preset in REGISTRY.card(name)[1]:
            if preset != "default":
                assert f"{preset} (" in text and name in text.split(f"{preset} (", 1)[1].split(")")[0], (preset, text)


@pytest.mark.parametrize("command", HELP_COMMANDS)
def test_help_texts_are_not_cut_at_80_columns(command):
    result = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    assert "…" not in result.output, result.output


def test_update_readme_is_still_update_tables_other_name(tmp_path):
    root = Path(__file__).resolve().parents[1]
    page = tmp_path / "plain.md"
    page.write_text("plain text\n")
    code, output = _invoke(["reproduce", "--rejudge", root / "docs" / "claims-table.json", "--update-readme", page])
    assert code == 2 and "no markers" in output, output  # read as --update-table: the page is checked
    code, output = _invoke(["reproduce", "--rejudge", root / "docs" / "claims-table.json", "--update-readme", page,
                            "--update-table", page])
    assert code == 2 and _one_error_line(output) and "give one of them" in output, output
    assert page.read_text() == "plain text\n"


# ------------------------------------------------------------------ progress lines in a log
def test_progress_lines_are_not_cut_or_wrapped_when_not_on_a_terminal(capsys):
    from icl_gd.core.progress import progress_bar
    from icl_gd.platform.sweep.progress import SweepProgress

    line = "[1/1] done    " + "single-layer__" + "__".join(f"key{i}=value{i}" for i in range(8)) + " (3.5 s, loss=0.1)"
    sweep = SweepProgress(total=1, enabled=True)
    sweep.log(line)
    sweep.close()
    description = "a_model_with_a_long_name_seeds0-9_" * 3
    with progress_bar(4, description, True) as update:
        update(4, 0.25)
    err = capsys.readouterr().err
    assert line in err.splitlines(), err
    assert description in err, err


# ------------------------------------------------------------------ a resumed run says so
SINGLE_TINY = ["--steps", "20", "--set", "n_test=200", "--set", "n_tune=500", "--set", "n_ood=50",
               "--set", "batch_size=64", "--set", "eval_every=10", "--set", "interpolation_points=3", "--no-progress",
               "--no-figures"]


def test_a_resumed_run_says_that_it_resumes(tmp_path):
    out = tmp_path / "run"
    result = CliRunner().invoke(app, ["run", "single-layer", "--out", str(out), *SINGLE_TINY])
    assert result.exit_code == 0, result.output
    assert "resuming" not in result.stderr
    (out / "metrics.json").unlink()  # as if it had been stopped before its end, its checkpoints kept
    result = CliRunner().invoke(app, ["run", "single-layer", "--out", str(out), *SINGLE_TINY])
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stderr.splitlines() if "resuming" in line]
    assert len(lines) == 1 and str(out) in lines[0] and "checkpoint" in lines[0], result.stderr


# ------------------------------------------------------------------ a small fixed task set over-fits; it does not diverge
FIXED_TINY = ["--steps", "300", "--set", "train_tasks=8", "--set", "batch_size=8", "--set", "n_test=200",
              "--set", "n_tune=500", "--set", "n_ood=50", "--set", "eval_every=100", "--set", "interpolation_points=3",
              "--no-progress", "--no-figures"]


def test_a_small_fixed_task_set_is_said_to_over_fit_not_to_diverge(tmp_path):
    import json

    out = tmp_path / "run"
    result = CliRunner().invoke(app, ["run", "single-layer", "--out", str(out), *FIXED_TINY])
    assert result.exit_code == 0, result.output
    mean = json.loads((out / "metrics.json").read_text())["mean"]
    assert mean["loss_trained"] > mean["loss_zero"]  # the test loss the fixed-task claims measure
    assert "diverged" not in mean and "diverged" not in result.stderr, result.stderr
    notices = [line for line in result.stderr.splitlines() if line.startswith("icl-gd: notice: ")]
    assert len(notices) == 1 and "over-fits its 8 fixed training tasks" in notices[0], result.stderr


def test_a_fixed_task_set_that_diverges_is_still_flagged(tmp_path):
    import json

    out = tmp_path / "run"
    result = CliRunner().invoke(app, ["run", "single-layer", "--out", str(out), *FIXED_TINY, "--set",
                                      "input_range=1e5", "--steps", "20"])
    assert result.exit_code == 0, result.output
    assert json.loads((out / "metrics.json").read_text())["mean"]["diverged"] == ["trained"]
    assert "trained (seed 0) diverged" in result.stderr, result.stderr


# ------------------------------------------------------------------ a damaged kept estimates file is not read in silence
def test_plan_warns_of_each_problem_of_the_kept_estimates(tmp_path, monkeypatch):
    import json

    import icl_gd.claims.estimates as estimates

    kept = json.loads(estimates.ESTIMATES.read_text())
    kept["plans"]["single-layer default"]["first_seed_s"] = "half a minute"
    kept["plans"]["single-layer default"]["later_seed_s"] = -5
    missing = ["single-layer default train_tasks=128 batch_size=128"]
    for name in missing:
        del kept["plans"][name]
    damaged = tmp_path / "estimates.json"
    damaged.write_text(json.dumps(kept))
    monkeypatch.setattr(estimates, "ESTIMATES", damaged)
    estimates._kept.cache_clear()
    try:
        result = CliRunner().invoke(app, ["reproduce", "--plan", "--out", str(tmp_path / "out"), "--only",
                                          "vo-single-loss,vo-fixed-tasks-128-fails"])
    finally:
        estimates._kept.cache_clear()
    assert result.exit_code == 0, result.output
    notices = [line for line in result.stderr.splitlines() if line.startswith("icl-gd: notice: ")]
    assert any("first_seed_s" in n and "'half a minute'" in n for n in notices), result.stderr
    assert any("later_seed_s" in n and "-5" in n for n in notices), result.stderr
    assert missing and all(any(f"no estimate for plan {name!r}" in n for n in notices) for name in missing), notices
    assert len(notices) == 2 + len(missing), notices


# ------------------------------------------------------------------ --update-estimates changes only what changed
def test_merging_measured_estimates_changes_only_the_numbers_that_changed(tmp_path):
    import difflib
    import json

    from icl_gd.claims.estimates import merge_into_kept

    kept = tmp_path / "kept.json"
    kept.write_text(json.dumps({"_about": "about", "plans": {
        "zeta default": {"first_seed_s": 10.0, "later_seed_s": 20.0, "quick_seed_s": 5.0, "measured": "note z"},
        "alpha default": {"first_seed_s": 1.0, "later_seed_s": 2.0, "quick_seed_s": 3.0, "measured": "note a"},
        "beta default": {"first_seed_s": 7.0, "later_seed_s": 7.0, "quick_seed_s": 7.0, "measured": "note b"},
    }}, indent=2) + "\n")
    before = kept.read_text()
    measured = tmp_path / "estimates.json"
    measured.write_text(json.dumps({"_about": "this run", "plans": {
        "alpha default": {"first_seed_s": 1.0, "later_seed_s": 4.0, "quick_seed_s": None, "measured": "today"},
        "beta default": {"first_seed_s": 7.0, "later_seed_s": None, "quick_seed_s": None, "measured": "today"},
    }}))
    assert merge_into_kept(measured, kept) == ["alpha default"]  # beta's figure is the kept one: nothing changed
    after = json.loads(kept.read_text())
    assert list(after["plans"]) == ["zeta default", "alpha default", "beta default"]  # the file's order
    assert after["plans"]["alpha default"] == {"first_seed_s": 1.0, "later_seed_s": 4.0, "quick_seed_s": 3.0,
                                               "measured": "note a; later_seed_s from today"}
    changed = [line for line in difflib.unified_diff(before.splitlines(), kept.read_text().splitlines(), n=0,
                                                      lineterm="") if line[:1] in "+-" and line[:3] not in ("+++", "---")]
    assert len(changed) == 4, changed  # two lines out, two in: alpha's later_seed_s and its note


# ------------------------------------------------------------------ the authors' drivers and recorders answer --help
AUTHORS_CHECK = Path(__file__).resolve().parents[1] / "docs" / "authors_check"


@pytest.mark.parametrize("script", sorted(p.name for p in AUTHORS_CHECK.glob("*.py") if not p.name.startswith("_")))
def test_every_authors_check_script_answers_help_without_jax(script):
    import subprocess
    import sys

    done = subprocess.run([sys.executable, str(AUTHORS_CHECK / script), "--help"], capture_output=True, text=True,
                          timeout=120, cwd=AUTHORS_CHECK)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage:") and "Traceback" not in done.stderr, (done.stdout, done.stderr)
