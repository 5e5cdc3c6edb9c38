"""From source text to the AST: the only module that imports the generated ANTLR code.

The grammar, grammar/SensorScript.g4, is the language's one definition; every
script is lexed and parsed by the code ANTLR generates from it, and one visitor
(`_Builder`) turns the parse tree into the project's AST.

Parsing runs in two stages, as ANTLR recommends for speed: first the fast SLL
prediction mode with an error strategy that gives up at the first problem; only
a script that fails there is parsed again in full LL mode with ANTLR's error
recovery, which finds the syntax errors and reports each with its position.

Recovery is per statement. A statement whose subtree holds an error (a rule
that failed, a token ANTLR had to skip or invent) is left out of the AST and
reported by its first syntax error; its name, when ANTLR read one, is kept in
`Parsed.broken` so that the checks raise no follow-on error for references to
it. Every other statement is built and checked as usual.

Three pieces of ANTLR's Python runtime are tightened here, all grammar-free:
the lexer walks ANTLR's own DFA in one loop (`_LexerSimulator`), the parser
reads a token list that is complete before parsing starts (`_TokenList`), and
the first, bail-out parse matches tokens and enters rules with fewer calls
(`_BailingParser`).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from antlr4 import CommonTokenStream, InputStream, Token
from antlr4.Token import CommonToken
from antlr4.atn.LexerATNSimulator import LexerATNSimulator
from antlr4.atn.PredictionMode import PredictionMode
from antlr4.error.ErrorListener import ErrorListener
from antlr4.error.ErrorStrategy import BailErrorStrategy, DefaultErrorStrategy
from antlr4.error.Errors import IllegalStateException, LexerNoViableAltException, ParseCancellationException
from antlr4.tree.Tree import ErrorNode, TerminalNode, TerminalNodeImpl

from sensorscript.errors import Diagnostic, did_you_mean, error
from sensorscript.parser import ast
from sensorscript.parser._generated.SensorScriptLexer import SensorScriptLexer
from sensorscript.parser._generated.SensorScriptParser import SensorScriptParser
from sensorscript.parser._generated.SensorScriptVisitor import SensorScriptVisitor

DURATION_UNITS = {"ms": 1, "s": 1_000, "min": 60_000, "h": 3_600_000}
# Units people write for these, and which one each means: `1m` is a minute to whoever writes it, and a
# hint of "ms", the closest spelling, would give a job wrong by 60,000 times.
UNIT_SPELLINGS = {"m": "min", "mins": "min", "minute": "min", "minutes": "min", "sec": "s", "secs": "s",
                  "second": "s", "seconds": "s", "hr": "h", "hrs": "h", "hour": "h", "hours": "h", "msec": "ms",
                  "millis": "ms"}
# Event times are epoch milliseconds in 64 bits: durations stay far below that, and partial matches
# far below what memory holds (the checks say so instead of letting the job overflow).
MAX_DURATION_MS = 100 * 365 * 24 * 3_600_000  # 100 years
MAX_LIMIT = 1_000_000_000
WINDOW_FUNCTIONS = ("avg", "max", "min", "sum", "count")
STRATEGIES = ("any", "next", "strict")
EMITS = ("all", "first")
PARTITION_KEYS = ("sensor",)
# The grammar's reserved words: a stream or sensor with such a name must be quoted.
KEYWORDS = frozenset(name.strip("'") for name in SensorScriptLexer.literalNames if name.strip("'").isalpha())

# How tokens are named in syntax errors: what the user typed, not ANTLR's names.
_TOKEN_NAMES = {
    "IDENT": "a name",
    "STRING": 'a quoted name',
    "NUMBER": "a number",
    "DURATION": "a duration",
    "<EOF>": "end of file",
}


@dataclass(frozen=True)
class Parsed:
    """One script as far as it parsed: the statements that did, the names of those that did not,
    and every syntax and lexical diagnostic."""

    statements: tuple[ast.Statement, ...]
    broken: tuple[str, ...]
    diagnostics: tuple[Diagnostic, ...]


def parse_workflow(text: str, file: str, seen: "SeenStatements | None" = None) -> Parsed:
    """One script parsed; `seen`: the statements parsed before in this run, by their text (a
    statement seen before is not parsed again)."""
    tokens = _TokenList(_Lexer(InputStream(text)))
    too_deep = _check_limits(tokens.tokens, file)
    if too_deep:
        return Parsed((), (), tuple(too_deep))
    if seen is not None:
        statements = seen.statements(tokens, text, file)
        if statements is not None:
            _release_lexer(tokens)
            return Parsed(statements, (), ())
        tokens.index = 0  # parsed whole after all
    parser = _BailingParser(tokens)
    try:
        tree = parser.workflow()
    except ParseCancellationException:
        return _parse_with_recovery(tokens, file)
    builder = _Builder(file)
    statements = tuple(builder.statement(s) for s in tree.statement())
    _release_lexer(tokens)
    _release_tree(parser, tree)
    return Parsed(statements, (), tuple(builder.diagnostics))


class SeenStatements:
    """The statements parsed so far, by their text: a statement written again, in another workflow
    or at another line, is built from the AST of the first at its own place (`ast.moved`) instead
    of being parsed again. Generated workflows repeat statements: the 71,680 statements of the
    10,240 bridge workflows are 12,149 different ones.

    A script is cut at its ';' tokens (the grammar's `statement` ends with one and holds no other)
    and each statement seen for the first time is parsed alone by the generated parser's
    `statement` rule, in the same bail-out parse as a whole script. A statement is known by its
    text and the column it starts at, which fix every token and every span but the file and the
    line. A script in which any statement does not parse alone, or gives a diagnostic, or with
    tokens after its last ';', is parsed whole, as without this.
    """

    def __init__(self) -> None:
        self._known: dict[tuple[str, int], tuple[ast.Statement, int]] = {}

    def statements(self, stream: "_TokenList", text: str, file: str) -> tuple[ast.Statement, ...] | None:
        """A script's statements, or None where it must be parsed whole."""
        tokens = stream.tokens
        found = []
        first = 0
        for last, token in enumerate(tokens):
            if token.type == _END:
                statement = self._statement(stream, first, last, text, file)
                if statement is None:
                    return None
                found.append(statement)
                first = last + 1
        return tuple(found) if tokens[first].type == _EOF else None

    def _statement(self, stream: "_TokenList", first: int, last: int, text: str, file: str) -> ast.Statement | None:
        start = stream.tokens[first]
        key = (text[start.start:stream.tokens[last].stop + 1], start.column)
        known = self._known.get(key)
        if known is not None:
            statement, line = known
            return ast.moved(statement, file, start.line - line)
        statement = _parse_statement(stream, first, last, file)
        if statement is not None:
            self._known[key] = (statement, start.line)
        return statement


def _parse_statement(stream: "_TokenList", first: int, last: int, file: str) -> ast.Statement | None:
    """The script's tokens from `first` to `last` (its ';') parsed by the `statement` rule; None
    when they do not parse as one statement, or give a diagnostic."""
    parser = _BailingParser(stream)
    stream.index = first
    try:
        tree = parser.statement()
    except ParseCancellationException:
        return None
    if stream.index != last + 1:
        return None
    builder = _Builder(file)
    statement = builder.statement(tree)
    _release_tree(parser, tree)
    return None if builder.diagnostics else statement


def _parse_with_recovery(tokens: "_TokenList", file: str) -> Parsed:
    """The full LL parse with ANTLR's error recovery; statements with an error are left out."""
    tokens.seek(0)
    parser = SensorScriptParser(tokens)  # ANTLR's own, every method stock
    parser.removeErrorListeners()
    parser._interp.predictionMode = PredictionMode.LL
    parser._errHandler = _StatementRecovery()
    listener = _SyntaxErrors(file)
    parser.addErrorListener(listener)
    tree = parser.workflow()
    builder = _Builder(file)
    statements, broken = [], []
    for statement in tree.statement():
        if _has_error(statement):
            if statement.name is not None and statement.name.tokenIndex >= 0:  # not a token ANTLR invented
                broken.append(statement.name.text)
        else:
            statements.append(builder.statement(statement))
    # One message per broken statement: its first. What follows inside it mostly echoes that one.
    reported, first_of = [], set()
    for owner, diagnostic in listener.found:
        if owner is None or id(owner) not in first_of:
            reported.append(diagnostic)
            if owner is not None:
                first_of.add(id(owner))
    return Parsed(tuple(statements), tuple(broken), (*reported, *builder.diagnostics))


_IDENT, _EOF = SensorScriptParser.IDENT, Token.EOF
# statement : name=IDENT '=' (pattern | expr) ';' : where a statement opens and where it ends.
_ASSIGN = SensorScriptParser.literalNames.index("'='")
_END = SensorScriptParser.literalNames.index("';'")


class _StatementRecovery(DefaultErrorStrategy):
    """ANTLR's error recovery, bounded by statements.

    Inside a statement ANTLR still mends what one token explains (a missing ';' or ')' is
    supplied, one extraneous token skipped); anything else abandons the whole statement: the
    failure unwinds to the statement rule, which skips to its ';', or to the next `NAME =` when
    the ';' is missing too. Between statements, stray tokens are skipped the same way. ANTLR's
    own resynchronisation would stop at any name and start a phantom statement there, each
    with errors of its own.
    """

    def recover(self, recognizer, e) -> None:
        statement = _statement_of(recognizer._ctx)
        if statement is None:
            return super().recover(recognizer, e)
        if recognizer._ctx is not statement:
            raise e  # caught by each enclosing rule in turn (marking it failed) up to the statement
        _skip_statement(recognizer)

    def sync(self, recognizer) -> None:
        if not isinstance(recognizer._ctx, SensorScriptParser.WorkflowContext):
            return super().sync(recognizer)
        if recognizer.getTokenStream().LA(1) in recognizer.getExpectedTokens():  # a name, or the end
            return
        self.reportUnwantedToken(recognizer)
        _skip_statement(recognizer)


def _skip_statement(recognizer) -> None:
    """Consume tokens up to and with the next ';', or up to the next `NAME =` or the end."""
    stream = recognizer.getTokenStream()
    while True:
        kind = stream.LA(1)
        if kind == _EOF or (kind == _IDENT and stream.LA(2) == _ASSIGN):
            return
        recognizer.consume()
        if kind == _END:
            return


def _has_error(context) -> bool:
    """Whether a rule failed anywhere under `context`, or ANTLR skipped or invented a token there."""
    stack = [context]
    while stack:
        node = stack.pop()
        if isinstance(node, TerminalNode):
            if isinstance(node, ErrorNode):
                return True
            continue
        if node.exception is not None:
            return True
        stack.extend(node.children or ())
    return False


def _release_lexer(tokens: "_TokenList") -> None:
    """Cut the reference cycles of ANTLR's objects once the AST is built (here a lexer and its
    simulator; in `_release_tree` a parser and its simulator, each parse-tree node and its parent),
    so that reference counting frees a script's tokens and tree at once. Left to the cyclic
    collector, the trees of 10,000 scripts (300 objects each) cost a second to find;
    tests/test_parser.py holds this to no cycle. (A script with syntax errors is not released:
    its errors' tracebacks hold the tree too.)"""
    lexer = tokens.tokenSource
    lexer._interp = lexer._token = lexer._tokenFactorySourcePair = None


def _release_tree(parser: SensorScriptParser, tree) -> None:
    parser._interp = parser._ctx = None
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, TerminalNodeImpl):
            _PARENT(node, None)  # (its slot, without TerminalNodeImpl.__setattr__)
        else:
            node.parentCtx = node.parser = None
            if node.children:
                stack.extend(node.children)


