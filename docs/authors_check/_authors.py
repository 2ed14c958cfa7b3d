"""Import the authors' own ``src/`` (google-research/self-organising-systems, transformers_learn_icl_by_gd) from a
path given on the command line. Nothing of theirs is copied here: these drivers only set their ``config`` as their
notebooks do and run their training loop, so that icl-gd's paper presets can be compared with the original code.

Needs JAX, Haiku, Optax, ml_collections, absl-py and pytz (not icl-gd dependencies); checked with jax 0.10.2,
dm-haiku 0.0.17, optax 0.2.8 on CPU."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path


def parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--authors-dir", type=Path, required=True,
                   help="the transformers_learn_icl_by_gd folder of a checkout of google-research/self-organising-systems")
    p.add_argument("--seed", type=int, default=0)
    return p


def import_authors(authors_dir: Path):
    """Put their folder on sys.path and return their (config, train) modules."""
    if not (authors_dir / "src" / "train.py").is_file():
        sys.exit(f"--authors-dir {authors_dir}: no src/train.py there (expected .../transformers_learn_icl_by_gd)")
    sys.path.insert(0, str(authors_dir))
    import jax
    import jax.numpy as jnp
    jnp.DeviceArray = jax.Array  # gone from current JAX; their code uses it in type hints only
    from src.config import config
    import src.train as train
    return config, train


# Their notebooks' Config cells, once each: the drivers and bench_steps.py set the same values, steps and seeds apart.
def set_constructed_tokens(config, K: int, recurrent: bool) -> None:
    """constructed_token_setup.ipynb (softmax = layernorm = False, one head), K layers, tied when ``recurrent``."""
    config.deq = config.gd_deq = recurrent
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


def set_separate_tokens(config) -> None:
    """normal_token_construct.ipynb (two layers, softmax first, one head)."""
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


def set_sine(config) -> None:
    """non_linear_regression.ipynb (input MLP, one recurrent layer, the meta-trained baseline)."""
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


def set_prng_era(legacy: bool) -> None:
    """``legacy``: JAX's PRNG as before jax 0.5 (``jax_threefry_partitionable`` False), the stream their notebooks
    drew under jax 0.3.25; call before anything draws a key. Without it, current JAX's default."""
    if legacy:
        import jax
        jax.config.update("jax_threefry_partitionable", False)


def provenance(authors_dir: Path, started: float, train_s: float, legacy_prng: bool) -> dict:
    """Their commit, the library versions, the machine, the command, the date and the wall time of a run."""
    import os
    import platform
    import subprocess
    import time
    from datetime import datetime, timezone
    from importlib import metadata

    import jax
    commit = subprocess.run(["git", "-C", str(authors_dir), "rev-parse", "HEAD"], capture_output=True, text=True)
    return {
        "commit": commit.stdout.strip() or "not a git checkout: see the snapshot's commit",
        "versions": ", ".join(f"{m} {metadata.version(m)}" for m in ("jax", "jaxlib", "dm-haiku", "optax", "numpy")),
        "python": platform.python_version(), "device": jax.default_backend(),
        "jax_threefry_partitionable": bool(jax.config.jax_threefry_partitionable), "legacy_prng": legacy_prng,
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
        "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d"),
        "train_s": round(train_s), "wall_s": round(time.time() - started)}


def write_json(path: str | Path, obj: dict) -> None:
    """``obj`` as one JSON object in ``path``, atomically (a temporary file, then os.replace): a reader never sees a
    half-written file, and a run that dies leaves its last complete write."""
    import json
    import os
    path = Path(path)
    tmp = path.with_name(path.name + ".part")
    tmp.write_text(json.dumps(obj) + "\n")
    os.replace(tmp, path)
