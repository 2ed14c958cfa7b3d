"""How long each claims plan trains against the paper figure it reproduces.

One declared list (``LENGTHS``): per run plan, the figure its claims read and the training length that figure shows,
as the paper or the authors' code gives it, with where that number is written. The plan's own length is never typed
here: ``plan_steps`` resolves the plan's config as ``icl-gd config`` does and reads the steps the study trains. A
plan shorter than its figure names the departure (``icl_gd.claims.departures``) that says why, or the table says
that none is listed. Rendered into ``docs/training-lengths.md``; a test keeps the page, the list and the registry's
plans in step.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from icl_gd.claims.claim import VERIFY_STUDY, RunPlan
from icl_gd.claims.departures import DEPARTURES, IRIE, VON_OSWALD, Departure
from icl_gd.claims.registry import ALL_CHECKS
from icl_gd.claims.registry import plans as p
from icl_gd.claims.registry.beyond_algorithms import (AHN, FU, WHICH_ALGORITHM, WHICH_ALGORITHM_ILL,
                                                      WHICH_ALGORITHM_SEPARATE)
from icl_gd.claims.registry.beyond_foreign import AKYUREK, FOREIGN, GARG
from icl_gd.claims.registry.beyond_online import MESA_PAPER, ONLINE_LAYERS
from icl_gd.claims.registry.beyond_asymptotics import FINITE_TASKS
from icl_gd.claims.registry.beyond_plateaus import PLATEAUS
from icl_gd.claims.registry.beyond_sequence import SEQUENCE
from icl_gd.claims.registry.beyond_spotlights import SPOTLIGHTS
from icl_gd.claims.registry.beyond_theory import PRECONDITIONER
from icl_gd.core.study import StudyRegistry, resolve_study_config

Steps = tuple[int, ...]  # the optimiser steps of each phase of one model's training (one phase, but continual's two)


@dataclass(frozen=True)
class FigureLength:
    """The training length a paper's figure shows: ``steps`` per model part ("" when the plan trains one; empty when
    the source does not state it), and ``source``: where the number is written (or where it was looked for)."""

    paper: str
    steps: Mapping[str, Steps]
    source: str


@dataclass(frozen=True)
class PlanLength:
    """One plan: the figure its claims reproduce (``figure``; "" when they reproduce none, ``why_none`` says why),
    that figure's length per paper, and the departures (study, key) that say why the plan trains less, if it does."""

    plan: RunPlan
    figure: str
    paper: tuple[FigureLength, ...]
    departures: tuple[tuple[str, str], ...] = ()
    why_none: str = ""
    # a study beyond the papers has no paper preset to list a departure against: why it trains less, in words
    beyond_why: str = ""


_A12 = "App. A.12 text"
_VO_NOTEBOOK = ("their constructed_token_setup.ipynb's training_steps (5000 for one layer or a recurrent stack, "
                "50 000 for separate layers; its loss curves run to it)")
_RECURRENT = FigureLength(VON_OSWALD, {"": (5000,)}, f"{_A12}; {_VO_NOTEBOOK}")
_SEPARATE = FigureLength(VON_OSWALD, {"": (50_000,)}, f"{_A12}; {_VO_NOTEBOOK}")
_IRIE_SWEEPS = "their sweeps/ff_as_attention/*.yaml stop_after"
_GARG_STEPS = ("Garg et al.'s src/conf/base.yaml train_steps (500 001), which conf/linear_regression.yaml inherits "
               "(their released linear-regression model)")
_FU = FigureLength(FU, {"": (500_001,)}, f"Fig. 3 reads Garg et al.'s released checkpoints (Fu et al.'s README): "
                                         f"{_GARG_STEPS}")
_WHICH_WHY = ("beyond the papers, on von Oswald et al.'s LSA stacks at their recurrent budget (5000 steps of 2048 "
              "tasks), not Fu et al.'s 12-layer GPT-2 checkpoints; its claims' set-up states it")
_LM_DEPARTURES = (("dual-form-lm", "book training"), ("dual-form-lm", "wiki training"))
_LM_PAPER = FigureLength(IRIE, {"book": (5000,), "wiki": (10_000,)},
                         f"{_IRIE_SWEEPS}: ff_as_attention_aeshop.yaml (book) 5000, ff_as_attention_wikitext2.yaml "
                         "(wiki) 10 000")

