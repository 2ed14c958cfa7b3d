"""The one checkpoint policy of every training loop and every resumable study.

A checkpoint is one file, written atomically, holding a ``state`` (any picklable value: tensors, optimiser state,
a finished seed's results) and the ``fingerprint`` of everything that made it (``config_fingerprint``). Loading:

- no file: ``None``, the part starts from scratch;
- a file of the same fingerprint: its state, the part resumes;
- an unreadable file (truncated, empty, foreign) or one of another fingerprint (other settings, another number of
  seeds): set aside as ``<name>.corrupt`` or ``<name>.stale`` with one ``ICLGDNotice`` line, then ``None``: that
  part restarts, and nothing is ever resumed from settings it was not made with.
"""

from __future__ import annotations

import hashlib
import io
import json
import warnings
from pathlib import Path
from typing import Any

import torch

from icl_gd.core.errors import ICLGDNotice
from icl_gd.core.results import atomic_write_bytes, to_jsonable

FORMAT = "icl-gd-checkpoint/1"


def config_fingerprint(*configs: Any) -> str:
    """A hash of the configs (any JSON-able values) a checkpoint belongs to."""
    text = json.dumps(to_jsonable(list(configs)), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def save_checkpoint(path: Path, fingerprint: str, state: Any) -> None:
    """Write ``state`` with its ``fingerprint`` to ``path`` atomically (``torch.save``)."""
    buffer = io.BytesIO()
    torch.save({"format": FORMAT, "fingerprint": fingerprint, "state": state}, buffer)
    atomic_write_bytes(Path(path), buffer.getvalue())


def load_checkpoint(path: Path | None, fingerprint: str) -> Any | None:
    """The state saved at ``path`` for ``fingerprint``; ``None`` when there is none (absent, or set aside because
    it is unreadable or belongs to other settings: see the module docstring)."""
    if path is None or not Path(path).is_file():
        return None
    path = Path(path)
    try:
        saved = torch.load(path, map_location="cpu", weights_only=False)
        if not isinstance(saved, dict) or saved.get("format") != FORMAT or not {"fingerprint", "state"} <= saved.keys():
            raise ValueError("not an icl-gd checkpoint")
    except Exception as error:  # a damaged file fails in many ways (EOF, zip, unpickling, missing keys)
        reason = str(error).strip().splitlines()[0][:120] if str(error).strip() else type(error).__name__
        _set_aside(path, ".corrupt", f"is unreadable ({reason})")
        return None
    if saved["fingerprint"] != fingerprint:
        _set_aside(path, ".stale", "belongs to other settings")
        return None
    return saved["state"]


def _set_aside(path: Path, suffix: str, why: str) -> None:
    aside = path.with_name(path.name + suffix)
    path.replace(aside)
    warnings.warn(f"checkpoint {path} {why}; moved to {aside.name}, this part starts afresh", ICLGDNotice,
                  stacklevel=3)
