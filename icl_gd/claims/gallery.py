"""The gallery of the papers' figures (``figures.md``, ``figures.html``): for each figure of von Oswald et al. 2023
and each view of Irie et al. 2022 that icl-gd reproduces, our figures from the runs, what the paper's figure shows,
the paper's own words as the claims registry quotes them, and the claims the figure carries with their verdicts.

A paper figure is matched to claims by the location each claim gives (``Fig. 2``, ``Tab. 1``, ...); our figures are
the files those claims name (``Claim.figures``) and the gallery entry's own, inside each claim's first run
directory. A figure that is not on disk (``docs/full-run`` keeps no figures: rerun a run to draw them) is listed,
not shown. A figure kept in the repository's ``docs/`` (``PaperFigure.kept``: drawn from runs kept there, such as the
damping scan) is shown wherever the repository is checked out.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from icl_gd.claims.links import PageLinks, embedded_png
from icl_gd.claims.verdict import ClaimResult
from icl_gd.claims.departures import IRIE, VON_OSWALD


@dataclass(frozen=True)
class PaperFigure:
    """One figure (or table, or view) of a paper: ``where`` matches the locations of the claims it carries;
    ``description`` is ours (what the paper's figure shows), never presented as the paper's caption; ``files`` are
    our figures (inside a run directory) drawn for it, beside those its claims name; ``kept`` are (caption, path
    under the repository's ``docs/``) of figures kept there."""

    key: str
    paper: str
    title: str
    where: str  # a regular expression over Claim.location (and, for views without a number, Claim.id)
    description: str
    files: tuple[str, ...] = ()
    kept: tuple[tuple[str, str], ...] = ()


# The repository's docs folder (icl_gd/claims/gallery.py -> the repository root); absent from an installed wheel,
# where a kept figure is listed as not on disk.
KEPT_DOCS = Path(__file__).resolve().parents[2] / "docs"

_VO_FIG = r"Fig(ure)?s?\.? ?{}(?![0-9])"
PAPER_FIGURES: tuple[PaperFigure, ...] = (
    PaperFigure("vo-fig1", VON_OSWALD, "von Oswald et al., Figure 1", _VO_FIG.format(1),
                "Its right part, the one the claims locate here: a trained layer applied again and again past its "
                "training depth (damped, λ = 0.75), its loss beside as many steps of GD.", ("figures/past_training_depth.png",)),
    PaperFigure("vo-fig2", VON_OSWALD, "von Oswald et al., Figure 2", _VO_FIG.format(2),
                "A single trained linear self-attention layer against one step of tuned GD: loss over training, "
                "alignment (prediction difference, sensitivity cosine and difference) over training, the loss of "
                "weights interpolated between trained and constructed, and the loss on out-of-distribution tasks.",
                ("figures/loss_curves.png", "figures/alignment_curves.png", "figures/interpolation.png",
                 "figures/ood.png")),
    PaperFigure("vo-fig3", VON_OSWALD, "von Oswald et al., Figure 3", _VO_FIG.format(3),
                "Multiple layers against multiple steps of GD and GD++: (a) a recurrent two-layer model, (b) a deeper "
                "model of separate layers; loss per layer, alignment with GD and GD++ over training, OOD loss.",
                ("figures/per_layer_loss.png", "figures/cosine_gd_then_gdpp.png", "figures/ood.png")),
    PaperFigure("vo-fig4", VON_OSWALD, "von Oswald et al., Figure 4", _VO_FIG.format(4),
                "Non-linear (sine) regression: a Transformer with an MLP before its attention layer against "
                "meta-learned MLP features plus one GD step: the learned functions, the loss, the alignment.",
                ("figures/functions.png", "figures/loss_curves.png", "figures/alignment_curves.png")),
    PaperFigure("vo-fig5", VON_OSWALD, "von Oswald et al., Figure 5", _VO_FIG.format(5),
                "Inputs and targets in separate tokens: the trained two-layer model's loss against one and two GD "
                "steps, and the first layer's copying of each target into its input's token.",
                ("figures/loss_curves.png", "figures/copy_gradients_h1.png", "figures/heads.png")),
    PaperFigure("vo-fig6", VON_OSWALD, "von Oswald et al., Figure 6", _VO_FIG.format(6),
                "Out-of-distribution tests (input and weight scales, input laws never seen in training) of the "
                "single-layer and the recurrent two-layer models against GD and GD++.", ("figures/ood.png",)),
    PaperFigure("vo-fig7", VON_OSWALD, "von Oswald et al., Figure 7", _VO_FIG.format(7),
                "A deeper (ten-layer) recurrent model against ten steps of GD and GD++: loss and alignment.",
                ("figures/per_layer_loss.png", "figures/alignment_vs_gdpp.png")),
    PaperFigure("vo-fig10", VON_OSWALD, "von Oswald et al., Figure 10", _VO_FIG.format(10),
                "Damping the repeated self-attention update: the trained layer and GD applied past the training "
                "depth for several damping factors. Ours beside it: a scan of λ = 0.60 to 0.80 on 20 independent "
                "test draws (icl-gd run single-layer --seeds 3 --set dampings=0.6,0.65,0.7,0.75,0.8 --set "
                "rollout_draws=20; kept in docs/rollout-scan and docs/figures/rollout-damping-scan.png) locates "
                "where GD's and the trained layer's roll-outs turn unstable.",
                ("figures/past_training_depth.png", "figures/rollout_damping_scan.png"),
                (("the damped roll-out across λ = 0.60-0.80, 20 test draws per λ, 3 seeds (docs/rollout-scan)",
                  "figures/rollout-damping-scan.png"),)),
    PaperFigure("vo-fig12", VON_OSWALD, "von Oswald et al., Figure 12", _VO_FIG.format(12),
                "Softmax self-attention with more and more heads against one step of GD: final loss and alignment "
                "per head count.", ("figures/heads.png", "figures/loss_curves.png")),
    PaperFigure("vo-fig13", VON_OSWALD, "von Oswald et al., Figure 13", _VO_FIG.format(13),
                "Why GD++ is better: the curvature factor γ read off trained recurrent models for several context "
                "sizes, and the condition number of the context inputs after each transform.",
                ("figures/condition_number.png", "figures/effective_params.png")),
    PaperFigure("vo-fig14", VON_OSWALD, "von Oswald et al., Figure 14", _VO_FIG.format(14),
                "Self-attention with LayerNorm (no MLP), one and two layers, against hand-tuned GD: loss per layer.",
                ("figures/per_layer_loss.png", "figures/loss_curves.png")),
    PaperFigure("vo-fig15", VON_OSWALD, "von Oswald et al., Figure 15", _VO_FIG.format(15),
                "No claim of the registry locates itself in this figure; the gallery shows nothing for it."),
    PaperFigure("vo-fig16", VON_OSWALD, "von Oswald et al., Figure 16", _VO_FIG.format(16),
                "A single layer trained full-batch on a fixed set of tasks (128 to 2048): loss and alignment with "
                "GD over training.", ("figures/loss_curves.png", "figures/alignment_curves.png")),
    PaperFigure("irie-table1", IRIE, "Irie et al., Table 1", r"Tab(le)?\.? ?1\b",
                "Per layer, how often the training class that receives the most of a test query's attention in "
                "the dual form agrees with the query's class, for correctly classified and for misclassified "
                "queries (the claims below state the exact statistic).", ("figures/vote_accuracy.png",)),
    PaperFigure("irie-spotlights", IRIE, "Irie et al., the spotlight views", r"plot_attention|spotlight|continual",
                "For one test query, per layer: the training patterns it attends to most, the sorted attention "
                "scores of each training class and each class's total (their plot_attention.py figures).",
                ("figures/sorted_scores_single.png", "figures/top_training_images_single.png",
                 "figures/spotlights.png")),
)


@dataclass(frozen=True)
class GalleryEntry:
    figure: PaperFigure
    results: tuple[ClaimResult, ...]
    images: tuple[tuple[str, Path], ...]  # (caption, path) of each of our figures, on disk or not


def caption(run_name: str, figure: str) -> str:
    """A figure of a run in words: study, preset, the set-up's overrides and the seed, then what the figure is, e.g.
    "multi-layer, layers=2, recurrent=true, seed 0: per layer loss" (from ``multi-layer__layers=2__recurrent=true__
    seed=0`` and ``figures/per_layer_loss.png``); the run directory's own name stays in the report's run links."""
    study, *parts = run_name.split("__")
    words, seed = [study], ""
    for part in parts:
        key, _, value = part.partition("=")
        if key == "seed":
            seed = f"seed {value}"
        elif not _:
            words.append(f"{part} preset")
        elif key != "seeds":
            words.append(part)
    what = Path(figure).stem.replace("_", " ")
    return ", ".join(words + ([seed] if seed else [])) + f": {what}"


def _matches(figure: PaperFigure, result: ClaimResult) -> bool:
    text = f"{result.claim.location} {result.claim.id}" if figure.paper == IRIE else result.claim.location
    return result.claim.paper == figure.paper and re.search(figure.where, text) is not None


def gallery_entries(results: Sequence[ClaimResult], kept_docs: Path = KEPT_DOCS) -> list[GalleryEntry]:
    """Each paper figure with the claims that carry it and our figures for it (each path once): the runs' and those
    kept under ``kept_docs``."""
    entries = []
    for figure in PAPER_FIGURES:
        carried = tuple(r for r in results if _matches(figure, r))
        images: dict[Path, str] = {}
        for r in carried:
            if not r.run_dirs:
                continue
            run = Path(r.run_dirs[0])
            for name in (*r.claim.figures, *figure.files):
                images.setdefault(run / name, caption(run.name, name))
        for text, path in figure.kept:
            images.setdefault(Path(kept_docs) / path, text)
        entries.append(GalleryEntry(figure, carried, tuple((c, p) for p, c in images.items())))
    return entries


def _quotes(entry: GalleryEntry) -> list[tuple[str, str]]:
    """(quote, location) of the paper's words the carried claims quote, each once."""
    seen: dict[str, str] = {}
    for r in entry.results:
        if r.claim.quote and r.claim.kind.value == "paper":
            seen.setdefault(r.claim.quote, r.claim.location)
    return list(seen.items())


_INTRO = ("For each figure of the papers that icl-gd reproduces: what it shows (our description, not the paper's "
          "caption), the paper's own words as the claims quote them (from the caption or the text, at the location "
          "given), the claims it carries with their verdicts, and our figures from the runs.")


def gallery_markdown(results: Sequence[ClaimResult], links: PageLinks, source: str = "",
                     kept_docs: Path = KEPT_DOCS) -> str:
    lines = ["# The papers' figures, reproduced", "", _INTRO + (f" {source}" if source else ""), ""]
    for entry in gallery_entries(results, kept_docs):
        lines += [f"## {entry.figure.title}", "", f"*Description (ours):* {entry.figure.description}", ""]
        for quote, location in _quotes(entry):
            lines += [f"> “{quote}” ({location})", ""]
        if entry.results:
            lines += ["| claim | statement | verdict |", "|---|---|---|"]
            lines += [f"| `{r.claim.id}` | {r.claim.statement.replace('|', '/')} | **{r.verdict.value}** |"
                      for r in entry.results]
            lines.append("")
        shown = [(c, p) for c, p in entry.images if p.is_file()]
        missing = [c for c, p in entry.images if not p.is_file()]
        lines += [f"![{c}]({links.to(p)})\n\n*{c}*\n" for c, p in shown]
        if missing:
            lines += ["Not on disk (the run directory keeps no figures; rerun the run to draw them): "
                      + ", ".join(f"`{c}`" for c in missing) + ".", ""]
    return "\n".join(lines).rstrip() + "\n"


_CSS = ("body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222;"
        "overflow-wrap:anywhere}figure{margin:0.5em 0;max-width:100%}"
        "blockquote{border-left:3px solid #999;margin:0.5em 0;padding:0 1em;color:#444}"
        "img{max-width:100%;height:auto;border:1px solid #ddd}table{border-collapse:collapse;table-layout:fixed;"
        "width:100%}td,th{border:1px solid #ccc;"
        "padding:3px 6px;font-size:13px;vertical-align:top}.holds{color:#0072B2}.fails{color:#D55E00}")


def gallery_html(results: Sequence[ClaimResult], source: str = "", kept_docs: Path = KEPT_DOCS) -> str:
    """The gallery as one self-contained page: every figure embedded (base64 PNG), so it shows wherever the file
    is moved or opened from."""
    esc = html.escape
    body = ["<h1>The papers' figures, reproduced</h1>", f"<p>{esc(_INTRO)} {esc(source)}</p>"]
    for entry in gallery_entries(results, kept_docs):
        body.append(f'<section id="{esc(entry.figure.key)}"><h2>{esc(entry.figure.title)}</h2>'
                    f"<p><i>Description (ours):</i> {esc(entry.figure.description)}</p>")
        body += [f"<blockquote>“{esc(q)}” <small>({esc(loc)})</small></blockquote>" for q, loc in _quotes(entry)]
        if entry.results:
            body.append("<table><tr><th>claim</th><th>statement</th><th>verdict</th></tr>" + "".join(
                f'<tr><td><code>{esc(r.claim.id)}</code></td><td>{esc(r.claim.statement)}</td>'
                f'<td class="{esc(r.verdict.value.replace(" ", "-"))}"><b>{esc(r.verdict.value)}</b></td></tr>'
                for r in entry.results) + "</table>")
        for caption, path in entry.images:
            if path.is_file():
                body.append(f'<figure><img alt="{esc(caption)}" src="{embedded_png(path)}">'
                            f"<figcaption>{esc(caption)}</figcaption></figure>")
        missing = [c for c, p in entry.images if not p.is_file()]
        if missing:
            body.append("<p><small>Not on disk (the run directory keeps no figures; rerun the run to draw them): "
                        + ", ".join(f"<code>{esc(c)}</code>" for c in missing) + ".</small></p>")
        body.append("</section>")
    return ('<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>icl-gd: the papers\' figures'
            f"</title><style>{_CSS}</style></head><body>" + "\n".join(body) + "</body></html>\n")