# ------------------------------------------------------------------ the runtime, tightened


class _LexerSimulator(LexerATNSimulator):
    """ANTLR's lexer simulator with the loop that walks its DFA written tighter.

    The same DFA (built and cached by ANTLR from the grammar's ATN), the same states and
    edges, the same longest-match and accept rules: only the per-character work of the
    runtime's `execATN` (a method call per lookahead, per consumed character and per edge)
    is done with local variables. An edge not yet in the DFA is computed by ANTLR itself.
    A token found is accepted in place (ANTLR's `failOrAccept` and `accept`: back to its end,
    then its actions, such as skip); anything else goes to `failOrAccept`.
    """

    def match(self, input: InputStream, mode: int):
        # LexerATNSimulator.match without the mark and release of the input (an InputStream's do nothing).
        self.mode = mode
        self.startIndex = input._index
        self.prevAccept.reset()
        dfa = self.decisionToDFA[mode]
        if dfa.s0 is None:
            return self.matchATN(input)
        return self.execATN(input, dfa.s0)

    def execATN(self, input: InputStream, ds0):  # noqa: N802 (ANTLR's name)
        accept = self.prevAccept
        data, size, index = input.data, input._size, input._index
        line, column = self.line, self.column
        failed, eof, top = self.ERROR, Token.EOF, self.MAX_DFA_EDGE
        if ds0.isAcceptState:
            accept.index, accept.line, accept.column, accept.dfaState = index, line, column, ds0
        state = ds0
        while True:
            t = data[index] if index < size else eof
            edges = state.edges
            target = edges[t] if edges is not None and 0 <= t <= top else None
            if target is None:
                input._index, self.line, self.column = index, line, column
                target = self.computeTargetState(input, state, t)
            if target is failed:
                break
            if t != eof:
                index += 1
                if t == 10:  # '\n'
                    line, column = line + 1, 0
                else:
                    column += 1
            if target.isAcceptState:
                accept.index, accept.line, accept.column, accept.dfaState = index, line, column, target
                if t == eof:
                    break
            state = target
        found = accept.dfaState
        if found is None:  # at the end of the input, or no token (the grammar matches any character)
            input._index, self.line, self.column = index, line, column
            return self.failOrAccept(accept, input, state.configs, t)
        input._index, self.line, self.column = accept.index, accept.line, accept.column
        actions = found.lexerActionExecutor
        if actions is not None and self.recog is not None:
            actions.execute(self.recog, input, self.startIndex)
        return found.prediction


