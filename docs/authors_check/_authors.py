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
