"""``icl-gd reproduce`` end to end: planning, reuse of finished runs, exit codes, and the HTML report opened in a
real headless browser (Debian's Chromium) when the machine has one."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from html.parser import HTMLParser
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from icl_gd.cli import app
from icl_gd.constructions.verify import all_checks
from icl_gd.claims.plan import plan_runs, select_claims, seed_specs
from icl_gd.claims.reproduction import judge
from icl_gd.claims.verdict import Verdict

FAST = "vo-prop1-exact,irie-dual-exact,vo-gdpp-exact"


@pytest.fixture(scope="module")
def fast_report(tmp_path_factory):
    out = tmp_path_factory.mktemp("reproduce")
    result = CliRunner().invoke(app, ["reproduce", "--out", str(out), "--smoke", "--only", FAST, "--no-progress"])
    assert result.exit_code == 0, result.output
    return out, result.output


@pytest.mark.slow
def test_fast_claims_hold_and_every_report_file_is_written(fast_report):
    out, output = fast_report
    assert "3 construction checks: 3 hold, 0 fail, 0 inconclusive; wrote" in output
    assert "estimated time" in output and "0 study runs" in output
    data = json.loads((out / "claims.json").read_text())
    assert data["claims"] == []
    checks = data["construction_checks"]
    assert [c["id"] for c in checks] == ["vo-prop1-exact", "vo-gdpp-exact", "irie-dual-exact"]
    assert all(c["verdict"] == "holds" and c["values"][0] < 1 and c["kind"] == "construction" for c in checks)
    assert (out / "runs" / "verify" / "metrics.json").is_file()
    md = (out / "report.md").read_text()
    assert md.count("| `vo-") == 2 and "## Construction checks" in md and "Produced by `icl-gd reproduce" in md


def test_list_prints_each_claims_location_and_whose_it_is():
    result = CliRunner().invoke(app, ["reproduce", "--list"])
    assert result.exit_code == 0, result.output
    assert "arXiv 2212.07677v2" in result.output
    line = next(l for l in result.output.splitlines() if l.startswith("vo-ood "))
    assert "the paper's" in line and "Fig. 2 (outer right); App. A.2, Fig. 6(a)" in line
    assert re.search(r"^vo-single-controls +ours ", result.output, re.M)
    assert re.search(r"^vo-prop1-exact +construction check ", result.output, re.M)


@pytest.mark.slow
def test_second_call_reuses_the_finished_verify_run(fast_report):
    out, _ = fast_report
    metrics = out / "runs" / "verify" / "metrics.json"
    before = metrics.stat().st_mtime_ns
    result = CliRunner().invoke(app, ["reproduce", "--out", str(out), "--smoke", "--only", FAST, "--no-progress"])
    assert result.exit_code == 0 and metrics.stat().st_mtime_ns == before


def test_plan_shares_runs_between_claims_and_prints_an_estimate(tmp_path):
    claims = select_claims(["vo-single-loss", "vo-single-sensitivity", "vo-interpolation"])
    planned = plan_runs(claims, quick=False)
    seeds = claims[0].runs[0].seeds
    assert len(planned) == seeds  # the seeds of one single-layer plan, shared by the three claims
    assert {p.spec.overrides[-2:] for p in planned} == {(f"seed={s}", "seeds=1") for s in range(seeds)}
    result = CliRunner().invoke(app, ["reproduce", "--out", str(tmp_path / "r"), "--plan",
                                      "--only", "vo-single-loss,vo-single-sensitivity"])
    assert result.exit_code == 0 and f"{seeds} study runs (0 already finished)" in result.output
    assert not (tmp_path / "r").exists()  # --plan runs nothing


def test_judge_reads_each_seed_run_under_its_sweep_directory(tmp_path):
    claims = select_claims(["vo-single-loss"])
    specs = seed_specs(claims[0].runs[0], quick=False)
    gaps = [0.004, -0.006, 0.005] + [0.003] * (len(specs) - 3)
    for spec, gap in zip(specs, gaps, strict=True):
        run = tmp_path / "runs" / spec.run_id()
        run.mkdir(parents=True)
        (run / "metrics.json").write_text(json.dumps({"mean": {"loss_rel_gap_trained_vs_gd": gap}}))
    (result,) = judge(claims, tmp_path, quick=False)
    assert result.spread.values == tuple(abs(g) for g in gaps) and result.verdict is Verdict.HOLDS
    # at the smoke set-up the plan is one seed of other overrides, whose run is missing: inconclusive, naming it
    (quick,) = judge(claims, tmp_path, quick=True)
    assert quick.verdict is Verdict.INCONCLUSIVE and "has no metrics.json" in quick.note


def test_a_failed_run_makes_its_claims_inconclusive(tmp_path):
    claims = select_claims(["vo-single-loss"])
    first = seed_specs(claims[0].runs[0], quick=True)[0].run_id()
    (result,) = judge(claims, tmp_path, quick=True, failures={first: "out of memory"})
    assert result.verdict is Verdict.INCONCLUSIVE and "failed: out of memory" in result.note


@pytest.mark.parametrize("args, message", [
    (["--only", "nope"], "unknown claim 'nope'"),
    (["--backend", "slurm"], "--backend 'slurm'"),
    (["--workers", "0"], "--workers must be a positive integer"),
])
def test_bad_options_are_one_line_errors(tmp_path, args, message):
    result = CliRunner().invoke(app, ["reproduce", "--out", str(tmp_path / "r"), *args])
    assert result.exit_code == 2 and message in result.output and "Traceback" not in result.output


class _ReportParser(HTMLParser):
    def __init__(self):
        super().__init__()
        self.rows, self.images, self._in_claims = 0, [], False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "table" and attrs.get("id") == "claims-von-oswald":
            self._in_claims = True
        elif tag == "tr" and self._in_claims and attrs.get("class"):
            self.rows += 1
        elif tag == "img":
            self.images.append(attrs.get("src", ""))

    def handle_endtag(self, tag):
        if tag == "table":
            self._in_claims = False


def _report_with_figure(tmp_path: Path) -> Path:
    """A real report of one synthetic vo-single-loss run (under a long run name) with a real PNG figure
    (matplotlib), plus a construction check."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    claims = select_claims(["vo-single-loss", "vo-prop1-exact"])
    single = next(c for c in claims if c.id == "vo-single-loss")
    for spec in seed_specs(single.runs[0], quick=False):
        run = tmp_path / "runs" / (spec.run_id() + "__" + "a_very_long_override=" + "x" * 120)
        (run / "figures").mkdir(parents=True)
        (run / "metrics.json").write_text(json.dumps({"mean": {"loss_rel_gap_trained_vs_gd": 0.004,
                                                               "loss_trained": 0.2108, "loss_gd": 0.21}}))
        fig, ax = plt.subplots(figsize=(3, 2))
        ax.plot([0, 1], [1, 0])
        fig.savefig(run / "figures" / "loss_curves.png")
        plt.close(fig)
    from icl_gd.claims.reproduction import run_verify
    from icl_gd.claims.report import ReportHeader, write_report

    run_verify(tmp_path, all_checks)
    for spec in seed_specs(single.runs[0], quick=False):  # judge reads the runs under their own names
        long = next((tmp_path / "runs").glob(spec.run_id() + "__*"))
        (tmp_path / "runs" / spec.run_id()).symlink_to(long.name)
    results = judge(claims, tmp_path, quick=False)
    results = [replace(r, run_dirs=tuple(d.resolve() for d in r.run_dirs)) for r in results]
    write_report(tmp_path, results,
                 ReportHeader("icl-gd reproduce --out X", "test", "today", quick=False, wall_s=1.0))
    return tmp_path / "report.html"


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return shutil.which(name)
    return None


