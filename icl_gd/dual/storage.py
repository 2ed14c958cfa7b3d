"""Append-only, chunked, memory-mapped storage of the dual form: one directory per layer, one manifest.

Layout of a store directory::

    manifest.json                       # the only index: what is not listed here does not exist
    <layer>/<table>-<chunk:05d>.<column>.npy

Each layer holds named tables (``rows``: one row per training example per step; ``keys``: one key per example
for a compressed layer; ``steps``: one row per optimizer step). A table grows by whole chunks: the chunk's column
files are written to temporary names, renamed into place, and only then is the chunk added to the manifest (itself
written atomically). A crash therefore loses at most the chunk being written, and a partially written file is
never listed. Reading a store back is ``store_reader``'s.
"""

from __future__ import annotations

import json
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.lib import format as npy_format

from icl_gd.core.errors import ConfigError
from icl_gd.core.results import atomic_open, atomic_write_text, to_jsonable

MANIFEST = "manifest.json"
FORMAT_VERSION = 1
KEY_DTYPES = ("float16", "float32", "float64")


@dataclass(frozen=True)
class Column:
    """A column of a table: ``width`` 0 means one scalar per row, otherwise a ``(rows, width)`` block."""

    name: str
    dtype: str
    width: int = 0

    def shape(self, rows: int) -> tuple[int, ...]:
        return (rows,) if self.width == 0 else (rows, self.width)


def _save_npy_atomic(path: Path, array: np.ndarray) -> None:
    """``array`` as an ``.npy`` file at ``path``, written (and fsynced) under a temporary name, then renamed."""
    array = np.ascontiguousarray(array)
    _save_parts_atomic(path, [array], array.dtype, array.shape)


def _save_parts_atomic(path: Path, parts: Sequence[np.ndarray], dtype: np.dtype, shape: tuple[int, ...]) -> None:
    """The row blocks ``parts`` as one ``.npy`` array of ``shape``, written straight from each block's memory
    (no concatenated copy), fsynced under a temporary name, then renamed."""
    with atomic_open(path) as handle:
        npy_format.write_array_header_1_0(handle, {"descr": npy_format.dtype_to_descr(np.dtype(dtype)),
                                                   "fortran_order": False, "shape": tuple(shape)})
        for part in parts:
            np.ascontiguousarray(part, dtype=dtype).tofile(handle)


@dataclass
class _PendingTable:
    columns: tuple[Column, ...]
    buffers: dict[str, list[np.ndarray]] = field(default_factory=dict)
    rows: int = 0


