"""Independent parts of a compile, run in forked processes beside the main one.

Forked, never spawned: a forked process starts with the parent's ASTs, plan and ANTLR's warm
caches, so nothing but results crosses between them. Forking is done only from a
single-threaded process (the `sscript` commands are; one running Spark's gateway threads does
the work itself) on a machine with more than one core. A forked process that fails in any way
(an exception, killed, out of memory) costs its time: the work is done again in the parent,
where an error is raised as it would have been without the fork.
"""

from __future__ import annotations

import os
import threading
from typing import Callable, TypeVar

T = TypeVar("T")


def cores() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def may_fork() -> bool:
    return hasattr(os, "fork") and threading.active_count() == 1 and cores() > 1


def pool(workers: int):
    """A pool of `workers` forked processes (forked at the first submit)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    return ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"))


def beside(side: Callable[[], object], main: Callable[[], T]) -> T:
    """`main()` here while `side()` runs in a forked process (for its effects, such as files it
    writes); returns what `main()` returns. If the forked process fails, `side()` runs here after
    `main()`. (A plain fork, not a pool: `side` is inherited, never pickled.)"""
    if not may_fork():
        side()
        return main()
    pid = os.fork()
    if pid == 0:  # the forked process: never returns into the caller's code
        status = 1
        try:
            side()
            status = 0
        finally:
            os._exit(status)  # no exit handlers, no flushing of what the parent had buffered
    try:
        result = main()
    finally:
        _, status = os.waitpid(pid, 0)
    if status != 0:  # an exception, a signal: do it here, where its errors are raised as usual
        side()
    return result
