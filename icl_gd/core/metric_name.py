"""A metric's name: its key in ``metrics.json`` and how a claim's description writes it.

Each study family builds its names in one module (``icl_gd.regression.metric_names``, ``icl_gd.dual.metric_names``)
that both the study writing a metric and the claim reading it call, so a renamed metric changes both at once and a
name typed on one side only fails a test instead of a report.
"""

from __future__ import annotations


class MetricName(str):
    """The key itself, byte for byte (a ``str``: a dict keyed by it is keyed by the plain string), and ``symbol``,
    the quantity in a claim's notation (e.g. "L_GD" for ``loss_gd``; the key when none is given)."""

    symbol: str

    def __new__(cls, key: str, symbol: str = "") -> "MetricName":
        name = super().__new__(cls, key)
        name.symbol = symbol or key
        return name


def symbol_of(name: str) -> str:
    """A name's symbol (a plain string is its own)."""
    return getattr(name, "symbol", name)


def in_part(part: str, name: str) -> MetricName:
    """Metric ``name`` of one part of a run (a setting, a set-up): ``<part>.<name>`` (``StudyRun.record``)."""
    return MetricName(f"{part}.{name}", f"{symbol_of(name)} ({part})")
