"""A fast tokenizer that produces exactly the tokens of the generated ANTLR lexer.

ANTLR's Python lexer simulator spends ~10 us per token; this one dispatches on
the first character and uses a few compiled regular expressions, about six
times faster. The grammar stays the definition: tests/test_tokens.py checks on
random input that both produce the same token stream (type, text, line,
column), so a change to the lexer rules that is not mirrored here fails.

`tokenize` is the tokenizer itself, giving plain lists (the recursive-descent
fast path in `parser/descent.py` reads those); `FastLexer` hands the same
tokens to the generated parser as ANTLR token objects.
"""

from __future__ import annotations

import re
from antlr4 import InputStream, Token
from antlr4.CommonTokenFactory import CommonTokenFactory
from antlr4.Token import CommonToken

from sensorscript.parser._generated.SensorScriptLexer import SensorScriptLexer as L

# Token types, for modules that must not import the generated code themselves:
# LITERALS maps a keyword or operator ("and", "(") to its type, TOKEN_TYPES has the named ones.
TOKEN_TYPES = L
LITERALS = {name.strip("'"): index for index, name in enumerate(L.literalNames) if name.startswith("'")}
_KEYWORDS = {text: kind for text, kind in LITERALS.items() if text.isalpha()}
_OPERATORS = {text: kind for text, kind in LITERALS.items() if not text.isalpha()}
_TWO_CHAR = {text for text in _OPERATORS if len(text) == 2}

_WS = re.compile(r"[ \t\r\n\f]+")
_IDENT = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_DIGITS = r"[0-9]+(?:_[0-9]+)*"
_DURATION = re.compile(_DIGITS + r"[a-zA-Z]+")
_NUMBER = re.compile(_DIGITS + r"(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_FRACTION = re.compile(r"\.[0-9]+(?:[eE][+-]?[0-9]+)?")
_STRING_BODY = re.compile(r'"(?:[^"\\\r\n]|\\[^\r\n])*')
_LINE_COMMENT = re.compile(r"//[^\r\n]*")
_IDENT_START = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_")
_DIGIT = frozenset("0123456789")
_SPACE = frozenset(" \t\r\n\f")

Tokens = tuple[list[int], list[str], list[int], list[int], list[int]]


def tokenize(text: str) -> Tokens:
    """Every token of `text`: their types, texts, start offsets, lines and columns, in five lists.

    The last token is EOF (text "<EOF>", at the end of the text). Lines and columns are
    counted as ANTLR counts them: '\\n' ends a line, columns start at 0.
    """
    kinds: list[int] = []
    texts: list[str] = []
    starts: list[int] = []
    lines: list[int] = []
    columns: list[int] = []
    n = len(text)
    pos = 0
    line = 1
    line_start = 0
    count, rindex = text.count, text.rindex
    ws_match, ident_match, number_match, duration_match = _WS.match, _IDENT.match, _NUMBER.match, _DURATION.match
    keywords, operators, two_char = _KEYWORDS, _OPERATORS, _TWO_CHAR
    ident_start, digit, space = _IDENT_START, _DIGIT, _SPACE
    IDENT, NUMBER, DURATION = L.IDENT, L.NUMBER, L.DURATION
    while True:
        # Skip whitespace and comments: the only text, with an unterminated comment, that holds line breaks.
        while pos < n:
            c = text[pos]
            if c in space:
                end = ws_match(text, pos).end()
            elif c == "/" and text.startswith("//", pos):
                end = _LINE_COMMENT.match(text, pos).end()
            elif c == "/" and text.startswith("/*", pos):
                close = text.find("*/", pos + 2)
                if close < 0:
                    break  # an unterminated comment: a token of its own, below
                end = close + 2
            else:
                break
            newlines = count("\n", pos, end)
            if newlines:
                line += newlines
                line_start = rindex("\n", pos, end) + 1
            pos = end
        if pos >= n:
            break
        c = text[pos]
        if c in ident_start:
            end = ident_match(text, pos).end()
            word = text[pos:end]
            kinds.append(keywords.get(word, IDENT))
            texts.append(word)
            starts.append(pos)
            lines.append(line)
            columns.append(pos - line_start)
            pos = end
            continue
        if c in digit:
            # Longest match, as ANTLR's lexer does: "1e3" is a NUMBER, "1e" and "10min" DURATIONs.
            end = number_match(text, pos).end()
            kind = NUMBER
            duration = duration_match(text, pos)
            if duration is not None and duration.end() > end:
                end = duration.end()
                kind = DURATION
        elif c == '"':
            end = _STRING_BODY.match(text, pos).end()
            if end < n and text[end] == '"':
                end += 1
                kind = L.STRING
            else:
                kind = L.UNTERMINATED_STRING
        elif c == "/" and text.startswith("/*", pos):
            end, kind = n, L.UNTERMINATED_COMMENT
        else:
            fraction = _FRACTION.match(text, pos) if c == "." else None
            if fraction is not None:
                end, kind = fraction.end(), NUMBER
            elif text[pos:pos + 2] in two_char:
                end, kind = pos + 2, operators[text[pos:pos + 2]]
            elif c in operators:
                end, kind = pos + 1, operators[c]
            else:
                end, kind = pos + 1, L.UNEXPECTED_CHAR
        kinds.append(kind)
        texts.append(text[pos:end])
        starts.append(pos)
        lines.append(line)
        columns.append(pos - line_start)
        if kind == L.UNTERMINATED_COMMENT:
            newlines = count("\n", pos, end)
            if newlines:
                line += newlines
                line_start = rindex("\n", pos, end) + 1
        pos = end
    kinds.append(Token.EOF)
    texts.append("<EOF>")
    starts.append(pos)
    lines.append(line)
    columns.append(pos - line_start)
    return kinds, texts, starts, lines, columns


class FastLexer:
    """An ANTLR TokenSource over a whole string (the interface CommonTokenStream needs)."""

    def __init__(self, text: str):
        self.text = text
        self.input = InputStream(text)
        self._factory = CommonTokenFactory.DEFAULT
        self._source = (self, self.input)
        self._tokens = tokenize(text)
        self._next = 0
        self.line, self.column = 1, 0  # read by CommonToken's constructor; each token then gets its own

    def getSourceName(self) -> str:  # noqa: N802 (ANTLR's interface)
        return "<string>"

    def nextToken(self) -> CommonToken:  # noqa: N802
        kinds, texts, starts, lines, columns = self._tokens
        i = self._next
        if i < len(kinds) - 1:
            self._next = i + 1
        start = starts[i]
        stop = start - 1 if kinds[i] == Token.EOF else start + len(texts[i]) - 1
        token = CommonToken(self._source, kinds[i], Token.DEFAULT_CHANNEL, start, stop)
        token.line = lines[i]
        token.column = columns[i]
        token.text = texts[i]
        return token
