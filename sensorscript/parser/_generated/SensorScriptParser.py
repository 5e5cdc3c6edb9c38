# Generated from SensorScript.g4 by ANTLR 4.13.2
# encoding: utf-8
from antlr4 import *
from io import StringIO
import sys
if sys.version_info[1] > 5:
	from typing import TextIO
else:
	from typing.io import TextIO

def serializedATN():
    return [
        4,1,40,122,2,0,7,0,2,1,7,1,2,2,7,2,2,3,7,3,2,4,7,4,2,5,7,5,2,6,7,
        6,2,7,7,7,1,0,5,0,18,8,0,10,0,12,0,21,9,0,1,0,1,0,1,1,1,1,1,1,1,
        1,3,1,29,8,1,1,1,1,1,1,2,5,2,34,8,2,10,2,12,2,37,9,2,1,2,1,2,1,2,
        5,2,42,8,2,10,2,12,2,45,9,2,1,2,5,2,48,8,2,10,2,12,2,51,9,2,1,3,
        1,3,1,3,1,3,1,3,5,3,58,8,3,10,3,12,3,61,9,3,3,3,63,8,3,1,3,1,3,1,
        3,3,3,68,8,3,1,3,1,3,1,3,1,3,1,3,1,3,1,3,3,3,77,8,3,1,4,1,4,1,4,
        1,4,1,4,5,4,84,8,4,10,4,12,4,87,9,4,1,4,1,4,5,4,91,8,4,10,4,12,4,
        94,9,4,1,5,3,5,97,8,5,1,5,1,5,1,5,1,5,3,5,103,8,5,1,6,1,6,1,7,1,
        7,1,7,1,7,1,7,1,7,1,7,1,7,1,7,1,7,1,7,1,7,1,7,3,7,120,8,7,1,7,0,
        0,8,0,2,4,6,8,10,12,14,0,3,2,0,3,3,22,22,2,0,3,12,20,21,1,0,33,34,
        135,0,19,1,0,0,0,2,24,1,0,0,0,4,35,1,0,0,0,6,76,1,0,0,0,8,78,1,0,
        0,0,10,96,1,0,0,0,12,104,1,0,0,0,14,119,1,0,0,0,16,18,3,2,1,0,17,
        16,1,0,0,0,18,21,1,0,0,0,19,17,1,0,0,0,19,20,1,0,0,0,20,22,1,0,0,
        0,21,19,1,0,0,0,22,23,5,0,0,1,23,1,1,0,0,0,24,25,5,33,0,0,25,28,
        5,1,0,0,26,29,3,8,4,0,27,29,3,4,2,0,28,26,1,0,0,0,28,27,1,0,0,0,
        29,30,1,0,0,0,30,31,5,2,0,0,31,3,1,0,0,0,32,34,7,0,0,0,33,32,1,0,
        0,0,34,37,1,0,0,0,35,33,1,0,0,0,35,36,1,0,0,0,36,38,1,0,0,0,37,35,
        1,0,0,0,38,49,3,6,3,0,39,43,7,1,0,0,40,42,7,0,0,0,41,40,1,0,0,0,
        42,45,1,0,0,0,43,41,1,0,0,0,43,44,1,0,0,0,44,46,1,0,0,0,45,43,1,
        0,0,0,46,48,3,6,3,0,47,39,1,0,0,0,48,51,1,0,0,0,49,47,1,0,0,0,49,
        50,1,0,0,0,50,5,1,0,0,0,51,49,1,0,0,0,52,67,5,33,0,0,53,62,5,13,
        0,0,54,59,3,4,2,0,55,56,5,14,0,0,56,58,3,4,2,0,57,55,1,0,0,0,58,
        61,1,0,0,0,59,57,1,0,0,0,59,60,1,0,0,0,60,63,1,0,0,0,61,59,1,0,0,
        0,62,54,1,0,0,0,62,63,1,0,0,0,63,64,1,0,0,0,64,68,5,15,0,0,65,66,
        5,16,0,0,66,68,5,33,0,0,67,53,1,0,0,0,67,65,1,0,0,0,67,68,1,0,0,
        0,68,77,1,0,0,0,69,77,5,32,0,0,70,77,5,31,0,0,71,77,5,34,0,0,72,
        73,5,13,0,0,73,74,3,4,2,0,74,75,5,15,0,0,75,77,1,0,0,0,76,52,1,0,
        0,0,76,69,1,0,0,0,76,70,1,0,0,0,76,71,1,0,0,0,76,72,1,0,0,0,77,7,
        1,0,0,0,78,79,5,23,0,0,79,80,5,13,0,0,80,85,3,10,5,0,81,82,5,17,
        0,0,82,84,3,10,5,0,83,81,1,0,0,0,84,87,1,0,0,0,85,83,1,0,0,0,85,
        86,1,0,0,0,86,88,1,0,0,0,87,85,1,0,0,0,88,92,5,15,0,0,89,91,3,14,
        7,0,90,89,1,0,0,0,91,94,1,0,0,0,92,90,1,0,0,0,92,93,1,0,0,0,93,9,
        1,0,0,0,94,92,1,0,0,0,95,97,5,18,0,0,96,95,1,0,0,0,96,97,1,0,0,0,
        97,98,1,0,0,0,98,99,5,33,0,0,99,100,5,19,0,0,100,102,3,12,6,0,101,
        103,5,6,0,0,102,101,1,0,0,0,102,103,1,0,0,0,103,11,1,0,0,0,104,105,
        7,2,0,0,105,13,1,0,0,0,106,107,5,24,0,0,107,120,3,4,2,0,108,109,
        5,25,0,0,109,120,3,4,2,0,110,111,5,26,0,0,111,120,5,33,0,0,112,113,
        5,27,0,0,113,120,5,33,0,0,114,115,5,28,0,0,115,116,5,29,0,0,116,
        120,5,33,0,0,117,118,5,30,0,0,118,120,3,4,2,0,119,106,1,0,0,0,119,
        108,1,0,0,0,119,110,1,0,0,0,119,112,1,0,0,0,119,114,1,0,0,0,119,
        117,1,0,0,0,120,15,1,0,0,0,14,19,28,35,43,49,59,62,67,76,85,92,96,
        102,119
    ]

