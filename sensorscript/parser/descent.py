"""A recursive-descent fast path for well-formed scripts; ANTLR stays the definition.

The generated ANTLR parser and the tree visitor cost ~300 us per statement in
Python, most of the time of a large compile. Scripts are nearly always well
formed, so this module parses the grammar of grammar/SensorScript.g4 by hand,
straight from the tokenizer's lists to the AST, and builds exactly what the
ANTLR tree and `antlr._Builder` build: the same nodes, texts and spans.

It accepts nothing ANTLR would reject. At the first token the grammar does not
allow, and at anything the builder or the parse limits would report (an unknown
duration unit, a second `within` or none, ...), it gives up and returns None;
the caller then parses the script with ANTLR, which finds and words every
error. So a script either parses here to the AST ANTLR would give, or ANTLR
decides, and no message depends on this module.

Rule by rule it mirrors the grammar, which is LL(1): a change to the grammar
must be made here too. Comparing both parsers on random scripts, as
tests/test_tokens.py compares the tokenizers, catches a mismatch.
"""

from __future__ import annotations

from antlr4 import Token

from sensorscript.parser import ast
from sensorscript.parser.antlr import (DURATION_UNITS, EMITS, MAX_OPERATORS_PER_STATEMENT, MAX_PAREN_DEPTH,
                                       PARTITION_KEYS, STRATEGIES, WINDOW_FUNCTIONS, _as_duration, _is_duration)
from sensorscript.parser.antlr import _unquote as _unescape
from sensorscript.parser.tokens import LITERALS, TOKEN_TYPES, tokenize

_EOF = Token.EOF
_IDENT, _NUMBER, _DURATION, _STRING = TOKEN_TYPES.IDENT, TOKEN_TYPES.NUMBER, TOKEN_TYPES.DURATION, TOKEN_TYPES.STRING
_ASSIGN, _SEMI, _MINUS, _PLUS = LITERALS["="], LITERALS[";"], LITERALS["-"], LITERALS["+"]
_OPEN, _CLOSE, _COMMA, _DOT = LITERALS["("], LITERALS[")"], LITERALS[","], LITERALS["."]
_ARROW, _BANG, _COLON = LITERALS["->"], LITERALS["!"], LITERALS[":"]
_NOT, _PATTERN, _BY = LITERALS["not"], LITERALS["pattern"], LITERALS["by"]
_WHERE, _WITHIN, _YIELD = LITERALS["where"], LITERALS["within"], LITERALS["yield"]
_STRATEGY, _EMIT, _PARTITION = LITERALS["strategy"], LITERALS["emit"], LITERALS["partition"]
_PREFIX = frozenset((_NOT, _MINUS))
_BINARY = frozenset(LITERALS[op] for op in ("*", "/", "+", "-", ">", ">=", "<", "<=", "==", "!=", "and", "or"))
_OPERATORS = frozenset(LITERALS[op] for op in ("-", "+", "*", "/", ">", ">=", "<", "<=", "==", "!=", "and",
                                                 "or", "not"))  # as antlr._check_limits counts them
_EXPR_CLAUSES = frozenset((_WHERE, _WITHIN, _YIELD))
_CHOICE_CLAUSES = {_STRATEGY: STRATEGIES, _EMIT: EMITS}
_PRECEDENCE = ast.PRECEDENCE
_NEG_LEVEL, _NOT_LEVEL = ast.PRECEDENCE["neg"], ast.PRECEDENCE["not"]

Span, Ref, Number, Duration = ast.Span, ast.Ref, ast.Number, ast.Duration


class _GiveUp(Exception):
    """Not a script this fast path parses cleanly: leave it to ANTLR."""


def parse_statements(text: str, file: str) -> tuple[ast.Statement, ...] | None:
    """The statements of a well-formed script, or None when ANTLR must parse it (any error)."""
    kinds, texts, _, lines, columns = tokenize(text)
    if kinds.count(_OPEN) > MAX_PAREN_DEPTH or sum(map(kinds.count, _OPERATORS)) > MAX_OPERATORS_PER_STATEMENT:
        if not _within_limits(kinds):
            return None  # antlr._check_limits reports it
    try:
        return _Parser(file, kinds, texts, lines, columns).workflow()
    except (_GiveUp, RecursionError):
        return None


def _within_limits(kinds: list[int]) -> bool:
    """Whether antlr._check_limits lets these tokens through."""
    depth = operators = 0
    for kind in kinds:
        if kind == _OPEN:
            depth += 1
            if depth > MAX_PAREN_DEPTH:
                return False
        elif kind == _CLOSE:
            depth = max(0, depth - 1)
        elif kind in _OPERATORS:
            operators += 1
            if operators > MAX_OPERATORS_PER_STATEMENT:
                return False
        elif kind == _SEMI:
            operators = 0
    return True


