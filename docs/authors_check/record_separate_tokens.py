"""Fold the per-seed JSON files of ``separate_tokens.py`` (their normal_token_construct notebook, Fig. 5) into
``icl_gd/claims/authors_values.json``, one record per claim, with its provenance:

    python docs/authors_check/record_separate_tokens.py /tmp/ac/sep_tok_s*.json [--values COPY.json]

Run by hand after the driver, with icl-gd's python (no JAX needed). The statistics are the claims' own
(``icl_gd/claims/registry/von_oswald_models.py``), of the final model on their 10 000 test tasks:

- ``vo-separate-one-step``: |L_trained - L_GD| / L_GD, one GD step with η tuned as icl-gd tunes it (closed form on
  10 000 held-out tasks; the driver's ``rel_gap_trained_vs_gd``);
- ``vo-separate-not-two-steps``: (L_trained - L_GD2) / L_GD2, two GD steps each with its own tuned η;
- ``vo-separate-copy``: icl-gd's copy statistic of their trained first layer, next / other_per_token (per-task
  Jacobians of the update, positions included, on the first 64 test tasks, at the context inputs' tokens);
- ``vo-separate-copy-their-measure``: their own ``analyse_copy``, next / other, on all 10 000 test tasks (their
  Training cell's ``eval_data``; the first 1000 where a run kept only those, said in the record), "other" with k+1
  among the others as their code sums it; icl-gd's runs report the same measure (``copy_authors_*``).

Each record holds the per-seed trained losses and the zero predictor's loss for the claims' failed-seed test. Their
test tasks differ by seed (the notebook draws them from the seed's key), so the record's single ``untrained_loss``
is the mean of the seeds' zero-predictor losses (each one is in ``trained_loss_source``).

``same_setup`` is true only when every run is complete and has the claims' plan's budget (read from the registry:
``separate-tokens --preset paper`` with the plan's overrides, now 40 000 steps of 2048 tasks) and icl-gd's tuning and
copy sizes (10 000 held-out tasks, 64 copy tasks). ``--values`` writes into a copy instead of the repository's file.
"""

from __future__ import annotations

import argparse
import statistics

from _record import load_runs, per_seed, provenance, write


def plan_budget() -> dict:
    """The claims' plan for separate tokens: steps, batch size, tuning and copy tasks (the paper preset with the
    plan's overrides)."""
    from icl_gd.claims.registry.plans import SEPARATE_TOKENS
    from icl_gd.studies.separate_tokens import paper_config
    paper = paper_config()
    overrides = dict(o.split("=", 1) for o in SEPARATE_TOKENS.overrides)
    return {"steps": int(overrides.get("steps", paper.training.steps)),
            "batch_size": int(overrides.get("batch_size", paper.training.batch_size)),
            "n_tune": int(overrides.get("n_tune", paper.evaluation.n_tune)),
            "n_copy": int(overrides.get("n_copy", paper.n_copy))}


def same_setup(runs: list[dict], plan: dict) -> tuple[bool, str]:
    """Whether the runs are at the plan's set-up, and, if not, why."""
    why = []
    for r in runs:
        if not r.get("complete"):
            why.append(f"seed {r['seed']} did not finish")
        for key in plan:
            if r.get(key) != plan[key]:
                why.append(f"seed {r['seed']} has {key} {r.get(key)}, the plan {plan[key]}")
    return not why, "; ".join(why)


def their_measure(runs: list[dict]) -> tuple[list[float], list[int], str]:
    """Their analyse_copy's next / other per seed, on all their test tasks where the run has them (the first 1000
    otherwise), with what was measured."""
    def analysis(r: dict) -> tuple[dict, str]:
        return (r["copy_authors_all"], "10 000") if r.get("copy_authors_all") else (r["copy_authors"], "1000")

    analysed = [(r["seed"], *analysis(r)) for r in runs]
    parts = [f"seed {seed} {a['own']:.3f} / {a['next']:.3f} / {a['other']:.4f} ({tasks} tasks)"
             for seed, a, tasks in analysed]
    return ([a["next"] / a["other"] for _, a, _ in analysed], [seed for seed, _, _ in analysed],
            "their analyse_copy of their trained first layer (norms of the task-mean gradient of token k's summed "
            "output to each token's data coordinates, averaged over k; 'other' counting k+1, as their code sums it), "
            "next / other; own / next / other: " + "; ".join(parts))


