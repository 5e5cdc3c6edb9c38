"""Bad arguments get one sentence and a non-zero exit, never a traceback; a bug gets one sentence,
a crash file and exit code 70 (issue #15: "No traceback, ever")."""

from __future__ import annotations

import tempfile

import pytest
from click.testing import CliRunner

from sensorscript.cli import main


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
    fail_with(monkeypatch, KeyError("window:1a2b\nsecond line"))
    result = invoke(["compile", *write_scripts({"w": "A = avg(S, 1s, 1s);\n"}), "-o", str(crash_folder / "out")])
    assert result.exit_code == 70 and isinstance(result.exception, SystemExit)
    (line,) = result.output.strip().splitlines()
    assert line.startswith("error: internal error in sscript (a bug, please report it): KeyError: 'window:1a2b")
    (crash,) = crash_folder.glob("sscript-crash-*.txt")
    assert line.endswith(f"; details in {crash}")
    assert "Traceback" not in result.output and "Traceback" in crash.read_text()
    assert "KeyError" in crash.read_text() and "sscript 0." in crash.read_text()


def test_sscript_debug_lets_a_bug_through(crash_folder, monkeypatch, write_scripts):
    monkeypatch.setenv("SSCRIPT_DEBUG", "1")
    fail_with(monkeypatch, KeyError("window:1a2b"))
    result = invoke(["compile", *write_scripts({"w": "A = avg(S, 1s, 1s);\n"}), "-o", str(crash_folder / "out")])
    assert isinstance(result.exception, KeyError)
    assert not list(crash_folder.glob("sscript-crash-*.txt"))


def test_an_interrupt_exits_130_with_a_short_line(crash_folder, monkeypatch, write_scripts):
    fail_with(monkeypatch, KeyboardInterrupt())
    result = invoke(["compile", *write_scripts({"w": "A = avg(S, 1s, 1s);\n"}), "-o", str(crash_folder / "out")])
    assert result.exit_code == 130 and result.output.strip() == "interrupted"
    assert not list(crash_folder.glob("sscript-crash-*.txt"))


def test_mistakes_are_not_bugs(crash_folder, write_scripts):
    """A script error stays exit code 1 and a usage error 2: the guard leaves both alone."""
    result = invoke(["check", *write_scripts({"w": "A = avgg(S, 1s, 1s);\n"})])
    assert result.exit_code == 1 and "unknown function 'avgg'" in result.output
    assert invoke(["compile", "--partitions", "0"]).exit_code == 2
    assert not list(crash_folder.glob("sscript-crash-*.txt"))
