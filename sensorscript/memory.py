"""Memory behaviour of the compiler's own stages."""

from __future__ import annotations

import gc
from contextlib import contextmanager


@contextmanager
def paused_gc():
    """Pause the cyclic garbage collector while building large, long-lived, acyclic structures.

    Parsing 1,024 workflows or building their graph makes some 10^6 objects that all
    survive; each automatic collection would scan them again, for nothing.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
