"""How a page names the files it links to: run directories below it, figures anywhere, PNGs carried inside."""

from __future__ import annotations

import base64
import os
from dataclasses import dataclass
from pathlib import Path

from icl_gd.claims.verdict import ClaimResult


@dataclass(frozen=True)
class PageLinks:
    """How a page written into ``folder`` names the runs' files: relative to the folder where they lie below it
    (``below``, ``runs``: the report's run links), or by a relative path that may climb out of it (``to``: the
    gallery's figures)."""

    folder: Path

    def below(self, path: Path) -> str:
        path = Path(path)
        return path.relative_to(self.folder).as_posix() if path.is_relative_to(self.folder) else str(path)

    def to(self, path: Path) -> str:
        return Path(os.path.relpath(Path(path).resolve(), Path(self.folder).resolve())).as_posix()

    def runs(self, result: ClaimResult) -> list[str]:
        """The result's run directories, each once, in order."""
        return list(dict.fromkeys(self.below(d) for d in result.run_dirs))


def embedded_png(path: Path) -> str:
    """A PNG file as a ``data:`` URI, so an HTML page carries its figures with it."""
    return "data:image/png;base64," + base64.b64encode(Path(path).read_bytes()).decode("ascii")
