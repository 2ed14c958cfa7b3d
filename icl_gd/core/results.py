"""Run directories and atomic result files.

Every file is written to a temporary sibling and renamed into place, so an interrupted run never leaves a
half-written file under its final name. ``metrics.json`` is written last: its presence marks a finished run.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import errno
import io
import json
import math
import os
import secrets
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, BinaryIO

from icl_gd.core import stats
from icl_gd.core.errors import ResultWriteError, RunDirectoryError

FINISHED_MARKER = "metrics.json"


@contextlib.contextmanager
def atomic_open(path: Path) -> Iterator[BinaryIO]:
    """A binary handle on a temporary sibling of ``path``; on a clean exit it is fsynced and renamed to ``path``,
    on an error removed, so ``path`` is either the old file or the whole new one. An OSError on the way (a full
    disk) becomes a ResultWriteError naming ``path`` and the reason."""
    path = Path(path)
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = _create_sibling(path)
        with os.fdopen(fd, "wb") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError) and not isinstance(exc, ResultWriteError):
            error = ResultWriteError(write_failure(path, exc))
            error.errno = exc.errno
            raise error from exc
        raise


def _create_sibling(path: Path) -> tuple[int, str]:
    """Create a new temporary sibling of ``path`` (mode 0666 less the umask, as ``open`` would make ``path``
    itself; ``tempfile.mkstemp`` would make it 0600) and return its descriptor and name."""
    for _ in range(100):
        tmp = str(path.parent / f".{path.name}.{secrets.token_hex(4)}.tmp")
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free temporary name", str(path))


def write_failure(path: Path, exc: OSError) -> str:
    """The one line a failed result write ends in: the path, the OS's reason, what to do."""
    full = exc.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC))
    return (f"cannot write {path}: {exc.strerror or exc}; {'free space' if full else 'fix that'} and rerun the "
            "same command to resume")


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temporary file in the same directory and an atomic rename."""
    with atomic_open(path) as handle:
        handle.write(data)


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def marked_block_span(path: Path, start: str, end: str, what: str = "") -> tuple[str, int, int]:
    """The text of ``path`` and the span [i, j) from marker ``start`` through the first marker ``end`` after it; a
    missing file or a file without both markers (in that order) is a ConfigError naming them."""
    from icl_gd.core.errors import ConfigError

    label = f"{what + ' ' if what else ''}{path}"
    if not Path(path).is_file():
        raise ConfigError(f"{label}: no such file")
    text = Path(path).read_text()
    i = text.find(start)
    j = text.find(end, i + len(start)) if i >= 0 else -1
    if j < 0:
        raise ConfigError(f"{label}: no markers ({start!r} ... {end!r})")
    return text, i, j + len(end)


def replace_marked_block(path: Path, start: str, end: str, block: str, what: str = "") -> None:
    """Replace the text of ``path`` from marker ``start`` through marker ``end`` with ``block`` (which carries the
    markers again), atomically; a file without both markers is a ConfigError naming them."""
    text, i, j = marked_block_span(path, start, end, what)
    atomic_write_text(Path(path), text[:i] + block + text[j:])


def to_jsonable(value: Any) -> Any:
    """Convert dataclasses, paths, tensors, numpy values and non-finite floats to plain JSON values."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "tolist"):  # torch.Tensor, numpy arrays and scalars
        return to_jsonable(value.tolist())
    if isinstance(value, float) and not math.isfinite(value):
        return None if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return value


def write_json(path: Path, obj: Any) -> None:
    atomic_write_text(path, json.dumps(to_jsonable(obj), indent=2, sort_keys=False) + "\n")


def read_json(path: Path) -> Any:
    return json.loads(Path(path).read_text())


def write_csv(path: Path, rows: Iterable[Mapping[str, Any]], columns: list[str] | None = None) -> None:
    """Write tidy rows (one observation per row) as CSV, atomically."""
    rows = [dict(r) for r in rows]
    if columns is None:
        columns = []
        for row in rows:
            columns.extend(k for k in row if k not in columns)
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: to_jsonable(row.get(k, "")) for k in columns})
    atomic_write_text(path, buffer.getvalue())


def prepare_run_dir(out: Path, force: bool) -> Path:
    """Create ``out`` for a new run. Refuses a directory that holds a finished run unless ``force``.

    An unfinished run (no ``metrics.json``) is left in place so that its checkpoints can be resumed.
    """
    out = Path(out)
    try:
        if out.exists() and not out.is_dir():
            raise RunDirectoryError(f"--out {out} exists and is not a directory")
        if (out / FINISHED_MARKER).exists() and not force:
            raise RunDirectoryError(f"--out {out} already holds a finished run; pass --force to overwrite it")
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".write-probe"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:  # a part longer than the file system allows, a read-only or forbidden directory
        raise RunDirectoryError(f"--out {out} is not usable: {exc.strerror or exc}") from None
    if force:
        (out / FINISHED_MARKER).unlink(missing_ok=True)
    return out


def write_metrics(out: Path, per_seed: Mapping[Any, Mapping[str, Any]],
                  reductions: Mapping[str, Callable[[list[float]], float]] | None = None) -> dict[str, Any]:
    """Write ``metrics.json`` = {"mean", "std", "seeds"} and return the ``mean`` object. Call it last: it marks
    the run finished. ``reductions`` replaces the mean for named metrics (e.g. ``max`` for a worst-case error)."""
    mean = mean_over_seeds(per_seed, reductions)
    spread = reduce_over_seeds(per_seed, stats.sample_std)
    write_json(Path(out) / FINISHED_MARKER,
               {"mean": mean, "std": spread, "seeds": {str(k): v for k, v in per_seed.items()}})
    return mean


def mean_over_seeds(per_seed: Mapping[Any, Mapping[str, Any]],
                    reductions: Mapping[str, Callable[[list[float]], float]] | None = None) -> dict[str, Any]:
    """The ``mean`` object of ``metrics.json``: every metric averaged over seeds, except those ``reductions``
    names, which it reduces its own way."""
    mean = reduce_over_seeds(per_seed, stats.mean)
    for key, reduce in (reductions or {}).items():
        mean[key] = reduce([row[key] for row in per_seed.values()])
    return mean


def reduce_over_seeds(per_seed: Mapping[Any, Mapping[str, Any]],
                      reduce: Callable[[list[float]], Any]) -> dict[str, Any]:
    """Each metric reduced over seeds (``stats.mean`` for the mean; lists element-wise); a value that is
    neither a number nor a list of numbers (a name, a setting) is taken from the first seed."""
    rows = list(per_seed.values())

    def number(v: Any) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool)

    def apply(values: list[Any]) -> Any:
        if all(number(v) for v in values):
            return reduce([float(v) for v in values])
        if all(isinstance(v, list) for v in values) and all(number(x) for v in values for x in v):
            return [reduce(list(col)) for col in zip(*values)]
        return values[0]

    return {key: apply([row[key] for row in rows]) for key in rows[0]}
