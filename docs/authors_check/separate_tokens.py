"""The authors' separate-token run (normal_token_construct.ipynb, its Config and Training cells): x_i and (0, ..., 0,
y_i) in separate tokens, a softmax layer then a linear one. Compare with ``icl-gd run separate-tokens --preset paper
--set steps=40000`` (the claims' plan) or ``--preset paper`` (their notebook's 10 000 steps).

    python docs/authors_check/separate_tokens.py --authors-dir PATH --seed 0 --steps 40000 --out /tmp/ac/sep_tok_s0.json

Per seed, into ``--out`` (one JSON object, rewritten atomically at every evaluation so that a run cut short keeps
its curve; ``complete`` is true once the final model is scored):

- ``curve``: their test loss (``predict_test`` on the 10 000 test tasks their Training cell draws from the seed's
  key) every ``--eval-every`` steps, and ``copy_curve`` every ``--copy-every`` steps: their ``analyse_copy`` (own /
  next / other: norms of the task-mean gradient of token k's summed first-layer output, residual included, with
  respect to the data coordinates; "other" counts the neighbour k+1 too, divided by T-2, as their code sums it) on
  the first 1000 test tasks (this driver's earlier convention) and on all 10 000 (their Training cell passes all of
  ``eval_data``), beside icl-gd's copy statistic of the same model (below).
- the final model (after ``--steps`` updates): ``loss_trained``; GD by one and by two steps on the same test tasks,
  the step sizes tuned as icl-gd tunes them (``separate-tokens``: on 10 000 held-out tasks, here their data
  creator under a key folded from the test key; one step in closed form, two steps each with its own η) and, beside
  it, one step with η tuned on the test tasks themselves (a constant such as their notebook's GD line, 0.20468888,
  can only come from such a tuning: the notebook computes no GD); ``loss_zero`` (the zero predictor, the plateau);
  the relative gaps ``rel_gap_trained_vs_gd`` = (L_trained - L_GD) / L_GD and ``rel_gap_trained_vs_gd_2steps``.
- ``copy_ours``: icl-gd's copy statistic (``separate_model.copy_analysis``) of their trained first layer: per test
  task the Jacobian of the layer's update u_k (its output minus its input, residual excluded) with respect to each
  input token e_j (positions included: the layer sees data ‖ position), the Frobenius norms averaged over the first
  ``--n-copy`` test tasks (icl-gd's ``n_copy``, 64), then, over the context inputs' tokens k = 0, 2, ..., 2N-2,
  ``next`` (j = k+1), ``other_per_token`` (the mean over j ∉ {k, k+1}) and ``own``; ``ratio`` = next /
  other_per_token is vo-separate-copy's statistic.

Step numbering: step s is the model after s updates (0: the initial model). Their Training cell scores after the
update of steps 0, 500, ... (so its last point is the model after 9501 of 10 000 updates); the statistic here is the
final model's.

``--prng-era`` draws every key as JAX did before 0.5 (``jax_threefry_partitionable`` False; the notebooks ran on
jax 0.3.25), so that their test set is the one their notebook drew.
"""
import math
import time

import numpy as np

from _authors import import_authors, parser, provenance, set_prng_era, set_separate_tokens, write_json

NOTEBOOK_GD = 0.20468888  # normal_token_construct.ipynb, "Visualize Loss": losses_gd_list = [0.20468888]

p = parser(__doc__)
p.add_argument("--steps", type=int, default=10_000, help="training steps (their notebook: 10 000; the claims' "
               "plan: 40 000)")
p.add_argument("--eval-every", type=int, default=500, help="test loss every this many steps (theirs: 500)")
p.add_argument("--copy-every", type=int, default=2500, help="copy analyses every this many steps")
p.add_argument("--n-copy", type=int, default=64, help="test tasks of icl-gd's copy statistic (its n_copy)")
p.add_argument("--n-tune", type=int, default=10_000, help="held-out tasks on which GD's step sizes are tuned")
p.add_argument("--no-copy-all", action="store_true", help="their analyse_copy on the first 1000 test tasks only, "
               "not also on all 10 000")
p.add_argument("--prng-era", action="store_true", help="JAX's PRNG as before 0.5 (jax_threefry_partitionable "
               "False), as their notebooks drew under jax 0.3.25")
p.add_argument("--out", help="write the run's JSON object here (atomically)")
args = p.parse_args()
set_prng_era(args.prng_era)
config, T = import_authors(args.authors_dir)

