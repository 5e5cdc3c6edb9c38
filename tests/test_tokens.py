"""The fast tokenizer must produce exactly the generated ANTLR lexer's tokens."""

from antlr4 import CommonTokenStream, InputStream
from hypothesis import given, settings, strategies as st

from sensorscript.parser._generated.SensorScriptLexer import SensorScriptLexer
from sensorscript.parser.tokens import FastLexer
from tests.conftest import EXAMPLES


def antlr_tokens(text):
    lexer = SensorScriptLexer(InputStream(text))
    lexer.removeErrorListeners()
    stream = CommonTokenStream(lexer)
    stream.fill()
    return [(t.type, t.text, t.line, t.column) for t in stream.tokens]


def fast_tokens(text):
    stream = CommonTokenStream(FastLexer(text))
    stream.fill()
    return [(t.type, t.text, t.line, t.column) for t in stream.tokens]


def test_examples_tokenize_identically():
    for path in EXAMPLES:
        text = path.read_text()
        assert fast_tokens(text) == antlr_tokens(text), path.name


# Fragments that exercise every lexer rule and its edges, glued at random.
FRAGMENTS = ["a", "_x1", "and", "andy", "or", "not", "pattern", "within", "yield", "by", "1", "600_000", "1_",
             "1__2", "10min", "10m", "5s", "1e3", "1e", "1.5", "1.", ".5", ".5e-3", "1.5e", "2E+4", '"8MD1-AZ"',
             '"a\\"b"', '"open', '"x\\', "//c\n", "/* c */", "/*/", "/* open", "*/", "=", "==", "-", "->", "!",
             "!=", ">", ">=", "<", "<=", "+", "*", "/", "(", ")", ",", ".", ":", ";", " ", "\t", "\n", "\r\n",
             "\f", "\v", "é", "#", "@", "$", "'"]


@settings(max_examples=600, deadline=None)
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=25))
def test_random_fragments_tokenize_identically(parts):
    text = "".join(parts)
    assert fast_tokens(text) == antlr_tokens(text)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40))
def test_random_text_tokenizes_identically(text):
    assert fast_tokens(text) == antlr_tokens(text)
