"""Sweeps: the plan, the local backend end to end (a failing run recorded, a worker killed mid-run, a rerun that
completes with the numbers of uninterrupted runs), the summary statistics, and the Ray backend against a real
local Ray instance, on loopback only, giving the local backend's numbers."""

import csv
import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from icl_gd.core.errors import ConfigError
from icl_gd.core.runlock import LOCK_NAME
from icl_gd.platform.runner import execute_run
from icl_gd.studies import REGISTRY
from icl_gd.platform.sweep import RunRecord, RunSpec, plan_sweep, run_sweep, write_sweep_results

TINY = ["steps=40", "checkpoint_every=10", "eval_every=10", "n_test=100", "n_tune=100", "n_ood=20",
        "batch_size=32", "interpolation_points=2"]
ROOT = Path(__file__).resolve().parents[1]


def _rows(path):
    with open(path) as handle:
        return list(csv.DictReader(handle))


def _seed_metrics(run_dir):
    return json.loads((Path(run_dir) / "metrics.json").read_text())["seeds"]


# ------------------------------------------------------------------ the plan
def test_plan_is_the_product_of_the_grid_times_the_seeds_with_distinct_safe_names():
    specs = plan_sweep("single-layer", {"n_context": ["5", "10"], "layers": ["1", "2"]}, 3, overrides=["steps=9"])
    assert len(specs) == 12
    assert specs[0].overrides == ("steps=9", "n_context=5", "layers=1", "seed=0", "seeds=1")
    assert specs[-1].overrides == ("steps=9", "n_context=10", "layers=2", "seed=2", "seeds=1")
    ids = [s.run_id() for s in specs]
    assert len(set(ids)) == 12 and all("/" not in i and " " not in i for i in ids)
    assert ids[0].startswith("single-layer__n_context=5__layers=1__seed=0__c")
    # a different common setting is a different run: a rerun with other --set never skips into old results
    other = plan_sweep("single-layer", {"n_context": ["5", "10"], "layers": ["1", "2"]}, 3, overrides=["steps=10"])
    assert not set(ids) & {s.run_id() for s in other}
    assert RunSpec("single-layer", "paper", ("d=1/2",)).run_id() != RunSpec("single-layer", "paper", ("d=1_2",)).run_id()


@pytest.mark.parametrize("grid,overrides", [({"seed": ["1"]}, []), ({}, ["seeds=3"]), ({"d": []}, [])])
def test_plan_refuses_seed_keys_and_empty_grids(grid, overrides):
    with pytest.raises(ConfigError):
        plan_sweep("single-layer", grid, 2, overrides=overrides)


# ------------------------------------------------------------------ the summary
def test_summary_is_mean_std_and_t_interval_over_seeds_per_grid_point(tmp_path):
    def record(n, seed, loss, status="done"):
        spec = RunSpec("single-layer", "default", (f"n_context={n}", f"seed={seed}", "seeds=1"))
        return RunRecord(spec, tmp_path, status, None if status == "done" else "boom", 1.0,
                         {"loss_trained": loss, "name": "x"} if status == "done" else {})

    records = [record(5, 0, 1.0), record(5, 1, 2.0), record(5, 2, 4.0), record(10, 0, 3.0),
               record(10, 1, 0.0, "failed")]
    write_sweep_results(tmp_path, records, ["n_context"])
    rows = {(r["n_context"], r["metric"]): r for r in _rows(tmp_path / "summary.csv")}
    five = rows[("5", "loss_trained")]
    std = math.sqrt(((1 - 7 / 3) ** 2 + (2 - 7 / 3) ** 2 + (4 - 7 / 3) ** 2) / 2)
    half = 4.302652729911275 * std / math.sqrt(3)  # Student t(0.975, 2 degrees of freedom)
    assert int(five["n"]) == 3 and float(five["mean"]) == pytest.approx(7 / 3)
    assert float(five["std"]) == pytest.approx(std)
    assert float(five["ci95_low"]) == pytest.approx(7 / 3 - half) and float(five["ci95_high"]) == pytest.approx(7 / 3 + half)
    ten = rows[("10", "loss_trained")]  # the failed seed is not averaged in
    assert int(ten["n"]) == 1 and float(ten["mean"]) == 3.0 and ten["std"] == "" and ten["ci95_low"] == ""
    assert ("5", "name") not in rows  # only numbers are summarised
    sweep = _rows(tmp_path / "sweep.csv")
    assert [r["status"] for r in sweep] == ["done"] * 4 + ["failed"] and sweep[-1]["error"] == "boom"
    assert (tmp_path / "figures" / "sweep_n_context.png").exists() and (tmp_path / "figures" / "sweep_n_context.pdf").exists()


# ------------------------------------------------------------------ the local backend, end to end
def _sweep_command(out):
    sets = [a for item in [*TINY, "grad_clip=0"] for a in ("--set", item)]
    return [sys.executable, "-c", "from cli import app; app()", "sweep", "single-layer", "--out", str(out),
            "--grid", "lr=0.001,100000000", "--seeds", "1", "--workers", "2", *sets, "--no-progress",
            "--no-figures"]


