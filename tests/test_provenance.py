"""A run's config.json names the source commit that computed it (``icl_gd.core.provenance.source_commit``)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import torch

from icl_gd.core import provenance


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=root, check=True,
                          capture_output=True, text=True).stdout.strip()


@pytest.fixture
def source(tmp_path, monkeypatch):
    """A git checkout standing in for icl-gd's source tree."""
    root = tmp_path / "src"
    root.mkdir()
    _git(root, "init", "-q")
    (root / "a.py").write_text("x = 1\n")
    _git(root, "add", "a.py")
    _git(root, "commit", "-q", "-m", "one")
    monkeypatch.setattr(provenance, "SOURCE_ROOT", root.resolve())
    provenance.source_commit.cache_clear()
    yield root
    provenance.source_commit.cache_clear()


def test_source_commit_is_the_checkouts_head_and_says_dirty(source):
    head = _git(source, "rev-parse", "--short", "HEAD")
    assert provenance.source_commit() == head
    (source / "a.py").write_text("x = 2\n")
    provenance.source_commit.cache_clear()
    assert provenance.source_commit() == head + "+dirty"
    (source / "untracked.txt").write_text("scratch")  # an untracked file is not a change to the source
    (source / "a.py").write_text("x = 1\n")
    provenance.source_commit.cache_clear()
    assert provenance.source_commit() == head


def test_source_commit_outside_its_own_checkout_is_the_version(source, tmp_path, monkeypatch):
    from icl_gd import __version__

    inside_other = source / "site-packages"  # an installed copy inside some other repository
    inside_other.mkdir()
    for root in (inside_other, tmp_path / "plain"):
        root.mkdir(exist_ok=True)
        monkeypatch.setattr(provenance, "SOURCE_ROOT", root.resolve())
        provenance.source_commit.cache_clear()
        assert provenance.source_commit() == f"icl-gd {__version__} (not a git checkout)"


def test_config_json_records_the_source_commit(source, tmp_path):
    from dataclasses import dataclass

    from icl_gd.core.study import RunContext, Study, write_resolved_config

    @dataclass(frozen=True)
    class Toy:
        steps: int = 1

    study = Study(name="toy", summary="toy", default_config=Toy, run=lambda config, ctx: {})
    out = tmp_path / "run"
    out.mkdir()
    write_resolved_config(RunContext(out, torch.device("cpu")), study, Toy())
    assert json.loads((out / "config.json").read_text())["versions"]["commit"] == _git(source, "rev-parse", "--short",
                                                                                       "HEAD")
