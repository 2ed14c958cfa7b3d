"""Append-only chunked storage: roundtrip, chunking, crash safety, schema errors."""

from __future__ import annotations

import json

import numpy as np
import pytest

from icl_gd.core import results
from icl_gd.dual.storage import Column, StoreWriter
from icl_gd.dual.store_reader import open_store
from icl_gd.core.errors import ConfigError, DatasetNotFoundError

COLUMNS = [Column("key", "float16", 5), Column("error", "float32", 3), Column("example", "int64")]


def _writer(tmp_path, chunk_rows=4):
    w = StoreWriter(tmp_path / "mem", chunk_rows=chunk_rows)
    w.add_layer("fc1", {"in_features": 5})
    w.add_table("fc1", "rows", COLUMNS)
    return w


def _rows(rng, n, start):
    return {"key": rng.standard_normal((n, 5)), "error": rng.standard_normal((n, 3)),
            "example": np.arange(start, start + n)}


def test_roundtrip_across_chunks(tmp_path):
    rng = np.random.default_rng(0)
    w = _writer(tmp_path)
    written = [_rows(rng, n, s) for n, s in ((3, 0), (3, 3), (5, 6), (1, 11))]
    for rows in written:
        w.append("fc1", "rows", rows)
    w.save_array("fc1", "initial_weight", np.eye(3, 5))
    w.close()
    store = open_store(tmp_path / "mem")
    table = store["fc1"].table("rows")
    assert table.rows == 12 and len(table.chunks) == 3  # flushed at 6, 11, then the final 1
    keys = np.concatenate([r["key"] for r in written]).astype(np.float16)
    np.testing.assert_array_equal(table.column("key"), keys)
    np.testing.assert_array_equal(table.column("error"), np.concatenate([r["error"] for r in written]).astype(np.float32))
    np.testing.assert_array_equal(table.column("example"), np.arange(12))
    assert isinstance(table.open_chunk(0, ["key"])["key"], np.memmap)
    blocks = list(table.blocks(["example"], block_rows=4))
    assert [b[0] for b in blocks] == [0, 4, 6, 10, 11]
    np.testing.assert_array_equal(np.concatenate([b[1]["example"] for b in blocks]), np.arange(12))
    np.testing.assert_array_equal(store["fc1"].array("initial_weight"), np.eye(3, 5))
    assert store["fc1"].info == {"in_features": 5}


def test_unlisted_files_are_invisible(tmp_path):
    rng = np.random.default_rng(1)
    w = _writer(tmp_path)
    w.append("fc1", "rows", _rows(rng, 4, 0))  # one full chunk, listed
    w.append("fc1", "rows", _rows(rng, 2, 4))  # still buffered: a crash now loses only these
    # A chunk file that a crashed writer renamed into place but never listed, and a stray temporary file.
    np.save(tmp_path / "mem" / "fc1" / "rows-00001.key.npy", np.zeros((9, 5), np.float16))
    (tmp_path / "mem" / "fc1" / ".rows-00002.key.npy.123.tmp").write_bytes(b"\x93NUMPY partial")
    table = open_store(tmp_path / "mem")["fc1"].table("rows")
    assert table.rows == 4
    np.testing.assert_array_equal(table.column("example"), np.arange(4))
    manifest = json.loads((tmp_path / "mem" / "manifest.json").read_text())
    assert len(manifest["layers"]["fc1"]["tables"]["rows"]["chunks"]) == 1


def test_failed_chunk_write_leaves_manifest_and_no_final_file(tmp_path, monkeypatch):
    rng = np.random.default_rng(2)
    w = _writer(tmp_path)
    w.append("fc1", "rows", _rows(rng, 4, 0))
    before = (tmp_path / "mem" / "manifest.json").read_text()
    calls = {"n": 0}
    real_fsync = results.os.fsync

    def failing_fsync(fd):
        calls["n"] += 1
        if calls["n"] == 2:  # die half-way through the chunk's columns, the second file's bytes already written
            raise OSError("disk full")
        real_fsync(fd)

    monkeypatch.setattr(results.os, "fsync", failing_fsync)
    with pytest.raises(OSError, match="disk full"):
        w.append("fc1", "rows", _rows(rng, 4, 4))
    assert (tmp_path / "mem" / "manifest.json").read_text() == before
    files = sorted(p.name for p in (tmp_path / "mem" / "fc1").iterdir())
    assert "rows-00001.error.npy" not in files and not any(f.endswith(".tmp") for f in files)
    assert open_store(tmp_path / "mem")["fc1"].table("rows").rows == 4


def test_schema_errors(tmp_path):
    w = _writer(tmp_path)
    rng = np.random.default_rng(3)
    bad = _rows(rng, 2, 0)
    bad["error"] = bad["error"][:, :2]
    with pytest.raises(ConfigError, match=r"fc1/rows.error: shape \(2, 2\)"):
        w.append("fc1", "rows", bad)
    missing = _rows(rng, 2, 0)
    del missing["example"]
    with pytest.raises(ConfigError, match="misses column 'example'"):
        w.append("fc1", "rows", missing)
    with pytest.raises(ConfigError, match="unknown columns"):
        w.append("fc1", "rows", {**_rows(rng, 2, 0), "extra": np.zeros(2)})
    with pytest.raises(ConfigError, match="unknown table"):
        w.append("fc1", "nope", _rows(rng, 2, 0))
    with pytest.raises(ConfigError, match="declared twice"):
        w.add_layer("fc1", {})
    with pytest.raises(ConfigError, match="directory name"):
        w.add_layer("a/b", {})
    with pytest.raises(ConfigError, match="chunk_rows"):
        StoreWriter(tmp_path / "other", chunk_rows=0)
    with pytest.raises(ConfigError, match="already holds"):
        StoreWriter(tmp_path / "mem")
    w.close()  # nothing valid was buffered by the failed appends
    assert open_store(tmp_path / "mem")["fc1"].table("rows").rows == 0
    with pytest.raises(DatasetNotFoundError, match="no key store"):
        open_store(tmp_path / "absent")
    with pytest.raises(ConfigError, match="no table"):
        open_store(tmp_path / "mem")["fc1"].table("steps")


def test_a_layer_declared_at_once_is_listed_only_with_all_its_arrays(tmp_path, monkeypatch):
    """add_layer with tables and arrays writes the arrays before the manifest lists the layer: a crash while
    writing its second array leaves a store without the layer, never one listing it with the array missing."""
    from icl_gd.dual import storage

    w = StoreWriter(tmp_path / "mem")
    w.add_layer("fc0", {"in_features": 5}, {"rows": COLUMNS}, {"initial_weight": np.eye(3, 5)})
    real, calls = storage._save_npy_atomic, []

    def failing(path, array):
        calls.append(path.name)
        if len(calls) == 2:
            raise OSError("disk full")
        real(path, array)

    monkeypatch.setattr(storage, "_save_npy_atomic", failing)
    with pytest.raises(OSError, match="disk full"):
        w.add_layer("fc1", {"in_features": 5}, {"rows": COLUMNS},
                    {"initial_weight": np.eye(3, 5), "initial_bias": np.zeros(3)})
    w.close()  # a later manifest write must not list the half-declared layer either
    store = open_store(tmp_path / "mem")
    assert list(store) == ["fc0"]
    assert [c.name for c in store["fc0"].table("rows").columns] == [c.name for c in COLUMNS]
    np.testing.assert_array_equal(store["fc0"].array("initial_weight"), np.eye(3, 5))
