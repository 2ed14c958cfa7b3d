"""Train the LSTM language model by truncated BPTT while ``DualRecorder`` records its gate maps and output layer.

The training stream is cut into ``batch_size`` contiguous streams (the classic word-LM batching); each optimizer step
reads one window of ``bptt`` tokens per stream, the hidden state carried (detached) from the previous window and
reset every epoch. Training stops after ``epochs`` passes, or after ``steps`` optimizer steps when set (the authors'
``stop_after``; an unfinished last epoch counts as an epoch). The order is fixed and the dropout masks are drawn from
(seed, step), so a run is a pure function of its config and seed. Every row records
its key's provenance: ``example`` = the position of the key's word in the training stream (which gives its
document and its place there), ``label`` = the next word, ``task`` = the document, step and epoch.

Checkpoints (every ``checkpoint_every`` steps and at the end) hold the model, optimizer, schedule, hidden state,
data position and the recorder's manifest; a rerun resumes from the last one, and the store drops whatever the
interrupted run recorded after it, so the resumed run records exactly the rows of an uninterrupted one.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

import numpy as np
import torch
from torch import nn

from icl_gd.core.checkpoints import config_fingerprint, load_checkpoint, save_checkpoint
from icl_gd.core.config import check_settings, positive_int, require_positive, setting
from icl_gd.core.errors import ConfigError
from icl_gd.core.optim import make_optimizer, make_schedule, require_optimizer_keys
from icl_gd.core.progress import progress_bar
from icl_gd.core.study import TrainingWork
from icl_gd.dual.corpus import Corpus, TokenStream
from icl_gd.dual.lstm import LSTMLanguageModel, detach, dropout_mask, record_window
from icl_gd.dual.recorder import DualRecorder, Provenance, RecorderCheckpoint
from icl_gd.dual.training import SGDRun, sgd_step

DTYPES = {"float32": torch.float32, "float64": torch.float64}
CURVE_EVERY = 20  # optimizer steps between train_loss rows


def require_probability(name: str, value: float) -> None:
    if not 0.0 <= value < 1.0:
        raise ConfigError(f"{name} must be in [0, 1), got {value}")


@dataclass(frozen=True)
class LMTrainingConfig:
    """The LSTM language model and its recorded truncated-BPTT training."""

    embed: int = positive_int(64, "word embedding width")
    hidden: int = positive_int(128, "LSTM hidden width (every layer)")
    layers: int = positive_int(1, "LSTM layers (1 or 2 in the paper)")
    bptt: int = positive_int(35, "tokens per truncated-BPTT window")
    batch_size: int = setting(16, "parallel streams per window")
    epochs: int = positive_int(2, "passes over the training stream (when steps is none)")
    steps: int | None = positive_int(None, "stop after N optimizer steps, however many epochs that takes "
                                           "(none: after epochs)")
    dropout: float = setting(0.0, "dropout on the embeddings (the recorded key is the dropped input)",
                             check=require_probability)
    record_output: bool = setting(True, "record the output layer too (its value per token is vocabulary-wide)")
    optimizer: Literal["sgd", "adam"] = setting("sgd", "sgd: exact dual form; adam: its residual is reported")
    lr: float = setting(1.0, "initial learning rate")
    momentum: float = setting(0.9, "SGD heavy-ball momentum")
    beta1: float = setting(0.9, "Adam beta1 (optimizer=adam)")
    beta2: float = setting(0.999, "Adam beta2 (optimizer=adam)")
    weight_decay: float = setting(1e-6, "(coupled) weight decay")
    lr_decay: float = setting(0.5, "learning rate × lr_decay after every epoch", check=require_positive)
    grad_clip: float | None = setting(0.5, "global gradient-norm clip before every step (none or 0: off)")
    dtype: Literal["float32", "float64"] = setting("float32", "training precision")
    key_dtype: Literal["float16", "float32", "float64"] = setting("float32", "dtype of the stored keys")
    checkpoint_every: int = setting(200, "optimizer steps between checkpoints (a rerun resumes from the last)")

    def __post_init__(self) -> None:
        check_settings(self)
        require_optimizer_keys(self)


@dataclass(frozen=True)
class Batched:
    """A stream cut into B contiguous columns: ``ids (n, B)`` and each token's stream position ``position (n, B)``."""

    ids: torch.Tensor
    position: torch.Tensor

    def windows(self, bptt: int) -> list[tuple[int, int]]:
        """``(start, length)`` of each window: inputs rows start..start+length, targets one row later."""
        n = self.ids.shape[0]
        return [(i, min(bptt, n - 1 - i)) for i in range(0, n - 1, bptt)]


