"""Fold the ``ood_gap_laws_*`` fields of ``constructed_tokens.py``'s JSON lines (one layer, ``--layers 1``; a
recurrent stack of two, ``--layers 2``) into ``icl_gd/claims/authors_values.json``: App. A.2's input laws
never seen in training (Fig. 6, right columns).

    python docs/authors_check/record_ood_laws.py /tmp/ac/laws_k1_s*.json /tmp/ac/laws_k2_s*.json

Run by hand after the driver, with icl-gd's python (no JAX needed). The statistic is the claims' ``OodGap`` over
icl-gd's ``input_law_mixture`` sweep: the largest relative loss gap at α = 0.5, 1, 2, 3, 4, 5, their
``create_ood_data`` (each task's law exponential, normal or Laplace; inputs over the context's Frobenius norm, times
α) by their ``compute_other_d_loss`` on 2000 tasks; the same on their ``ood_other_d`` grid (α = 0.5 .. 5 by 0.05,
500 tasks) is recorded beside it. One layer against one GD step (``vo-ood-unseen-laws``); two recurrent layers
against GD++ as their code tunes it (``vo-recurrent2-ood-unseen-laws-gdpp``, whose own reference is tuned by our
L-BFGS, as for ``vo-recurrent2-ood-gdpp``).
"""

from __future__ import annotations

import argparse

from _record import load_runs, provenance, write

_SETUP = ("their constructed_token_setup notebook, {what}: 5000 steps of 2048 fresh tasks; GD's η from their scan_lrs "
          "({lr:.3f}){gdpp}; the statistic from the final model")
_DRIVER = "docs/authors_check/constructed_tokens.py --layers {K} --seed S --scan-cache C --out F; " \
          "docs/authors_check/record_ood_laws.py"


def _measured(runs: list[dict], reference: str, key: str) -> str:
    return (f"largest |L_trained - L_{reference}| / L_{reference} over α = 0.5, 1, 2, 3, 4, 5 of their create_ood_data "
            "(per-task exponential / normal / Laplace inputs over the context's Frobenius norm, times α), 2000 tasks "
            "each, their compute_other_d_loss; on their ood_other_d grid (α = 0.5..5 by 0.05, 500 tasks): "
            + "; ".join(f"seed {r['seed']} {r[key + '_their_grid']:.4f}" for r in runs))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("paths", nargs="+", metavar="JSON",
                    help="constructed_tokens.py's JSON lines (--layers 1, or --layers 2 recurrent), one per seed")
    paths = ap.parse_args(argv).paths
    runs = load_runs(paths)
    plain = all(not r.get("layernorm") and not r.get("softmax") and r.get("heads", 1) == 1
                and not r.get("fixed_tasks") and r.get("n_context", 10) == 10 and "ood_gap_laws_gd" in r for r in runs)
    one = [r for r in runs if r["layers"] == 1]
    two = [r for r in runs if r["layers"] == 2 and r["recurrent"]]
    if not plain or len(one) + len(two) != len(runs):
        raise SystemExit("give the JSON lines of one linear layer or a recurrent stack of two at N = 10, each with "
                         "ood_gap_laws_* fields")
    if one:
        write({"vo-ood-unseen-laws": ([r["ood_gap_laws_gd"] for r in one], [r["seed"] for r in one],
                                      _measured(one, "GD", "ood_gap_laws_gd"))},
              provenance(one, _SETUP.format(what="one LSA layer", lr=one[0]["gd_lr"], gdpp=""),
                         _DRIVER.format(K=1)))
    if two:
        write({"vo-recurrent2-ood-unseen-laws-gdpp": (
            [r["ood_gap_laws_gdpp"] for r in two], [r["seed"] for r in two], _measured(two, "GD++", "ood_gap_laws_gdpp"))},
            provenance(two, _SETUP.format(what="a recurrent stack of 2 LSA layers", lr=two[0]["gd_lr"],
                                          gdpp=f"; GD++ from their pre_train_gd_hps ({two[0]['gdpp_steps']} Adam "
                                               "steps)"), _DRIVER.format(K=2)))


if __name__ == "__main__":
    main()
