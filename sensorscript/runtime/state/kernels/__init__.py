"""The numpy kernels that the engine (windows, combines: `state/engine.py`) and the pattern matcher
(`state/cep/`) both run over a batch's columns: a combine's or a condition's expression evaluated
for every row at once (`expressions`), and the stable sort of integer keys (`sorting`).

They import nothing of the runtime, so that the engine may import the matcher and both import these
without a circle between the folders of `state/` (`tests/test_layers.py`).
"""