class _Lexer(SensorScriptLexer):
    """The generated lexer on `_LexerSimulator`: `nextToken` is ANTLR's, step for step, without
    the input's marks (an InputStream's do nothing) and its lookahead call, and tokens are made
    directly: what `Lexer.emit` and the default token factory make, without their calls."""

    def __init__(self, input: InputStream):
        super().__init__(input)
        self._interp = _LexerSimulator(self, self.atn, self.decisionsToDFA, self._interp.sharedContextCache)
        self.removeErrorListeners()  # the lexer never fails: any character is a token (UNEXPECTED_CHAR)

    def nextToken(self):  # noqa: N802 (ANTLR's name)
        input, simulator = self._input, self._interp
        while True:
            if self._hitEOF:
                self.emitEOF()
                return self._token
            self._token = None
            self._channel = Token.DEFAULT_CHANNEL
            self._tokenStartCharIndex = input._index
            self._tokenStartColumn = simulator.column
            self._tokenStartLine = simulator.line
            self._text = None
            while True:
                self._type = Token.INVALID_TYPE
                ttype = self.SKIP
                try:
                    ttype = simulator.match(input, self._mode)
                except LexerNoViableAltException as e:
                    self.notifyListeners(e)
                    self.recover(e)
                if input._index >= input._size:  # input.LA(1) == Token.EOF
                    self._hitEOF = True
                if self._type == Token.INVALID_TYPE:
                    self._type = ttype
                if self._type != self.MORE:
                    break
            if self._type == self.SKIP:
                continue
            if self._token is None:
                self.emit()
            return self._token

    def emit(self):
        token = _new_token(CommonToken)
        token.source = self._tokenFactorySourcePair
        token.type = self._type
        token.channel = self._channel
        token.start = self._tokenStartCharIndex
        token.stop = self._input._index - 1
        token.tokenIndex = -1
        token.line = self._tokenStartLine
        token.column = self._tokenStartColumn
        # The text now, what CommonToken.text would read from the input at each ask (three calls; the
        # AST builder asks twice a token).
        text = self._text
        if text is None:
            start, stop, size = token.start, token.stop, self._input._size
            text = self._input.strdata[start:stop + 1] if start < size and stop < size else "<EOF>"
        token._text = text
        self._token = token
        return token


