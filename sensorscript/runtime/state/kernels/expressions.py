"""Vectorised evaluation of combine expressions (the compiler's canonical tuple form).

`evaluate(expression, columns)` computes the expression for every row at once.
It returns the values and a mask of the rows where some division had a zero
divisor: such a timestamp emits nothing (and is counted).
"""

from __future__ import annotations

import numpy as np

_COMPARE = {">": np.greater, ">=": np.greater_equal, "<": np.less, "<=": np.less_equal,
            "==": np.equal, "!=": np.not_equal}
_ARITHMETIC = {"+": np.add, "-": np.subtract, "*": np.multiply}
_CALLS = {"max": np.maximum, "min": np.minimum, "sum": np.add}


def evaluate(expression: tuple, columns: dict[str, np.ndarray], rows: int,
             leaf=None) -> tuple[np.ndarray, np.ndarray]:
    """Values (float64) and the divided-by-zero mask, for `rows` rows; inputs by node id in `columns`.

    `leaf(e)` may give the values of a sub-expression itself (an array, or None for the usual rules):
    patterns read event attributes and aggregates over Kleene closures that way.
    """
    bad = np.zeros(rows, dtype=bool)

    def ev(e: tuple) -> np.ndarray:
        nonlocal bad
        if leaf is not None:
            given = leaf(e)
            if given is not None:
                return given
        kind = e[0]
        if kind == "in":
            return columns[e[1]]
        if kind == "num":
            return np.full(rows, e[1], dtype=np.float64)
        if kind == "neg":
            return -ev(e[1])
        if kind == "not":
            return (ev(e[1]) == 0).astype(np.float64)
        if kind == "call":
            args = [ev(a) for a in e[2:]]
            if e[1] == "avg":
                total = args[0]
                for a in args[1:]:
                    total = total + a
                return total / len(args)
            result = args[0]
            for a in args[1:]:
                result = _CALLS[e[1]](result, a)
            return result
        left, right = ev(e[1]), ev(e[2])
        if kind in _ARITHMETIC:
            return _ARITHMETIC[kind](left, right)
        if kind == "/":
            zero = right == 0
            bad |= zero
            with np.errstate(divide="ignore", invalid="ignore"):
                return np.where(zero, np.nan, left / np.where(zero, 1.0, right))
        if kind in _COMPARE:
            return _COMPARE[kind](left, right).astype(np.float64)
        if kind == "and":
            return ((left != 0) & (right != 0)).astype(np.float64)
        if kind == "or":
            return ((left != 0) | (right != 0)).astype(np.float64)
        raise ValueError(f"unknown operator {kind!r}")

    try:
        with np.errstate(over="ignore", invalid="ignore"):  # huge values: infinities and NaN, as in IEEE arithmetic
            values = ev(expression)
    finally:
        # `ev` refers to itself (a cycle through its closure) and holds `columns` and `leaf`: a
        # pattern's whole pair table. Cleared here, they go now, not when the cycle collector runs (#38).
        del ev
    return np.asarray(values, dtype=np.float64), bad
