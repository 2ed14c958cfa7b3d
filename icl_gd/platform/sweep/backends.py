"""Where a sweep's runs execute: a process pool on this machine (``local``) or the tasks of a Ray cluster (``ray``).

Both call ``worker.run_one`` for each spec and report through two callbacks, ``started(run_id)`` and
``finished(spec, outcome)``. A run interrupted by a dying worker keeps its checkpoints, so running it again
(here, or when the sweep is started again) resumes it to the numbers of an uninterrupted run.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import queue as queue_module
import socket
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool

from icl_gd.core.errors import ConfigError
from icl_gd.core.study import StudyRegistry
from icl_gd.platform.sweep.plan import Figures, RunSpec, draws_figures
from icl_gd.platform.sweep.worker import RunOutcome, init_pool_worker, run_one, run_one_in_pool

Started = Callable[[str], None]
Finished = Callable[[RunSpec, RunOutcome], None]
WORKER_DEATHS_ALLOWED = 2  # a run whose worker died this often is recorded as failed, not tried again
LOOPBACK = "127.0.0.1"
CONNECT_TIMEOUT_S = 5.0  # to reach a Ray cluster's address before handing it to ray.init (which retries for minutes)


def run_local(specs: Sequence[RunSpec], root: str, device: str, registry: StudyRegistry, workers: int,
              started: Started, finished: Finished, threads: int = 1, figures: Figures = True) -> None:
    """Run ``specs`` on ``workers`` processes (spawned: a clean interpreter each, ``threads`` intra-op threads;
    ``figures``: which runs draw theirs, ``plan.draws_figures``).

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
                                   initializer=init_pool_worker, initargs=(started_queue, threads))
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
            futures: dict[Future, RunSpec] = {pool.submit(run_one_in_pool, s, root, device, registry, threads,
                                                          draws_figures(figures, s)): s
                                              for s in remaining}
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
            address: str | None, started: Started, finished: Finished, threads: int = 1,
            figures: Figures = True) -> None:
    """Run each spec as one Ray task (``num_cpus=threads``) on the cluster at ``address`` (``auto``, ``HOST:PORT``,
    ``ray://HOST:PORT``), on an already initialised Ray, or (neither) on a local single-node instance started for
    the sweep on loopback only and shut down after. The run directories must be on storage every node sees:
    ``root`` is passed as it is."""
    try:
        import ray
    except ImportError:
        raise ConfigError("--backend ray needs Ray: pip install -e '.[ray]'") from None
    own = not ray.is_initialized()
    if own and address and address != "local":
        connect_ray(address)
    elif own:  # CPUs for ``workers`` runs of ``threads`` threads (default: the cores), at least one run's
        start_local_ray(max(threads, workers * threads if workers else os.cpu_count() or 1))
    try:
        task = ray.remote(num_cpus=threads)(run_one)  # Ray retries a task whose node or worker died (system failure)
        refs = {task.remote(spec, root, device, registry, threads, draws_figures(figures, spec)): spec
                for spec in specs}
        slots = max(1, int(ray.cluster_resources().get("CPU", 1)) // threads)
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


def start_local_ray(num_cpus: int) -> None:
    """Start a single-node Ray instance for this process whose servers listen on loopback only (127.0.0.1).

    ``_node_ip_address`` alone does not do it on Linux: Ray replaces a loopback node address with the machine's
    own (``ray._private.services.resolve_ip_for_localhost``) and binds some servers to every interface, unless
    its loopback-only mode is on, the one it uses on macOS and Windows (``ray_constants.ENABLE_RAY_CLUSTER``,
    from ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER``, read at import). So that mode is switched on while the node
    starts (the raylet and its workers inherit the variable), then put back."""
    import ray
    from ray._private import ray_constants

    with _environment("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0"):
        saved, ray_constants.ENABLE_RAY_CLUSTER = ray_constants.ENABLE_RAY_CLUSTER, False
        try:
            ray.init(address="local", num_cpus=num_cpus, include_dashboard=False, logging_level="WARNING",
                     _node_ip_address=LOOPBACK)
        finally:
            ray_constants.ENABLE_RAY_CLUSTER = saved


@contextlib.contextmanager
def _environment(name: str, value: str) -> Iterator[None]:
    saved = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = saved


def connect_ray(address: str) -> None:
    """``ray.init(address)`` for a running cluster, or a one-line ConfigError naming ``address``: a ``HOST:PORT``
    or ``ray://HOST:PORT`` that takes no TCP connection within CONNECT_TIMEOUT_S is refused before Ray would
    retry it for minutes; ``auto`` with no cluster to find is Ray's own error, on one line."""
    import ray

    if address != "auto":
        host, port = ray_host_port(address)
        reason = _unreachable(host, port)
        if reason:
            raise ConfigError(f"--address {address}: no Ray cluster answers at {host}:{port} ({reason})")
    try:
        ray.init(address=address, logging_level="WARNING")
    except (ConnectionError, RuntimeError, ValueError) as exc:
        first = next((line.strip() for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
        raise ConfigError(f"--address {address}: {first}") from None


def _unreachable(host: str, port: int) -> str | None:
    """None if ``host:port`` takes a TCP connection within CONNECT_TIMEOUT_S, else why not. A loopback host is
    also tried at this machine's address, where Ray itself connects for it and where ``ray start`` listens."""
    hosts = [host]
    if host in ("localhost", "127.0.0.1", "::1"):
        try:
            from ray._private.services import get_node_ip_address

            hosts.append(get_node_ip_address())
        except Exception:  # noqa: BLE001 (a private helper: without it, the loopback address alone)
            pass
    reason = None
    for candidate in dict.fromkeys(hosts):
        try:
            socket.create_connection((candidate, port), timeout=CONNECT_TIMEOUT_S).close()
            return None
        except OSError as exc:
            reason = reason or ("timed out" if isinstance(exc, TimeoutError) else exc.strerror or str(exc)
                                or type(exc).__name__)
    return reason


def ray_host_port(address: str) -> tuple[str, int]:
    """``(host, port)`` of ``HOST:PORT`` or ``ray://HOST:PORT`` (IPv6 hosts in brackets); ConfigError otherwise."""
    rest = address[len("ray://"):] if address.startswith("ray://") else address
    host, _, port = rest.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"--address {address!r} is not auto, HOST:PORT or ray://HOST:PORT")
    return host, int(port)
