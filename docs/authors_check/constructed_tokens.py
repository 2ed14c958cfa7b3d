"""The authors' concatenated-token runs (constructed_token_setup.ipynb, its Config and Training cells, and the
"iteratively applying a single layer" cell): one LSA layer, or a recurrent stack of K layers, trained on fresh
tasks beside GD (η scanned by their ``scan_lrs``) and, for K > 1, GD++ (their ``pre_train_gd_hps``). Prints the
test loss every 500 steps and, at the end, one JSON line holding the claims' statistics computed from their models
with the definitions of icl-gd's statistics (``icl_gd/claims/statistics.py``): compare with
``icl-gd run single-layer`` and ``icl-gd run multi-layer --set layers=K --set recurrent=true``.

    python docs/authors_check/constructed_tokens.py --authors-dir PATH --layers 1 --seed 0 --out seed0.json

Their notebook's other parameters: ``--layernorm``, ``--softmax``, ``--heads H`` (App. A.9; such a variant is compared
with GD alone), ``--n-context N`` (their ``dataset_size``; App. A.10: a recurrent stack's trained (η, γ) is read
off its layer as icl-gd reads it, ``trained_eta`` / ``trained_gamma``) and ``--fixed-tasks M`` (their ``cycle_data``
= 1 with ``bs`` = M: one fixed batch, App. A.12). ``--separate`` stacks K untied layers (their 50 000 training and
30 000 GD++ steps): ``--gdpp-cache`` / ``--tune-only`` tune GD++ once for every seed, beside a seed's training.
Every linear run also scores App. A.2's unseen input laws (their ``create_ood_data``, ``ood_gap_laws_*``).

What is theirs and what is ours here:
- theirs (called, not copied): data (``create_reg_data``), model, training step, ``scan_lrs`` (GD's η on a 0.1 grid,
  scored on their 10 000 test tasks), ``create_weights`` (Prop. 1 weights), ``pre_train_gd_hps`` (GD++'s η, γ by
  Adam from the grid-scanned start, 1000 steps of 512 tasks for recurrent stacks), ``analyse`` (prediction and
  sensitivity alignment), ``compute_ood_loss`` / ``ood`` (scaled inputs and weights), ``predict_test``'s per-layer
  losses (the damped roll-out, as their cell does it: 50 applications, λ = 0.75, y slots only).
- their notebook's logic, re-expressed (it lives in the notebook, not in ``src/``): the seed loop, which tunes GD++
  once and, for seed 0 only, continues training data from the key ``pre_train_gd_hps`` returns (so a lone seed here
  sees what it sees in their three-seed notebook run); and the interpolation of trained and constructed weights
  (their "Logic how to interpolate weights" cell: products QKᵀ and V·P, the trained QK divided by the mean of its
  first d diagonal entries and PV multiplied by it, then averaged with GD's).
- ours: which numbers are reduced to which statistic. OOD at icl-gd's sweep points (input scale 0.5 .. 2 by 0.25,
  weight scale 0.5, 1, 2, .. 5) on ``--n-ood`` tasks (icl-gd's n_ood = 2000), the largest relative gap; the same on
  their notebook's grid (1000 tasks, 51 and 46 points) is printed beside it. The statistics are those of the final
  model (after all steps); their notebook's curves end at step 4900.
"""
import json
import math
import os
import pickle
import platform
import subprocess
import time
from datetime import datetime, timezone
from importlib import metadata

import numpy as np

from _authors import import_authors, parser, set_constructed_tokens

p = parser(__doc__)
p.add_argument("--layers", type=int, default=1, help="K (their num_layers); recurrent (tied) unless --separate")
p.add_argument("--separate", action="store_true", help="K separate layers (their recurrent_Transformer = False)")
p.add_argument("--steps", type=int, default=None, help="training steps (theirs: 5000 recurrent, 50 000 separate)")
p.add_argument("--gd-steps", type=int, default=None, help="GD++ tuning steps (theirs: 1000 recurrent, 30 000 separate)")
p.add_argument("--n-context", type=int, default=10, help="N, context pairs per task (their dataset_size; theirs: 10, "
               "and 10, 25, 50, 100 for App. A.10's γ against N)")
