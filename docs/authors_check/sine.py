"""The authors' sine run (non_linear_regression.ipynb, its Config and Training cells): their baseline (embedding +
MLP meta-trained under the Prop. 1 layer frozen at η = 0.1, ``pre_train_gd_hps``) then the trained model, printing
both test losses: compare with ``icl-gd run sine --preset paper``.

    python docs/authors_check/sine.py --authors-dir PATH --seed 0 --steps 20000 --baseline-steps 20000
"""
import time

import jax
import jax.numpy as jnp

from _authors import import_authors, parser, set_sine

p = parser(__doc__)
p.add_argument("--steps", type=int, default=20_000, help="the trained model's steps (theirs: 20000)")
p.add_argument("--baseline-steps", type=int, default=20_000, help="the baseline's steps (theirs: 20000)")
p.add_argument("--every", type=int, default=1000, help="evaluate every this many steps")
args = p.parse_args()
config, T = import_authors(args.authors_dir)
from src.data import create_weights  # noqa: E402  (their module, importable once their folder is on the path)

# Their Config cell.
set_sine(config)
config.local_usage, config.seed = True, args.seed
config.training_steps, config.training_steps_gd = args.steps, args.baseline_steps
T.change_dataloader()
make = T.data_creator

# Their Training cell (one seed).
eval_rng = jax.random.PRNGKey(10)
optimiser, train_state, _, rng = T.init()
rng, data_rng = jax.random.split(rng, 2)
params_c = create_weights(config.input_size, 1, config.dataset_size, 0.1, jnp.ones([1, 1, config.input_size]) * 0.0,
                          lin_diag=False, gd_deq=config.gd_deq, num_layers=config.num_layers,
                          input_mlp_rnd=eval_rng)
start = time.time()
if args.baseline_steps > 0:
    params_c, eval_rng = T.pre_train_gd_hps(eval_rng, params_c)
print(f"baseline trained ({args.baseline_steps} steps) in {time.time() - start:.0f} s", flush=True)
eval_data = make(jax.random.split(eval_rng, num=config.bs), config.input_size, config.dataset_size,
                 config.size_distract, config.input_range, config.weight_scale)
start = time.time()
for step in range(args.steps + 1):
    if step % args.every == 0 or step == args.steps:
        trained, _, _ = T.predict_test.apply(train_state.params, eval_rng, eval_data, False)
        baseline, _, _ = T.predict_test.apply(params_c, eval_rng, eval_data, True)
        print(f"seed {args.seed} step {step} trained {float(trained):.6f} baseline {float(baseline):.6f} "
              f"trained/baseline {float(trained) / float(baseline):.3f} ({time.time() - start:.0f} s)", flush=True)
    if step == args.steps:
        break
    rng, data_rng = jax.random.split(data_rng, 2)
    train_state, _ = T.update(train_state, make(jax.random.split(rng, num=config.bs), config.input_size,
                                                config.dataset_size, config.size_distract, config.input_range,
                                                config.weight_scale), optimiser)
