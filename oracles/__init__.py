"""The test oracles: docs/LANGUAGE.md's input records, semantics and patterns written out in plain
Python, to hold the job to.

`streams.evaluate` computes every output stream of a set of workflows over all the readings;
`patterns.match` finds a pattern's matches by brute force; `records.read_line` says what an input
line is, and `identity` which stream a name is. They define what is right from the
user's side, so they import nothing from the runtime, the planner or the record parser
(`tests/test_layers.py` fails when one does): only the workflows' AST, which the one grammar
defines.
"""
