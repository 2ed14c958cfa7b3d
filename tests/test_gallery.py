"""The gallery of the papers' figures (figures.html, figures.md): one section per covered figure, the claims it
carries with their verdicts, and every image it names on disk and decoded by a real browser."""

from __future__ import annotations

import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from icl_gd.claims import ALL_CHECKS
from icl_gd.claims.gallery import PAPER_FIGURES, gallery_html, gallery_markdown
from icl_gd.claims.links import PageLinks
from icl_gd.claims.verdict import ClaimResult, Verdict


def _chromium() -> str | None:
    return next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None)


class _Images(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.images: list[str] = []
        self.sections: list[str] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "img":
            self.images.append(attrs["src"])
        if tag == "section":
            self.sections.append(attrs["id"])


@pytest.fixture
def gallery(tmp_path):
    """A gallery over every claim, the single-layer claims' run holding two drawn figures."""
    from icl_gd.core.plotting import plt, save_figure

    run = tmp_path / "runs" / "single-layer__seed=0"
    for name in ("loss_curves", "ood"):
        fig, ax = plt.subplots()
        ax.plot([0, 1], [1, 0])
        save_figure(fig, run, name, "single-layer · default preset · 1 seed")
    results = [ClaimResult(c, Verdict.HOLDS, None, run_dirs=(run if c.id.startswith("vo-single") else
                                                             tmp_path / "runs" / "elsewhere",))
               for c in ALL_CHECKS]
    kept = tmp_path / "docs"  # the repository's docs/ with one kept figure (the damping scan)
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1])
    save_figure(fig, kept, "rollout-damping-scan", "single-layer · damping scan · 3 seeds")
    (tmp_path / "figures.md").write_text(gallery_markdown(results, PageLinks(tmp_path), kept_docs=kept))
    (tmp_path / "figures.html").write_text(gallery_html(results, kept_docs=kept))
    return tmp_path


def test_gallery_has_a_section_per_covered_figure_with_its_claims(gallery):
    parser = _Images()
    parser.feed((gallery / "figures.html").read_text())
    assert parser.sections == [f.key for f in PAPER_FIGURES]
    markdown = (gallery / "figures.md").read_text()
    for figure in PAPER_FIGURES:
        assert f"## {figure.title}" in markdown
    assert "| `vo-single-loss` |" in markdown and "**holds**" in markdown and "> “Outer left:" in markdown
    assert "![single-layer, seed 0: loss curves](runs/single-layer__seed=0/figures/loss_curves.png)" \
        in markdown
    assert "`elsewhere: vote accuracy`" in markdown  # not on disk: listed, not shown
    # a figure kept in the repository's docs/ is shown under its paper figure, linked relative to the page
    fig10 = markdown.split("## von Oswald et al., Figure 10")[1].split("\n## ")[0]
    assert "](docs/figures/rollout-damping-scan.png)" in fig10 and "20 test draws per λ" in fig10


def test_every_kept_figure_the_gallery_names_is_in_the_repository():
    from icl_gd.claims.gallery import KEPT_DOCS

    kept = [path for f in PAPER_FIGURES for _, path in f.kept]
    assert kept, "the damping scan is kept for Figure 10"
    for path in kept:
        assert (KEPT_DOCS / path).is_file(), path


def test_figures_html_carries_its_images_and_renders_them_in_a_real_browser_when_moved(gallery, tmp_path_factory):
    """The page embeds every figure (a link into the run directories would show nothing once the page is moved or
    the runs deleted): moved to another folder, a real browser still decodes every image."""
    page = tmp_path_factory.mktemp("moved") / "figures.html"
    page.write_text((gallery / "figures.html").read_text())
    parser = _Images()
    parser.feed(page.read_text())
    assert len(parser.images) == 3, parser.images  # the two drawn and the kept one; the missing ones are listed
    for src in parser.images:
        assert src.startswith("data:image/png;base64,"), src[:60]
    browser = _chromium()
    if browser is None:
        pytest.skip("no Chromium on this machine (apt-get install chromium); checked the files instead")
    probe = ("<script>window.addEventListener('load', () => {const all = document.images.length; const ok = "
             "[...document.images].filter(i => i.complete && i.naturalWidth > 0).length; document.body."
             "insertAdjacentHTML('beforeend', `<pre id=probe>images=${all} decoded=${ok} sections="
             "${document.querySelectorAll('section').length} wide=${document.documentElement.scrollWidth > "
             "window.innerWidth}</pre>`);});</script>")
    probed = page.parent / "probed.html"
    probed.write_text(page.read_text().replace("</body>", probe + "</body>"))
    result = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=5000",
                             "--allow-file-access-from-files", "--window-size=1400,900", "--dump-dom", probed.as_uri()],
                            capture_output=True, text=True, timeout=120)
    found = re.search(r"images=(\d+) decoded=(\d+) sections=(\d+) wide=(\w+)", result.stdout)
    assert found, result.stderr[-2000:]
    images, decoded, sections = map(int, found.groups()[:3])
    assert found.group(4) == "false", "the page scrolls sideways at 1400 px"
    assert images == len(parser.images) and decoded == images and sections == len(PAPER_FIGURES)


def test_a_run_s_figure_is_captioned_in_words():
    from icl_gd.claims.gallery import caption

    assert caption("multi-layer__layers=2__recurrent=true__seed=3", "figures/per_layer_loss.png") == \
        "multi-layer, layers=2, recurrent=true, seed 3: per layer loss"
    assert caption("sine__paper__seed=0", "figures/functions.png") == "sine, paper preset, seed 0: functions"
