"""The reproduce scheduler hands the sweep its runs longest first, so no long run starts while the other worker idles
at the end."""

from __future__ import annotations

from icl_gd.platform.claims import reproduce as rp
from icl_gd.platform.claims.registry import ALL_CHECKS
from icl_gd.studies import REGISTRY


def test_runs_are_handed_to_the_sweep_longest_first(tmp_path, monkeypatch):
    claims = [c for c in ALL_CHECKS if c.id in ("vo-single-loss", "vo-deep-separate", "vo-fixed-tasks-128-fails")]
    handed = []

    def fake_sweep(specs, root, **options):
        handed.extend(specs)
        return []

    monkeypatch.setattr("icl_gd.platform.sweep.run_sweep", fake_sweep)
    monkeypatch.setattr(rp, "judge", lambda *args, **kwargs: [])
    rp.reproduce(tmp_path, claims, registry=REGISTRY, checks=lambda: [], progress=False, echo=lambda _: None)
    estimate = {p.spec: p.estimate_s for p in rp.plan_runs(claims, False)}
    assert len(handed) == len(estimate) > 3
    assert [estimate[s] for s in handed] == sorted(estimate.values(), reverse=True)
    assert estimate[handed[0]] > estimate[handed[-1]]  # the five-layer runs before the single layer's
