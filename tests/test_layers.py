"""The package's layers hold: no module imports from a layer above its own, no import circle forms
anywhere, not even between the folders of one layer, and the repository's four parts import each
other one way only.

The layers are declared once, in the docstrings of `sensorscript/__init__.py` and
`sensorscript/runtime/__init__.py` (a `Layers:` block, lowest first); each runtime subpackage says
in its own docstring what it may import, and that sentence is held to the order too. Every import
counts, those inside functions and under `if TYPE_CHECKING:` included: a reader follows them all.
So do imports made through importlib or `__import__` of a module named in the code; a module that
loads a file by its path (a compiled job.py, a user's operators) is named in LOADS_FILES with what
it loads, so that a new one is seen by a reader here first.

The repository's parts, and what each may import:
- `sensorscript/`, the product: nothing of the others.
- `oracles/`, what the tests hold the job to (docs/LANGUAGE.md written out in plain Python): of the product
  only the workflows' AST (ORACLE_MAY_IMPORT), which the one grammar defines.
- `scripts/`, benchmarks and tools: the product's public modules, the oracles and one another
  (`standalone.py`, `mosquitto.py`, `soaking/`), never tests/. A product module is public when no
  part of its dotted name starts with `_` (so not `parser/_generated`), and so is a name in it: a
  script uses what the product offers, as a user's code would, and may not reach into what a
  module keeps to itself (that may change without notice).
- `tests/`: any of them. What a script and a test both need lives in the product, in the oracles
  or in a script (a test imports `scripts/standalone.py` and `scripts/mosquitto.py`), never in
  tests/.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "sensorscript"
ORACLES = ROOT / "oracles"
SCRIPTS = ROOT / "scripts"
# What the oracles may take from the product: the AST the one grammar defines (and what it imports).
ORACLE_MAY_IMPORT = {"sensorscript.parser.ast"}
# The modules that load a file by its path, with what they load.
LOADS_FILES = {
    "sensorscript.runtime.plan.loading": "a compiled OUT/job.py or OUT/naive_job.py (it imports runtime.job)",
    "sensorscript.runtime.plan.versions": "OUT/versions/N/job.py, a version of the compiled job",
    "sensorscript.runtime.state.cep.operators": "a user's file of pattern operators (--operators)",
}
# Calls that import a module by name (`importlib.import_module("m")`, `__import__("m")`) or load a file.
IMPORT_CALLS = {"import_module", "__import__"}
LOAD_CALLS = {"spec_from_file_location", "run_path", "run_module", "SourceFileLoader"}


def module_files(folder: Path, prefix: str) -> dict[str, Path]:
    """Dotted module name -> file, for every Python file below `folder` (a package is its __init__)."""
    found = {}
    for path in sorted(folder.rglob("*.py")):
        parts = list(path.relative_to(folder).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join([prefix, *parts] if prefix else parts)] = path
    return found


MODULES = module_files(PACKAGE, "sensorscript")
SCRIPT_MODULES = module_files(SCRIPTS, "")  # as scripts import one another: standalone, soaking.feed
# tests/'s modules by the names a file would import them by with tests/ put on sys.path: brokers, ...
TEST_NAMES = {name.split(".")[0] for name in module_files(ROOT / "tests", "")} - {""}
GENERATED = "sensorscript.parser._generated"  # ANTLR's output: imports only the antlr4 runtime


def imports_of(path: Path, name: str) -> list[tuple[str, tuple[str, ...]]]:
    """(module, names taken from it) for every import of the file, anywhere in it: `import M` is
    (M, ()), `from P import a, b` is (P, (a, b)) with relative imports resolved against `name`, and
    an import by importlib or `__import__` of a module named by a string is (that module, ())."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(alias.name, ()) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            found.append((base, tuple(alias.name for alias in node.names)))
        elif (isinstance(node, ast.Call) and _called(node) in IMPORT_CALLS and node.args
              and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            found.append((node.args[0].value, ()))
    return found


def _called(call: ast.Call) -> str:
    return call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")


def loads_files(path: Path) -> bool:
    """Whether the file loads a file by its path, or imports a module whose name it computes."""
    return any(isinstance(node, ast.Call) and (_called(node) in LOAD_CALLS or (
        _called(node) in IMPORT_CALLS and not (node.args and isinstance(node.args[0], ast.Constant))))
        for node in ast.walk(ast.parse(path.read_text(), str(path))))


def imported(path: Path, name: str, known: dict[str, Path]) -> set[str]:
    """The modules of `known` that the file imports, anywhere in it; `from P import M` is the module
    P.M where one exists, else P."""
    targets = set()
    for base, names in imports_of(path, name):
        for target in [f"{base}.{n}" if f"{base}.{n}" in known else base for n in names] or [base]:
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
    oracles = module_files(ORACLES, "oracles")
    assert "oracles.streams" in oracles
    taken = {f"{name} -> {target}"
             for name, path in oracles.items()
             for target in imported(path, name, {**MODULES, **oracles})
             if target.startswith("sensorscript") and target not in ORACLE_MAY_IMPORT}
    taken |= {f"{name} -> {module}" for name, path in oracles.items() for module, _ in imports_of(path, name)
              if module.split(".")[0] in OTHER_PARTS - {"oracles"}}  # nor tests or scripts
    assert not taken, "oracles importing product code, tests or scripts:\n" + "\n".join(sorted(taken))


def test_the_checker_sees_function_level_and_relative_imports(tmp_path):
    """The walk must find what a reader finds: an import inside a function, and a relative one."""
    source = tmp_path / "m.py"
    source.write_text("def f():\n    from sensorscript.runtime.plan import program\n"
                      "from ..state import engine\n")
    found = imported(source, "sensorscript.runtime.output.m", MODULES)
    assert found == {"sensorscript.runtime.plan.program", "sensorscript.runtime.state.engine"}


def test_the_checker_sees_imports_through_importlib(tmp_path):
    """A module named in a string and imported by importlib or `__import__` is an import like any
    other; a file loaded by its path, or a name computed, is what LOADS_FILES must name."""
    source = tmp_path / "m.py"
    source.write_text("import importlib\n"
                      "def f():\n    return importlib.import_module('sensorscript.cli'), __import__('sensorscript.graph')\n")
    assert imported(source, "sensorscript.runtime.output.m", MODULES) == {"sensorscript.cli", "sensorscript.graph"}
    assert not loads_files(source)
    source.write_text("import importlib, runpy\ndef f(name):\n    return importlib.import_module(name)\n")
    assert loads_files(source)
    source.write_text("import runpy\nrunpy.run_path('job.py')\n")
    assert loads_files(source)


def test_every_module_that_loads_files_is_named():
    loading = {name for name, path in MODULES.items() if not name.startswith(GENERATED) and loads_files(path)}
    assert loading == set(LOADS_FILES), "modules that load a file by its path (or import a computed name), " \
        "to be named in LOADS_FILES with what they load: " + ", ".join(sorted(loading ^ set(LOADS_FILES)))


def folder_of(name: str) -> str:
    return name if MODULES[name].name == "__init__.py" else name.rpartition(".")[0]


@pytest.mark.parametrize("layers", [TOP, RUNTIME], ids=["sensorscript", "runtime"])
def test_no_circles_between_the_folders_of_a_layer(layers):
    """Inside one layer, folders (each package apart from its subpackages) import one another one
    way: a subfolder that imports its parent folder while the parent imports it is one unit in two
    places, whatever the modules' own graph says."""
    graph = import_graph()
    circles = []
    for rank in range(len(layers)):
        folders = nx.DiGraph()
        for source, target in graph.subgraph(n for n in graph if layer_of(n, layers) == rank).edges:
            if folder_of(source) != folder_of(target):
                folders.add_edge(folder_of(source), folder_of(target), example=f"{source} imports {target}")
        for group in sorted(map(sorted, nx.strongly_connected_components(folders))):
            if len(group) > 1:
                circles.append("; ".join(folders.edges[edge]["example"]
                                         for edge in nx.find_cycle(folders.subgraph(group))))
    assert not circles, "folders of one layer in a circle:\n" + "\n".join(circles)


OTHER_PARTS = {"tests", "scripts", "oracles"} | {name.split(".")[0] for name in SCRIPT_MODULES} | TEST_NAMES


def test_the_product_imports_nothing_of_tests_scripts_or_oracles():
    taken = sorted(f"{name} -> {module}" for name, path in MODULES.items() if not name.startswith(GENERATED)
                   for module, _ in imports_of(path, name) if module.split(".")[0] in OTHER_PARTS)
    assert not taken, "product modules importing what is not the product:\n" + "\n".join(taken)


def private(module: str, names: tuple[str, ...]) -> list[str]:
    """What of `from module import names` (or `import module`) is not the product's public surface."""
    wrong = []
    for taken in [f"{module}.{n}" if f"{module}.{n}" in MODULES else None for n in names] or [None]:
        found = taken or module
        if found not in MODULES:
            wrong.append(f"{found} (no module of the product)")
        elif any(part.startswith("_") for part in found.split(".")):
            wrong.append(f"{found} (a private module)")
    wrong += [f"{module}.{n}" for n in names if f"{module}.{n}" not in MODULES and n.startswith("_")]
    return wrong


def private_attributes(path: Path, name: str) -> list[str]:
    """`module._name` where `module` is bound to a product module by an import of the file."""
    bound = {}
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("sensorscript"):
            bound.update({a.asname or a.name: f"{node.module}.{a.name}" for a in node.names
                          if f"{node.module}.{a.name}" in MODULES})
        elif isinstance(node, ast.Import):
            bound.update({a.asname: a.name for a in node.names if a.asname and a.name in MODULES})
    return [f"{bound[node.value.id]}.{node.attr}" for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in bound
            and node.attr.startswith("_") and not node.attr.startswith("__")]


def test_scripts_import_only_public_modules_the_oracles_and_one_another():
    wrong = []
    for name, path in SCRIPT_MODULES.items():
        where = path.relative_to(ROOT)
        for module, names in imports_of(path, name):
            root = module.split(".")[0]
            if root in ("tests", "scripts") or (root in TEST_NAMES and root not in SCRIPT_MODULES):
                wrong.append(f"{where}: {module} (tests are no library; a script is imported by its name)")
            elif root == "sensorscript":
                wrong += [f"{where}: {found}" for found in private(module, names)]
        wrong += [f"{where}: {found} (a private name)" for found in private_attributes(path, name)]
    assert not wrong, "scripts importing what is not the product's public surface:\n" + "\n".join(sorted(wrong))
