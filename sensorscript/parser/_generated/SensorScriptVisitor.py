# Generated from SensorScript.g4 by ANTLR 4.13.2
from antlr4 import *
if "." in __name__:
    from .SensorScriptParser import SensorScriptParser
else:
    from SensorScriptParser import SensorScriptParser

# This class defines a complete generic visitor for a parse tree produced by SensorScriptParser.

class SensorScriptVisitor(ParseTreeVisitor):

    # Visit a parse tree produced by SensorScriptParser#workflow.
    def visitWorkflow(self, ctx:SensorScriptParser.WorkflowContext):
        return self.visitChildren(ctx)


    # Visit a parse tree produced by SensorScriptParser#patternStatement.
    def visitPatternStatement(self, ctx:SensorScriptParser.PatternStatementContext):
        return self.visitChildren(ctx)


    # Visit a parse tree produced by SensorScriptParser#exprStatement.
    def visitExprStatement(self, ctx:SensorScriptParser.ExprStatementContext):
        return self.visitChildren(ctx)


    # Visit a parse tree produced by SensorScriptParser#notExpr.
    def visitNotExpr(self, ctx:SensorScriptParser.NotExprContext):
        return self.visitChildren(ctx)


    # Visit a parse tree produced by SensorScriptParser#addExpr.
    def visitAddExpr(self, ctx:SensorScriptParser.AddExprContext):
        return self.visitChildren(ctx)


    # Visit a parse tree produced by SensorScriptParser#negExpr.
    def visitNegExpr(self, ctx:SensorScriptParser.NegExprContext):
        return self.visitChildren(ctx)


    # Visit a parse tree produced by SensorScriptParser#mulExpr.
    def visitMulExpr(self, ctx:SensorScriptParser.MulExprContext):
        return self.visitChildren(ctx)


    # Visit a parse tree produced by SensorScriptParser#atomExpr.
    def visitAtomExpr(self, ctx:SensorScriptParser.AtomExprContext):
        return self.visitChildren(ctx)


    # Visit a parse tree produced by SensorScriptParser#orExpr.
    def visitOrExpr(self, ctx:SensorScriptParser.OrExprContext):
        return self.visitChildren(ctx)


    # Visit a parse tree produced by SensorScriptParser#compareExpr.
    def visitCompareExpr(self, ctx:SensorScriptParser.CompareExprContext):
        return self.visitChildren(ctx)


    # Visit a parse tree produced by SensorScriptParser#andExpr.
    def visitAndExpr(self, ctx:SensorScriptParser.AndExprContext):
        return self.visitChildren(ctx)


    # Visit a parse tree produced by SensorScriptParser#callAtom.
    def visitCallAtom(self, ctx:SensorScriptParser.CallAtomContext):
        return self.visitChildren(ctx)


    # Visit a parse tree produced by SensorScriptParser#attributeAtom.
    def visitAttributeAtom(self, ctx:SensorScriptParser.AttributeAtomContext):
        return self.visitChildren(ctx)


    # Visit a parse tree produced by SensorScriptParser#numberAtom.
    def visitNumberAtom(self, ctx:SensorScriptParser.NumberAtomContext):
        return self.visitChildren(ctx)


    # Visit a parse tree produced by SensorScriptParser#durationAtom.
    def visitDurationAtom(self, ctx:SensorScriptParser.DurationAtomContext):
        return self.visitChildren(ctx)


    # Visit a parse tree produced by SensorScriptParser#nameAtom.
    def visitNameAtom(self, ctx:SensorScriptParser.NameAtomContext):
        return self.visitChildren(ctx)


    # Visit a parse tree produced by SensorScriptParser#stringAtom.
    def visitStringAtom(self, ctx:SensorScriptParser.StringAtomContext):
        return self.visitChildren(ctx)


    # Visit a parse tree produced by SensorScriptParser#parenAtom.
    def visitParenAtom(self, ctx:SensorScriptParser.ParenAtomContext):
        return self.visitChildren(ctx)


    # Visit a parse tree produced by SensorScriptParser#pattern.
    def visitPattern(self, ctx:SensorScriptParser.PatternContext):
        return self.visitChildren(ctx)


    # Visit a parse tree produced by SensorScriptParser#patternElement.
    def visitPatternElement(self, ctx:SensorScriptParser.PatternElementContext):
        return self.visitChildren(ctx)


    # Visit a parse tree produced by SensorScriptParser#streamRef.
    def visitStreamRef(self, ctx:SensorScriptParser.StreamRefContext):
        return self.visitChildren(ctx)


    # Visit a parse tree produced by SensorScriptParser#whereClause.
    def visitWhereClause(self, ctx:SensorScriptParser.WhereClauseContext):
        return self.visitChildren(ctx)


    # Visit a parse tree produced by SensorScriptParser#withinClause.
    def visitWithinClause(self, ctx:SensorScriptParser.WithinClauseContext):
        return self.visitChildren(ctx)


    # Visit a parse tree produced by SensorScriptParser#strategyClause.
    def visitStrategyClause(self, ctx:SensorScriptParser.StrategyClauseContext):
        return self.visitChildren(ctx)


    # Visit a parse tree produced by SensorScriptParser#emitClause.
    def visitEmitClause(self, ctx:SensorScriptParser.EmitClauseContext):
        return self.visitChildren(ctx)


    # Visit a parse tree produced by SensorScriptParser#partitionClause.
    def visitPartitionClause(self, ctx:SensorScriptParser.PartitionClauseContext):
        return self.visitChildren(ctx)


    # Visit a parse tree produced by SensorScriptParser#yieldClause.
    def visitYieldClause(self, ctx:SensorScriptParser.YieldClauseContext):
        return self.visitChildren(ctx)



del SensorScriptParser