def batchify(stream: TokenStream, batch: int) -> Batched:
    n = len(stream) // batch
    if n < 2:
        raise ConfigError(f"{len(stream)} tokens cannot fill {batch} streams of at least 2 tokens")
    ids = torch.as_tensor(stream.ids[: n * batch]).view(batch, n).T.contiguous()
    position = torch.arange(n * batch).view(batch, n).T.contiguous()
    return Batched(ids, position)


@dataclass(frozen=True)
class TrainedLM:
    """A trained model, its recorded store and what training measured."""

    model: LSTMLanguageModel
    store: Path
    n_steps: int
    n_epochs: int
    curves: list[dict]
    train_seconds: float


def build_model(config: LMTrainingConfig, vocab_size: int, seed: int, device: torch.device) -> LSTMLanguageModel:
    generator = torch.Generator().manual_seed(seed)
    model = LSTMLanguageModel(vocab_size, config.embed, config.hidden, config.layers, generator,
                              record_output=config.record_output)
    return model.to(DTYPES[config.dtype]).to(device)


def fingerprint(config: LMTrainingConfig, corpus: Corpus, seed: int) -> str:
    """What a checkpoint belongs to: the training config, the seed and the training stream."""
    digest = hashlib.sha256(np.ascontiguousarray(corpus.train.ids).tobytes()).hexdigest()[:16]
    return config_fingerprint(config, seed, corpus.vocab_size, digest)


def total_steps(config: LMTrainingConfig, n_windows: int) -> int:
    """Optimizer steps of a training over ``n_windows`` training windows: ``steps``, else ``epochs`` passes."""
    return config.epochs * n_windows if config.steps is None else config.steps


def lm_work(label: str, config: LMTrainingConfig, corpus: Corpus) -> TrainingWork:
    """A set-up's recorded training for ``Study.training_work`` (the products floor and the benchmarks): its steps,
    in the training's precision. A fresh training is ``train_lm`` of seed 0 for ``n`` steps into a temporary store
    and checkpoint, removed afterwards (recorder and all, as a run trains)."""
    def fresh_training(n_steps: int) -> Callable[[], object]:
        short = replace(config, steps=n_steps, checkpoint_every=n_steps + 1)

        def train() -> None:
            folder = Path(tempfile.mkdtemp(prefix="icl-gd-work-"))
            try:
                train_lm(short, corpus, 0, folder / "store", folder / "checkpoint.pt", torch.device("cpu"))
            finally:
                shutil.rmtree(folder, ignore_errors=True)

        return train

    windows = batchify(corpus.train, config.batch_size).windows(config.bptt)
    return TrainingWork(label, total_steps(config, len(windows)), fresh_training, precision=config.dtype)


