"""Study ``dual-form``: which training patterns does a trained MLP attend to? (Irie, Csordás & Schmidhuber 2022)

A two-hidden-layer ReLU MLP is trained by SGD (momentum, weight decay, per-epoch lr decay, optional clipping)
while ``icl_gd.dual`` records every linear layer's keys and values. Three settings:

- ``single``: one task (the dataset, 10 classes);
- ``joint``: two tasks trained together on a shared 20-way head (task 1's labels are offset by 10);
- ``continual``: the same two tasks one after the other (task 0's epochs, then task 1's), to see forgetting.

Task 0 is ``dataset``; ``auto`` means Fashion-MNIST when its IDX files are at ``fashion_mnist_dir`` and digits
otherwise (digits runs in seconds and is what tests and CI use). Task 1 is ``second_task``: ``permuted`` (task 0's
images with a fixed pixel permutation, always available) or another 28×28 dataset.

For each run the dual form is verified against the trained weights (float64 rebuild; training is float64, keys are
stored in float64 for digits and float32 otherwise, so the error is round-off of that storage), then test queries
are scored against every stored key: top training images per layer, per-class attention, attention mass over time
split by task, the vote (the training class with most attention) against the prediction and the label, and the
effect of removing a task's or an epoch's keys. Headline metrics in ``metrics.json`` ``mean`` come from the first
listed setting (votes averaged over the three layers; ``verify_max_rel_error`` is the maximum over every setting
and layer); every setting's metrics are also there under ``<setting>.<metric>``.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import torch
from torch import nn

from icl_gd.config import require_positive, require_non_negative
from icl_gd.datasets import (
    FASHION_MNIST_DIR, ImageDataset, fashion_mnist_available, load_dataset, permuted,
)
from icl_gd.dual.queries import (
    UnitSelection, keys_removed, layer_queries, removal_delta, score_queries, vote_agreement,
)
from icl_gd.dual.recorder import DualRecorder, Provenance, RecordedLayer
from icl_gd.dual.storage import open_memory
from icl_gd.dual.units import dual_layer
from icl_gd.dual.verification import verify_layer
from icl_gd.errors import ConfigError, DivergenceError
from icl_gd.results import write_csv, write_json, write_metrics

from icl_gd.study import RunContext, Study

SETTINGS = ("single", "joint", "continual")
LAYERS = ("input", "hidden", "output")
PERMUTATION_SEED = 12345  # the second task's pixel permutation: part of the task's definition, not of a run


@dataclass(frozen=True)
class DualFormConfig:
    dataset: Literal["auto", "digits", "fashion-mnist", "mnist-subset"] = "auto"
    second_task: Literal["permuted", "fashion-mnist", "mnist-subset"] = "permuted"
    fashion_mnist_dir: str = str(FASHION_MNIST_DIR)
    settings: tuple[str, ...] = SETTINGS
    hidden: int = 256
    epochs: int = 3  # per task
    steps: int | None = None  # optional cap on optimizer steps per task phase (the CLI's --steps)
    batch_size: int = 32
    lr: float = 0.1
    momentum: float = 0.9
    weight_decay: float = 1e-4
    lr_decay: float = 0.7  # lr × lr_decay after every epoch
    clip_norm: float | None = None
    train_examples: int | None = None  # first N training images per task (None: all)
    n_queries: int = 200  # test queries scored per task
    n_figure_queries: int = 4
    top_k: int = 6
    key_dtype: Literal["auto", "float16", "float32", "float64"] = "auto"
    keep_memory: bool = True  # keep the recorded keys/values under out/memory
    seeds: int = 1
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("hidden", "epochs", "batch_size", "lr", "n_queries", "n_figure_queries", "top_k", "seeds"):
            require_positive(name, getattr(self, name))
        for name in ("momentum", "weight_decay", "seed"):
            require_non_negative(name, getattr(self, name))
        require_positive("lr_decay", self.lr_decay)
        for name in ("steps", "train_examples", "clip_norm"):
            if getattr(self, name) is not None:
                require_positive(name, getattr(self, name))
        if not self.settings:
            raise ConfigError("settings must name at least one of single, joint, continual")
        unknown = [s for s in self.settings if s not in SETTINGS]
        if unknown or len(set(self.settings)) != len(self.settings):
            raise ConfigError(f"settings={','.join(self.settings)} must be distinct values of {', '.join(SETTINGS)}")


@dataclass(frozen=True)
class Task:
    """One classification task inside a run: its data, label offset on the shared head, example-id offset."""

    index: int
    data: ImageDataset
    label_offset: int
    id_offset: int

    @property
    def n_train(self) -> int:
        return len(self.data.train_y)


class MLP(nn.Module):
    """in → hidden → hidden → classes with ReLU; three linear layers, the dual form's three memories."""

    def __init__(self, d_in: int, hidden: int, n_out: int, generator: torch.Generator) -> None:
        super().__init__()
        self.input = nn.Linear(d_in, hidden)
        self.hidden = nn.Linear(hidden, hidden)
        self.output = nn.Linear(hidden, n_out)
        with torch.no_grad():
            for layer in self.layers:
                bound = 1.0 / np.sqrt(layer.in_features)  # PyTorch's default init, from our generator
                layer.weight.uniform_(-bound, bound, generator=generator)
                layer.bias.uniform_(-bound, bound, generator=generator)

    @property
    def layers(self) -> tuple[nn.Linear, nn.Linear, nn.Linear]:
        return (self.input, self.hidden, self.output)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(B, d_in) → logits (B, n_out)."""
        return self.output(torch.relu(self.hidden(torch.relu(self.input(x)))))


def resolve_dataset(config: DualFormConfig) -> str:
    if config.dataset != "auto":
        return config.dataset
    return "fashion-mnist" if fashion_mnist_available(config.fashion_mnist_dir) else "digits"


def load_tasks(config: DualFormConfig) -> tuple[Task, Task]:
    first = load_dataset(resolve_dataset(config), config.fashion_mnist_dir)
    if config.second_task == "permuted":
        second = permuted(first, PERMUTATION_SEED)
    else:
        second = load_dataset(config.second_task, config.fashion_mnist_dir)
        if second.n_features != first.n_features:
            raise ConfigError(
                f"second_task={config.second_task} has {second.n_features} pixels but dataset {first.name} has "
                f"{first.n_features}; use second_task=permuted"
            )
    tasks = []
    offset = 0
    for index, data in enumerate((first, second)):
        if config.train_examples is not None:
            n = config.train_examples
            data = ImageDataset(data.name, data.train_x[:n], data.train_y[:n], data.test_x, data.test_y,
                                data.image_shape, data.n_classes)
        tasks.append(Task(index, data, 10 * index, offset))
        offset += len(data.train_y)
    return tasks[0], tasks[1]


def _phases(setting: str, tasks: tuple[Task, Task]) -> list[tuple[Task, ...]]:
    """The tasks trained together in each phase of a setting."""
    if setting == "single":
        return [(tasks[0],)]
    if setting == "joint":
        return [tasks]
    return [(tasks[0],), (tasks[1],)]


def _accuracy(model: MLP, task: Task, device: torch.device) -> float:
    with torch.no_grad():
        x = torch.as_tensor(task.data.test_x, dtype=torch.float64, device=device)
        pred = model(x).argmax(1).cpu().numpy()
    return float(np.mean(pred == task.data.test_y + task.label_offset))


def train_setting(
    config: DualFormConfig, setting: str, tasks: tuple[Task, Task], seed: int, root: Path, ctx: RunContext,
    curves: list[dict],
) -> tuple[MLP, dict[str, float]]:
    """Train one model in ``setting`` while recording its dual form under ``root``; returns model and accuracies."""
    device = ctx.device
    generator = torch.Generator().manual_seed(seed)
    used = tasks if setting != "single" else tasks[:1]
    n_out = 10 * len(used)
    model = MLP(tasks[0].data.n_features, config.hidden, n_out, generator).to(torch.float64).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=config.lr, momentum=config.momentum,
                          weight_decay=config.weight_decay)
    schedule = torch.optim.lr_scheduler.ExponentialLR(opt, gamma=config.lr_decay)
    key_dtype = config.key_dtype if config.key_dtype != "auto" else (
        "float64" if tasks[0].data.name == "digits" else "float32")
    recorder = DualRecorder(
        [RecordedLayer("input", model.input, compress_by_example=True), RecordedLayer("hidden", model.hidden),
         RecordedLayer("output", model.output)], opt, root, key_dtype=key_dtype, chunk_rows=16384,
    )
    label = f"{setting}/seed {seed}"
    epoch = 0
    accuracies: dict[str, float] = {}
    for phase, phase_tasks in enumerate(_phases(setting, tasks)):
        x = np.concatenate([t.data.train_x for t in phase_tasks])
        y = np.concatenate([t.data.train_y + t.label_offset for t in phase_tasks])
        ids = np.concatenate([np.arange(t.n_train) + t.id_offset for t in phase_tasks])
        task_of = np.concatenate([np.full(t.n_train, t.index) for t in phase_tasks])
        x_t = torch.as_tensor(x, dtype=torch.float64, device=device)
        y_t = torch.as_tensor(y, device=device)
        steps_done = 0
        for _ in range(config.epochs):
            order = torch.randperm(len(y), generator=generator).numpy()
            for start in range(0, len(order), config.batch_size):
                if config.steps is not None and steps_done >= config.steps:
                    break
                batch = order[start:start + config.batch_size]
                opt.zero_grad()
                b_idx = torch.as_tensor(batch, device=device)
                with recorder.batch(Provenance(torch.as_tensor(ids[batch]), torch.as_tensor(y[batch]),
                                               task=torch.as_tensor(task_of[batch]), epoch=epoch)):
                    loss = nn.functional.cross_entropy(model(x_t[b_idx]), y_t[b_idx])
                    loss.backward()
                if not torch.isfinite(loss):
                    raise DivergenceError(f"{label}: training loss became {loss.item()} at step {recorder.step}")
                if config.clip_norm is not None:
                    nn.utils.clip_grad_norm_(model.parameters(), config.clip_norm)
                opt.step()
                steps_done += 1
                if recorder.step % 20 == 0:
                    curves.append({"step": recorder.step, "seed": seed, "model": setting, "metric": "train_loss",
                                   "value": loss.item()})
            schedule.step()
            for t in used:
                acc = _accuracy(model, t, device)
                curves.append({"step": recorder.step, "seed": seed, "model": setting,
                               "metric": f"test_accuracy_task{t.index}", "value": acc})
            epoch += 1
        if setting == "continual" and phase == 0:
            accuracies["task0_accuracy_after_task0"] = _accuracy(model, tasks[0], device)
    recorder.close()
    for t in used:
        accuracies[f"task{t.index}_accuracy"] = _accuracy(model, t, device)
    accuracies["test_accuracy"] = float(np.mean([accuracies[f"task{t.index}_accuracy"] for t in used]))
    return model, accuracies


@dataclass(frozen=True)
class Analysis:
    """What one trained run's dual form says; arrays are per layer (in ``LAYERS`` order)."""

    metrics: dict[str, float]
    verification: list[dict[str, float]]  # per layer: weight/output abs and rel errors
    class_attention: list[np.ndarray]  # (nq, C) per layer, normalised per query
    query_prediction: np.ndarray  # (nq,)
    epoch_attention: list[np.ndarray]  # (T, E): attention mass per task and epoch, mean over queries
    figure_queries: np.ndarray  # (nf, D) images
    figure_top_examples: list[np.ndarray]  # (nf, k) example ids with most attention, per layer
    removal_rows: list[dict]


