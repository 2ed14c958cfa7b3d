"""Sweeps: many runs of a study (a grid of config values times seeds), each an ordinary resumable run directory
under ``ROOT/runs/``, on a local process pool or a Ray cluster, summarised in ``sweep.csv``, ``summary.csv`` and
figures.

``plan_sweep`` makes the ``RunSpec`` list, ``run_sweep`` runs it (each run through ``icl_gd.platform.runner.execute_run``,
the code path of ``icl-gd run``), ``write_sweep_results`` writes the files.
"""

from icl_gd.platform.sweep.driver import BACKENDS, RunRecord, run_sweep
from icl_gd.platform.sweep.plan import RunSpec, parse_grid, plan_sweep
from icl_gd.platform.sweep.results import write_sweep_results

__all__ = ["BACKENDS", "RunRecord", "RunSpec", "parse_grid", "plan_sweep", "run_sweep", "write_sweep_results"]
