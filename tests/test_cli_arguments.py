"""Bad arguments get one sentence and a non-zero exit, never a traceback; a bug gets one sentence,
a crash file and exit code 70 (issue #15: "No traceback, ever")."""

from __future__ import annotations

import os
import socket
import sqlite3
import subprocess
import sys
import tempfile

import pytest
from click.testing import CliRunner

from sensorscript.cli import main
from tests.conftest import ROOT


def invoke(args: list[str]):
    return CliRunner().invoke(main, args)


# ------------------------------------------------------------------ the last-resort guard


@pytest.fixture
def crash_folder(tmp_path, monkeypatch):
    """Crash files land in tmp_path; SSCRIPT_DEBUG (set by the fuzz tests) is off."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.delenv("SSCRIPT_DEBUG", raising=False)
    return tmp_path


def fail_with(monkeypatch, exception: BaseException) -> None:
    """Make `sscript compile` meet an exception no command expects, as a bug would raise it."""

    def broken(*args, **kwargs):
        raise exception

    monkeypatch.setattr("sensorscript.compiler.compile_workflows", broken)


def test_a_bug_is_one_sentence_and_a_crash_file(crash_folder, monkeypatch, write_scripts):
    fail_with(monkeypatch, KeyError("window:1a2b\nsecond line http://u:pw@hook/x?token=SECRET"))
    monkeypatch.setattr(sys, "argv", ["sscript", "run", "out", "--alerts", "https://u:pw@hook/x?token=SECRET"])
    result = invoke(["compile", *write_scripts({"w": "A = avg(S, 1s, 1s);\n"}), "-o", str(crash_folder / "out")])
    assert result.exit_code == 70 and isinstance(result.exception, SystemExit)
    (line,) = result.output.strip().splitlines()
    assert line.startswith("error: internal error in sscript (a bug, please report it): KeyError: 'window:1a2b")
    (crash,) = crash_folder.glob("sscript-crash-*/crash.txt")
    assert line.endswith(f"; details in {crash}")
    text = crash.read_text()
    assert "Traceback" not in result.output and "Traceback" in text
    assert "KeyError" in text and "sscript 0." in text
    # The user's alone, under a name nobody can guess before, and without the webhook's secret (#39, 7).
    assert oct(crash.stat().st_mode & 0o777) == "0o600" and oct(crash.parent.stat().st_mode & 0o777) == "0o700"
    assert "--alerts https://hook/x" in text and "SECRET" not in text and "pw" not in text


def test_sscript_debug_lets_a_bug_through(crash_folder, monkeypatch, write_scripts):
    monkeypatch.setenv("SSCRIPT_DEBUG", "1")
    fail_with(monkeypatch, KeyError("window:1a2b"))
    result = invoke(["compile", *write_scripts({"w": "A = avg(S, 1s, 1s);\n"}), "-o", str(crash_folder / "out")])
    assert isinstance(result.exception, KeyError)
    assert not list(crash_folder.glob("sscript-crash-*"))


def test_an_interrupt_exits_130_with_a_short_line(crash_folder, monkeypatch, write_scripts):
    fail_with(monkeypatch, KeyboardInterrupt())
    result = invoke(["compile", *write_scripts({"w": "A = avg(S, 1s, 1s);\n"}), "-o", str(crash_folder / "out")])
    assert result.exit_code == 130 and result.output.strip() == "interrupted"
    assert not list(crash_folder.glob("sscript-crash-*"))


def test_mistakes_are_not_bugs(crash_folder, write_scripts):
    """A script error stays exit code 1 and a usage error 2: the guard leaves both alone."""
    result = invoke(["check", *write_scripts({"w": "A = avgg(S, 1s, 1s);\n"})])
    assert result.exit_code == 1 and "unknown function 'avgg'" in result.output
    assert invoke(["compile", "--partitions", "0"]).exit_code == 2
    assert not list(crash_folder.glob("sscript-crash-*"))


# --------------------------------------------------------------------------- bad arguments


@pytest.fixture
def place(tmp_path, monkeypatch):
    """The files and folders the cases name, under tmp_path ({t} in a case)."""
    monkeypatch.setenv("SSCRIPT_DEBUG", "1")  # a crash is an exception here, not the guard's sentence
    (tmp_path / "ok.ss").write_text("A = avg(S, 1s, 1s);\n")
    (tmp_path / "latin1.ss").write_bytes("A = avg(\"Düse\", 1s, 1s);\n".encode("latin-1"))
    (tmp_path / "folder.ss").mkdir()
    (tmp_path / "a_file").write_text("not a folder\n")
    (tmp_path / "garbage.db").write_bytes(bytes(range(256)) * 4)
    (tmp_path / "garbage.csv").write_bytes(bytes(range(256)) * 4)
    (tmp_path / "columns.csv").write_text("id_of_sensor,hz\nA,1\n")
    for name, table in (("other.db", "readings(sensor, value)"), ("lookalike.db", "sensors(name, rate)")):
        db = sqlite3.connect(tmp_path / name)
        db.execute(f"CREATE TABLE {table}")
        db.commit()
        db.close()
    (tmp_path / "syntax.py").write_text("def broken(:\n")
    (tmp_path / "raises.py").write_text("raise RuntimeError('no licence server')\n")
    (tmp_path / "nothing.py").write_text("from sensorscript.runtime.state.cep.operators import UnaryOperator\n\n\n"
                                         "class Rising(UnaryOperator):  # never registered\n    pass\n")
    (tmp_path / "data").mkdir()
    (tmp_path / "never").mkdir()  # a folder, but nothing compiled into it
    assert invoke(["compile", str(tmp_path / "ok.ss"), "-o", str(tmp_path / "out")]).exit_code == 0
    (tmp_path / "notes.txt").write_text("my notes\n")
    return tmp_path


def closed_port() -> int:
    """A port nothing listens on (the kernel's choice, closed again)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


RUN = "run {t}/out --input {t}/data"
CASES = [
    # scripts
    ("check {t}/missing.ss", "missing.ss: cannot read the workflow: no such file or folder"),
    ("compile {t}/folder.ss -o {t}/o", "'FILES...': File '{t}/folder.ss' is a directory"),
    ("check {t}/latin1.ss", "latin1.ss: cannot read the workflow: not UTF-8 text (byte 0xfc at position 10)"),
    # where results go
    ("compile {t}/ok.ss -o {t}/a_file", "Directory '{t}/a_file' is a file"),
    ("compile {t}/ok.ss -o /etc/passwd/out", "/etc/passwd/out: cannot write the compiled job there: a part of "
                                            "the path is a file, not a folder"),
    ("graph {t}/ok.ss -o /etc/passwd/dag.dot", "/etc/passwd/dag.dot: cannot write the drawing there"),
    # compiled jobs that are not there
    ("run {t}/never --input {t}/data", "never/job.py: no compiled job here; run 'sscript compile"),
    ("run {t}/missing --input {t}/data", "missing/job.py: no compiled job here"),
    ("status {t}/never", "{t}/never holds no compiled job (sscript compile WORKFLOWS -o {t}/never)"),
    ("status {t}/missing", "no such folder: {t}/missing"),
    ("status {t}/out", "the job in {t}/out has not run yet"),
    ("results {t}/never", "never/job.py: no compiled job here"),
    ("results {t}/missing", "missing/job.py: no compiled job here"),
    ("correct {t}/never", "never/job.py: no compiled job here"),
    ("correct {t}/out", "the job in {t}/out has not run yet"),
    # sensor registries
    ("check {t}/ok.ss --sensors {t}/garbage.db", "garbage.db: not a sensor registry: file is not a database"),
    ("check {t}/ok.ss --sensors {t}/garbage.csv", "garbage.csv: not a CSV of sensors: not UTF-8 text"),
    ("compile {t}/ok.ss -o {t}/o --sensors {t}/columns.csv", "columns.csv:1: the header must name the columns "
                                                             "sensor_id,frequency_hz[,type]; found id_of_sensor,hz"),
    ("explain {t}/ok.ss --sensors {t}/other.db", "other.db: not a sensor registry: it has no table 'sensors'"),
    ("check {t}/ok.ss --sensors {t}/lookalike.db", "lookalike.db: not a sensor registry: its table 'sensors' has "
                                                   "no columns sensor_id, frequency_hz and type"),
    ("check {t}/ok.ss --sensors {t}/missing.db", "missing.db: no such sensor registry"),
    ("check {t}/ok.ss --sensors {t}/data", "data: not a sensor registry: it is a folder"),
    ("sensors import {t}/garbage.csv --db {t}/s.db", "garbage.csv: not a CSV of sensors"),
    ("sensors import {t}/columns.csv --db {t}/s.db", "columns.csv:1: the header must name the columns"),
    ("sensors import {root}/workflows/sensors.csv --db {t}/garbage.db", "garbage.db: not a sensor registry"),
    ("sensors import {root}/workflows/sensors.csv --db /etc/passwd/s.db",
     "/etc/passwd/s.db: cannot create a sensor registry there"),
    ("sensors list --db {t}/garbage.db", "garbage.db: not a sensor registry: file is not a database"),
    ("sensors list --db {t}/other.db", "other.db: not a sensor registry: it has no table 'sensors'"),
    # pattern operators
    ("check {t}/ok.ss --operators {t}/syntax.py", "syntax.py: cannot load the operators: SyntaxError"),
    ("compile {t}/ok.ss -o {t}/o --operators {t}/raises.py", "raises.py: cannot load the operators: "
                                                             "RuntimeError: no licence server"),
    ("check {t}/ok.ss --operators {t}/nothing.py", "nothing.py: registers no pattern operator"),
    ("check {t}/ok.ss --operators {t}/missing.py", "'--operators': File '{t}/missing.py' does not exist"),
    # options
    ("report {t}/ok.ss -o {t}/r --generated 1,many", "'--generated': '1,many' is not a list of workflow counts"),
    ("compile {t}/ok.ss -o {t}/o --pattern-limit 99999999999", "'--pattern-limit': 99999999999 is not in the range"),
    ("status {t}/out --tz Mars/Base", "'--tz': 'Mars/Base' is not a time zone; name one of the IANA database"),
    ("results {t}/out --tz +05:00", "'--tz': '+05:00' is not a time zone"),
    # the dashboard: checked before anything is served
    ("dashboard {t}/missing", "{t}/missing: no such folder; give the folder a job was compiled into"),
    ("dashboard {t}/never", "never/job.py: no compiled job here; run 'sscript compile"),
    ("dashboard {t}/a_file", "Directory '{t}/a_file' is a file"),
    ("dashboard {t}/out --port 65536", "'--port': 65536 is not in the range 0<=x<=65535"),
    ("dashboard {t}/out --tz Mars/Base", "'--tz': 'Mars/Base' is not a time zone"),
    # running: checked before Spark starts
    ("run {t}/out --input {t}/nowhere", "nowhere: no such input folder"),
    ("run {t}/out --input {t}/notes.txt", "notes.txt: a file; --input takes a folder of CSV or JSON-lines files"),
    (RUN + " --sink csv:{t}/data", "the sink 'csv:{t}/data': {t}/data is a folder, and a csv sink writes one file"),
    (RUN + " --sink parquet:{t}/a_file", "the sink 'parquet:{t}/a_file': {t}/a_file is a file, and a parquet sink "
                                         "writes a folder"),
    (RUN + " --sink sqlite:{t}/data", "{t}/data is a folder, and a sqlite sink writes one file"),
    (RUN + " --sink sqlite:{t}/a_file/results.db", "the sink 'sqlite:{t}/a_file/results.db': {t}/a_file is a file, "
                                                   "not a folder"),
    (RUN + " --sink sqlite:{t}/notes.txt", "{t}/notes.txt is not an SQLite database, and the results would replace it"),
    (RUN + " --sink bogus:x", "unknown sink 'bogus:x': use sqlite:PATH, csv:PATH, parquet:PATH, console, "
                                   "kafka://HOST:PORT/TOPIC or postgresql://[USER@]HOST[:PORT]/DB"),
    (RUN + " --sink postgresql://ops:s3cret@127.0.0.1:{closed}/sensors",
     "the address of a PostgreSQL sink holds no password (it would be kept in OUT/status.json and shown); give it "
     "in PGPASSWORD or ~/.pgpass, as for psql"),
    (RUN + " --sink postgresql://ops@127.0.0.1:{closed}/sensors?password=s3cret",
     "the address of a PostgreSQL sink holds no password"),
    (RUN + " --sink postgresql://ops@127.0.0.1:{closed}/sensors?sslmode=verify-full&sslpassword=s3cret",
     "the address of a PostgreSQL sink holds no password"),
    (RUN + " --sink postgresql://127.0.0.1:{closed}/sensors?schema=Bad-Name",
     "schema 'Bad-Name' is not a plain lower-case name (letters, digits, _)"),
    (RUN + " --sink postgresql://127.0.0.1:{closed}/sensors?sslmode=sometimes", "sslmode"),
    (RUN + " --sink csv:", "the sink 'csv:' needs a path"),
    (RUN + " --cluster spark://127.0.0.1:{closed} --cluster-unauthenticated",
     "cannot reach the Spark master at 127.0.0.1:{closed} (connection refused)"),
    (RUN + " --cluster spark://master.invalid:7077 --cluster-unauthenticated",
     "cannot reach the Spark master at master.invalid:7077 (unknown host)"),
    (RUN + " --cluster spark://10.0.0.5 --cluster-unauthenticated",
     "'spark://10.0.0.5' is not a Spark master URL; write spark://HOST:PORT"),
    (RUN + " --cluster spark://127.0.0.1:{closed}", "a Spark standalone cluster runs whatever anyone who reaches its "
                                                    "master submits: give the secret"),
    (RUN + " --cluster spark://127.0.0.1:{closed} --cluster-secret env:SSCRIPT_NO_SUCH_VARIABLE",
     "--cluster-secret env:SSCRIPT_NO_SUCH_VARIABLE: the environment variable SSCRIPT_NO_SUCH_VARIABLE is not set"),
    (RUN + " --cluster spark://127.0.0.1:{closed} --cluster-secret {t}/no-secret", "--cluster-secret {t}/no-secret: "
                                                                                   "cannot read it"),
    (RUN + " --cluster spark://127.0.0.1:{closed} --cluster-secret env:X --cluster-unauthenticated",
     "--cluster-secret and --cluster-unauthenticated contradict each other"),
    (RUN + " --cluster-unauthenticated", "--cluster-secret and --cluster-unauthenticated go with --cluster"),
]


@pytest.mark.parametrize("command, sentence", CASES, ids=[c for c, _ in CASES])
def test_bad_arguments_get_one_sentence(place, command, sentence):
    names = {"t": place, "root": ROOT, "closed": closed_port()}
    result = invoke([part.format(**names) for part in command.split()])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code in (1, 2), result.output
    assert "Traceback" not in result.output
    errors = [line for line in result.output.splitlines() if line.lower().startswith("error: ")]
    assert len(errors) == 1, result.output
    assert sentence.format(**names) in errors[0]


def test_a_dashboard_on_a_port_in_use_is_one_sentence(place):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = invoke(["dashboard", str(place / "out"), "--port", str(port)])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert result.output.startswith(f"error: port {port} on 127.0.0.1 is in use (another dashboard, or another "
                                    f"program); choose another with --port N"), result.output


def _without_dac_override() -> None:
    """In the child, before it runs the command: drop CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH from
    the bounding set (prctl PR_CAPBSET_DROP), so that root, once the command is executed, no longer
    writes where the permission bits say no."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    for capability in (1, 2):  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH
        if libc.prctl(24, capability, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
            os.write(2, f"prctl(PR_CAPBSET_DROP, {capability}) failed: errno {ctypes.get_errno()}\n".encode())
            os._exit(99)


def test_a_read_only_folder_is_one_sentence(tmp_path):
    """`sscript compile` into a folder it may not write (mode 0555). Root may write anywhere: as root
    (as CI runs) the command runs without the capability that lets it (root drops it first)."""
    (tmp_path / "ok.ss").write_text("A = avg(S, 1s, 1s);\n")
    (tmp_path / "locked").mkdir(mode=0o555)
    result = subprocess.run([sys.executable, "-m", "sensorscript.cli", "compile", str(tmp_path / "ok.ss"), "-o",
                             str(tmp_path / "locked" / "out")], capture_output=True, text=True, timeout=120,
                            preexec_fn=_without_dac_override if os.geteuid() == 0 else None)
    said = result.stdout + result.stderr
    assert result.returncode == 1 and "Traceback" not in said, said
    assert "cannot write the compiled job there: permission denied" in said, said
    assert not (tmp_path / "locked" / "out").exists()


def test_a_bad_sink_is_refused_before_a_bounded_run_clears_it(place):
    """`--once` clears the sink first: a folder given as a CSV sink was deleted, a text file given as
    an SQLite sink too. The job itself checks (python OUT/job.py), before Spark starts."""
    for sink in (f"csv:{place / 'data'}", f"sqlite:{place / 'notes.txt'}"):
        result = subprocess.run([sys.executable, str(place / "out" / "job.py"), "--input", str(place / "data"),
                                 "--once", "--sink", sink], capture_output=True, text=True, timeout=120)
        assert result.returncode == 1 and result.stderr.startswith("error: the sink"), result.stderr
    assert (place / "data").is_dir() and (place / "notes.txt").read_text() == "my notes\n"
