"""The package's layers hold: no module imports from a layer above its own, no import circle forms
anywhere, and the test oracles import nothing of the product but the workflows' AST.

The layers are declared once, in the docstrings of `sensorscript/__init__.py` and
`sensorscript/runtime/__init__.py` (a `Layers:` block, lowest first); each runtime subpackage says
in its own docstring what it may import, and that sentence is held to the order too. Every import
counts, those inside functions and under `if TYPE_CHECKING:` included: a reader follows them all.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "sensorscript"
ORACLES = ROOT / "tests" / "oracles"
# What the oracles may take from the product: the AST the one grammar defines (and what it imports).
ORACLE_MAY_IMPORT = {"sensorscript.parser.ast"}


def module_files(folder: Path, prefix: str) -> dict[str, Path]:
    """Dotted module name -> file, for every Python file below `folder` (a package is its __init__)."""
    found = {}
    for path in sorted(folder.rglob("*.py")):
        parts = list(path.relative_to(folder).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join([prefix, *parts])] = path
    return found


MODULES = module_files(PACKAGE, "sensorscript")
GENERATED = "sensorscript.parser._generated"  # ANTLR's output: imports only the antlr4 runtime


def imported(path: Path, name: str, known: dict[str, Path]) -> set[str]:
    """The modules of `known` that the file imports, anywhere in it; `from P import M` is the module
    P.M where one exists, else P; relative imports are resolved against `name`."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
        else:
            continue
        for target in names:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                targets.add(target)
    return targets


def import_graph() -> nx.DiGraph:
    graph = nx.DiGraph()
    for name, path in MODULES.items():
        if name.startswith(GENERATED):
            continue
        graph.add_node(name)
        graph.add_edges_from((name, target) for target in imported(path, name, MODULES))
    return graph


def declared_layers(package: str) -> list[tuple[str, ...]]:
    """The `Layers:` block of a package's docstring: one tuple of dotted names per layer, lowest first."""
    docstring = ast.get_docstring(ast.parse(MODULES[package].read_text()))
    block = docstring.split("Layers:\n", 1)[1]
    layers = []
    for line in block.splitlines():
        match = re.match(r"    (\S[^:]*):", line)
        if not match:
            break
        layers.append(tuple(f"{package}.{n.strip()}" for n in match.group(1).split(",")))
    assert layers, f"{package}: no 'Layers:' block in its docstring"
    return layers


def layer_of(name: str, layers: list[tuple[str, ...]]) -> int | None:
    for rank, layer in enumerate(layers):
        if any(name == member or name.startswith(member + ".") for member in layer):
            return rank
    return None


TOP = declared_layers("sensorscript")
RUNTIME = declared_layers("sensorscript.runtime")


def test_every_module_is_in_a_layer():
    unplaced = [name for name in import_graph() if name != "sensorscript" and layer_of(name, TOP) is None]
    assert not unplaced, f"modules in no layer of sensorscript/__init__.py: {unplaced}"
    runtime = [name for name in import_graph() if name.startswith("sensorscript.runtime.")]
    unplaced = [name for name in runtime if layer_of(name, RUNTIME) is None]
    assert not unplaced, f"runtime modules in no layer of sensorscript/runtime/__init__.py: {unplaced}"


@pytest.mark.parametrize("layers", [TOP, RUNTIME], ids=["sensorscript", "runtime"])
def test_no_module_imports_from_a_layer_above_its_own(layers):
    upward = []
    for source, target in import_graph().edges:
        mine, theirs = layer_of(source, layers), layer_of(target, layers)
        if mine is not None and theirs is not None and theirs > mine:
            upward.append(f"{source} -> {target}")
    assert not upward, "imports from a higher layer:\n" + "\n".join(sorted(upward))


def test_no_import_circles():
    """Each group of modules that import each other round a circle is named once, with one circle in it."""
    graph = import_graph()
    groups = [sorted(group) for group in nx.strongly_connected_components(graph) if len(group) > 1]
    shown = [", ".join(group) + "\n    e.g. " + " -> ".join(edge[0] for edge in nx.find_cycle(graph.subgraph(group)))
             for group in sorted(groups)]
    assert not groups, "modules in import circles:\n" + "\n".join(shown)


@pytest.mark.parametrize("package", [n for layer in RUNTIME for n in layer if n in MODULES and
                                     MODULES[n].name == "__init__.py"] + ["sensorscript.runtime.job"])
def test_each_runtime_layer_says_what_it_may_import(package):
    """A subpackage's 'May import: a, b.' names exactly the layers below it ('nothing of the runtime.')."""
    docstring = ast.get_docstring(ast.parse(MODULES[package].read_text()))
    said = re.search(r"May import: ([^.]*)\.", docstring)
    assert said, f"{package}: its docstring does not say what it may import"
    names = set() if said.group(1) == "nothing of the runtime" else {n.strip() for n in said.group(1).split(",")}
    below = {n.rpartition(".")[2] for layer in RUNTIME[:layer_of(package, RUNTIME)] for n in layer}
    assert names == below


def test_the_oracles_import_nothing_of_the_product_but_the_ast():
    oracles = module_files(ORACLES, "tests.oracles")
    taken = {f"{name} -> {target}"
             for name, path in oracles.items()
             for target in imported(path, name, {**MODULES, **oracles})
             if target.startswith("sensorscript") and target not in ORACLE_MAY_IMPORT}
    assert not taken, "oracles importing product code:\n" + "\n".join(sorted(taken))


def test_the_checker_sees_function_level_and_relative_imports(tmp_path):
    """The walk must find what a reader finds: an import inside a function, and a relative one."""
    source = tmp_path / "m.py"
    source.write_text("def f():\n    from sensorscript.runtime.plan import program\n"
                      "from ..state import engine\n")
    found = imported(source, "sensorscript.runtime.output.m", MODULES)
    assert found == {"sensorscript.runtime.plan.program", "sensorscript.runtime.state.engine"}
