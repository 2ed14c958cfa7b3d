"""The per-position losses von Oswald et al. 2023b stored with their code (``authors_losses.json``, its ``_about``
gives the provenance: repository, commit, file, notebook, task and models): their least-squares referee and their
trained two-layer linear Transformer on the default task, 5 test seeds of 256 sequences, 50 positions."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch

AUTHORS_LOSSES = Path(__file__).with_name("authors_losses.json")


@dataclass(frozen=True)
class StoredLosses:
    """One model's stored losses (S seeds, T positions) and what the model was (``model``, in words)."""

    model: str
    losses: torch.Tensor

    @property
    def mean(self) -> torch.Tensor:  # (T,) over seeds
        return self.losses.mean(0)

    @property
    def standard_error(self) -> torch.Tensor:  # (T,) of the mean over seeds
        return self.losses.std(0) / self.losses.shape[0] ** 0.5


def authors_losses() -> dict[str, StoredLosses]:
    """The stored losses by model name (``lsq``, ``transformer``), float64."""
    data = json.loads(AUTHORS_LOSSES.read_text())
    return {name: StoredLosses(entry["model"], torch.tensor(entry["losses"], dtype=torch.float64))
            for name, entry in data.items() if not name.startswith("_")}
