"""Every mistake gets file:line:col, the line, a caret, and a did-you-mean where one helps."""

import pytest
from click.testing import CliRunner

from sensorscript.cli import main
from sensorscript.errors import SensorScriptError
from sensorscript.parser import load


def diagnostics(text: str, known_sensors=None):
    try:
        loaded = load(["w.ss"], known_sensors, texts={"w.ss": text})
    except SensorScriptError as exc:
        return [(d.severity, d.span.line if d.span else None, d.span.column if d.span else None, d.message)
                for d in exc.diagnostics]
    return [(d.severity, d.span.line, d.span.column, d.message) for d in loaded.warnings]


def only_error(text, known_sensors=None):
    found = [d for d in diagnostics(text, known_sensors) if d[0] == "error"]
    assert len(found) == 1, found
    return found[0][1:]


@pytest.mark.parametrize("text, line, column, message", [
    # syntax
    ("A = avg(S, 1s, 1s)\nB = A;", 1, 19, "expected ';' here"),
    ("A = avg(S, 1s 1s);", 1, 15, "unexpected '1s'"),
    ("A = S + ;", 1, 9, "unexpected ';'"),
    ("A = S # 2;", 1, 7, "unexpected character '#'"),
    ("A = S +\0 2;", 1, 8, "unexpected character U+0000 (NUL, invisible)"),
    ("A = S\u200b + 2;", 1, 6, "unexpected character U+200B (ZERO WIDTH SPACE, invisible)"),
    ("A = S;\ufeffB = S;", 1, 7, "unexpected character U+FEFF (ZERO WIDTH NO-BREAK SPACE, invisible)"),
    ('A = avg("S, 1s, 1s);', 1, 9, "unterminated quoted name"),
    ("A = S;\n/* never closed", 2, 1, "unterminated comment"),
    ("A = S", 1, 6, "expected ';' here"),
    # lexical
    ("A = avg(S, 10m, 1s);", 1, 12, "unknown duration unit 'm' in '10m'; write '10min'"),
    ("A = avg(S, 1hr, 5s);", 1, 12, "unknown duration unit 'hr' in '1hr'; write '1h'"),
    ("A = avg(S, 1h, 5secs);", 1, 16, "unknown duration unit 'secs' in '5secs'; write '5s'"),
    ("A = avg(S, 1h, 5sx);", 1, 16, "unknown duration unit 'sx' in '5sx'; did you mean 's'?"),
    # names and definitions
    ("A = avgg(S, 1s, 1s);", 1, 5, "unknown function 'avgg'; did you mean 'avg'?"),
    ("A = S * 2;\nA = S;", 2, 1, "'A' is already defined on line 1"),
    ("A = B + 1;\nB = A * 2;", 1, 1, "cycle: 'A' reads 'B' reads 'A'"),
    ("A = A + 1;", 1, 1, "cycle: 'A' reads 'A'"),
    ("A = avg(S, 0, 1s);", 1, 12, "the window length must be positive, not 0"),
    ("A = avg(S, 1s, 0ms);", 1, 16, "the window slide must be positive, not 0ms"),
    ("A = union(S);", 1, 5, "union takes two or more streams"),
    ("A = union(S, T + 1);", 1, 14, "union takes stream names"),
    ("A = avg(S, 1s, 1s) + 1;", 1, 5, "a window aggregation must be a statement of its own"),
    ("A = avg(S + T, 1s, 1s);", 1, 9, "a window reads one stream"),
    ("A = max(S);", 1, 5, "max over streams takes two or more arguments"),
    ("A = count(S, T);", 1, 5, "count is a window aggregation"),
    ("A = avg(S, 10min);", 1, 5, "a window aggregation takes a stream, a length and a slide: avg(STREAM, LENGTH, "
                                 "SLIDE); this call has 2 argument(s)"),
    ("A = S + 10s;", 1, 9, "a duration ('10s') is only valid as a window length or slide"),
    ("A = 1 + 2;", 1, 1, "'A' reads no stream"),
    ("A = S < T < U;", 1, 5, "comparisons do not chain"),
    ("A = S.value + 1;", 1, 5, "'S.value' is only valid inside a pattern"),
    # patterns
    ("P = pattern(a: X -> b: Y);", 1, 5, "a pattern needs 'within DURATION'"),
    ("P = pattern(!a: X -> b: Y) within 1s;", 1, 13, "a pattern may not start with a negation"),
    ("P = pattern(a: X -> !b: Y -> c: Z) within 1s strategy strict;", 1, 21,
     "negation is not allowed with 'strategy strict'"),
    ("P = pattern(a: X -> b: Y) where q.value > 1 within 1s;", 1, 33, "unknown pattern variable 'q'"),
    ("P = pattern(a: X -> b: Y) where a.valeu > 1 within 1s;", 1, 33,
     "unknown attribute 'valeu'; did you mean 'value'?"),
    ("P = pattern(a: X -> b: Y) where count(b) > 1 within 1s;", 1, 33,
     "count() aggregates over a Kleene variable, and 'b' is not one"),
    ("P = pattern(a: X -> b: Y+) where avgg(b.value) > 1 within 1s;", 1, 34,
     "unknown aggregate 'avgg'; did you mean 'avg'?"),
    ("P = pattern(a: X -> b: Y) within 1s strategy anyy;", 1, 46, "unknown strategy 'anyy'; did you mean 'any'?"),
    ("P = pattern(a: X -> b: Y) within 1s emit frist;", 1, 42, "unknown emit mode 'frist'; did you mean 'first'?"),
    ("P = pattern(a: X -> b: Y) within 1s within 2s;", 1, 37, "a pattern takes one 'within' clause"),
    ("P = pattern(a: X -> a: Y) within 1s;", 1, 21, "pattern variable 'a' is bound twice"),
    ("P = pattern(a: X -> !b: Y+ -> c: Z) within 1s;", 1, 21, "a negated element cannot be Kleene"),
    ("P = pattern(a: X -> !b: Y -> c: Z) within 1s yield b.value;", 1, 52, "'b' is negated"),
    ("P = pattern(a: X -> b: Y) within 0;", 1, 34, "'within' must be positive"),
    # magnitudes: a literal of hundreds of digits overflowed a double (OverflowError, a traceback)
    ("P = pattern(a: X -> b: Y) within " + "9" * 400 + ";", 1, 34, "is too long: durations are at most 100 years"),
    ("P = pattern(a: X -> b: Y) within 99999999999h;", 1, 34, "the duration 99999999999h is too long"),
    ("A = avg(S, " + "9" * 400 + ", 1s);", 1, 12, "is too long"),
    ("A = avg(S, 1s, 200000000000000ms);", 1, 16, "the duration 200000000000000ms is too long"),
    ("P = pattern(a: X -> b: Y) within 1s limit " + "9" * 400 + ";", 1, 43,
     "'limit' takes a whole number of partial matches from 1 to 1,000,000,000"),
    ("P = pattern(" + " -> ".join(f"v{i}: S" for i in range(33)) + ") within 1s;", 1, 5,
     "a pattern may have at most 32 elements, this one has 33"),  # 1,000 exceeded the recursion limit
    ("A = S * 1e999;", 1, 9, "the number 1e999 is too large"),  # was `inf` in job.py: a NameError
    ("P = pattern(a: X -> b: Y) where a.value > 1e400 within 1s;", 1, 43, "the number 1e400 is too large"),
])
def test_error(text, line, column, message):
    found_line, found_column, found = only_error(text)
    assert message in found
    assert (found_line, found_column) == (line, column), found


