"""Draw Fig. 4 (left) from the authors' sine run: the functions their test_sin cell computes, read from the JSON file
of ``sine.py --out`` (its ``functions``), so no JAX is needed:

    python docs/authors_check/draw_sine_functions.py /tmp/ac/sine_s0.json --out docs/authors_check/figures/sine_functions_s0.png

One task: the true curve amp·sin(x + phase), its 10 context points, and at 100 queries the baseline's (meta) and the
trained model's predictions after the layer (solid) and before it (dashed: the read-out of the embedding alone).
Run with icl-gd's python.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from icl_gd.core.plotting import plt


def draw(run: dict) -> "plt.Figure":
    f = run["functions"]
    order = sorted(range(len(f["query_x"])), key=f["query_x"].__getitem__)
    xs = [f["query_x"][i] for i in order]
    fig, ax = plt.subplots(figsize=(6, 3.6))
    ax.plot(f["truth_x"], f["truth_y"], color="black", lw=1, label="true function")
    ax.scatter(f["context_x"], f["context_y"], color="black", s=18, zorder=3, label="context")
    for key, colour, label in (("meta", "tab:blue", "baseline (GD on learned features)"),
                               ("trained", "tab:orange", "trained model")):
        ax.plot(xs, [f[key][i] for i in order], color=colour, ls="-", label=f"{label}, after the layer")
        ax.plot(xs, [f[f"{key}_init"][i] for i in order], color=colour, ls="--", lw=0.8, label=f"{label}, before")
    ax.set(xlabel="x", ylabel="y", title=f"their code, seed {run['seed']}: {run['steps']} + {run['baseline_steps']} "
           f"steps (amplitude {f['amplitude']:.2f}, phase {f['phase']:.2f})")
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    return fig


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run", help="a sine.py --out file")
    ap.add_argument("--out", required=True, help="the PNG to write")
    args = ap.parse_args(argv)
    run = json.loads(Path(args.run).read_text())
    if run.get("driver") != "sine" or "functions" not in run:
        raise SystemExit(f"{args.run}: not a finished sine.py --out file (no 'functions')")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    draw(run).savefig(out, dpi=120)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