class _Parser:
    def __init__(self, file: str, kinds: list[int], texts: list[str], lines: list[int], columns: list[int]):
        self.file = file
        self.kinds = kinds
        self.texts = texts
        self.lines = lines
        self.columns = columns
        self.i = 0
        self.in_pattern = False

    # tokens and spans -------------------------------------------------------
    def expect(self, kind: int) -> int:
        i = self.i
        if self.kinds[i] != kind:
            raise _GiveUp
        self.i = i + 1
        return i

    def tspan(self, i: int) -> ast.Span:
        """The span of token i, as antlr._token_span (tokens the parser accepts hold no line break)."""
        line, column = self.lines[i], self.columns[i] + 1
        return Span(self.file, line, column, line, column + len(self.texts[i]))

    def span(self, first: int, last: int) -> ast.Span:
        """From the start of token `first` to the end of token `last`, as antlr._Builder.span."""
        return Span(self.file, self.lines[first], self.columns[first] + 1, self.lines[last],
                    self.columns[last] + 1 + len(self.texts[last]))

    # workflow : statement* EOF ; --------------------------------------------
    def workflow(self) -> tuple[ast.Statement, ...]:
        statements = []
        kinds = self.kinds
        while kinds[self.i] == _IDENT:
            statements.append(self.statement())
        if kinds[self.i] != _EOF:
            raise _GiveUp
        return tuple(statements)

    # statement : name=IDENT '=' (pattern | expr) ';' ; ------------------------
    def statement(self) -> ast.Statement:
        name = self.expect(_IDENT)
        self.expect(_ASSIGN)
        if self.kinds[self.i] == _PATTERN:
            self.in_pattern = True
            value = self.pattern()
            self.in_pattern = False
        else:
            value = self.expr()
        semi = self.expect(_SEMI)
        return ast.Statement(self.texts[name], value, self.span(name, semi), self.tspan(name))

    # expr : (NOT | '-')* atom (BINARY (NOT | '-')* atom)* ; ------------------
    def expr(self) -> ast.Expr:
        kinds = self.kinds
        items: list = []  # token indices (operators) and ASTs (atoms), as the ANTLR context's children
        while True:
            while kinds[self.i] in _PREFIX:
                items.append(self.i)
                self.i += 1
            items.append(self.atom())
            if kinds[self.i] not in _BINARY:
                break
            items.append(self.i)
            self.i += 1
        if len(items) == 1:
            return items[0]
        return _Climb(self, items).binary(0)

    # atom -----------------------------------------------------------------
    def atom(self) -> ast.Expr:
        i = self.i
        kinds = self.kinds
        kind = kinds[i]
        self.i = i + 1
        if kind == _IDENT:
            following = kinds[i + 1]
            if following == _OPEN:
                return self.call(i)
            if following == _DOT:
                self.i = i + 2
                attr = self.expect(_IDENT)
                return ast.Attribute(self.texts[i], self.texts[attr], self.span(i, attr))
            text = self.texts[i]
            line, column = self.lines[i], self.columns[i] + 1
            return Ref(text, False, Span(self.file, line, column, line, column + len(text)))
        if kind == _NUMBER:
            text = self.texts[i]
            line, column = self.lines[i], self.columns[i] + 1
            return Number(float(text.replace("_", "")), text, Span(self.file, line, column, line, column + len(text)))
        if kind == _DURATION:
            return self.duration(i)
        if kind == _STRING:
            text = self.texts[i]
            if self.in_pattern:
                return ast.String(_unquote(text), self.tspan(i))
            return Ref(_unquote(text), True, self.tspan(i))
        if kind == _OPEN:
            inner = self.expr()
            self.expect(_CLOSE)
            return inner
        raise _GiveUp

    def call(self, name: int) -> ast.Expr:
        """name '(' (expr (',' expr)*)? ')', read as antlr._Builder._call reads it."""
        kinds = self.kinds
        self.i = name + 2
        args = []
        if kinds[self.i] != _CLOSE:
            args.append(self.expr())
            while kinds[self.i] == _COMMA:
                self.i += 1
                args.append(self.expr())
        close = self.expect(_CLOSE)
        func = self.texts[name]
        span = self.span(name, close)
        if not self.in_pattern:
            if func in WINDOW_FUNCTIONS and len(args) == 3:
                length, slide = _window_duration(args[1]), _window_duration(args[2])
                if length is not None and slide is not None:
                    return ast.Window(func, args[0], length, slide, span)
            if func == "union":
                return ast.Union_(tuple(args), span)
        return ast.Call(func, tuple(args), span)

    def duration(self, i: int) -> ast.Duration:
        text = self.texts[i]
        unit_at = len(text.rstrip("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"))
        unit = text[unit_at:]
        if unit not in DURATION_UNITS:
            raise _GiveUp  # reported by the ANTLR path
        return ast.Duration(int(text[:unit_at].replace("_", "")) * DURATION_UNITS[unit], text, self.tspan(i))

    # pattern ----------------------------------------------------------------
    def pattern(self) -> ast.Pattern:
        """PATTERN '(' patternElement ('->' patternElement)* ')' patternClause*, as visitPattern."""
        kinds = self.kinds
        start = self.expect(_PATTERN)
        self.expect(_OPEN)
        elements = [self.element()]
        while kinds[self.i] == _ARROW:
            self.i += 1
            elements.append(self.element())
        last = self.expect(_CLOSE)
        clauses: dict[str, object] = {}
        while True:
            kind = kinds[self.i]
            keyword = self.texts[self.i]
            if kind in _EXPR_CLAUSES:
                self.i += 1
                value = self.expr()
            elif kind in _CHOICE_CLAUSES:
                self.i += 1
                value = self.texts[self.expect(_IDENT)]
                if value not in _CHOICE_CLAUSES[kind]:
                    raise _GiveUp  # unknown strategy or emit mode
            elif kind == _PARTITION:
                self.i += 1
                self.expect(_BY)
                value = self.texts[self.expect(_IDENT)]
                if value not in PARTITION_KEYS:
                    raise _GiveUp
            else:
                break
            if keyword in clauses:
                raise _GiveUp  # a second clause of a kind
            clauses[keyword] = value
            last = self.i - 1
        within = clauses.get("within")
        if within is None or not _is_duration(within):
            raise _GiveUp  # missing, or not a duration
        return ast.Pattern(
            elements=tuple(elements),
            within=_as_duration(within),
            where=clauses.get("where"),
            strategy=clauses.get("strategy", "any"),
            emit=clauses.get("emit", "all"),
            partition_by=clauses.get("partition"),
            yield_=clauses.get("yield"),
            span=self.span(start, last),
        )

    def element(self) -> ast.PatternElement:
        """negated='!'? var=IDENT ':' stream=(IDENT | STRING) kleene='+'?"""
        kinds = self.kinds
        start = self.i
        negated = kinds[start] == _BANG
        if negated:
            self.i += 1
        var = self.expect(_IDENT)
        self.expect(_COLON)
        stream = self.i
        if kinds[stream] == _STRING:
            ref = ast.Ref(_unquote(self.texts[stream]), True, self.tspan(stream))
        elif kinds[stream] == _IDENT:
            ref = ast.Ref(self.texts[stream], False, self.tspan(stream))
        else:
            raise _GiveUp
        self.i = last = stream + 1
        kleene = kinds[last] == _PLUS
        if kleene:
            self.i += 1
        else:
            last = stream
        return ast.PatternElement(self.texts[var], ref, kleene, negated, self.span(start, last))


