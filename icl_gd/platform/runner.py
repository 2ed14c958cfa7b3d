"""One run of a study into a run directory: the single code path behind ``icl-gd run`` and every sweep worker.

``execute_run`` resolves the config (preset, then ``--steps``/``--seeds``, then ``KEY=VALUE`` overrides), checks
the device and the memory the run will need before touching the directory, takes the directory's lock (one run
at a time), writes ``config.json`` and runs the study, which writes ``metrics.json`` last. A run directory made
by a sweep is therefore the same as one made by hand.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from icl_gd.core.errors import ICLGDNotice
from icl_gd.platform.memory import check_memory
from icl_gd.core.progress import phases_shown
from icl_gd.core.resources import resolve_device, set_threads
from icl_gd.core.results import prepare_run_dir
from icl_gd.core.runlock import RunLock
from icl_gd.core.shared import SharedResults
from icl_gd.core.study import RunContext, StudyRegistry, resolve_study_config, run_label, write_resolved_config
from icl_gd.core.timing import run_timing


def execute_run(registry: StudyRegistry, study: str, out: Path, preset: str = "default", overrides: Sequence[str] = (), *,
                steps: int | None = None, seeds: int | None = None, device: str = "cpu",
                threads: int | None = None, progress: bool = True, force: bool = False,
                figures: bool = True, shared: Path | None = None) -> dict[str, Any]:
    """Run ``study`` into ``out`` and return the ``mean`` metrics it wrote to ``metrics.json``.

    ``threads`` None takes the study's default (1 for the regression studies). Raises ConfigError (bad setting,
    device, or a run too large for the free memory, naming the key to lower) before ``out`` is touched, and
    RunDirectoryError when ``out`` holds a finished run (without ``force``), is unwritable or is in use by
    another run. ``figures`` False draws no figure (the numbers and tables are the same). ``shared``: the folder
    where the runs of one sweep keep the results their seed does not change (``icl_gd.core.shared``); None: the run
    computes them itself.
    """
    spec = registry.get(study)
    config = resolve_study_config(spec, preset, overrides, steps=steps, seeds=seeds)
    set_threads(threads if threads is not None else spec.default_threads)
    torch_device = resolve_device(device)
    check_memory(spec, config, torch_device)  # before touching out: a refused run leaves nothing behind
    out = prepare_run_dir(Path(out), force)  # refuses a finished or unwritable directory; creates it
    with RunLock(out), phases_shown(progress):
        # Again under the lock: another run may have finished it since the check above.
        announce_resume(out)
        ctx = RunContext(out=prepare_run_dir(out, force), device=torch_device, progress=progress, figures=figures,
                         label=run_label(spec, preset, config),
                         shared=None if shared is None else SharedResults(Path(shared)))
        write_resolved_config(ctx, spec, config, preset)
        with run_timing(out):  # timings.json: this attempt's wall / CPU time and its phases
            return spec.run(config, ctx)


def announce_resume(out: Path) -> None:
    """One notice when ``out`` holds what an earlier, unfinished attempt saved (training checkpoints, computed parts)
    and this run takes it up; nothing for a fresh run."""
    saved = {part: sorted((out / part).glob("*.pt")) for part in ("checkpoints", "results")}
    if not any(saved.values()):
        return
    kept = [f"{len(files)} {'training checkpoint' if part == 'checkpoints' else 'computed part'}"
            f"{'s' if len(files) > 1 else ''}" for part, files in saved.items() if files]
    warnings.warn(f"resuming the unfinished run in {out} from what its earlier attempt saved ({' and '.join(kept)}"
                  "; each training continues from its last saved step)", ICLGDNotice, stacklevel=2)


def is_out_of_memory(exc: BaseException) -> bool:
    """An allocation failure: Python's MemoryError, torch's OutOfMemoryError (CUDA) or its CPU allocator's."""
    text = str(exc).lower()
    return isinstance(exc, MemoryError) or type(exc).__name__ == "OutOfMemoryError" or "can't allocate memory" in text \
        or "out of memory" in text


def out_of_memory_message(exc: BaseException, device: str) -> str:
    """The one line an out-of-memory failure ends in, naming the keys to lower."""
    return (f"out of memory on {device} ({type(exc).__name__}); lower batch_size, n_test or n_tune (icl-gd config "
            "STUDY shows them), then rerun to resume")
