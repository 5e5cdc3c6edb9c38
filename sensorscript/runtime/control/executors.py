"""At the start of a run on a cluster: the executors run the job's Python and see OUT where the
driver sees it, or the run refuses in one sentence before any batch.

The executors write the checkpoint's state and read the archive and the spool in OUT, at the
driver's path (docs/OPERATIONS.md, "On a cluster"). A worker that mounts another folder there, or none, would
otherwise fail in a task, or worse, keep its state where no other executor finds it after a
failure. So the driver writes a marker in OUT, a few tasks read it and write one of their own
beside it, which the driver then reads: both directions of the one folder. The tasks import the
libraries the job ships (shipping.py) as a stateful stage does, so that a worker without the
Python they were built for is named here too.
"""

from __future__ import annotations

import os
import shutil
import threading
import uuid
from pathlib import Path

FOLDER = ".executors"  # in OUT, removed after the check
WAIT_S = 300.0  # for the cluster to give the job executors that run the tasks


def _probe(out: str, folder: str, token: str, driver: str, inputs: tuple[tuple[str, str | None], ...]):
    """One task's look, as a function the executors run: (its address, whether it sees the driver's
    marker (None: it could not look), what is wrong, each as the end of a sentence about it: every
    problem found at once, so that a user mends them in one go)."""

    def look(_):
        import socket

        address = "?"
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:  # no packet: the route's source
                probe.connect((driver, 9))
                address = probe.getsockname()[0]
        except OSError:
            pass
        try:
            import pandas  # the libraries a stateful stage imports
            import pyarrow

            import sensorscript  # the job's own package (--py-files)

            del pandas, pyarrow, sensorscript  # imported to show they can be
        except ImportError as exc:
            yield address, None, (f"cannot run the job: its Python cannot import {exc.name} ({exc})",)
            return
        try:
            with open(os.path.join(folder, f"{token}.driver")) as file:
                seen = file.read() == token
        except FileNotFoundError:  # no such folder here, or another one at its path
            seen = False
        problems = []
        for given, a_file in inputs:  # the input folder (one of its files): they are read in the tasks
            if not os.path.isdir(given) or (a_file is not None and not os.path.exists(os.path.join(given, a_file))):
                problems.append(f"does not see the input folder {given}: the input must be a folder every "
                                f"worker mounts at the same path (docs/OPERATIONS.md, 'On a cluster')")
        if seen and not problems:
            try:
                with open(os.path.join(folder, f"{token}.{address}.{os.getpid()}"), "w") as file:
                    file.write(token)
            except OSError as exc:
                problems.append(f"cannot write in {out}: {exc.strerror or exc}")
        yield address, seen, tuple(problems)

    return look


def check(spark, out: Path, echo=print, inputs: tuple[str, ...] = (), wait_s: float = WAIT_S) -> None:
    """On a cluster (not local[N]): ValueError in one sentence unless every executor that ran one
    of the check's tasks runs the job's Python, reads and writes OUT at the driver's path and sees
    the input folders `inputs` there."""
    context = spark.sparkContext
    if context.master.startswith("local"):
        return
    out = Path(out).resolve()
    inputs = tuple((given, next((p.name for p in Path(given).iterdir() if p.is_file()), None)) for given in inputs)
    folder, token = out / FOLDER, uuid.uuid4().hex
    folder.mkdir(exist_ok=True)
    (folder / f"{token}.driver").write_text(token)
    driver = context.getConf().get("spark.driver.host", "127.0.0.1")
    tasks = max(context.defaultParallelism, 2)
    found: dict = {}

    def run() -> None:
        try:
            context.setJobGroup(f"sscript-check-{token}", "do the executors see OUT?")
            found["rows"] = (context.parallelize(range(tasks), tasks)
                             .mapPartitions(_probe(str(out), str(folder), token, driver, inputs)).collect())
        except Exception as exc:  # noqa: BLE001  said below in the user's words
            found["error"] = exc

    echo(f"checking that the cluster's executors run the job's Python and see {out}")
    worker = threading.Thread(target=run, name="executors-check", daemon=True)
    worker.start()
    worker.join(wait_s)
    try:
        if worker.is_alive():
            context.cancelJobGroup(f"sscript-check-{token}")
            raise ValueError(f"no executor of the cluster ran a task within {wait_s:g} s: has the cluster free "
                             f"cores and memory for the job (spark.executor.memory, spark.cores.max)?")
        if "error" in found:
            raise ValueError(_failed(found["error"]))
        _judge(found["rows"], folder, token, out)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _judge(rows, folder: Path, token: str, out: Path) -> None:
    """ValueError naming every problem the executors found, one sentence each (joined by "; ")."""
    said: list[str] = []
    for address, seen, problems in rows:
        if seen is False:
            said.append(f"the executor at {address} does not see the driver's {out}: OUT must be one folder "
                        f"every worker mounts at the same path (docs/OPERATIONS.md, 'On a cluster')")
        said += [f"the executor at {address} {problem}" for problem in problems]
    if not said:
        written = {path.name for path in folder.iterdir()}
        said = [f"the driver does not see what the executor at {address} wrote in {out}: OUT must be one folder "
                f"every worker mounts at the same path (docs/OPERATIONS.md, 'On a cluster')"
                for address, _, _ in rows if not any(name.startswith(f"{token}.{address}.") for name in written)]
    if said:
        raise ValueError("; ".join(dict.fromkeys(said)))


def _failed(error: BaseException) -> str:
    """The check's tasks failed in Spark: most often a worker without the Python the job runs."""
    text = str(error)
    if "Cannot run program" in text:
        program = text.split("Cannot run program", 1)[1].split('"')[1] if '"' in text else "python"
        return (f"the cluster's executors cannot start the job's Python ({program}): every worker needs a "
                f"Python of the driver's version on its PATH, or PYSPARK_PYTHON naming one every worker has")
    from sensorscript.runtime.control.failures import describe

    return f"the cluster's executors cannot run the job: {describe(error)}"
