"""Faults end in one line and a non-zero exit, never a traceback: a full disk while results are written (the run
stays resumable), an absurd seed count (refused at once), a Ray address where nothing listens (refused in
seconds, not retried for minutes); and the options run, sweep and reproduce share."""

import errno
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from icl_gd.cli import app
from icl_gd.core.errors import ConfigError, ResultWriteError
from icl_gd.core.results import atomic_write_text
from icl_gd.core.study import resolve_study_config
from icl_gd.platform.memory import check_memory, estimate_run_memory
from icl_gd.platform.sweep import plan_sweep
from icl_gd.studies import REGISTRY, get_study

ROOT = Path(__file__).resolve().parents[1]
TINY = ["--steps", "20", "--set", "n_test=200", "--set", "n_tune=500", "--set", "n_ood=50",
        "--set", "batch_size=64", "--set", "eval_every=10", "--set", "interpolation_points=3", "--no-progress"]


def _invoke(args):
    result = CliRunner().invoke(app, args)
    return result.exit_code, result.output


def _one_error_line(text):
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return len(lines) == 1 and lines[0].startswith("icl-gd: error: ") and "Traceback" not in text


# ------------------------------------------------------------------ a full disk
def _disk_full_in(monkeypatch, folder):
    """Every atomic write into a directory named ``folder`` fails as on a full disk."""
    import icl_gd.core.results as results

    real = results._create_sibling

    def create(path):
        if Path(path).parent.name == folder:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(path)

    monkeypatch.setattr(results, "_create_sibling", create)


def test_a_failed_write_names_the_path_and_the_reason_and_keeps_the_old_file(tmp_path, monkeypatch):
    path = tmp_path / "table.csv"
    atomic_write_text(path, "old\n")

    import icl_gd.core.results as results

    def fsync(fd):  # where a full disk often shows: the data the kernel could not place
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(results.os, "fsync", fsync)
    with pytest.raises(ResultWriteError) as caught:
        atomic_write_text(path, "new\n")
    assert str(caught.value) == (f"cannot write {path}: No space left on device; free space and rerun the same "
                                 "command to resume")
    assert caught.value.errno == errno.ENOSPC and isinstance(caught.value, OSError)
    monkeypatch.undo()
    assert path.read_text() == "old\n" and [p.name for p in tmp_path.iterdir()] == ["table.csv"]  # no temp file


@pytest.mark.slow
def test_a_full_disk_during_a_run_is_one_line_exit_1_and_the_rerun_finishes(tmp_path, monkeypatch):
    out = tmp_path / "run"
    _disk_full_in(monkeypatch, "figures")
    code, text = _invoke(["run", "single-layer", "--out", str(out), *TINY])
    assert code == 1, text
    assert _one_error_line(text), text
    assert f"cannot write {out / 'figures'}" in text and "No space left on device" in text and "rerun" in text
    assert not (out / "metrics.json").exists()  # not finished, so a rerun resumes it
    assert (out / "checkpoints" / "trained_seed0.pt").is_file()
    monkeypatch.undo()
    code, text = _invoke(["run", "single-layer", "--out", str(out), *TINY])
    assert code == 0, text
    assert (out / "metrics.json").is_file() and (out / "figures" / "loss_curves.png").is_file()


# ------------------------------------------------------------------ an absurd seed count
def _refuse_to_go_further(monkeypatch, module, name, what):
    """Turn reaching ``module.name`` into a quick failure: without the refusal under test the command would
    build a billion-entry list for minutes, and take the machine's memory with it."""
    def reached(*args, **kwargs):
        raise AssertionError(f"{what} was not refused before {name}")

    monkeypatch.setattr(module, name, reached, raising=False)


@pytest.mark.parametrize("study,key", [("single-layer", "evaluation.seeds"), ("dual-form", "seeds")])
def test_an_absurd_seed_count_is_refused_at_once(tmp_path, monkeypatch, study, key):
    import icl_gd.platform.runner as runner

    _refuse_to_go_further(monkeypatch, runner, "prepare_run_dir", "--seeds 999999999")
    out = tmp_path / "run"
    # "at once" is the order of the checks, asserted by the refusal above: no wall-clock bound (the machine is shared)
    code, text = _invoke(["run", study, "--out", str(out), "--seeds", "999999999", "--no-progress"])
    assert code == 2 and _one_error_line(text), text
    assert f"({key}=999999999)" in text and "GiB free" in text and "lower seeds" in text
    assert not out.exists()