def _queries(config: DualFormConfig, used: tuple[Task, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    x = np.concatenate([t.data.test_x[:config.n_queries] for t in used])
    y = np.concatenate([t.data.test_y[:config.n_queries] + t.label_offset for t in used])
    task = np.concatenate([np.full(min(config.n_queries, len(t.data.test_y)), t.index) for t in used])
    return x, y, task


def analyse(config: DualFormConfig, setting: str, model: MLP, tasks: tuple[Task, Task], root: Path,
            ctx: RunContext) -> Analysis:
    used = tasks if setting != "single" else tasks[:1]
    n_classes = 10 * len(used)
    n_epochs = config.epochs * len(_phases(setting, tasks))
    n_examples = sum(t.n_train for t in tasks)
    memory = open_memory(root)
    layers = [dual_layer(memory[name]) for name in LAYERS]
    x, y, task = _queries(config, used)
    xq = torch.as_tensor(x, dtype=torch.float64, device=ctx.device)
    logits, inputs, readouts = layer_queries(model, model.layers, xq)
    pred = logits.argmax(1).cpu().numpy()
    metrics: dict[str, float] = {}
    verification = []
    n_verify = min(64, len(x))
    for name, layer, q in zip(LAYERS, layers, inputs):
        v = verify_layer(layer, q[:n_verify].cpu().numpy())
        verification.append({"layer": name, "weight_max_abs_error": v.weight_max_abs_error,
                             "weight_max_rel_error": v.weight_max_rel_error,
                             "output_max_abs_error": v.output_max_abs_error,
                             "output_max_rel_error": v.output_max_rel_error})
        metrics[f"{name}.verify_max_rel_error"] = v.max_rel_error
    metrics["verify_max_rel_error"] = max(metrics[f"{n}.verify_max_rel_error"] for n in LAYERS)
    class_attention, epoch_attention, votes_pred, votes_label = [], [], [], []
    figure_top = []
    nf = min(config.n_figure_queries, len(x))
    figure_idx = np.linspace(0, len(x) - 1, nf).astype(int)
    for name, layer, q, r in zip(LAYERS, layers, inputs, readouts):
        s = score_queries(layer, q.cpu().numpy(), r.cpu().numpy(), k=config.top_k, n_classes=n_classes,
                          n_tasks=2, n_epochs=n_epochs)
        agree_pred, agree_label = vote_agreement(s.attention_by_class, pred, y)
        votes_pred.append(agree_pred)
        votes_label.append(agree_label)
        metrics[f"{name}.vote_agrees_with_prediction"] = agree_pred
        metrics[f"{name}.vote_agrees_with_label"] = agree_label
        metrics[f"{name}.effective_keys"] = float(np.mean(s.effective_keys))
        metrics[f"{name}.n_keys"] = float(layer.memory.table("rows").rows)
        share_task1 = s.attention_by_task[:, 1] / s.attention_total
        metrics[f"{name}.attention_share_task1"] = float(np.mean(share_task1))
        class_attention.append(s.attention_by_class / s.attention_total[:, None])
        epoch_attention.append(np.mean(s.attention_by_task_epoch / s.attention_total[:, None, None], axis=0))
        top = score_queries(layer, q[figure_idx].cpu().numpy(), r[figure_idx].cpu().numpy(), k=1,
                            n_classes=n_classes, n_tasks=2, n_epochs=n_epochs, n_examples=n_examples)
        figure_top.append(np.argsort(-top.attention_by_example, axis=1)[:, :config.top_k])
    metrics["vote_agrees_with_prediction"] = float(np.mean(votes_pred))
    metrics["vote_agrees_with_label"] = float(np.mean(votes_label))
    removal_rows = _removals(config, setting, model, layers, used, n_epochs, xq, pred, y, task, metrics)
    return Analysis(metrics, verification, class_attention, pred, epoch_attention, x[figure_idx], figure_top,
                    removal_rows)


def _removals(config: DualFormConfig, setting: str, model: MLP, layers: list, used: tuple[Task, ...],
              n_epochs: int, xq: torch.Tensor, pred: np.ndarray, y: np.ndarray, task: np.ndarray,
              metrics: dict[str, float]) -> list[dict]:
    """Subtract a set of keys (a task's, the first or last epoch's) from all three layers; how do predictions move?"""
    selections = [(f"task{t.index}", UnitSelection(tasks=(t.index,))) for t in used] if len(used) > 1 else []
    selections += [("first_epoch", UnitSelection(epochs=(0,))), ("last_epoch", UnitSelection(epochs=(n_epochs - 1,)))]
    rows = []
    for label, selection in selections:
        deltas = [(module, *removal_delta(layer, selection)) for module, layer in zip(model.layers, layers)]
        with keys_removed(deltas), torch.no_grad():
            after = model(xq).argmax(1).cpu().numpy()
        row = {"setting": setting, "removed": label, "changed_fraction": float(np.mean(after != pred))}
        for t in used:
            mask = task == t.index
            row[f"task{t.index}_accuracy_before"] = float(np.mean(pred[mask] == y[mask]))
            row[f"task{t.index}_accuracy_after"] = float(np.mean(after[mask] == y[mask]))
        metrics[f"removal.{label}.changed_fraction"] = row["changed_fraction"]
        rows.append(row)
    return rows


# -- figures ------------------------------------------------------------------------------------------------------

def _figures(out: Path, setting: str, analysis: Analysis, tasks: tuple[Task, Task]) -> None:
    import matplotlib.pyplot as plt

    from icl_gd.plotting import save_figure

    shape = tasks[0].data.image_shape
    train_x = np.concatenate([t.data.train_x for t in tasks])
    nf, k = analysis.figure_top_examples[0].shape
    fig, axes = plt.subplots(nf * len(LAYERS), k + 1, figsize=(1.1 * (k + 1), 1.15 * nf * len(LAYERS)))
    axes = np.atleast_2d(axes)
    for i in range(nf):
        for j, name in enumerate(LAYERS):
            row = axes[i * len(LAYERS) + j]
            row[0].imshow(analysis.figure_queries[i].reshape(shape), cmap="gray_r")
            row[0].set_ylabel(name, fontsize=7)
            for c, example in enumerate(analysis.figure_top_examples[j][i]):
                row[c + 1].imshow(train_x[example].reshape(shape), cmap="gray_r")
            for ax in row:
                ax.set_xticks([])
                ax.set_yticks([])
    axes[0, 0].set_title("query", fontsize=7)
    for c in range(k):
        axes[0, c + 1].set_title(f"top {c + 1}", fontsize=7)
    fig.suptitle(f"{setting}: training images with most attention, per layer", fontsize=8)
    save_figure(fig, out, f"top_training_images_{setting}")

    fig, axes = plt.subplots(1, len(LAYERS), figsize=(4 * len(LAYERS), 3), sharey=True)
    for ax, name, share in zip(axes, LAYERS, analysis.class_attention):
        for c in np.unique(analysis.query_prediction):
            mask = analysis.query_prediction == c
            ax.plot(np.arange(share.shape[1]), share[mask].mean(0), marker=".", lw=1, label=f"pred {c}")
        ax.set_title(name)
        ax.set_xlabel("training class")
    axes[0].set_ylabel("share of attention")
    axes[-1].legend(fontsize=5, ncol=2)
    fig.suptitle(f"{setting}: attention per training class, by the query's predicted class", fontsize=8)
    save_figure(fig, out, f"class_attention_{setting}")

    fig, axes = plt.subplots(1, len(LAYERS), figsize=(4 * len(LAYERS), 3), sharey=True)
    for ax, name, mass in zip(axes, LAYERS, analysis.epoch_attention):
        for t in range(mass.shape[0]):
            if mass[t].sum() > 0:
                ax.plot(np.arange(mass.shape[1]), mass[t], marker="o", label=f"task {t}")
        ax.set_title(name)
        ax.set_xlabel("epoch")
    axes[0].set_ylabel("share of attention")
    axes[-1].legend(fontsize=7)
    fig.suptitle(f"{setting}: attention mass over training time, split by task", fontsize=8)
    save_figure(fig, out, f"attention_over_time_{setting}")


def _summary_figures(out: Path, vote_rows: list[dict], verify_rows: list[dict]) -> None:
    import matplotlib.pyplot as plt

    from icl_gd.plotting import save_figure

    fig, ax = plt.subplots(figsize=(6.5, 0.35 * len(vote_rows) + 0.8))
    ax.axis("off")
    columns = ["setting", "layer", "vote = prediction", "vote = label", "effective keys"]
    cells = [[r["setting"], r["layer"], f"{r['vote_agrees_with_prediction']:.3f}", f"{r['vote_agrees_with_label']:.3f}",
              f"{r['effective_keys']:.0f}"] for r in vote_rows]
    ax.table(cellText=cells, colLabels=columns, loc="center")
    ax.set_title("vote accuracy (class with the most attention), mean over seeds", fontsize=8)
    save_figure(fig, out, "vote_accuracy")

    fig, ax = plt.subplots(figsize=(6, 3))
    labels = [f"{r['setting']}\n{r['layer']}" for r in verify_rows]
    pos = np.arange(len(verify_rows))
    floor = 1e-18  # exact zeros cannot sit on a log axis
    ax.bar(pos - 0.2, [max(r["weight_max_rel_error"], floor) for r in verify_rows], 0.4, label="weights")
    ax.bar(pos + 0.2, [max(r["output_max_rel_error"], floor) for r in verify_rows], 0.4, label="dual outputs")
    ax.set_yscale("log")
    ax.set_xticks(pos, labels, fontsize=6)
    ax.set_ylabel("max relative error")
    ax.legend(fontsize=7)
    ax.set_title("dual form vs trained network (float64 rebuild), max over seeds", fontsize=8)
    save_figure(fig, out, "verification_errors")


# -- the study ----------------------------------------------------------------------------------------------------

def run(config: DualFormConfig, ctx: RunContext) -> dict[str, float]:
    tasks = load_tasks(config)
    curves: list[dict] = []
    per_seed: dict[int, dict[str, float]] = {}
    vote_acc: dict[tuple[str, str], list[dict]] = {}
    verify_acc: dict[tuple[str, str], list[dict]] = {}
    removal_rows: list[dict] = []
    timings: dict[str, float] = {}
    for s in range(config.seeds):
        seed = config.seed + s
        seed_metrics: dict[str, float] = {}
        for setting in config.settings:
            started = time.perf_counter()
            root = ctx.out / "memory" / setting / f"seed-{seed}"
            if root.exists():
                shutil.rmtree(root)  # an interrupted earlier attempt: recording restarts from scratch
            model, accuracies = train_setting(config, setting, tasks, seed, root, ctx, curves)
            analysis = analyse(config, setting, model, tasks, root, ctx)
            if s == 0:
                _figures(ctx.out, setting, analysis, tasks)
            if not config.keep_memory:
                shutil.rmtree(root)
            metrics = {**accuracies, **analysis.metrics}
            metrics["wall_seconds"] = time.perf_counter() - started
            timings[setting] = timings.get(setting, 0.0) + metrics["wall_seconds"]
            seed_metrics.update({f"{setting}.{k}": v for k, v in metrics.items()})
            for row in analysis.removal_rows:
                removal_rows.append({"seed": seed, **row})
            for name in LAYERS:
                vote_acc.setdefault((setting, name), []).append({
                    "vote_agrees_with_prediction": metrics[f"{name}.vote_agrees_with_prediction"],
                    "vote_agrees_with_label": metrics[f"{name}.vote_agrees_with_label"],
                    "effective_keys": metrics[f"{name}.effective_keys"]})
            for v in analysis.verification:
                verify_acc.setdefault((setting, v["layer"]), []).append(v)
        first = config.settings[0]
        for key in ("test_accuracy", "vote_agrees_with_prediction", "vote_agrees_with_label"):
            seed_metrics[key] = seed_metrics[f"{first}.{key}"]
        seed_metrics["verify_max_rel_error"] = max(seed_metrics[f"{st}.verify_max_rel_error"] for st in config.settings)
        per_seed[seed] = seed_metrics
    vote_rows = [{"setting": st, "layer": name, **{k: float(np.mean([r[k] for r in rows])) for k in rows[0]}}
                 for (st, name), rows in vote_acc.items()]
    verify_rows = [{"setting": st, "layer": name, **{k: float(np.max([r[k] for r in rows])) for k in rows[0]
                                                     if k != "layer"}} for (st, name), rows in verify_acc.items()]
    write_csv(ctx.out / "curves.csv", curves, ["step", "seed", "model", "metric", "value"])
    write_csv(ctx.out / "vote_accuracy.csv", vote_rows)
    write_csv(ctx.out / "verification.csv", verify_rows)
    write_csv(ctx.out / "removal.csv", removal_rows)
    _summary_figures(ctx.out, vote_rows, verify_rows)
    keys = per_seed[config.seed].keys()
    mean = {k: float(np.mean([m[k] for m in per_seed.values()])) for k in keys}
    mean["verify_max_rel_error"] = float(max(m["verify_max_rel_error"] for m in per_seed.values()))
    write_json(ctx.out / "summary.json", {"dataset": tasks[0].data.name, "second_task": tasks[1].data.name,
                                          "wall_seconds_per_setting": timings})
    write_metrics(ctx.out, mean, per_seed)
    return mean


STUDY = Study(
    name="dual-form",
    summary="Dual form of a trained MLP: every training pattern a key, verified exactly, attention per query",
    default_config=DualFormConfig,
    run=run,
)
