"""README.md's quick start, run as it is written (issue #64), so that it cannot rot.

The quick start's commands are the fenced blocks that follow a line `<!-- quickstart -->`, in order; the
block after `<!-- quickstart: results -->` is what `sscript results` prints. They run in one bash, in a
folder of the test's own that holds a `.venv` (a link to the environment running the tests, whose
`bin/activate` the first command sources), the checkout's package first on PYTHONPATH. Each command
must exit 0. The last one, `sscript dashboard`, serves until stopped: it runs with `--port 0` added (a
free port, so that it never meets another server on 8050), its page is fetched once, then it is stopped.

The README's bridge workflow and its pattern are those of workflows/: what the text explains is what
the examples run.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from click.testing import CliRunner

from sensorscript.cli import main
from tests.conftest import ROOT, need

README = ROOT / "README.md"
MARK = "<!-- quickstart -->"
RESULTS_MARK = "<!-- quickstart: results -->"
HEREDOC = re.compile(r"<<-?\s*'?\"?(\w+)'?\"?")


def blocks_after(mark: str, text: str) -> list[str]:
    """The fenced blocks that follow a line `mark` (the next line opens the fence)."""
    found = re.findall(rf"^{re.escape(mark)}\n```[a-z]*\n(.*?)^```$", text, re.M | re.S)
    assert found, f"README.md has no block after {mark}"
    return found


def commands(block: str) -> list[str]:
    """A block's shell commands: one a line, with the lines a here-document or a trailing backslash
    carries along; blank and comment lines left out."""
    out: list[str] = []
    lines = block.splitlines()
    while lines:
        line = lines.pop(0)
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        command = [line]
        while command[-1].endswith("\\") and lines:
            command.append(lines.pop(0))
        heredoc = HEREDOC.search(line)
        if heredoc:
            while lines:
                command.append(lines.pop(0))
                if command[-1] == heredoc.group(1):
                    break
            else:
                raise AssertionError(f"the here-document of {line!r} never ends")
        out.append("\n".join(command))
    return out


def quick_start() -> list[str]:
    return [c for block in blocks_after(MARK, README.read_text()) for c in commands(block)]


def script(steps: list[str], logs: Path) -> str:
    """A bash script of `steps`, each one's output in LOGS/N.txt and its exit status in LOGS/status;
    the first that fails ends it."""
    lines = []
    for number, step in enumerate(steps):
        lines += ["{ " + step, f"}} >{logs}/{number}.txt 2>&1", "status=$?",
                  f'echo "{number} $status" >>{logs}/status', '[ "$status" -eq 0 ] || exit "$status"']
    return "\n".join(lines) + "\n"


def account(steps: list[str], logs: Path) -> str:
    """What each step that ran said, for a failure's message."""
    said = []
    statuses = (logs / "status").read_text().split("\n") if (logs / "status").exists() else []
    for entry in filter(None, statuses):
        number, status = map(int, entry.split())
        said.append(f"$ {steps[number]}\n{(logs / f'{number}.txt').read_text()}(exit {status})")
    return "\n".join(said)


def test_the_quick_start_is_found():
    """The marked blocks give the quick start's steps in order: the PATH first, then a workflow and
    readings written, check, compile, a run of the input once, the results and the dashboard."""
    steps = quick_start()
    assert steps[0].startswith("source .venv/bin/activate")
    verbs = [m.group(1) for step in steps if (m := re.match(r"sscript (\w+)", step))]
    assert verbs == ["check", "compile", "run", "results", "dashboard"], verbs
    assert any("--once" in step for step in steps if step.startswith("sscript run "))
    assert sum(1 for step in steps if HEREDOC.search(step)) == 2  # the workflow and the readings
    assert blocks_after(RESULTS_MARK, README.read_text())


def environment(folder: Path) -> dict[str, str]:
    """The quick start's folder holds `.venv`, the environment that runs the tests; the checkout's
    package is imported first (its sscript may be an editable install of another one)."""
    need(None if sys.prefix != sys.base_prefix and (Path(sys.prefix) / "bin" / "activate").exists()
         else f"the tests do not run in a virtual environment with bin/activate ({sys.prefix})",
         "the README's quick start")
    (folder / ".venv").symlink_to(sys.prefix, target_is_directory=True)
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
            "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": os.environ.get("SPARK_LOCAL_IP", "127.0.0.1")}