import haiku as hk  # noqa: E402  (after the PRNG era is set)
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from src.attn import create_pos_encoding  # noqa: E402  (their module, importable once their folder is on the path)
from src.data import create_reg_data  # noqa: E402
from src.transformer import Transformer  # noqa: E402

started = time.time()
# Their Config cell (two layers, softmax first, one head).
set_separate_tokens(config)
config.local_usage, config.training_steps = True, args.steps
config.seed = args.seed
T.change_dataloader()
make = T.data_creator
N, D_X = config.dataset_size, config.input_size


def draw(key, n):
    return make(jax.random.split(key, num=n), D_X, N, 0, 1, 1)


# ---------------------------------------------------------------------------------------------------- GD (numpy)
def gd_terms(data):
    """Per task, in float64: a = x_q·Xᵀy / N (one GD step's prediction per unit η from w = 0), c = x_q·XᵀX Xᵀy / N²
    (two steps: ŷ = (η₁ + η₂) a - η₁η₂ c), and y_q."""
    tokens = np.asarray(data[0], dtype=np.float64)
    x, y, xq = tokens[:, 0:2 * N:2, :], tokens[:, 1:2 * N:2, -1], tokens[:, 2 * N, :]
    xty = np.einsum("bnd,bn->bd", x, y)
    a = np.einsum("bd,bd->b", xq, xty) / N
    c = np.einsum("bd,bnd,bne,be->b", xq, x, x, xty) / N ** 2
    return a, c, np.asarray(data[1], dtype=np.float64)[:, -1]


def loss_of(prediction, target):
    return float(0.5 * np.mean((prediction - target) ** 2))  # their compute_loss


def tune_one(a, yq):
    """η minimising one step's mean loss (closed form)."""
    return float(np.sum(a * yq) / np.sum(a * a))


def tune_two(a, c, yq):
    """(η₁, η₂) minimising two steps' mean loss: least squares in s = η₁ + η₂ and p = η₁η₂; where that (s, p) has no
    real (η₁, η₂) (s² < 4p), the best shared step (η₁ = η₂, a cubic's real roots)."""
    A = np.stack([a, -c], axis=1)
    (s, pr), *_ = np.linalg.lstsq(A, yq, rcond=None)
    if s * s >= 4 * pr:
        root = math.sqrt(s * s - 4 * pr)
        return sorted([(s + root) / 2, (s - root) / 2], reverse=True)
    # loss(η) ∝ Σ (2ηa - η²c - y)²; its derivative: a cubic in η
    coeffs = [4 * np.sum(c * c), -12 * np.sum(a * c), 8 * np.sum(a * a) + 4 * np.sum(c * yq), -4 * np.sum(a * yq)]
    roots = [r.real for r in np.roots(coeffs) if abs(r.imag) < 1e-9]
    best = min(roots, key=lambda e: np.sum((2 * e * a - e * e * c - yq) ** 2))
    return [float(best), float(best)]


def notebook_constant_check():
    """One GD step on the test tasks of their constructed_token_setup notebook (create_reg_data under PRNGKey(5),
    10 000 tasks, tokens (x_i, y_i)), η from their scan_lrs grid (0.001..25 by 0.1) scored on those tasks: under
    --prng-era this gives their separate-token notebook's GD line (NOTEBOOK_GD), which is therefore that notebook's
    one-layer GD loss, not GD on the separate-token test tasks."""
    data = jax.vmap(create_reg_data, in_axes=(0, None, None, None, None, None))(
        jax.random.split(jax.random.PRNGKey(5), num=10000), D_X, N, 0, 1, 1)
    t = np.asarray(data[0], dtype=np.float64)
    yq = np.asarray(data[1], dtype=np.float64)[:, -1]
    a_c = np.einsum("bd,bnd,bn->b", t[:, N, :-1], t[:, :N, :-1], t[:, :N, -1]) / N
    grid = np.arange(0.001, 25, 0.1)
    losses = [loss_of(e * a_c, yq) for e in grid]
    best = int(np.argmin(losses))
    return {"constructed_test_set_gd_eta_grid": float(grid[best]), "constructed_test_set_gd_loss": losses[best]}


# ---------------------------------------------------------------------------------------------------- icl-gd's copy
class _FirstLayerUpdate(Transformer):
    """Their first layer (``trans_block`` 0: softmax attention, residual) as a function of its input h (T, data ‖
    position): the update h' - h. Named as their Transformer, so it reads the trained parameters."""

    def __call__(self, h):
        self.w_init = hk.initializers.VarianceScaling(self.init_scale)
        self.model_size = h.shape[-1]
        out, _ = self.trans_block(h, 0)
        return out - h