LENGTHS: tuple[PlanLength, ...] = (
    PlanLength(p.VERIFY, "", (), why_none="trains nothing (identities of the constructions)"),
    PlanLength(p.SINGLE_LAYER, "von Oswald Fig. 2 (and Fig. 1 right, Fig. 6, Fig. 10)", (_RECURRENT,)),
    *(PlanLength(p.FIXED_TASKS[m], f"von Oswald Fig. 16 ({m} tasks)", (_RECURRENT,)) for m in p.FIXED_TASKS),
    PlanLength(p.RECURRENT_2, "von Oswald Fig. 3(a), Fig. 6(b), Fig. 13 (center)", (_RECURRENT,)),
    PlanLength(p.RECURRENT_3, "von Oswald Fig. 9 (weights; §3's general K)", (_RECURRENT,)),
    PlanLength(p.RECURRENT_10, "von Oswald Fig. 7", (_RECURRENT,)),
    *(PlanLength(p.RECURRENT_2_AT_N[n], f"von Oswald Fig. 13 (N = {n})", (_RECURRENT,)) for n in p.RECURRENT_2_AT_N),
    PlanLength(p.SEPARATE_5, "von Oswald Fig. 3(b)", (_SEPARATE,)),
    PlanLength(p.LAYERNORM_1, "von Oswald Fig. 14(a)", (_RECURRENT,)),
    PlanLength(p.LAYERNORM_2, "von Oswald Fig. 14(b) (two separate layers)", (_SEPARATE,)),
    PlanLength(p.SINE, "von Oswald Fig. 4", (
        FigureLength(VON_OSWALD, {"": (20_000,)}, "their non_linear_regression.ipynb's training_steps"),)),
    PlanLength(p.SEPARATE_TOKENS, "von Oswald Fig. 5", (
        FigureLength(VON_OSWALD, {"": (40_000,)}, "Fig. 5 axis (their normal_token_construct.ipynb's training_steps "
                                                  "is 10 000, the paper preset's)"),)),
    PlanLength(p.SOFTMAX_HEADS, "von Oswald Fig. 12", (_RECURRENT,)),
    PlanLength(p.DUAL_FORM_MNIST, "Irie Table 1 (a single MNIST model)", (
        FigureLength(IRIE, {"single": (5000,)}, f"{_IRIE_SWEEPS}: ff_as_attention_mnist_10samples.yaml 5000"),)),
    PlanLength(p.DUAL_FORM, "Irie §3 (single, joint and sequential settings)", (
        FigureLength(IRIE, {"single": (5000,), "joint": (5000,), "continual": (3000, 3000)},
                     f"{_IRIE_SWEEPS}: mnist_10samples 5000, mixed_ds_10samples 5000, sequential_10samples 6000 "
                     "switched at stop_after / 2 (mnist_fmnist_sequential.py); the paper's text not stored here"),)),
    PlanLength(p.DUAL_FORM_LM, "Irie §4 (language models; passages from their analyze_set)", (_LM_PAPER,),
               departures=_LM_DEPARTURES),
    PlanLength(p.DUAL_FORM_LM_SGD, "Irie §4 (the dual form's identity on language models)", (_LM_PAPER,),
               departures=_LM_DEPARTURES),
    PlanLength(p.DUAL_FORM_CONTINUAL_SGD, "", (), why_none="a construction check: the dual form's identity under "
                                                          "its conditions (plain SGD, no weight decay, on digits); "
                                                          "no figure of theirs is reproduced"),
    PlanLength(SPOTLIGHTS, "", (), why_none="beyond the paper: ours, on the default digits MLP; no figure of theirs "
                                            "is reproduced"),
    PlanLength(WHICH_ALGORITHM, "Fu Fig. 3", (_FU,), beyond_why=_WHICH_WHY),
    PlanLength(WHICH_ALGORITHM_SEPARATE, "Fu Fig. 3", (_FU,), beyond_why=_WHICH_WHY),
    PlanLength(WHICH_ALGORITHM_ILL, "Fu Fig. 3; Ahn §4 (L attention layers)", (
        _FU, FigureLength(AHN, {"": (20_000,)}, "their LinearTransformer repository's variable_L_exp.ipynb "
                                               "max_iters (trained L = 1-4 layers against preconditioned GD)")),
               beyond_why=_WHICH_WHY),
    PlanLength(FOREIGN, "Garg abstract (their trained linear-regression model); Akyürek abstract", (
        FigureLength(GARG, {"": (500_001,)}, _GARG_STEPS),
        FigureLength(AKYUREK, {"": (500_100,)}, "their google-research incontext/model_trainer.py flag defaults: "
                                                "n_epochs 5001 × n_iter_per_epoch 100; their run flags not seen")),
               beyond_why="beyond the papers, on a model 1/25 of theirs in steps and far smaller (3 blocks of width "
                          "32, d = 3 against 12 layers, d = 20): a seed costs 7 CPU minutes here; its claims' set-up "
                          "states it"),
    PlanLength(ONLINE_LAYERS, "", (), why_none="beyond the papers: neither source trains these layers on in-context "
                                               "regression; no figure of theirs to compare"),
    PlanLength(PRECONDITIONER, "", (), why_none="beyond the papers: ours, on Ahn et al.'s anisotropic law; no figure "
                                                "of theirs is reproduced"),
    PlanLength(PLATEAUS, "", (), why_none="beyond the papers: gradient descent until both layers rest at the last "
                                          "level L_d; the authors' figure is read for its levels, not its length"),
    PlanLength(SEQUENCE, "von Oswald 2023b: their stored two-layer model (run_sandbox.ipynb); §3's trained models", (
        FigureLength(MESA_PAPER, {"": (2500,)}, "their run_sandbox.ipynb: 25 × 100 steps of 256 sequences (the model "
                                                "behind their stored losses)"),
        FigureLength(MESA_PAPER, {"": (20_000,)}, "their configs/config.py: the learning-rate schedule's decay "
                                                  "steps (the paper's figures' own lengths are not stored)")),
               beyond_why="beyond the papers: 4000 steps on a CPU (a seed costs 45 CPU minutes with five models), "
                          "longer than their stored model's 2500, shorter than their schedule's 20 000; its claims' "
                          "set-up states it"),
    PlanLength(FINITE_TASKS, "", (), why_none="the layer is solved in closed form (least squares), where gradient "
                                              "descent from zero ends: no training steps"),
)


