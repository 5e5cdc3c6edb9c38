"""Parsing: what each construct becomes, precedence, and parse -> print -> parse round trips."""

import pytest
from hypothesis import given, settings, strategies as st

from sensorscript.parser import ast, load, parse, parse_file
from sensorscript.parser.printer import print_workflow
from tests.conftest import EXAMPLES


def value(source: str):
    return parse(source).statements[0].value


def test_bridge_example_is_the_seven_statements_of_zhou_et_al():
    workflow = parse_file(EXAMPLES[0].parent / "bridge.ss")
    names = [s.name for s in workflow.statements]
    assert names == ["MD1Z", "UNI", "MD23", "MD4Z", "UNIF", "out_MZ", "out_AZ"]
    assert workflow.outputs == ("out_MZ", "out_AZ")
    md1z = workflow.statements[0].value
    assert md1z == ast.Window("avg", ast.Ref("8MD1-AZ"), ast.Duration(600_000), ast.Duration(300_000))
    assert md1z.stream.quoted
    assert workflow.statements[1].value == ast.Union_((ast.Ref("8MD2-A"), ast.Ref("8MD3-A")))


@pytest.mark.parametrize("text, ms", [("600000", 600_000), ("600_000", 600_000), ("10min", 600_000),
                                      ("5s", 5_000), ("250ms", 250), ("1h", 3_600_000), ("1_000ms", 1_000)])
def test_durations(text, ms):
    window = value(f"X = max(S, {text}, {text});")
    assert window.length.ms == ms and window.slide.ms == ms


def test_window_form_needs_exactly_three_arguments_with_two_durations():
    assert isinstance(value("X = avg(S, 10s, 5s);"), ast.Window)
    assert isinstance(value("X = count(S, 1, 1);"), ast.Window)
    cross = value("X = max(A, B, C);")
    assert cross == ast.Call("max", (ast.Ref("A"), ast.Ref("B"), ast.Ref("C")))
    assert isinstance(value("X = avg(S, 1.5, 300);"), ast.Call)  # 1.5 is no duration: a mean of three


@pytest.mark.parametrize("source, expected", [
    ("a + b * c", "+(a, *(b, c))"),
    ("a - b - c", "-(-(a, b), c)"),
    ("a / b / c", "/(/(a, b), c)"),
    ("-a * b", "*(neg(a), b)"),
    ("- - a", "neg(neg(a))"),
    ("(a + b) * c", "*(+(a, b), c)"),
    ("a + b > c * 2", ">(+(a, b), *(c, 2))"),
    ("not a > b and c", "and(not(>(a, b)), c)"),
    ("a or b and c", "or(a, and(b, c))"),
    ("a and b or c and d", "or(and(a, b), and(c, d))"),
    ("not not a", "not(not(a))"),
    ("a == b != c", "!=(==(a, b), c)"),
    ("-max(a, b) + 1", "+(neg(max(a, b)), 1)"),
])
def test_precedence_and_associativity(source, expected):
    def show(node):
        if isinstance(node, ast.Binary):
            return f"{node.op}({show(node.left)}, {show(node.right)})"
        if isinstance(node, ast.Unary):
            return f"{'neg' if node.op == '-' else 'not'}({show(node.operand)})"
        if isinstance(node, ast.Call):
            return f"{node.func}(" + ", ".join(show(a) for a in node.args) + ")"
        if isinstance(node, ast.Number):
            return node.text
        return node.name

    assert show(value(f"X = {source};")) == expected


def test_quoted_and_bare_references_are_the_same_stream():
    assert value('X = "A" + B;') == value('X = A + "B";')


def test_comments_of_both_styles():
    workflow = parse("// line\nA = avg(S, 1s, 1s); /* block\n spanning */ B = A * 2; // end")
    assert [s.name for s in workflow.statements] == ["A", "B"]


