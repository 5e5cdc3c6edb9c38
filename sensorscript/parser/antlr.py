"""From source text to the AST: the only module that imports the generated ANTLR code.

Parsing runs in two stages, as ANTLR recommends for speed: first the fast SLL
prediction mode with an error strategy that bails out at the first problem;
only a script that fails there is parsed again in full LL mode, which finds
every syntax error and reports each with its position.

Well-formed scripts rarely get here: `parser/descent.py` parses them first, by
hand, to the same AST, and hands every script with a problem of any kind to
this module, so that all syntax and lexical messages come from here.
"""

from __future__ import annotations

import re

from antlr4 import CommonTokenStream, Token
from antlr4.error.ErrorListener import ErrorListener
from antlr4.error.ErrorStrategy import BailErrorStrategy, DefaultErrorStrategy
from antlr4.error.Errors import ParseCancellationException
from antlr4.tree.Tree import TerminalNode
from antlr4.atn.PredictionMode import PredictionMode

from sensorscript.errors import Diagnostic, did_you_mean, error
from sensorscript.parser import ast
from sensorscript.parser._generated.SensorScriptLexer import SensorScriptLexer
from sensorscript.parser._generated.SensorScriptParser import SensorScriptParser
from sensorscript.parser._generated.SensorScriptVisitor import SensorScriptVisitor
from sensorscript.parser.tokens import FastLexer

DURATION_UNITS = {"ms": 1, "s": 1_000, "min": 60_000, "h": 3_600_000}
WINDOW_FUNCTIONS = ("avg", "max", "min", "sum", "count")
STRATEGIES = ("any", "next", "strict")
EMITS = ("all", "first")
PARTITION_KEYS = ("sensor",)

# How tokens are named in syntax errors: what the user typed, not ANTLR's names.
_TOKEN_NAMES = {
    "IDENT": "a name",
    "STRING": 'a quoted name',
    "NUMBER": "a number",
    "DURATION": "a duration",
    "<EOF>": "end of file",
}


def parse_tree(text: str, file: str) -> tuple[SensorScriptParser.WorkflowContext, CommonTokenStream, list[Diagnostic]]:
    """Parse `text`; returns the tree, the tokens and the syntax errors (empty when it parsed)."""
    tokens = CommonTokenStream(FastLexer(text))
    tokens.fill()
    too_deep = _check_limits(tokens.tokens, file)
    if too_deep:
        return None, tokens, too_deep
    parser = SensorScriptParser(tokens)
    parser.removeErrorListeners()
    parser._interp.predictionMode = PredictionMode.SLL
    parser._errHandler = BailErrorStrategy()
    try:
        return parser.workflow(), tokens, []
    except ParseCancellationException:
        pass
    tokens.seek(0)
    parser.reset()
    parser._interp.predictionMode = PredictionMode.LL
    parser._errHandler = DefaultErrorStrategy()
    listener = _SyntaxErrors(file)
    parser.addErrorListener(listener)
    tree = parser.workflow()
    return tree, tokens, listener.diagnostics


# Limits that keep every later stage (hashing, walking, printing the AST) far from
# Python's recursion limit. Real scripts stay well below them.
MAX_PAREN_DEPTH = 100
MAX_OPERATORS_PER_STATEMENT = 250
_OPERATOR_TYPES = {SensorScriptParser.literalNames.index(f"'{op}'")
                   for op in ("-", "+", "*", "/", ">", ">=", "<", "<=", "==", "!=", "and", "or", "not")}
_OPEN = SensorScriptParser.literalNames.index("'('")
_CLOSE = SensorScriptParser.literalNames.index("')'")
_SEMI = SensorScriptParser.literalNames.index("';'")