_new_token = object.__new__


class _TokenList(CommonTokenStream):
    """Every token of the script, read before parsing starts.

    The grammar sends nothing to other channels (whitespace and comments are skipped), so the
    token at lookahead k is simply the k-th from here: no search for on-channel tokens, which
    is most of what `CommonTokenStream.LT` costs.
    """

    def __init__(self, lexer: SensorScriptLexer):
        super().__init__(lexer)
        # BufferedTokenStream.fill(), then seek(0), in one loop: every token numbered, up to the EOF.
        tokens, next_token, eof = self.tokens, lexer.nextToken, Token.EOF
        while True:
            token = next_token()
            token.tokenIndex = len(tokens)
            tokens.append(token)
            if token.type == eof:
                break
        self.fetchedEOF = True
        self.index = 0
        assert all(t.channel == Token.DEFAULT_CHANNEL for t in tokens), "a token on a hidden channel"

    def LT(self, k: int):  # noqa: N802 (ANTLR's name)
        if k > 0:
            i = self.index + k - 1
            tokens = self.tokens
            return tokens[i] if i < len(tokens) else tokens[-1]
        return None if k == 0 else self.LB(-k)

    def LA(self, k: int) -> int:  # noqa: N802
        if k > 0:  # (LT's body again: LA(1) is asked before every decision)
            i = self.index + k - 1
            tokens = self.tokens
            return (tokens[i] if i < len(tokens) else tokens[-1]).type
        return self.LT(k).type

    def consume(self) -> None:
        if self.tokens[self.index].type == Token.EOF:
            raise IllegalStateException("cannot consume EOF")
        self.index += 1


