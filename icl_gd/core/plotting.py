"""Figure helpers shared by every study: a headless backend, one style, PNG + PDF written atomically.

``plt`` and ``sns`` are matplotlib's pyplot and seaborn, imported (with the backend and style set) on first use, so
importing a study to read its config (``icl-gd config``) does not pay for the plotting stack.

The one style: the Okabe-Ito palette (told apart with every common colour-vision deficiency), each series also
with its own marker and dash (``MARKERS``, ``DASHES``: series stay apart in grey-scale and where they coincide),
one set of title, label and legend sizes, legends beside the axes (``legend_outside``), and every saved figure
titled with what ran (``save_figure``'s ``label``: study, preset, seeds, steps).
"""

from __future__ import annotations

import importlib
import io
from pathlib import Path
from types import ModuleType
from typing import Any

from icl_gd.core.results import atomic_write_bytes

# Okabe & Ito (2008), without their yellow (unreadable on white) and black first (kept for references and data).
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#999999")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
DASHES = ("-", "--", "-.", ":", (0, (5, 1, 1, 1)), (0, (3, 1)), (0, (1, 2)), (0, (7, 2)))
TITLE_SIZE, LABEL_SIZE, TICK_SIZE, LEGEND_SIZE = 9, 8, 7, 7


def _load() -> None:
    import matplotlib

    matplotlib.use("Agg")  # headless: studies run on servers and in CI
    import seaborn
    from cycler import cycler

    seaborn.set_theme(context="paper", style="whitegrid", palette=list(PALETTE))
    matplotlib.rcParams.update({
        "axes.prop_cycle": cycler(color=PALETTE) + cycler(linestyle=DASHES),
        "axes.titlesize": TITLE_SIZE, "axes.labelsize": LABEL_SIZE, "figure.titlesize": TITLE_SIZE,
        "xtick.labelsize": TICK_SIZE, "ytick.labelsize": TICK_SIZE, "legend.fontsize": LEGEND_SIZE,
        "legend.title_fontsize": LEGEND_SIZE, "lines.markersize": 4,
    })


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


def series_style(i: int) -> dict[str, Any]:
    """The ``i``-th series' colour, marker and dash (``ax.plot(..., **series_style(i))``)."""
    return {"color": PALETTE[i % len(PALETTE)], "marker": MARKERS[i % len(MARKERS)],
            "linestyle": DASHES[i % len(DASHES)]}


def legend_outside(ax: Any, **kwargs: Any) -> Any:
    """The axes' legend to the right of it, off the data (no legend when nothing is labelled)."""
    handles, labels = ax.get_legend_handles_labels()
    if not handles:
        return None
    return ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0,
                     frameon=False, **kwargs)


def mark_overflow(ax: Any, x: float, y: float, text: str = "overflow", color: str = "black") -> None:
    """An ✕ at (x, y), the last finite point of a curve that diverges after it, with ``text`` beside it: a curve
    never ends silently."""
    ax.plot([x], [y], marker="X", ms=9, color=color, linestyle="none", zorder=6)
    ax.annotate(text, (x, y), xytext=(4, 4), textcoords="offset points", fontsize=TICK_SIZE, color=color)


def title_figure(fig: Any, label: str) -> None:
    """Add ``label`` (what ran) under the figure's own title, or as its title when it has none."""
    if not label:
        return
    own = fig.get_suptitle()
    # Above the axes (saved with bbox_inches="tight", the canvas grows to hold it), never over a panel's title.
    fig.suptitle(f"{own}\n{label}" if own else label, fontsize=TITLE_SIZE, y=1.0, va="bottom")


def save_figure(fig: "plt.Figure", out: Path, name: str, label: str = "") -> list[Path]:
    """Write ``out/figures/name.png`` and ``.pdf`` atomically, titled with ``label`` (what ran: ``RunContext.label``;
    ``title_figure``), close ``fig``, return the paths."""
    title_figure(fig, label)
    paths = []
    for fmt in ("png", "pdf"):
        buffer = io.BytesIO()
        fig.savefig(buffer, format=fmt, dpi=150 if fmt == "png" else None, bbox_inches="tight")
        path = Path(out) / "figures" / f"{name}.{fmt}"
        atomic_write_bytes(path, buffer.getvalue())
        paths.append(path)
    plt.close(fig)
    return paths
