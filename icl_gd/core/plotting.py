"""Figure helpers shared by every study: a headless backend, one style, PNG + PDF written atomically."""

from __future__ import annotations

import io
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # headless: studies run on servers and in CI
import matplotlib.pyplot as plt  # noqa: E402
import seaborn as sns  # noqa: E402

from icl_gd.core.results import atomic_write_bytes  # noqa: E402

sns.set_theme(context="paper", style="whitegrid")


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