def _first_layer(h):
    return _FirstLayerUpdate(
        num_heads=config.num_heads, key_size=config.key_size, num_layers=config.num_layers,
        embedding_size=config.emb_size, in_context_length=2 * N + 1, only_attention=config.att_only_trans,
        dropout_rate=0.0, use_pe=config.pos_enc, pe_size=config.pos_enc_size, concat_pe=config.concat_pos_enc,
        use_layer_norm=config.layer_norm, use_bias_p=config.use_bias, deq=config.deq, y_update=config.y_update,
        use_softmax=config.use_softmax, use_non_lin_mix=config.use_non_lin_mix, first_layer_sm=config.first_layer_sm,
        init_scale=config.init_scale, dampening=config.dampening, clip=config.clip, sum_norm=config.sum_norm,
        include_query=config.include_query, name="transformer")(h)


first_layer = hk.transform(_first_layer)
positions = create_pos_encoding(2 * N + 1, config.pos_enc_size)


@jax.jit
def _jacobian_norms(params, rng, tokens):
    """(B, T, T): ‖∂u_k/∂e_j‖_F per task, e = data ‖ position."""
    h = jnp.concatenate([tokens, jnp.broadcast_to(positions, tokens.shape[:1] + positions.shape)], axis=-1)
    J = jax.vmap(jax.jacrev(lambda e: first_layer.apply(params, rng, e[None])[0]))(h)  # (B, T, D, T, D)
    return jnp.sqrt(jnp.sum(J ** 2, axis=(2, 4))), h


def copy_ours(params, rng, tokens):
    """icl-gd's copy statistic of their first layer on ``tokens`` (``separate_model.copy_analysis`` at the context
    inputs' tokens)."""
    norms, _ = _jacobian_norms(params, rng, tokens)
    norms = np.asarray(norms, dtype=np.float64).mean(0)  # (T, T), mean over tasks
    T_ = norms.shape[0]
    own, nxt, other = [], [], []
    for k in range(0, 2 * N, 2):
        mask = np.ones(T_, dtype=bool)
        mask[[k, k + 1]] = False
        own.append(norms[k, k]), nxt.append(norms[k, k + 1]), other.append(norms[k, mask].mean())
    own, nxt, other = float(np.mean(own)), float(np.mean(nxt)), float(np.mean(other))
    return {"own": own, "next": nxt, "other_per_token": other, "ratio": nxt / other}


def check_first_layer(params, rng, tokens):
    """The largest gap between this first layer's output (h + update) and their model's (``predict_stack`` with
    ana_copy: the first layer's output at the context tokens)."""
    _, h = _jacobian_norms(params, rng, tokens[:2])
    mine = h + jax.vmap(lambda e: first_layer.apply(params, rng, e[None])[0])(h)
    theirs = T.predict_stack.apply(params, rng, tokens[:2], False)[0]
    return float(jnp.max(jnp.abs(mine[:, :-1] - theirs)))


# ---------------------------------------------------------------------------------------------------- their run
# Their Training cell (one seed).
optimiser, train_state, _, rng = T.init()
rng, data_rng, eval_rng = jax.random.split(rng, 3)
eval_data = draw(eval_rng, 10000)
tune_data = draw(jax.random.fold_in(eval_rng, 1), args.n_tune)  # held-out tasks for GD's step sizes

