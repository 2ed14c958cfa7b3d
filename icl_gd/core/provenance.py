"""Which source a result came from: the git commit of the icl-gd tree that computed it."""

from __future__ import annotations

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


__all__ = ["source_commit"]
