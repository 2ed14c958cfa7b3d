"""Which source a result came from: the git commit of the icl-gd tree that computed it, and a digest of its code."""

from __future__ import annotations

import hashlib
import os
import subprocess
from functools import lru_cache
from pathlib import Path

SOURCE_ROOT = Path(__file__).resolve().parents[2]  # the checkout holding icl_gd/ (an editable install's)


@lru_cache(maxsize=1)
def source_commit() -> str:
    """The source tree's short commit, with ``+dirty`` for uncommitted changes to tracked files; outside a git
    checkout of icl-gd itself (an installed wheel, even inside some other repository), the package version.

    Cached per process: a run records the source it started from."""
    from icl_gd import __version__

    outside = f"icl-gd {__version__} (not a git checkout)"

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=SOURCE_ROOT, capture_output=True, text=True, timeout=10,
                              check=True).stdout.strip()

    try:
        if Path(git("rev-parse", "--show-toplevel")).resolve() != SOURCE_ROOT:
            return outside
        commit = git("rev-parse", "--short", "HEAD")
        dirty = git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return outside
    return commit + ("+dirty" if dirty else "")


@lru_cache(maxsize=1)
def source_digest() -> str:
    """A digest of every Python source file of the ``icl_gd`` package (each file's path inside the package and its
    bytes, the studies and constructions included): equal digests, the same code, committed or not. Read at the
    first call and cached per process: a run keys its shared results by the code it started with."""
    package = Path(__file__).parents[1]  # not resolved: in a checkout, studies/ and constructions/ are links
    files = []
    for folder, dirs, names in os.walk(package, followlinks=True):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        files.extend(Path(folder) / n for n in names if n.endswith(".py"))
    digest = hashlib.sha256()
    for path in sorted(files, key=lambda p: p.relative_to(package).as_posix()):
        digest.update(path.relative_to(package).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:20]


__all__ = ["source_commit", "source_digest"]
