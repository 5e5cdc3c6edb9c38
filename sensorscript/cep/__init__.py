"""Compiling patterns (docs/LANGUAGE.md, "Patterns") to operator trees: `cep/plan.py`. The matcher that runs them is
`runtime/state/cep/`."""
