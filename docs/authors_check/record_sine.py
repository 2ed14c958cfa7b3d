"""Fold the per-seed JSON files of ``sine.py`` (their non_linear_regression notebook, Fig. 4) into
``icl_gd/claims/authors_values.json``, one record per claim, with its provenance:

    python docs/authors_check/record_sine.py /tmp/ac/sine_s*.json [--values COPY.json]

Run by hand after the driver, with icl-gd's python (no JAX needed). The statistics are the claims' own
(``icl_gd/claims/registry/von_oswald_models.py``, icl-gd's ``sine --preset paper``, whose "meta" is the baseline
with its Prop. 1 layer frozen at η = 0.1, as theirs), of the final models on 10 000 fresh test tasks of their law
(icl-gd's ``n_test``; the notebook's own 2048 test tasks' values are in ``measured``):

- ``vo-sine``: |L_trained - L_meta| / L_meta;
- ``vo-sine-alignment``: the mean cosine of ∂ŷ/∂x_q, trained against the baseline (their ``analyse``, Fig. 4 right;
  x_q is a scalar, so each task's cosine is ±1, the sign agreement; their norms carry +1e-8, icl-gd's cosine an eps
  of 1e-12: the same statistic where |∂ŷ/∂x_q| ≫ 1e-8);
- ``vo-sine-function``: √(mean (ŷ - ŷ_meta)²) / √(mean ŷ_meta²) over the test queries (icl-gd's
  ``relative_prediction_rms``).

``same_setup`` is true only when every run is complete and trained the claims' plan's budget (read from the
registry: ``sine --preset paper``, now 20 000 steps of the model and 20 000 of the baseline). ``--values`` writes
into a copy instead of the repository's file.
"""

from __future__ import annotations

import argparse

from _record import load_runs, provenance, write


def plan_steps() -> int:
    """The claims' plan's training steps for sine (the paper preset with the plan's overrides); the baseline trains
    as many (``studies/sine.baseline_training``)."""
    from icl_gd.claims.registry.plans import SINE
    from icl_gd.studies.sine import paper_config
    overrides = dict(o.split("=", 1) for o in SINE.overrides)
    return int(overrides.get("steps", paper_config().training.steps))


