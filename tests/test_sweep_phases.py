"""Progress for long phases outside the training loop: silent when short or not shown, a line after QUIET_S, a
heartbeat with the phase's counters, a closing line with its time; the GD tuners count their L-BFGS evaluations."""

import time

import torch

import icl_gd.core.progress as progress
from icl_gd.regression.tuning import tune_gd
from icl_gd.core.progress import phase, phases_shown, tick


def test_a_long_phase_speaks_with_its_counters_and_a_short_or_hidden_one_does_not(monkeypatch, capsys):
    monkeypatch.setattr(progress, "QUIET_S", 0.05)
    monkeypatch.setattr(progress, "EVERY_S", 0.05)
    with phases_shown(True):
        with phase("quick"):
            tick("things")
        with phase("tuning"):
            tick("evaluations", 7)
            time.sleep(0.3)
    with phase("hidden"):  # outside phases_shown: silent however long
        time.sleep(0.15)
    lines = capsys.readouterr().err.splitlines()
    assert not any("quick" in line or "hidden" in line for line in lines)
    running = [line for line in lines if line.startswith("icl-gd: tuning: running for")]
    assert len(running) >= 2 and "(7 evaluations)" in running[0]
    assert lines[-1].startswith("icl-gd: tuning: done in") and lines[-1].endswith("(7 evaluations)")


def test_the_gd_tuner_reports_its_lbfgs_evaluations(monkeypatch, capsys):
    monkeypatch.setattr(progress, "QUIET_S", 0.0)
    g = torch.Generator().manual_seed(0)
    x, w = torch.randn(64, 6, 3, generator=g, dtype=torch.float64), torch.randn(64, 1, 3, generator=g, dtype=torch.float64)
    xq = torch.randn(64, 3, generator=g, dtype=torch.float64)
    with phases_shown(True):
        tune_gd(x, x @ w.transpose(1, 2), xq, (w @ xq[..., None])[..., 0], 3, shared=True)
    err = capsys.readouterr().err
    assert "icl-gd: tuning GD step sizes: done in" in err and "L-BFGS loss evaluations)" in err


def test_training_bar_draws_on_stderr_only(capsys):
    from icl_gd.core.progress import progress_bar

    with progress_bar(3, "bar", True) as update:
        for step in range(1, 4):
            update(step, 0.5)
    out, err = capsys.readouterr()
    assert out == "" and "bar" in err
    with progress_bar(3, "off", False) as update:
        update(1, 0.5)
    assert capsys.readouterr() == ("", "")
