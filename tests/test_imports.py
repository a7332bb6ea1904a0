"""The package's imports form no circle and flow one way between layers.

Every module of ``src/fairshare`` is parsed (not imported) and each ``import`` of a
``fairshare`` module collected, those inside functions included: a lazy import still
ties the two modules together. ``from fairshare.a import b`` counts as an import of
``fairshare.a.b`` when that is a module, else of ``fairshare.a``. Layers
(docs/architecture.md): model <- policies <- engine <- sim / live <- report / audit / conformance / cli;
``traces`` may import ``model`` and ``sim.progress``, and ``cli`` imports ``traces.cli``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import fairshare

ROOT = Path(fairshare.__file__).resolve().parent

#: layer of each top-level part: a module may import its own layer and those below
#: (``traces`` sits just above ``model``: it may import only ``model``, and the exceptions)
LAYER = {"model": 0, "traces": 0.5, "importers": 0.5, "client": 0.5, "ray": 0.5, "policies": 1, "engine": 2, "sim": 3, "live": 3,
         "report": 4, "audit": 4, "conformance": 4, "whatif": 4, "api": 4, "cli": 4, "__main__": 5}
#: imports allowed across the layering (docs/architecture.md)
EXCEPTIONS = {("traces", "sim.progress"), ("cli", "traces.cli"), ("live", "report.explain")}


def module_names() -> dict[str, Path]:
    names = {}
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        names[".".join(parts)] = path
    return names


MODULES = module_names()


def imports_of(name: str) -> set[str]:
    """The fairshare modules ``name`` imports, anywhere in its body."""
    tree = ast.parse(MODULES[name].read_text(), filename=str(MODULES[name]))
    package = name if MODULES[name].name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.split(".")[0] == "fairshare")
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolve against the package
                anchor = package.split(".")
                anchor = anchor[:len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            if base.split(".")[0] != "fairshare":
                continue
            for alias in node.names:
                target = f"{base}.{alias.name}"
                found.add(target if target in MODULES else base)
    return {m for m in found if m in MODULES and m != name}


GRAPH = {name: imports_of(name) for name in MODULES}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A circle of imports, as the list of modules along it, or None."""
    state: dict[str, int] = {}  # 1 on the current path, 2 done
    path: list[str] = []

    def visit(v: str) -> list[str] | None:
        state[v] = 1
        path.append(v)
        for w in sorted(graph[v]):
            if state.get(w) == 1:
                return path[path.index(w):] + [w]
            if w not in state:
                found = visit(w)
                if found:
                    return found
        path.pop()
        state[v] = 2
        return None

    for v in sorted(graph):
        if v not in state:
            found = visit(v)
            if found:
                return found
    return None


def part(name: str) -> str:
    """A module's top-level part: ``fairshare.policies.dff`` -> ``policies``."""
    pieces = name.split(".")
    return pieces[1] if len(pieces) > 1 else ""


def test_the_walk_sees_imports_inside_functions():
    # the CLI imports most of its commands lazily, inside functions
    assert "fairshare.sim.simulator" in GRAPH["fairshare.cli"] or "fairshare.sim" in GRAPH["fairshare.cli"]
    assert GRAPH["fairshare.policies.base"], "base imports the online seam"


def test_find_cycle_finds_one():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_circle():
    assert find_cycle(GRAPH) is None


def layer_violations(name: str, targets) -> list[str]:
    """The imports of module ``name`` that go up the layering."""
    own = part(name)
    found = []
    for target in sorted(targets):
        other = part(target)
        if own not in LAYER or other not in LAYER or other == own:
            continue
        rest = target.split(".", 1)[1]
        if any(own == a and (rest == b or rest.startswith(b + ".")) for a, b in EXCEPTIONS):
            continue
        if LAYER[other] > LAYER[own]:
            found.append(f"{name} imports {target}: {other} is above {own}")
    return found


def test_layer_check_catches_an_upward_import():
    assert layer_violations("fairshare.policies.x", {"fairshare.engine.scheduler", "fairshare.model.jobs"}) == [
        "fairshare.policies.x imports fairshare.engine.scheduler: engine is above policies"]
    assert layer_violations("fairshare.traces.x", {"fairshare.sim.progress"}) == []  # allowed
    assert layer_violations("fairshare.traces.x", {"fairshare.sim.simulator"}) != []


@pytest.mark.parametrize("name", sorted(n for n in MODULES if part(n) in LAYER))
def test_layers_flow_one_way(name):
    assert layer_violations(name, GRAPH[name]) == []


# --- third-party imports: each one's distribution is declared --------------------------------------
def third_party_imports() -> dict[str, str]:
    """Top-level name of every non-standard, non-fairshare module imported anywhere in the
    package -> one module that imports it."""
    import sys

    found: dict[str, str] = {}
    for name, path in sorted(MODULES.items()):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                tops = [alias.name.split(".")[0] for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                tops = [node.module.split(".")[0]]
            else:
                continue
            for top in tops:
                if top != "fairshare" and top not in sys.stdlib_module_names:
                    found.setdefault(top, name)
    return found


def declared_distributions() -> set[str]:
    """The distributions ``pyproject.toml`` declares for the package and its ``live``
    extra (the test extra does not count: the package must not need it), normalized."""
    import re
    import tomllib

    project = tomllib.loads((ROOT.parents[1] / "pyproject.toml").read_text())["project"]
    requirements = project["dependencies"] + project["optional-dependencies"]["live"]
    return {re.sub(r"[-_.]+", "-", re.match(r"[A-Za-z0-9_.-]+", r).group()).lower() for r in requirements}


def test_every_imported_distribution_is_declared():
    # (pydantic came in with FastAPI: an upgrade of FastAPI that dropped it, or a pydantic
    # 1, would have broken serve with nothing in pyproject.toml saying what it needs)
    import re
    from importlib.metadata import packages_distributions

    distributions = packages_distributions()
    declared = declared_distributions()
    undeclared = []
    for top, importer in third_party_imports().items():
        names = {re.sub(r"[-_.]+", "-", d).lower() for d in distributions.get(top, [top])}
        if not names & declared:
            undeclared.append(f"{top} (imported by {importer})")
    assert undeclared == []


# --- what a library user pays for: no plotting library without a plot ---------------------------
def matplotlib_after(code: str) -> list[str]:
    """The matplotlib modules loaded once ``code`` ran in a fresh interpreter (this tree's
    sources first on the path)."""
    import json
    import os
    import subprocess
    import sys

    script = f"{code}; import json, sys; print(json.dumps(sorted(m for m in sys.modules " \
             f"if m.split('.')[0] == 'matplotlib')))"
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(ROOT.parent)})
    return json.loads(out.stdout)


@pytest.mark.parametrize("module", ["fairshare", "fairshare.api", "fairshare.cli"])
def test_importing_the_library_does_not_import_matplotlib(module):
    # (a library user computing allocations, or `fairshare --version`, must not pay for
    # matplotlib: only report/plots.py imports it, on the first plot)
    assert matplotlib_after(f"import {module}") == []


def test_the_matplotlib_check_sees_a_plot_import_it():
    assert "matplotlib.pyplot" in matplotlib_after("import fairshare.report.plots as p; p._plt()")