@pytest.mark.slow
def test_html_report_shows_the_claims_table_and_a_figure_in_a_real_browser(tmp_path):
    page = _report_with_figure(tmp_path)
    browser = _chromium()
    if browser is None:
        # No browser on this machine (install Debian's `chromium` to run the real check): parse the HTML instead.
        parser = _ReportParser()
        parser.feed(page.read_text())
        assert parser.rows == 1 and any(src.startswith("data:image/png;base64,") for src in parser.images)
        pytest.skip("no Chromium on this machine (apt-get install chromium); checked the HTML with a parser "
                    "instead")
    # The browser runs a probe appended to a copy of the page: it counts the rendered claim rows and the decoded
    # images (naturalWidth > 0 only once Chromium has decoded the embedded PNG), and writes them into the DOM.
    probe = ("<script>window.addEventListener('load', () => {const rows = document.querySelectorAll("
             "'#claims-von-oswald tbody tr').length; const imgs = [...document.images].filter(i => i.complete && "
             "i.naturalWidth > 0).length; const box = document.getElementById('claims-von-oswald').getBoundingClientRect();"
             "document.body.insertAdjacentHTML('beforeend', `<pre id=probe>rows=${rows} images=${imgs} "
             "tablewidth=${Math.round(box.width)} overflow=${document.documentElement.scrollWidth - window.innerWidth} "
             "badges=${document.querySelectorAll('#claims-von-oswald .badge').length}</pre>`);});</script>")
    probed = tmp_path / "probed.html"
    probed.write_text(page.read_text().replace("</body>", probe + "</body>"))
    result = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=5000",
                             "--window-size=1280,900",
                             "--dump-dom", probed.as_uri()], capture_output=True, text=True, timeout=120)
    found = re.search(r"rows=(\d+) images=(\d+) tablewidth=(\d+) overflow=(-?\d+) badges=(\d+)", result.stdout)
    assert found, result.stderr[-2000:]
    rows, images, width, overflow, badges = map(int, found.groups())
    # one row per claim, no horizontal scrolling despite 150-character run names, the three verdicts as badges
    # (ours, the authors' code's under the claim's rule, the agreement)
    assert rows == 1 and images >= 1 and 0 < width <= 1280 and overflow <= 0 and badges == 3