def _check_limits(tokens: list[Token], file: str) -> list[Diagnostic]:
    depth = operators = 0
    for token in tokens:
        if token.type == _OPEN:
            depth += 1
            if depth > MAX_PAREN_DEPTH:
                return [error(f"parentheses nest deeper than {MAX_PAREN_DEPTH} levels; split the expression "
                              f"into named streams", _token_span(file, token))]
        elif token.type == _CLOSE:
            depth = max(0, depth - 1)
        elif token.type in _OPERATOR_TYPES:
            operators += 1
            if operators > MAX_OPERATORS_PER_STATEMENT:
                return [error(f"a statement may have at most {MAX_OPERATORS_PER_STATEMENT} operators; split it "
                              f"into named streams", _token_span(file, token))]
        elif token.type == _SEMI:
            operators = 0
    return []


def _token_span(file: str, token: Token) -> ast.Span:
    text = token.text or ""
    if token.type == Token.EOF:
        text = ""
    lines = text.split("\n")
    if len(lines) == 1:
        end_line, end_col = token.line, token.column + 1 + max(len(text), 1)
    else:
        end_line, end_col = token.line + len(lines) - 1, len(lines[-1]) + 1
    return ast.Span(file, token.line, token.column + 1, end_line, end_col)


def _after_token(file: str, token: Token) -> ast.Span:
    """The position just after `token`: where a missing ';' belongs."""
    span = _token_span(file, token)
    return ast.Span(file, span.end_line, span.end_column, span.end_line, span.end_column + 1)


def _describe(parser: SensorScriptParser, token_type: int) -> str:
    if token_type == Token.EOF:
        return "end of file"
    literal = parser.literalNames[token_type] if token_type < len(parser.literalNames) else "<INVALID>"
    if literal != "<INVALID>":
        return literal
    symbolic = parser.symbolicNames[token_type]
    return _TOKEN_NAMES.get(symbolic, symbolic.lower())


class _SyntaxErrors(ErrorListener):
    def __init__(self, file: str):
        self.file = file
        self.diagnostics: list[Diagnostic] = []

    def syntaxError(self, recognizer, offendingSymbol, line, column, msg, e):  # noqa: N802 (ANTLR's name)
        token: Token = offendingSymbol
        span = _token_span(self.file, token)
        kind = recognizer.symbolicNames[token.type] if token.type > 0 else "<EOF>"
        shown = "end of file" if token.type == Token.EOF else f"'{token.text}'"
        if kind == "UNEXPECTED_CHAR":
            message = f"unexpected character {shown}"
        elif kind == "UNTERMINATED_STRING":
            message = 'unterminated quoted name: a closing " is missing on this line'
        elif kind == "UNTERMINATED_COMMENT":
            message = "unterminated comment: '/*' has no closing '*/'"
            span = ast.Span(self.file, span.line, span.column, span.line, span.column + 2)
        elif msg.startswith("missing "):
            expected = msg[len("missing "):].split(" at ")[0]
            message = f"expected {expected} here"
            previous = recognizer.getTokenStream().LT(-1)
            if previous is not None:
                span = _after_token(self.file, previous)
        else:
            expected = sorted({_describe(recognizer, t) for t in _expected(recognizer, e)})
            message = f"unexpected {shown}"
            if expected == ["';'"] or (0 < len(expected) <= 4 and "';'" in expected):
                # Almost always a forgotten ';' at the end of the previous statement.
                previous = recognizer.getTokenStream().LT(-1)
                if previous is not None and previous.line < token.line:
                    message = "expected ';' at the end of the statement"
                    span = _after_token(self.file, previous)
                else:
                    message += "; expected " + " or ".join(expected)
            elif 0 < len(expected) <= 5:
                message += "; expected " + " or ".join(expected)
        if not any(d.span == span for d in self.diagnostics):
            self.diagnostics.append(error(message, span))


def _expected(parser, e) -> list[int]:
    try:
        if e is not None and e.getExpectedTokens() is not None:
            interval = e.getExpectedTokens()
        else:
            interval = parser.getExpectedTokens()
    except Exception:  # ANTLR can fail to compute the set after recovery; the message still stands
        return []
    return [t for r in interval.intervals for t in r]


