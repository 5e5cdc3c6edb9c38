"""From source text to the AST: the only module that imports the generated ANTLR code.

Parsing runs in two stages, as ANTLR recommends for speed: first the fast SLL
prediction mode with an error strategy that bails out at the first problem;
only a script that fails there is parsed again in full LL mode, which finds
every syntax error and reports each with its position.
"""

from __future__ import annotations

import re

from antlr4 import CommonTokenStream, InputStream, Token
from antlr4.error.ErrorListener import ErrorListener
from antlr4.error.ErrorStrategy import BailErrorStrategy, DefaultErrorStrategy
from antlr4.error.Errors import ParseCancellationException
from antlr4.atn.PredictionMode import PredictionMode

from sensorscript.errors import Diagnostic, did_you_mean, error
from sensorscript.parser import ast
from sensorscript.parser._generated.SensorScriptLexer import SensorScriptLexer
from sensorscript.parser._generated.SensorScriptParser import SensorScriptParser
from sensorscript.parser._generated.SensorScriptVisitor import SensorScriptVisitor

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
    lexer = SensorScriptLexer(InputStream(text))
    lexer.removeErrorListeners()  # the grammar's UNEXPECTED_CHAR token means the lexer never fails
    tokens = CommonTokenStream(lexer)
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

    def visitExprStatement(self, ctx):
        return ast.Statement(ctx.name.text, self.visit(ctx.expr()), self.span(ctx), self.tspan(ctx.name))

    def visitPatternStatement(self, ctx):
        self._in_pattern = True
        try:
            pattern = self.visit(ctx.pattern())
        finally:
            self._in_pattern = False
        return ast.Statement(ctx.name.text, pattern, self.span(ctx), self.tspan(ctx.name))

    # expressions ------------------------------------------------------------
    def visitNegExpr(self, ctx):
        return ast.Unary("-", self.visit(ctx.operand), self.span(ctx))

    def visitNotExpr(self, ctx):
        return ast.Unary("not", self.visit(ctx.operand), self.span(ctx))

    def _binary(self, ctx):
        return ast.Binary(ctx.op.text, self.visit(ctx.left), self.visit(ctx.right), self.span(ctx))

    visitMulExpr = visitAddExpr = visitCompareExpr = visitAndExpr = visitOrExpr = _binary

    def visitAtomExpr(self, ctx):
        return self.visit(ctx.atom())

    def visitParenAtom(self, ctx):
        return self.visit(ctx.expr())

    def visitNumberAtom(self, ctx):
        text = ctx.getText()
        return ast.Number(float(text.replace("_", "")), text, self.span(ctx))

    def visitDurationAtom(self, ctx):
        return self._duration(ctx.DURATION().getSymbol())

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

    def visitNameAtom(self, ctx):
        return ast.Ref(ctx.getText(), False, self.span(ctx))

    def visitStringAtom(self, ctx):
        value = _unquote(ctx.getText())
        if self._in_pattern:
            return ast.String(value, self.span(ctx))
        return ast.Ref(value, True, self.span(ctx))

    def visitAttributeAtom(self, ctx):
        return ast.Attribute(ctx.var.text, ctx.attr.text, self.span(ctx))

    def visitCallAtom(self, ctx):
        func = ctx.func.text
        args = tuple(self.visit(a) for a in ctx.args)
        span = self.span(ctx)
        if not self._in_pattern:
            if func in WINDOW_FUNCTIONS and len(args) == 3 and all(_is_duration(a) for a in args[1:]):
                stream = args[0]
                return ast.Window(func, stream, _as_duration(args[1]), _as_duration(args[2]), span)
            if func == "union":
                return ast.Union_(args, span)
        return ast.Call(func, args, span)

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
