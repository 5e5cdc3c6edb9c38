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


    # Visit a parse tree produced by SensorScriptParser#statement.
    def visitStatement(self, ctx:SensorScriptParser.StatementContext):
        return self.visitChildren(ctx)


    # Visit a parse tree produced by SensorScriptParser#expr.
    def visitExpr(self, ctx:SensorScriptParser.ExprContext):
        return self.visitChildren(ctx)


    # Visit a parse tree produced by SensorScriptParser#atom.
    def visitAtom(self, ctx:SensorScriptParser.AtomContext):
        return self.visitChildren(ctx)


    # Visit a parse tree produced by SensorScriptParser#pattern.
    def visitPattern(self, ctx:SensorScriptParser.PatternContext):
        return self.visitChildren(ctx)


    # Visit a parse tree produced by SensorScriptParser#link.
    def visitLink(self, ctx:SensorScriptParser.LinkContext):
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


    # Visit a parse tree produced by SensorScriptParser#limitClause.
    def visitLimitClause(self, ctx:SensorScriptParser.LimitClauseContext):
        return self.visitChildren(ctx)



del SensorScriptParser