// SensorScript: the language of ../shared/SPEC.md §2 and §4.
//
// The parser is generated into sensorscript/parser/_generated/ by
// `python scripts/generate_parser.py`; a test fails when that output is stale.
// Only sensorscript/parser/antlr.py imports the generated code.
//
// The grammar is deliberately permissive where a precise message helps more
// than a syntax error: function names, arities, duration units, strategy and
// emit values are checked after parsing (sensorscript/parser/check.py), so a
// user reads "unknown function 'avgg'; did you mean 'avg'?" instead of
// "mismatched input".

grammar SensorScript;

workflow
    : statement* EOF
    ;

statement
    : name=IDENT '=' pattern ';'    # patternStatement
    | name=IDENT '=' expr ';'       # exprStatement
    ;

// ---------------------------------------------------------------- expressions
// ANTLR binds the first alternative tightest. From tightest to loosest: unary
// minus, * /, + -, comparisons, not, and, or. A prefix operator parses its
// operand at its own level, so `not a > b` is `not (a > b)`, `-a * b` is
// `(-a) * b`. Chained comparisons parse but are rejected by the checker.

expr
    : op='-' operand=expr                                         # negExpr
    | left=expr op=('*' | '/') right=expr                         # mulExpr
    | left=expr op=('+' | '-') right=expr                         # addExpr
    | left=expr op=('>' | '>=' | '<' | '<=' | '==' | '!=') right=expr  # compareExpr
    | op=NOT operand=expr                                         # notExpr
    | left=expr op=AND right=expr                                 # andExpr
    | left=expr op=OR right=expr                                  # orExpr
    | atom                                                        # atomExpr
    ;

atom
    : func=IDENT '(' (args+=expr (',' args+=expr)*)? ')'   # callAtom
    | var=IDENT '.' attr=IDENT                             # attributeAtom
    | NUMBER                                               # numberAtom
    | DURATION                                             # durationAtom
    | IDENT                                                # nameAtom
    | STRING                                               # stringAtom
    | '(' expr ')'                                         # parenAtom
    ;

// ------------------------------------------------------------------- patterns

pattern
    : PATTERN '(' elements+=patternElement ('->' elements+=patternElement)* ')'
      clauses+=patternClause*
    ;

patternElement
    : negated='!'? var=IDENT ':' stream=streamRef kleene='+'?
    ;

streamRef
    : IDENT
    | STRING
    ;

patternClause
    : WHERE expr                  # whereClause
    | WITHIN expr                 # withinClause
    | STRATEGY value=IDENT        # strategyClause
    | EMIT value=IDENT            # emitClause
    | PARTITION BY value=IDENT    # partitionClause
    | YIELD expr                  # yieldClause
    ;

// --------------------------------------------------------------------- tokens
// Keywords are reserved; a stream or sensor with such a name is written quoted.

AND       : 'and' ;
OR        : 'or' ;
NOT       : 'not' ;
PATTERN   : 'pattern' ;
WHERE     : 'where' ;
WITHIN    : 'within' ;
STRATEGY  : 'strategy' ;
EMIT      : 'emit' ;
PARTITION : 'partition' ;
BY        : 'by' ;
YIELD     : 'yield' ;

// A number with a unit suffix (10min, 5s, 250ms, 1h). Any letters are taken as
// the unit here so that a wrong unit ("10m") gets a precise message later.
DURATION  : DIGITS [a-zA-Z]+ ;

// Integers (with optional _ separators: 600_000) and decimals (0.5, 1e-3).
NUMBER    : DIGITS ('.' [0-9]+)? ([eE] [+-]? [0-9]+)?
          | '.' [0-9]+ ([eE] [+-]? [0-9]+)?
          ;

IDENT     : [a-zA-Z_] [a-zA-Z0-9_]* ;

// A quoted stream or sensor reference: "8MD1-AZ".
STRING    : '"' (~["\\\r\n] | '\\' ~[\r\n])* '"' ;
UNTERMINATED_STRING : '"' (~["\\\r\n] | '\\' ~[\r\n])* ;

LINE_COMMENT  : '//' ~[\r\n]* -> channel(HIDDEN) ;
BLOCK_COMMENT : '/*' .*? '*/' -> channel(HIDDEN) ;
// Never containing '*/', or the lexer's longest-match rule would prefer it to a real comment.
UNTERMINATED_COMMENT : '/*' (~'*' | '*'+ ~[*/])* '*'* EOF ;
WS            : [ \t\r\n\f]+ -> channel(HIDDEN) ;

// Anything else is a token of its own so the parser, not the lexer, reports it
// with a position; the lexer itself never fails.
UNEXPECTED_CHAR : . ;

fragment DIGITS : [0-9]+ ('_' [0-9]+)* ;
