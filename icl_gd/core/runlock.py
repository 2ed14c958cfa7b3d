"""One run at a time per run directory: an exclusive lock file naming its owner (pid and host).

The lock is ``DIR/.icl-gd.lock`` held with ``flock`` for as long as the run lasts. The kernel drops the lock when
its process ends, however it ends (Ctrl-C, ``kill -9``, a lost node's process), so a lock file whose ``flock`` can
be taken belongs to a process that is gone: it is taken over with a notice naming the old owner. A live owner
makes the second run fail with ``RunDirectoryError`` naming its pid and host. ``flock`` also works on NFS v4
(Linux maps it to a POSIX byte-range lock there), the shared storage a Ray cluster's run directories live on.
"""

from __future__ import annotations

import os
import socket
import time
import warnings
from pathlib import Path
from types import TracebackType

from icl_gd.core.errors import ICLGDNotice, RunDirectoryError

LOCK_NAME = ".icl-gd.lock"


def _owner_text() -> str:
    return f"pid={os.getpid()} host={socket.gethostname()} since={time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}\n"


def _describe(text: str) -> str:
    """'pid 123 on host h' from a lock file's ``key=value`` line ('an unknown process' when unreadable)."""
    fields = dict(part.split("=", 1) for part in text.split() if "=" in part)
    if "pid" not in fields:
        return "an unknown process"
    return f"pid {fields['pid']} on host {fields.get('host', '?')}" + (
        f" (since {fields['since']})" if "since" in fields else "")


class RunLock:
    """``with RunLock(out): ...``: own the run directory ``out`` (which must exist) or raise RunDirectoryError."""

    def __init__(self, directory: Path) -> None:
        self.path = Path(directory) / LOCK_NAME
        self._fd: int | None = None

    def acquire(self) -> "RunLock":
        import fcntl

        while True:
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError as exc:
                raise RunDirectoryError(f"cannot create the lock {self.path}: {exc.strerror or exc}") from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                owner = _describe(os.pread(fd, 512, 0).decode(errors="replace"))
                os.close(fd)
                raise RunDirectoryError(f"{self.path.parent} is in use by another run ({owner}); wait for it to "
                                        f"finish, or use another --out") from None
            # The previous owner may have removed the file between our open and our flock: then we hold a lock
            # on a file nobody else can see, so start again on the file that is there now.
            try:
                same = os.fstat(fd).st_ino == os.stat(self.path).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        previous = os.pread(fd, 512, 0).decode(errors="replace").strip()
        if previous:  # left behind by a process that ended without releasing it
            warnings.warn(f"{self.path.parent} was locked by {_describe(previous)}, which is no longer running; "
                          "taking the run directory over", ICLGDNotice, stacklevel=2)
        os.ftruncate(fd, 0)
        os.pwrite(fd, _owner_text().encode(), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is None:
            return
        # Unlink while still holding the lock, so nobody can take a lock on the file we are about to drop.
        self.path.unlink(missing_ok=True)
        os.close(self._fd)
        self._fd = None

    def __enter__(self) -> "RunLock":
        return self.acquire()

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.release()
