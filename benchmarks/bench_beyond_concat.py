"""Benchmark: training-step cost of the models beyond concatenated tokens, the copy analysis, and the
default `sine`, `separate-tokens` and `softmax-heads` studies end to end.

    python benchmarks/bench_beyond_concat.py [--steps 30] [--skip-studies]

Prints one JSON object: median ms per training step (data sampling included, the studies' default batch sizes)
for the MLP+LSA model, the meta-learned MLP, the separate-token model with 1/2/4 heads and the softmax layer
with 1/2/4 heads; seconds for one copy analysis (64 tasks); wall seconds of each default study run as a user runs
it (a fresh process). Target on the 2-core CPU machine: <= 10 min per default study.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from icl_gd.regression.sine.features import MetaLearnedReadout, feature_lsa_model  # noqa: E402
from icl_gd.regression.lsa import LSAModel  # noqa: E402
from icl_gd.regression.metrics import query_loss  # noqa: E402
from icl_gd.regression.separate.model import SeparateTokenModel, copy_analysis  # noqa: E402
from icl_gd.regression.sine.tasks import SineTokenTask  # noqa: E402
from icl_gd.regression.tasks import Stream  # noqa: E402
from icl_gd.regression.tokens import ConcatTokenTask  # noqa: E402
from icl_gd.studies.separate_tokens import SeparateTokensConfig  # noqa: E402
from icl_gd.studies.sine import SineConfig  # noqa: E402
from icl_gd.studies.softmax_heads import SoftmaxHeadsConfig  # noqa: E402


def step_ms(model: torch.nn.Module, task, batch_size: int, steps: int) -> float:
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    times = []
    for step in range(steps + 3):
        start = time.perf_counter()
        tokens, target = task.train_batch(batch_size, 0, step, torch.device("cpu"), torch.float32)
        loss = query_loss(model(tokens), target)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step >= 3:  # warm-up steps excluded
            times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times)


def study_seconds(name: str) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", "from cli import app; app()", "run", name, "--out", f"{tmp}/run",
                        "--no-progress"], cwd=ROOT, check=True, capture_output=True)
        return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--skip-studies", action="store_true")
    args = parser.parse_args()
    out: dict[str, float] = {"threads": torch.get_num_threads()}

    sine, sep, soft = SineConfig(), SeparateTokensConfig(), SoftmaxHeadsConfig()
    sine_task = SineTokenTask(sine.task)
    out["ms_step_sine_mlp_lsa"] = step_ms(feature_lsa_model(sine.features), sine_task, sine.batch_size, args.steps)
    out["ms_step_sine_meta_mlp"] = step_ms(MetaLearnedReadout(sine.features), sine_task, sine.batch_size, args.steps)
    sep_task = sep.token_task
    for heads in sep.heads:
        model = SeparateTokenModel(sep_task.layout, sep.model(heads))
        out[f"ms_step_separate_h{heads}"] = step_ms(model, sep_task, sep.batch_size, args.steps)
    concat = ConcatTokenTask(soft.task)
    for heads in soft.heads:
        out[f"ms_step_softmax_h{heads}"] = step_ms(LSAModel(soft.model(heads)), concat, soft.batch_size, args.steps)

    model = SeparateTokenModel(sep_task.layout, sep.model(1))
    _, tokens = sep_task.batch_tokens(64, 0, 0, Stream.TEST)
    start = time.perf_counter()
    copy_analysis(model.copy, tokens)
    out["s_copy_analysis_64_tasks"] = time.perf_counter() - start

    if not args.skip_studies:
        for name in ("sine", "separate-tokens", "softmax-heads"):
            out[f"s_study_{name}"] = study_seconds(name)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