def test_a_byte_order_mark_at_the_start_of_a_file_is_not_part_of_the_text(tmp_path):
    """Notepad saves UTF-8 with a byte-order mark: the file reads as without one, columns alike."""
    path = tmp_path / "w.ss"
    path.write_bytes("\ufeffA = avg(S, 1s, 1s);\nB = A +;\n".encode())
    with pytest.raises(SensorScriptError) as raised:
        load([str(path)])
    shown = str(raised.value)
    assert "w.ss:2:8: error: unexpected ';'" in shown and "FEFF" not in shown, shown
    path.write_bytes("\ufeffA = avg(S, 1s, 1s);\n".encode())
    assert [s.name for s in load([str(path)]).workflows[0].statements] == ["A"]


def test_every_error_of_a_run_is_reported():
    text = "A = avgg(S, 1s, 1s);\nB = union(S);\nC = max(S);\nP = pattern(a: X -> b: Y);\n"
    errors = [d for d in diagnostics(text) if d[0] == "error"]
    assert [d[1] for d in errors] == [1, 2, 3, 4]


def test_rendering_shows_line_and_caret():
    with pytest.raises(SensorScriptError) as raised:
        load(["bridge.ss"], texts={"bridge.ss": 'MD1Z = avgg("8MD1-AZ", 10min, 5min);\n'})
    assert raised.value.render() == (
        "bridge.ss:1:8: error: unknown function 'avgg'; did you mean 'avg'?\n"
        '    MD1Z = avgg("8MD1-AZ", 10min, 5min);\n'
        "           ^^^^")


def test_unknown_sensor_is_a_warning_with_a_registry():
    found = diagnostics('A = avg("8MD1-AX", 1s, 1s);', known_sensors={"8MD1-AZ"})
    assert found == [("warning", 1, 9, "'8MD1-AX' is neither a stream of this workflow nor a sensor of the "
                      "registry; it is read as a raw sensor with the default frequency; did you mean '8MD1-AZ'?")]


