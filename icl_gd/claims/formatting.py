"""How the claims' numbers are written in every report, note and detail line (one rule, so a value reads the same
wherever it appears)."""

from __future__ import annotations

import math


def format_value(value: float) -> str:
    """Three significant digits; scientific below 1e-3; ``inf`` / ``nan`` as Python writes them."""
    if not math.isfinite(value):
        return str(value)
    return f"{value:.3g}" if abs(value) >= 1e-3 or value == 0 else f"{value:.2e}"
