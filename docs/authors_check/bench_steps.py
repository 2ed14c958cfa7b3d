"""Time the authors' own training step (their ``src/``, their notebooks' settings) for one set-up, on request:
the JAX side of ``benchmarks/bench_vs_authors.py``, which starts one of these per set-up and interleaves them with
icl-gd's steps. Reads a number of steps per line on stdin, answers one JSON line {"cpu_s", "wall_s"} per request
(CPU seconds of the whole process, XLA's threads included). Step = sampling their batch + their update.

    python docs/authors_check/bench_steps.py --authors-dir PATH --setup single|separate3|tokens|sine
"""
import json
import sys
import time

from _authors import import_authors, parser, set_constructed_tokens, set_separate_tokens, set_sine

p = parser(__doc__)
p.add_argument("--setup", choices=("single", "separate3", "tokens", "sine"), required=True)
args = p.parse_args()
config, T = import_authors(args.authors_dir)
# JAX once the arguments are read: --help (and a refused argument) needs none
import jax  # noqa: E402
config.local_usage, config.seed = True, args.seed


# their notebooks' settings (constructed_token_setup with K separate layers, normal_token_construct, non_linear_regression)
{"single": lambda: set_constructed_tokens(config, 1, recurrent=False),
 "separate3": lambda: set_constructed_tokens(config, 3, recurrent=False),
 "tokens": lambda: set_separate_tokens(config), "sine": lambda: set_sine(config)}[args.setup]()
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
