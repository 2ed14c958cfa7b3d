"""The authors' sine run (non_linear_regression.ipynb, its Config, Training and "Visualize functions" cells): their
baseline (embedding + MLP meta-trained under the Prop. 1 layer frozen at η = 0.1, ``pre_train_gd_hps``) then the
trained model (embedding + MLP + one LSA layer). Compare with ``icl-gd run sine --preset paper``.

    python docs/authors_check/sine.py --authors-dir PATH --seed 0 --steps 20000 --baseline-steps 20000 --out F.json

Per seed, into ``--out`` (one JSON object, rewritten atomically at every evaluation; ``complete`` once the final
models are scored):

- ``baseline_curve``: the baseline's test loss every 100 of its steps, as their ``pre_train_gd_hps`` prints it (on
  2048 tasks of its own evaluation key).
- ``curve``, every ``--every`` steps (theirs: 1000) on their Training cell's 2048 test tasks: the trained model's
  and the baseline's loss and their ``analyse``: ``cos_sensitivity`` (the "partial cosine" of Fig. 4 right: mean over
  tasks of the cosine of ∂ŷ/∂x_q, x_q the query's input, a scalar here, so the cosine is the sign agreement),
  ``sensitivity_diff`` (mean |∂ŷ/∂x_q - ∂ŷ_b/∂x_q|) and ``pred_diff`` (mean |ŷ - ŷ_b|).
- ``final`` (the models after all steps), on the notebook's 2048 test tasks and on 10 000 fresh test tasks (their
  data creator under a key folded from the test key; icl-gd's ``n_test``): ``loss_trained``, ``loss_meta``,
  ``rel_gap_trained_vs_meta`` = (L_trained - L_meta) / L_meta (vo-sine: its absolute value), the ``analyse``
  values (vo-sine-alignment: ``cos_sensitivity``) and ``function_rel_rms`` = √(mean (ŷ - ŷ_b)²) / √(mean ŷ_b²) over
  the test queries (vo-sine-function, icl-gd's ``relative_prediction_rms``).
- ``functions``: their test_sin cell's data (100 queries of one task, its 10 context points, amplitude and phase),
  both models' predictions at the query before the layer (their stack's first entry, "init") and after it, and the
  true curve on their plot's grid: enough to draw Fig. 4 (left) without JAX.

``--prng-era`` draws every key as JAX did before 0.5 (``jax_threefry_partitionable`` False; the notebooks ran on
jax 0.3.25).
"""
import contextlib
import io
import re
import time

import numpy as np

from _authors import import_authors, parser, provenance, set_prng_era, set_sine, write_json

p = parser(__doc__)
p.add_argument("--steps", type=int, default=20_000, help="the trained model's steps (theirs: 20000)")
p.add_argument("--baseline-steps", type=int, default=20_000, help="the baseline's steps (theirs: 20000)")
p.add_argument("--every", type=int, default=1000, help="evaluate every this many steps (theirs: 1000)")
p.add_argument("--n-test", type=int, default=10_000, help="fresh test tasks of the final statistics")
p.add_argument("--prng-era", action="store_true", help="JAX's PRNG as before 0.5 (jax_threefry_partitionable "
               "False), as their notebooks drew under jax 0.3.25")
p.add_argument("--out", help="write the run's JSON object here (atomically)")
args = p.parse_args()
set_prng_era(args.prng_era)
config, T = import_authors(args.authors_dir)

import jax  # noqa: E402  (after the PRNG era is set)
import jax.numpy as jnp  # noqa: E402
from src.data import create_weights  # noqa: E402  (their module, importable once their folder is on the path)

started = time.time()
# Their Config cell.
set_sine(config)
config.local_usage, config.seed = True, args.seed
config.training_steps, config.training_steps_gd = args.steps, args.baseline_steps
T.change_dataloader()
make = T.data_creator


def draw(key, n):
    return make(jax.random.split(key, num=n), config.input_size, config.dataset_size, config.size_distract,
                config.input_range, config.weight_scale)


def predictions(params, rng, data, gd):
    """ŷ per task: the last entry of their prediction stack (minus the query's last coordinate after the layer)."""
    _, stack, _ = T.predict_test.apply(params, rng, data, gd)
    return np.asarray(stack[-1], dtype=np.float64)


def scores(state, params_c, rng, data):
    """Both models' losses and their ``analyse`` on ``data``, and the relative RMS distance of the predictions."""
    trained = float(T.predict_test.apply(state.params, rng, data, False)[0])
    meta = float(T.predict_test.apply(params_c, rng, data, True)[0])
    cos, sens_diff, pred_diff = T.analyse(data, state, rng, params_c)
    p_tr, p_meta = predictions(state.params, rng, data, False), predictions(params_c, rng, data, True)
    return {"n_tasks": int(data[0].shape[0]), "loss_trained": trained, "loss_meta": meta,
            "rel_gap_trained_vs_meta": (trained - meta) / meta, "cos_sensitivity": float(cos),
            "sensitivity_diff": float(sens_diff), "pred_diff": float(pred_diff),
            "function_rel_rms": float(np.sqrt(np.mean((p_tr - p_meta) ** 2) / np.mean(p_meta ** 2)))}