p.add_argument("--layernorm", action="store_true", help="their LayerNorm (config.layer_norm): before the layer of a "
               "recurrent stack, between separate layers (App. A.9, Fig. 14)")
p.add_argument("--softmax", action="store_true", help="softmax attention (their use_softmax: logits / √key size; App. "
               "A.9, Fig. 12)")
p.add_argument("--heads", type=int, default=1, help="attention heads (their num_heads), each of key size 11")
p.add_argument("--fixed-tasks", type=int, default=0, help="M > 0: train on one fixed batch of M tasks (their "
               "cycle_data = 1 with bs = M: the data key is reset every step; App. A.12, Fig. 16); 0: fresh tasks")
p.add_argument("--gd-eta", type=float, default=None, help="GD's η instead of their scan's (a diagnosis, e.g. icl-gd's "
               "6.039 for one layer: how much of a gap is the reference's η; not a record of their set-up)")
p.add_argument("--n-ood", type=int, default=2000, help="tasks per OOD point at icl-gd's sweep points")
p.add_argument("--out", default=None, help="also write the JSON line to this file")
p.add_argument("--gdpp-cache", default=None, help="directory keeping GD++ as pre_train_gd_hps tunes it per set-up, "
               "with the data key it returns: the tuning depends on their test key alone (their notebook tunes once "
               "for all seeds), and its 30 000 Adam steps for separate layers take over an hour on this CPU")
p.add_argument("--tune-only", action="store_true", help="tune GD++ into --gdpp-cache and exit: run it beside a "
               "seed other than 0, which then trains first and reads GD++ from the cache at the end")
p.add_argument("--scan-cache", default=None, help="JSON file keeping scan_lrs' results per set-up: the scan depends on "
               "their fixed test key alone (PRNGKey(5)), so every seed gets the same η; 250 unjitted evaluations of "
               "10 000 tasks take minutes on CPU")
p.add_argument("--no-gdpp", action="store_true", help="skip GD++ (a variant's claims compare with GD alone, e.g. "
               "LayerNorm between two separate layers): seeds other than 0 only, whose data do not depend on it")
args = p.parse_args()
if args.tune_only and not args.gdpp_cache:
    p.error("--tune-only writes into --gdpp-cache: give one")
if args.gd_eta is not None and not (math.isfinite(args.gd_eta) and args.gd_eta > 0):
    p.error(f"--gd-eta must be a positive step size, got {args.gd_eta}")
if args.fixed_tasks < 0:
    p.error(f"--fixed-tasks must be 0 or a positive task count, got {args.fixed_tasks}")
if args.no_gdpp and (args.seed == 0 or args.tune_only):
    p.error("--no-gdpp: seed 0's training data continue from GD++'s tuning in their notebook; use another seed")
config, T = import_authors(args.authors_dir)
# JAX once the arguments are read: --help (and a refused argument) needs none
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from src.data import create_weights  # noqa: E402  (their module, importable once their folder is on the path)

K, recurrent = args.layers, not args.separate
if K == 1 and not recurrent:
    raise SystemExit("--layers 1 is a single (recurrent) layer in their notebook; drop --separate")

# Their Config cell (softmax = layernorm = False, one head).
config.seed, config.local_usage = args.seed, True
set_constructed_tokens(config, K, recurrent)
config.dataset_size = args.n_context
config.layer_norm, config.use_softmax, config.num_heads = args.layernorm, args.softmax, args.heads
# A variant (App. A.9) is compared with GD alone: the linear single layer's extras (interpolation, controls, roll-out)
# and the (η, γ) read-off assume one linear head.
variant = args.layernorm or args.softmax or args.heads != 1 or args.fixed_tasks > 0
if args.fixed_tasks:
    config.cycle_data, config.bs = 1, args.fixed_tasks