@pytest.mark.slow
def test_update_readme_replaces_only_the_marked_block(tmp_path, fast_report):
    from icl_gd.claims.report import README_END, README_START

    out, _ = fast_report
    readme = tmp_path / "README.md"
    readme.write_text(f"# Title\n\nbefore\n\n{README_START}\nold table\n{README_END}\n\nafter\n")
    result = CliRunner().invoke(app, ["reproduce", "--out", str(out), "--smoke", "--only", "vo-prop1-exact",
                                      "--no-progress", "--update-readme", str(readme)])
    assert result.exit_code == 0, result.output
    text = readme.read_text()
    assert text.startswith("# Title\n\nbefore\n\n" + README_START) and text.endswith(README_END + "\n\nafter\n")
    assert "old table" not in text and "| `vo-prop1-exact` |" in text and "1 construction check: 1 hold" in text
    assert "Generated by `icl-gd reproduce --out" in text and "--smoke" in text
    # beside it, the claims.json the table was rendered from (what --rejudge reads)
    kept = json.loads((tmp_path / "claims-table.json").read_text())
    assert [c["id"] for c in kept["construction_checks"]] == ["vo-prop1-exact"] and kept["quick"] is True
    unmarked = tmp_path / "OTHER.md"
    unmarked.write_text("plain text\n")
    result = CliRunner().invoke(app, ["reproduce", "--out", str(out), "--smoke", "--only", "vo-prop1-exact",
                                      "--no-progress", "--update-readme", str(unmarked)])
    assert result.exit_code == 2 and "no markers" in result.output
    assert unmarked.read_text() == "plain text\n"


def _section_counts(block: str) -> list[tuple[tuple[int, ...], list[str]]]:
    """Each section of a generated block (### heading): its headline's counts and its rows' verdicts (sub-rows, the
    parts and variants, are not counted)."""
    out = []
    for section in re.split(r"^### ", block, flags=re.M)[1:]:
        head = re.search(r"^\*\*(\d+) (?:claims?|checks?)(?: judged(?: as their figures show them)?)?: (\d+) holds?, "
                         r"(\d+) fails?, "
                         r"(\d+) inconclusive(?:, (\d+) no valid reference)?(?: \([^)]*\))?[.;]", section, re.M)
        if head is None:  # the construction checks' section
            continue
        # a sentence of several conditions counts by the sentence's verdict ("**sentence fails** ...")
        rows = re.findall(r"^\| `([a-z0-9-]+)`.*? \|.*\| \*\*(?:sentence )?(holds|fails|inconclusive|no valid "
                          r"reference)\*\*", section, re.M)
        out.append((tuple(int(g or 0) for g in head.groups()), rows))
    return out


