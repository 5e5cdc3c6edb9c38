"""Work beside the main process (sensorscript/processes.py) and the compile that uses it: what runs
in a forked process, what happens when that process fails, and that a compile writes the same
bytes with or without it."""

from __future__ import annotations

import os
import shutil
import signal
import threading

import pytest
from click.testing import CliRunner

from sensorscript import processes
from sensorscript.cli import main
from sensorscript.workload import write_workflows

needs_fork = pytest.mark.skipif(not hasattr(os, "fork") or processes.cores() < 2, reason="forks only with 2+ cores")


@pytest.fixture
def single_threaded(monkeypatch):
    """As in `sscript compile`, a single-threaded process: in the whole suite this one runs Spark's
    gateway threads too, whatever ran before (the forked processes here only write files and exit)."""
    monkeypatch.setattr(processes.threading, "active_count", lambda: 1)


@needs_fork
def test_side_runs_in_another_process_while_main_runs_here(tmp_path, single_threaded):
    parent = os.getpid()
    side_file = tmp_path / "side"
    result = processes.beside(lambda: side_file.write_text(str(os.getpid())), lambda: os.getpid())
    assert result == parent
    assert int(side_file.read_text()) != parent


@needs_fork
@pytest.mark.parametrize("failure", ["exception", "killed"])
def test_a_failed_fork_is_done_again_here(tmp_path, failure, single_threaded):
    parent = os.getpid()
    ran_in: list[int] = []

    def side():
        if os.getpid() != parent:  # only the forked process fails
            if failure == "killed":
                os.kill(os.getpid(), signal.SIGKILL)
            raise OSError("disk full")
        ran_in.append(os.getpid())
        (tmp_path / "side").write_text("written")

    assert processes.beside(side, lambda: "main") == "main"
    assert ran_in == [parent] and (tmp_path / "side").read_text() == "written"


@needs_fork
def test_an_error_of_the_side_work_is_raised_here(tmp_path, single_threaded):
    def side():
        raise PermissionError(13, "Permission denied", str(tmp_path / "plan.json"))

    with pytest.raises(PermissionError):
        processes.beside(side, lambda: None)


def test_no_fork_while_threads_run(tmp_path):
    parent = os.getpid()
    release = threading.Event()
    thread = threading.Thread(target=release.wait)
    thread.start()
    try:
        assert not processes.may_fork()
        assert processes.beside(lambda: (tmp_path / "side").write_text(str(os.getpid())), lambda: 1) == 1
    finally:
        release.set()
        thread.join()
    assert int((tmp_path / "side").read_text()) == parent


@needs_fork
def test_compile_writes_the_same_files_with_plan_json_written_beside(tmp_path, monkeypatch, single_threaded):
    """Enough workflows that plan.json is written in a forked process (compiler.BESIDE_FROM nodes):
    the same bytes as when it is written in the compiling process."""
    write_workflows(tmp_path, 400, 300)
    files = sorted(str(p) for p in (tmp_path / "workflows").glob("*.ss"))
    forks = []
    beside = processes.beside
    monkeypatch.setattr(processes, "beside", lambda side, main: forks.append(1) or beside(side, main))

    def compiled() -> dict[str, bytes]:
        out = tmp_path / "out"  # the same folder each time: job.py names it
        shutil.rmtree(out, ignore_errors=True)
        result = CliRunner().invoke(main, ["compile", *files, "-o", str(out), "--sensors", str(tmp_path / "sensors.csv")])
        assert result.exit_code == 0, result.output
        return {name: (out / name).read_bytes() for name in ("plan.json", "plan.txt", "job.py")}

    forked = compiled()
    assert forks == [1]
    monkeypatch.setattr(processes, "may_fork", lambda: False)
    assert compiled() == forked
    assert len(forked["plan.json"]) > 1_000_000 and b"wf0399.ss" in forked["job.py"]