config.training_steps = args.steps if args.steps is not None else (5000 if recurrent else 50_000)
config.training_steps_gd = args.gd_steps if args.gd_steps is not None else (1000 if recurrent else 30_000)
d, N = config.input_size, config.dataset_size


def make(rng, n, input_range=None, weight_scale=None):
    return T.data_creator(jax.random.split(rng, num=n), d, N, config.size_distract,
                          config.input_range if input_range is None else input_range,
                          config.weight_scale if weight_scale is None else weight_scale)


def gd_weights(lr, lin_diag=False):
    return create_weights(d, 1, N, lr, jnp.zeros([1, 1, d]), lin_diag=lin_diag, gd_deq=config.gd_deq, num_layers=K)


def test_loss(params, gd, data):
    return float(T.predict_test.apply(params, eval_rng, data, gd)[0])


# Their Training cell, one seed of its loop.
started = time.time()
eval_rng = jax.random.PRNGKey(5)
optimiser, train_state, _, rng = T.init()
untrained = train_state.params
rng, data_rng = jax.random.split(rng, 2)


def scanned_lr(lin_diag):
    """Their scan_lrs(eval_rng, lin_diag, bs=10000), read from --scan-cache when that holds this set-up."""
    # GD's scan depends on the data alone (N), not on the model's variant
    key = f"layers={K} recurrent={recurrent} lin_diag={lin_diag}" + (f" N={N}" if N != 10 else "")
    cache = {}
    if args.scan_cache and os.path.exists(args.scan_cache):
        with open(args.scan_cache) as handle:
            cache = json.load(handle)
    if key not in cache:
        cache[key] = float(T.scan_lrs(eval_rng, lin_diag=lin_diag, bs=10000)[0])
        if args.scan_cache:
            with open(args.scan_cache, "w") as handle:
                json.dump(cache, handle, indent=1)
    return cache[key]


def gdpp_cache_path():
    if not args.gdpp_cache:
        return None
    name = (f"gdpp_layers{K}_{'recurrent' if recurrent else 'separate'}_N{N}_ln{int(args.layernorm)}"
            f"_sm{int(args.softmax)}_h{args.heads}_steps{config.training_steps_gd}.pkl")
    return os.path.join(args.gdpp_cache, name)


def tuned_gdpp(lr_diag):
    """(GD++ params, the data key pre_train_gd_hps returns, whether read from --gdpp-cache): their tuning from the
    grid-scanned lin_diag start, kept per set-up (it depends on eval_rng alone)."""
    path = gdpp_cache_path()
    if path and os.path.exists(path):
        with open(path, "rb") as handle:
            cached = pickle.load(handle)
        return jax.tree_util.tree_map(jnp.asarray, cached["params"]), jnp.asarray(cached["data_key"]), True
    params, key = T.pre_train_gd_hps(eval_rng, gd_weights(lr_diag, lin_diag=True))
    if path:
        os.makedirs(args.gdpp_cache, exist_ok=True)
        with open(path + ".part", "wb") as handle:
            pickle.dump({"params": jax.tree_util.tree_map(np.asarray, params), "data_key": np.asarray(key)}, handle)
        os.replace(path + ".part", path)  # a reader never sees a half-written cache
    return params, key, False


