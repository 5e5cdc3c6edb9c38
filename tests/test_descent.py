"""The recursive-descent fast path must give exactly the ANTLR path's AST, or give up."""

import dataclasses

from hypothesis import given, settings, strategies as st

from sensorscript.parser.antlr import build_workflow, parse_tree
from sensorscript.parser.descent import parse_statements
from tests.conftest import EXAMPLES
from tests.test_tokens import FRAGMENTS


def full(node):
    """Every field, spans and texts included (they take no part in AST equality)."""
    if dataclasses.is_dataclass(node):
        return (type(node).__name__, *((f.name, full(getattr(node, f.name))) for f in dataclasses.fields(node)))
    if isinstance(node, tuple):
        return tuple(full(x) for x in node)
    if isinstance(node, float):
        return repr(node)
    return node


def antlr(text):
    tree, _, syntax = parse_tree(text, "w.ss")
    if syntax:
        return None
    statements, lexical = build_workflow(tree, "w.ss")
    return None if lexical else statements


def agrees(text):
    fast = parse_statements(text, "w.ss")
    if fast is not None:  # accepted here: ANTLR must accept it too, with the same tree
        slow = antlr(text)
        assert slow is not None, text
        assert full(fast) == full(slow), text


def test_examples_parse_on_the_fast_path_identically():
    for path in EXAMPLES:
        text = path.read_text()
        assert parse_statements(text, "w.ss") is not None, path.name
        agrees(text)


PIECES = FRAGMENTS + ["X = ", ";", "avg(", "union(", "count(", "pattern(", "a: X", " -> ", "!b: Y", "c: Z+", ")",
                      " where a.value > 1", " within 10min", " within 600_000", " strategy next", " emit first",
                      " partition by sensor", " yield last(c.value) - a.value", ", ", "S", '"8MD1-AZ"', "10s", "1.5",
                      " and ", " not ", " - ", " * ", " == ", "(", "a.ts"]


@settings(max_examples=1500, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=30))
def test_random_scripts_parse_identically_or_fall_back(parts):
    agrees("".join(parts))


statements = st.sampled_from([
    "X = avg(S, 10s, 5s);", 'U = union("8MD1-AZ", S, T);', "Y = -X * 2 + not U / (A - B) >= 1 or C and D;",
    "Z = max(X, Y, 1.5e3);", "W = sum(U, 600_000, 300_000);", "V = count(S, 1min, 1min);",
    "P = pattern(a: X -> !b: Y -> c: \"Z\"+) where a.value > 0.5 and count(c) >= 3 within 10min "
    "strategy next emit first partition by sensor yield last(c.value) - a.value;",
    "Q = pattern(w: W) within 1h;", "R = ((X));", "/* c */ T = X // x\n  + Y;",
])


@settings(max_examples=300, deadline=None)
@given(st.lists(statements, max_size=8), st.sampled_from(["", " ", "\n", "\r\n", "\t  "]))
def test_valid_scripts_take_the_fast_path(chosen, separator):
    text = separator.join(chosen)
    assert parse_statements(text, "w.ss") is not None, text
    agrees(text)
