"""Writing the authors' code's values into ``icl_gd/claims/authors_values.json``: one record per claim,
the per-seed values with what was measured and the run's provenance. Shared by the ``record_*.py`` scripts (run by
hand after a driver; they need no JAX)."""

from __future__ import annotations

import json
import re
from pathlib import Path

VALUES = Path(__file__).resolve().parents[2] / "icl_gd" / "claims" / "authors_values.json"
COMMIT = "3d5547ca48b60ecac459834e2c05c9ff5df87991"  # the snapshot the README names


def load_runs(paths: list[str]) -> list[dict]:
    """The drivers' JSON lines, in seed order; a run with GD's η set by hand (``--gd-eta``) is a diagnosis, not their
    set-up, and is refused."""
    runs = [json.loads(Path(p).read_text()) for p in paths]
    if any(r.get("gd_lr_scanned") is False for r in runs):
        raise SystemExit("a run with --gd-eta is a diagnosis, not their set-up: it is not recorded")
    return sorted(runs, key=lambda r: (r["seed"], r.get("n_context", 10)))


def per_seed(runs: list[dict], fmt: str, *keys: str) -> str:
    """"seed S <fields>; ..." for a record's ``measured`` text, ``fmt`` formatting ``keys`` of each run."""
    return "; ".join(f"seed {r['seed']} " + fmt.format(*[r[k] for k in keys]) for r in runs)


def gap_to_gd(runs: list[dict], gd: str = "") -> tuple[list[float], str]:
    """(per-seed (L_trained - L_GD) / L_GD, what was measured); ``gd`` says which GD, e.g. ", GD = 2 steps at their
    scanned η"."""
    return ([r["loss_rel_gap_trained_vs_gd"] for r in runs], f"(L_trained - L_GD) / L_GD on their 10 000 test tasks{gd}: "
            + per_seed(runs, "{:.5f} vs {:.5f}", "loss_trained", "loss_gd"))


def gdpp_records(runs: list[dict], loss_id: str, aligned_id: str) -> dict[str, tuple[list[float], str]]:
    """A stack against GD++ as their ``pre_train_gd_hps`` tunes it: ``loss_id`` |L_trained - L_GD++| / L_GD++ and
    ``aligned_id`` the sensitivity cosine with it (claim id -> (per-seed values, what was measured))."""
    tuning = f"GD++ by their pre_train_gd_hps (Adam, {runs[0]['gdpp_steps']} steps of 512 from the grid-scanned start)"
    return {
        loss_id: ([abs(r["loss_rel_gap_trained_vs_gdpp"]) for r in runs], f"|L_trained - L_GD++| / L_GD++, {tuning}: "
                  + per_seed(runs, "{:.5f} vs {:.5f}", "loss_trained", "loss_gdpp")),
        aligned_id: ([r["cos_sensitivity_gdpp"] for r in runs], f"mean cosine of ∂ŷ/∂x_q, trained vs GD++ (their "
                     f"analyse(); {tuning}): " + per_seed(runs, "{:.5f}", "cos_sensitivity_gdpp")),
    }


def provenance(runs: list[dict], setup: str, driver: str) -> dict:
    """The fields every record of ``runs`` shares: set-up, driver, their commit, library versions, date, wall time
    (summed over a seed's runs where a statistic takes several, e.g. one per head count)."""
    prov = runs[0]["provenance"]
    wall: dict[int, int] = {}
    for r in runs:
        wall[r["seed"]] = wall.get(r["seed"], 0) + r["provenance"]["wall_s"]
    return {
        "steps": runs[0]["steps"], "same_setup": True, "setup": setup, "driver": driver,
        "repository": "google-research/self-organising-systems (transformers_learn_icl_by_gd/src)",
        "commit": COMMIT,
        "versions": prov["versions"] + f"; Python {prov['python']}; CPU ({prov['device']}), "
                    "XLA_FLAGS=--xla_cpu_multi_thread_eigen=false; jnp.DeviceArray aliased to jax.Array",
        "date": prov["date"],
        "wall_s_per_seed": [wall[seed] for seed in sorted(wall)],
        "recorded_in": "docs/authors_check/README.md",
    }


def merged(old: dict | None, new: dict) -> dict:
    """The claim's record after recording ``new``. A run at the claim's set-up (``same_setup``) is the record; runs
    at other set-ups (their notebook's length, a shorter baseline) are kept under ``other_setups``, shown and never
    compared: a run at another set-up never replaces one at the claim's, and a run at the claim's set-up keeps the
    earlier ones. A run is one set-up per ``driver`` command (its flags: steps, PRNG era); recording the same
    command again replaces its earlier record."""
    if old is None:
        return new
    old = dict(old)
    others = [o for o in old.pop("other_setups", []) if o.get("driver") != new.get("driver")]
    if old.get("driver") != new.get("driver"):
        if old.get("same_setup") and not new.get("same_setup"):
            old, new = new, old  # the claim's set-up stays the record
        others.append({**old, "same_setup": False})  # an earlier set-up, or a plan that has since changed
    others.sort(key=lambda o: (o.get("steps", 0), o.get("driver", "")))
    return {**new, "other_setups": others} if others else new


def write(records: dict[str, tuple[list[float], list[int], str]], common: dict, path: Path | None = None,
          extra: dict[str, dict] | None = None) -> None:
    """Claim id -> (per-seed values, their seeds, what was measured), each with ``common``'s provenance and the
    claim's ``extra`` fields (e.g. its per-seed trained losses) into ``path`` (the repository's file unless a copy is
    given); replaces earlier records of the same claims and prints what it wrote."""
    path = Path(VALUES if path is None else path)  # VALUES read at call time (tests point it at a copy)
    data = json.loads(path.read_text())
    for claim_id, (values, seeds, measured) in records.items():
        new = {"values": values, "seeds": seeds, "measured": measured, **common, **(extra or {}).get(claim_id, {})}
        data[claim_id] = merged(data.get(claim_id), new)
    text = json.dumps(data, indent=2, ensure_ascii=False)
    # short lists of numbers on one line, as the rest of the file
    text = re.sub(r"\[\s+([-0-9.e, \n]*?)\s+\]",
                  lambda m: "[" + ", ".join(x.strip() for x in m.group(1).split(",")) + "]", text)
    path.write_text(text + "\n")
    for claim_id, (values, _, _) in records.items():
        print(claim_id, [round(v, 5) for v in values])