def test_without_registry_only_near_misses_of_streams_are_flagged():
    assert diagnostics('MD1Z = avg("8MD1-AZ", 1s, 1s);\nX = MD1Z + S1;') == []
    found = diagnostics("MD1Z = avg(S, 1s, 1s);\nX = MD1z + 1;")
    assert found == [("warning", 2, 5, "'MD1z' is not defined in this workflow and is read as a raw sensor; "
                      "did you mean 'MD1Z'?")]


def test_workflows_with_the_same_name_are_rejected(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    for d in ("a", "b"):
        (tmp_path / d / "w.ss").write_text("X = avg(S, 1s, 1s);")
    with pytest.raises(SensorScriptError, match="already given"):
        load([tmp_path / "a" / "w.ss", tmp_path / "b" / "w.ss"])


def test_check_command_exit_codes(write_scripts):
    good, bad = write_scripts({"good": "X = avg(S, 1s, 1s);", "bad": "X = avgg(S, 1s, 1s);"})
    runner = CliRunner()
    ok = runner.invoke(main, ["check", good])
    assert ok.exit_code == 0 and "ok: 1 workflow(s)" in ok.output
    failed = runner.invoke(main, ["check", good, bad])
    assert failed.exit_code == 1
    assert "bad.ss:1:5: error: unknown function 'avgg'" in failed.output
    missing = runner.invoke(main, ["check", "nowhere.ss"])
    assert missing.exit_code == 1 and "cannot read the workflow" in missing.output


# ------------------------------------------------------------------ recovery per statement

BROKEN_AND_WRONG = """\
A   = avg(S, 1s, 1s);
B   = avg(A, , 1s);          // syntax: B does not parse
C   = B + A;                 // reads B: no follow-on error
D   = avgg(S, 1s, 1s);       // unknown function
E   = (S + ;                 // syntax
F   = E * 2 + B;             // reads two broken streams: no follow-on error
A   = S;                     // redefinition
H   = max(S)                 // syntax: the ';' is missing
I   = H + union(A, C);       // a union inside an expression; H is only broken, not unknown
J   = K + 1;                 // a cycle through K ...
K   = J * 2;                 // ... which is reported once
P   = pattern(a: X -> b Y) within 1s;
Q   = count(P, 1h, 1h);      // P is broken: no follow-on error
R   = pattern(a: X) within 1s strategy nxt;
"""


def test_broken_statements_do_not_hide_the_rest_of_the_file():
    found = [d for d in diagnostics(BROKEN_AND_WRONG) if d[0] == "error"]
    assert [(line, message.split("; ")[0]) for _, line, _, message in found] == [
        (2, "unexpected ','"),
        (4, "unknown function 'avgg'"),
        (5, "unexpected ';'"),
        (7, "'A' is already defined on line 1"),
        (8, "expected ';' here"),
        (9, "a union must be a statement of its own: name it (X = ...;) and use X here"),
        (10, "cycle: 'J' reads 'K' reads 'J'"),
        (12, "expected ':' here"),
        (14, "unknown strategy 'nxt'"),
    ]


def test_names_of_broken_statements_raise_no_warnings_either():
    text = "MD1Z = avg(S, 1s 1s);\nX = MD1Z + 1;\nY = MD1z + 2;\n"
    found = diagnostics(text, known_sensors={"S"})
    # MD1Z is broken, not unknown; MD1z (a typo) is still an unknown sensor.
    assert [(d[0], d[1]) for d in found] == [("error", 1), ("warning", 3)]
    assert "did you mean 'MD1Z'" in found[1][3]


@pytest.mark.parametrize("text, errors", [
    # A stray token between statements is skipped with the statement it would have started.
    ("= avg(S, 1s, 1s);\nX = S;\nY = X + 1;", [1]),
    (") ; ) ;\nX = S;", [1]),
    # Both the ';' and more are missing: the statement ends at the next `NAME =`.
    ("X = avg(S, 1s\nY = S * 2;\nZ = Y + X;", [1]),
    # Several broken statements on one line, each reported once.
    ("X = S +* 2; Y = X; Z = X +;  W = Z + Y + V;", [1, 1]),
    ("X = S;\nY = (X + 1;\nZ = Y)\nW = Z;", [2, 3]),
])
def test_each_broken_statement_is_reported_once(text, errors):
    found = [d for d in diagnostics(text) if d[0] == "error"]
    assert [d[1] for d in found] == errors, found


def test_a_file_named_twice_is_one_workflow_and_two_files_of_one_name_are_refused(tmp_path, monkeypatch):
    (tmp_path / "a").mkdir()
    first, other = tmp_path / "w.ss", tmp_path / "a" / "w.ss"
    for path in (first, other):
        path.write_text("A = avg(S, 1s, 1s);\n")
    monkeypatch.chdir(tmp_path)
    loaded = load([str(first), "w.ss", "./w.ss"])  # as `*.ss w.ss` gives it
    assert [w.name for w in loaded.workflows] == ["w"]
    with pytest.raises(SensorScriptError) as raised:
        load([str(first), str(other)])
    assert "a workflow named 'w' is already given" in str(raised.value)
