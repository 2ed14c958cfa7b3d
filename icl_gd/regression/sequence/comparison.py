"""Any causal next-token model on linear dynamical systems (von Oswald et al. 2023b, §2; the task of
``icl_gd.regression.sequence.tasks``), scored at every position against the referees of
``icl_gd.regression.sequence.referees``: least squares and ridge (the mesa layer in closed form), one GD step from
a fitted W0 at a tuned step, online GD (the delta rule) at a tuned step, and the zero predictor.

The model maps inputs (B, T, d) (tokens s_1..s_T) to predictions (B, T, d), row t its prediction of s_{t+1} from
s_1..s_t; position t is scored on ½ ‖ŝ_{t+1} - s_{t+1}‖² (``tasks.per_position_loss``). The model runs in its own
dtype (that of its first floating parameter; float64 for a callable or a module without one), every referee in
float64, all on the same TEST-stream sequences; the referees are tuned on TUNE-stream ones.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable

import pandas as pd
import torch

from icl_gd.core.config import check_settings, positive_int, require_non_negative, setting
from icl_gd.core.errors import ConfigError
from icl_gd.regression.evaluation import predictor_dtype
from icl_gd.regression.sequence.referees import RidgeReferee, tune_gd, tune_online_gd
from icl_gd.regression.sequence.tasks import LinearDynamicsTask
from icl_gd.regression.tasks import Stream

F64 = torch.float64
REFEREES = ("least_squares", "ridge", "gd", "online_gd", "zero")
COLUMNS = ["reference", "position", "loss", "loss_reference", "pred_diff"]


@dataclass(frozen=True)
class SequenceRunConfig:
    """Everything one ``icl-gd compare --task sequence`` run resolves to (``config.json``)."""

    model: str = setting("", "FILE.py:FACTORY")
    checkpoint: str | None = setting(None, "state dict loaded into the model")
    task: str = setting("sequence", "linear dynamical systems, s_{t+1} = W s_t + σ ε_t, W random orthogonal")
    d: int = setting(10, "state dimension d_s (what the model sees at each position)")
    length: int = setting(50, "positions T scored per sequence (at least 2)")
    seed: int = setting(2023, "seed of the test and tuning sequences", check=lambda name, value:
                        require_non_negative(f"--{name}", value))
    n_test: int = positive_int(2000, "test sequences")
    n_tune: int = positive_int(1024, "held-out tuning sequences")

    def __post_init__(self) -> None:
        for flag, value, low in (("--d", self.d, 1), ("--length", self.length, 2)):
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                why = " (position 1 has no past pair to fit a referee on)" if flag == "--length" else ""
                raise ConfigError(f"{flag} must be an integer of at least {low} for --task sequence{why}, "
                                  f"got {value!r}")
        check_settings(self)

    def build_task(self) -> LinearDynamicsTask:
        """The authors' law (orthogonal W, σ = 0.01, s_1 ~ U(-1, 1)^d) at this d_s and T."""
        return LinearDynamicsTask(d_s=self.d, length=self.length)


def referees(task: LinearDynamicsTask, seed: int, n_tune: int) -> dict[str, tuple[Callable, dict[str, Any]]]:
    """name -> (inputs (B, T, d) -> predictions (B, T, d), its parameters): the references, tuned on ``n_tune``
    TUNE-stream sequences."""
    gd = tune_gd(task, seed, n_tune, steps=1, learn_W0=True)
    online = tune_online_gd(task, seed, n_tune)
    ridge = RidgeReferee()
    return {
        "least_squares": (RidgeReferee(0.0), {"lam": 0.0}),
        "ridge": (ridge, {"lam": ridge.lam}),
        "gd": (gd, {"eta": gd.eta, "steps": gd.steps, "W0_norm": float(gd.W0.norm()) if gd.W0 is not None else 0.0}),
        "online_gd": (online, {"eta": online.eta}),
        "zero": (torch.zeros_like, {}),
    }