lr_min = scanned_lr(False) if args.gd_eta is None else args.gd_eta
params_gd = gd_weights(lr_min)
params_gdpp, gdpp_cached = None, False
if K > 1 and not args.no_gdpp:
    lr_diag = scanned_lr(True)
    # Their notebook tunes GD++ once, before the seed loop, and reuses it (it depends on eval_rng alone); seed 0's
    # training data then continue from the key pre_train_gd_hps returns. Another seed's training does not depend on
    # GD++: with --gdpp-cache and no cached GD++ yet it trains first and reads GD++ at the end.
    if args.seed == 0 or args.tune_only or (gdpp_cache_path() and os.path.exists(gdpp_cache_path())):
        params_gdpp, gdpp_data_rng, gdpp_cached = tuned_gdpp(lr_diag)
        if args.seed == 0:
            data_rng = gdpp_data_rng
    if args.tune_only:
        print(f"GD++ tuned into {gdpp_cache_path()} ({time.time() - started:.0f} s)", flush=True)
        raise SystemExit(0)
elif K == 1:
    params_gdpp = params_gd
print(f"GD lr {float(lr_min):.3f} (eta/N {float(lr_min) / N:.4f}); tuning took {time.time() - started:.0f} s",
      flush=True)
eval_data = make(eval_rng, 10000)
loss_gd = test_loss(params_gd, True, eval_data)
loss_gdpp = test_loss(params_gdpp, True, eval_data) if params_gdpp is not None else math.nan
start = time.time()
original_data_rng = data_rng
for step in range(config.training_steps):
    if config.cycle_data > 0 and step % config.cycle_data == 0:  # their Training cell: a fixed cycle of batches
        data_rng = original_data_rng
    if step % 500 == 0:
        print(f"seed {args.seed} step {step} loss {test_loss(train_state.params, False, eval_data):.5f} "
              f"GD {loss_gd:.5f} GD++ {loss_gdpp:.5f} ({time.time() - start:.0f} s)", flush=True)
    rng, data_rng = jax.random.split(data_rng, 2)
    train_state, _ = T.update(train_state, make(rng, config.bs), optimiser)
train_s = time.time() - start
print(f"trained in {train_s:.0f} s", flush=True)
if params_gdpp is None and not args.no_gdpp:
    params_gdpp, _, gdpp_cached = tuned_gdpp(lr_diag)
    loss_gdpp = test_loss(params_gdpp, True, eval_data)
params = train_state.params
loss_trained = test_loss(params, False, eval_data)


def alignment(reference, state=train_state):
    cos, model_diff, pred_diff = T.analyse(eval_data, state, eval_rng, reference)
    return {"cos_sensitivity": float(cos), "sensitivity_diff": float(model_diff), "pred_diff": float(pred_diff)}


def ood_gap(reference, n_tasks):
    """icl-gd's OodGap: the largest |L_trained - L_ref| / L_ref over its input- and weight-scale points."""
    points = [(a, 1.0) for a in (0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0)] + [(1.0, w) for w in (0.5, 1, 2, 3, 4, 5)]
    gaps = []
    for ir, ws in points:
        mine = float(T.compute_ood_loss(ir, ws, eval_rng, params, False, n_tasks))
        ref = float(T.compute_ood_loss(ir, ws, eval_rng, reference, True, n_tasks))
        gaps.append(abs(mine - ref) / ref)
    return max(gaps)


def ood_gap_their_grid(reference):
    """The same on their notebook's grid (1000 tasks; inputs 0.5 .. 2 by 0.03, weights 0.5 .. 5 by 0.1)."""
    ir_t, ws_t, ir_ref, ws_ref, _ = T.ood(train_state, eval_rng, reference, 1000)
    return float(max(jnp.max(jnp.abs(ir_t - ir_ref) / ir_ref), jnp.max(jnp.abs(ws_t - ws_ref) / ws_ref)))


def ood_gap_laws(reference, n_tasks):
    """icl-gd's OodGap over its input_law_mixture sweep: their create_ood_data (each task's inputs exponential,
    normal or Laplace, divided by the context's Frobenius norm, times α) at α = 0.5, 1, 2, 3, 4, 5, by their
    compute_other_d_loss on ``n_tasks`` tasks."""
    gaps = []
    for alpha in (0.5, 1.0, 2.0, 3.0, 4.0, 5.0):
        mine = float(T.compute_other_d_loss(alpha, config.weight_scale, eval_rng, params, False, n_tasks))
        ref = float(T.compute_other_d_loss(alpha, config.weight_scale, eval_rng, reference, True, n_tasks))
        gaps.append(abs(mine - ref) / ref)
    return max(gaps)


