"""Where a sweep's runs execute: a process pool on this machine (``local``) or the tasks of a Ray cluster (``ray``).

Both call ``worker.run_one`` for each spec and report through two callbacks, ``started(run_id)`` and
``finished(spec, outcome)``. A run interrupted by a dying worker keeps its checkpoints, so running it again
(here, or when the sweep is started again) resumes it to the numbers of an uninterrupted run.
"""

from __future__ import annotations

import multiprocessing
import os
import queue as queue_module
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool

from icl_gd.core.errors import ConfigError
from icl_gd.core.study import StudyRegistry
from icl_gd.platform.sweep.plan import RunSpec
from icl_gd.platform.sweep.worker import RunOutcome, init_pool_worker, run_one, run_one_in_pool

Started = Callable[[str], None]
Finished = Callable[[RunSpec, RunOutcome], None]
WORKER_DEATHS_ALLOWED = 2  # a run whose worker died this often is recorded as failed, not tried again


def run_local(specs: Sequence[RunSpec], root: str, device: str, registry: StudyRegistry, workers: int,
              started: Started, finished: Finished) -> None:
    """Run ``specs`` on ``workers`` processes (spawned: a clean interpreter each, one intra-op thread).

    A worker that dies (killed, out of memory) breaks the pool: the runs it and the other workers had in flight
    go back in the queue (they resume from their checkpoints) with the runs not yet started, on a fresh pool; a
    run in flight at ``WORKER_DEATHS_ALLOWED`` deaths is recorded as failed.
    """
    context = multiprocessing.get_context("spawn")
    deaths: dict[str, int] = {}
    remaining = list(specs)
    while remaining:
        started_queue = context.Queue()
        pool = ProcessPoolExecutor(max_workers=min(workers, len(remaining)), mp_context=context,
                                   initializer=init_pool_worker, initargs=(started_queue,))
        in_flight: set[str] = set()
        broken: list[RunSpec] = []

        def drain() -> None:
            while True:
                try:
                    run_id, _pid = started_queue.get_nowait()
                except queue_module.Empty:
                    return
                in_flight.add(run_id)
                started(run_id)

        try:
            futures: dict[Future, RunSpec] = {pool.submit(run_one_in_pool, s, root, device, registry): s for s in remaining}
            pending = set(futures)
            while pending:
                done, pending = wait(pending, timeout=0.5, return_when=FIRST_COMPLETED)
                drain()
                for future in done:
                    spec = futures[future]
                    try:
                        outcome = future.result()
                    except BrokenProcessPool:
                        broken.append(spec)
                        continue
                    in_flight.discard(spec.run_id())
                    finished(spec, outcome)
        except BaseException:  # Ctrl-C: stop the workers now; their runs resume from checkpoints next time
            _terminate(pool)
            raise
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
        drain()
        remaining = []
        for spec in broken:
            if spec.run_id() in in_flight:
                deaths[spec.run_id()] = deaths.get(spec.run_id(), 0) + 1
                if deaths[spec.run_id()] >= WORKER_DEATHS_ALLOWED:
                    finished(spec, RunOutcome("failed", f"its worker process died {WORKER_DEATHS_ALLOWED} times "
                                                        "(killed, or out of memory?)"))
                    continue
            remaining.append(spec)


def _terminate(pool: ProcessPoolExecutor) -> None:
    for process in list((getattr(pool, "_processes", None) or {}).values()):  # the executor has no public handle
        if process.is_alive():
            process.terminate()


def run_ray(specs: Sequence[RunSpec], root: str, device: str, registry: StudyRegistry, workers: int | None,
            address: str | None, started: Started, finished: Finished) -> None:
    """Run each spec as one Ray task (``num_cpus=1``) on the cluster at ``address`` (``auto``, ``ray://...``),
    on an already initialised Ray, or (neither) on a local single-node instance started for the sweep and shut
    down after. The run directories must be on storage every node sees: ``root`` is passed as it is."""
    try:
        import ray
    except ImportError:
        raise ConfigError("--backend ray needs Ray: pip install -e '.[ray]'") from None
    own = not ray.is_initialized()
    if own:
        if address:
            ray.init(address=address, logging_level="WARNING")
        else:
            ray.init(address="local", num_cpus=workers or os.cpu_count() or 1, include_dashboard=False,
                     logging_level="WARNING")
    try:
        task = ray.remote(num_cpus=1)(run_one)  # Ray retries a task whose node or worker died (system failure)
        refs = {task.remote(spec, root, device, registry): spec for spec in specs}
        slots = int(ray.cluster_resources().get("CPU", 1))
        for spec in list(refs.values())[:slots]:
            started(spec.run_id())  # Ray does not say when a task starts; the first `slots` are running
        queued = list(refs.values())[slots:]
        pending = list(refs)
        while pending:
            done, pending = ray.wait(pending, num_returns=1, timeout=0.5)
            for ref in done:
                spec = refs[ref]
                try:
                    outcome = ray.get(ref)
                except ray.exceptions.RayError as exc:
                    outcome = RunOutcome("failed", f"ray: {type(exc).__name__}: {str(exc).strip().splitlines()[0]}"[:300])
                finished(spec, outcome)
                if queued:
                    started(queued.pop(0).run_id())
    except BaseException:
        if own:
            ray.shutdown()
        raise
    if own:
        ray.shutdown()