a, c, yq = gd_terms(eval_data)
a_t, c_t, yq_t = gd_terms(tune_data)
eta_1, eta_1_test, eta_2 = tune_one(a_t, yq_t), tune_one(a, yq), tune_two(a_t, c_t, yq_t)
gd = {
    "eta_gd": eta_1, "loss_gd": loss_of(eta_1 * a, yq),
    "eta_gd_2steps": eta_2, "loss_gd_2steps": loss_of(sum(eta_2) * a - eta_2[0] * eta_2[1] * c, yq),
    "eta_gd_tuned_on_test": eta_1_test, "loss_gd_tuned_on_test": loss_of(eta_1_test * a, yq),
    "loss_zero": loss_of(0 * yq, yq), "notebook_gd_constant": NOTEBOOK_GD, **notebook_constant_check(),
    "n_tune": args.n_tune, "tuning": "η in closed form on n_tune held-out tasks (their data creator under "
    "jax.random.fold_in(test key, 1)); two steps each with its own η; GD from w = 0 on the context, float64",
}
print(f"seed {args.seed} GD: one step η {eta_1:.4f} loss {gd['loss_gd']:.6f}; two steps η {eta_2[0]:.4f}, "
      f"{eta_2[1]:.4f} loss {gd['loss_gd_2steps']:.6f}; one step η tuned on the test tasks {eta_1_test:.4f} loss "
      f"{gd['loss_gd_tuned_on_test']:.8f}; zero predictor {gd['loss_zero']:.5f}; their notebook's GD line "
      f"{NOTEBOOK_GD} against one GD step on their constructed-token test tasks {gd['constructed_test_set_gd_loss']:.8f} "
      f"(grid η {gd['constructed_test_set_gd_eta_grid']:.3f})", flush=True)

out = {"driver": "separate_tokens", "notebook": "normal_token_construct.ipynb", "seed": args.seed,
       "steps": args.steps, "batch_size": config.bs, "n_test": 10000, "n_copy": args.n_copy,
       "legacy_prng": args.prng_era, **gd, "curve": [], "copy_curve": [], "complete": False}
train_s = 0.0


def analyse_copies(step):
    row = {"step": step}
    for name, n in (("first_1000", 1000), ("all_10000", 10000)):
        if n == 10000 and args.no_copy_all:
            continue
        own, nxt, other = T.analyse_copy(tuple(x[:n] for x in eval_data), train_state, eval_rng)
        row[f"authors_{name}"] = {"own": float(own), "next": float(nxt), "other": float(other)}
    row["ours"] = copy_ours(train_state.params, eval_rng, eval_data[0][:args.n_copy])
    return row


start = time.time()
for step in range(args.steps + 1):
    if step % args.eval_every == 0 or step == args.steps:
        train_s += time.time() - start
        loss, _, _ = T.predict_test.apply(train_state.params, eval_rng, eval_data, False)
        out["curve"].append({"step": step, "loss": float(loss)})
        line = f"seed {args.seed} step {step} loss {float(loss):.5f} ({train_s:.0f} s training)"
        if step % args.copy_every == 0 or step == args.steps:
            row = analyse_copies(step)
            out["copy_curve"].append(row)
            theirs, ours = row["authors_first_1000"], row["ours"]
            line += (f" copy (theirs, 1000 tasks) own {theirs['own']:.3f} next {theirs['next']:.3f} other "
                     f"{theirs['other']:.3f}; ours next/other {ours['ratio']:.2f}")
            if args.out:
                out["provenance"] = provenance(args.authors_dir, started, train_s, args.prng_era)
                write_json(args.out, out)
        print(line, flush=True)
        start = time.time()
    if step == args.steps:
        break
    rng, data_rng = jax.random.split(data_rng, 2)
    train_state, _ = T.update(train_state, draw(rng, config.bs), optimiser)

final = out["copy_curve"][-1]
loss_trained = out["curve"][-1]["loss"]
out.update({
    "loss_trained": loss_trained,
    "rel_gap_trained_vs_gd": (loss_trained - gd["loss_gd"]) / gd["loss_gd"],
    "rel_gap_trained_vs_gd_2steps": (loss_trained - gd["loss_gd_2steps"]) / gd["loss_gd_2steps"],
    "rel_gap_trained_vs_gd_tuned_on_test": (loss_trained - gd["loss_gd_tuned_on_test"]) / gd["loss_gd_tuned_on_test"],
    "copy_ours": final["ours"], "copy_authors": final["authors_first_1000"],
    "copy_authors_all": final.get("authors_all_10000"),
    "first_layer_check_max_abs": check_first_layer(train_state.params, eval_rng, eval_data[0]),
    "complete": True,
})
out["provenance"] = provenance(args.authors_dir, started, train_s, args.prng_era)
print(f"seed {args.seed} final: trained {loss_trained:.5f}, (L - L_GD)/L_GD {out['rel_gap_trained_vs_gd']:+.4f}, "
      f"vs two steps {out['rel_gap_trained_vs_gd_2steps']:+.4f}; copy (ours) next/other {final['ours']['ratio']:.3f}; "
      f"first layer re-expressed to {out['first_layer_check_max_abs']:.1e}; {out['provenance']['wall_s']} s", flush=True)
if args.out:
    write_json(args.out, out)
