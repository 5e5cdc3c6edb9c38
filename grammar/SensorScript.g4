// SensorScript: the language of docs/LANGUAGE.md ("Statements" and "Patterns").
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
    : name=IDENT '=' (pattern | expr) ';'
    ;

// ---------------------------------------------------------------- expressions
// Operators, from tightest to loosest binding (all binary ones left-associative):
//
//     -x  (unary minus)
//     *  /
//     +  -
//     >  >=  <  <=  ==  !=     (do not chain: `a < b < c` is an error)
//     not x
//     and
//     or
//
// The rule reads an expression as a flat, LL(1) sequence of operands and
// operators; sensorscript/parser/antlr.py groups it by the table above
// (precedence climbing, table in sensorscript/parser/ast.py). ANTLR's Python
// runtime pays ~20 us per rule entry and per adaptive prediction; one rule level
// per precedence, or a left-recursive rule, made parsing 1,024 workflows two to
// three times slower than this form.

expr
    : (NOT | '-')* atom
      (('*' | '/' | '+' | '-' | '>' | '>=' | '<' | '<=' | '==' | '!=' | AND | OR) (NOT | '-')* atom)*
    ;

atom
    : name=IDENT (call='(' (args+=expr (',' args+=expr)*)? ')' | '.' attr=IDENT)?
    | NUMBER
    | DURATION
    | STRING
    | '(' inner=expr ')'
    ;

// ------------------------------------------------------------------- patterns

pattern
    : PATTERN '(' elements+=patternElement (links+=link elements+=patternElement)* ')'
      clauses+=patternClause*
    ;

// `->` is the built-in followed-by; `->[name]` a registered binary operator in its place.
link
    : '->' ('[' operator=IDENT ']')?
    ;

// `v: S`, `v: S+` (Kleene), `!v: S` (negation), or `v: name(S)`: a registered unary operator over S.
patternElement
    : negated='!'? var=IDENT ':' (operator=IDENT '(' stream=streamRef ')' | stream=streamRef) kleene='+'?
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
    | LIMIT expr                  # limitClause
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
LIMIT     : 'limit' ;

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

LINE_COMMENT  : '//' ~[\r\n]* -> skip ;
BLOCK_COMMENT : '/*' .*? '*/' -> skip ;
// Never containing '*/', or the lexer's longest-match rule would prefer it to a real comment.
UNTERMINATED_COMMENT : '/*' (~'*' | '*'+ ~[*/])* '*'* EOF ;
WS            : [ \t\r\n\f]+ -> skip ;

// Anything else is a token of its own so the parser, not the lexer, reports it
// with a position; the lexer itself never fails.
UNEXPECTED_CHAR : . ;

fragment DIGITS : [0-9]+ ('_' [0-9]+)* ;
