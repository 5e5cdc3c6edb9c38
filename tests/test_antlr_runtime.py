"""The two pieces of ANTLR's runtime that parser/antlr.py tightens must behave as the stock ones.

`_LexerSimulator` walks the lexer's DFA in a tighter loop and `_TokenList` reads a complete token
list: both must give exactly what ANTLR's own classes give, on any text.
"""

from antlr4 import CommonTokenStream, InputStream
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


def test_examples_tokenize_and_parse_as_with_the_stock_runtime():
    for path in EXAMPLES:
        text = path.read_text()
        assert our_tokens(text) == stock_tokens(text), path.name
        stock = CommonTokenStream(SensorScriptLexer(InputStream(text)))
        assert tree_text(antlr._TokenList(antlr._Lexer(InputStream(text)))) == tree_text(stock), path.name


@settings(max_examples=600, deadline=None)
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=25))
def test_random_fragments_tokenize_and_parse_identically(parts):
    text = "".join(parts)
    assert our_tokens(text) == stock_tokens(text)
    stock = CommonTokenStream(SensorScriptLexer(InputStream(text)))
    stock.tokenSource.removeErrorListeners()
    assert tree_text(antlr._TokenList(antlr._Lexer(InputStream(text)))) == tree_text(stock)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40))
def test_random_text_tokenizes_identically(text):
    assert our_tokens(text) == stock_tokens(text)
