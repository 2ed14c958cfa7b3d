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
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from icl_gd.core.errors import ICLGDNotice
from icl_gd.core.provenance import source_digest
from icl_gd.core.results import to_jsonable, write_json

T = TypeVar("T")


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

    def value(self, name: str, depends_on: Mapping[str, Any], compute: Callable[[], T],
              encode: Callable[[T], Any], decode: Callable[[Any], T]) -> T:
        """The result ``name`` for ``depends_on``: read if a run computed it before, else ``compute()``d and kept.
        ``encode`` turns it into JSON values that ``decode`` turns back into an equal result (floats are kept
        exactly); a stored value that ``decode`` refuses (raises ValueError) is computed again."""
        key = shared_key(name, depends_on)
        path = self.path(key)
        stored = _read(path)
        if stored is not None and stored.get("key") == key:
            try:
                return decode(stored["value"])
            except (KeyError, TypeError, ValueError):
                pass
        if stored is not None:
            warnings.warn(f"shared result {path} is unreadable or not this run's; computing it again", ICLGDNotice,
                          stacklevel=2)
        result = compute()
        self.folder.mkdir(parents=True, exist_ok=True)
        write_json(path, {"key": key, "value": encode(result)})
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