@pytest.mark.slow
def test_local_sweep_records_failures_survives_a_killed_worker_and_a_rerun_completes(tmp_path):
    out = tmp_path / "sweep"
    sweep = subprocess.Popen(_sweep_command(out), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True)
    killed = None
    deadline = time.monotonic() + 240
    while killed is None and sweep.poll() is None and time.monotonic() < deadline:
        for lock in out.glob(f"runs/*lr=0.001*/{LOCK_NAME}"):  # a good run in flight: kill its worker
            try:
                pid = int(dict(p.split("=", 1) for p in lock.read_text().split())["pid"])
            except (OSError, KeyError, ValueError):
                continue  # the lock is being written or was just released
            if pid != sweep.pid:
                os.kill(pid, signal.SIGKILL)
                killed = pid
                break
        time.sleep(0.02)
    text = sweep.communicate(timeout=400)[0]
    assert killed is not None, text
    assert sweep.returncode == 1, text  # the diverging runs failed; the sweep went on and said so at the end
    rows = {r["run_id"]: r for r in _rows(out / "sweep.csv")}
    assert len(rows) == 2
    bad = [r for r in rows.values() if r["lr"] == "100000000"]
    assert all(r["status"] == "failed" and "diverged" in r["error"] for r in bad)
    good = [r for r in rows.values() if r["lr"] == "0.001"]
    # the killed worker's run went back in the queue and resumed from its checkpoint
    assert all(r["status"] == "done" for r in good), text
    again = subprocess.run(_sweep_command(out), cwd=ROOT, capture_output=True, text=True, timeout=400)
    assert again.returncode == 1 and "1 skipped, 1 failed" in again.stdout
    # every finished run has the numbers of an uninterrupted hand run of the same spec
    for spec in plan_sweep("single-layer", {"lr": ["0.001"]}, 1, overrides=[*TINY, "grad_clip=0"]):
        reference = tmp_path / f"hand_{spec.run_id()}"
        execute_run(REGISTRY, spec.study, reference, spec.preset, spec.overrides, threads=1, progress=False,
                    figures=False)
        assert _seed_metrics(out / "runs" / spec.run_id()) == _seed_metrics(reference)
        assert not (out / "runs" / spec.run_id() / "figures").exists()  # --no-figures reached the pool's workers
        config = json.loads((out / "runs" / spec.run_id() / "config.json").read_text())
        assert config["preset"] == "default" and config["threads"] == 1
        assert config["config"]["evaluation"]["seeds"] == 1
    assert (out / "summary.csv").exists() and (out / "figures" / "sweep_lr.png").exists()


# ------------------------------------------------------------------ the Ray backend
LOOPBACK = {"0100007F", "0000000000000000FFFF00000100007F", "00000000000000000000000001000000"}  # as /proc/net shows


def _listening_addresses_of_this_process_tree():
    """The local addresses (hex, as /proc/net/tcp{,6} shows them) of every TCP socket that this process or one
    of its descendants (Ray's GCS, raylet, workers) listens on."""
    children = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            pid, ppid = stat.parent.name, stat.read_text().rsplit(")", 1)[1].split()[1]
        except (OSError, IndexError):
            continue
        children.setdefault(ppid, []).append(pid)
    tree, todo = set(), [str(os.getpid())]
    while todo:
        pid = todo.pop()
        tree.add(pid)
        todo.extend(children.get(pid, []))
    inodes = set()
    for pid in tree:
        try:
            links = [os.readlink(fd) for fd in Path(f"/proc/{pid}/fd").iterdir()]
        except OSError:
            continue
        inodes.update(link[len("socket:["):-1] for link in links if link.startswith("socket:["))
    addresses = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # state LISTEN
                addresses.append(fields[1].split(":")[0])
    return addresses


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="reads listening sockets from Linux's /proc")
@pytest.mark.slow
def test_ray_backend_on_a_local_ray_instance_listens_on_loopback_and_gives_the_local_numbers(tmp_path):
    """The Ray instance a sweep starts (no --address) is this machine's alone: its node address is 127.0.0.1 and
    no server of it listens on another interface. Started here with the sweep's own function, then used as an
    already initialised Ray."""
    ray = pytest.importorskip("ray", reason="the ray extra is not installed (pip install -e '.[ray]')")
    from icl_gd.platform.sweep.backends import start_local_ray

    specs = plan_sweep("single-layer", {"n_context": ["5", "8"]}, 1, overrides=TINY)
    start_local_ray(2)
    try:
        assert [node["NodeManagerAddress"] for node in ray.nodes()] == ["127.0.0.1"]
        listening = _listening_addresses_of_this_process_tree()
        assert listening and set(listening) <= LOOPBACK, listening
        on_ray = run_sweep(specs, tmp_path / "ray", registry=REGISTRY, backend="ray", progress=False,
                           figures=frozenset({specs[1].run_id()}))
    finally:
        ray.shutdown()
    local = run_sweep(specs, tmp_path / "local", registry=REGISTRY, backend="local", workers=2, progress=False,
                      figures=frozenset({specs[0].run_id()}))
    assert [r.status for r in on_ray] == ["done", "done"] == [r.status for r in local]
    for a, b in zip(on_ray, local):
        assert a.run_dir.name == b.run_dir.name and a.metrics == b.metrics
        assert _seed_metrics(a.run_dir) == _seed_metrics(b.run_dir)
    # only the runs named in ``figures`` drew theirs, on Ray's tasks and in the pool's workers alike
    assert [(r.run_dir / "figures").is_dir() for r in on_ray] == [False, True]
    assert [(r.run_dir / "figures").is_dir() for r in local] == [True, False]
    again = run_sweep(specs, tmp_path / "ray", registry=REGISTRY, backend="ray", progress=False)
    assert [r.status for r in again] == ["skipped"] * 2