def test_legitimate_seed_counts_pass_the_memory_check():
    config = resolve_study_config(get_study("single-layer"), "default", ["batch_size=2048"], seeds=5)
    study = get_study("single-layer")
    check_memory(study, config, torch.device("cpu"))  # no ConfigError
    assert config.evaluation.seeds == 5 and config.training.batch_size == 2048
    one = resolve_study_config(study, "default", ["batch_size=2048"], seeds=1)
    assert estimate_run_memory(study, config)["evaluation.seeds"] == \
        5 * estimate_run_memory(study, one)["evaluation.seeds"] > 0


@pytest.mark.parametrize("seeds", [100_001, 999_999_999])
def test_an_absurd_sweep_is_refused_at_once(tmp_path, monkeypatch, seeds):
    import icl_gd.core.study as study_module
    import icl_gd.platform.sweep.plan as plan

    _refuse_to_go_further(monkeypatch, study_module, "resolve_study_config", f"--seeds {seeds}")
    if seeds > 2 * plan.MAX_RUNS:
        _refuse_to_go_further(monkeypatch, plan, "range", f"--seeds {seeds}")  # the seed list itself
    # "at once": refused before the config is resolved or the seed list built (the refusals above), not timed
    code, text = _invoke(["sweep", "single-layer", "--out", str(tmp_path / "s"), "--seeds", str(seeds),
                          "--no-progress"])
    assert code == 2 and _one_error_line(text), text
    assert f"--seeds {seeds} times 1 grid point(s) is {seeds} runs" in text and "(100000," in text
    assert not (tmp_path / "s").exists()


def test_a_sweep_at_the_limit_is_planned():
    assert len(plan_sweep("single-layer", {"lr": ["1", "2"]}, 50_000)) == 100_000
    with pytest.raises(ConfigError, match="100002 runs"):
        plan_sweep("single-layer", {"lr": ["1", "2"]}, 50_001)


# ------------------------------------------------------------------ options shared by run, sweep and reproduce
def test_run_sweep_and_reproduce_share_their_options():
    def options(command):
        code, text = _invoke([command, "--help"])
        assert code == 0, text
        return " ".join(text.replace("│", " ").split())  # the help's words, without rich's boxes and wrapping

    shared = ["--steps", "--seeds", "--preset", "--set", "--device", "--threads", "--progress"]
    run, sweep, reproduce = options("run"), options("sweep"), options("reproduce")
    assert all(name in run and name in sweep for name in shared)
    assert all(name in sweep and name in reproduce for name in ["--backend", "--workers", "--address", "--device",
                                                                 "--threads", "--progress"])
    assert "`sweep --seeds` makes one run per seed instead" in run and "one run (runs/<run_id>/) each" in sweep


def test_sweep_steps_reach_every_run_and_change_its_id(tmp_path, monkeypatch):
    import icl_gd.platform.sweep as sweep_module

    seen = {}

    def fake_run_sweep(specs, out, **kwargs):
        seen.setdefault("specs", []).append(list(specs))
        seen["threads"] = kwargs["threads"]
        return []

    monkeypatch.setattr(sweep_module, "run_sweep", fake_run_sweep)
    monkeypatch.setattr(sweep_module, "write_sweep_results", lambda *a, **k: None)
    base = ["sweep", "single-layer", "--out", str(tmp_path), "--grid", "lr=0.001,0.002", "--seeds", "2",
            "--no-progress"]
    assert _invoke([*base, "--steps", "20", "--threads", "2"])[0] == 0
    assert _invoke(base)[0] == 0
    with_steps, without = seen["specs"]
    assert len(with_steps) == 4 and seen["threads"] is None
    study = get_study("single-layer")
    for spec in with_steps:
        assert resolve_study_config(study, spec.preset, spec.overrides).training.steps == 20
    assert resolve_study_config(study, without[0].preset, without[0].overrides).training.steps is None
    assert not {s.run_id() for s in with_steps} & {s.run_id() for s in without}  # 20 steps is another run
    code, text = _invoke([*base, "--steps", "-5"])
    assert code == 2 and _one_error_line(text) and "steps must be a positive integer, got -5" in text


