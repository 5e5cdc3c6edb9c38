"""How a job's plan reaches Spark's Python workers: as a file Spark ships with the job, read once
per Python process, never inside the functions it runs.

Spark sends every Python function of a query (stage 0's Packer, the stateful operators) to its
workers pickled, with what the function holds: here the `Job`, whose programs grow with the
number of workflows (0.6 MiB pickled at 1,024 workflows, tens at 10,240). A function of over
1 MiB travels as a broadcast variable, which the Python worker Spark runs on the driver to set up
a `transformWithStateInPandas` cannot load: the query failed in its first batch (issue #25). So
`ship` writes the job once to a file of its own, adds it to the files Spark fetches to every
executor (`SparkContext.addFile`), and marks the job: pickled again, it is its file's name and
nothing more (`Job.__reduce_ex__`), and unpickled in a worker, `load` reads that file the first
time and answers from memory after (Spark reuses its Python workers).

What else a worker must do before it runs the job travels in the same file (`also`: callables run
once after loading it): the pattern operators a user registered (docs/OPERATORS.md), whose classes
cloudpickle carries by value, since a worker cannot import the file that defines them.
"""

from __future__ import annotations

import hashlib
import os
import pickle
from pathlib import Path

PREFIX = "sscript-plan-"
_LOADED: dict[str, object] = {}  # per process: shipped file name -> the job


def ship(spark, job, also=()):
    """The job, written once to a file Spark ships to its executors and marked to travel as that
    file's name; a job shipped already is returned as it is. `also`: callables a worker runs once
    after loading the file (they travel in it, pickled by cloudpickle)."""
    from pyspark import cloudpickle

    if job.__dict__.get("_shipped"):
        return job
    data = cloudpickle.dumps((job, tuple(also)), protocol=5)  # the job whole: not marked yet
    name = f"{PREFIX}{hashlib.sha256(data).hexdigest()[:20]}.pickle"
    # Spark's temporary folder of this driver (removed when it stops): where the driver's own
    # Python workers read the file, Spark fetching it to every executor from there.
    folder = Path(spark.sparkContext._temp_dir)
    path = folder / name
    if not path.exists():
        temporary = folder / f".{name}.{os.getpid()}.tmp"
        temporary.write_bytes(data)
        os.replace(temporary, path)
        spark.sparkContext.addFile(str(path))
    object.__setattr__(job, "_shipped", (name, str(path)))  # frozen dataclass: set past its guard
    _LOADED[name] = job
    return job


def load(name: str, driver_path: str):
    """The shipped job `name`: from this process's memory, else from the file Spark fetched to this
    executor, else (a Python worker on the driver, where Spark fetches nothing) from where the
    driver wrote it."""
    job = _LOADED.get(name)
    if job is None:
        path = _fetched(name)
        if path is None or not os.path.exists(path):
            path = driver_path
        with open(path, "rb") as file:
            job, also = pickle.load(file)
        for prepare in also:
            prepare()
        _LOADED[name] = job
    return job


def _fetched(name: str) -> str | None:
    """Where Spark fetched a file added with addFile on this executor (None: not an executor's worker)."""
    from pyspark import SparkFiles

    if not SparkFiles._is_running_on_worker or SparkFiles._root_directory is None:
        return None
    return os.path.join(SparkFiles._root_directory, name)
