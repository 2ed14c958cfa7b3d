"""The notebook API (icl_gd.api): the README's Python quickstart runs as written (sizes shrunk), and a loaded run
holds exactly what the run directory does."""

import csv
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import icl_gd.studies
from icl_gd.api import Run, load_run, run_study
from icl_gd.core.errors import RunDirectoryError

ROOT = Path(__file__).resolve().parents[1]
# The quickstart's sizes shrunk to a test's budget; everything else as the README writes it.
TINY = ["n_test=256", "n_tune=512", "batch_size=64", "eval_every=10", "n_ood=32", "max_applications=5",
        "interpolation_points=3", "seeds=2"]


def _snippet(path: Path, marker: str) -> str:
    return re.search(rf"<!-- {marker} -->\n```python\n(.*?)```", path.read_text(), re.S).group(1)


@pytest.fixture(scope="module")
def quickstart(tmp_path_factory):
    """Run the README's Python quickstart in a fresh directory, with `run` shrunk to TINY sizes and 30 steps."""
    tmp = tmp_path_factory.mktemp("quickstart")
    calls = []
    real_run = icl_gd.studies.run

    def tiny_run(name, out, overrides=(), steps=None, **options):
        calls.append((name, out))
        given = [f"{k}={v}" for k, v in overrides.items()] if isinstance(overrides, dict) else list(overrides)
        return real_run(name, tmp / out, overrides=given + TINY, steps=30, **options)

    code = _snippet(ROOT / "README.md", "python-quickstart")
    monkey = pytest.MonkeyPatch()
    monkey.setattr(icl_gd.studies, "run", tiny_run)
    monkey.chdir(tmp)  # relative paths in the snippet land here
    try:
        namespace = {}
        exec(compile(code, "README.md:python-quickstart", "exec"), namespace)
    finally:
        monkey.undo()
    assert len(calls) == 1
    name, out = calls[0]
    return name, tmp / out, namespace, tmp


@pytest.mark.slow
def test_readme_quickstart_runs_and_returns_the_run_it_wrote(quickstart):
    name, out, namespace, cwd = quickstart
    runs = [v for v in namespace.values() if isinstance(v, Run)]
    assert runs and all((cwd / r.path).resolve() == out.resolve() for r in runs)  # relative paths: to the cwd
    assert runs[0].study == name and (out / "metrics.json").is_file()


@pytest.mark.slow
def test_metrics_and_config_are_the_files_on_disk(quickstart):
    _, out, _, _ = quickstart
    run = load_run(out)
    assert run.metrics == json.loads((out / "metrics.json").read_text())
    assert set(run.metrics) == {"mean", "std", "seeds"} and run.mean == run.metrics["mean"]
    assert run.config == json.loads((out / "config.json").read_text())
    assert (run.study, run.preset) == ("single-layer", "default")
    assert (run.config["config"]["evaluation"]["seed"], run.config["config"]["evaluation"]["seeds"]) == (0, 2)
    assert run.seeds == (0, 1) and run.config["resolved_training"]["steps"] == 30
    text = repr(run)
    assert str(out) in text and "single-layer" in text and "curves" in text and "loss_trained=" in text


@pytest.mark.slow
def test_table_is_the_csv_read_independently(quickstart):
    _, out, _, _ = quickstart
    run = load_run(out)
    assert run.tables == ("curves", "depth", "interpolation", "ood", "rollout_draws", "rollout_tasks")
    with open(out / "curves.csv") as handle:
        rows = list(csv.DictReader(handle))
    frame = run.table("curves")
    assert list(frame.columns) == ["step", "seed", "model", "metric", "value"] and len(frame) == len(rows)
    for row, record in zip(rows, frame.to_dict("records")):
        assert (int(row["step"]), int(row["seed"]), row["model"], row["metric"]) == \
            (record["step"], record["seed"], record["model"], record["metric"])
        assert float(row["value"]) == pytest.approx(record["value"], rel=1e-15)
    with pytest.raises(RunDirectoryError, match="no table 'nope'.*curves"):
        run.table("nope")


@pytest.mark.slow
def test_figures_name_the_pngs_save_figure_wrote(quickstart):
    _, out, _, _ = quickstart
    run = load_run(out)
    assert set(run.figures) == {p.stem for p in (out / "figures").glob("*.png")} >= {"loss_curves", "ood"}
    for name, path in run.figures.items():
        assert path == out / "figures" / f"{name}.png" and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert path.with_suffix(".pdf").is_file()


@pytest.mark.slow
def test_not_a_finished_run_is_a_one_line_run_directory_error(quickstart, tmp_path):
    _, out, _, _ = quickstart
    unfinished = tmp_path / "unfinished"
    shutil.copytree(out, unfinished)
    (unfinished / "metrics.json").unlink()  # what an interrupted run leaves
    (tmp_path / "empty").mkdir()
    (tmp_path / "sweep").mkdir()
    (tmp_path / "sweep" / "sweep.csv").write_text("run\n")
    for path, what in [(unfinished, "no metrics.json.*resume"), (tmp_path / "empty", "no metrics.json"),
                       (tmp_path / "missing", "no such run directory"), (tmp_path / "sweep", "a sweep")]:
        with pytest.raises(RunDirectoryError, match=what) as caught:
            load_run(path)
        message = str(caught.value)
        assert str(path) in message and "\n" not in message and not isinstance(caught.value, KeyError)


@pytest.mark.slow
def test_run_study_refuses_a_finished_run_without_force(quickstart):
    _, out, _, _ = quickstart
    with pytest.raises(RunDirectoryError, match="finished"):
        run_study("single-layer", out, registry=icl_gd.studies.REGISTRY, steps=30, overrides=TINY)


def test_the_api_does_not_import_the_studies():
    code = "import sys, icl_gd.api; assert 'icl_gd.studies' not in sys.modules and 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_architecture_page_example_runs_as_written(capsys):
    """docs/architecture.md's example: the Prop. 1 layer and explicit GD are the same function."""
    exec(compile(_snippet(ROOT / "docs" / "architecture.md", "architecture-example"), "architecture.md", "exec"), {})
    assert float(capsys.readouterr().out.split("(")[1].split(",")[0]) < 1e-12


def test_readme_setup_commands_are_what_ci_runs():
    setup = re.search(r"## Set up.*?```bash\n(.*?)```", (ROOT / "README.md").read_text(), re.S).group(1)
    commands = [c.strip() for line in setup.splitlines() for c in line.split("&&")]
    ci = [line.split("#")[0].replace("--quiet ", "").strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    steps = [c for c in ci if c.startswith(("python3 -m venv", ".venv/bin/pip", ".venv/bin/pytest"))]
    assert commands == steps