def test_sweep_threads_are_each_runs_threads(tmp_path, monkeypatch):
    import icl_gd.platform.sweep as sweep_module

    seen, real_run_sweep = {}, sweep_module.run_sweep
    monkeypatch.setattr(sweep_module, "run_sweep", lambda specs, out, **kwargs: seen.update(kwargs) or [])
    monkeypatch.setattr(sweep_module, "write_sweep_results", lambda *a, **k: None)
    cores = os.cpu_count() or 1
    assert _invoke(["sweep", "single-layer", "--out", str(tmp_path), "--threads", str(cores), "--no-progress"])[0] == 0
    assert seen["threads"] == cores
    with pytest.raises(ConfigError, match="--threads must be a positive integer, got 0"):
        real_run_sweep([], tmp_path / "b", registry=REGISTRY, threads=0)


# ------------------------------------------------------------------ a Ray address where nothing listens
def _free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


# The sweep runs in a child process, timed from after its imports: without the check, Ray would retry the address
# for minutes, and the timeout ends the test instead.
_TIMED_SWEEP = """
import sys, time
import ray
from icl_gd.cli import app
sys.argv = ["icl-gd", *sys.argv[1:]]
start = time.perf_counter()
try:
    app()
except SystemExit as exc:
    code = exc.code
print(f"elapsed {time.perf_counter() - start:.2f}", file=sys.stderr)
sys.exit(code)
"""


