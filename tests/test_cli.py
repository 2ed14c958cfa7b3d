"""The command line: studies, verify, a tiny end-to-end run, and every user mistake as a one-line error."""

import json
import re
import os

import pytest
from typer.testing import CliRunner

from icl_gd.cli import app

runner = CliRunner()
TINY = ["--steps", "20", "--set", "n_test=200", "--set", "n_tune=500", "--set", "n_ood=50",
        "--set", "batch_size=64", "--set", "eval_every=10", "--set", "interpolation_points=3", "--no-progress"]


def _invoke(args):
    result = runner.invoke(app, args)
    return result.exit_code, result.output


def test_version_and_config_listing():
    from icl_gd import __version__

    code, out = _invoke(["--version"])
    assert code == 0 and out.strip() == f"icl-gd {__version__}"
    code, out = _invoke(["config", "multi-layer", "--set", "layers=4", "--set", "recurrent=true"])
    assert code == 0, out
    lines = {line.split()[0]: line for line in out.splitlines()}
    assert lines["model.layers"].split()[1] == "4" and "LSA layers" in lines["model.layers"]
    assert lines["training.steps"].split()[1] == "none" and "authors" in lines["training.steps"]
    # the resolved line shows the authors' values for a recurrent K = 4 stack
    assert "steps=5000" in out and "lr=0.0005" in out and "grad_clip=10.0" in out
    code, out = _invoke(["config", "sine", "--set", "nope=1"])
    assert code == 2 and "unknown --set key 'nope'" in out and "Traceback" not in out


def test_studies_lists_single_layer():
    code, out = _invoke(["studies"])
    assert code == 0 and "single-layer" in out


def test_the_listing_is_each_studys_own_summary_and_presets():
    """`icl-gd studies` reads them from the modules' source (no import): they must be what the modules define."""
    from icl_gd.studies import REGISTRY

    for name in REGISTRY.names():
        study = REGISTRY.get(name)
        assert REGISTRY.card(name) == (study.summary, study.preset_names()), name


def test_studies_and_help_import_neither_torch_nor_a_study():
    """What keeps `icl-gd studies` and `--help` starting in about a second (torch alone takes 1.5-4 s here)."""
    import subprocess
    import sys

    code = ("import sys; from icl_gd.cli import app\n"
            "for args in (['studies'], ['--help'], ['run', '--help']):\n"
            "    try: app(args)\n"
            "    except SystemExit: pass\n"
            "heavy = ('torch', 'matplotlib', 'pandas', 'icl_gd.studies.single_layer')\n"
            "heavy = [m for m in heavy if m in sys.modules]\n"
            "assert not heavy, heavy")
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)


def test_steps_sets_every_steps_key_of_a_study():
    """`run --help` offers --steps for every study: dual-form-lm has one per set-up (book, wiki), and --steps sets
    both (it was "--set key 'steps' is ambiguous"); a sweep's --steps does the same."""
    from icl_gd.core.config import flag_overrides
    from icl_gd.core.study import resolve_study_config
    from icl_gd.studies import get_study

    study = get_study("dual-form-lm")
    config = resolve_study_config(study, steps=5)
    assert config.book.training.steps == 5 and config.wiki.training.steps == 5
    assert flag_overrides(study.config(), "steps", 5) == ["book.training.steps=5", "wiki.training.steps=5"]
    assert flag_overrides(get_study("single-layer").config(), "steps", 5) == ["steps=5"]  # run ids as before
    code, out = _invoke(["config", "dual-form-lm", "--set", "steps=5"])  # --set still asks which one
    assert code == 2 and "--set key 'steps' is ambiguous" in out


