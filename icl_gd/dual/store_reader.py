"""A key store read back (written by ``storage.StoreWriter``): the manifest's layers, their tables and arrays.

Chunks are read back with ``np.load(mmap_mode="r")``, so reading never loads a table into RAM; only chunks listed
in the manifest exist.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from icl_gd.core.errors import ConfigError, DatasetNotFoundError
from icl_gd.core.results import read_json
from icl_gd.dual.storage import FORMAT_VERSION, MANIFEST, Column


@dataclass(frozen=True)
class Table:
    """A table read back. Chunks are opened as read-only memory maps only while they are read and closed
    afterwards, so scanning a table larger than RAM keeps at most one chunk's touched pages resident."""

    columns: tuple[Column, ...]
    chunks: tuple[Mapping[str, Path], ...]
    chunk_rows: tuple[int, ...]

    @property
    def rows(self) -> int:
        return sum(self.chunk_rows)

    def open_chunk(self, index: int, names: Sequence[str]) -> dict[str, np.ndarray]:
        return {name: np.load(self.chunks[index][name], mmap_mode="r") for name in names}

    def blocks(self, names: Sequence[str], block_rows: int = 32768) -> Iterator[tuple[int, dict[str, np.ndarray]]]:
        """Yield ``(first_row, {name: array})`` blocks of at most ``block_rows`` rows, chunk by chunk.

        The arrays are views of memory maps: use them before asking for the next block.
        """
        start = 0
        for index, n in enumerate(self.chunk_rows):
            arrays = self.open_chunk(index, names)
            for lo in range(0, n, block_rows):
                hi = min(n, lo + block_rows)
                yield start + lo, {name: arrays[name][lo:hi] for name in names}
            del arrays  # unmap this chunk once its views are gone
            start += n

    def column(self, name: str) -> np.ndarray:
        """A whole column copied into RAM (use for small per-row columns: ids, steps, labels)."""
        column = next((c for c in self.columns if c.name == name), None)
        if column is None:
            raise ConfigError(f"table has no column {name!r}; columns: {[c.name for c in self.columns]}")
        if not self.chunks:
            return np.zeros(column.shape(0), dtype=column.dtype)
        return np.concatenate([np.array(self.open_chunk(i, [name])[name]) for i in range(len(self.chunks))], axis=0)


@dataclass(frozen=True)
class LayerStore:
    name: str
    info: Mapping[str, Any]
    tables: Mapping[str, Table]
    arrays: Mapping[str, np.ndarray]

    def table(self, name: str) -> Table:
        if name not in self.tables:
            raise ConfigError(f"layer {self.name!r} has no table {name!r}")
        return self.tables[name]

    def array(self, name: str) -> np.ndarray:
        if name not in self.arrays:
            raise ConfigError(f"layer {self.name!r} has no array {name!r}")
        return self.arrays[name]


def open_store(root: Path | str) -> dict[str, LayerStore]:
    """Open a store directory read-only: ``{layer: LayerStore}``; only chunks listed in the manifest."""
    root = Path(root)
    if not (root / MANIFEST).is_file():
        raise DatasetNotFoundError(f"no key store at {root} (missing {MANIFEST})")
    manifest = read_json(root / MANIFEST)
    if manifest.get("format") != FORMAT_VERSION:
        raise ConfigError(f"{root}: unsupported key-store format {manifest.get('format')!r}")
    layers = {}
    for layer, entry in manifest["layers"].items():
        tables = {}
        for table, spec in entry["tables"].items():
            columns = tuple(Column(c["name"], c["dtype"], c["width"]) for c in spec["columns"])
            chunks = tuple({name: root / layer / file for name, file in chunk["files"].items()}
                           for chunk in spec["chunks"])
            tables[table] = Table(columns, chunks, tuple(int(chunk["rows"]) for chunk in spec["chunks"]))
        arrays = {name: np.load(root / layer / file) for name, file in entry["arrays"].items()}
        layers[layer] = LayerStore(layer, entry["info"], tables, arrays)
    return layers
