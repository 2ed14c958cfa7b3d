"""``benchmarks/bench_vs_authors.py`` as docs/performance.md runs it: the authors' side is asked only for the
set-ups their code has, and a worker that fails is one clear error, not a JSONDecodeError (no JAX needed)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import bench_vs_authors as bench  # noqa: E402
from _setups import SETUPS  # noqa: E402


def test_the_default_setups_ask_the_authors_only_for_theirs():
    # The default --setups is every set-up of _setups.py, separate5 and recurrent10 among them, which the authors'
    # bench_steps.py refuses (before: a worker started for each, and the parent died in a JSONDecodeError).
    names, with_authors = bench.selected_setups(",".join(SETUPS), with_authors=True)
    assert names == list(SETUPS) and {"separate5", "recurrent10"} <= set(names)
    assert with_authors == [name for name in SETUPS if name in bench.AUTHORS_SETUPS]
    assert "separate5" not in with_authors and "recurrent10" not in with_authors
    assert bench.selected_setups("single,sine", with_authors=False) == (["single", "sine"], [])


def test_the_authors_setups_are_the_ones_their_worker_accepts():
    text = (Path(bench.ROOT) / "docs" / "authors_check" / "bench_steps.py").read_text()
    assert f'choices=({", ".join(repr(n).replace(chr(39), chr(34)) for n in bench.AUTHORS_SETUPS)})' in text


@pytest.mark.parametrize("text", ["single,separate7", "", "tokens,,nope"])
def test_an_unknown_setup_is_refused_by_name(text):
    with pytest.raises(ValueError, match="not among single"):
        bench.selected_setups(text, with_authors=True)


def test_a_setup_the_authors_lack_is_refused_before_a_worker_starts(tmp_path):
    with pytest.raises(ValueError, match="the authors' code has no set-up 'separate5'"):
        bench.authors_worker("separate5", tmp_path, sys.executable)


def test_a_worker_that_fails_is_one_clear_error(tmp_path):
    # A python without JAX (or a wrong checkout) makes bench_steps.py exit before its "ready" line.
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\necho 'not json'\necho 'ModuleNotFoundError: No module named jax' >&2\nexit 1\n")
    fake.chmod(0o755)
    with pytest.raises(RuntimeError, match=r"worker for set-up 'single'.*'not json'.*exit status 1.*No module named"):
        bench.authors_worker("single", tmp_path, str(fake))
