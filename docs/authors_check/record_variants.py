"""Fold the JSON lines of ``constructed_tokens.py`` for App. A.9 and A.10's set-ups into
``icl_gd/claims/authors_values.json`` (by hand, after the driver, with icl-gd's python: no JAX needed,
and the paper's γ come from the claim's registry entry):

    python docs/authors_check/record_variants.py /tmp/ac/k1_ln_s*.json /tmp/ac/k1_sm*_s*.json /tmp/ac/k2_n*_s*.json

- ``--layers 1 --layernorm`` (one layer after their LayerNorm, Fig. 14(a)): ``vo-layernorm``, (L_trained - L_GD) / L_GD;
- ``--layers 2 --separate --layernorm`` (two layers, their LayerNorm before the second, Fig. 14(b)):
  ``vo-layernorm-2``, (L_trained - L_GD) / L_GD against two GD steps;
- ``--layers 1 --fixed-tasks M`` for M = 128 and 2048 (one fixed batch of M tasks, App. A.12, Fig. 16):
  ``vo-fixed-tasks-128-fails`` and ``vo-fixed-tasks-2048-aligned``, the sensitivity cosine with one GD step on their
  fresh test tasks;
- ``--layers 1 --softmax --heads 1`` and ``--heads 2`` of the same seeds (Fig. 12): ``vo-softmax-one-head`` (the
  1-head gap to GD), ``vo-softmax-heads`` (2-head gap minus 1-head gap), ``vo-softmax-heads-alignment`` (2-head
  sensitivity cosine with GD minus 1-head);
- ``--layers 2 --n-context N`` for N = 10, 25, 50, 100 of the same seeds (App. A.10, Fig. 13): ``vo-gamma-vs-n``,
  the largest |γ(N) - γ_paper(N)| / γ_paper(N), γ read off their trained layer by icl-gd's read-off (the driver's
  ``read_off``). A seed missing one of the four N gets no value; its γs are printed.

The statistics are the claims' own (declared in ``icl_gd/claims/registry/von_oswald_models.py``, the fixed task
sets' in ``icl_gd/claims/registry/von_oswald_one_layer.py``).
"""

from __future__ import annotations

import argparse
from collections import defaultdict

from _record import gap_to_gd, load_runs, provenance, write
from icl_gd.claims import CLAIMS

# App. A.10's γ for N = 10, 25, 50, 100, as the claim states them (its statistic's expected values, one per plan)
PAPER_GAMMA = dict(zip((10, 25, 50, 100), next(c for c in CLAIMS if c.id == "vo-gamma-vs-n").statistic.expected))
_SETUP_1 = ("their constructed_token_setup notebook, one layer (their deq = True) {what}: {training}, AdamW 1e-3, "
            "clip 1e-3; their 10 000 test tasks (PRNGKey(5)); GD's η from their scan_lrs ({lr:.3f}); "
            "the statistic from the final model")
_FRESH = "5000 steps of 2048 fresh tasks"
_DRIVER = "docs/authors_check/constructed_tokens.py --layers {K} {flags} --seed S --scan-cache C --out F; " \
          "docs/authors_check/record_variants.py"


def _per_seed(runs: list[dict], fmt) -> str:
    return "; ".join(f"seed {r['seed']} " + fmt(r) for r in runs)


def _record_gap(claim_id: str, runs: list[dict], gd: str, setup: str, flags: str, K: int) -> None:
    values, measured = gap_to_gd(runs, gd)
    write({claim_id: (values, [r["seed"] for r in runs], measured)}, provenance(runs, setup, _DRIVER.format(K=K, flags=flags)))


def layernorm(runs: list[dict]) -> None:
    _record_gap("vo-layernorm", runs, "", _SETUP_1.format(what="after their LayerNorm (layer_norm = True)",
                                                          training=_FRESH, lr=runs[0]["gd_lr"]), "--layernorm", K=1)


def layernorm_2(runs: list[dict]) -> None:
    _record_gap("vo-layernorm-2", runs, ", GD = 2 steps at their scanned η",
                "their constructed_token_setup notebook, two separate LSA layers with their LayerNorm before the second "
                f"(layer_norm = True; their separate stack skips the first): {runs[0]['steps']} steps of 2048 fresh "
                "tasks, AdamW 1e-3, clip 1e-3; their 10 000 test tasks (PRNGKey(5)); GD's η from their scan_lrs "
                f"({runs[0]['gd_lr']:.3f}); the statistic from the final model", "--separate --layernorm [--no-gdpp]", K=2)


FIXED_TASK_CLAIMS = {128: "vo-fixed-tasks-128-fails", 2048: "vo-fixed-tasks-2048-aligned"}


def fixed_tasks(runs: list[dict]) -> None:
    for m, claim_id in FIXED_TASK_CLAIMS.items():
        mine = [r for r in runs if r["fixed_tasks"] == m]
        if not mine:
            continue
        write({claim_id: (
            [r["cos_sensitivity"] for r in mine], [r["seed"] for r in mine],
            "mean cosine of ∂ŷ/∂x_q, trained vs one GD step, on their 10 000 fresh test tasks (their analyse()): "
            + _per_seed(mine, lambda r: f"{r['cos_sensitivity']:.5f} (loss {r['loss_trained']:.5f} vs GD "
                                        f"{r['loss_gd']:.5f})"))},
            provenance(mine, _SETUP_1.format(what=f"trained on one fixed batch of {m} tasks (cycle_data = 1, bs = {m}: "
                                                  "their data key reset every step)",
                                             training=f"{mine[0]['steps']} full-batch steps", lr=mine[0]["gd_lr"]),
                       _DRIVER.format(K=1, flags=f"--fixed-tasks {m}")))