# ---------------------------------------------------------------------- visitor


class _Builder(SensorScriptVisitor):
    """Turns a parse tree into the AST; lexical mistakes (units, numbers) become diagnostics."""

    def __init__(self, file: str):
        self.file = file
        self.diagnostics: list[Diagnostic] = []
        self._in_pattern = False

    # spans ------------------------------------------------------------------
    def span(self, ctx) -> ast.Span:
        start: Token = ctx.start
        stop: Token = ctx.stop if ctx.stop is not None else ctx.start
        end = _token_span(self.file, stop)
        return ast.Span(self.file, start.line, start.column + 1, end.end_line, end.end_column)

    def tspan(self, token: Token) -> ast.Span:
        return _token_span(self.file, token)

    # workflow ---------------------------------------------------------------
    def visitWorkflow(self, ctx):
        return tuple(self.visit(s) for s in ctx.statement())

    def visitStatement(self, ctx):
        if ctx.pattern() is not None:
            self._in_pattern = True
            try:
                value = self.visit(ctx.pattern())
            finally:
                self._in_pattern = False
        else:
            value = self.visit(ctx.expr())
        return ast.Statement(ctx.name.text, value, self.span(ctx), self.tspan(ctx.name))

    # expressions ------------------------------------------------------------
    def visitExpr(self, ctx):
        """Group the flat operand/operator sequence by precedence (precedence climbing)."""
        items = ctx.children
        position = 0

        def operand(min_level: int) -> ast.Expr:
            nonlocal position
            item = items[position]
            position += 1
            if isinstance(item, TerminalNode):  # a prefix operator: - or not
                token = item.getSymbol()
                op = "not" if token.text == "not" else "-"
                level = ast.PRECEDENCE["not" if op == "not" else "neg"]
                inner = binary(level)
                return ast.Unary(op, inner, self._join(self.tspan(token), inner.span))
            return self.visit(item)

        def binary(min_level: int) -> ast.Expr:
            nonlocal position
            left = operand(min_level)
            while position < len(items):
                op = items[position].getText()
                level = ast.PRECEDENCE[op]
                if level < min_level:
                    break
                position += 1
                right = binary(level + 1)  # left-associative
                left = ast.Binary(op, left, right, self._join(left.span, right.span))
            return left

        return binary(0)

    def _join(self, first: ast.Span, last: ast.Span) -> ast.Span:
        return ast.Span(self.file, first.line, first.column, last.end_line, last.end_column)

    def visitAtom(self, ctx):
        if ctx.name is not None:
            if ctx.call is not None:
                return self._call(ctx)
            if ctx.attr is not None:
                return ast.Attribute(ctx.name.text, ctx.attr.text, self.span(ctx))
            return ast.Ref(ctx.name.text, False, self.span(ctx))
        if ctx.inner is not None:
            return self.visit(ctx.inner)
        token = ctx.start
        kind = token.type
        if kind == SensorScriptLexer.NUMBER:
            return ast.Number(float(token.text.replace("_", "")), token.text, self.tspan(token))
        if kind == SensorScriptLexer.DURATION:
            return self._duration(token)
        value = _unquote(token.text)  # STRING
        if self._in_pattern:
            return ast.String(value, self.tspan(token))
        return ast.Ref(value, True, self.tspan(token))

    def _call(self, ctx):
        func = ctx.name.text
        args = tuple(self.visit(a) for a in ctx.args)
        span = self.span(ctx)
        if not self._in_pattern:
            if func in WINDOW_FUNCTIONS and len(args) == 3 and all(_is_duration(a) for a in args[1:]):
                return ast.Window(func, args[0], _as_duration(args[1]), _as_duration(args[2]), span)
            if func == "union":
                return ast.Union_(args, span)
        return ast.Call(func, args, span)

    def _duration(self, token: Token) -> ast.Duration:
        text = token.text
        digits, unit = re.fullmatch(r"([0-9_]+)([a-zA-Z]+)", text).groups()
        if unit not in DURATION_UNITS:
            self.diagnostics.append(error(
                f"unknown duration unit '{unit}' in '{text}'{did_you_mean(unit, DURATION_UNITS)}"
                f" (units: {', '.join(DURATION_UNITS)}; no unit means milliseconds)",
                self.tspan(token)))
            return ast.Duration(0, "", self.tspan(token))  # no text: already reported, not "non-positive"
        return ast.Duration(int(digits.replace("_", "")) * DURATION_UNITS[unit], text, self.tspan(token))

    # patterns ---------------------------------------------------------------
    def visitPattern(self, ctx):
        elements = tuple(self.visit(e) for e in ctx.elements)
        clauses: dict[str, object] = {}
        within = None
        for clause_ctx in ctx.clauses:
            keyword = clause_ctx.start.text
            if keyword in clauses:
                self.diagnostics.append(error(f"a pattern takes one '{keyword}' clause; this is a second one",
                                              self.span(clause_ctx)))
                continue
            clauses[keyword] = self.visit(clause_ctx)
            if keyword == "within":
                within = (clauses[keyword], clause_ctx)
        span = self.span(ctx)
        if within is None:
            self.diagnostics.append(error(
                "a pattern needs 'within DURATION' to bound how long a match may take (e.g. within 10min)",
                ast.Span(self.file, span.line, span.column, span.line, span.column + len("pattern"))))
            within_value = ast.Duration(0, "", span)
        else:
            value, clause_ctx = within
            if _is_duration(value):
                within_value = _as_duration(value)
            else:
                self.diagnostics.append(error("'within' takes a duration such as 10min or 600_000",
                                              self.span(clause_ctx.expr())))
                within_value = ast.Duration(0, "", self.span(clause_ctx))
        return ast.Pattern(
            elements=elements,
            within=within_value,
            where=clauses.get("where"),
            strategy=clauses.get("strategy", "any"),
            emit=clauses.get("emit", "all"),
            partition_by=clauses.get("partition"),
            yield_=clauses.get("yield"),
            span=span,
        )

    def visitPatternElement(self, ctx):
        stream = ctx.stream
        if stream.STRING() is not None:
            ref = ast.Ref(_unquote(stream.getText()), True, self.span(stream))
        else:
            ref = ast.Ref(stream.getText(), False, self.span(stream))
        return ast.PatternElement(ctx.var.text, ref, ctx.kleene is not None, ctx.negated is not None, self.span(ctx))

    def visitWhereClause(self, ctx):
        return self.visit(ctx.expr())

    visitYieldClause = visitWithinClause = visitWhereClause

    def _choice(self, ctx, options: tuple[str, ...], what: str) -> str:
        value = ctx.value.text
        if value not in options:
            self.diagnostics.append(error(
                f"unknown {what} '{value}'{did_you_mean(value, options)} (one of: {', '.join(options)})",
                self.tspan(ctx.value)))
            return options[0]
        return value

    def visitStrategyClause(self, ctx):
        return self._choice(ctx, STRATEGIES, "strategy")

    def visitEmitClause(self, ctx):
        return self._choice(ctx, EMITS, "emit mode")

    def visitPartitionClause(self, ctx):
        return self._choice(ctx, PARTITION_KEYS, "partition key")


def _unquote(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text[1:-1])


def _is_duration(node: object) -> bool:
    """A duration literal, or an integer literal (milliseconds)."""
    if isinstance(node, ast.Duration):
        return True
    return isinstance(node, ast.Number) and re.fullmatch(r"[0-9_]+", node.text) is not None


def _as_duration(node: ast.Duration | ast.Number) -> ast.Duration:
    if isinstance(node, ast.Duration):
        return node
    return ast.Duration(int(node.value), node.text, node.span)


def build_workflow(tree, file: str) -> tuple[tuple[ast.Statement, ...], list[Diagnostic]]:
    builder = _Builder(file)
    statements = builder.visit(tree)
    return statements, builder.diagnostics
