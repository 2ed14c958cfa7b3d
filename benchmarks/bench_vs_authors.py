"""Benchmark: the training step of each set-up in icl-gd, in a plain eager PyTorch loop and (given their checkout and
a JAX python) in the authors' code, interleaved round by round, all pinned to one core; prints ms/step and ratios.

    python benchmarks/bench_vs_authors.py [--rounds 5] [--steps 20] [--core 0]
        [--authors-dir .../transformers_learn_icl_by_gd --jax-python /tmp/jaxenv/bin/python]

Set-ups (``--setups``, default all of ``benchmarks/_setups.py``): ``single`` (one LSA layer, batch 2048, the
single-layer study), ``separate3`` (3 separate layers, multi-layer layers=3 recurrent=false: the 50 000-step
set-up), ``separate5``, ``recurrent10``, ``tokens`` (separate-tokens --preset paper), ``sine`` (sine --preset
paper: the trained model's step plus the baseline's step). The authors' side (``--authors-dir``) times those their
code has (``AUTHORS_SETUPS``); the others show "-" in its column. icl-gd's models, task
and settings are taken from the studies themselves (``benchmarks/_setups.py``). A step is sampling the batch,
forward, backward, clipping and the optimiser, as each code base runs it. The plain eager loop (single and
separate3 only) is the textbook LSA step written here on whole (B, N+1, D) tokens.

Both CPU seconds per step (all of a process's threads: XLA's, icl-gd's batch prefetcher) and wall ms per step are
printed; on a loaded machine CPU time is the steadier of the two. The authors' side runs in its own processes
(``docs/authors_check/bench_steps.py``, one per set-up), pinned to the same core. CI does not run this.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _setups import ROOT, SETUPS, captured_training  # noqa: E402


def plain_eager_step_fn(n_layers: int, batch: int = 2048, d: int = 10, N: int = 10):
    """A textbook LSA training step (the authors' settings), on whole tokens (B, N+1, d+1): every layer
    e_j += P W_V Σ_i e_i (W_K e_i)ᵀ (W_Q e_j) over the context, ŷ = -last token's y, AdamW, global-norm clip."""
    D = d + 1
    gen = torch.Generator().manual_seed(0)
    params = [torch.nn.Parameter(torch.randn(D, D, generator=gen) * (0.002 / (n_layers * D)) ** 0.5)
              for _ in range(4 * n_layers)]
    opt = torch.optim.AdamW(params, lr=1e-3, betas=(0.9, 0.98), weight_decay=0.0)
    clip = 1e-3 if n_layers <= 2 else 10.0

    def step() -> None:
        x = torch.rand(batch, N + 1, d) - 0.5
        w = torch.randn(batch, d, 1)
        y = x @ w
        e = torch.cat([x, torch.cat([y[:, :N], torch.zeros(batch, 1, 1)], 1)], -1)
        for k in range(n_layers):
            W_Q, W_K, W_V, P = params[4 * k:4 * k + 4]
            q, key, v = e @ W_Q.T, e[:, :N] @ W_K.T, e[:, :N] @ W_V.T
            e = e + (q @ key.transpose(1, 2)) @ v @ P.T
        loss = 0.5 * ((-e[:, -1, -1] - y[:, -1, 0]) ** 2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, clip)
        opt.step()

    return step


AUTHORS_SETUPS = ("single", "separate3", "tokens", "sine")  # the set-ups docs/authors_check/bench_steps.py has


def selected_setups(text: str, with_authors: bool) -> tuple[list[str], list[str]]:
    """(the set-ups ``--setups`` names, those the authors' side times): every name must be one of ``SETUPS``
    (ValueError naming the known ones); with ``--authors-dir``, the authors' side times those of ``AUTHORS_SETUPS``
    and the others get "-" in its column."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in SETUPS]
    if not names or unknown:
        raise ValueError(f"--setups {text!r}: {', '.join(unknown) or 'no set-up'} not among {', '.join(SETUPS)}")
    return names, [name for name in names if with_authors and name in AUTHORS_SETUPS]


def _read_reply(proc: subprocess.Popen, name: str, stderr: IO[str]) -> dict:
    """The worker's next JSON line; a RuntimeError with its exit status and last error lines when it has none."""
    line = proc.stdout.readline()
    try:
        return json.loads(line)
    except json.JSONDecodeError:
        try:  # a worker that failed is ending: let it finish writing why
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        stderr.seek(0)
        error = stderr.read().strip().splitlines()[-5:]
        raise RuntimeError(f"the authors' worker for set-up {name!r} (docs/authors_check/bench_steps.py) gave "
                           f"{line.strip()[:200]!r} instead of a JSON line (exit status {proc.returncode}): "
                           + " | ".join(error)) from None


def authors_worker(name: str, authors_dir: Path, jax_python: str) -> tuple[subprocess.Popen, object]:
    """The authors' step for set-up ``name`` (one of ``AUTHORS_SETUPS``) in a process of its own
    (``docs/authors_check/bench_steps.py``, XLA on one thread, on this process's core): (the process, ``fn(n)`` ->
    {"cpu_s", "wall_s"} of ``n`` of their steps)."""
    if name not in AUTHORS_SETUPS:
        raise ValueError(f"the authors' code has no set-up {name!r} (it has {', '.join(AUTHORS_SETUPS)})")
    env = dict(os.environ, XLA_FLAGS="--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")
    stderr = tempfile.TemporaryFile("w+")  # a file, not a pipe: a chatty worker never blocks on a full pipe
    proc = subprocess.Popen([jax_python, str(ROOT / "docs/authors_check/bench_steps.py"), "--authors-dir",
                             str(authors_dir), "--setup", name], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=stderr, text=True, env=env, cwd=ROOT / "docs/authors_check")
    if not _read_reply(proc, name, stderr).get("ready"):
        proc.kill()
        raise RuntimeError(f"the authors' worker for set-up {name!r} did not say it was ready")

    def authors(n: int) -> dict:
        proc.stdin.write(f"{n}\n")
        proc.stdin.flush()
        return _read_reply(proc, name, stderr)

    return proc, authors


def timed(fn, n: int) -> tuple[float, float]:
    """(CPU s, wall s) of ``fn(n)``: CPU time of the whole process."""
    cpu, wall = time.process_time(), time.perf_counter()
    fn(n)
    return time.process_time() - cpu, time.perf_counter() - wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=20, help="steps per timed block")
    parser.add_argument("--core", type=int, default=0, help="the one CPU core every process is pinned to")
    parser.add_argument("--setups", default=",".join(SETUPS))
    parser.add_argument("--authors-dir", type=Path, help="transformers_learn_icl_by_gd of their repository")
    parser.add_argument("--jax-python", default=sys.executable, help="a python with jax, dm-haiku, optax, ...")
    args = parser.parse_args()
    try:
        names, with_authors = selected_setups(args.setups, args.authors_dir is not None)
    except ValueError as error:
        parser.error(str(error))
    os.sched_setaffinity(0, {args.core})
    torch.set_num_threads(1)

    contenders: dict[tuple[str, str], object] = {}
    workers: dict[str, subprocess.Popen] = {}
    for name in names:
        study, preset, overrides, calls = SETUPS[name]
        captured = captured_training(study, preset, overrides, calls)
        contenders[(name, "icl-gd")] = lambda n, c=captured: [x.time_steps(n) for x in c]
        if name in ("single", "separate3"):
            step = plain_eager_step_fn(1 if name == "single" else 3)
            contenders[(name, "plain eager")] = lambda n, s=step: [s() for _ in range(n)]
        if name in with_authors:
            workers[name], contenders[(name, "authors")] = authors_worker(name, args.authors_dir, args.jax_python)
    for fn in contenders.values():  # warm-up
        fn(2)

    cpu: dict[tuple[str, str], list[float]] = {k: [] for k in contenders}
    wall: dict[tuple[str, str], list[float]] = {k: [] for k in contenders}
    for _ in range(args.rounds):
        for key, fn in contenders.items():
            if key[1] == "authors":
                got = fn(args.steps)
                c, w = got["cpu_s"], got["wall_s"]
            else:
                c, w = timed(fn, args.steps)
            cpu[key].append(1e3 * c / args.steps)
            wall[key].append(1e3 * w / args.steps)
    for proc in workers.values():
        proc.kill()

    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, torch {torch.__version__}, core {args.core}, "
          f"{args.rounds} rounds x {args.steps} steps, median ms/step (CPU | wall); load {os.getloadavg()}")
    print("| set-up | icl-gd | plain eager | authors | plain/icl-gd | authors/icl-gd |")
    print("|---|---|---|---|---|---|")
    for name in names:
        med = {who: (statistics.median(cpu[(name, who)]), statistics.median(wall[(name, who)]))
               for who in ("icl-gd", "plain eager", "authors") if (name, who) in cpu}
        cell = {who: f"{c:.2f} \\| {w:.2f}" for who, (c, w) in med.items()}
        ratio = {who: f"{med[who][0] / med['icl-gd'][0]:.2f}x \\| {med[who][1] / med['icl-gd'][1]:.2f}x"
                 for who in med if who != "icl-gd"}
        print(f"| {name} | {cell['icl-gd']} | {cell.get('plain eager', '-')} | {cell.get('authors', '-')} | "
              f"{ratio.get('plain eager', '-')} | {ratio.get('authors', '-')} |")
    print(f"# uptime: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")


if __name__ == "__main__":
    main()
