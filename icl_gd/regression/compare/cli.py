"""The ``icl-gd compare`` command's options: importing this module costs typer only, so ``icl-gd --help`` stays fast;
the comparison itself (``icl_gd.regression.compare.command``, ``icl_gd.regression.compare.comparison``) loads when it runs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer


def _spectrum(text: str) -> tuple[float, ...]:
    from icl_gd.core.errors import ConfigError

    try:
        return tuple(float(v) for v in text.split(","))
    except ValueError:
        raise ConfigError(f"--spectrum must be comma-separated numbers, got {text!r}") from None


def compare(
    model: Annotated[str, typer.Option("--model", help="FILE.py:FACTORY, a function in that file returning the "
                                       "predictor (a torch.nn.Module or a callable); called with d, n, d_y if it "
                                       "takes them.")],
    out: Annotated[Path, typer.Option("--out", help="Output directory.")],
    checkpoint: Annotated[Optional[Path], typer.Option("--checkpoint", help="State dict loaded into the model.")] = None,
    task: Annotated[str, typer.Option("--task", help="linear (x ~ U(-1/2, 1/2)^d, icl-gd's), linear-normal "
                                      "(x ~ N(0, I), Garg et al.'s) or anisotropic (x ~ N(0, Λ), Λ of --spectrum in "
                                      "a random basis); on Gaussian inputs the closed-form optimum Γ* and the best "
                                      "scalar GD step join the references. sequence: linear dynamical systems "
                                      "(von Oswald et al. 2023b), d = --d states, --length positions; the model "
                                      "maps (B, T, d) to next-token predictions (B, T, d) and is scored per "
                                      "position.")] = "linear",
    length: Annotated[int, typer.Option("--length", help="sequence: positions T scored per sequence (at least "
                                        "2).")] = 50,
    spectrum: Annotated[str, typer.Option("--spectrum", help="anisotropic: Λ's eigenvalues, comma-separated, one "
                                          "per input dimension (default Ahn et al.'s 1,1,0.5,0.25,1, d = 5).")] = "",
    covariate_scale: Annotated[float, typer.Option("--covariate-scale", help="Gaussian inputs: test contexts and "
                                                   "queries from N(0, cΛ), Γ* and the best step those of c = 1 "
                                                   "(covariate shift).")] = 1.0,
    d: Annotated[int, typer.Option("--d", help="Input dimension.")] = 10,
    n: Annotated[int, typer.Option("--n", help="Context pairs per task.")] = 10,
    layout: Annotated[str, typer.Option("--layout", help="The call the model takes: arguments (x_ctx, y_ctx, x_q), "
                                        "concat (icl-gd's tokens) or interleaved (Garg et al.'s); default: the "
                                        "model's `layout` attribute, else arguments.")] = "",
    steps: Annotated[int, typer.Option("--steps", help="GD, GD++ and preconditioned GD for 1..this many "
                                       "steps, at most 64: each count is tuned on its own and the tuning grows "
                                       "faster than its square (6 steps: about 15 s; 24: about 4 minutes).")] = 6,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the test, tuning and probe tasks.")] = 2023,
    device: Annotated[str, typer.Option("--device", help="cpu or cuda.")] = "cpu",
    threads: Annotated[int, typer.Option("--threads", help="CPU threads for torch, at most the machine's "
                                         "cores.")] = 1,
    force: Annotated[bool, typer.Option("--force", help="Overwrite a finished comparison in --out.")] = False,
    figures: Annotated[bool, typer.Option("--figures/--no-figures", help="Draw the figure.")] = True,
    progress: Annotated[bool, typer.Option("--progress/--no-progress", help="Say how far a tuning or matching "
                                           "that runs longer than a few seconds has come, on stderr.")] = True,
) -> None:
    """Compare any in-context learner with tuned GD, GD++, preconditioned GD, Newton, least squares and ridge;
    writes comparison.csv and figures/comparison.png into --out."""
    import pandas as pd

    from icl_gd.core.errors import ConfigError, ICLGDError, RunDirectoryError
    from icl_gd.core.resources import resolve_device, set_threads
    from icl_gd.regression.compare.command import SEQUENCE_TASK, CompareRunConfig, run_comparison
    from icl_gd.regression.compare.comparison import CompareConfig

    def fail(message: str, code: int) -> None:
        typer.echo(f"icl-gd: error: {message}", err=True)
        raise typer.Exit(code)

    try:
        set_threads(threads)
        torch_device = resolve_device(device)
        if task == SEQUENCE_TASK:
            _sequence(model, out, checkpoint, d, length, layout, spectrum, covariate_scale, seed, str(torch_device),
                      force, progress)
            return
        shape = {"spectrum": _spectrum(spectrum)} if spectrum else {}
        config = CompareRunConfig(model=model, checkpoint=None if checkpoint is None else str(checkpoint), task=task,
                                  d=d, n=n, layout=layout, seed=seed, compare=CompareConfig(steps=steps),
                                  covariate_scale=covariate_scale, **shape)
        frame = run_comparison(config, out, str(torch_device), force, figures, progress)
    except ICLGDError as error:
        fail(str(error), 2 if isinstance(error, (ConfigError, RunDirectoryError)) else 1)
    except KeyboardInterrupt:
        fail("interrupted; nothing was written to --out", 130)
    except Exception as error:  # a fault of icl-gd's own (the model's are ConfigErrors): one line, exit 1
        first = (str(error).strip().splitlines() or [""])[0][:300]
        fail(f"the comparison failed inside icl-gd ({type(error).__name__}: {first}); nothing was written to "
             "--out", 1)
    closest = frame[frame["layer"].isna()].sort_values("pred_diff").iloc[0]
    steps_text = "" if pd.isna(closest["steps"]) else f" ({int(closest['steps'])} steps)"
    typer.echo(f"compare: wrote {out}  (loss={frame.attrs['loss']:.4g}, closest: {closest['reference']}"
               f"{steps_text}, pred_diff={closest['pred_diff']:.3g})")


def _sequence(model: str, out: Path, checkpoint: Optional[Path], d: int, length: int, layout: str, spectrum: str,
              covariate_scale: float, seed: int, device: str, force: bool, progress: bool) -> None:
    """``--task sequence``: the causal model per position against the sequence referees; prints the summary."""
    from icl_gd.core.errors import ConfigError
    from icl_gd.regression.compare.command import SequenceRunConfig, run_sequence_comparison
    from icl_gd.regression.sequence.comparison import summary

    for flag, given in (("--layout", layout), ("--spectrum", spectrum), ("--covariate-scale", covariate_scale != 1)):
        if given:
            raise ConfigError(f"{flag} does not apply to --task sequence (the model maps inputs (B, T, d) to "
                              "next-token predictions (B, T, d))")
    config = SequenceRunConfig(model=model, checkpoint=None if checkpoint is None else str(checkpoint), d=d,
                               length=length, seed=seed)
    metrics = summary(run_sequence_comparison(config, out, device, force, progress))
    losses = ", ".join(f"{name}={value:.4g}" for name, value in metrics["loss_reference"].items())
    typer.echo(f"compare: wrote {out}  (loss={metrics['loss']:.4g}, mean over {length} positions; {losses}; "
               f"closest: {metrics['closest_reference']}, pred_diff={metrics['closest_pred_diff']:.3g})")
