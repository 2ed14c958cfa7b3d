"""Results a run's seed does not change, computed once and read by the other runs of the same set-up.

A plan of ``reproduce`` (or a ``sweep --seeds``) runs each seed as its own run, in its own process, and a
regression study tunes its references (GD's step sizes, GD++'s schedule, the authors' Adam-tuned GD++) on held-out
tasks drawn from ``test_seed``, not from the training seed: every seed's run computed the same numbers again (five
separate layers: about 10 of each seed's 34 CPU minutes). ``SharedResults`` keeps such a result in one folder that
the runs of a sweep share (``ROOT/shared``), under a key that holds everything it may depend on: the study, the
resolved config but its seeds, the code (a digest of every source file of icl-gd), torch's version, the device and
the thread count. Another run with the same key reads the very numbers the first one computed (JSON keeps a float64
exactly), so its results are those it would have computed itself, bit for bit; any other change computes afresh.

Two runs that reach the same key at the same time both compute it and write the same file (atomically); a file
that cannot be read, or was written for another key, is computed again and replaced.
"""

from __future__ import annotations

import hashlib
import json
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from icl_gd.core.errors import ICLGDNotice
from icl_gd.core.provenance import source_digest
from icl_gd.core.results import to_jsonable, write_json

T = TypeVar("T")


@dataclass(frozen=True)
class Codec(Generic[T]):
    """How a result is kept: ``encode`` to JSON values, ``decode`` back to an equal result (ValueError, KeyError or
    TypeError on a value it cannot have written)."""

    encode: Callable[[T], Any]
    decode: Callable[[Any], T]


def _float_json(value: Any) -> Any:
    """A float as its exact hexadecimal text (inf and NaN included: JSON has neither); other values as they are."""
    if isinstance(value, float):
        return {"float": value.hex()}
    if isinstance(value, (str, int)) or value is None:  # bool is an int
        return value
    raise TypeError(f"a shared row holds a {type(value).__name__}, not a plain value")


def _float_of_json(value: Any) -> Any:
    if isinstance(value, dict):
        return float.fromhex(value["float"])
    if isinstance(value, (str, int)) or value is None:
        return value
    raise ValueError(f"a stored row holds {value!r}")


def _rows_json(rows: Sequence[Sequence[Mapping[str, Any]]]) -> list:
    return [[{k: _float_json(v) for k, v in row.items()} for row in table] for table in rows]


def _rows_of_json(value: Any) -> list[list[dict[str, Any]]]:
    return [[{k: _float_of_json(v) for k, v in row.items()} for row in table] for table in value]


# Tables of tidy rows (a list of tables, each a list of rows of plain values), every float kept bit for bit.
TABLES = Codec(_rows_json, _rows_of_json)


def shared_key(name: str, depends_on: Mapping[str, Any]) -> dict[str, Any]:
    """The full key of result ``name``: what the caller says it depends on, plus the code, torch and threads."""
    import torch

    return {"name": name, "depends_on": to_jsonable(depends_on), "source": source_digest(),
            "torch": torch.__version__, "threads": torch.get_num_threads()}


@dataclass(frozen=True)
class SharedResults:
    """A folder of results keyed by what they depend on (``shared_key``), one JSON file each."""

    folder: Path

    def path(self, key: Mapping[str, Any]) -> Path:
        digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:20]
        return self.folder / f"{key['name']}-{digest}.json"

    def value(self, name: str, depends_on: Mapping[str, Any], compute: Callable[[], T], codec: Codec[T]) -> T:
        """The result ``name`` for ``depends_on``: read if a run computed it before, else ``compute()``d and kept
        (``codec``: to JSON values and back to an equal result); a stored value the codec refuses is computed
        again."""
        key = shared_key(name, depends_on)
        path = self.path(key)
        stored = _read(path)
        if stored is not None and stored.get("key") == key:
            try:
                return codec.decode(stored["value"])
            except (KeyError, TypeError, ValueError):
                pass
        if stored is not None:
            warnings.warn(f"shared result {path} is unreadable or not this run's; computing it again", ICLGDNotice,
                          stacklevel=2)
        result = compute()
        self.folder.mkdir(parents=True, exist_ok=True)
        write_json(path, {"key": key, "value": codec.encode(result)})
        return result


def _read(path: Path) -> dict[str, Any] | None:
    """The stored record, or None when absent; ``{}`` when unreadable (so that it is replaced)."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    except OSError:
        return {}
    try:
        record = json.loads(text)
    except ValueError:
        return {}
    return record if isinstance(record, dict) else {}
