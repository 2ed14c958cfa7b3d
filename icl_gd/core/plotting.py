"""Figure helpers shared by every study: a headless backend, one style, PNG + PDF written atomically.

``plt`` and ``sns`` are matplotlib's pyplot and seaborn, imported (with the backend and style set) on first use, so
importing a study to read its config (``icl-gd config``) does not pay for the plotting stack.
"""

from __future__ import annotations

import importlib
import io
from pathlib import Path
from types import ModuleType
from typing import Any

from icl_gd.core.results import atomic_write_bytes


def _load() -> None:
    import matplotlib

    matplotlib.use("Agg")  # headless: studies run on servers and in CI
    import seaborn

    seaborn.set_theme(context="paper", style="whitegrid")


class _OnFirstUse:
    """A module imported (after ``_load``) when one of its attributes is first read."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._module: ModuleType | None = None

    def __getattr__(self, attr: str) -> Any:
        if self._module is None:
            _load()
            self._module = importlib.import_module(self._name)
        return getattr(self._module, attr)


plt: Any = _OnFirstUse("matplotlib.pyplot")
sns: Any = _OnFirstUse("seaborn")


def save_figure(fig: "plt.Figure", out: Path, name: str) -> list[Path]:
    """Write ``out/figures/name.png`` and ``.pdf`` atomically, close ``fig``, return the paths."""
    paths = []
    for fmt in ("png", "pdf"):
        buffer = io.BytesIO()
        fig.savefig(buffer, format=fmt, dpi=150 if fmt == "png" else None, bbox_inches="tight")
        path = Path(out) / "figures" / f"{name}.{fmt}"
        atomic_write_bytes(path, buffer.getvalue())
        paths.append(path)
    plt.close(fig)
    return paths