_SYMBOL, _PARENT = TerminalNodeImpl.symbol.__set__, TerminalNodeImpl.parentCtx.__set__  # its slots, set directly


class _BailingParser(SensorScriptParser):
    """The generated parser for the bail-out parses (SLL, give up at the first error; of a whole
    script, or of one statement), with the runtime's per-token and per-rule methods written
    tighter: the same tree, token for token.

    It reads a `_TokenList` (the token at lookahead 1 is `tokens[index]`), builds the parse tree
    and has no parse listeners; a token that does not match goes to ANTLR's own `match`, where the
    bail-out strategy ends the parse. Until then no error was reported, so a match has no error
    condition to end (`reportMatch`). A terminal node's slots are set without
    `TerminalNodeImpl.__setattr__`, a Python call per attribute.
    """

    def __init__(self, tokens: "_TokenList"):
        super().__init__(tokens)
        self.removeErrorListeners()
        self._interp.predictionMode = PredictionMode.SLL
        self._errHandler = BailErrorStrategy()

    def match(self, ttype: int):
        stream = self._input
        token = stream.tokens[stream.index]
        if token.type != ttype:
            return super().match(ttype)
        if ttype != _EOF:
            stream.index += 1
        self._add_token(token)
        return token

    def consume(self):
        stream = self._input
        token = stream.tokens[stream.index]
        if token.type != _EOF:
            stream.index += 1
        self._add_token(token)
        return token

    def _add_token(self, token) -> None:
        node = _new_terminal(TerminalNodeImpl)
        _SYMBOL(node, token)
        context = self._ctx
        _PARENT(node, context)
        if context.children is None:
            context.children = [node]
        else:
            context.children.append(node)

    def enterRule(self, localctx, state: int, ruleIndex: int):  # noqa: N802, N803 (ANTLR's names)
        self._stateNumber = state
        self._ctx = localctx
        stream = self._input
        localctx.start = stream.tokens[stream.index]
        parent = localctx.parentCtx
        if parent is not None:
            if parent.children is None:
                parent.children = [localctx]
            else:
                parent.children.append(localctx)

    def exitRule(self):  # noqa: N802
        context = self._ctx
        index = self._input.index
        context.stop = self._input.tokens[index - 1] if index > 0 else None
        self._stateNumber = context.invokingState
        self._ctx = context.parentCtx


