"""A fast tokenizer that produces exactly the tokens of the generated ANTLR lexer.

ANTLR's Python lexer simulator spends ~10 us per token; this one dispatches on
the first character and uses a few compiled regular expressions, about six
times faster. The grammar stays the definition: tests/test_tokens.py checks on
random input that both produce the same token stream (type, text, line,
column), so a change to the lexer rules that is not mirrored here fails.
"""

from __future__ import annotations

import re

from antlr4 import InputStream, Token
from antlr4.CommonTokenFactory import CommonTokenFactory
from antlr4.Token import CommonToken

from sensorscript.parser._generated.SensorScriptLexer import SensorScriptLexer as L

_LITERALS = {name.strip("'"): index for index, name in enumerate(L.literalNames) if name.startswith("'")}
_KEYWORDS = {text: kind for text, kind in _LITERALS.items() if text.isalpha()}
_OPERATORS = {text: kind for text, kind in _LITERALS.items() if not text.isalpha()}
_TWO_CHAR = {text for text in _OPERATORS if len(text) == 2}

_WS = re.compile(r"[ \t\r\n\f]+")
_IDENT = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_DIGITS = r"[0-9]+(?:_[0-9]+)*"
_DURATION = re.compile(_DIGITS + r"[a-zA-Z]+")
_NUMBER = re.compile(_DIGITS + r"(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_FRACTION = re.compile(r"\.[0-9]+(?:[eE][+-]?[0-9]+)?")
_STRING_BODY = re.compile(r'"(?:[^"\\\r\n]|\\[^\r\n])*')
_LINE_COMMENT = re.compile(r"//[^\r\n]*")


class FastLexer:
    """An ANTLR TokenSource over a whole string (the interface CommonTokenStream needs)."""

    def __init__(self, text: str):
        self.text = text
        self.input = InputStream(text)
        self.pos = 0
        self.line = 1
        self.column = 0
        self._line_start = 0
        self._factory = CommonTokenFactory.DEFAULT
        self._source = (self, self.input)

    def getSourceName(self) -> str:  # noqa: N802 (ANTLR's interface)
        return "<string>"

    def _advance(self, end: int) -> None:
        """Move to `end`, keeping line and column as ANTLR counts them ('\\n' ends a line)."""
        newlines = self.text.count("\n", self.pos, end)
        if newlines:
            self.line += newlines
            self._line_start = self.text.rindex("\n", self.pos, end) + 1
        self.pos = end
        self.column = end - self._line_start

    def _token(self, kind: int, end: int) -> CommonToken:
        token = CommonToken(self._source, kind, Token.DEFAULT_CHANNEL, self.pos, end - 1)
        token.line = self.line
        token.column = self.column
        token.text = self.text[self.pos:end]
        self._advance(end)
        return token

    def nextToken(self) -> CommonToken:  # noqa: N802
        text, n = self.text, len(self.text)
        while True:  # skip whitespace and comments
            if self.pos >= n:
                eof = CommonToken(self._source, Token.EOF, Token.DEFAULT_CHANNEL, self.pos, self.pos - 1)
                eof.line, eof.column, eof.text = self.line, self.column, "<EOF>"
                return eof
            c = text[self.pos]
            if c in " \t\r\n\f":
                self._advance(_WS.match(text, self.pos).end())
            elif text.startswith("//", self.pos):
                self._advance(_LINE_COMMENT.match(text, self.pos).end())
            elif text.startswith("/*", self.pos):
                close = text.find("*/", self.pos + 2)
                if close < 0:
                    return self._token(L.UNTERMINATED_COMMENT, n)
                self._advance(close + 2)
            else:
                break
        pos = self.pos
        if c.isascii() and (c.isalpha() or c == "_"):
            end = _IDENT.match(text, pos).end()
            return self._token(_KEYWORDS.get(text[pos:end], L.IDENT), end)
        if c.isascii() and c.isdigit():
            # Longest match, as ANTLR's lexer does: "1e3" is a NUMBER, "1e" and "10min" DURATIONs.
            number = _NUMBER.match(text, pos).end()
            duration = _DURATION.match(text, pos)
            if duration is not None and duration.end() > number:
                return self._token(L.DURATION, duration.end())
            return self._token(L.NUMBER, number)
        if c == '"':
            end = _STRING_BODY.match(text, pos).end()
            if end < n and text[end] == '"':
                return self._token(L.STRING, end + 1)
            return self._token(L.UNTERMINATED_STRING, end)
        if c == ".":
            fraction = _FRACTION.match(text, pos)
            if fraction is not None:
                return self._token(L.NUMBER, fraction.end())
        pair = text[pos:pos + 2]
        if pair in _TWO_CHAR:
            return self._token(_OPERATORS[pair], pos + 2)
        if c in _OPERATORS:
            return self._token(_OPERATORS[c], pos + 1)
        return self._token(L.UNEXPECTED_CHAR, pos + 1)
