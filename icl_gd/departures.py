"""Where each study's ``default`` preset departs from the paper's set-up (its ``paper`` preset), and why.

One list, rendered twice: the README's table of departures and the reproduction report's (a test keeps the
README's copy in step with this one).
"""

from __future__ import annotations

from dataclasses import dataclass

VON_OSWALD = "von Oswald et al. 2023"
IRIE = "Irie, Csordás & Schmidhuber 2022"


@dataclass(frozen=True)
class Departure:
    paper: str
    study: str
    key: str
    paper_value: str  # the authors' code / paper
    ours: str  # our default
    why: str


DEPARTURES: tuple[Departure, ...] = ()


README_START = "<!-- departures:start (rendered from icl_gd/departures.py; a test keeps it in step) -->"
README_END = "<!-- departures:end -->"


def departures_table_markdown() -> str:
    """The README's table (study | key | paper | our default | why), between its markers."""
    lines = [README_START, "", "| study | key | paper (authors' code) | our default | why |", "|---|---|---|---|---|"]
    lines += [f"| `{d.study}` | {d.key} | {d.paper_value} | {d.ours} | {d.why} |" for d in DEPARTURES]
    return "\n".join(lines + ["", README_END])


if __name__ == "__main__":  # python -m icl_gd.departures README.md: re-render the README's table
    import sys

    from .results import replace_marked_block

    replace_marked_block(sys.argv[1], README_START, README_END, departures_table_markdown())