def test_readme_claims_table_is_a_generated_block_whose_summary_matches_its_rows():
    from icl_gd.claims.registry import claim_ids
    from icl_gd.claims.report import README_END, README_START

    root = Path(__file__).resolve().parents[1]
    # the generated block lives in the README, or in the page the README links for it
    text = next(t for t in ((root / name).read_text() for name in ("README.md", "docs/claims.md")
                            if (root / name).is_file()) if README_START in t)
    block = text[text.index(README_START):text.index(README_END)]
    assert re.search(r"Generated by `icl-gd reproduce --out \S+.*` at commit `[0-9a-f]{7}", block)
    sections = _section_counts(block)
    assert sections
    for (total, holds, fails, inconclusive, invalid), rows in sections:
        assert rows and all(claim in claim_ids() for claim, _ in rows)
        verdicts = [v for _, v in rows]
        assert (total, holds, fails, inconclusive, invalid) == (
            len(rows), verdicts.count("holds"), verdicts.count("fails"), verdicts.count("inconclusive"),
            verdicts.count("no valid reference"))


@pytest.mark.slow
def test_generated_readme_block_passes_its_own_check(tmp_path):
    """The block the command writes (claims table, then the construction checks) parses as the README test reads it."""
    from icl_gd.claims.report import CONSTRUCTION_HEADING, ReportHeader, readme_block

    page = _report_with_figure(tmp_path)
    claims = select_claims(["vo-single-loss", "vo-prop1-exact"])
    block = readme_block(judge(claims, tmp_path, quick=False),
                         ReportHeader("icl-gd reproduce --out X", "abc1234", "today", quick=False, wall_s=1.0))
    claims_part, checks_part = block.split(CONSTRUCTION_HEADING)
    assert _section_counts(claims_part) == [((1, 1, 0, 0, 0), [("vo-single-loss", "holds")])]
    assert "`vo-prop1-exact`" in checks_part
    assert "**von Oswald et al. 2023: 1 claim judged: 1 hold, 0 fail, 0 inconclusive; 1 construction" in block
    assert page.is_file()


def test_plan_sets_finished_runs_measured_time_beside_the_estimate(tmp_path):
    from icl_gd.core.timing import append_attempt

    claims = select_claims(["vo-single-loss"])
    specs = seed_specs(claims[0].runs[0], quick=False)
    done, timed_run = tmp_path / "r" / "runs" / specs[0].run_id(), tmp_path / "r" / "runs" / specs[1].run_id()
    for run, seconds in ((done, None), (timed_run, 90.0)):
        run.mkdir(parents=True)
        (run / "metrics.json").write_text(json.dumps({"mean": {}}))
        if seconds is not None:  # an interrupted attempt, then the one that finished: both count
            append_attempt(run, {"wall_s": 30.0, "cpu_s": 29.0, "outcome": "interrupted"})
            append_attempt(run, {"wall_s": seconds, "cpu_s": 91.0, "outcome": "finished"})
    result = CliRunner().invoke(app, ["reproduce", "--out", str(tmp_path / "r"), "--plan", "--only", "vo-single-loss",
                                      "--workers", "1"])
    assert result.exit_code == 0, result.output
    lines = [l for l in result.output.splitlines() if l.startswith("  single-layer")]
    estimate = claims[0].runs[0].estimate(False, seed=1) / 60  # seed 1's, a later seed's
    assert lines[0].endswith("(done)") and lines[1].endswith(f"(done in 2.0 min, estimated {estimate:.1f})")
    # the seeds still to do are estimated at their finished sibling's CPU time (29 + 91 s), not the plan's guess
    assert len(lines) == len(specs) and all(l.endswith("(~2.0 min, as seed 1 measured)") for l in lines[2:])
    assert f"estimated time: about {2 * (len(specs) - 2)} min" in result.output
    assert f"finished runs with timings (1): measured 2.0 min of wall time against {estimate:.1f} min" in result.output


def test_plan_estimates_a_seed_from_its_own_plans_finished_seeds_only(tmp_path):
    """A finished run of another plan (other overrides) says nothing about this one's seeds."""
    from icl_gd.core.timing import append_attempt

    single, fixed = select_claims(["vo-single-loss", "vo-fixed-tasks-128-fails"])
    other = seed_specs(fixed.runs[0], quick=False)[0]
    run = tmp_path / "r" / "runs" / other.run_id()
    run.mkdir(parents=True)
    (run / "metrics.json").write_text(json.dumps({"mean": {}}))
    append_attempt(run, {"wall_s": 600.0, "cpu_s": 600.0, "outcome": "finished"})
    result = CliRunner().invoke(app, ["reproduce", "--out", str(tmp_path / "r"), "--plan", "--only", "vo-single-loss"])
    plan = single.runs[0]
    lines = [l for l in result.output.splitlines() if l.startswith("  single-layer")]
    assert len(lines) == plan.seeds and all(l.endswith(f"(~{plan.estimate(False, seed) / 60:.1f} min)")
                                            for seed, l in enumerate(lines)), result.output


