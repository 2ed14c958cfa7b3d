"""Time the authors' own training step (their ``src/``, their notebooks' settings) for one set-up, on request:
the JAX side of ``benchmarks/bench_vs_authors.py``, which starts one of these per set-up and interleaves them with
icl-gd's steps. Reads a number of steps per line on stdin, answers one JSON line {"cpu_s", "wall_s"} per request
(CPU seconds of the whole process, XLA's threads included). Step = sampling their batch + their update.

    python docs/authors_check/bench_steps.py --authors-dir PATH --setup single|separate3|tokens|sine
"""
import json
import sys
import time

import jax

from _authors import import_authors, parser

p = parser(__doc__)
p.add_argument("--setup", choices=("single", "separate3", "tokens", "sine"), required=True)
args = p.parse_args()
config, T = import_authors(args.authors_dir)
config.local_usage, config.seed = True, args.seed


def regression(K: int) -> None:
    """constructed_token_setup.ipynb (as docs/authors_check/constructed_tokens.py sets it), K separate layers."""
    config.deq = config.gd_deq = False
    config.att_only_trans, config.pre_train_gd, config.train_gd_whitening, config.train_gd_lr = True, True, True, True
    config.use_bias, config.include_query, config.distract_size = False, False, 0
    config.use_softmax, config.first_layer_sm, config.use_non_lin_mix = False, False, False
    config.widening_factor, config.layer_norm, config.out_proj, config.in_proj, config.adam = 4, False, False, False, True
    config.dataset_size, config.input_size, config.key_size = 10, 10, 11
    config.num_layers, config.num_heads = K, 1
    config.grad_clip_value = config.grad_clip_value_gd = 10 if K > 2 else 0.001
    config.lr = config.gd_lr = 0.0005 if K > 3 else 0.001
    config.wd, config.init_scale = 0.0, 0.002 / K
    config.bs, config.bs_gd_train, config.dampening = 2048, 512, 1.0
    config.clip = 10 if K > 3 else 0
    config.dropout_rate, config.y_update, config.input_range = 0.0, False, 1
    config.pos_enc, config.pos_enc_size, config.concat_pos_enc, config.analyse = False, 20, False, True
    config.cycle_data, config.emb_size = 0, 11


def separate_tokens() -> None:
    """normal_token_construct.ipynb (as docs/authors_check/separate_tokens.py sets it)."""
    config.classic_token_const = True
    config.use_softmax, config.first_layer_sm, config.use_non_lin_mix = False, True, False
    config.deq, config.att_only_trans, config.layer_norm = False, True, False
    config.out_proj, config.in_proj, config.adam, config.pre_train_gd = False, False, True, True
    config.dataset_size, config.input_size, config.num_layers, config.num_heads = 10, 10, 2, 1
    config.grad_clip_value, config.lr, config.wd = 10, 0.001, 0.0
    config.init_scale = 0.02 / config.num_layers
    config.bs, config.dropout_rate, config.y_update, config.input_range, config.gd_deq = 2048, 0.0, False, 1, True
    config.pos_enc, config.pos_enc_size, config.concat_pos_enc, config.key_size = True, 10, True, 20
    config.analyse, config.ana_copy = False, True


def sine() -> None:
    """non_linear_regression.ipynb (as docs/authors_check/sine.py sets it)."""
    config.size_distract = 0
    config.use_softmax, config.non_linear_reg_task = False, True
    config.deq, config.gd_deq = True, True
    config.pre_train_gd, config.train_gd_whitening, config.train_gd_lr = True, False, True
    config.layer_norm, config.out_proj, config.in_proj, config.adam = False, False, False, True
    config.dataset_size, config.input_size, config.key_size = 10, 39, 40
    config.num_layers, config.num_heads = 1, 1
    config.grad_clip_value, config.grad_clip_value_gd = 100, 100
    config.lr, config.wd = 0.001, 0.0
    config.init_scale = 0.002 / config.num_layers
    config.bs, config.bs_gd_train, config.gd_lr = 2048, 2048, 0.0003
    config.dropout_rate, config.y_update, config.input_range = 0.0, False, 10
    config.analyse, config.input_mlp, config.input_mlp_out_dim = True, True, 40
    config.widening_factor, config.sum_norm, config.in_proj, config.emb_size = 4, False, True, 40


{"single": lambda: regression(1), "separate3": lambda: regression(3), "tokens": separate_tokens,
 "sine": sine}[args.setup]()
T.change_dataloader()


def batch(rng, n):
    return T.data_creator(jax.random.split(rng, num=n), config.input_size, config.dataset_size,
                          config.size_distract, config.input_range, config.weight_scale)


optimiser, train_state, _, rng = T.init()
rng, data_rng = jax.random.split(rng, 2)
steps = []  # callables, one training step each; sine: their trained model's step and their baseline's step
state = {"train": train_state, "data_rng": data_rng}


def model_step() -> None:
    rng, state["data_rng"] = jax.random.split(state["data_rng"], 2)
    state["train"], _ = T.update(state["train"], batch(rng, config.bs), optimiser)
    return state["train"]


steps.append(model_step)
if args.setup == "sine":  # their baseline's step: the body of their pre_train_gd_hps loop, its evaluation aside
    import jax.numpy as jnp
    import optax
    from src.data import create_weights

    eval_rng = jax.random.PRNGKey(10)
    gd_opt = optax.chain(optax.clip_by_global_norm(config.grad_clip_value_gd), optax.adam(config.gd_lr, b1=0.9, b2=0.999))
    state["gd"] = create_weights(config.input_size, 1, config.dataset_size, 0.1,
                                 jnp.ones([1, 1, config.input_size]) * 0.0, lin_diag=False, gd_deq=config.gd_deq,
                                 num_layers=config.num_layers, input_mlp_rnd=eval_rng)
    state["gd_opt"], state["gd_rng"] = gd_opt.init(state["gd"]), eval_rng

    def baseline_step():
        data_rng, state["gd_rng"] = jax.random.split(state["gd_rng"], 2)
        data = batch(data_rng, config.bs_gd_train)
        loss_and_grad = jax.value_and_grad(jax.jit(T.loss_fn.apply, static_argnums=3))
        _, gradients = loss_and_grad(state["gd"], state["gd_rng"], data, True)
        updates, state["gd_opt"] = gd_opt.update(T.gradient_manipulation(gradients, config.key_size), state["gd_opt"])
        state["gd"] = optax.apply_updates(state["gd"], updates)
        return state["gd"]

    steps.append(baseline_step)


def run(n: int) -> None:
    out = None
    for _ in range(n):
        out = [step() for step in steps]
    jax.block_until_ready(out)


run(3)  # compile
print(json.dumps({"ready": True}), flush=True)
for line in sys.stdin:
    n = int(line)
    cpu, wall = time.process_time(), time.perf_counter()
    run(n)
    print(json.dumps({"cpu_s": time.process_time() - cpu, "wall_s": time.perf_counter() - wall}), flush=True)