_new_terminal = object.__new__


# ---------------------------------------------------------------------- limits

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
        kind = token.type
        if kind == _OPEN:
            depth += 1
            if depth > MAX_PAREN_DEPTH:
                return [error(f"parentheses nest deeper than {MAX_PAREN_DEPTH} levels; split the expression "
                              f"into named streams", _token_span(file, token))]
        elif kind == _CLOSE:
            depth = max(0, depth - 1)
        elif kind in _OPERATOR_TYPES:
            operators += 1
            if operators > MAX_OPERATORS_PER_STATEMENT:
                return [error(f"a statement may have at most {MAX_OPERATORS_PER_STATEMENT} operators; split it "
                              f"into named streams", _token_span(file, token))]
        elif kind == _SEMI:
            operators = 0
    return []


# ---------------------------------------------------------------------- syntax errors


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


def _statement_of(context):
    """The statement a parser context lies in, or None between statements."""
    while context is not None and not isinstance(context, SensorScriptParser.StatementContext):
        context = context.parentCtx
    return context


def _character(text: str) -> str:
    """A character as a message shows it: itself in quotes, or by its code and name where it would be
    invisible or show as another (a NUL, a zero-width space, a byte-order mark)."""
    if len(text) == 1 and (not text.isprintable() or unicodedata.category(text) in ("Cf", "Zs", "Zl", "Zp")):
        name = unicodedata.name(text, "") or {"\0": "NUL"}.get(text, "a control character")
        return f"U+{ord(text):04X} ({name}, invisible)"
    return f"'{text}'"


class _SyntaxErrors(ErrorListener):
    """Words ANTLR's syntax errors for people; `found` pairs each with the statement it lies in."""

    def __init__(self, file: str):
        self.file = file
        self.found: list[tuple[object, Diagnostic]] = []

    def syntaxError(self, recognizer, offendingSymbol, line, column, msg, e):  # noqa: N802 (ANTLR's name)
        token: Token = offendingSymbol
        span = _token_span(self.file, token)
        kind = recognizer.symbolicNames[token.type] if token.type > 0 else "<EOF>"
        shown = "end of file" if token.type == Token.EOF else f"'{token.text}'"
        if kind == "UNEXPECTED_CHAR":
            message = f"unexpected character {_character(token.text)}"
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
            stream = recognizer.getTokenStream()
            previous = stream.LT(-1)
            on_next_line = previous is not None and previous.line < token.line
            if on_next_line and (expected == ["';'"] or (0 < len(expected) <= 4 and "';'" in expected)):
                # Almost always a forgotten ';' at the end of the previous statement.
                message = "expected ';' at the end of the statement"
                span = _after_token(self.file, previous)
            elif on_next_line and _opens_statement(stream, token) and 0 < len(expected) <= 5:
                # The next statement begins while this one is unfinished (a ')' and ';' forgotten).
                message = f"unfinished statement: expected {' or '.join(expected)} here"
                span = _after_token(self.file, previous)
            elif 0 < len(expected) <= 5:
                message += "; expected " + " or ".join(expected)
        if not any(d.span == span for _, d in self.found):
            self.found.append((_statement_of(recognizer._ctx), error(message, span)))


def _opens_statement(stream, token: Token) -> bool:
    """Whether `token` is the `NAME =` that opens a statement."""
    following = token.tokenIndex + 1
    return (token.type == _IDENT and following < len(stream.tokens)
            and stream.tokens[following].type == _ASSIGN)