class SensorScriptParser ( Parser ):

    grammarFileName = "SensorScript.g4"

    atn = ATNDeserializer().deserialize(serializedATN())

    decisionsToDFA = [ DFA(ds, i) for i, ds in enumerate(atn.decisionToState) ]

    sharedContextCache = PredictionContextCache()

    literalNames = [ "<INVALID>", "'='", "';'", "'-'", "'*'", "'/'", "'+'", 
                     "'>'", "'>='", "'<'", "'<='", "'=='", "'!='", "'('", 
                     "','", "')'", "'.'", "'->'", "'!'", "':'", "'and'", 
                     "'or'", "'not'", "'pattern'", "'where'", "'within'", 
                     "'strategy'", "'emit'", "'partition'", "'by'", "'yield'" ]

    symbolicNames = [ "<INVALID>", "<INVALID>", "<INVALID>", "<INVALID>", 
                      "<INVALID>", "<INVALID>", "<INVALID>", "<INVALID>", 
                      "<INVALID>", "<INVALID>", "<INVALID>", "<INVALID>", 
                      "<INVALID>", "<INVALID>", "<INVALID>", "<INVALID>", 
                      "<INVALID>", "<INVALID>", "<INVALID>", "<INVALID>", 
                      "AND", "OR", "NOT", "PATTERN", "WHERE", "WITHIN", 
                      "STRATEGY", "EMIT", "PARTITION", "BY", "YIELD", "DURATION", 
                      "NUMBER", "IDENT", "STRING", "UNTERMINATED_STRING", 
                      "LINE_COMMENT", "BLOCK_COMMENT", "UNTERMINATED_COMMENT", 
                      "WS", "UNEXPECTED_CHAR" ]

    RULE_workflow = 0
    RULE_statement = 1
    RULE_expr = 2
    RULE_atom = 3
    RULE_pattern = 4
    RULE_patternElement = 5
    RULE_streamRef = 6
    RULE_patternClause = 7

    ruleNames =  [ "workflow", "statement", "expr", "atom", "pattern", "patternElement", 
                   "streamRef", "patternClause" ]

    EOF = Token.EOF
    T__0=1
    T__1=2
    T__2=3
    T__3=4
    T__4=5
    T__5=6
    T__6=7
    T__7=8
    T__8=9
    T__9=10
    T__10=11
    T__11=12
    T__12=13
    T__13=14
    T__14=15
    T__15=16
    T__16=17
    T__17=18
    T__18=19
    AND=20
    OR=21
    NOT=22
    PATTERN=23
    WHERE=24
    WITHIN=25
    STRATEGY=26
    EMIT=27
    PARTITION=28
    BY=29
    YIELD=30
    DURATION=31
    NUMBER=32
    IDENT=33
    STRING=34
    UNTERMINATED_STRING=35
    LINE_COMMENT=36
    BLOCK_COMMENT=37
    UNTERMINATED_COMMENT=38
    WS=39
    UNEXPECTED_CHAR=40

    def __init__(self, input:TokenStream, output:TextIO = sys.stdout):
        super().__init__(input, output)
        self.checkVersion("4.13.2")
        self._interp = ParserATNSimulator(self, self.atn, self.decisionsToDFA, self.sharedContextCache)
        self._predicates = None




    class WorkflowContext(ParserRuleContext):
        __slots__ = 'parser'

        def __init__(self, parser, parent:ParserRuleContext=None, invokingState:int=-1):
            super().__init__(parent, invokingState)
            self.parser = parser

        def EOF(self):
            return self.getToken(SensorScriptParser.EOF, 0)

        def statement(self, i:int=None):
            if i is None:
                return self.getTypedRuleContexts(SensorScriptParser.StatementContext)
            else:
                return self.getTypedRuleContext(SensorScriptParser.StatementContext,i)


        def getRuleIndex(self):
            return SensorScriptParser.RULE_workflow

        def accept(self, visitor:ParseTreeVisitor):
            if hasattr( visitor, "visitWorkflow" ):
                return visitor.visitWorkflow(self)
            else:
                return visitor.visitChildren(self)




    def workflow(self):

        localctx = SensorScriptParser.WorkflowContext(self, self._ctx, self.state)
        self.enterRule(localctx, 0, self.RULE_workflow)
        self._la = 0 # Token type
        try:
            self.enterOuterAlt(localctx, 1)
            self.state = 19
            self._errHandler.sync(self)
            _la = self._input.LA(1)
            while _la==33:
                self.state = 16
                self.statement()
                self.state = 21
                self._errHandler.sync(self)
                _la = self._input.LA(1)

            self.state = 22
            self.match(SensorScriptParser.EOF)
        except RecognitionException as re:
            localctx.exception = re
            self._errHandler.reportError(self, re)
            self._errHandler.recover(self, re)
        finally:
            self.exitRule()
        return localctx


    class StatementContext(ParserRuleContext):
        __slots__ = 'parser'

        def __init__(self, parser, parent:ParserRuleContext=None, invokingState:int=-1):
            super().__init__(parent, invokingState)
            self.parser = parser
            self.name = None # Token

        def IDENT(self):
            return self.getToken(SensorScriptParser.IDENT, 0)

        def pattern(self):
            return self.getTypedRuleContext(SensorScriptParser.PatternContext,0)


        def expr(self):
            return self.getTypedRuleContext(SensorScriptParser.ExprContext,0)


        def getRuleIndex(self):
            return SensorScriptParser.RULE_statement

        def accept(self, visitor:ParseTreeVisitor):
            if hasattr( visitor, "visitStatement" ):
                return visitor.visitStatement(self)
            else:
                return visitor.visitChildren(self)




    def statement(self):

        localctx = SensorScriptParser.StatementContext(self, self._ctx, self.state)
        self.enterRule(localctx, 2, self.RULE_statement)
        try:
            self.enterOuterAlt(localctx, 1)
            self.state = 24
            localctx.name = self.match(SensorScriptParser.IDENT)
            self.state = 25
            self.match(SensorScriptParser.T__0)
            self.state = 28
            self._errHandler.sync(self)
            token = self._input.LA(1)
            if token in [23]:
                self.state = 26
                self.pattern()
                pass
            elif token in [3, 13, 22, 31, 32, 33, 34]:
                self.state = 27
                self.expr()
                pass
            else:
                raise NoViableAltException(self)

            self.state = 30
            self.match(SensorScriptParser.T__1)
        except RecognitionException as re:
            localctx.exception = re
            self._errHandler.reportError(self, re)
            self._errHandler.recover(self, re)
        finally:
            self.exitRule()
        return localctx


    class ExprContext(ParserRuleContext):
        __slots__ = 'parser'

        def __init__(self, parser, parent:ParserRuleContext=None, invokingState:int=-1):
            super().__init__(parent, invokingState)
            self.parser = parser

        def atom(self, i:int=None):
            if i is None:
                return self.getTypedRuleContexts(SensorScriptParser.AtomContext)
            else:
                return self.getTypedRuleContext(SensorScriptParser.AtomContext,i)


        def NOT(self, i:int=None):
            if i is None:
                return self.getTokens(SensorScriptParser.NOT)
            else:
                return self.getToken(SensorScriptParser.NOT, i)

        def AND(self, i:int=None):
            if i is None:
                return self.getTokens(SensorScriptParser.AND)
            else:
                return self.getToken(SensorScriptParser.AND, i)

        def OR(self, i:int=None):
            if i is None:
                return self.getTokens(SensorScriptParser.OR)
            else:
                return self.getToken(SensorScriptParser.OR, i)

        def getRuleIndex(self):
            return SensorScriptParser.RULE_expr

        def accept(self, visitor:ParseTreeVisitor):
            if hasattr( visitor, "visitExpr" ):
                return visitor.visitExpr(self)
            else:
                return visitor.visitChildren(self)




    def expr(self):

        localctx = SensorScriptParser.ExprContext(self, self._ctx, self.state)
        self.enterRule(localctx, 4, self.RULE_expr)
        self._la = 0 # Token type
        try:
            self.enterOuterAlt(localctx, 1)
            self.state = 35
            self._errHandler.sync(self)
            _la = self._input.LA(1)
            while _la==3 or _la==22:
                self.state = 32
                _la = self._input.LA(1)
                if not(_la==3 or _la==22):
                    self._errHandler.recoverInline(self)
                else:
                    self._errHandler.reportMatch(self)
                    self.consume()
                self.state = 37
                self._errHandler.sync(self)
                _la = self._input.LA(1)

            self.state = 38
            self.atom()
            self.state = 49
            self._errHandler.sync(self)
            _la = self._input.LA(1)
            while (((_la) & ~0x3f) == 0 and ((1 << _la) & 3153912) != 0):
                self.state = 39
                _la = self._input.LA(1)
                if not((((_la) & ~0x3f) == 0 and ((1 << _la) & 3153912) != 0)):
                    self._errHandler.recoverInline(self)
                else:
                    self._errHandler.reportMatch(self)
                    self.consume()
                self.state = 43
                self._errHandler.sync(self)
                _la = self._input.LA(1)
                while _la==3 or _la==22:
                    self.state = 40
                    _la = self._input.LA(1)
                    if not(_la==3 or _la==22):
                        self._errHandler.recoverInline(self)
                    else:
                        self._errHandler.reportMatch(self)
                        self.consume()
                    self.state = 45
                    self._errHandler.sync(self)
                    _la = self._input.LA(1)

                self.state = 46
                self.atom()
                self.state = 51
                self._errHandler.sync(self)
                _la = self._input.LA(1)

        except RecognitionException as re:
            localctx.exception = re
            self._errHandler.reportError(self, re)
            self._errHandler.recover(self, re)
        finally:
            self.exitRule()
        return localctx


    class AtomContext(ParserRuleContext):
        __slots__ = 'parser'

        def __init__(self, parser, parent:ParserRuleContext=None, invokingState:int=-1):
            super().__init__(parent, invokingState)
            self.parser = parser
            self.name = None # Token
            self.call = None # Token
            self._expr = None # ExprContext
            self.args = list() # of ExprContexts
            self.attr = None # Token
            self.inner = None # ExprContext

        def IDENT(self, i:int=None):
            if i is None:
                return self.getTokens(SensorScriptParser.IDENT)
            else:
                return self.getToken(SensorScriptParser.IDENT, i)

        def expr(self, i:int=None):
            if i is None:
                return self.getTypedRuleContexts(SensorScriptParser.ExprContext)
            else:
                return self.getTypedRuleContext(SensorScriptParser.ExprContext,i)


        def NUMBER(self):
            return self.getToken(SensorScriptParser.NUMBER, 0)

        def DURATION(self):
            return self.getToken(SensorScriptParser.DURATION, 0)

        def STRING(self):
            return self.getToken(SensorScriptParser.STRING, 0)

        def getRuleIndex(self):
            return SensorScriptParser.RULE_atom

        def accept(self, visitor:ParseTreeVisitor):
            if hasattr( visitor, "visitAtom" ):
                return visitor.visitAtom(self)
            else:
                return visitor.visitChildren(self)




    def atom(self):

        localctx = SensorScriptParser.AtomContext(self, self._ctx, self.state)
        self.enterRule(localctx, 6, self.RULE_atom)
        self._la = 0 # Token type
        try:
            self.state = 76
            self._errHandler.sync(self)
            token = self._input.LA(1)
            if token in [33]:
                self.enterOuterAlt(localctx, 1)
                self.state = 52
                localctx.name = self.match(SensorScriptParser.IDENT)
                self.state = 67
                self._errHandler.sync(self)
                token = self._input.LA(1)
                if token in [13]:
                    self.state = 53
                    localctx.call = self.match(SensorScriptParser.T__12)
                    self.state = 62
                    self._errHandler.sync(self)
                    _la = self._input.LA(1)
                    if (((_la) & ~0x3f) == 0 and ((1 << _la) & 32216457224) != 0):
                        self.state = 54
                        localctx._expr = self.expr()
                        localctx.args.append(localctx._expr)
                        self.state = 59
                        self._errHandler.sync(self)
                        _la = self._input.LA(1)
                        while _la==14:
                            self.state = 55
                            self.match(SensorScriptParser.T__13)
                            self.state = 56
                            localctx._expr = self.expr()
                            localctx.args.append(localctx._expr)
                            self.state = 61
                            self._errHandler.sync(self)
                            _la = self._input.LA(1)



                    self.state = 64
                    self.match(SensorScriptParser.T__14)
                    pass
                elif token in [16]:
                    self.state = 65
                    self.match(SensorScriptParser.T__15)
                    self.state = 66
                    localctx.attr = self.match(SensorScriptParser.IDENT)
                    pass
                elif token in [2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 14, 15, 20, 21, 24, 25, 26, 27, 28, 30]:
                    pass
                else:
                    pass
                pass
            elif token in [32]:
                self.enterOuterAlt(localctx, 2)
                self.state = 69
                self.match(SensorScriptParser.NUMBER)
                pass
            elif token in [31]:
                self.enterOuterAlt(localctx, 3)
                self.state = 70
                self.match(SensorScriptParser.DURATION)
                pass
            elif token in [34]:
                self.enterOuterAlt(localctx, 4)
                self.state = 71
                self.match(SensorScriptParser.STRING)
                pass
            elif token in [13]:
                self.enterOuterAlt(localctx, 5)
                self.state = 72
                self.match(SensorScriptParser.T__12)
                self.state = 73
                localctx.inner = self.expr()
                self.state = 74
                self.match(SensorScriptParser.T__14)
                pass
            else:
                raise NoViableAltException(self)

        except RecognitionException as re:
            localctx.exception = re
            self._errHandler.reportError(self, re)
            self._errHandler.recover(self, re)
        finally:
            self.exitRule()
        return localctx


    class PatternContext(ParserRuleContext):
        __slots__ = 'parser'

        def __init__(self, parser, parent:ParserRuleContext=None, invokingState:int=-1):
            super().__init__(parent, invokingState)
            self.parser = parser
            self._patternElement = None # PatternElementContext
            self.elements = list() # of PatternElementContexts
            self._patternClause = None # PatternClauseContext
            self.clauses = list() # of PatternClauseContexts

        def PATTERN(self):
            return self.getToken(SensorScriptParser.PATTERN, 0)

        def patternElement(self, i:int=None):
            if i is None:
                return self.getTypedRuleContexts(SensorScriptParser.PatternElementContext)
            else:
                return self.getTypedRuleContext(SensorScriptParser.PatternElementContext,i)


        def patternClause(self, i:int=None):
            if i is None:
                return self.getTypedRuleContexts(SensorScriptParser.PatternClauseContext)
            else:
                return self.getTypedRuleContext(SensorScriptParser.PatternClauseContext,i)


        def getRuleIndex(self):
            return SensorScriptParser.RULE_pattern

        def accept(self, visitor:ParseTreeVisitor):
            if hasattr( visitor, "visitPattern" ):
                return visitor.visitPattern(self)
            else:
                return visitor.visitChildren(self)




    def pattern(self):

        localctx = SensorScriptParser.PatternContext(self, self._ctx, self.state)
        self.enterRule(localctx, 8, self.RULE_pattern)
        self._la = 0 # Token type
        try:
            self.enterOuterAlt(localctx, 1)
            self.state = 78
            self.match(SensorScriptParser.PATTERN)
            self.state = 79
            self.match(SensorScriptParser.T__12)
            self.state = 80
            localctx._patternElement = self.patternElement()
            localctx.elements.append(localctx._patternElement)
            self.state = 85
            self._errHandler.sync(self)
            _la = self._input.LA(1)
            while _la==17:
                self.state = 81
                self.match(SensorScriptParser.T__16)
                self.state = 82
                localctx._patternElement = self.patternElement()
                localctx.elements.append(localctx._patternElement)
                self.state = 87
                self._errHandler.sync(self)
                _la = self._input.LA(1)

            self.state = 88
            self.match(SensorScriptParser.T__14)
            self.state = 92
            self._errHandler.sync(self)
            _la = self._input.LA(1)
            while (((_la) & ~0x3f) == 0 and ((1 << _la) & 1593835520) != 0):
                self.state = 89
                localctx._patternClause = self.patternClause()
                localctx.clauses.append(localctx._patternClause)
                self.state = 94
                self._errHandler.sync(self)
                _la = self._input.LA(1)

        except RecognitionException as re:
            localctx.exception = re
            self._errHandler.reportError(self, re)
            self._errHandler.recover(self, re)
        finally:
            self.exitRule()
        return localctx


    class PatternElementContext(ParserRuleContext):
        __slots__ = 'parser'

        def __init__(self, parser, parent:ParserRuleContext=None, invokingState:int=-1):
            super().__init__(parent, invokingState)
            self.parser = parser
            self.negated = None # Token
            self.var = None # Token
            self.stream = None # StreamRefContext
            self.kleene = None # Token

        def IDENT(self):
            return self.getToken(SensorScriptParser.IDENT, 0)

        def streamRef(self):
            return self.getTypedRuleContext(SensorScriptParser.StreamRefContext,0)


        def getRuleIndex(self):
            return SensorScriptParser.RULE_patternElement

        def accept(self, visitor:ParseTreeVisitor):
            if hasattr( visitor, "visitPatternElement" ):
                return visitor.visitPatternElement(self)
            else:
                return visitor.visitChildren(self)




    def patternElement(self):

        localctx = SensorScriptParser.PatternElementContext(self, self._ctx, self.state)
        self.enterRule(localctx, 10, self.RULE_patternElement)
        self._la = 0 # Token type
        try:
            self.enterOuterAlt(localctx, 1)
            self.state = 96
            self._errHandler.sync(self)
            _la = self._input.LA(1)
            if _la==18:
                self.state = 95
                localctx.negated = self.match(SensorScriptParser.T__17)


            self.state = 98
            localctx.var = self.match(SensorScriptParser.IDENT)
            self.state = 99
            self.match(SensorScriptParser.T__18)
            self.state = 100
            localctx.stream = self.streamRef()
            self.state = 102
            self._errHandler.sync(self)
            _la = self._input.LA(1)
            if _la==6:
                self.state = 101
                localctx.kleene = self.match(SensorScriptParser.T__5)


        except RecognitionException as re:
            localctx.exception = re
            self._errHandler.reportError(self, re)
            self._errHandler.recover(self, re)
        finally:
            self.exitRule()
        return localctx


    class StreamRefContext(ParserRuleContext):
        __slots__ = 'parser'

        def __init__(self, parser, parent:ParserRuleContext=None, invokingState:int=-1):
            super().__init__(parent, invokingState)
            self.parser = parser

        def IDENT(self):
            return self.getToken(SensorScriptParser.IDENT, 0)

        def STRING(self):
            return self.getToken(SensorScriptParser.STRING, 0)

        def getRuleIndex(self):
            return SensorScriptParser.RULE_streamRef

        def accept(self, visitor:ParseTreeVisitor):
            if hasattr( visitor, "visitStreamRef" ):
                return visitor.visitStreamRef(self)
            else:
                return visitor.visitChildren(self)




    def streamRef(self):

        localctx = SensorScriptParser.StreamRefContext(self, self._ctx, self.state)
        self.enterRule(localctx, 12, self.RULE_streamRef)
        self._la = 0 # Token type
        try:
            self.enterOuterAlt(localctx, 1)
            self.state = 104
            _la = self._input.LA(1)
            if not(_la==33 or _la==34):
                self._errHandler.recoverInline(self)
            else:
                self._errHandler.reportMatch(self)
                self.consume()
        except RecognitionException as re:
            localctx.exception = re
            self._errHandler.reportError(self, re)
            self._errHandler.recover(self, re)
        finally:
            self.exitRule()
        return localctx


    class PatternClauseContext(ParserRuleContext):
        __slots__ = 'parser'

        def __init__(self, parser, parent:ParserRuleContext=None, invokingState:int=-1):
            super().__init__(parent, invokingState)
            self.parser = parser


        def getRuleIndex(self):
            return SensorScriptParser.RULE_patternClause

     
        def copyFrom(self, ctx:ParserRuleContext):
            super().copyFrom(ctx)



    class WhereClauseContext(PatternClauseContext):

        def __init__(self, parser, ctx:ParserRuleContext): # actually a SensorScriptParser.PatternClauseContext
            super().__init__(parser)
            self.copyFrom(ctx)

        def WHERE(self):
            return self.getToken(SensorScriptParser.WHERE, 0)
        def expr(self):
            return self.getTypedRuleContext(SensorScriptParser.ExprContext,0)


        def accept(self, visitor:ParseTreeVisitor):
            if hasattr( visitor, "visitWhereClause" ):
                return visitor.visitWhereClause(self)
            else:
                return visitor.visitChildren(self)


    class PartitionClauseContext(PatternClauseContext):

        def __init__(self, parser, ctx:ParserRuleContext): # actually a SensorScriptParser.PatternClauseContext
            super().__init__(parser)
            self.value = None # Token
            self.copyFrom(ctx)

        def PARTITION(self):
            return self.getToken(SensorScriptParser.PARTITION, 0)
        def BY(self):
            return self.getToken(SensorScriptParser.BY, 0)
        def IDENT(self):
            return self.getToken(SensorScriptParser.IDENT, 0)

        def accept(self, visitor:ParseTreeVisitor):
            if hasattr( visitor, "visitPartitionClause" ):
                return visitor.visitPartitionClause(self)
            else:
                return visitor.visitChildren(self)


    class YieldClauseContext(PatternClauseContext):

        def __init__(self, parser, ctx:ParserRuleContext): # actually a SensorScriptParser.PatternClauseContext
            super().__init__(parser)
            self.copyFrom(ctx)

        def YIELD(self):
            return self.getToken(SensorScriptParser.YIELD, 0)
        def expr(self):
            return self.getTypedRuleContext(SensorScriptParser.ExprContext,0)


        def accept(self, visitor:ParseTreeVisitor):
            if hasattr( visitor, "visitYieldClause" ):
                return visitor.visitYieldClause(self)
            else:
                return visitor.visitChildren(self)


    class WithinClauseContext(PatternClauseContext):

        def __init__(self, parser, ctx:ParserRuleContext): # actually a SensorScriptParser.PatternClauseContext
            super().__init__(parser)
            self.copyFrom(ctx)

        def WITHIN(self):
            return self.getToken(SensorScriptParser.WITHIN, 0)
        def expr(self):
            return self.getTypedRuleContext(SensorScriptParser.ExprContext,0)


        def accept(self, visitor:ParseTreeVisitor):
            if hasattr( visitor, "visitWithinClause" ):
                return visitor.visitWithinClause(self)
            else:
                return visitor.visitChildren(self)


    class StrategyClauseContext(PatternClauseContext):

        def __init__(self, parser, ctx:ParserRuleContext): # actually a SensorScriptParser.PatternClauseContext
            super().__init__(parser)
            self.value = None # Token
            self.copyFrom(ctx)

        def STRATEGY(self):
            return self.getToken(SensorScriptParser.STRATEGY, 0)
        def IDENT(self):
            return self.getToken(SensorScriptParser.IDENT, 0)

        def accept(self, visitor:ParseTreeVisitor):
            if hasattr( visitor, "visitStrategyClause" ):
                return visitor.visitStrategyClause(self)
            else:
                return visitor.visitChildren(self)


    class EmitClauseContext(PatternClauseContext):

        def __init__(self, parser, ctx:ParserRuleContext): # actually a SensorScriptParser.PatternClauseContext
            super().__init__(parser)
            self.value = None # Token
            self.copyFrom(ctx)

        def EMIT(self):
            return self.getToken(SensorScriptParser.EMIT, 0)
        def IDENT(self):
            return self.getToken(SensorScriptParser.IDENT, 0)

        def accept(self, visitor:ParseTreeVisitor):
            if hasattr( visitor, "visitEmitClause" ):
                return visitor.visitEmitClause(self)
            else:
                return visitor.visitChildren(self)



    def patternClause(self):

        localctx = SensorScriptParser.PatternClauseContext(self, self._ctx, self.state)
        self.enterRule(localctx, 14, self.RULE_patternClause)
        try:
            self.state = 119
            self._errHandler.sync(self)
            token = self._input.LA(1)
            if token in [24]:
                localctx = SensorScriptParser.WhereClauseContext(self, localctx)
                self.enterOuterAlt(localctx, 1)
                self.state = 106
                self.match(SensorScriptParser.WHERE)
                self.state = 107
                self.expr()
                pass
            elif token in [25]:
                localctx = SensorScriptParser.WithinClauseContext(self, localctx)
                self.enterOuterAlt(localctx, 2)
                self.state = 108
                self.match(SensorScriptParser.WITHIN)
                self.state = 109
                self.expr()
                pass
            elif token in [26]:
                localctx = SensorScriptParser.StrategyClauseContext(self, localctx)
                self.enterOuterAlt(localctx, 3)
                self.state = 110
                self.match(SensorScriptParser.STRATEGY)
                self.state = 111
                localctx.value = self.match(SensorScriptParser.IDENT)
                pass
            elif token in [27]:
                localctx = SensorScriptParser.EmitClauseContext(self, localctx)
                self.enterOuterAlt(localctx, 4)
                self.state = 112
                self.match(SensorScriptParser.EMIT)
                self.state = 113
                localctx.value = self.match(SensorScriptParser.IDENT)
                pass
            elif token in [28]:
                localctx = SensorScriptParser.PartitionClauseContext(self, localctx)
                self.enterOuterAlt(localctx, 5)
                self.state = 114
                self.match(SensorScriptParser.PARTITION)
                self.state = 115
                self.match(SensorScriptParser.BY)
                self.state = 116
                localctx.value = self.match(SensorScriptParser.IDENT)
                pass
            elif token in [30]:
                localctx = SensorScriptParser.YieldClauseContext(self, localctx)
                self.enterOuterAlt(localctx, 6)
                self.state = 117
                self.match(SensorScriptParser.YIELD)
                self.state = 118
                self.expr()
                pass
            else:
                raise NoViableAltException(self)

        except RecognitionException as re:
            localctx.exception = re
            self._errHandler.reportError(self, re)
            self._errHandler.recover(self, re)
        finally:
            self.exitRule()
        return localctx