def plan_steps(plan: RunPlan, registry: StudyRegistry) -> dict[str, Steps]:
    """The steps each model of ``plan`` trains at the full budget, resolved from its study's config as ``icl-gd
    config`` resolves it ({} for the verify pseudo-study, which trains nothing)."""
    if plan.study == VERIFY_STUDY:
        return {}
    study = registry.get(plan.study)
    config = resolve_study_config(study, plan.preset, plan.overrides)
    if study.resolved_training is not None:  # the regression family: None steps resolve to the authors' defaults
        return {"": (study.resolved_training(config).steps,)}
    if plan.study == "dual-form":
        if config.training.epochs is not None:  # counted in epochs: each phase's steps follow its data set's size
            return {setting: _classifier_epochs(config, setting) for setting in config.settings}
        return {setting: _classifier_phases(config.training, setting) for setting in config.settings}
    if plan.study == "dual-form-lm":  # epochs count windows of the loaded text: the study's declared work counts them
        work = study.training_work(config)
        return {setup: (w.steps,) for setup, w in zip(config.setups, work, strict=True)}
    if plan.study == "spotlights":
        from icl_gd.dual.datasets import load_dataset

        n_train = len(load_dataset(config.dataset).first_train(config.train_examples).train_y)
        return {"": (config.training.phase_step_count("single", n_train),)}
    if plan.study == "plateaus":  # full-batch gradient descent, both layers the same number of steps
        return {"": (config.steps,)}
    if plan.study == "finite-tasks":  # solved in closed form: no steps
        return {}
    raise ValueError(f"plan {plan.name}: no rule for the training length of study {plan.study!r}")


def _classifier_phases(training, setting: str) -> Steps:
    """A dual-form setting's steps per phase under a step cap (epochs=none: the cap, whatever the data set's size);
    continual trains the pair's two tasks in turn (``icl_gd.dual.settings.phases``)."""
    if training.epochs is not None:
        raise ValueError("a dual-form plan counted in epochs needs its data set's size")
    return (training.phase_steps(setting),) * (2 if setting == "continual" else 1)