@pytest.mark.slow
def test_verify_passes_and_prints_errors():
    code, out = _invoke(["verify"])
    assert code == 0, out
    assert "prop1" in out and "max rel" in out and "FAIL" not in out
    lines = [line for line in out.strip().splitlines() if not line.startswith("     ")]
    details = [line.strip() for line in out.strip().splitlines() if line.startswith("     ")]
    # the statistical checks print the population one-step GD optimum beside its Monte Carlo estimate, both laws,
    # the one-layer theory's four Monte Carlo checks their closed forms beside theirs (docs/theory.md), the five
    # plateau levels L_0..L_4 theirs (docs/theory-plateaus.md) and the finite-task layer's exact error its own
    # (docs/theory-asymptotics.md)
    population = [d for d in details if d.split(":")[0].endswith(" inputs")]
    assert [d.split(":")[0] for d in population] == ["uniform inputs", "gaussian inputs"], details
    assert all("Monte Carlo" in d for d in population)
    assert sum("Monte Carlo" in d for d in details) == 12, details
    n = len(lines) - 1
    assert lines[0].startswith(f"ok   [ 1/{n}]") and lines[-2].startswith(f"ok   [{n}/{n}]")  # numbered as they run
    assert re.fullmatch(rf"verify: {n} of {n} identities hold in float64 \(largest error .* of its tolerance\) "
                        r"in \d+ s", lines[-1])  # the one-line summary


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("run") / "single"
    code, text = _invoke(["run", "single-layer", "--out", str(out), *TINY, "--seeds", "2"])
    assert code == 0, text
    return out


@pytest.mark.slow
def test_tiny_run_writes_everything(tiny_run):
    names = {p.name for p in tiny_run.iterdir()}
    assert {"config.json", "metrics.json", "curves.csv", "ood.csv", "interpolation.csv", "checkpoints",
            "figures"} <= names
    figures = {p.name for p in (tiny_run / "figures").iterdir()}
    for stem in ("loss_curves", "alignment_curves", "ood", "interpolation", "weights"):
        assert {f"{stem}.png", f"{stem}.pdf"} <= figures
    config = json.loads((tiny_run / "config.json").read_text())
    assert config["study"] == "single-layer" and config["config"]["training"]["steps"] == 20
    assert config["config"]["evaluation"]["seeds"] == 2 and config["resolved_training"]["grad_clip"] == 1e-3
    assert config["preset"] == "default"  # which named set-up the run used is recorded beside its keys
    metrics = json.loads((tiny_run / "metrics.json").read_text())
    for key in ("loss_trained", "loss_gd", "lr_gd", "loss_zero", "loss_interpolated", "cos_sensitivity",
                "sensitivity_diff", "pred_diff", "eta_trained", "untrained_cos_sensitivity",
                "gd_eta_x2_pred_diff", "gd_eta_half_sensitivity_diff"):
        assert isinstance(metrics["mean"][key], float), key
    assert set(metrics["seeds"]) == {"0", "1"}
    header = (tiny_run / "curves.csv").read_text().splitlines()[0]
    assert header == "step,seed,model,metric,value"
    assert (tiny_run / "ood.csv").read_text().splitlines()[0] == "seed,sweep,value,model,loss"
    timings = json.loads((tiny_run / "timings.json").read_text())  # how long it took, beside its results
    (attempt,) = timings["attempts"]
    assert attempt["outcome"] == "finished" and attempt["threads"] == 1
    assert {"training", "training > evaluation", "out-of-distribution sweeps"} <= set(attempt["phases_wall_s"]), \
        attempt["phases_wall_s"]


@pytest.mark.slow
def test_finished_run_needs_force_and_same_seed_gives_same_numbers(tiny_run, tmp_path):
    code, out = _invoke(["run", "single-layer", "--out", str(tiny_run), *TINY])
    assert code == 2 and "already holds a finished run" in out and "Traceback" not in out
    other = tmp_path / "again"
    code, _ = _invoke(["run", "single-layer", "--out", str(other), *TINY, "--seeds", "2", "--no-figures"])
    assert code == 0
    first = json.loads((tiny_run / "metrics.json").read_text())
    second = json.loads((other / "metrics.json").read_text())
    assert first == second  # drawing no figure changes no number
    assert not (other / "figures").exists() and json.loads((other / "config.json").read_text())["figures"] is False


