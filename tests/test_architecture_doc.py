"""docs/architecture.md against the tree: every module, folder and dotted name it gives exists, and every package
(a folder with an ``__init__.py`` under ``icl_gd/``, and the top-level ``constructions/`` and ``studies/``) is named
on it, as is every module of ``constructions/`` (the page lists them all).

A name is resolved against the folder its passage is about: a section's "(modules in `FOLDER` unless named
otherwise)", or, inside a list item, the last folder the item named (`icl_gd/platform/sweep/` then `plan.py`), then
against the repository's root and ``icl_gd/`` (`core/results.py`)."""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "architecture.md"

_TICKED = re.compile(r"`([^`\n]+)`")
_SECTION_FOLDER = re.compile(r"^\(modules in `([^`]+)`")
_MODULE_WORD = re.compile(r"(?<![\w./-])([\w/]+\.py)\b")
_DOTTED = re.compile(r"^icl_gd(\.\w+)+$")


def _is_path(name: str) -> bool:
    return name.endswith(".py") or name.startswith("icl_gd/")


def _sections(text: str) -> list[tuple[Path, list[str]]]:
    """The page cut at its ``## `` headings, each part with the folder its "(modules in `FOLDER` ...)" line names
    (the root where it names none): the line may follow the diagram it explains."""
    parts: list[list[str]] = [[]]
    for line in text.splitlines():
        if line.startswith("## "):
            parts.append([])
        parts[-1].append(line)
    out = []
    for lines in parts:
        folders = [m.group(1) for m in map(_SECTION_FOLDER.match, (s.strip() for s in lines)) if m]
        out.append((ROOT / folders[0] if folders else ROOT, lines))
    return out


def named(text: str) -> list[tuple[str, tuple[Path, ...]]]:
    """Every module or folder path the page names, each with the folders it may be relative to (nearest first):
    backticked ``*.py`` and ``icl_gd/...`` paths in the prose, and ``*.py`` words in the diagrams (fenced blocks
    other than Python, which its tests run)."""
    out: list[tuple[str, tuple[Path, ...]]] = []
    for section, lines in _sections(text):
        item, fence = section, None
        for line in lines:
            stripped = line.strip()
            if stripped.startswith("```"):
                fence = None if fence is not None else stripped[3:] or "diagram"
                continue
            if fence is not None:
                if fence != "python":
                    out += [(m, (section, ROOT, ROOT / "icl_gd")) for m in _MODULE_WORD.findall(line)]
                continue
            if stripped.startswith("- "):
                item = section
            for name in _TICKED.findall(line):
                if _is_path(name):
                    out.append((name, (item, section, ROOT, ROOT / "icl_gd")))
                if name.endswith("/") and (ROOT / name).is_dir():
                    item = ROOT / name
    return out


def resolved(text: str) -> list[tuple[str, Path | None]]:
    """Each module or folder path the page names, with the file or folder it is (None: under none of its folders)."""
    return [(name, next((base / name for base in bases if (base / name).exists()), None))
            for name, bases in named(text)]


def missing_modules(text: str) -> list[str]:
    """The module and folder paths the page names that exist under none of their folders."""
    return [name for name, path in resolved(text) if path is None]


def _defines(module: Path, name: str) -> bool:
    """Whether ``module`` binds ``name`` at its top level (a def, a class, an assignment or an import)."""
    for node in ast.parse(module.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            return True
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                return True
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            if any((a.asname or a.name.split(".")[0]) == name for a in node.names):
                return True
    return False


def _dotted_exists(name: str) -> bool:
    path = ROOT
    parts = name.split(".")
    for i, part in enumerate(parts):
        if (path / part).is_dir():
            path = path / part
            continue
        if (path / f"{part}.py").is_file():
            rest = parts[i + 1:]
            return not rest or _defines(path / f"{part}.py", rest[0])
        return (path / "__init__.py").is_file() and _defines(path / "__init__.py", part)
    return True  # a package


def missing_dotted(text: str) -> list[str]:
    """The backticked dotted names (``icl_gd.regression.tokens.query_prediction``) whose module does not exist, or
    whose module does not define the name that follows it."""
    return [name for name in _TICKED.findall(text) if _DOTTED.match(name) and not _dotted_exists(name)]


def packages() -> list[str]:
    """Every package of the tree: ``icl_gd`` and its folders holding an ``__init__.py`` (the links to the
    top-level folders not followed), and the top-level ``constructions/`` and ``studies/``."""
    found = ["constructions/", "studies/"]
    for folder, subfolders, files in os.walk(ROOT / "icl_gd"):
        subfolders[:] = sorted(s for s in subfolders if not (Path(folder) / s).is_symlink() and s != "__pycache__")
        if "__init__.py" in files:
            found.append(Path(folder).relative_to(ROOT).as_posix() + "/")
    return found


def unnamed_packages(text: str) -> list[str]:
    """The packages the page does not name by their path, backticked (``icl_gd/regression/online/``)."""
    ticked = {n.rstrip("/") for n in _TICKED.findall(text)}
    return [p for p in packages() if p.rstrip("/") not in ticked]


def unlisted_constructions(text: str) -> list[str]:
    """The modules of ``constructions/`` the page does not name (``delta_rule.py`` in a passage about
    ``icl_gd/regression/online/`` is that folder's, not the construction's)."""
    listed = {path for _, path in resolved(text)}
    return [p.name for p in sorted((ROOT / "constructions").glob("*.py"))
            if p.name != "__init__.py" and p not in listed]


def test_every_module_the_page_names_exists():
    text = PAGE.read_text()
    assert len(named(text)) > 100  # the reader finds them: the page names modules in every room
    assert missing_modules(text) == []
    assert missing_dotted(text) == []


def test_every_package_is_named_on_the_page():
    assert {"icl_gd/regression/online/", "icl_gd/platform/sweep/", "icl_gd/claims/registry/",
            "constructions/", "studies/"} <= set(packages())
    assert unnamed_packages(PAGE.read_text()) == []


def test_every_construction_module_is_listed():
    assert unlisted_constructions(PAGE.read_text()) == []


def test_the_checks_find_a_missing_module_an_unnamed_package_and_an_unlisted_construction():
    page = PAGE.read_text()
    stale = (page + "\n## More\n\n(modules in `icl_gd/regression/` unless named otherwise)\n\n"
             "- `feature_models.py` and `icl_gd/regression/online/ghost.py`; `core/results.py` is found.\n"
             "- `icl_gd/platform/sweep/`: `driver.py` is its own, `icl_gd/platform/runner.py` is found, "
             "`runner.py` here is not.\n"
             "```\nlsa.py -> nowhere.py\n```\n"
             "`icl_gd.regression.tokens.no_such_function`, `icl_gd.regression.gone`, "
             "`icl_gd.regression.tokens.query_prediction`\n")
    # what each check finds beyond what it finds on the page itself
    assert missing_modules(stale)[len(missing_modules(page)):] == [
        "feature_models.py", "icl_gd/regression/online/ghost.py", "runner.py", "nowhere.py"]
    assert missing_dotted(stale)[len(missing_dotted(page)):] == ["icl_gd.regression.tokens.no_such_function",
                                                                 "icl_gd.regression.gone"]
    without = page.replace("`icl_gd/regression/population/`", "the population folder")
    assert set(unnamed_packages(without)) - set(unnamed_packages(page)) == {"icl_gd/regression/population/"}
    unlisted = unlisted_constructions(page.replace("`population_gd.py`", "the population check"))
    assert set(unlisted) - set(unlisted_constructions(page)) == {"population_gd.py"}