def test_the_quick_start_up_to_its_run_needs_no_jvm(tmp_path):
    """What comes before `sscript run` (the PATH, the workflow, the readings, check and compile),
    as written: the quick tier catches most of what could rot."""
    steps = quick_start()
    before = steps[:next(i for i, step in enumerate(steps) if step.startswith("sscript run "))]
    env = environment(tmp_path)
    logs = tmp_path / "logs"
    logs.mkdir()
    done = subprocess.run(["bash", "-c", script(before, logs)], cwd=tmp_path, env=env, stdin=subprocess.DEVNULL,
                          timeout=300)
    assert done.returncode == 0, account(before, logs)
    assert (tmp_path / "out" / "first" / "job" / "job.py").exists(), account(before, logs)


@pytest.mark.spark
def test_the_quick_start_runs_as_written(tmp_path):
    steps = quick_start()
    *steps, dashboard = steps
    assert dashboard.startswith("sscript dashboard ") and "--port" not in dashboard, dashboard
    dashboard = re.sub(r"\s+#.*", "", dashboard)  # its comment, so that --port 0 comes after the arguments
    results = next(i for i, step in enumerate(steps) if step.startswith("sscript results "))
    env = environment(tmp_path)
    logs = tmp_path / "logs"
    logs.mkdir()
    served = logs / "dashboard.txt"
    text = script(steps, logs) + f"exec {dashboard} --port 0 >{served} 2>&1\n"
    process = subprocess.Popen(["bash", "-c", text], cwd=tmp_path, env=env, stdin=subprocess.DEVNULL,
                               start_new_session=True)
    try:
        deadline = time.monotonic() + 900  # one Spark run on a busy 2-core machine
        address = None
        while address is None:
            if process.poll() is not None:
                raise AssertionError(f"the quick start stopped (exit {process.returncode}):\n{account(steps, logs)}"
                                     + (served.read_text() if served.exists() else ""))
            assert time.monotonic() < deadline, "the quick start took more than 15 minutes:\n" + account(steps, logs)
            found = re.search(r"http://127\.0\.0\.1:\d+/", served.read_text()) if served.exists() else None
            address = found and found.group(0)
            time.sleep(0.2)
        said = account(steps, logs)
        assert all(entry.split()[1] == "0" for entry in (logs / "status").read_text().split("\n") if entry), said
        printed = (logs / f"{results}.txt").read_text()
        assert re.search(r"^\S+\.\S+: [1-9][\d,]* rows$", printed, re.M), said
        expected = blocks_after(RESULTS_MARK, README.read_text())[0]
        assert expected in printed, f"README.md shows other results than `{steps[results]}` prints:\n{printed}"
        while True:  # the address is printed as the server starts: it answers within moments
            try:
                with urllib.request.urlopen(address, timeout=10) as page:
                    assert page.status == 200 and b"<title>SensorScript: job</title>" in page.read()
                break
            except OSError:
                assert process.poll() is None and time.monotonic() < deadline, served.read_text()
                time.sleep(0.2)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def fenced_after(heading: str) -> list[str]:
    """The fenced blocks of README's section `heading`."""
    section = README.read_text().split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^```[a-z]*\n(.*?)^```$", section, re.M | re.S)


def shown(path: Path) -> list[str]:
    """What `sscript check --show` understood of a workflow, without its file's name and line numbers."""
    said = CliRunner().invoke(main, ["check", str(path), "--show"])
    assert said.exit_code == 0, said.output
    return [re.sub(r"^\s*\d+\s+", "", line) for line in said.output.splitlines()[1:]]


def test_the_workflow_shown_is_bridge_ss(tmp_path):
    workflow = tmp_path / "bridge.ss"
    workflow.write_text(fenced_after("A workflow and a pattern")[0])
    assert shown(workflow) == shown(ROOT / "workflows" / "bridge.ss")


def test_the_pattern_shown_is_pier_alarms_ss():
    def plain(text: str) -> str:
        return " ".join(re.sub(r"//[^\n]*", "", text).split())

    pattern = plain(fenced_after("A workflow and a pattern")[1])
    assert pattern.startswith("SURGE = pattern(") and pattern in plain((ROOT / "workflows" / "pier_alarms.ss")
                                                                        .read_text()), pattern
