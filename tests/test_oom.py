"""The memory pre-check: a run too large for the free memory is refused before it starts, naming the key to lower;
a run that fits is never refused."""

import pytest
from typer.testing import CliRunner

from cli import app
from icl_gd.errors import ConfigError
from icl_gd.memory import available_memory, check_memory, estimate_run_memory
from icl_gd.study import resolve_study_config
from studies import get_study

GiB = 2**30


def _config(study="single-layer", *overrides):
    return resolve_study_config(get_study(study), "default", list(overrides))


def test_the_issue_command_is_a_one_line_error_naming_batch_size(tmp_path):
    out = tmp_path / "big"
    result = CliRunner().invoke(app, ["run", "single-layer", "--out", str(out), "--set", "batch_size=100000000"])
    assert result.exit_code == 2, result.output
    assert "lower batch_size" in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert not out.exists()  # refused before the run directory was made


@pytest.mark.parametrize("key,value,named", [("n_test", 10**9, "n_test"), ("n_tune", 10**9, "n_tune"),
                                             ("batch_size", 10**8, "batch_size")])
def test_the_refusal_names_the_largest_part(key, value, named):
    config = _config("single-layer", f"{key}={value}")
    with pytest.raises(ConfigError, match=f"lower {named} "):
        check_memory(config, __import__("torch").device("cpu"), available=4 * GiB)


def test_the_estimate_scales_with_what_the_run_holds():
    base = estimate_run_memory(_config())
    doubled = estimate_run_memory(_config("single-layer", "batch_size=4096"))
    assert doubled["training.batch_size"] == 2 * base["training.batch_size"]
    assert doubled["evaluation.n_test"] == base["evaluation.n_test"]
    deep = estimate_run_memory(_config("multi-layer", "layers=8", "seeds=1"))
    shallow = estimate_run_memory(_config("multi-layer", "layers=2", "seeds=1"))
    assert deep["evaluation.n_tune"] > 2 * shallow["evaluation.n_tune"]
    assert deep["training.batch_size"] > 2 * shallow["training.batch_size"]
    batched = estimate_run_memory(_config("multi-layer", "layers=2", "seeds=3"))  # seeds train as one model
    assert batched["training.batch_size"] == 3 * shallow["training.batch_size"]


@pytest.mark.parametrize("study", ["single-layer", "multi-layer", "sine", "separate-tokens", "softmax-heads",
                                   "dual-form"])
def test_every_default_config_fits_this_machine(study):
    free = available_memory(__import__("torch").device("cpu"))
    assert free is not None and free > 0
    check_memory(_config(study), __import__("torch").device("cpu"))  # no ConfigError
    assert max(estimate_run_memory(_config(study)).values(), default=0) < 2 * GiB
