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
        4,1,40,134,2,0,7,0,2,1,7,1,2,2,7,2,2,3,7,3,2,4,7,4,2,5,7,5,2,6,7,
        6,2,7,7,7,1,0,5,0,18,8,0,10,0,12,0,21,9,0,1,0,1,0,1,1,1,1,1,1,1,
        1,1,1,1,1,1,1,1,1,1,1,1,1,3,1,35,8,1,1,2,1,2,1,2,1,2,1,2,1,2,3,2,
        43,8,2,1,2,1,2,1,2,1,2,1,2,1,2,1,2,1,2,1,2,1,2,1,2,1,2,1,2,1,2,1,
        2,5,2,60,8,2,10,2,12,2,63,9,2,1,3,1,3,1,3,1,3,1,3,5,3,70,8,3,10,
        3,12,3,73,9,3,3,3,75,8,3,1,3,1,3,1,3,1,3,1,3,1,3,1,3,1,3,1,3,1,3,
        1,3,1,3,3,3,89,8,3,1,4,1,4,1,4,1,4,1,4,5,4,96,8,4,10,4,12,4,99,9,
        4,1,4,1,4,5,4,103,8,4,10,4,12,4,106,9,4,1,5,3,5,109,8,5,1,5,1,5,
        1,5,1,5,3,5,115,8,5,1,6,1,6,1,7,1,7,1,7,1,7,1,7,1,7,1,7,1,7,1,7,
        1,7,1,7,1,7,1,7,3,7,132,8,7,1,7,0,1,4,8,0,2,4,6,8,10,12,14,0,4,1,
        0,4,5,2,0,3,3,6,6,1,0,7,12,1,0,33,34,151,0,19,1,0,0,0,2,34,1,0,0,
        0,4,42,1,0,0,0,6,88,1,0,0,0,8,90,1,0,0,0,10,108,1,0,0,0,12,116,1,
        0,0,0,14,131,1,0,0,0,16,18,3,2,1,0,17,16,1,0,0,0,18,21,1,0,0,0,19,
        17,1,0,0,0,19,20,1,0,0,0,20,22,1,0,0,0,21,19,1,0,0,0,22,23,5,0,0,
        1,23,1,1,0,0,0,24,25,5,33,0,0,25,26,5,1,0,0,26,27,3,8,4,0,27,28,
        5,2,0,0,28,35,1,0,0,0,29,30,5,33,0,0,30,31,5,1,0,0,31,32,3,4,2,0,
        32,33,5,2,0,0,33,35,1,0,0,0,34,24,1,0,0,0,34,29,1,0,0,0,35,3,1,0,
        0,0,36,37,6,2,-1,0,37,38,5,3,0,0,38,43,3,4,2,8,39,40,5,22,0,0,40,
        43,3,4,2,4,41,43,3,6,3,0,42,36,1,0,0,0,42,39,1,0,0,0,42,41,1,0,0,
        0,43,61,1,0,0,0,44,45,10,7,0,0,45,46,7,0,0,0,46,60,3,4,2,8,47,48,
        10,6,0,0,48,49,7,1,0,0,49,60,3,4,2,7,50,51,10,5,0,0,51,52,7,2,0,
        0,52,60,3,4,2,6,53,54,10,3,0,0,54,55,5,20,0,0,55,60,3,4,2,4,56,57,
        10,2,0,0,57,58,5,21,0,0,58,60,3,4,2,3,59,44,1,0,0,0,59,47,1,0,0,
        0,59,50,1,0,0,0,59,53,1,0,0,0,59,56,1,0,0,0,60,63,1,0,0,0,61,59,
        1,0,0,0,61,62,1,0,0,0,62,5,1,0,0,0,63,61,1,0,0,0,64,65,5,33,0,0,
        65,74,5,13,0,0,66,71,3,4,2,0,67,68,5,14,0,0,68,70,3,4,2,0,69,67,
        1,0,0,0,70,73,1,0,0,0,71,69,1,0,0,0,71,72,1,0,0,0,72,75,1,0,0,0,
        73,71,1,0,0,0,74,66,1,0,0,0,74,75,1,0,0,0,75,76,1,0,0,0,76,89,5,
        15,0,0,77,78,5,33,0,0,78,79,5,16,0,0,79,89,5,33,0,0,80,89,5,32,0,
        0,81,89,5,31,0,0,82,89,5,33,0,0,83,89,5,34,0,0,84,85,5,13,0,0,85,
        86,3,4,2,0,86,87,5,15,0,0,87,89,1,0,0,0,88,64,1,0,0,0,88,77,1,0,
        0,0,88,80,1,0,0,0,88,81,1,0,0,0,88,82,1,0,0,0,88,83,1,0,0,0,88,84,
        1,0,0,0,89,7,1,0,0,0,90,91,5,23,0,0,91,92,5,13,0,0,92,97,3,10,5,
        0,93,94,5,17,0,0,94,96,3,10,5,0,95,93,1,0,0,0,96,99,1,0,0,0,97,95,
        1,0,0,0,97,98,1,0,0,0,98,100,1,0,0,0,99,97,1,0,0,0,100,104,5,15,
        0,0,101,103,3,14,7,0,102,101,1,0,0,0,103,106,1,0,0,0,104,102,1,0,
        0,0,104,105,1,0,0,0,105,9,1,0,0,0,106,104,1,0,0,0,107,109,5,18,0,
        0,108,107,1,0,0,0,108,109,1,0,0,0,109,110,1,0,0,0,110,111,5,33,0,
        0,111,112,5,19,0,0,112,114,3,12,6,0,113,115,5,6,0,0,114,113,1,0,
        0,0,114,115,1,0,0,0,115,11,1,0,0,0,116,117,7,3,0,0,117,13,1,0,0,
        0,118,119,5,24,0,0,119,132,3,4,2,0,120,121,5,25,0,0,121,132,3,4,
        2,0,122,123,5,26,0,0,123,132,5,33,0,0,124,125,5,27,0,0,125,132,5,
        33,0,0,126,127,5,28,0,0,127,128,5,29,0,0,128,132,5,33,0,0,129,130,
        5,30,0,0,130,132,3,4,2,0,131,118,1,0,0,0,131,120,1,0,0,0,131,122,
        1,0,0,0,131,124,1,0,0,0,131,126,1,0,0,0,131,129,1,0,0,0,132,15,1,
        0,0,0,13,19,34,42,59,61,71,74,88,97,104,108,114,131
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


        def getRuleIndex(self):
            return SensorScriptParser.RULE_statement

     
        def copyFrom(self, ctx:ParserRuleContext):
            super().copyFrom(ctx)



    class PatternStatementContext(StatementContext):

        def __init__(self, parser, ctx:ParserRuleContext): # actually a SensorScriptParser.StatementContext
            super().__init__(parser)
            self.name = None # Token
            self.copyFrom(ctx)

        def pattern(self):
            return self.getTypedRuleContext(SensorScriptParser.PatternContext,0)

        def IDENT(self):
            return self.getToken(SensorScriptParser.IDENT, 0)

        def accept(self, visitor:ParseTreeVisitor):
            if hasattr( visitor, "visitPatternStatement" ):
                return visitor.visitPatternStatement(self)
            else:
                return visitor.visitChildren(self)


    class ExprStatementContext(StatementContext):

        def __init__(self, parser, ctx:ParserRuleContext): # actually a SensorScriptParser.StatementContext
            super().__init__(parser)
            self.name = None # Token
            self.copyFrom(ctx)

        def expr(self):
            return self.getTypedRuleContext(SensorScriptParser.ExprContext,0)

        def IDENT(self):
            return self.getToken(SensorScriptParser.IDENT, 0)

        def accept(self, visitor:ParseTreeVisitor):
            if hasattr( visitor, "visitExprStatement" ):
                return visitor.visitExprStatement(self)
            else:
                return visitor.visitChildren(self)



    def statement(self):

        localctx = SensorScriptParser.StatementContext(self, self._ctx, self.state)
        self.enterRule(localctx, 2, self.RULE_statement)
        try:
            self.state = 34
            self._errHandler.sync(self)
            la_ = self._interp.adaptivePredict(self._input,1,self._ctx)
            if la_ == 1:
                localctx = SensorScriptParser.PatternStatementContext(self, localctx)
                self.enterOuterAlt(localctx, 1)
                self.state = 24
                localctx.name = self.match(SensorScriptParser.IDENT)
                self.state = 25
                self.match(SensorScriptParser.T__0)
                self.state = 26
                self.pattern()
                self.state = 27
                self.match(SensorScriptParser.T__1)
                pass

            elif la_ == 2:
                localctx = SensorScriptParser.ExprStatementContext(self, localctx)
                self.enterOuterAlt(localctx, 2)
                self.state = 29
                localctx.name = self.match(SensorScriptParser.IDENT)
                self.state = 30
                self.match(SensorScriptParser.T__0)
                self.state = 31
                self.expr(0)
                self.state = 32
                self.match(SensorScriptParser.T__1)
                pass


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


        def getRuleIndex(self):
            return SensorScriptParser.RULE_expr

     
        def copyFrom(self, ctx:ParserRuleContext):
            super().copyFrom(ctx)


    class NotExprContext(ExprContext):

        def __init__(self, parser, ctx:ParserRuleContext): # actually a SensorScriptParser.ExprContext
            super().__init__(parser)
            self.op = None # Token
            self.operand = None # ExprContext
            self.copyFrom(ctx)

        def NOT(self):
            return self.getToken(SensorScriptParser.NOT, 0)
        def expr(self):
            return self.getTypedRuleContext(SensorScriptParser.ExprContext,0)


        def accept(self, visitor:ParseTreeVisitor):
            if hasattr( visitor, "visitNotExpr" ):
                return visitor.visitNotExpr(self)
            else:
                return visitor.visitChildren(self)


    class AddExprContext(ExprContext):

        def __init__(self, parser, ctx:ParserRuleContext): # actually a SensorScriptParser.ExprContext
            super().__init__(parser)
            self.left = None # ExprContext
            self.op = None # Token
            self.right = None # ExprContext
            self.copyFrom(ctx)

        def expr(self, i:int=None):
            if i is None:
                return self.getTypedRuleContexts(SensorScriptParser.ExprContext)
            else:
                return self.getTypedRuleContext(SensorScriptParser.ExprContext,i)


        def accept(self, visitor:ParseTreeVisitor):
            if hasattr( visitor, "visitAddExpr" ):
                return visitor.visitAddExpr(self)
            else:
                return visitor.visitChildren(self)


    class NegExprContext(ExprContext):

        def __init__(self, parser, ctx:ParserRuleContext): # actually a SensorScriptParser.ExprContext
            super().__init__(parser)
            self.op = None # Token
            self.operand = None # ExprContext
            self.copyFrom(ctx)

        def expr(self):
            return self.getTypedRuleContext(SensorScriptParser.ExprContext,0)


        def accept(self, visitor:ParseTreeVisitor):
            if hasattr( visitor, "visitNegExpr" ):
                return visitor.visitNegExpr(self)
            else:
                return visitor.visitChildren(self)


    class MulExprContext(ExprContext):

        def __init__(self, parser, ctx:ParserRuleContext): # actually a SensorScriptParser.ExprContext
            super().__init__(parser)
            self.left = None # ExprContext
            self.op = None # Token
            self.right = None # ExprContext
            self.copyFrom(ctx)

        def expr(self, i:int=None):
            if i is None:
                return self.getTypedRuleContexts(SensorScriptParser.ExprContext)
            else:
                return self.getTypedRuleContext(SensorScriptParser.ExprContext,i)


        def accept(self, visitor:ParseTreeVisitor):
            if hasattr( visitor, "visitMulExpr" ):
                return visitor.visitMulExpr(self)
            else:
                return visitor.visitChildren(self)


    class AtomExprContext(ExprContext):

        def __init__(self, parser, ctx:ParserRuleContext): # actually a SensorScriptParser.ExprContext
            super().__init__(parser)
            self.copyFrom(ctx)

        def atom(self):
            return self.getTypedRuleContext(SensorScriptParser.AtomContext,0)


        def accept(self, visitor:ParseTreeVisitor):
            if hasattr( visitor, "visitAtomExpr" ):
                return visitor.visitAtomExpr(self)
            else:
                return visitor.visitChildren(self)


    class OrExprContext(ExprContext):

        def __init__(self, parser, ctx:ParserRuleContext): # actually a SensorScriptParser.ExprContext
            super().__init__(parser)
            self.left = None # ExprContext
            self.op = None # Token
            self.right = None # ExprContext
            self.copyFrom(ctx)

        def expr(self, i:int=None):
            if i is None:
                return self.getTypedRuleContexts(SensorScriptParser.ExprContext)
            else:
                return self.getTypedRuleContext(SensorScriptParser.ExprContext,i)

        def OR(self):
            return self.getToken(SensorScriptParser.OR, 0)

        def accept(self, visitor:ParseTreeVisitor):
            if hasattr( visitor, "visitOrExpr" ):
                return visitor.visitOrExpr(self)
            else:
                return visitor.visitChildren(self)


    class CompareExprContext(ExprContext):

        def __init__(self, parser, ctx:ParserRuleContext): # actually a SensorScriptParser.ExprContext
            super().__init__(parser)
            self.left = None # ExprContext
            self.op = None # Token
            self.right = None # ExprContext
            self.copyFrom(ctx)

        def expr(self, i:int=None):
            if i is None:
                return self.getTypedRuleContexts(SensorScriptParser.ExprContext)
            else:
                return self.getTypedRuleContext(SensorScriptParser.ExprContext,i)


        def accept(self, visitor:ParseTreeVisitor):
            if hasattr( visitor, "visitCompareExpr" ):
                return visitor.visitCompareExpr(self)
            else:
                return visitor.visitChildren(self)


    class AndExprContext(ExprContext):

        def __init__(self, parser, ctx:ParserRuleContext): # actually a SensorScriptParser.ExprContext
            super().__init__(parser)
            self.left = None # ExprContext
            self.op = None # Token
            self.right = None # ExprContext
            self.copyFrom(ctx)

        def expr(self, i:int=None):
            if i is None:
                return self.getTypedRuleContexts(SensorScriptParser.ExprContext)
            else:
                return self.getTypedRuleContext(SensorScriptParser.ExprContext,i)

        def AND(self):
            return self.getToken(SensorScriptParser.AND, 0)

        def accept(self, visitor:ParseTreeVisitor):
            if hasattr( visitor, "visitAndExpr" ):
                return visitor.visitAndExpr(self)
            else:
                return visitor.visitChildren(self)



    def expr(self, _p:int=0):
        _parentctx = self._ctx
        _parentState = self.state
        localctx = SensorScriptParser.ExprContext(self, self._ctx, _parentState)
        _prevctx = localctx
        _startState = 4
        self.enterRecursionRule(localctx, 4, self.RULE_expr, _p)
        self._la = 0 # Token type
        try:
            self.enterOuterAlt(localctx, 1)
            self.state = 42
            self._errHandler.sync(self)
            token = self._input.LA(1)
            if token in [3]:
                localctx = SensorScriptParser.NegExprContext(self, localctx)
                self._ctx = localctx
                _prevctx = localctx

                self.state = 37
                localctx.op = self.match(SensorScriptParser.T__2)
                self.state = 38
                localctx.operand = self.expr(8)
                pass
            elif token in [22]:
                localctx = SensorScriptParser.NotExprContext(self, localctx)
                self._ctx = localctx
                _prevctx = localctx
                self.state = 39
                localctx.op = self.match(SensorScriptParser.NOT)
                self.state = 40
                localctx.operand = self.expr(4)
                pass
            elif token in [13, 31, 32, 33, 34]:
                localctx = SensorScriptParser.AtomExprContext(self, localctx)
                self._ctx = localctx
                _prevctx = localctx
                self.state = 41
                self.atom()
                pass
            else:
                raise NoViableAltException(self)

            self._ctx.stop = self._input.LT(-1)
            self.state = 61
            self._errHandler.sync(self)
            _alt = self._interp.adaptivePredict(self._input,4,self._ctx)
            while _alt!=2 and _alt!=ATN.INVALID_ALT_NUMBER:
                if _alt==1:
                    if self._parseListeners is not None:
                        self.triggerExitRuleEvent()
                    _prevctx = localctx
                    self.state = 59
                    self._errHandler.sync(self)
                    la_ = self._interp.adaptivePredict(self._input,3,self._ctx)
                    if la_ == 1:
                        localctx = SensorScriptParser.MulExprContext(self, SensorScriptParser.ExprContext(self, _parentctx, _parentState))
                        localctx.left = _prevctx
                        self.pushNewRecursionContext(localctx, _startState, self.RULE_expr)
                        self.state = 44
                        if not self.precpred(self._ctx, 7):
                            from antlr4.error.Errors import FailedPredicateException
                            raise FailedPredicateException(self, "self.precpred(self._ctx, 7)")
                        self.state = 45
                        localctx.op = self._input.LT(1)
                        _la = self._input.LA(1)
                        if not(_la==4 or _la==5):
                            localctx.op = self._errHandler.recoverInline(self)
                        else:
                            self._errHandler.reportMatch(self)
                            self.consume()
                        self.state = 46
                        localctx.right = self.expr(8)
                        pass

                    elif la_ == 2:
                        localctx = SensorScriptParser.AddExprContext(self, SensorScriptParser.ExprContext(self, _parentctx, _parentState))
                        localctx.left = _prevctx
                        self.pushNewRecursionContext(localctx, _startState, self.RULE_expr)
                        self.state = 47
                        if not self.precpred(self._ctx, 6):
                            from antlr4.error.Errors import FailedPredicateException
                            raise FailedPredicateException(self, "self.precpred(self._ctx, 6)")
                        self.state = 48
                        localctx.op = self._input.LT(1)
                        _la = self._input.LA(1)
                        if not(_la==3 or _la==6):
                            localctx.op = self._errHandler.recoverInline(self)
                        else:
                            self._errHandler.reportMatch(self)
                            self.consume()
                        self.state = 49
                        localctx.right = self.expr(7)
                        pass

                    elif la_ == 3:
                        localctx = SensorScriptParser.CompareExprContext(self, SensorScriptParser.ExprContext(self, _parentctx, _parentState))
                        localctx.left = _prevctx
                        self.pushNewRecursionContext(localctx, _startState, self.RULE_expr)
                        self.state = 50
                        if not self.precpred(self._ctx, 5):
                            from antlr4.error.Errors import FailedPredicateException
                            raise FailedPredicateException(self, "self.precpred(self._ctx, 5)")
                        self.state = 51
                        localctx.op = self._input.LT(1)
                        _la = self._input.LA(1)
                        if not((((_la) & ~0x3f) == 0 and ((1 << _la) & 8064) != 0)):
                            localctx.op = self._errHandler.recoverInline(self)
                        else:
                            self._errHandler.reportMatch(self)
                            self.consume()
                        self.state = 52
                        localctx.right = self.expr(6)
                        pass

                    elif la_ == 4:
                        localctx = SensorScriptParser.AndExprContext(self, SensorScriptParser.ExprContext(self, _parentctx, _parentState))
                        localctx.left = _prevctx
                        self.pushNewRecursionContext(localctx, _startState, self.RULE_expr)
                        self.state = 53
                        if not self.precpred(self._ctx, 3):
                            from antlr4.error.Errors import FailedPredicateException
                            raise FailedPredicateException(self, "self.precpred(self._ctx, 3)")
                        self.state = 54
                        localctx.op = self.match(SensorScriptParser.AND)
                        self.state = 55
                        localctx.right = self.expr(4)
                        pass

                    elif la_ == 5:
                        localctx = SensorScriptParser.OrExprContext(self, SensorScriptParser.ExprContext(self, _parentctx, _parentState))
                        localctx.left = _prevctx
                        self.pushNewRecursionContext(localctx, _startState, self.RULE_expr)
                        self.state = 56
                        if not self.precpred(self._ctx, 2):
                            from antlr4.error.Errors import FailedPredicateException
                            raise FailedPredicateException(self, "self.precpred(self._ctx, 2)")
                        self.state = 57
                        localctx.op = self.match(SensorScriptParser.OR)
                        self.state = 58
                        localctx.right = self.expr(3)
                        pass

             
                self.state = 63
                self._errHandler.sync(self)
                _alt = self._interp.adaptivePredict(self._input,4,self._ctx)

        except RecognitionException as re:
            localctx.exception = re
            self._errHandler.reportError(self, re)
            self._errHandler.recover(self, re)
        finally:
            self.unrollRecursionContexts(_parentctx)
        return localctx


    class AtomContext(ParserRuleContext):
        __slots__ = 'parser'

        def __init__(self, parser, parent:ParserRuleContext=None, invokingState:int=-1):
            super().__init__(parent, invokingState)
            self.parser = parser


        def getRuleIndex(self):
            return SensorScriptParser.RULE_atom

     
        def copyFrom(self, ctx:ParserRuleContext):
            super().copyFrom(ctx)



    class NameAtomContext(AtomContext):

        def __init__(self, parser, ctx:ParserRuleContext): # actually a SensorScriptParser.AtomContext
            super().__init__(parser)
            self.copyFrom(ctx)

        def IDENT(self):
            return self.getToken(SensorScriptParser.IDENT, 0)

        def accept(self, visitor:ParseTreeVisitor):
            if hasattr( visitor, "visitNameAtom" ):
                return visitor.visitNameAtom(self)
            else:
                return visitor.visitChildren(self)


    class CallAtomContext(AtomContext):

        def __init__(self, parser, ctx:ParserRuleContext): # actually a SensorScriptParser.AtomContext
            super().__init__(parser)
            self.func = None # Token
            self._expr = None # ExprContext
            self.args = list() # of ExprContexts
            self.copyFrom(ctx)

        def IDENT(self):
            return self.getToken(SensorScriptParser.IDENT, 0)
        def expr(self, i:int=None):
            if i is None:
                return self.getTypedRuleContexts(SensorScriptParser.ExprContext)
            else:
                return self.getTypedRuleContext(SensorScriptParser.ExprContext,i)


        def accept(self, visitor:ParseTreeVisitor):
            if hasattr( visitor, "visitCallAtom" ):
                return visitor.visitCallAtom(self)
            else:
                return visitor.visitChildren(self)


    class ParenAtomContext(AtomContext):

        def __init__(self, parser, ctx:ParserRuleContext): # actually a SensorScriptParser.AtomContext
            super().__init__(parser)
            self.copyFrom(ctx)

        def expr(self):
            return self.getTypedRuleContext(SensorScriptParser.ExprContext,0)


        def accept(self, visitor:ParseTreeVisitor):
            if hasattr( visitor, "visitParenAtom" ):
                return visitor.visitParenAtom(self)
            else:
                return visitor.visitChildren(self)


    class AttributeAtomContext(AtomContext):

        def __init__(self, parser, ctx:ParserRuleContext): # actually a SensorScriptParser.AtomContext
            super().__init__(parser)
            self.var = None # Token
            self.attr = None # Token
            self.copyFrom(ctx)

        def IDENT(self, i:int=None):
            if i is None:
                return self.getTokens(SensorScriptParser.IDENT)
            else:
                return self.getToken(SensorScriptParser.IDENT, i)

        def accept(self, visitor:ParseTreeVisitor):
            if hasattr( visitor, "visitAttributeAtom" ):
                return visitor.visitAttributeAtom(self)
            else:
                return visitor.visitChildren(self)


    class StringAtomContext(AtomContext):

        def __init__(self, parser, ctx:ParserRuleContext): # actually a SensorScriptParser.AtomContext
            super().__init__(parser)
            self.copyFrom(ctx)

        def STRING(self):
            return self.getToken(SensorScriptParser.STRING, 0)

        def accept(self, visitor:ParseTreeVisitor):
            if hasattr( visitor, "visitStringAtom" ):
                return visitor.visitStringAtom(self)
            else:
                return visitor.visitChildren(self)


    class NumberAtomContext(AtomContext):

        def __init__(self, parser, ctx:ParserRuleContext): # actually a SensorScriptParser.AtomContext
            super().__init__(parser)
            self.copyFrom(ctx)

        def NUMBER(self):
            return self.getToken(SensorScriptParser.NUMBER, 0)

        def accept(self, visitor:ParseTreeVisitor):
            if hasattr( visitor, "visitNumberAtom" ):
                return visitor.visitNumberAtom(self)
            else:
                return visitor.visitChildren(self)


    class DurationAtomContext(AtomContext):

        def __init__(self, parser, ctx:ParserRuleContext): # actually a SensorScriptParser.AtomContext
            super().__init__(parser)
            self.copyFrom(ctx)

        def DURATION(self):
            return self.getToken(SensorScriptParser.DURATION, 0)

        def accept(self, visitor:ParseTreeVisitor):
            if hasattr( visitor, "visitDurationAtom" ):
                return visitor.visitDurationAtom(self)
            else:
                return visitor.visitChildren(self)



    def atom(self):

        localctx = SensorScriptParser.AtomContext(self, self._ctx, self.state)
        self.enterRule(localctx, 6, self.RULE_atom)
        self._la = 0 # Token type
        try:
            self.state = 88
            self._errHandler.sync(self)
            la_ = self._interp.adaptivePredict(self._input,7,self._ctx)
            if la_ == 1:
                localctx = SensorScriptParser.CallAtomContext(self, localctx)
                self.enterOuterAlt(localctx, 1)
                self.state = 64
                localctx.func = self.match(SensorScriptParser.IDENT)
                self.state = 65
                self.match(SensorScriptParser.T__12)
                self.state = 74
                self._errHandler.sync(self)
                _la = self._input.LA(1)
                if (((_la) & ~0x3f) == 0 and ((1 << _la) & 32216457224) != 0):
                    self.state = 66
                    localctx._expr = self.expr(0)
                    localctx.args.append(localctx._expr)
                    self.state = 71
                    self._errHandler.sync(self)
                    _la = self._input.LA(1)
                    while _la==14:
                        self.state = 67
                        self.match(SensorScriptParser.T__13)
                        self.state = 68
                        localctx._expr = self.expr(0)
                        localctx.args.append(localctx._expr)
                        self.state = 73
                        self._errHandler.sync(self)
                        _la = self._input.LA(1)



                self.state = 76
                self.match(SensorScriptParser.T__14)
                pass

            elif la_ == 2:
                localctx = SensorScriptParser.AttributeAtomContext(self, localctx)
                self.enterOuterAlt(localctx, 2)
                self.state = 77
                localctx.var = self.match(SensorScriptParser.IDENT)
                self.state = 78
                self.match(SensorScriptParser.T__15)
                self.state = 79
                localctx.attr = self.match(SensorScriptParser.IDENT)
                pass

            elif la_ == 3:
                localctx = SensorScriptParser.NumberAtomContext(self, localctx)
                self.enterOuterAlt(localctx, 3)
                self.state = 80
                self.match(SensorScriptParser.NUMBER)
                pass

            elif la_ == 4:
                localctx = SensorScriptParser.DurationAtomContext(self, localctx)
                self.enterOuterAlt(localctx, 4)
                self.state = 81
                self.match(SensorScriptParser.DURATION)
                pass

            elif la_ == 5:
                localctx = SensorScriptParser.NameAtomContext(self, localctx)
                self.enterOuterAlt(localctx, 5)
                self.state = 82
                self.match(SensorScriptParser.IDENT)
                pass

            elif la_ == 6:
                localctx = SensorScriptParser.StringAtomContext(self, localctx)
                self.enterOuterAlt(localctx, 6)
                self.state = 83
                self.match(SensorScriptParser.STRING)
                pass

            elif la_ == 7:
                localctx = SensorScriptParser.ParenAtomContext(self, localctx)
                self.enterOuterAlt(localctx, 7)
                self.state = 84
                self.match(SensorScriptParser.T__12)
                self.state = 85
                self.expr(0)
                self.state = 86
                self.match(SensorScriptParser.T__14)
                pass


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
            self.state = 90
            self.match(SensorScriptParser.PATTERN)
            self.state = 91
            self.match(SensorScriptParser.T__12)
            self.state = 92
            localctx._patternElement = self.patternElement()
            localctx.elements.append(localctx._patternElement)
            self.state = 97
            self._errHandler.sync(self)
            _la = self._input.LA(1)
            while _la==17:
                self.state = 93
                self.match(SensorScriptParser.T__16)
                self.state = 94
                localctx._patternElement = self.patternElement()
                localctx.elements.append(localctx._patternElement)
                self.state = 99
                self._errHandler.sync(self)
                _la = self._input.LA(1)

            self.state = 100
            self.match(SensorScriptParser.T__14)
            self.state = 104
            self._errHandler.sync(self)
            _la = self._input.LA(1)
            while (((_la) & ~0x3f) == 0 and ((1 << _la) & 1593835520) != 0):
                self.state = 101
                localctx._patternClause = self.patternClause()
                localctx.clauses.append(localctx._patternClause)
                self.state = 106
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
            self.state = 108
            self._errHandler.sync(self)
            _la = self._input.LA(1)
            if _la==18:
                self.state = 107
                localctx.negated = self.match(SensorScriptParser.T__17)


            self.state = 110
            localctx.var = self.match(SensorScriptParser.IDENT)
            self.state = 111
            self.match(SensorScriptParser.T__18)
            self.state = 112
            localctx.stream = self.streamRef()
            self.state = 114
            self._errHandler.sync(self)
            _la = self._input.LA(1)
            if _la==6:
                self.state = 113
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
            self.state = 116
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
            self.state = 131
            self._errHandler.sync(self)
            token = self._input.LA(1)
            if token in [24]:
                localctx = SensorScriptParser.WhereClauseContext(self, localctx)
                self.enterOuterAlt(localctx, 1)
                self.state = 118
                self.match(SensorScriptParser.WHERE)
                self.state = 119
                self.expr(0)
                pass
            elif token in [25]:
                localctx = SensorScriptParser.WithinClauseContext(self, localctx)
                self.enterOuterAlt(localctx, 2)
                self.state = 120
                self.match(SensorScriptParser.WITHIN)
                self.state = 121
                self.expr(0)
                pass
            elif token in [26]:
                localctx = SensorScriptParser.StrategyClauseContext(self, localctx)
                self.enterOuterAlt(localctx, 3)
                self.state = 122
                self.match(SensorScriptParser.STRATEGY)
                self.state = 123
                localctx.value = self.match(SensorScriptParser.IDENT)
                pass
            elif token in [27]:
                localctx = SensorScriptParser.EmitClauseContext(self, localctx)
                self.enterOuterAlt(localctx, 4)
                self.state = 124
                self.match(SensorScriptParser.EMIT)
                self.state = 125
                localctx.value = self.match(SensorScriptParser.IDENT)
                pass
            elif token in [28]:
                localctx = SensorScriptParser.PartitionClauseContext(self, localctx)
                self.enterOuterAlt(localctx, 5)
                self.state = 126
                self.match(SensorScriptParser.PARTITION)
                self.state = 127
                self.match(SensorScriptParser.BY)
                self.state = 128
                localctx.value = self.match(SensorScriptParser.IDENT)
                pass
            elif token in [30]:
                localctx = SensorScriptParser.YieldClauseContext(self, localctx)
                self.enterOuterAlt(localctx, 6)
                self.state = 129
                self.match(SensorScriptParser.YIELD)
                self.state = 130
                self.expr(0)
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



    def sempred(self, localctx:RuleContext, ruleIndex:int, predIndex:int):
        if self._predicates == None:
            self._predicates = dict()
        self._predicates[2] = self.expr_sempred
        pred = self._predicates.get(ruleIndex, None)
        if pred is None:
            raise Exception("No predicate with index:" + str(ruleIndex))
        else:
            return pred(localctx, predIndex)

    def expr_sempred(self, localctx:ExprContext, predIndex:int):
            if predIndex == 0:
                return self.precpred(self._ctx, 7)
         

            if predIndex == 1:
                return self.precpred(self._ctx, 6)
         

            if predIndex == 2:
                return self.precpred(self._ctx, 5)
         

            if predIndex == 3:
                return self.precpred(self._ctx, 3)
         

            if predIndex == 4:
                return self.precpred(self._ctx, 2)
         