@pytest.mark.parametrize("scheme", ["", "ray://"])
@pytest.mark.slow
def test_a_ray_address_where_nothing_listens_fails_in_seconds(tmp_path, scheme):
    pytest.importorskip("ray", reason="the ray extra is not installed (pip install -e '.[ray]')")
    address = f"{scheme}127.0.0.1:{_free_port()}"
    done = subprocess.run([sys.executable, "-c", _TIMED_SWEEP, "sweep", "single-layer", "--out", str(tmp_path),
                           "--backend", "ray", "--address", address, "--set", "steps=5", "--no-progress"],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    *lines, timing = done.stderr.strip().splitlines()
    assert done.returncode == 2 and _one_error_line("\n".join(lines)), done.stderr
    assert lines[0].startswith(f"icl-gd: error: --address {address}: no Ray cluster answers at 127.0.0.1:")
    assert float(timing.split()[1]) < 30, timing
    assert not any((tmp_path / "runs").iterdir())  # nothing ran


def test_a_malformed_ray_address_is_one_line(tmp_path):
    pytest.importorskip("ray", reason="the ray extra is not installed (pip install -e '.[ray]')")
    code, text = _invoke(["sweep", "single-layer", "--out", str(tmp_path), "--backend", "ray", "--address",
                          "nonsense", "--no-progress"])
    assert code == 2 and _one_error_line(text) and "'nonsense' is not auto, HOST:PORT or ray://HOST:PORT" in text


# ------------------------------------------------------------------ result files others can read
@pytest.mark.slow
def test_result_files_honour_the_umask(tmp_path):
    """Under umask 022 every result file is 0644, as `open` would make it (mkstemp's 0600 made them unreadable to
    anyone else: metrics.json, the CSVs, the figures)."""
    out = tmp_path / "run"
    old = os.umask(0o022)
    try:
        code, text = _invoke(["run", "single-layer", "--out", str(out), *TINY])
    finally:
        os.umask(old)
    assert code == 0, text
    files = [out / "metrics.json", out / "config.json", *out.glob("*.csv"), *out.glob("figures/*.png")]
    assert len(files) > 4 and any(f.parent.name == "figures" for f in files)
    assert {f.name: oct(f.stat().st_mode & 0o777) for f in files} == {f.name: "0o644" for f in files}


def test_a_private_umask_makes_private_files(tmp_path):
    old = os.umask(0o077)
    try:
        atomic_write_text(tmp_path / "t.csv", "x\n")
    finally:
        os.umask(old)
    assert (tmp_path / "t.csv").stat().st_mode & 0o777 == 0o600


# ------------------------------------------------------------------ settings that are not finite, in Python
@pytest.mark.parametrize("overrides,key", [({"input_range": float("inf")}, "input_range"),
                                           ({"input_range": 1e300}, "input_range"),
                                           ({"weight_scale": float("nan")}, "weight_scale"),
                                           ({"lr": float("inf")}, "lr")])
def test_the_python_api_refuses_non_finite_settings_with_a_config_error(tmp_path, overrides, key):
    from icl_gd.studies import run

    with pytest.raises(ConfigError, match=key):
        run("single-layer", tmp_path / "o", overrides=overrides, steps=2)
    assert not (tmp_path / "o" / "metrics.json").exists()


def test_configs_built_in_python_refuse_non_finite_floats():
    from icl_gd.regression.conditioning import ConditionedTaskConfig
    from icl_gd.regression.study import RegressionTaskConfig
    from icl_gd.regression.tasks import LinearRegressionTask

    for build in (lambda: RegressionTaskConfig(input_range=float("inf")),
                  lambda: RegressionTaskConfig(weight_scale=1e300),
                  lambda: ConditionedTaskConfig(kappa=10.0, input_range=1e300),  # its build squares input_range
                  lambda: ConditionedTaskConfig(kappa=float("inf")),
                  lambda: LinearRegressionTask(label_noise=float("nan"))):
        with pytest.raises(ConfigError, match="finite|at most"):
            build()


# ------------------------------------------------------------------ a thread count beyond the machine's cores
def _never_set_threads(monkeypatch):
    """Without the check, torch would be asked for the threads: 100 000 ends the process in a segmentation fault,
    1000 on 2 cores runs for minutes. Reaching it fails the test instead."""
    def reached(n):
        raise AssertionError(f"torch.set_num_threads({n}) was reached: --threads was not refused")

    monkeypatch.setattr(torch, "set_num_threads", reached)


@pytest.mark.parametrize("threads", ["100000", "0", str((os.cpu_count() or 1) + 1)])
@pytest.mark.parametrize("command", [["run", "single-layer"], ["sweep", "single-layer"], ["reproduce"],
                                     ["compare", "--model", "model.py:build"]])
def test_threads_beyond_the_cores_or_below_one_are_refused_at_once(tmp_path, monkeypatch, command, threads):
    _never_set_threads(monkeypatch)
    out = tmp_path / "out"
    code, text = _invoke([*command, "--out", str(out), "--threads", threads, "--no-progress"
                          if command[0] != "compare" else "--no-figures"])
    assert code == 2 and _one_error_line(text), text
    if threads == "0":
        assert "--threads must be a positive integer, got 0" in text
    else:
        assert f"--threads {threads} is more than this machine's {os.cpu_count()} logical cores" in text, text
    assert not out.exists()  # refused before the run folder, and (_never_set_threads) before any thread setting


def test_the_library_refuses_threads_beyond_the_cores(tmp_path, monkeypatch):
    from icl_gd.core.resources import check_threads, set_threads
    from icl_gd.platform.sweep import run_sweep

    _never_set_threads(monkeypatch)
    cores = os.cpu_count() or 1
    assert check_threads(cores) == cores and check_threads(None) is None
    for call in (lambda: set_threads(cores + 1), lambda: run_sweep([], tmp_path / "s", registry=REGISTRY,
                                                                    threads=cores + 1)):
        with pytest.raises(ConfigError, match=f"more than this machine's {cores} logical cores"):
            call()
    assert not (tmp_path / "s").exists()


# ------------------------------------------------------------------ a training that ends worse than predicting zero
def test_a_diverged_training_is_flagged_in_metrics_and_on_the_console(tmp_path):
    # input_range=1e5 is under the cap (1e6), yet the trained loss ends ~1e19 against the zero predictor's ~1e9:
    # the run finishes, and says so (before: exit 0, no word, no flag).
    out = tmp_path / "run"
    code, text = _invoke(["run", "single-layer", "--out", str(out), *TINY, "--no-figures", "--set",
                          "input_range=1e5"])
    assert code == 0, text
    mean = json.loads((out / "metrics.json").read_text())["mean"]
    assert mean["loss_trained"] > mean["loss_zero"]
    assert mean["diverged"] == ["trained"]
    notices = [line for line in text.splitlines() if line.startswith("icl-gd: notice: ")]
    assert len(notices) == 1 and "trained (seed 0) diverged" in notices[0] and "zero predictor" in notices[0]
    assert "Traceback" not in text


def test_a_training_that_learns_is_not_flagged(tmp_path):
    out = tmp_path / "run"
    code, text = _invoke(["run", "single-layer", "--out", str(out), *TINY, "--no-figures"])
    assert code == 0, text
    mean = json.loads((out / "metrics.json").read_text())["mean"]
    assert "diverged" not in mean and "diverged" not in text
