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
        4,1,43,140,2,0,7,0,2,1,7,1,2,2,7,2,2,3,7,3,2,4,7,4,2,5,7,5,2,6,7,
        6,2,7,7,7,2,8,7,8,1,0,5,0,20,8,0,10,0,12,0,23,9,0,1,0,1,0,1,1,1,
        1,1,1,1,1,3,1,31,8,1,1,1,1,1,1,2,5,2,36,8,2,10,2,12,2,39,9,2,1,2,
        1,2,1,2,5,2,44,8,2,10,2,12,2,47,9,2,1,2,5,2,50,8,2,10,2,12,2,53,
        9,2,1,3,1,3,1,3,1,3,1,3,5,3,60,8,3,10,3,12,3,63,9,3,3,3,65,8,3,1,
        3,1,3,1,3,3,3,70,8,3,1,3,1,3,1,3,1,3,1,3,1,3,1,3,3,3,79,8,3,1,4,
        1,4,1,4,1,4,1,4,1,4,5,4,87,8,4,10,4,12,4,90,9,4,1,4,1,4,5,4,94,8,
        4,10,4,12,4,97,9,4,1,5,1,5,1,5,1,5,3,5,103,8,5,1,6,3,6,106,8,6,1,
        6,1,6,1,6,1,6,1,6,1,6,1,6,1,6,3,6,116,8,6,1,6,3,6,119,8,6,1,7,1,
        7,1,8,1,8,1,8,1,8,1,8,1,8,1,8,1,8,1,8,1,8,1,8,1,8,1,8,1,8,1,8,3,
        8,138,8,8,1,8,0,0,9,0,2,4,6,8,10,12,14,16,0,3,2,0,3,3,24,24,2,0,
        3,12,22,23,1,0,36,37,155,0,21,1,0,0,0,2,26,1,0,0,0,4,37,1,0,0,0,
        6,78,1,0,0,0,8,80,1,0,0,0,10,98,1,0,0,0,12,105,1,0,0,0,14,120,1,
        0,0,0,16,137,1,0,0,0,18,20,3,2,1,0,19,18,1,0,0,0,20,23,1,0,0,0,21,
        19,1,0,0,0,21,22,1,0,0,0,22,24,1,0,0,0,23,21,1,0,0,0,24,25,5,0,0,
        1,25,1,1,0,0,0,26,27,5,36,0,0,27,30,5,1,0,0,28,31,3,8,4,0,29,31,
        3,4,2,0,30,28,1,0,0,0,30,29,1,0,0,0,31,32,1,0,0,0,32,33,5,2,0,0,
        33,3,1,0,0,0,34,36,7,0,0,0,35,34,1,0,0,0,36,39,1,0,0,0,37,35,1,0,
        0,0,37,38,1,0,0,0,38,40,1,0,0,0,39,37,1,0,0,0,40,51,3,6,3,0,41,45,
        7,1,0,0,42,44,7,0,0,0,43,42,1,0,0,0,44,47,1,0,0,0,45,43,1,0,0,0,
        45,46,1,0,0,0,46,48,1,0,0,0,47,45,1,0,0,0,48,50,3,6,3,0,49,41,1,
        0,0,0,50,53,1,0,0,0,51,49,1,0,0,0,51,52,1,0,0,0,52,5,1,0,0,0,53,
        51,1,0,0,0,54,69,5,36,0,0,55,64,5,13,0,0,56,61,3,4,2,0,57,58,5,14,
        0,0,58,60,3,4,2,0,59,57,1,0,0,0,60,63,1,0,0,0,61,59,1,0,0,0,61,62,
        1,0,0,0,62,65,1,0,0,0,63,61,1,0,0,0,64,56,1,0,0,0,64,65,1,0,0,0,
        65,66,1,0,0,0,66,70,5,15,0,0,67,68,5,16,0,0,68,70,5,36,0,0,69,55,
        1,0,0,0,69,67,1,0,0,0,69,70,1,0,0,0,70,79,1,0,0,0,71,79,5,35,0,0,
        72,79,5,34,0,0,73,79,5,37,0,0,74,75,5,13,0,0,75,76,3,4,2,0,76,77,
        5,15,0,0,77,79,1,0,0,0,78,54,1,0,0,0,78,71,1,0,0,0,78,72,1,0,0,0,
        78,73,1,0,0,0,78,74,1,0,0,0,79,7,1,0,0,0,80,81,5,25,0,0,81,82,5,
        13,0,0,82,88,3,12,6,0,83,84,3,10,5,0,84,85,3,12,6,0,85,87,1,0,0,
        0,86,83,1,0,0,0,87,90,1,0,0,0,88,86,1,0,0,0,88,89,1,0,0,0,89,91,
        1,0,0,0,90,88,1,0,0,0,91,95,5,15,0,0,92,94,3,16,8,0,93,92,1,0,0,
        0,94,97,1,0,0,0,95,93,1,0,0,0,95,96,1,0,0,0,96,9,1,0,0,0,97,95,1,
        0,0,0,98,102,5,17,0,0,99,100,5,18,0,0,100,101,5,36,0,0,101,103,5,
        19,0,0,102,99,1,0,0,0,102,103,1,0,0,0,103,11,1,0,0,0,104,106,5,20,
        0,0,105,104,1,0,0,0,105,106,1,0,0,0,106,107,1,0,0,0,107,108,5,36,
        0,0,108,115,5,21,0,0,109,110,5,36,0,0,110,111,5,13,0,0,111,112,3,
        14,7,0,112,113,5,15,0,0,113,116,1,0,0,0,114,116,3,14,7,0,115,109,
        1,0,0,0,115,114,1,0,0,0,116,118,1,0,0,0,117,119,5,6,0,0,118,117,
        1,0,0,0,118,119,1,0,0,0,119,13,1,0,0,0,120,121,7,2,0,0,121,15,1,
        0,0,0,122,123,5,26,0,0,123,138,3,4,2,0,124,125,5,27,0,0,125,138,
        3,4,2,0,126,127,5,28,0,0,127,138,5,36,0,0,128,129,5,29,0,0,129,138,
        5,36,0,0,130,131,5,30,0,0,131,132,5,31,0,0,132,138,5,36,0,0,133,
        134,5,32,0,0,134,138,3,4,2,0,135,136,5,33,0,0,136,138,3,4,2,0,137,
        122,1,0,0,0,137,124,1,0,0,0,137,126,1,0,0,0,137,128,1,0,0,0,137,
        130,1,0,0,0,137,133,1,0,0,0,137,135,1,0,0,0,138,17,1,0,0,0,16,21,
        30,37,45,51,61,64,69,78,88,95,102,105,115,118,137
    ]