# Their Training cell (one seed).
eval_rng = jax.random.PRNGKey(10)
optimiser, train_state, _, rng = T.init()
rng, data_rng = jax.random.split(rng, 2)
params_c = create_weights(config.input_size, 1, config.dataset_size, 0.1, jnp.ones([1, 1, config.input_size]) * 0.0,
                          lin_diag=False, gd_deq=config.gd_deq, num_layers=config.num_layers,
                          input_mlp_rnd=eval_rng)
start = time.time()
printed = io.StringIO()
if args.baseline_steps > 0:
    with contextlib.redirect_stdout(printed):  # their loop prints its test loss every 100 steps
        params_c, eval_rng = T.pre_train_gd_hps(eval_rng, params_c)
baseline_s = time.time() - start
baseline_curve = [{"step": int(m.group(1)), "loss": float(m.group(2))}
                  for m in re.finditer(r"head\):\s+(\d+)\s+([-0-9.e+]+)", printed.getvalue())]
print(f"baseline trained ({args.baseline_steps} steps) in {baseline_s:.0f} s"
      + (f", last printed loss {baseline_curve[-1]['loss']:.6f}" if baseline_curve else ""), flush=True)
eval_data = draw(eval_rng, config.bs)
out = {"driver": "sine", "notebook": "non_linear_regression.ipynb", "seed": args.seed, "steps": args.steps,
       "baseline_steps": args.baseline_steps, "batch_size": config.bs, "baseline_batch_size": config.bs_gd_train,
       "legacy_prng": args.prng_era, "baseline_s": round(baseline_s), "baseline_curve": baseline_curve, "curve": [],
       "complete": False}
train_s = 0.0
start = time.time()
for step in range(args.steps + 1):
    if step % args.every == 0 or step == args.steps:
        train_s += time.time() - start
        row = {"step": step, **scores(train_state, params_c, eval_rng, eval_data)}
        out["curve"].append(row)
        print(f"seed {args.seed} step {step} trained {row['loss_trained']:.6f} baseline {row['loss_meta']:.6f} "
              f"trained/baseline {row['loss_trained'] / row['loss_meta']:.3f} cos {row['cos_sensitivity']:.4f} "
              f"pred diff {row['pred_diff']:.5f} ({train_s:.0f} s)", flush=True)
        if args.out:
            out["provenance"] = provenance(args.authors_dir, started, baseline_s + train_s, args.prng_era)
            write_json(args.out, out)
        start = time.time()
    if step == args.steps:
        break
    rng, data_rng = jax.random.split(data_rng, 2)
    train_state, _ = T.update(train_state, draw(rng, config.bs), optimiser)

# The final models: the notebook's 2048 test tasks, and 10 000 fresh ones.
test_rng = jax.random.fold_in(eval_rng, 1)
out["final"] = {"notebook_test_set": out["curve"][-1],
                "fresh_test_set": scores(train_state, params_c, eval_rng, draw(test_rng, args.n_test))}

# Their "Visualize functions before and after GD / SA layer" cell.
rng_f, _ = jax.random.split(eval_rng, 2)
preds_c, data_f = T.test_sin(params_c, rng_f, True)
preds_tr, _ = T.test_sin(train_state.params, rng_f, False)
phase, amp = (float(np.asarray(v).ravel()[0]) for v in data_f[2])
grid = np.arange(-5, 5, 0.1)
out["functions"] = {
    "phase": phase, "amplitude": amp,
    "context_x": np.asarray(data_f[0][0][:-1, 0]).tolist(), "context_y": np.asarray(data_f[0][0][:-1, 1]).tolist(),
    "query_x": np.asarray(data_f[1][:, 0]).tolist(), "query_y": np.asarray(data_f[1][:, 1]).tolist(),
    "meta_init": np.asarray(preds_c[0]).tolist(), "meta": np.asarray(preds_c[-1]).tolist(),
    "trained_init": np.asarray(preds_tr[0]).tolist(), "trained": np.asarray(preds_tr[-1]).tolist(),
    "truth_x": grid.tolist(), "truth_y": (np.sin(grid + phase) * amp).tolist(),
    "about": "their test_sin: 100 queries of one task (one context), the baseline's (meta) and the trained model's "
             "prediction before the layer (init) and after it; truth = amp·sin(x + phase) on their plot's grid"}
out["complete"] = True
out["provenance"] = provenance(args.authors_dir, started, baseline_s + train_s, args.prng_era)
f = out["final"]["fresh_test_set"]
print(f"seed {args.seed} final ({args.n_test} fresh tasks): trained {f['loss_trained']:.6f} baseline "
      f"{f['loss_meta']:.6f} gap {f['rel_gap_trained_vs_meta']:+.4f} cos {f['cos_sensitivity']:.4f} function rel. RMS "
      f"{f['function_rel_rms']:.4f}; {out['provenance']['wall_s']} s", flush=True)
if args.out:
    write_json(args.out, out)