def ood_gap_laws_their_grid(reference):
    """The same on their ood_other_d's input-scale grid (0.5 .. 5 by 0.05, 500 tasks, Fig. 6's right columns)."""
    ir_t, _, ir_ref, _, _ = T.ood_other_d(train_state, eval_rng, reference)
    return float(jnp.max(jnp.abs(ir_t - ir_ref) / ir_ref))


print(f"final evaluation ({time.time() - started:.0f} s so far)", flush=True)


def products(params):
    """(QK, PV) of their one attention layer in ``params``: query·keyᵀ and value·linear, their notebook's products."""
    layer = layer_params_of(params)
    return layer["query"]["w"] @ layer["key"]["w"].T, layer["value"]["w"] @ layer["linear"]["w"]


def read_off(params):
    """(η, γ) of one of their layers, by icl-gd's read-off (``icl_gd.regression.gd.gdpp_params_from_weights``):
    their query(x) = x W_q, so the score product e_jᵀ W_q W_kᵀ e_i is icl-gd's QK = W_Q^T W_K, and the value path
    x W_v W_l is icl-gd's (P W_V)ᵀ (its diagonal is the same); b = mean diag of QK's x-block, η = -N b · mean diag
    of PV's y-block, γ = -b · mean diag of PV's x-block."""
    QK, PV = (np.asarray(m) for m in products(params))
    b = float(np.mean(np.diag(QK)[:d]))
    return -N * b * float(np.mean(np.diag(PV)[d:])), -b * float(np.mean(np.diag(PV)[:d]))


def layer_params_of(params):
    """Their recurrent stack's one layer: its query, key, value and linear weights by name."""
    heads = {k.rsplit("/", 1)[-1]: v for k, v in params.items() if "multi_head_attention" in k}
    if set(heads) != {"query", "key", "value", "linear"}:
        raise SystemExit(f"expected one attention layer's query/key/value/linear, found {sorted(params)}")
    return heads


out = {"layers": K, "recurrent": recurrent, "seed": args.seed, "steps": config.training_steps, "n_context": N,
       "layernorm": args.layernorm, "softmax": args.softmax, "heads": args.heads, "fixed_tasks": args.fixed_tasks,
       "gd_lr": float(lr_min), "gd_lr_scanned": args.gd_eta is None, "loss_trained": loss_trained, "loss_gd": loss_gd,
       "loss_rel_gap_trained_vs_gd": (loss_trained - loss_gd) / loss_gd,
       **{k: v for k, v in alignment(params_gd).items()},
       "ood_gap_gd": ood_gap(params_gd, args.n_ood), "ood_gap_gd_their_grid": ood_gap_their_grid(params_gd)}
if recurrent and not variant:
    out["trained_eta"], out["trained_gamma"] = read_off(params)
if not variant:  # App. A.2, Fig. 6 (right columns): input laws never seen in training
    out.update({"ood_gap_laws_gd": ood_gap_laws(params_gd, args.n_ood),
                "ood_gap_laws_gd_their_grid": ood_gap_laws_their_grid(params_gd)})
if K > 1 and not args.no_gdpp:
    vs_gdpp = alignment(params_gdpp)
    out.update({"gdpp_steps": config.training_steps_gd, "gdpp_from_cache": gdpp_cached, "loss_gdpp": loss_gdpp,
                "loss_rel_gap_trained_vs_gdpp": (loss_trained - loss_gdpp) / loss_gdpp,
                **{f"{k}_gdpp": v for k, v in vs_gdpp.items()},
                "ood_gap_gdpp": ood_gap(params_gdpp, args.n_ood), "ood_gap_gdpp_their_grid": ood_gap_their_grid(params_gdpp)})
    if not variant:
        out.update({"ood_gap_laws_gdpp": ood_gap_laws(params_gdpp, args.n_ood),
                    "ood_gap_laws_gdpp_their_grid": ood_gap_laws_their_grid(params_gdpp)})
