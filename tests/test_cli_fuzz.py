"""Every command, not only the parser, on random and mutated scripts (issue #15: "No traceback, ever").

Valid random workflows (tests/strategies.py), patterns (tests/pattern_strategies.py), files whose
statements are all patterns, and mutations of them and of the examples (tests/test_robustness.py)
go through `check`, `compile`, `explain`, `graph` and `report` with random options. Each ends with
exit code 0 or 1 (2 for a usage error), never with an exception: SSCRIPT_DEBUG=1 turns off the CLI's
last-resort guard, so a bug fails here with its traceback instead of the guard's one sentence.
"""

from __future__ import annotations

import random

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings, strategies as st

from sensorscript.cli import main
from tests.conftest import ROOT
from tests.differential import write_scripts
from tests.pattern_strategies import pattern_only_workflow, pattern_scripts
from tests.strategies import scripts
from tests.test_antlr_runtime import FRAGMENTS
from tests.test_robustness import SEEDS, mutate

REGISTRY = str(ROOT / "workflows" / "sensors.csv")
# Examples per test: about 0.1 s each, a report 4 s of CPU; the module takes about a minute.
FUZZ = dict(deadline=None, suppress_health_check=list(HealthCheck))


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """One folder for the module's scripts and outputs; bugs raise instead of being worded."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SSCRIPT_DEBUG", "1")
        yield tmp_path_factory.mktemp("fuzz")


def workflows() -> st.SearchStrategy[dict[str, str]]:
    """{file stem: text}: windows, unions and arithmetic; patterns; or patterns only."""
    return st.one_of(scripts(), pattern_scripts(), st.dictionaries(st.sampled_from(("alarms", "pier")),
                                                                   pattern_only_workflow(), min_size=1))


# Besides the lexer's fragments: the pieces of patterns, and numbers no job can hold.
PIECES = FRAGMENTS + ["(", ")", ";", "X = pattern(", "a: X", " -> ", "->[at_first] ", "first_of_run(", "+", "!n: Y", " within 1s",
                      " limit 5", " strategy strict", " partition by sensor", " yield ", "9" * 400, "1e999"]


@st.composite
def mutated(draw) -> dict[str, str]:
    """An example workflow or a pattern-only file after 1-6 random edits, a soup of fragments, or a
    file without statements."""
    seed = draw(st.one_of(st.sampled_from(SEEDS), pattern_only_workflow()))
    edited = mutate(seed, draw(st.randoms(use_true_random=False)), draw(st.integers(1, 6)), PIECES)
    soup = "".join(draw(st.lists(st.sampled_from(PIECES), max_size=30)))
    return {"fuzz": draw(st.sampled_from((edited, soup, "", "// to do\n")))}


@st.composite
def command(draw, files: list[str], out: str) -> list[str]:
    """One of check, compile, explain, graph with random options."""
    sensors = ["--sensors", REGISTRY] if draw(st.booleans()) else []
    partitions = ["-n", str(draw(st.integers(1, 8)))]
    name = draw(st.sampled_from(("check", "compile", "explain", "graph")))
    if name == "check":
        return ["check", *files, *sensors, *(["--show"] if draw(st.booleans()) else [])]
    if name == "compile":
        policies = draw(st.sampled_from(([], ["--watermark", "adaptive:5s", "--late", "correct"],
                                         ["--watermark", "quality:0.1,0.1", "--late", "drop"])))
        naive = ["--naive"] if draw(st.integers(0, 3)) == 0 else []
        return ["compile", *files, "-o", f"{out}/job", *sensors, *partitions, *policies, *naive]
    if name == "explain":
        return ["explain", *files, *sensors, *partitions]
    # .dot is text; .svg is drawn with matplotlib (no Graphviz either), slower: now and then.
    return ["graph", *files, "-o", f"{out}/dag.{draw(st.sampled_from(('dot', 'dot', 'dot', 'svg')))}"]


def assert_ends_cleanly(args: list[str]) -> None:
    result = CliRunner().invoke(main, args)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception  # a bug: its own traceback, with the command drawn shown by hypothesis
    assert result.exit_code in (0, 1, 2), (args, result.output)
    assert "Traceback" not in result.output
    if result.exit_code:
        assert "error" in result.output.lower(), result.output


@settings(max_examples=150, **FUZZ)
@given(workflows(), st.data())
def test_random_workflows_through_every_command(folder, texts, data):
    files = write_scripts(folder, texts)
    assert_ends_cleanly(data.draw(command(files, str(folder))))


@settings(max_examples=150, **FUZZ)
@given(mutated(), st.data())
def test_mutated_scripts_through_every_command(folder, texts, data):
    files = write_scripts(folder, texts)
    assert_ends_cleanly(data.draw(command(files, str(folder))))


@settings(max_examples=2, **FUZZ)
@given(st.one_of(workflows(), mutated()), st.integers(1, 4))
def test_report_of_random_and_mutated_scripts(folder, texts, partitions):
    """Two examples: every report also models the two sweeps of Zhou et al. and draws its plots (4 s of CPU)."""
    files = write_scripts(folder, texts)
    assert_ends_cleanly(["report", *files, "-n", str(partitions), "-o", str(folder / "report"),
                         "--generated", "1,2"])


def test_a_file_of_patterns_only_compiles(tmp_path, monkeypatch):
    """The issue's case: negation, Kleene, every strategy, emit first, partition by sensor, yield, the
    registered operators and patterns over patterns, with the example registry and without."""
    monkeypatch.setenv("SSCRIPT_DEBUG", "1")
    (tmp_path / "alarms.ss").write_text(
        'RISE = pattern(a: "8TL3-N" -> !n: "8WL3" -> c: "8TL3-S"+) where a.value > 0.5 and count(c) >= 2\n'
        '       within 10min strategy next emit first partition by sensor yield last(c.value) - a.value;\n'
        'JUMP = pattern(p: "8TL3-N" -> q: "8TL3-N") where q.value - p.value > 4 within 1s strategy strict\n'
        '       partition by sensor limit 100;\n'
        'BOTH = pattern(x: RISE ->[at_first] y: first_of_run(JUMP)) within 1h;\n')
    for sensors in ([], ["--sensors", REGISTRY]):
        for n in ("1", "3", "8"):
            result = CliRunner().invoke(main, ["compile", str(tmp_path / "alarms.ss"), "-o", str(tmp_path / "out"),
                                               "-n", n, *sensors])
            assert result.exit_code == 0 and result.exception is None, result.output
            assert "compiled 1 workflow(s)" in result.output and (tmp_path / "out" / "job.py").exists()
