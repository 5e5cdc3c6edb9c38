"""The pieces of ANTLR's runtime that parser/antlr.py tightens must behave as the stock ones.

`_LexerSimulator` walks the lexer's DFA in a tighter loop, `_TokenList` reads a complete token
list and `_BailingParser` matches tokens and enters rules with fewer calls: each must give exactly
what ANTLR's own classes give, on any text.
"""

from antlr4 import CommonTokenStream, InputStream
from antlr4.atn.PredictionMode import PredictionMode
from antlr4.error.ErrorStrategy import BailErrorStrategy
from antlr4.error.Errors import ParseCancellationException
from antlr4.tree.Tree import TerminalNode
from hypothesis import given, settings, strategies as st

from sensorscript.parser import antlr
from sensorscript.parser._generated.SensorScriptLexer import SensorScriptLexer
from sensorscript.parser._generated.SensorScriptParser import SensorScriptParser
from tests.conftest import EXAMPLES

# Fragments that exercise every lexer rule and its edges, glued at random.
FRAGMENTS = ["a", "_x1", "and", "andy", "or", "not", "pattern", "within", "yield", "by", "1", "600_000", "1_",
             "1__2", "10min", "10m", "5s", "1e3", "1e", "1.5", "1.", ".5", ".5e-3", "1.5e", "2E+4", '"8MD1-AZ"',
             '"a\\"b"', '"open', '"x\\', "//c\n", "/* c */", "/*/", "/* open", "*/", "=", "==", "-", "->", "!",
             "!=", ">", ">=", "<", "<=", "+", "*", "/", "(", ")", ",", ".", ":", ";", " ", "\t", "\n", "\r\n",
             "\f", "\v", "é", "#", "@", "$", "'"]


def stock_tokens(text):
    lexer = SensorScriptLexer(InputStream(text))
    lexer.removeErrorListeners()
    stream = CommonTokenStream(lexer)
    stream.fill()
    return [(t.type, t.text, t.line, t.column, t.start, t.stop) for t in stream.tokens]


def our_tokens(text):
    return [(t.type, t.text, t.line, t.column, t.start, t.stop)
            for t in antlr._TokenList(antlr._Lexer(InputStream(text))).tokens]


def tree_text(stream) -> str:
    parser = SensorScriptParser(stream)
    parser.removeErrorListeners()
    return parser.workflow().toStringTree(recog=parser)


def tree_shape(context) -> list:
    """Every node of a parse tree, depth first: a rule's class, first and last token, number of
    children and whether each child names it as its parent; a terminal's token."""
    shape = []
    stack = [context]
    while stack:
        node = stack.pop()
        if isinstance(node, TerminalNode):
            shape.append(("token", node.symbol.tokenIndex, node.symbol.type))
            continue
        children = node.children or []
        shape.append((type(node).__name__, node.start.tokenIndex, node.stop.tokenIndex if node.stop else None,
                       node.invokingState, len(children), all(c.parentCtx is node for c in children)))
        stack.extend(reversed(children))
    return shape


def bail_out_parse(text: str, ours: bool):
    """The first, SLL bail-out parse, with our parser or with the stock one: (tree text, shape), or
    None where it gives up."""
    if ours:
        parser = antlr._BailingParser(antlr._TokenList(antlr._Lexer(InputStream(text))))
    else:
        lexer = SensorScriptLexer(InputStream(text))
        lexer.removeErrorListeners()
        parser = SensorScriptParser(CommonTokenStream(lexer))
        parser.removeErrorListeners()
        parser._interp.predictionMode = PredictionMode.SLL
        parser._errHandler = BailErrorStrategy()
    try:
        tree = parser.workflow()
    except ParseCancellationException:
        return None
    return tree.toStringTree(recog=parser), tree_shape(tree)


def test_examples_tokenize_and_parse_as_with_the_stock_runtime():
    for path in EXAMPLES:
        text = path.read_text()
        assert our_tokens(text) == stock_tokens(text), path.name
        stock = CommonTokenStream(SensorScriptLexer(InputStream(text)))
        assert tree_text(antlr._TokenList(antlr._Lexer(InputStream(text)))) == tree_text(stock), path.name
        ours = bail_out_parse(text, ours=True)
        assert ours is not None and ours == bail_out_parse(text, ours=False), path.name


@settings(max_examples=600, deadline=None)
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=25))
def test_random_fragments_tokenize_and_parse_identically(parts):
    text = "".join(parts)
    assert our_tokens(text) == stock_tokens(text)
    stock = CommonTokenStream(SensorScriptLexer(InputStream(text)))
    stock.tokenSource.removeErrorListeners()
    assert tree_text(antlr._TokenList(antlr._Lexer(InputStream(text)))) == tree_text(stock)
    assert bail_out_parse(text, ours=True) == bail_out_parse(text, ours=False)


# Statements, whole and broken, glued at random: most parse, some stop the bail-out parse.
STATEMENTS = ['A = avg("S1", 10s, 5s);', "B = -A * (2 + not C) >= 1 or D;", "U = union(A, B, \"x\");",
              "M = max(A, B, C);", "X = a.value;", "P = pattern(a: S -> !b: T -> c: U+) where a.value > 1 "
              "within 10min strategy next emit first partition by sensor yield c.value - a.value limit 5;",
              "Q = pattern(a: S ->[op] b: f(T)) within 1s;", "// c\n", "/* c */", "\n", " ", "Y = ;", "Z = (A;",
              "W = 1.5e3 / .5;", "V = f();", "= A;", ";", "K = A B;"]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(STATEMENTS), max_size=12))
def test_random_statements_parse_as_with_the_stock_bail_out_parser(parts):
    text = "".join(parts)
    assert bail_out_parse(text, ours=True) == bail_out_parse(text, ours=False)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40))
def test_random_text_tokenizes_identically(text):
    assert our_tokens(text) == stock_tokens(text)
