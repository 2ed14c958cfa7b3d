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


def _module_name(path: Path) -> str:
    name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
    return name.removesuffix(".__init__")


def _import_graph() -> dict[str, set[str]]:
    """Module -> the library modules it imports, at any level (a function-level import counts: it hides a circle
    from the interpreter, not from a reader)."""
    modules = {_module_name(p): p for p in LIBRARY}
    graph = {}
    for name, path in modules.items():
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                found |= {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
            elif isinstance(node, ast.Import):
                found |= {a.name for a in node.names}
        graph[name] = {m for m in found if m in modules and m != name}
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index, low, stack, on, found, counter = {}, {}, [], set(), [], [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_circle_in_the_library():
    assert _circles(_import_graph()) == []


def test_the_circle_finder_finds_a_circle_hidden_in_a_function():
    """The test above is not vacuous: two modules importing each other, one of them inside a function, are found."""
    graph = _import_graph()
    graph["icl_gd.claims.formatting"] = graph["icl_gd.claims.formatting"] | {"icl_gd.claims.report"}
    assert any("icl_gd.claims.formatting" in c and "icl_gd.claims.report" in c for c in _circles(graph))


def _lines(folder: Path) -> dict[str, int]:
    return {str(p.relative_to(ROOT)): len(p.read_text().splitlines()) for p in folder.rglob("*.py")}


def test_the_platform_stays_small_and_no_module_of_the_claims_wing_is_over_400_lines():
    """The platform runs studies; the claims that read them are a wing of their own (``icl_gd/claims``), each of its
    modules one thing a reader can hold."""
    assert sum(_lines(ROOT / "icl_gd" / "platform").values()) < 1500
    assert {k: v for k, v in _lines(ROOT / "icl_gd" / "claims").items() if v > 400} == {}


def test_whether_quick_settles_a_claim_is_derived_not_declared():
    """Whether a --quick verdict stands follows from a claim's kind and its plans' budgets
    (``Claim.settled_by_quick``): a claim declares neither it nor any other quick setting (those are its plans'),
    and the derived answer is the rule's on claims classified by hand."""
    from dataclasses import fields, replace

    from icl_gd.claims import CLAIMS, Claim, RunPlan
    from icl_gd.claims.registry import CONSTRUCTION_CHECKS

    assert [f.name for f in fields(Claim) if "quick" in f.name or "decisive" in f.name] == []
    by_id = {c.id: c for c in (*CLAIMS, *CONSTRUCTION_CHECKS)}
    by_hand = {
        "vo-prop1-exact": True,  # an identity holds at any budget
        "irie-dual-trained": True,  # a construction check, though --quick trains its network for less
        "vo-single-loss": False,  # --quick trains fewer steps and seeds
        "mesa-layer-ridge": False,  # beyond the papers, the same
    }
    assert {i: by_id[i].settled_by_quick for i in by_hand} == by_hand
    paper = by_id["vo-single-loss"]
    same_budget = RunPlan("single-layer", overrides=("steps=100",), seeds=3)  # --quick changes nothing
    assert replace(paper, runs=(same_budget,)).settled_by_quick  # a paper claim, settled by its plans alone
    assert not replace(paper, runs=(same_budget, *paper.runs)).settled_by_quick  # every plan must be full


# The claims wing's registry is its table of claims, read by the wing's plan and written with its statistics: one
# room with the wing, not a room above or below it.
ONE_ROOM = {"icl_gd.claims.registry": "icl_gd.claims"}


def _package(module: str) -> str:
    """The room a module lives in: its package, or the module itself at the package's root (``icl_gd.api``)."""
    for inner, room in ONE_ROOM.items():
        if module == inner or module.startswith(inner + "."):
            return room
    parts = module.split(".")
    path = ROOT.joinpath(*parts)
    return module if path.is_dir() or len(parts) == 2 else ".".join(parts[:-1])


def _package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for module, imported in graph.items():
        room = _package(module)
        out.setdefault(room, set()).update(_package(m) for m in imported if _package(m) != room)
    return out


def test_no_package_imports_one_above_it():
    """The rooms stack: packages (``icl_gd.regression.online`` and ``icl_gd.regression`` are two) import one way
    only, so each has a level and imports only lower ones; a floor never imports a room built on it."""
    rooms = _package_graph(_import_graph())
    assert {"icl_gd.regression", "icl_gd.regression.online", "icl_gd.regression.compare"} <= set(rooms)
    assert _circles(rooms) == []


def test_the_package_check_finds_a_floor_importing_its_room():
    graph = _import_graph()
    graph["icl_gd.regression.tasks"] = graph["icl_gd.regression.tasks"] | {"icl_gd.regression.online.algorithms"}
    assert any("icl_gd.regression" in c and "icl_gd.regression.online" in c for c in _circles(_package_graph(graph)))


def test_regression_keeps_its_rooms():
    """One room per idea: the family's floor stays under 25 modules and no room grows past 1200 lines."""
    floor = list((ROOT / "icl_gd" / "regression").glob("*.py"))
    assert len(floor) < 25
    rooms = [p for p in (ROOT / "icl_gd" / "regression").iterdir() if p.is_dir() and p.name != "__pycache__"]
    assert len(rooms) >= 5
    assert {p.name: n for p in rooms if (n := sum(_lines(p).values())) > 1200} == {}
    assert all((p / "__init__.py").read_text().startswith('"""') for p in rooms)