def train_lm(config: LMTrainingConfig, corpus: Corpus, seed: int, store: Path, checkpoint: Path,
             device: torch.device, progress: bool = False,
             on_step: Callable[[int], None] | None = None) -> TrainedLM:
    """Train a fresh model (initialised from ``seed``) on ``corpus.train`` while recording it under ``store``;
    resume from ``checkpoint`` when it belongs to the same config, seed and corpus (``icl_gd.core.checkpoints``).
    ``on_step(step)`` follows every optimizer step (after any checkpoint of that step)."""
    fp = fingerprint(config, corpus, seed)
    model = build_model(config, corpus.vocab_size, seed, device)
    saved = load_checkpoint(checkpoint, fp)
    if saved is not None and not (store / "manifest.json").is_file():
        saved = None  # the store is gone (keep_store=false, or deleted): record again from the start
    data = batchify(corpus.train, config.batch_size)
    windows = data.windows(config.bptt)
    total = total_steps(config, len(windows))
    n_epochs = -(-total // len(windows))
    if saved is not None and saved["finished"]:
        model.load_state_dict(saved["model"])
        return TrainedLM(model, store, saved["step"], n_epochs, saved["curves"], saved["seconds"])
    optimizer = make_optimizer(config.optimizer, model.parameters(), config)
    schedule = make_schedule(optimizer, config.lr_decay)
    document = torch.as_tensor(corpus.train.document)
    if saved is None:
        if store.exists():
            shutil.rmtree(store)  # an earlier attempt without a usable checkpoint: record from scratch
        resume, epoch, window, curves, seconds, state = None, 0, 0, [], 0.0, None
    else:
        model.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        schedule.load_state_dict(saved["schedule"])
        resume = RecorderCheckpoint(saved["manifest"], saved["step"])
        epoch, window, curves, seconds = saved["epoch"], saved["window"], saved["curves"], saved["seconds"]
        state = [(h.to(device), c.to(device)) for h, c in saved["state"]]
    recorder = DualRecorder(model.recorded_layers(), optimizer, store, key_dtype=config.key_dtype,
                            chunk_rows=8192, resume=resume, background_writes=True)
    run = SGDRun(model, optimizer, schedule, recorder)

    def save(finished: bool) -> None:
        payload = {"finished": finished, "model": model.state_dict(), "step": recorder.step, "curves": curves,
                   "seconds": seconds + time.perf_counter() - started}
        if not finished:
            payload.update(optimizer=optimizer.state_dict(), schedule=schedule.state_dict(),
                           manifest=recorder.checkpoint().manifest, epoch=epoch, window=window,
                           state=[(h.cpu(), c.cpu()) for h, c in state])
        save_checkpoint(checkpoint, fp, payload)

    started = time.perf_counter()
    with progress_bar(total, f"dual-form-lm seed {seed}", progress) as update:
        while recorder.step < total:
            if window == 0:
                state = model.initial_state(config.batch_size)
            while window < len(windows):
                start, length = windows[window]
                tokens = data.ids[start:start + length].to(device)
                targets = data.ids[start + 1:start + 1 + length].reshape(-1).to(device)
                example = data.position[start:start + length].reshape(-1)
                provenance = Provenance(example, targets.cpu(), task=document[example], epoch=epoch)
                mask = dropout_mask((*tokens.shape, config.embed), config.dropout, seed, recorder.step,
                                    model.output.weight.dtype, device)
                forward: dict = {}

                def loss_of() -> torch.Tensor:
                    h, forward["state"], forward["capture"] = model.hidden_states(tokens, state, capture=True,
                                                                                  embedding_mask=mask)
                    return nn.functional.cross_entropy(model.output(h.reshape(-1, config.hidden)), targets)

                loss = sgd_step(run, provenance, loss_of, config.grad_clip, f"dual-form-lm seed {seed}",
                                     after_backward=lambda: record_window(recorder, forward["capture"], provenance))
                state = detach(forward["state"])
                window += 1
                if recorder.step % CURVE_EVERY == 0:
                    curves.append({"step": recorder.step, "seed": seed, "model": "lstm", "metric": "train_loss",
                                   "value": loss.item()})
                update(recorder.step, loss.item())
                if window == len(windows):
                    epoch, window = epoch + 1, 0
                    schedule.step()
                if recorder.step % config.checkpoint_every == 0:
                    save(finished=False)
                if on_step is not None:
                    on_step(recorder.step)
                if window == 0 or recorder.step >= total:
                    break
    recorder.close()
    seconds += time.perf_counter() - started
    started = time.perf_counter()
    save(finished=True)
    return TrainedLM(model, store, recorder.step, n_epochs, curves, seconds)


@torch.no_grad()
def perplexity(model: LSTMLanguageModel, stream: TokenStream, bptt: int, batch: int) -> float:
    """exp(mean cross-entropy) over ``stream`` cut into ``batch`` streams, state carried across windows."""
    data = batchify(stream, batch)
    device = model.output.weight.device
    state = model.initial_state(batch)
    total, count = 0.0, 0
    for start, length in data.windows(bptt):
        logits, state = model(data.ids[start:start + length].to(device), state)
        targets = data.ids[start + 1:start + 1 + length].reshape(-1).to(device)
        total += float(nn.functional.cross_entropy(logits.double(), targets, reduction="sum"))
        count += targets.numel()
    return float(np.exp(total / count))


def unigram_perplexity(train: TokenStream, stream: TokenStream, vocab_size: int, batch: int) -> float:
    """The add-one unigram model of ``train`` on the same targets ``perplexity`` scores."""
    counts = np.bincount(train.ids, minlength=vocab_size).astype(np.float64) + 1.0
    log_p = np.log(counts / counts.sum())
    targets = batchify(stream, batch).ids[1:].reshape(-1).numpy()
    return float(np.exp(-log_p[targets].mean()))