class SensorScriptParser ( Parser ):

    grammarFileName = "SensorScript.g4"

    atn = ATNDeserializer().deserialize(serializedATN())

    decisionsToDFA = [ DFA(ds, i) for i, ds in enumerate(atn.decisionToState) ]

    sharedContextCache = PredictionContextCache()

    literalNames = [ "<INVALID>", "'='", "';'", "'-'", "'*'", "'/'", "'+'", 
                     "'>'", "'>='", "'<'", "'<='", "'=='", "'!='", "'('", 
                     "','", "')'", "'.'", "'->'", "'['", "']'", "'!'", "':'", 
                     "'and'", "'or'", "'not'", "'pattern'", "'where'", "'within'", 
                     "'strategy'", "'emit'", "'partition'", "'by'", "'yield'", 
                     "'limit'" ]

    symbolicNames = [ "<INVALID>", "<INVALID>", "<INVALID>", "<INVALID>", 
                      "<INVALID>", "<INVALID>", "<INVALID>", "<INVALID>", 
                      "<INVALID>", "<INVALID>", "<INVALID>", "<INVALID>", 
                      "<INVALID>", "<INVALID>", "<INVALID>", "<INVALID>", 
                      "<INVALID>", "<INVALID>", "<INVALID>", "<INVALID>", 
                      "<INVALID>", "<INVALID>", "AND", "OR", "NOT", "PATTERN", 
                      "WHERE", "WITHIN", "STRATEGY", "EMIT", "PARTITION", 
                      "BY", "YIELD", "LIMIT", "DURATION", "NUMBER", "IDENT", 
                      "STRING", "UNTERMINATED_STRING", "LINE_COMMENT", "BLOCK_COMMENT", 
                      "UNTERMINATED_COMMENT", "WS", "UNEXPECTED_CHAR" ]

    RULE_workflow = 0
    RULE_statement = 1
    RULE_expr = 2
    RULE_atom = 3
    RULE_pattern = 4
    RULE_link = 5
    RULE_patternElement = 6
    RULE_streamRef = 7
    RULE_patternClause = 8

    ruleNames =  [ "workflow", "statement", "expr", "atom", "pattern", "link", 
                   "patternElement", "streamRef", "patternClause" ]

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
    T__19=20
    T__20=21
    AND=22
    OR=23
    NOT=24
    PATTERN=25
    WHERE=26
    WITHIN=27
    STRATEGY=28
    EMIT=29
    PARTITION=30
    BY=31
    YIELD=32
    LIMIT=33
    DURATION=34
    NUMBER=35
    IDENT=36
    STRING=37
    UNTERMINATED_STRING=38
    LINE_COMMENT=39
    BLOCK_COMMENT=40
    UNTERMINATED_COMMENT=41
    WS=42
    UNEXPECTED_CHAR=43

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
            self.state = 21
            self._errHandler.sync(self)
            _la = self._input.LA(1)
            while _la==36:
                self.state = 18
                self.statement()
                self.state = 23
                self._errHandler.sync(self)
                _la = self._input.LA(1)

            self.state = 24
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
            self.state = 26
            localctx.name = self.match(SensorScriptParser.IDENT)
            self.state = 27
            self.match(SensorScriptParser.T__0)
            self.state = 30
            self._errHandler.sync(self)
            token = self._input.LA(1)
            if token in [25]:
                self.state = 28
                self.pattern()
                pass
            elif token in [3, 13, 24, 34, 35, 36, 37]:
                self.state = 29
                self.expr()
                pass
            else:
                raise NoViableAltException(self)

            self.state = 32
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
            self.state = 37
            self._errHandler.sync(self)
            _la = self._input.LA(1)
            while _la==3 or _la==24:
                self.state = 34
                _la = self._input.LA(1)
                if not(_la==3 or _la==24):
                    self._errHandler.recoverInline(self)
                else:
                    self._errHandler.reportMatch(self)
                    self.consume()
                self.state = 39
                self._errHandler.sync(self)
                _la = self._input.LA(1)

            self.state = 40
            self.atom()
            self.state = 51
            self._errHandler.sync(self)
            _la = self._input.LA(1)
            while (((_la) & ~0x3f) == 0 and ((1 << _la) & 12591096) != 0):
                self.state = 41
                _la = self._input.LA(1)
                if not((((_la) & ~0x3f) == 0 and ((1 << _la) & 12591096) != 0)):
                    self._errHandler.recoverInline(self)
                else:
                    self._errHandler.reportMatch(self)
                    self.consume()
                self.state = 45
                self._errHandler.sync(self)
                _la = self._input.LA(1)
                while _la==3 or _la==24:
                    self.state = 42
                    _la = self._input.LA(1)
                    if not(_la==3 or _la==24):
                        self._errHandler.recoverInline(self)
                    else:
                        self._errHandler.reportMatch(self)
                        self.consume()
                    self.state = 47
                    self._errHandler.sync(self)
                    _la = self._input.LA(1)

                self.state = 48
                self.atom()
                self.state = 53
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
            self.state = 78
            self._errHandler.sync(self)
            token = self._input.LA(1)
            if token in [36]:
                self.enterOuterAlt(localctx, 1)
                self.state = 54
                localctx.name = self.match(SensorScriptParser.IDENT)
                self.state = 69
                self._errHandler.sync(self)
                token = self._input.LA(1)
                if token in [13]:
                    self.state = 55
                    localctx.call = self.match(SensorScriptParser.T__12)
                    self.state = 64
                    self._errHandler.sync(self)
                    _la = self._input.LA(1)
                    if (((_la) & ~0x3f) == 0 and ((1 << _la) & 257714823176) != 0):
                        self.state = 56
                        localctx._expr = self.expr()
                        localctx.args.append(localctx._expr)
                        self.state = 61
                        self._errHandler.sync(self)
                        _la = self._input.LA(1)
                        while _la==14:
                            self.state = 57
                            self.match(SensorScriptParser.T__13)
                            self.state = 58
                            localctx._expr = self.expr()
                            localctx.args.append(localctx._expr)
                            self.state = 63
                            self._errHandler.sync(self)
                            _la = self._input.LA(1)



                    self.state = 66
                    self.match(SensorScriptParser.T__14)
                    pass
                elif token in [16]:
                    self.state = 67
                    self.match(SensorScriptParser.T__15)
                    self.state = 68
                    localctx.attr = self.match(SensorScriptParser.IDENT)
                    pass
                elif token in [2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 14, 15, 22, 23, 26, 27, 28, 29, 30, 32, 33]:
                    pass
                else:
                    pass
                pass
            elif token in [35]:
                self.enterOuterAlt(localctx, 2)
                self.state = 71
                self.match(SensorScriptParser.NUMBER)
                pass
            elif token in [34]:
                self.enterOuterAlt(localctx, 3)
                self.state = 72
                self.match(SensorScriptParser.DURATION)
                pass
            elif token in [37]:
                self.enterOuterAlt(localctx, 4)
                self.state = 73
                self.match(SensorScriptParser.STRING)
                pass
            elif token in [13]:
                self.enterOuterAlt(localctx, 5)
                self.state = 74
                self.match(SensorScriptParser.T__12)
                self.state = 75
                localctx.inner = self.expr()
                self.state = 76
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
            self._link = None # LinkContext
            self.links = list() # of LinkContexts
            self._patternClause = None # PatternClauseContext
            self.clauses = list() # of PatternClauseContexts

        def PATTERN(self):
            return self.getToken(SensorScriptParser.PATTERN, 0)

        def patternElement(self, i:int=None):
            if i is None:
                return self.getTypedRuleContexts(SensorScriptParser.PatternElementContext)
            else:
                return self.getTypedRuleContext(SensorScriptParser.PatternElementContext,i)


        def link(self, i:int=None):
            if i is None:
                return self.getTypedRuleContexts(SensorScriptParser.LinkContext)
            else:
                return self.getTypedRuleContext(SensorScriptParser.LinkContext,i)


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
            self.state = 80
            self.match(SensorScriptParser.PATTERN)
            self.state = 81
            self.match(SensorScriptParser.T__12)
            self.state = 82
            localctx._patternElement = self.patternElement()
            localctx.elements.append(localctx._patternElement)
            self.state = 88
            self._errHandler.sync(self)
            _la = self._input.LA(1)
            while _la==17:
                self.state = 83
                localctx._link = self.link()
                localctx.links.append(localctx._link)
                self.state = 84
                localctx._patternElement = self.patternElement()
                localctx.elements.append(localctx._patternElement)
                self.state = 90
                self._errHandler.sync(self)
                _la = self._input.LA(1)

            self.state = 91
            self.match(SensorScriptParser.T__14)
            self.state = 95
            self._errHandler.sync(self)
            _la = self._input.LA(1)
            while (((_la) & ~0x3f) == 0 and ((1 << _la) & 14965276672) != 0):
                self.state = 92
                localctx._patternClause = self.patternClause()
                localctx.clauses.append(localctx._patternClause)
                self.state = 97
                self._errHandler.sync(self)
                _la = self._input.LA(1)

        except RecognitionException as re:
            localctx.exception = re
            self._errHandler.reportError(self, re)
            self._errHandler.recover(self, re)
        finally:
            self.exitRule()
        return localctx


    class LinkContext(ParserRuleContext):
        __slots__ = 'parser'

        def __init__(self, parser, parent:ParserRuleContext=None, invokingState:int=-1):
            super().__init__(parent, invokingState)
            self.parser = parser
            self.operator = None # Token

        def IDENT(self):
            return self.getToken(SensorScriptParser.IDENT, 0)

        def getRuleIndex(self):
            return SensorScriptParser.RULE_link

        def accept(self, visitor:ParseTreeVisitor):
            if hasattr( visitor, "visitLink" ):
                return visitor.visitLink(self)
            else:
                return visitor.visitChildren(self)




    def link(self):

        localctx = SensorScriptParser.LinkContext(self, self._ctx, self.state)
        self.enterRule(localctx, 10, self.RULE_link)
        self._la = 0 # Token type
        try:
            self.enterOuterAlt(localctx, 1)
            self.state = 98
            self.match(SensorScriptParser.T__16)
            self.state = 102
            self._errHandler.sync(self)
            _la = self._input.LA(1)
            if _la==18:
                self.state = 99
                self.match(SensorScriptParser.T__17)
                self.state = 100
                localctx.operator = self.match(SensorScriptParser.IDENT)
                self.state = 101
                self.match(SensorScriptParser.T__18)


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
            self.operator = None # Token
            self.stream = None # StreamRefContext
            self.kleene = None # Token

        def IDENT(self, i:int=None):
            if i is None:
                return self.getTokens(SensorScriptParser.IDENT)
            else:
                return self.getToken(SensorScriptParser.IDENT, i)

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
        self.enterRule(localctx, 12, self.RULE_patternElement)
        self._la = 0 # Token type
        try:
            self.enterOuterAlt(localctx, 1)
            self.state = 105
            self._errHandler.sync(self)
            _la = self._input.LA(1)
            if _la==20:
                self.state = 104
                localctx.negated = self.match(SensorScriptParser.T__19)


            self.state = 107
            localctx.var = self.match(SensorScriptParser.IDENT)
            self.state = 108
            self.match(SensorScriptParser.T__20)
            self.state = 115
            self._errHandler.sync(self)
            la_ = self._interp.adaptivePredict(self._input,13,self._ctx)
            if la_ == 1:
                self.state = 109
                localctx.operator = self.match(SensorScriptParser.IDENT)
                self.state = 110
                self.match(SensorScriptParser.T__12)
                self.state = 111
                localctx.stream = self.streamRef()
                self.state = 112
                self.match(SensorScriptParser.T__14)
                pass

            elif la_ == 2:
                self.state = 114
                localctx.stream = self.streamRef()
                pass


            self.state = 118
            self._errHandler.sync(self)
            _la = self._input.LA(1)
            if _la==6:
                self.state = 117
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
        self.enterRule(localctx, 14, self.RULE_streamRef)
        self._la = 0 # Token type
        try:
            self.enterOuterAlt(localctx, 1)
            self.state = 120
            _la = self._input.LA(1)
            if not(_la==36 or _la==37):
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


    class LimitClauseContext(PatternClauseContext):

        def __init__(self, parser, ctx:ParserRuleContext): # actually a SensorScriptParser.PatternClauseContext
            super().__init__(parser)
            self.copyFrom(ctx)

        def LIMIT(self):
            return self.getToken(SensorScriptParser.LIMIT, 0)
        def expr(self):
            return self.getTypedRuleContext(SensorScriptParser.ExprContext,0)


        def accept(self, visitor:ParseTreeVisitor):
            if hasattr( visitor, "visitLimitClause" ):
                return visitor.visitLimitClause(self)
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
        self.enterRule(localctx, 16, self.RULE_patternClause)
        try:
            self.state = 137
            self._errHandler.sync(self)
            token = self._input.LA(1)
            if token in [26]:
                localctx = SensorScriptParser.WhereClauseContext(self, localctx)
                self.enterOuterAlt(localctx, 1)
                self.state = 122
                self.match(SensorScriptParser.WHERE)
                self.state = 123
                self.expr()
                pass
            elif token in [27]:
                localctx = SensorScriptParser.WithinClauseContext(self, localctx)
                self.enterOuterAlt(localctx, 2)
                self.state = 124
                self.match(SensorScriptParser.WITHIN)
                self.state = 125
                self.expr()
                pass
            elif token in [28]:
                localctx = SensorScriptParser.StrategyClauseContext(self, localctx)
                self.enterOuterAlt(localctx, 3)
                self.state = 126
                self.match(SensorScriptParser.STRATEGY)
                self.state = 127
                localctx.value = self.match(SensorScriptParser.IDENT)
                pass
            elif token in [29]:
                localctx = SensorScriptParser.EmitClauseContext(self, localctx)
                self.enterOuterAlt(localctx, 4)
                self.state = 128
                self.match(SensorScriptParser.EMIT)
                self.state = 129
                localctx.value = self.match(SensorScriptParser.IDENT)
                pass
            elif token in [30]:
                localctx = SensorScriptParser.PartitionClauseContext(self, localctx)
                self.enterOuterAlt(localctx, 5)
                self.state = 130
                self.match(SensorScriptParser.PARTITION)
                self.state = 131
                self.match(SensorScriptParser.BY)
                self.state = 132
                localctx.value = self.match(SensorScriptParser.IDENT)
                pass
            elif token in [32]:
                localctx = SensorScriptParser.YieldClauseContext(self, localctx)
                self.enterOuterAlt(localctx, 6)
                self.state = 133
                self.match(SensorScriptParser.YIELD)
                self.state = 134
                self.expr()
                pass
            elif token in [33]:
                localctx = SensorScriptParser.LimitClauseContext(self, localctx)
                self.enterOuterAlt(localctx, 7)
                self.state = 135
                self.match(SensorScriptParser.LIMIT)
                self.state = 136
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