def table(runs: list[dict]) -> str:
    """The runs as the README's markdown table, one row a seed (the values the records hold, and the wall time)."""
    rows = ["| seed | steps | trained | 1 GD step (η) | gap | 2 GD steps | gap | zero | icl-gd's copy next / other "
            "(ratio) | their analyse_copy own / next / other, 10 000 tasks (next/other) | wall |",
            "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in runs:
        ours, theirs = r["copy_ours"], r.get("copy_authors_all") or r["copy_authors"]
        stuck = " (plateau)" if r["loss_trained"] >= 0.9 * r["loss_zero"] else ""
        rows.append(f"| {r['seed']} | {r['steps']} | {r['loss_trained']:.5f}{stuck} | {r['loss_gd']:.5f} "
                    f"({r['eta_gd']:.3f}) | {r['rel_gap_trained_vs_gd']:+.2%} | {r['loss_gd_2steps']:.5f} | "
                    f"{r['rel_gap_trained_vs_gd_2steps']:+.1%} | {r['loss_zero']:.5f} | {ours['next']:.4f} / "
                    f"{ours['other_per_token']:.4f} ({ours['ratio']:.1f}) | {theirs['own']:.3f} / {theirs['next']:.3f} "
                    f"/ {theirs['other']:.4f} ({theirs['next'] / theirs['other']:.1f}) | "
                    f"{r['provenance']['wall_s']} s |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", help="separate_tokens.py --out files, one per seed")
    ap.add_argument("--values", default=None, help="the authors_values.json to write (default: the repository's, "
                    "_record.VALUES)")
    ap.add_argument("--table", action="store_true", help="print the runs as the README's markdown table; write nothing")
    args = ap.parse_args(argv)
    runs = load_runs(args.runs)
    if not all(r.get("driver") == "separate_tokens" for r in runs):
        raise SystemExit("give the JSON files of docs/authors_check/separate_tokens.py --out")
    if args.table:
        print(table(runs))
        return
    if len({r["seed"] for r in runs}) != len(runs):
        raise SystemExit("one file per seed")
    eras = {r["legacy_prng"] for r in runs}
    if len(eras) != 1:
        raise SystemExit("the runs mix PRNG eras (--prng-era and not): record them separately")
    plan = plan_budget()
    same, why = same_setup(runs, plan)
    era = ("keys drawn as before jax 0.5 (--prng-era: jax_threefry_partitionable False, the stream of their notebooks' "
           "jax 0.3.25)" if eras.pop() else "keys drawn by current JAX's default PRNG (not the stream their notebook "
           "drew)")
    steps = runs[0]["steps"]
    setup = (f"their normal_token_construct notebook: {steps} steps of {runs[0]['batch_size']} fresh tasks, one softmax "
             "head then one linear layer (AdamW 1e-3, clip 10), their 10 000 test tasks drawn from the seed's key; "
             f"{era}; the statistic from the final model"
             + ("" if same else f"; not the claims' plan ({plan['steps']} steps): {why}"))
    common = provenance(runs, setup=setup, driver="docs/authors_check/separate_tokens.py --seed S --steps "
                        f"{steps}{' --prng-era' if runs[0]['legacy_prng'] else ''} --out F; "
                        "docs/authors_check/record_separate_tokens.py")
    common["same_setup"] = same
    seeds = [r["seed"] for r in runs]
    zero = [r["loss_zero"] for r in runs]
    failed = {"trained_loss": [r["loss_trained"] for r in runs], "untrained_loss": statistics.mean(zero),
              "trained_loss_source": "the driver's loss_trained (their predict_test on their test tasks, final "
              "model); untrained_loss: the mean over the seeds' test sets of the zero predictor's loss ("
              + per_seed(runs, "{:.5f}", "loss_zero") + ")"}
    tuning = "η tuned in closed form on 10 000 held-out tasks of their data creator, as icl-gd tunes it"
    records = {
        "vo-separate-one-step": (
            [abs(r["rel_gap_trained_vs_gd"]) for r in runs], seeds,
            f"|L_trained - L_GD| / L_GD on their 10 000 test tasks, GD = one step, {tuning}: "
            + "; ".join(f"seed {r['seed']} {r['loss_trained']:.5f} vs {r['loss_gd']:.5f} (η {r['eta_gd']:.3f}; "
                        f"{r['rel_gap_trained_vs_gd']:+.2%})" for r in runs)),
        "vo-separate-not-two-steps": (
            [r["rel_gap_trained_vs_gd_2steps"] for r in runs], seeds,
            f"(L_trained - L_GD2) / L_GD2 on their 10 000 test tasks, GD2 = two steps each with its own η, {tuning}: "
            + "; ".join(f"seed {r['seed']} {r['loss_trained']:.5f} vs {r['loss_gd_2steps']:.5f} (η "
                        f"{r['eta_gd_2steps'][0]:.3f}, {r['eta_gd_2steps'][1]:.3f})" for r in runs)),
        "vo-separate-copy": (
            [r["copy_ours"]["ratio"] for r in runs], seeds,
            f"icl-gd's copy statistic of their trained first layer (per-task Jacobians of its update, positions "
            f"included, first {runs[0]['n_copy']} test tasks, at the context inputs' tokens): next / other_per_token: "
            + "; ".join(f"seed {r['seed']} {r['copy_ours']['next']:.4f} / {r['copy_ours']['other_per_token']:.4f}"
                        for r in runs)
            + ". Their own analyse_copy (norms of the task-mean gradient, 'other' counting k+1) own / next / other, "
              "first 1000 tasks: " + "; ".join(
                  f"seed {r['seed']} {r['copy_authors']['own']:.3f} / {r['copy_authors']['next']:.3f} / "
                  f"{r['copy_authors']['other']:.3f}" for r in runs)),
        "vo-separate-copy-their-measure": their_measure(runs),
    }
    write(records, common, args.values, extra={claim_id: failed for claim_id in records})
    if not same:
        print(f"same_setup false: {why}")


if __name__ == "__main__":
    main()