def _classifier_epochs(config, setting: str) -> Steps:
    """A dual-form setting's steps per phase when it trains in epochs: each phase's epochs over its task's training
    images (the first task's data set; the second task is its permutation, or another data set of its own size)."""
    from icl_gd.dual.datasets import load_dataset

    data = config.data
    first = len(load_dataset(data.dataset).first_train(data.train_examples).train_y)
    second = first if data.second_task == "permuted" else len(
        load_dataset(data.second_task).first_train(data.train_examples).train_y)
    sizes = (first, second) if setting == "continual" else (first,)
    return tuple(config.training.phase_step_count(setting, n) for n in sizes)


def _number(steps: Steps) -> str:
    return " + ".join(f"{s:,}".replace(",", " ") for s in steps)


def steps_text(steps: Mapping[str, Steps]) -> str:
    """"5 000", or "book 1 000, wiki 600", or "continual 3 000 + 3 000" (each part's phases)."""
    return ", ".join(f"{part} {_number(phases)}".strip() for part, phases in steps.items())


def departure(study: str, key: str) -> Departure:
    """The listed departure of ``study`` at ``key`` (KeyError when none is listed)."""
    found = [d for d in DEPARTURES if d.study == study and d.key == key]
    if not found:
        raise KeyError(f"no departure of {study} at {key!r} in icl_gd/claims/departures.py")
    return found[0]


def status(entry: PlanLength, ours: Mapping[str, Steps]) -> str:
    """same / longer / shorter (with the departure that says why, or that none is listed) against every stated
    length of the figure; ``not compared`` with why, where there is nothing to compare."""
    if entry.why_none:
        return f"not compared: {entry.why_none}"
    comparisons = []  # the sign of ours minus theirs, per stated part
    for figure in entry.paper:
        for part, phases in figure.steps.items():
            mine = ours.get(part)
            if mine is None:
                raise ValueError(f"plan {entry.plan.name}: no part {part!r} in its resolved steps {dict(ours)}")
            comparisons.append((sum(mine) > sum(phases)) - (sum(mine) < sum(phases)))
    if not comparisons:
        return "not compared: no length stated"
    if min(comparisons) < 0:
        if entry.beyond_why:
            return f"shorter: {entry.beyond_why}"
        if not entry.departures:
            return "shorter: no departure listed"
        reasons = [departure(study, key) for study, key in entry.departures]
        return (f"shorter: departure{'s' if len(reasons) > 1 else ''} "
                + "; ".join(f"`{d.study}` {d.key}" for d in reasons) + " ([departures](departures.md))")
    return "longer" if max(comparisons) > 0 else "same"


TABLE_START = "<!-- training-lengths:start (rendered from icl_gd/claims/lengths.py; a test keeps it in step) -->"
TABLE_END = "<!-- training-lengths:end -->"


def claims_of(plan: RunPlan) -> list[str]:
    """The ids of the claims and construction checks that read ``plan``'s runs."""
    return [c.id for c in ALL_CHECKS if plan in c.runs]


def lengths_table_markdown(registry: StudyRegistry) -> str:
    """The table of ``docs/training-lengths.md`` (plan | claims | paper figure | paper's length and source | ours |
    status), between its markers."""
    lines = [TABLE_START, "", "| plan | claims | paper figure | paper's length (optimiser steps) and source | "
             "ours (steps) | status |", "|---|---|---|---|---|---|"]
    for entry in LENGTHS:
        ours = plan_steps(entry.plan, registry)
        paper = "<br>".join(f"{f.paper}: {steps_text(f.steps) or 'not stated'} ({f.source})" for f in entry.paper)
        lines.append(f"| `{entry.plan.name}` | {', '.join(f'`{c}`' for c in claims_of(entry.plan))} | "
                     f"{entry.figure or '-'} | {paper or '-'} | {steps_text(ours) or 'none'} | "
                     f"{status(entry, ours)} |")
    return "\n".join(lines + ["", TABLE_END])


if __name__ == "__main__":  # python -m icl_gd.claims.lengths docs/training-lengths.md: re-render the page's table
    import importlib
    import sys

    from icl_gd.core.results import replace_marked_block

    # The entry point hands the study registry down, as the CLI does: the functions above never import a study.
    registry = importlib.import_module("icl_gd.studies").REGISTRY
    replace_marked_block(sys.argv[1], TABLE_START, TABLE_END, lengths_table_markdown(registry))