def test_later_seeds_are_estimated_apart_from_the_first(tmp_path):
    """A later seed reads what seed 0 computed for the references (``icl_gd.core.shared``): the plan prices it at
    its kept ``later_seed_s``, and a finished first seed measures a later one scaled by the two estimates (catches
    every seed priced as the first, and a first seed's measured time handed to the later ones unscaled)."""
    from icl_gd.core.timing import append_attempt
    from icl_gd.claims.plan import plan_runs

    claims = select_claims(["vo-deep-separate"])
    plan = next(p for p in claims[0].runs if p.study == "multi-layer" and "layers=5" in p.overrides)
    first, later = plan.estimate(False, seed=0), plan.estimate(False, seed=1)
    assert 0 < later < first and (first, later) == (plan.cost.first_seed_s, plan.cost.later_seed_s)
    estimates = {p.spec: p.estimate_s for p in plan_runs(claims, quick=False)}
    specs = seed_specs(plan, quick=False)
    assert [estimates[s] for s in specs] == [first] + [later] * (len(specs) - 1)
    assert plan_runs(claims, quick=True)[0].estimate_s == plan.cost.quick_seed_s  # --quick: one figure a seed
    run = tmp_path / "r" / "runs" / specs[0].run_id()
    run.mkdir(parents=True)
    (run / "metrics.json").write_text(json.dumps({"mean": {}}))
    append_attempt(run, {"wall_s": 1200.0, "cpu_s": 1200.0, "outcome": "finished"})
    result = CliRunner().invoke(app, ["reproduce", "--out", str(tmp_path / "r"), "--plan", "--only", "vo-deep-separate",
                                      "--workers", "1"])
    assert result.exit_code == 0, result.output
    later = 1200.0 * later / first / 60
    lines = [l for l in result.output.splitlines() if l.startswith("  multi-layer") and "layers=5" in l]
    assert len(lines) == len(specs) and lines[0].endswith("(done in 20.0 min, estimated "
                                                          f"{first / 60:.1f})")
    assert all(l.endswith(f"(~{later:.1f} min, as seed 0 measured)") for l in lines[1:]), result.output


def test_report_states_what_the_reused_runs_measured(tmp_path):
    """A call that reuses finished runs takes seconds: the report and the README block say what the runs themselves
    took (their timings.json), which is the budget's real cost."""
    from icl_gd.core.timing import append_attempt
    from icl_gd.claims.report import README_END, README_START

    claims = select_claims(["vo-single-loss"])
    specs = seed_specs(claims[0].runs[0], quick=False)
    for i, spec in enumerate(specs):
        run = tmp_path / "r" / "runs" / spec.run_id()
        run.mkdir(parents=True)
        (run / "metrics.json").write_text(json.dumps({"mean": {"loss_rel_gap_trained_vs_gd": 0.004,
                                                               "loss_trained": 0.2108, "loss_gd": 0.21}}))
        if i in (1, 2):  # the others recorded no timings
            append_attempt(run, {"wall_s": 150.0 * i, "cpu_s": 120.0 * i, "outcome": "finished"})
        if i:  # seed 0 recorded no commit either (an older run)
            (run / "config.json").write_text(json.dumps({"versions": {"commit": "abc1234"}}))
    readme = tmp_path / "README.md"
    readme.write_text(f"{README_START}\n{README_END}\n")
    result = CliRunner().invoke(app, ["reproduce", "--out", str(tmp_path / "r"), "--only", "vo-single-loss",
                                      "--no-progress", "--update-readme", str(readme)])
    assert result.exit_code == 0, result.output
    measured = (f"2 of {len(specs)} runs timed: 6.0 CPU min, 7.5 min of wall time summed over runs"  # (120 + 240),
                f"; their source: commit abc1234 ({len(specs) - 1} runs), not recorded (1 run)")  # (150 + 300) s
    assert measured in (tmp_path / "r" / "report.md").read_text() and measured in readme.read_text()
    assert json.loads((tmp_path / "r" / "claims.json").read_text())["runs_measured"] == measured
