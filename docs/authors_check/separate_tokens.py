"""The authors' separate-token run (normal_token_construct.ipynb, its Config and Training cells), printing the test
loss every 500 steps and their copy analysis every 2500: compare with ``icl-gd run separate-tokens --preset paper``.

    python docs/authors_check/separate_tokens.py --authors-dir PATH --seed 0
"""
import time

import jax

from _authors import import_authors, parser, set_separate_tokens

p = parser(__doc__)
p.add_argument("--steps", type=int, default=10_000)
args = p.parse_args()
config, T = import_authors(args.authors_dir)

# Their Config cell (two layers, softmax first, one head).
set_separate_tokens(config)
config.local_usage, config.training_steps = True, args.steps
config.seed = args.seed
T.change_dataloader()
make = T.data_creator

# Their Training cell.
optimiser, train_state, _, rng = T.init()
rng, data_rng, eval_rng = jax.random.split(rng, 3)
eval_data = make(jax.random.split(eval_rng, num=10000), 10, 10, 0, 1, 1)
start = time.time()
for step in range(args.steps + 1):
    if step % 500 == 0:
        loss, _, _ = T.predict_test.apply(train_state.params, eval_rng, eval_data, False)
        line = f"seed {args.seed} step {step} loss {float(loss):.5f} ({time.time() - start:.0f} s)"
        if step % 2500 == 0:  # their analyse_copy, on the first 1000 test tasks
            own, nxt, other = T.analyse_copy(tuple(a[:1000] for a in eval_data), train_state, eval_rng)
            line += f" copy own {float(own):.3f} next {float(nxt):.3f} other {float(other):.3f}"
        print(line, flush=True)
    if step == args.steps:
        break
    rng, data_rng = jax.random.split(data_rng, 2)
    train_state, _ = T.update(train_state, make(jax.random.split(rng, num=config.bs), 10, 10, 0, 1, 1), optimiser)