def test_pattern_with_every_clause():
    pattern = value("""P = pattern(a: X -> !b: Y -> c: Z+)
        where a.value > 0.5 and count(c) >= 2 and avg(c.value) > a.value
        within 10min strategy next emit first partition by sensor
        yield last(c.value) - a.value;""")
    assert [(e.var, e.stream.name, e.kleene, e.negated) for e in pattern.elements] == [
        ("a", "X", False, False), ("b", "Y", False, True), ("c", "Z", True, False)]
    assert pattern.within.ms == 600_000
    assert (pattern.strategy, pattern.emit, pattern.partition_by) == ("next", "first", "sensor")
    assert isinstance(pattern.yield_, ast.Binary)


def test_pattern_defaults():
    pattern = value("P = pattern(a: X -> b: Y) within 5s;")
    assert (pattern.strategy, pattern.emit, pattern.partition_by, pattern.where, pattern.yield_) == (
        "any", "all", None, None, None)


def test_string_literals_in_pattern_predicates():
    pattern = value('P = pattern(a: X -> b: Y) where a.sensor == "8MD1-AZ" within 5s;')
    assert pattern.where.right == ast.String("8MD1-AZ")


def test_spans_point_at_the_source():
    statement = parse("\n  MD1Z = avg(\"S\", 1s, 1s);", "f.ss").statements[0]
    assert (statement.span.line, statement.span.column) == (2, 3)
    assert (statement.value.stream.span.line, statement.value.stream.span.column) == (2, 14)


def test_nodes_are_hashable_and_spans_do_not_count():
    a = parse("X = avg(S, 10s, 5s);", "a.ss").statements[0]
    b = parse("\n\n  X   =  avg( S ,10_000, 5000 ) ;", "b.ss").statements[0]
    assert a == b and hash(a) == hash(b)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_examples_round_trip(path):
    workflow = load([path]).workflows[0]
    again = parse(print_workflow(workflow), str(path), workflow.name)
    assert again.statements == workflow.statements
    assert print_workflow(again) == print_workflow(workflow)


# Random expressions: print -> parse gives the same tree (precedence and parentheses).
names = st.sampled_from(["A", "B", "c_1", "S"]).map(ast.Ref)
numbers = st.integers(0, 999).map(lambda n: ast.Number(float(n), str(n)))
leaves = st.one_of(names, numbers)


def _compound(children):
    binary = st.builds(ast.Binary, st.sampled_from(sorted(set(ast.PRECEDENCE) - {"neg", "not"})), children, children)
    unary = st.builds(ast.Unary, st.sampled_from(["-", "not"]), children)
    call = st.builds(ast.Call, st.sampled_from(["max", "min", "avg", "sum"]), st.tuples(children, children))
    return st.one_of(binary, unary, call)


expressions = st.recursive(leaves, _compound, max_leaves=12)


@settings(max_examples=300, deadline=None)
@given(expressions)
def test_random_expressions_round_trip(expr):
    statement = ast.Statement("X", expr)
    workflow = ast.Workflow("w", (statement,))
    assert parse(print_workflow(workflow)).statements[0].value == expr


PARALLEL_AGREES = """
import dataclasses, pickle, sys
import sensorscript.parser as front_end
from sensorscript.errors import SensorScriptError
from sensorscript.workload import bridge_workload

def full(node):
    if dataclasses.is_dataclass(node):
        return (type(node).__name__, *((f.name, full(getattr(node, f.name))) for f in dataclasses.fields(node)))
    if isinstance(node, (tuple, list)):
        return tuple(full(x) for x in node)
    return node

texts = {f"{name}.ss": text for name, text in bridge_workload(300).workflows.items()}
broken = sorted(texts)[200]
texts[broken] = texts[broken].replace(";", " +;", 1) + "X = avgg(S, 1s, 1s);\\n"

def run(parallel_from):
    front_end.PARALLEL_FROM = parallel_from
    items = list(texts.items())
    from sensorscript.parser.check import Context
    return full(front_end._parse_and_check_all(items, Context(None)))

assert run(128) == run(10**9)
try:
    front_end.load(list(texts), texts=texts)
except SensorScriptError as exc:
    print(exc.render())
"""


def test_parallel_parsing_gives_what_one_process_gives(tmp_path):
    """300 workflows parse in forked workers; ASTs (spans included) and diagnostics must be the same."""
    import subprocess
    import sys

    script = tmp_path / "agree.py"
    script.write_text(PARALLEL_AGREES)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "error: unexpected ';'" in done.stdout and "unknown function 'avgg'" in done.stdout


