"""The job's process: `python OUT/job/job.py --input SOURCE --out OUT/job [OPTIONS]` in a child process of its own
process group (local[2], trigger 1 s, the sink of --sink: SQLite OUT/job/results.db by default). Its output, timestamped, goes
into OUT/job.log (Spark's errors too: SSCRIPT_SPARK_LOG=ERROR), and the arrival of each of its
"batch N:" lines is recorded. Its processes are told apart for the sampler (driver, JVM, Python
workers). At the end it gets SIGINT (the run loop stops the query at a batch boundary), then SIGTERM
and SIGKILL to its process group if it lingers.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil

from .workload import ROOT

BATCH_LINE = re.compile(r"^batch (\d+):")


class JobProcess:
    """`python OUT/job/job.py --input SOURCE --out OUT/job` in its own process group; its output is
    timestamped into OUT/job.log, and the arrival of each "batch N:" line recorded."""

    def __init__(self, job_dir: Path, source: str, log: Path, options: tuple[str, ...] = ()):
        environment = {**os.environ, "PYTHONUNBUFFERED": "1",
                       # Spark's errors (an OutOfMemoryError in the JVM, say) into the job's log
                       "SSCRIPT_SPARK_LOG": os.environ.get("SSCRIPT_SPARK_LOG", "ERROR"),
                       "SPARK_LOCAL_IP": os.environ.get("SPARK_LOCAL_IP", "127.0.0.1"),
                       "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
        self.command = [sys.executable, str(job_dir / "job.py"), "--input", source, "--out", str(job_dir), *options]
        self.process = subprocess.Popen(self.command, env=environment, stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, text=True, bufsize=1, start_new_session=True)
        self.lines_at: dict[int, float] = {}  # batch id -> when its line arrived
        self.tail: list[str] = []
        self.errors: list[str] = []  # the first lines that name an error
        self.log = log.open("w")
        self.reader = threading.Thread(target=self._read, daemon=True, name="job-output")
        self.reader.start()

    def _read(self) -> None:
        for line in self.process.stdout:
            now = time.time()
            line = line.rstrip("\n")
            found = BATCH_LINE.match(line)
            if found:
                self.lines_at.setdefault(int(found.group(1)), now)
            self.log.write(f"{now:.3f} {line}\n")
            self.log.flush()
            self.tail = (self.tail + [line])[-40:]
            if len(self.errors) < 20 and ("Error" in line or "Exception" in line):
                self.errors.append(line.strip())

    def error(self) -> str:
        """What the job's output says went wrong: an OutOfMemoryError first, else the first error line."""
        found = [e for e in self.errors if "OutOfMemoryError" in e] or self.errors or self.tail[-1:]
        return found[0][:300] if found else f"exit code {self.process.poll()}"

    def alive(self) -> bool:
        return self.process.poll() is None

    def processes(self) -> dict[str, list[psutil.Process]]:
        """The job's processes: driver (its Python, and anything else outside the JVM), jvm, workers
        (the Python processes under the JVM)."""
        found: dict[str, list[psutil.Process]] = {"driver": [], "jvm": [], "workers": []}
        try:
            driver = psutil.Process(self.process.pid)
            children = driver.children(recursive=True)
        except psutil.Error:
            return found
        found["driver"].append(driver)
        for child in children:
            try:  # a child may end while it is looked at
                if child.name() == "java":
                    found["jvm"].append(child)
                elif any(parent.name() == "java" for parent in child.parents()):
                    found["workers"].append(child)
                else:
                    found["driver"].append(child)
            except psutil.Error:
                continue
        return found

    def stop(self, echo) -> int | None:
        """SIGINT to the driver (the run loop stops the query at a batch boundary), then SIGTERM and
        SIGKILL to the job's process group if it lingers."""
        group = self.process.pid  # its own session and process group (start_new_session)
        for sent, wait in ((signal.SIGINT, 60), (signal.SIGTERM, 20), (signal.SIGKILL, 10)):
            if not self.alive():
                break
            try:
                if sent == signal.SIGINT:
                    os.kill(self.process.pid, sent)
                else:
                    echo(f"the job did not stop: {signal.Signals(sent).name} to its process group")
                    os.killpg(group, sent)
            except ProcessLookupError:
                break
            try:
                self.process.wait(wait)
                break
            except subprocess.TimeoutExpired:
                continue
        try:  # what the driver's exit leaves behind (a JVM, a worker daemon) goes too
            os.killpg(group, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.reader.join(5)
        self.log.close()
        return self.process.returncode
