"""The house's rules, read from the source: studies stay short, the library imports no study, one forward hook
for layer inputs, one SGD loop (no optimiser built in the constructions or the retraining), and docstrings cite
the papers, not a document outside the repository."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# The package without the links to the top-level studies/, constructions/ and cli.py (the product's outer rooms).
LIBRARY = sorted(p for p in (ROOT / "icl_gd").rglob("*.py")
                 if p.relative_to(ROOT / "icl_gd").parts[0] not in ("studies", "constructions", "cli.py"))
STUDIES = sorted((ROOT / "studies").glob("*.py"))
CONSTRUCTIONS = sorted((ROOT / "constructions").glob("*.py"))


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
        elif isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
    return out


@pytest.mark.parametrize("path", STUDIES, ids=lambda p: p.name)
def test_no_study_is_over_350_lines(path):
    assert len(path.read_text().splitlines()) <= 350


def test_the_library_imports_no_study_and_no_construction():
    offenders = {str(p.relative_to(ROOT)): sorted(m for m in _imports(p)
                                                   if m.startswith(("icl_gd.studies", "icl_gd.constructions")))
                 for p in LIBRARY}
    assert not {k: v for k, v in offenders.items() if v}, offenders


def test_one_forward_hook_captures_layer_inputs():
    """DualForm.inputs is the one place a forward hook reads layer inputs for analysis; the recorder's hook records
    them during training. A third is a second way of doing the same."""
    hooks = [str(p.relative_to(ROOT)) for p in [*LIBRARY, *CONSTRUCTIONS, *STUDIES]
             for _ in re.findall(r"register_forward_hook\(", p.read_text())]
    assert sorted(hooks) == ["icl_gd/dual/form.py", "icl_gd/dual/recorder.py"]


def test_constructions_and_retraining_build_no_optimiser_of_their_own():
    """The constructions train through the library's loop and factories; the retraining, through the study's own
    MLP run (``settings.mlp_run``): neither builds an optimiser itself."""
    assert not [p.name for p in CONSTRUCTIONS if "torch.optim" in p.read_text()]
    lds = (ROOT / "icl_gd" / "dual" / "lds.py").read_text()
    assert "torch.optim" not in lds and "make_optimizer" not in lds


def test_docstrings_cite_no_document_outside_the_repository():
    cited = [str(p.relative_to(ROOT)) for p in [*LIBRARY, *CONSTRUCTIONS, *STUDIES] if "PROTOCOL" in p.read_text()]
    assert cited == []