def softmax(one: list[dict], two: list[dict]) -> None:
    pairs = {r["seed"]: r for r in one}
    pairs = [(pairs[r["seed"]], r) for r in two if r["seed"] in pairs]
    if not pairs:
        raise SystemExit("softmax: no seed has both a 1-head and a 2-head run")
    seeds = [a["seed"] for a, _ in pairs]
    both = "; ".join(f"seed {a['seed']} 1 head {a['loss_trained']:.5f} (cos {a['cos_sensitivity']:.4f}), 2 heads "
                     f"{b['loss_trained']:.5f} (cos {b['cos_sensitivity']:.4f}), GD {a['loss_gd']:.5f}" for a, b in pairs)
    write({
        "vo-softmax-one-head": ([a["loss_rel_gap_trained_vs_gd"] for a, _ in pairs], seeds,
                                "(L_trained - L_GD) / L_GD, one softmax head: " + both),
        "vo-softmax-heads": ([b["loss_rel_gap_trained_vs_gd"] - a["loss_rel_gap_trained_vs_gd"] for a, b in pairs],
                             seeds, "gap to GD with 2 softmax heads minus with 1: " + both),
        "vo-softmax-heads-alignment": ([b["cos_sensitivity"] - a["cos_sensitivity"] for a, b in pairs], seeds,
                                       "cos sensitivity vs GD with 2 heads minus with 1 (their analyse()): " + both),
    }, provenance([a for a, _ in pairs] + [b for _, b in pairs],
                  _SETUP_1.format(what="of softmax attention (use_softmax = True: logits / √key size), 1 and 2 heads",
                                  training=_FRESH,
                                  lr=pairs[0][0]["gd_lr"]),
                  _DRIVER.format(K=1, flags="--softmax --heads H")))


def gamma_vs_n(runs: list[dict]) -> None:
    by_seed: dict[int, dict[int, dict]] = defaultdict(dict)
    for r in runs:
        by_seed[r["seed"]][r["n_context"]] = r
    for seed, got in sorted(by_seed.items()):
        print(f"seed {seed}: γ " + ", ".join(f"N={n} {r['trained_gamma']:.4f}" for n, r in sorted(got.items())))
    full = {s: got for s, got in sorted(by_seed.items()) if set(got) >= set(PAPER_GAMMA)}
    if not full:
        print("vo-gamma-vs-n: no seed has all of N = 10, 25, 50, 100; nothing recorded")
        return
    values = [max(abs(got[n]["trained_gamma"] - g) / g for n, g in PAPER_GAMMA.items()) for got in full.values()]
    measured = ("largest |γ(N) - γ_paper(N)| / γ_paper(N) over N = 10, 25, 50, 100, γ read off their trained "
                "recurrent 2-layer model by icl-gd's read-off (-mean diag QK_xx · mean diag PV_xx): " + "; ".join(
                    f"seed {s} " + ", ".join(f"N={n} {got[n]['trained_gamma']:.4f}" for n in PAPER_GAMMA)
                    for s, got in full.items()))
    used = [r for got in full.values() for r in got.values()]
    write({"vo-gamma-vs-n": (values, list(full), measured)}, provenance(
        used, "their constructed_token_setup notebook, a recurrent stack of 2 LSA layers at N = 10, 25, 50, 100 "
              "(their dataset_size): 5000 steps of 2048 fresh tasks each, their 10 000 test tasks (PRNGKey(5)); the "
              "γ of the final model",
        _DRIVER.format(K=2, flags="--n-context N")))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("paths", nargs="+", metavar="JSON",
                    help="constructed_tokens.py's JSON lines of the variants (fixed tasks, LayerNorm, softmax, γ)")
    paths = ap.parse_args(argv).paths
    every = load_runs(paths)
    fixed = [r for r in every if r["layers"] == 1 and r.get("fixed_tasks", 0) in FIXED_TASK_CLAIMS
             and not r.get("layernorm") and not r.get("softmax") and r["heads"] == 1]
    runs = [r for r in every if not r.get("fixed_tasks")]  # the other set-ups train on fresh tasks
    ln = [r for r in runs if r["layers"] == 1 and r.get("layernorm") and not r.get("softmax")]
    ln2 = [r for r in runs if r["layers"] == 2 and not r["recurrent"] and r.get("layernorm") and not r.get("softmax")
           and r.get("n_context", 10) == 10]
    sm = {h: [r for r in runs if r["layers"] == 1 and r.get("softmax") and not r.get("layernorm") and r["heads"] == h]
          for h in (1, 2)}
    gamma = [r for r in runs if r["layers"] == 2 and r["recurrent"] and "trained_gamma" in r]
    used = len(fixed) + len(ln) + len(ln2) + len(sm[1]) + len(sm[2]) + len(gamma)
    if used != len(every):
        raise SystemExit(f"{len(every) - used} of the JSON lines are of none of the set-ups this script records")
    if fixed:
        fixed_tasks(fixed)
    if ln:
        layernorm(ln)
    if ln2:
        layernorm_2(ln2)
    if sm[1] and sm[2]:
        softmax(sm[1], sm[2])
    if gamma:
        gamma_vs_n(gamma)


if __name__ == "__main__":
    main()