class _Climb:
    """Precedence climbing over an expression's flat operands and operators (antlr._Builder.visitExpr)."""

    def __init__(self, parser: _Parser, items: list):
        self.parser = parser
        self.items = items
        self.position = 0

    def operand(self) -> ast.Expr:
        item = self.items[self.position]
        self.position += 1
        if type(item) is int:  # a prefix operator: - or not
            parser = self.parser
            op = "not" if parser.texts[item] == "not" else "-"
            inner = self.binary(_NOT_LEVEL if op == "not" else _NEG_LEVEL)
            return ast.Unary(op, inner, _join(parser.tspan(item), inner.span))
        return item

    def binary(self, min_level: int) -> ast.Expr:
        items, texts = self.items, self.parser.texts
        left = self.operand()
        while self.position < len(items):
            op = texts[items[self.position]]
            level = _PRECEDENCE[op]
            if level < min_level:
                break
            self.position += 1
            right = self.binary(level + 1)  # left-associative
            left = ast.Binary(op, left, right, _join(left.span, right.span))
        return left


def _window_duration(node: ast.Expr) -> ast.Duration | None:
    """A window's length or slide as antlr._Builder reads it (`_as_duration`), or None when not one."""
    if type(node) is Duration:
        return node
    if type(node) is Number and node.text and node.text.strip("0123456789_") == "":  # an integer literal: milliseconds
        return Duration(int(node.value), node.text, node.span)
    return None if not _is_duration(node) else _as_duration(node)


def _unquote(text: str) -> str:
    """A quoted name's text, as antlr._unquote gives it."""
    body = text[1:-1]
    return body if "\\" not in body else _unescape(text)


def _join(first: ast.Span, last: ast.Span) -> ast.Span:
    return Span(first.file, first.line, first.column, last.end_line, last.end_column)