def table(runs: list[dict]) -> str:
    """The runs as the README's markdown table, one row a seed (10 000 fresh test tasks; the notebook's 2048 in
    brackets) and the wall time."""
    rows = ["| seed | steps (model + baseline) | trained | baseline (meta) | gap | cos ∂ŷ/∂x_q | prediction difference "
            "| function rel. RMS | wall |", "|---|---|---|---|---|---|---|---|---|"]
    for r in runs:
        f, n = r["final"]["fresh_test_set"], r["final"]["notebook_test_set"]
        rows.append(f"| {r['seed']} | {r['steps']} + {r['baseline_steps']} | {f['loss_trained']:.6f} "
                    f"({n['loss_trained']:.6f}) | {f['loss_meta']:.6f} ({n['loss_meta']:.6f}) | "
                    f"{f['rel_gap_trained_vs_meta']:+.1%} ({n['rel_gap_trained_vs_meta']:+.1%}) | "
                    f"{f['cos_sensitivity']:.4f} ({n['cos_sensitivity']:.4f}) | {f['pred_diff']:.5f} "
                    f"({n['pred_diff']:.5f}) | {f['function_rel_rms']:.4f} ({n['function_rel_rms']:.4f}) | "
                    f"{r['provenance']['wall_s']} s |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", help="sine.py --out files, one per seed")
    ap.add_argument("--values", default=None, help="the authors_values.json to write (default: the repository's, "
                    "_record.VALUES)")
    ap.add_argument("--table", action="store_true", help="print the runs as the README's markdown table; write nothing")
    args = ap.parse_args(argv)
    runs = load_runs(args.runs)
    if not all(r.get("driver") == "sine" for r in runs):
        raise SystemExit("give the JSON files of docs/authors_check/sine.py --out")
    if args.table:
        print(table(runs))
        return
    if len({r["seed"] for r in runs}) != len(runs):
        raise SystemExit("one file per seed")
    eras = {r["legacy_prng"] for r in runs}
    if len(eras) != 1:
        raise SystemExit("the runs mix PRNG eras (--prng-era and not): record them separately")
    steps = plan_steps()
    why = [f"seed {r['seed']} did not finish" for r in runs if not r.get("complete")]
    why += [f"seed {r['seed']} trained {r['steps']} + {r['baseline_steps']} steps, the plan {steps} + {steps}"
            for r in runs if (r["steps"], r["baseline_steps"]) != (steps, steps)]
    same = not why
    era = ("keys drawn as before jax 0.5 (--prng-era: jax_threefry_partitionable False, the stream of their notebooks' "
           "jax 0.3.25)" if eras.pop() else "keys drawn by current JAX's default PRNG")
    r0 = runs[0]
    setup = (f"their non_linear_regression notebook: the baseline (embedding + MLP under the Prop. 1 layer frozen at "
             f"η = 0.1, their pre_train_gd_hps: Adam 3e-4, clip 100) {r0['baseline_steps']} steps of "
             f"{r0['baseline_batch_size']} tasks, then the trained model (embedding + MLP + one LSA layer, AdamW 1e-3, "
             f"clip 100) {r0['steps']} steps of {r0['batch_size']} tasks; the statistics of the final models on "
             f"10 000 fresh test tasks of their law; {era}"
             + ("" if same else f"; not the claims' plan: {'; '.join(why)}"))
    common = provenance(runs, setup=setup, driver=f"docs/authors_check/sine.py --seed S --steps {r0['steps']} "
                        f"--baseline-steps {r0['baseline_steps']}{' --prng-era' if r0['legacy_prng'] else ''} --out F; "
                        "docs/authors_check/record_sine.py")
    common["same_setup"] = same
    seeds = [r["seed"] for r in runs]

    def fresh(r):
        return r["final"]["fresh_test_set"]

    def notebook(r):
        return r["final"]["notebook_test_set"]

    records = {
        "vo-sine": (
            [abs(fresh(r)["rel_gap_trained_vs_meta"]) for r in runs], seeds,
            "|L_trained - L_meta| / L_meta on 10 000 fresh test tasks, meta = their baseline (η frozen at 0.1): "
            + "; ".join(f"seed {r['seed']} {fresh(r)['loss_trained']:.6f} vs {fresh(r)['loss_meta']:.6f} "
                        f"({fresh(r)['rel_gap_trained_vs_meta']:+.1%}; their notebook's 2048 test tasks "
                        f"{notebook(r)['loss_trained']:.6f} vs {notebook(r)['loss_meta']:.6f})" for r in runs)),
        "vo-sine-alignment": (
            [fresh(r)["cos_sensitivity"] for r in runs], seeds,
            "mean cosine of ∂ŷ/∂x_q, trained vs their baseline (their analyse; x_q a scalar, so the sign "
            "agreement), 10 000 fresh test tasks: "
            + "; ".join(f"seed {r['seed']} {fresh(r)['cos_sensitivity']:.4f} (notebook's 2048 tasks "
                        f"{notebook(r)['cos_sensitivity']:.4f}; prediction difference {fresh(r)['pred_diff']:.5f})"
                        for r in runs)),
        "vo-sine-function": (
            [fresh(r)["function_rel_rms"] for r in runs], seeds,
            "√(mean (ŷ - ŷ_meta)²) / √(mean ŷ_meta²) over the queries of 10 000 fresh test tasks, trained vs their "
            "baseline: " + "; ".join(f"seed {r['seed']} {fresh(r)['function_rel_rms']:.4f} (notebook's 2048 tasks "
                                     f"{notebook(r)['function_rel_rms']:.4f})" for r in runs)),
    }
    write(records, common, args.values)
    if not same:
        print(f"same_setup false: {'; '.join(why)}")


if __name__ == "__main__":
    main()
