"""The numbers docs/full-run/README.md and docs/reproduce.md give of the kept full-budget runs, held to the folder
and the kept table, counted as the claims wing counts them: a run is a directory under ``runs/`` with its
``metrics.json`` (``plan.finished``), the construction checks' ``runs/verify`` aside; a judgement reads each
claim's ``plan_dirs``; CPU and wall minutes are the runs' ``timings.json`` summed (``RunRecord``)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from icl_gd.claims.plan import VERIFY_DIR, RunRecord, finished, plan_dirs, select_claims

ROOT = Path(__file__).resolve().parents[1]
FULL_RUN = ROOT / "docs" / "full-run"
README = FULL_RUN / "README.md"
REPRODUCE = ROOT / "docs" / "reproduce.md"
TABLE = ROOT / "docs" / "claims-table.json"


@dataclass(frozen=True)
class Kept:
    runs: int  # finished study runs in the folder
    read: int  # those a judgement of the registry reads
    cpu_min: float
    wall_min: float
    fewest_seeds: int  # over the kept table's claims
    most_seeds: int


def kept(root: Path = FULL_RUN, table: Path = TABLE) -> Kept:
    runs = [p for p in (root / "runs").iterdir() if p.is_dir() and p.name != VERIFY_DIR and finished(p)]
    records = [RunRecord.read(p) for p in runs]
    read = {d for claim in select_claims(None) for dirs in plan_dirs(claim, root, quick=False) for d in dirs
            if d.name != VERIFY_DIR and finished(d)}
    seeds = [c["seeds"] for c in json.loads(table.read_text())["claims"]]
    return Kept(len(runs), len(read), sum(r.cpu_s or 0 for r in records) / 60,
                sum(r.wall_s or 0 for r in records) / 60, min(seeds), max(seeds))


def _number(pattern: str, text: str, page: str) -> list[int]:
    found = re.search(pattern, text, re.S)
    assert found, f"{page} no longer says {pattern!r}"
    return [int(g) for g in found.groups()]


def disagreements(readme: str, reproduce: str, facts: Kept) -> list[str]:
    """Each number the two pages state that the folder or the table does not bear out."""
    out = []
    runs, cpu, wall = _number(r"`runs/` has (\d+) finished runs.*?; (\d+) CPU min,\s+(\d+) min of run wall time",
                              readme, "full-run/README.md")
    (read,) = _number(r"A judgement of today's registry reads (\d+) of them", readme, "full-run/README.md")
    (other,) = _number(r"The other (\d+) are runs no plan reads", readme, "full-run/README.md")
    read_2, runs_2 = _number(r"A judgement\s+reads (\d+) of the (\d+) runs kept", reproduce, "reproduce.md")
    fewest, most = _number(r"stand on (\d+) to (\d+) seeds", reproduce, "reproduce.md")
    stated = {"runs": (runs, runs_2), "read": (read, read_2), "unread": (other,), "cpu_min": (cpu,),
              "wall_min": (wall,), "fewest_seeds": (fewest,), "most_seeds": (most,)}
    truth = {"runs": facts.runs, "read": facts.read, "unread": facts.runs - facts.read,
             "cpu_min": round(facts.cpu_min), "wall_min": round(facts.wall_min), "fewest_seeds": facts.fewest_seeds,
             "most_seeds": facts.most_seeds}
    for key, values in stated.items():
        out += [f"{key}: the page says {v}, the folder {truth[key]}" for v in values if v != truth[key]]
    return out


def test_the_pages_state_the_kept_runs_as_the_folder_holds_them():
    assert disagreements(README.read_text(), REPRODUCE.read_text(), kept()) == []


def test_a_stale_count_is_caught():
    facts = kept()
    readme, reproduce = README.read_text(), REPRODUCE.read_text()
    stale = reproduce.replace(f"reads {facts.read} of the {facts.runs} runs kept",
                              f"reads {facts.read} of the 131 runs kept")
    assert disagreements(readme, stale, facts) == [f"runs: the page says 131, the folder {facts.runs}"]
    one_more = Kept(facts.runs + 1, facts.read, facts.cpu_min, facts.wall_min, facts.fewest_seeds, 10)
    assert disagreements(readme, reproduce, one_more) == [
        f"runs: the page says {facts.runs}, the folder {facts.runs + 1}",
        f"runs: the page says {facts.runs}, the folder {facts.runs + 1}",
        f"unread: the page says {facts.runs - facts.read}, the folder {facts.runs + 1 - facts.read}",
        f"most_seeds: the page says {facts.most_seeds}, the folder 10"]