class StoreWriter:
    """Writes tables chunk by chunk while training runs; at most ``chunk_rows`` rows per table stay in RAM.

    Every chunk is fsynced before it is listed, so the store survives power loss, not only process death.
    With ``background=True`` full chunks are written by one worker thread, in order, while the caller goes on
    (file writes and fsync release the GIL, so training overlaps the disk); at most ``MAX_IN_FLIGHT`` chunks
    wait, and ``flush``/``close``/``snapshot`` return only once every chunk is written and listed.
    """

    MAX_IN_FLIGHT = 4

    def __init__(self, root: Path | str, chunk_rows: int = 16384, resume: Mapping[str, Any] | None = None,
                 background: bool = False) -> None:
        """``resume``: a manifest returned by ``snapshot`` of an earlier writer on ``root``; writing continues from
        it, and chunks written after that snapshot (an interrupted run's) are dropped."""
        if chunk_rows <= 0:
            raise ConfigError(f"chunk_rows must be positive, got {chunk_rows}")
        self.root = Path(root)
        self.chunk_rows = chunk_rows
        self.root.mkdir(parents=True, exist_ok=True)
        self._pending: dict[tuple[str, str], _PendingTable] = {}
        self._next_chunk: dict[tuple[str, str], int] = {}
        self._lock = threading.Lock()  # the manifest: mutated and written by the caller and the worker
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="key-store") if background else None
        self._in_flight: list[Future] = []
        if resume is not None:
            self._resume(resume)
            return
        if (self.root / MANIFEST).exists():
            raise ConfigError(f"{self.root} already holds a key store; use a fresh directory")
        self._manifest: dict[str, Any] = {"format": FORMAT_VERSION, "layers": {}}
        self._write_manifest()

    def _resume(self, manifest: Mapping[str, Any]) -> None:
        if manifest.get("format") != FORMAT_VERSION or manifest.get("closed"):
            raise ConfigError(f"{self.root}: cannot resume from this manifest (format or closed)")
        self._manifest = json.loads(json.dumps(manifest))  # a deep copy the caller cannot change
        for layer, entry in self._manifest["layers"].items():
            listed = set(entry["arrays"].values())
            for table, spec in entry["tables"].items():
                columns = tuple(Column(c["name"], c["dtype"], c["width"]) for c in spec["columns"])
                self._pending[(layer, table)] = _PendingTable(columns, {c.name: [] for c in columns})
                self._next_chunk[(layer, table)] = len(spec["chunks"])
                listed.update(f for chunk in spec["chunks"] for f in chunk["files"].values())
            for path in (self.root / layer).glob("*.npy"):
                if path.name not in listed:
                    path.unlink()  # written after the snapshot: not part of the resumed store
        self._write_manifest()

    def snapshot(self) -> dict[str, Any]:
        """Flush every table and return a copy of the manifest, from which ``StoreWriter(resume=...)`` continues."""
        self.flush()
        with self._lock:
            return json.loads(json.dumps(self._manifest))

    # -- declaration -----------------------------------------------------------------------------------------
    def add_layer(self, layer: str, info: Mapping[str, Any], tables: Mapping[str, Sequence[Column]] | None = None,
                  arrays: Mapping[str, np.ndarray] | None = None) -> None:
        """Declare ``layer`` with its ``tables`` and whole ``arrays`` (initial weights) at once: the arrays are
        written first, then the manifest once, so a crash in between leaves the layer unlisted."""
        if not layer or "/" in layer or layer.startswith("."):
            raise ConfigError(f"layer name {layer!r} cannot be a directory name")
        if layer in self._manifest["layers"]:
            raise ConfigError(f"layer {layer!r} declared twice")
        (self.root / layer).mkdir(parents=True, exist_ok=True)
        entry: dict[str, Any] = {"info": dict(info), "tables": {}, "arrays": {}}
        for table, columns in (tables or {}).items():
            self._declare_table(entry, layer, table, columns)
        entry["arrays"] = {name: self._write_array(layer, name, array) for name, array in (arrays or {}).items()}
        with self._lock:
            self._manifest["layers"][layer] = entry
        self._write_manifest()

    def add_table(self, layer: str, table: str, columns: Sequence[Column]) -> None:
        self._declare_table(self._layer(layer), layer, table, columns)
        self._write_manifest()

    def _declare_table(self, entry: dict[str, Any], layer: str, table: str, columns: Sequence[Column]) -> None:
        if table in entry["tables"]:
            raise ConfigError(f"table {layer}/{table} declared twice")
        entry["tables"][table] = {
            "columns": [{"name": c.name, "dtype": c.dtype, "width": c.width} for c in columns],
            "chunks": [],
        }
        self._pending[(layer, table)] = _PendingTable(tuple(columns), {c.name: [] for c in columns})
        self._next_chunk[(layer, table)] = 0

    # -- writing ---------------------------------------------------------------------------------------------
    def append(self, layer: str, table: str, values: Mapping[str, np.ndarray]) -> None:
        """Append rows: ``values`` maps every column name to an array of shape ``column.shape(rows)``."""
        pending = self._pending.get((layer, table))
        if pending is None:
            raise ConfigError(f"unknown table {layer}/{table}")
        unknown = set(values) - {c.name for c in pending.columns}
        if unknown:
            raise ConfigError(f"append to {layer}/{table}: unknown columns {sorted(unknown)}")
        rows = None
        arrays = {}
        for column in pending.columns:  # validate every column before buffering any
            if column.name not in values:
                raise ConfigError(f"append to {layer}/{table} misses column {column.name!r}")
            array = np.asarray(values[column.name])
            if rows is None:
                rows = array.shape[0] if array.ndim else -1
            if array.shape != column.shape(rows):
                raise ConfigError(
                    f"{layer}/{table}.{column.name}: shape {array.shape} != expected {column.shape(rows)}"
                )
            arrays[column.name] = array.astype(column.dtype, copy=False)
        for name, array in arrays.items():
            pending.buffers[name].append(array)
        pending.rows += rows or 0
        if pending.rows >= self.chunk_rows:
            self._flush_table(layer, table)

    def save_array(self, layer: str, name: str, array: np.ndarray) -> None:
        """A whole array (initial weights, coefficients), written atomically and listed in the manifest."""
        entry = self._layer(layer)
        file = self._write_array(layer, name, array)
        with self._lock:
            entry["arrays"][name] = file
        self._write_manifest()

    def _write_array(self, layer: str, name: str, array: np.ndarray) -> str:
        """``array`` written atomically as ``<layer>/<name>.npy`` (not yet listed); its file name."""
        path = self.root / layer / f"{name}.npy"
        _save_npy_atomic(path, array)
        return path.name

    def set_info(self, layer: str, **info: Any) -> None:
        with self._lock:
            self._layer(layer)["info"].update(info)
        self._write_manifest()

    def flush(self) -> None:
        """Write every buffered row; in the background mode, wait until every chunk is written and listed."""
        for layer, table in list(self._pending):
            self._flush_table(layer, table)
        self._wait(0)

    def close(self) -> None:
        self.flush()
        if self._executor is not None:
            self._executor.shutdown()
        with self._lock:
            self._manifest["closed"] = True
        self._write_manifest()

    def _wait(self, at_most: int) -> None:
        """Until at most ``at_most`` chunks are in flight; a failed write raises here, in the caller."""
        while len(self._in_flight) > at_most:
            self._in_flight.pop(0).result()

    # -- internals -------------------------------------------------------------------------------------------
    def _layer(self, layer: str) -> dict[str, Any]:
        if layer not in self._manifest["layers"]:
            raise ConfigError(f"unknown layer {layer!r}")
        return self._manifest["layers"][layer]

    def _flush_table(self, layer: str, table: str) -> None:
        pending = self._pending[(layer, table)]
        if pending.rows == 0:
            return
        index = self._next_chunk[(layer, table)]
        self._next_chunk[(layer, table)] = index + 1
        parts = {}
        for column in pending.columns:
            parts[column] = pending.buffers[column.name]  # the appended blocks, written one after the other
            pending.buffers[column.name] = []
        rows, pending.rows = pending.rows, 0
        if self._executor is None:
            self._write_chunk(layer, table, index, rows, parts)
        else:
            self._wait(self.MAX_IN_FLIGHT - 1)
            self._in_flight.append(self._executor.submit(self._write_chunk, layer, table, index, rows, parts))

    def _write_chunk(self, layer: str, table: str, index: int, rows: int,
                     parts: dict[Column, list[np.ndarray]]) -> None:
        files = {}
        for column, blocks in parts.items():
            file = f"{table}-{index:05d}.{column.name}.npy"
            _save_parts_atomic(self.root / layer / file, blocks, np.dtype(column.dtype), column.shape(rows))
            files[column.name] = file
        with self._lock:
            self._manifest["layers"][layer]["tables"][table]["chunks"].append({"rows": rows, "files": files})
        self._write_manifest()  # the chunk exists only from here on

    def _write_manifest(self) -> None:
        with self._lock:  # serialise and replace under the lock: an older manifest never overwrites a newer one
            atomic_write_text(self.root / MANIFEST, json.dumps(to_jsonable(self._manifest), indent=2) + "\n")