def _expected(parser, e) -> list[int]:
    try:
        if e is not None and e.getExpectedTokens() is not None:
            interval = e.getExpectedTokens()
        else:
            interval = parser.getExpectedTokens()
    except Exception:  # ANTLR can fail to compute the set after recovery; the message still stands
        return []
    return [t for r in interval.intervals for t in r]


# ---------------------------------------------------------------------- the visitor

_NUMBER, _DURATION = SensorScriptLexer.NUMBER, SensorScriptLexer.DURATION
_PRECEDENCE = ast.PRECEDENCE
_NEG_LEVEL, _NOT_LEVEL = ast.PRECEDENCE["neg"], ast.PRECEDENCE["not"]


class _Builder(SensorScriptVisitor):
    """Turns a parse tree into the AST; lexical mistakes (units, numbers) become diagnostics.

    It is only given statements that parsed whole, so every token it reads is one the
    lexer produced (none invented) and none holds a line break. Rule methods call each
    other directly: the tree's shape is the grammar's.
    """

    def __init__(self, file: str):
        self.file = file
        self.diagnostics: list[Diagnostic] = []
        self._in_pattern = False

    # spans ------------------------------------------------------------------
    def tspan(self, token: Token) -> ast.Span:
        line, column = token.line, token.column + 1
        return ast.Span(self.file, line, column, line, column + len(token.text))

    def span(self, ctx) -> ast.Span:
        start, stop = ctx.start, ctx.stop
        return ast.Span(self.file, start.line, start.column + 1, stop.line, stop.column + 1 + len(stop.text))

    # workflow ---------------------------------------------------------------
    def visitWorkflow(self, ctx):
        return tuple(self.statement(s) for s in ctx.statement())

    def statement(self, ctx) -> ast.Statement:
        pattern = ctx.pattern()
        if pattern is not None:
            self._in_pattern = True
            try:
                value = self.visitPattern(pattern)
            finally:
                self._in_pattern = False
        else:
            value = self.visitExpr(ctx.expr())
        return ast.Statement(ctx.name.text, value, self.span(ctx), self.tspan(ctx.name))

    visitStatement = statement

    # expressions ------------------------------------------------------------
    def visitExpr(self, ctx):
        """Group the flat operand/operator sequence by precedence (precedence climbing)."""
        items = ctx.children
        if len(items) == 1:
            return self.visitAtom(items[0])
        return self._binary(items, 0, 0)[0]

    # (Methods passing the position on, not closures over it: two closures calling each other are
    # a reference cycle, left for the cyclic collector with the parse tree they hold.)
    def _binary(self, items: list, position: int, min_level: int) -> tuple[ast.Expr, int]:
        left, position = self._operand(items, position)
        while position < len(items):
            op = items[position].symbol.text
            level = _PRECEDENCE[op]
            if level < min_level:
                break
            right, position = self._binary(items, position + 1, level + 1)  # left-associative
            left = ast.Binary(op, left, right, self._join(left.span, right.span))
        return left, position

    def _operand(self, items: list, position: int) -> tuple[ast.Expr, int]:
        item = items[position]
        if isinstance(item, TerminalNode):  # a prefix operator: - or not
            token = item.symbol
            op = "not" if token.text == "not" else "-"
            inner, position = self._binary(items, position + 1, _NOT_LEVEL if op == "not" else _NEG_LEVEL)
            return ast.Unary(op, inner, self._join(self.tspan(token), inner.span)), position
        return self.visitAtom(item), position + 1

    def _join(self, first: ast.Span, last: ast.Span) -> ast.Span:
        return ast.Span(self.file, first.line, first.column, last.end_line, last.end_column)

    def visitAtom(self, ctx):
        name = ctx.name
        if name is not None:
            if ctx.call is not None:
                return self._call(ctx)
            if ctx.attr is not None:
                return ast.Attribute(name.text, ctx.attr.text, self.span(ctx))
            return ast.Ref(name.text, False, self.tspan(name))
        if ctx.inner is not None:
            return self.visitExpr(ctx.inner)
        token = ctx.start
        kind = token.type
        if kind == _NUMBER:
            text = token.text
            return ast.Number(float(text.replace("_", "")), text, self.tspan(token))
        if kind == _DURATION:
            return self._duration(token)
        value = _unquote(token.text)  # STRING
        if self._in_pattern:
            return ast.String(value, self.tspan(token))
        return ast.Ref(value, True, self.tspan(token))

    def _call(self, ctx):
        func = ctx.name.text
        args = tuple(self.visitExpr(a) for a in ctx.args)
        span = self.span(ctx)
        if not self._in_pattern:
            if func in WINDOW_FUNCTIONS and len(args) == 3 and _is_duration(args[1]) and _is_duration(args[2]):
                return ast.Window(func, args[0], _as_duration(args[1]), _as_duration(args[2]), span)
            if func == "union":
                return ast.Union_(args, span)
        return ast.Call(func, args, span)

    def _duration(self, token: Token) -> ast.Duration:
        text = token.text
        digits, unit = re.fullmatch(r"([0-9_]+)([a-zA-Z]+)", text).groups()
        if unit not in DURATION_UNITS:
            meant = UNIT_SPELLINGS.get(unit.lower())
            hint = f"; write '{digits}{meant}'" if meant else did_you_mean(unit, DURATION_UNITS)
            self.diagnostics.append(error(
                f"unknown duration unit '{unit}' in '{text}'{hint}"
                f" (units: {', '.join(DURATION_UNITS)}; no unit means milliseconds)",
                self.tspan(token)))
            return ast.Duration(0, "", self.tspan(token))  # no text: already reported, not "non-positive"
        return ast.Duration(int(digits.replace("_", "")) * DURATION_UNITS[unit], text, self.tspan(token))

    # patterns ---------------------------------------------------------------
    def visitPattern(self, ctx):
        elements = tuple(self.visitPatternElement(e) for e in ctx.elements)
        clauses: dict[str, object] = {}
        within = None
        for clause_ctx in ctx.clauses:
            keyword = clause_ctx.start.text
            if keyword in clauses:
                self.diagnostics.append(error(f"a pattern takes one '{keyword}' clause; this is a second one",
                                              self.span(clause_ctx)))
                continue
            clauses[keyword] = clause_ctx.accept(self)
            if keyword == "within":
                within = (clauses[keyword], clause_ctx)
        limit = clauses.get("limit")
        if limit is not None:
            if isinstance(limit, ast.Number) and re.fullmatch(r"[0-9_]+", limit.text) and \
                    1 <= int(limit.text.replace("_", "")) <= MAX_LIMIT:
                limit = int(limit.text.replace("_", ""))
            else:
                self.diagnostics.append(error(f"'limit' takes a whole number of partial matches from 1 to "
                                              f"{MAX_LIMIT:,}, e.g. limit 5000", limit.span))
                limit = None
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
            links=tuple(link.operator.text if link.operator is not None else None for link in ctx.links),
            limit=limit,
        )

    def visitPatternElement(self, ctx):
        stream = ctx.stream
        if stream.STRING() is not None:
            ref = ast.Ref(_unquote(stream.getText()), True, self.span(stream))
        else:
            ref = ast.Ref(stream.getText(), False, self.span(stream))
        operator = ctx.operator.text if ctx.operator is not None else None
        return ast.PatternElement(ctx.var.text, ref, ctx.kleene is not None, ctx.negated is not None, self.span(ctx),
                                  operator)

    def visitWhereClause(self, ctx):
        return self.visitExpr(ctx.expr())

    visitYieldClause = visitWithinClause = visitLimitClause = visitWhereClause

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
    # From the text, exactly: a float of 400 digits is infinite (check.py bounds the value).
    return ast.Duration(int(node.text.replace("_", "")), node.text, node.span)