elif not variant:
    # Interpolation: their notebook cell's averaging of the gauge-fixed products (see the module docstring).
    prefix = "Transformer_gd/multi_head_attention/"
    QK, PV = products(params)
    scale = float(np.mean([QK[a, a] for a in range(QK.shape[0] - 1)]))
    QK_gd, PV_gd = products(params_gd)
    eye = jnp.identity(QK.shape[0])
    interpolated = {prefix + "query": {"w": (QK / scale + QK_gd) / 2}, prefix + "key": {"w": eye},
                    prefix + "value": {"w": eye}, prefix + "linear": {"w": (PV * scale + PV_gd) / 2}}
    loss_interpolated = test_loss(interpolated, True, eval_data)
    # Controls (icl-gd's vo-single-controls): GD with η halved and doubled, and the untrained layer, against GD.
    untrained_state = train_state._replace(params=untrained)
    out.update({"loss_interpolated": loss_interpolated,
                "interpolated_rel_gap_vs_gd": abs(loss_interpolated - loss_gd) / loss_gd,
                "trained_vs_gd_eta_half_pred_diff": alignment(gd_weights(lr_min * 0.5))["pred_diff"],
                "trained_vs_gd_eta_x2_pred_diff": alignment(gd_weights(lr_min * 2.0))["pred_diff"],
                "untrained_pred_diff": alignment(params_gd, untrained_state)["pred_diff"]})
    out["controls_ratio"] = out["pred_diff"] / min(out["trained_vs_gd_eta_half_pred_diff"],
                                                   out["trained_vs_gd_eta_x2_pred_diff"], out["untrained_pred_diff"])
    # Their roll-out cell: 50 applications with dampening 0.75 on the y slots; GD with step 0.75 η as long.
    config.dampening, config.num_layers, config.y_update = 0.75, 50, True
    gd_50 = create_weights(d, 1, N, lr_min * 0.75, jnp.zeros([1, 1, d]), lin_diag=False, gd_deq=True, num_layers=50)
    rollout_gd = [float(v) for v in T.predict_test.apply(gd_50, eval_rng, eval_data, True)[2]]
    rollout_tr = [float(v) for v in T.predict_test.apply(params, eval_rng, eval_data, False)[2]]
    config.dampening, config.num_layers, config.y_update = 1.0, K, False
    finite = all(math.isfinite(v) for v in rollout_gd + rollout_tr)
    out.update({"rollout_loss_trained": rollout_tr, "rollout_loss_gd": rollout_gd,
                "rollout_gap": max(abs(t - g) / g for t, g in zip(rollout_tr, rollout_gd)) if finite else math.inf,
                "rollout_rise": max((b - a) / a for c in (rollout_tr, rollout_gd) for a, b in zip(c, c[1:]))
                if finite else math.inf})

commit = subprocess.run(["git", "-C", str(args.authors_dir), "rev-parse", "HEAD"], capture_output=True, text=True)
out["provenance"] = {
    "commit": commit.stdout.strip() or "not a git checkout: see the snapshot's commit",
    "versions": ", ".join(f"{m} {metadata.version(m)}" for m in ("jax", "jaxlib", "dm-haiku", "optax")),
    "python": platform.python_version(), "device": jax.default_backend(),
    "date": datetime.now(timezone.utc).strftime("%Y-%m-%d"), "train_s": round(train_s), "wall_s": round(time.time() - started)}
line = json.dumps(out)
print(line, flush=True)
if args.out:
    with open(args.out, "w") as handle:
        handle.write(line + "\n")
