"""GD alone, rolled out as their roll-out cell does it (constructed_token_setup.ipynb, "Visualize iteratively
applying a single layer Transformer layer"): their Prop. 1 weights (``create_weights``) with step λη applied 50 times
to the y slots of their 10 000 test tasks (PRNGKey(5)), no training. Prints, per application, the mean loss (what
their cell plots) and the median over tasks, for each η given: whether 50 damped GD steps keep decreasing depends on
λη, which is why icl-gd's η (tuned on held-out tasks) and theirs (grid on the test tasks) can disagree here.

    python docs/authors_check/rollout_gd.py --authors-dir PATH --eta 5.901 --eta 6.04
"""
import json

import numpy as np

from _authors import import_authors, parser

p = parser(__doc__)
p.add_argument("--eta", type=float, action="append", required=True, help="GD's η (their lr_min); repeat for several")
p.add_argument("--damping", type=float, default=0.75)
p.add_argument("--applications", type=int, default=50)
args = p.parse_args()
config, T = import_authors(args.authors_dir)
# JAX once the arguments are read: --help (and a refused argument) needs none
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from src.data import create_weights  # noqa: E402  (their module, importable once their folder is on the path)

# Their Config cell for one layer, then the roll-out cell's changes.
config.deq = config.gd_deq = True
config.att_only_trans, config.use_softmax, config.layer_norm, config.in_proj = True, False, False, False
config.dataset_size, config.input_size, config.key_size, config.emb_size, config.num_heads = 10, 10, 11, 11, 1
config.input_range, config.clip = 1, 0
config.num_layers, config.y_update = args.applications, True
d, N = config.input_size, config.dataset_size
eval_rng = jax.random.PRNGKey(5)
data = T.data_creator(jax.random.split(eval_rng, num=10000), d, N, 0, config.input_range, config.weight_scale)
targets = data[1][:, -1]
for eta in args.eta:
    params = create_weights(d, 1, N, eta * args.damping, jnp.zeros([1, 1, d]), gd_deq=True, num_layers=args.applications)
    stack = T.predict_stack.apply(params, eval_rng, data[0], True)  # per application: (B,) predictions ŷ
    per_task = 0.5 * (np.asarray(jnp.stack(stack)) - np.asarray(targets)[None, :]) ** 2  # (applications, B)
    mean, median = per_task.mean(axis=1), np.median(per_task, axis=1)
    diverging = int(np.sum(per_task[-1] > per_task[0]))
    print(json.dumps({"eta": eta, "damping": args.damping, "step": eta * args.damping,
                      "mean": [float(v) for v in mean], "median": [float(v) for v in median],
                      "tasks_worse_after_last_than_first": diverging,
                      "rising_steps_of_mean": int(np.sum(np.diff(mean) > 0))}), flush=True)