@pytest.mark.parametrize("args,message", [
    (["run", "nope", "--out", "{out}"], "unknown study 'nope'"),
    (["run", "single-layer", "--out", "{out}", "--set", "d=0"], "d must be a positive integer, got 0"),
    (["run", "single-layer", "--out", "{out}", "--steps", "-5"], "steps must be a positive integer, got -5"),
    (["run", "single-layer", "--out", "{out}", "--set", "dd=3"], "unknown --set key 'dd'"),
    (["run", "single-layer", "--out", "{out}", "--set", "d=ten"], "d='ten' is not an integer"),
    (["run", "single-layer", "--out", "{out}", "--set", "recurrent=maybe"], "is not a boolean"),
    (["run", "single-layer", "--out", "{out}", "--set", "lr"], "KEY=VALUE"),
    (["run", "single-layer", "--out", "{out}", "--device", "tpu"], "--device"),
    # non-finite floats, and a scale whose products overflow (was a 52-line LinAlgError from the GD tuner)
    (["run", "single-layer", "--out", "{out}", "--set", "input_range=inf"], "input_range must be a finite number"),
    (["run", "single-layer", "--out", "{out}", "--set", "input_range=1e300"], "input_range must be at most"),
    (["run", "single-layer", "--out", "{out}", "--set", "weight_scale=inf"], "weight_scale must be a finite number"),
    (["run", "single-layer", "--out", "{out}", "--set", "lr=nan"], "lr must be a finite number"),
    (["run", "sine", "--out", "{out}", "--set", "amplitude=0.1,inf"], "amplitude must be a finite number"),
    # a path part longer than the file system's name limit (was a 45-line OSError from prepare_run_dir)
    (["run", "single-layer", "--out", "{out}/" + "a" * 300, "--steps", "2"], "File name too long"),
    (["sweep", "single-layer", "--out", "{out}/" + "a" * 300, "--grid", "n_context=5"], "File name too long"),
    # an option error names the option typed
    (["sweep", "single-layer", "--out", "{out}", "--grid", "dd=1,2"], "unknown --grid key 'dd'"),
    (["sweep", "dual-form-lm", "--out", "{out}", "--grid", "lr=1,2"], "--grid key 'lr' is ambiguous"),
])
def test_usage_errors_exit_2_with_one_line(tmp_path, args, message):
    code, out = _invoke([a.format(out=tmp_path / "o") for a in args])
    assert code == 2, out
    assert message in out and "Traceback" not in out
    assert len(out.strip().splitlines()) == 1


