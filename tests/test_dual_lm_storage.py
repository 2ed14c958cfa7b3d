"""The store store features dual-form-lm added: background chunk writes, snapshot and resume."""

from __future__ import annotations

import numpy as np
import pytest

from icl_gd.dual import storage
from icl_gd.dual.storage import Column, StoreWriter
from icl_gd.dual.store_reader import open_store
from icl_gd.core.errors import ConfigError

COLUMNS = [Column("key", "float32", 3), Column("step", "int64")]


def _rows(start: int, n: int) -> dict[str, np.ndarray]:
    return {"key": np.arange(start * 3, (start + n) * 3, dtype=np.float32).reshape(n, 3),
            "step": np.arange(start, start + n)}


def _writer(root, background: bool, resume=None) -> StoreWriter:
    writer = StoreWriter(root, chunk_rows=7, resume=resume, background=background)
    if resume is None:
        writer.add_layer("layer", {"in_features": 3})
        writer.add_table("layer", "rows", COLUMNS)
    return writer


def _table(root):
    table = open_store(root)["layer"].table("rows")
    return table.column("key"), table.column("step"), table.chunk_rows


@pytest.mark.parametrize("background", [False, True])
def test_chunks_are_written_in_order_and_listed_once(tmp_path, background):
    writer = _writer(tmp_path / "m", background)
    for start in range(0, 50, 5):
        writer.append("layer", "rows", _rows(start, 5))
    writer.close()
    key, step, chunks = _table(tmp_path / "m")
    assert np.array_equal(step, np.arange(50))
    assert np.array_equal(key, _rows(0, 50)["key"])
    assert chunks == (10, 10, 10, 10, 10)  # a chunk is flushed once 7 rows are buffered: 5 + 5


@pytest.mark.parametrize("background", [False, True])
def test_resume_from_a_snapshot_drops_later_chunks(tmp_path, background):
    root = tmp_path / "m"
    writer = _writer(root, background)
    writer.append("layer", "rows", _rows(0, 9))
    snapshot = writer.snapshot()  # flushes: 9 rows in one chunk
    writer.append("layer", "rows", _rows(100, 20))
    writer.flush()  # written and listed, then the run "dies" without close
    assert len(list((root / "layer").glob("rows-*.npy"))) == 2 * 2
    resumed = _writer(root, background, resume=snapshot)
    assert len(list((root / "layer").glob("rows-*.npy"))) == 2  # the later chunk's files are gone
    resumed.append("layer", "rows", _rows(9, 4))
    resumed.close()
    key, step, chunks = _table(root)
    assert np.array_equal(step, np.arange(13)) and chunks == (9, 4)
    with pytest.raises(ConfigError, match="cannot resume"):
        StoreWriter(root, resume={**snapshot, "closed": True})


def test_a_failed_background_write_raises_in_the_caller(tmp_path, monkeypatch):
    writer = _writer(tmp_path / "m", background=True)

    def broken(path, parts, dtype, shape):
        raise OSError("disk full")

    monkeypatch.setattr(storage, "_save_parts_atomic", broken)
    writer.append("layer", "rows", _rows(0, 8))
    with pytest.raises(OSError, match="disk full"):
        writer.flush()
    assert _table(tmp_path / "m")[2] == ()  # nothing half-written is listed
