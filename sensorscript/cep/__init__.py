"""Compiling patterns (SPEC §4) to operator trees: `cep/plan.py`. The matcher that runs them is
`runtime/state/cep/`."""