def model_predictions(predictor: Any, inputs: torch.Tensor) -> torch.Tensor:
    """(B, T, d) in float64: the model's predictions from ``inputs`` (B, T, d), run in its own dtype; a failure, an
    output of the wrong shape or type, NaN, inf or a prediction that reads a later token is a one-line
    ``ConfigError``."""
    if isinstance(predictor, torch.nn.Module):
        predictor.eval()  # dropout and the like off: the same inputs give the same predictions
    dtype = predictor_dtype(predictor) or F64
    shape = tuple(inputs.shape)
    x = inputs.to(dtype)
    try:
        with torch.no_grad():
            out = predictor(x)
            later = x.clone()
            later[:, -1] += 1.0  # a change of the last token may move only the last position's prediction
            moved = predictor(later)
    except Exception as error:
        first = (str(error).strip().splitlines() or [""])[0][:200]
        raise ConfigError(f"the model failed on inputs (B, T, d) = {shape}: {type(error).__name__}: {first}") \
            from error
    for what, value in (("output", out), ("output", moved)):
        if not isinstance(value, torch.Tensor) or not value.is_floating_point():
            kind = value.dtype if isinstance(value, torch.Tensor) else type(value).__name__
            raise ConfigError(f"the model returned {kind}, expected a floating-point tensor {shape} from inputs "
                              f"{shape}")
        if tuple(value.shape) != shape:
            raise ConfigError(f"the model returned shape {tuple(value.shape)}, expected {shape} (a prediction of "
                              f"the next token at every position) from inputs {shape}")
    if not torch.isfinite(out).all():
        raise ConfigError(f"the model returned NaN or inf on the test sequences (inputs {shape})")
    earlier = (moved[:, :-1] - out[:, :-1]).abs().max()
    if shape[1] > 1 and earlier > 1e-5 * (1 + float(out.abs().max())):
        raise ConfigError(f"the model is not causal: changing the last token moved its predictions at earlier "
                          f"positions by up to {float(earlier):.3g}")
    return out.to(F64)


def compare_sequence(predictor: Any, task: LinearDynamicsTask, n_test: int = 2000, n_tune: int = 1024,
                     seed: int = 2023, device: torch.device | str = "cpu") -> pd.DataFrame:
    """A tidy frame, a row per reference and position t = 1..T: ``loss`` (the model's ½ ‖ŝ_{t+1} - s_{t+1}‖²,
    mean over the test sequences), ``loss_reference`` (the reference's), ``pred_diff`` (mean ‖ŝ_{t+1} - ŝ_ref‖).
    ``attrs``: ``loss`` (the model's mean over positions, the authors' training loss) and ``parameters`` (each
    reference's tuned parameters)."""
    batch = task.sample(n_test, seed, 0, Stream.TEST, device=device, dtype=F64)
    inputs, targets = batch.inputs, batch.targets
    predicted = model_predictions(predictor, inputs)
    loss = 0.5 * ((predicted - targets) ** 2).sum(-1).mean(0)  # (T,)
    positions = torch.arange(1, task.length + 1)
    rows, parameters = [], {}
    for name, (referee, params) in referees(task, seed, n_tune).items():
        reference = referee(inputs.cpu()).to(inputs.device, F64)
        loss_ref = 0.5 * ((reference - targets) ** 2).sum(-1).mean(0)
        diff = (predicted - reference).norm(dim=-1).mean(0)
        parameters[name] = params
        rows += [{"reference": name, "position": int(t), "loss": float(a), "loss_reference": float(b),
                  "pred_diff": float(c)} for t, a, b, c in zip(positions, loss.cpu(), loss_ref.cpu(), diff.cpu())]
    frame = pd.DataFrame(rows, columns=COLUMNS)
    frame.attrs["loss"] = float(loss.mean())
    frame.attrs["parameters"] = json.loads(json.dumps(parameters))
    return frame


def summary(frame: pd.DataFrame) -> dict[str, Any]:
    """``metrics.json``: the model's mean loss, each reference's mean loss and mean ``pred_diff`` over positions, and
    the reference closest to the model (least mean ``pred_diff``)."""
    means = frame.groupby("reference", sort=False)[["loss_reference", "pred_diff"]].mean()
    closest = str(means["pred_diff"].idxmin())
    return {"loss": frame.attrs["loss"], "closest_reference": closest,
            "closest_pred_diff": float(means.loc[closest, "pred_diff"]),
            "loss_reference": {k: float(v) for k, v in means["loss_reference"].items()},
            "pred_diff": {k: float(v) for k, v in means["pred_diff"].items()},
            "parameters": frame.attrs["parameters"]}
