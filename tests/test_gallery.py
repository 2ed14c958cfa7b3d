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
from icl_gd.claims.gallery import PAPER_FIGURES, write_gallery
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
    write_gallery(tmp_path, results)
    return tmp_path


def test_gallery_has_a_section_per_covered_figure_with_its_claims(gallery):
    parser = _Images()
    parser.feed((gallery / "figures.html").read_text())
    assert parser.sections == [f.key for f in PAPER_FIGURES]
    markdown = (gallery / "figures.md").read_text()
    for figure in PAPER_FIGURES:
        assert f"## {figure.title}" in markdown
    assert "| `vo-single-loss` |" in markdown and "**holds**" in markdown and "> “Outer left:" in markdown
    assert "![single-layer__seed=0/figures/loss_curves.png](runs/single-layer__seed=0/figures/loss_curves.png)" \
        in markdown
    assert "`elsewhere/figures/vote_accuracy.png`" in markdown  # not on disk: listed, not shown


def test_every_image_of_figures_html_exists_and_renders_in_a_real_browser(gallery):
    page = gallery / "figures.html"
    parser = _Images()
    parser.feed(page.read_text())
    assert parser.images, "the gallery shows no figure"
    for src in parser.images:
        assert (gallery / src).is_file(), src
    browser = _chromium()
    if browser is None:
        pytest.skip("no Chromium on this machine (apt-get install chromium); checked the files instead")
    probe = ("<script>window.addEventListener('load', () => {const all = document.images.length; const ok = "
             "[...document.images].filter(i => i.complete && i.naturalWidth > 0).length; document.body."
             "insertAdjacentHTML('beforeend', `<pre id=probe>images=${all} decoded=${ok} sections="
             "${document.querySelectorAll('section').length}</pre>`);});</script>")
    probed = gallery / "probed.html"
    probed.write_text(page.read_text().replace("</body>", probe + "</body>"))
    result = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=5000",
                             "--allow-file-access-from-files", "--dump-dom", probed.as_uri()],
                            capture_output=True, text=True, timeout=120)
    found = re.search(r"images=(\d+) decoded=(\d+) sections=(\d+)", result.stdout)
    assert found, result.stderr[-2000:]
    images, decoded, sections = map(int, found.groups())
    assert images == len(parser.images) and decoded == images and sections == len(PAPER_FIGURES)
