"""Fold the per-seed JSON lines of ``constructed_tokens.py --layers 5 --separate`` (Fig. 3(b): five separate LSA
layers) into ``icl_gd/claims/authors_values.json``, one record per claim, with its provenance.

    python docs/authors_check/record_separate.py /tmp/ac/sep5_s1.json

Run by hand after the driver, with icl-gd's python (no JAX needed). The statistics are the claims' own
(``icl_gd/claims/registry/von_oswald_models.py``): the signed loss gap to 5 GD steps, the absolute loss gap to GD++
and the sensitivity cosine with GD++, GD++ tuned their way (``pre_train_gd_hps``, 30 000 Adam steps). The L-BFGS
claims (``vo-deep-separate-gdpp-loss``, ``vo-deep-separate-gdpp-aligned``) get no record: their code has no such
tuning.
"""

from __future__ import annotations

import argparse

from _record import gap_to_gd, gdpp_records, load_runs, provenance, write


def records(runs: list[dict]) -> dict[str, tuple[list[float], str]]:
    """Claim id -> (per-seed values, what was measured)."""
    return {
        "vo-deep-separate": gap_to_gd(runs, ", GD = 5 steps at their scanned η"),
        **gdpp_records(runs, "vo-deep-separate-gdpp-loss-authors-tuning", "vo-deep-separate-gdpp-aligned-authors-tuning"),
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("paths", nargs="+", metavar="JSON",
                    help="constructed_tokens.py --layers 5 --separate's JSON lines, one per seed")
    paths = ap.parse_args(argv).paths
    runs = load_runs(paths)
    if not all(r["layers"] == 5 and not r["recurrent"] and r.get("n_context", 10) == 10 and not r.get("layernorm")
               and not r.get("softmax") and r.get("heads", 1) == 1 and "loss_gdpp" in r for r in runs):
        raise SystemExit("give the JSON lines of five separate linear layers at N = 10, with GD++ (Fig. 3(b))")
    common = provenance(
        runs,
        setup=f"their constructed_token_setup notebook, five separate LSA layers: {runs[0]['steps']} steps of 2048 "
              "fresh tasks (AdamW 5e-4, clip 10, activations clipped at 10), their 10 000 test tasks (PRNGKey(5)); "
              f"GD's η from their scan_lrs ({runs[0]['gd_lr']:.3f}); GD++ from their pre_train_gd_hps "
              f"({runs[0]['gdpp_steps']} Adam steps), tuned once for all seeds as their notebook does; the statistic "
              "from the final model",
        driver="docs/authors_check/constructed_tokens.py --layers 5 --separate --seed S --scan-cache C --gdpp-cache G "
               "--out F (GD++ by a --tune-only run beside it); docs/authors_check/record_separate.py")
    seeds = [r["seed"] for r in runs]
    write({claim_id: (values, seeds, measured) for claim_id, (values, measured) in records(runs).items()}, common)


if __name__ == "__main__":
    main()