def test_parsing_leaves_no_reference_cycles():
    """A parse leaves nothing for the cyclic collector (antlr._release cuts ANTLR's cycles): at
    10,000 workflows, collecting their parse trees took a second of `sscript compile`."""
    import gc

    from sensorscript.parser import SeenStatements, _parse

    texts = [(p.read_text(), str(p)) for p in EXAMPLES]
    texts.append(("A = -(B + 2) * not C > 1 or D;\nX = avg(A, 10s, 5s);\n", "expressions.ss"))
    _parse(*texts[0], None)  # ANTLR's caches (DFA states) are built once and kept: not garbage
    seen = SeenStatements()
    gc.collect()
    enabled = gc.isenabled()
    gc.disable()
    try:
        results = [_parse(text, path, None) for text, path in texts]
        results += [_parse(text, path, None, seen) for text, path in texts * 2]  # statements parsed alone, then seen
        assert gc.collect() == 0
    finally:
        if enabled:
            gc.enable()
    assert all(workflow.statements for workflow, _ in results)


# A statement written again is built from the first one's AST (antlr.SeenStatements): the same
# AST, spans included, as parsing it; scripts with errors or diagnostics are parsed whole.
REPEATED = ['A = avg("8MD1-AZ", 10min, 5min);', "U = union(A, \"S 2\", B);", "B = max(A, 600_000, 300_000);",
            "C = -(A + 2) * not B > 1 or A;", "D = max(A, B, C);", "E = A /* inline */ + 1.5e3;",
            "F = avg(A,\n      1min,\n      30s);",
            "P = pattern(a: A -> !b: B -> c: C+) where a.value > 0.5 and count(c) >= 2 within 10min\n"
            "    strategy next emit first partition by sensor yield c.value - a.value limit 50;",
            "Q = pattern(x: A ->[op] y: f(B)) within 1s;",
            "G = avg(A, 10mn, 5s);",  # a unit the builder reports: parsed whole
            "H = A +;", "K = (A;"]  # syntax errors: parsed whole
BEFORE = ["", " ", "  ", "\n", "\n\n", "// a comment\n", "/* a\n   comment */ "]


def ast_with_spans(node):
    """An AST as nested tuples, every field included (spans, names' spans, texts)."""
    if isinstance(node, tuple):
        return tuple(ast_with_spans(item) for item in node)
    if hasattr(node, "__dataclass_fields__"):
        return (type(node).__name__, *((name, ast_with_spans(value)) for name, value in sorted(vars(node).items())))
    return node


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(st.tuples(st.sampled_from(BEFORE), st.sampled_from(REPEATED)), min_size=1, max_size=6),
                min_size=1, max_size=6))
def test_a_statement_seen_before_gives_the_ast_of_parsing_it(scripts):
    from sensorscript.parser.antlr import SeenStatements, parse_workflow

    seen = SeenStatements()
    for index, parts in enumerate(scripts):
        text = "".join(before + statement for before, statement in parts) + "\n"
        file = f"w{index}.ss"
        remembered, parsed = parse_workflow(text, file, seen), parse_workflow(text, file)
        assert ast_with_spans(remembered.statements) == ast_with_spans(parsed.statements)
        assert remembered.broken == parsed.broken and remembered.diagnostics == parsed.diagnostics


def test_statements_seen_before_are_not_parsed_again(monkeypatch):
    from sensorscript.parser import antlr

    parsed = []
    parse_statement = antlr._parse_statement
    monkeypatch.setattr(antlr, "_parse_statement", lambda stream, first, last, file: parsed.append(file) or
                        parse_statement(stream, first, last, file))
    seen = antlr.SeenStatements()
    for index in range(3):
        text = "\n" * index + 'A = avg("8MD1-AZ", 10min, 5min);\nB = max(A, 1min, 1min);\n'
        statements = antlr.parse_workflow(text, f"w{index}.ss", seen).statements
        assert [(s.span.file, s.span.line) for s in statements] == [(f"w{index}.ss", 1 + index), (f"w{index}.ss", 2 + index)]
    assert parsed == ["w0.ss", "w0.ss"]