def test_unwritable_out_is_a_usage_error(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        if os.access(locked, os.W_OK):  # root ignores permissions: use a path under a file instead
            target = tmp_path / "afile"
            target.write_text("x")
            out_dir = target / "sub"
        else:
            out_dir = locked / "sub"
        code, out = _invoke(["run", "single-layer", "--out", str(out_dir), *TINY])
        assert code == 2 and "--out" in out and "Traceback" not in out
    finally:
        locked.chmod(0o700)


@pytest.mark.slow
def test_damaged_checkpoint_is_a_one_line_notice_not_a_traceback(tiny_run, tmp_path):
    out = tmp_path / "damaged"
    args = ["run", "single-layer", "--out", str(out), *TINY, "--set", "checkpoint_every=10", "--no-figures"]
    assert _invoke(args)[0] == 0
    checkpoint = out / "checkpoints" / "trained_seed0.pt"
    checkpoint.write_bytes(checkpoint.read_bytes()[:100])
    (out / "metrics.json").unlink()  # as if interrupted after the damage
    code, text = _invoke(args)
    assert code == 0 and "Traceback" not in text
    notices = [line for line in text.splitlines() if line.startswith("icl-gd: notice:")]
    resuming = [line for line in notices if "resuming the unfinished run" in line]  # the run says it takes up one
    notice = [line for line in notices if line not in resuming]
    assert len(resuming) == 1 and len(notice) == 1 and "trained_seed0.pt is unreadable" in notice[0]


def test_out_of_memory_is_a_one_line_error_exit_1(tmp_path, monkeypatch):
    import icl_gd.studies.single_layer as single_layer

    def allocate(*args, **kwargs):  # what torch's CPU allocator raises when a tensor does not fit
        raise RuntimeError("[enforce fail at alloc_cpu.cpp:121] data. DefaultCPUAllocator: can't allocate memory: "
                           "you tried to allocate 44000000000 bytes. Error code 12 (Cannot allocate memory)")

    monkeypatch.setattr(single_layer.RegressionRun, "__init__", allocate)
    code, out = _invoke(["run", "single-layer", "--out", str(tmp_path / "oom"), *TINY])
    assert code == 1 and "out of memory" in out and "batch_size" in out and "Traceback" not in out
    assert len(out.strip().splitlines()) == 1


def test_divergence_is_a_runtime_error_exit_1(tmp_path):
    code, out = _invoke(["run", "single-layer", "--out", str(tmp_path / "nan"), *TINY, "--set", "lr=1e8",
                         "--set", "grad_clip=none"])
    assert code == 1, out
    assert "diverged" in out and "Traceback" not in out
    assert not (tmp_path / "nan" / "metrics.json").exists()


@pytest.mark.slow
def test_interrupted_study_resumes_to_the_same_numbers(tiny_run, tmp_path, monkeypatch):
    import icl_gd.regression.study as study

    original = study.scored_rows
    calls = {"n": 0}

    def interrupt_once(step, *args, **kwargs):
        if step == 20 and calls["n"] == 0:
            calls["n"] += 1
            raise KeyboardInterrupt
        return original(step, *args, **kwargs)

    monkeypatch.setattr(study, "scored_rows", interrupt_once)
    out = tmp_path / "resumed"
    args = ["run", "single-layer", "--out", str(out), *TINY, "--seeds", "2", "--set", "checkpoint_every=10",
            "--no-figures"]
    code, text = _invoke(args)
    assert code == 130 and "resume" in text
    assert (out / "checkpoints" / "trained_seed0.pt").exists() and not (out / "metrics.json").exists()
    code, text = _invoke(args)
    assert code == 0, text
    uninterrupted = tmp_path / "straight"
    code, _ = _invoke(["run", "single-layer", "--out", str(uninterrupted), *TINY, "--seeds", "2",
                       "--set", "checkpoint_every=10", "--no-figures"])
    assert json.loads((out / "metrics.json").read_text()) == json.loads((uninterrupted / "metrics.json").read_text())


@pytest.mark.slow
def test_a_resumed_training_bar_starts_at_a_loss_not_nan(tmp_path, monkeypatch):
    """The bar's first update is the loss the run resumes from (it showed `loss nan` until the next evaluation)."""
    import math
    from contextlib import contextmanager

    import icl_gd.regression.training as training

    updates = []

    @contextmanager
    def recording_bar(total, description, enabled):
        yield lambda step, loss: updates.append((step, loss))

    monkeypatch.setattr(training, "progress_bar", recording_bar)
    out = tmp_path / "run"
    args = ["run", "single-layer", "--out", str(out), *[a for a in TINY if a != "--no-progress"], "--no-figures"]
    code, text = _invoke(args)
    assert code == 0, text
    (out / "metrics.json").unlink()  # an unfinished run: the rerun resumes from the final checkpoint
    updates.clear()
    code, text = _invoke(args)
    assert code == 0, text
    assert updates and updates[0][0] == 20 and math.isfinite(updates[0][1]), updates
