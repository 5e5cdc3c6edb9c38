"""`sscript report`: line counts, modelled and measured network cost, Markdown and HTML with plots."""

import dataclasses

import pytest
from click.testing import CliRunner

from sensorscript import report as reporting
from sensorscript.cli import main
from sensorscript.registry import read_csv
from sensorscript.workload import write_readings
from tests.conftest import ROOT

EXAMPLES = [str(ROOT / "workflows" / n) for n in ("bridge.ss", "bridge_limits.ss", "deck_vibration.ss")]
SENSORS = str(ROOT / "workflows" / "sensors.csv")


def test_script_lines_leave_out_comments_and_blank_lines():
    text = "// a comment\n\nA = avg(S1, 1s, 1s);  // trailing\n/* block\n   more */\nB = A + 1;\n"
    assert reporting.script_lines(text) == 2


def test_python_lines_leave_out_comments_docstrings_and_blank_lines():
    text = '"""Module\ndocstring."""\n\n# comment\nimport os\n\n\ndef f():\n    """Doc."""\n    return (1 +\n            2)\n'
    assert reporting.python_lines(text) == 4  # import, def, and the two lines of the return


def test_report_of_the_examples(tmp_path):
    built = reporting.build(EXAMPLES, SENSORS, 2, echo=lambda *_: None, sizes=(1, 16), sweep_counts=(16, 64))
    given, one, sixteen = built.lines
    assert given.workflows == 3 and one.workflows == 1 and sixteen.workflows == 16
    assert given.script == 23 and one.script == 7 and sixteen.script == 112
    assert given.naive > given.script and sixteen.naive > sixteen.script
    assert built.cost.ours <= built.cost.naive_sensor_hash
    assert [p.x for p in built.by_shared] == list(range(0, 17, 2))
    assert all(p.cost.lower_bound == built.by_shared[0].cost.lower_bound for p in built.by_shared)  # 16 sensors
    md, page = reporting.write(built, tmp_path / "report")
    text = md.read_text()
    assert "| the given workflows | 23 |" in text and "![Lines of code](lines.png)" in text
    assert "## Network against the number of shared sensors n_s" in text
    assert "<table>" in page.read_text()
    for name in reporting.PLOTS.values():
        assert (tmp_path / "report" / name).read_bytes()[:4] == b"\x89PNG"
    assert "measured: ours" not in text
    # With measured sweep points (as --measure-sweeps gives them), the tables and plots show them.
    point = reporting.MeasuredPoint(ours=19_632, lower_bound=19_200, by_sensor=278_600, by_workflow=48_000,
                                    same=True)
    built.by_shared[4] = dataclasses.replace(built.by_shared[4], measured=point)
    md, _ = reporting.write(built, tmp_path / "measured")
    assert "| measured: ours |" in md.read_text()
    assert "| 8 | 19,632 | 19,200 | 1,008 | 278,592 | 48,000 | 33,600 | 93.0% | 59.1% | 19,632 | 19,200 | 278,600 | 48,000 | yes |" \
        in md.read_text()
    assert "| 0 | 19,200 | 19,200 | 576 | 76,992 | 19,200 | 19,200 | 75.1% | 0.0% | – | – | – | – | – |" in md.read_text()
    # n_s = 2: the greedy of Zhou et al. cuts the one group all workflows make, and 12 sensors' readings
    # cross (33,600); workflows packed, refined, keeps each workflow with its sensors at a perfect
    # balance, and the two shared sensors send the other partitions only the partials of the
    # unions' 5 s slices, 3 a slice instead of 100 readings, one set for all the unions cut alike
    # on a partition (issue #44).
    assert "| 2 | 19,416 | 19,200 | 792 | 127,392 | 26,400 | 33,600 | 84.8% | 26.5% |" in md.read_text()


def test_naive_lines_say_when_the_naive_job_cannot_be_written(tmp_path):
    path = tmp_path / "w.ss"
    path.write_text("A = avg(S1, 1s, 1s);\nB = A * 2;\nC = max(B, 2s, 2s);\n")
    built = reporting.build([str(path)], None, 2, echo=lambda *_: None, sizes=(), sweep_counts=(16,))
    assert built.lines[0].naive is None and "window over an arithmetic result" in built.lines[0].naive_note
    assert "cannot be written" in reporting.markdown(built)


@pytest.mark.spark
def test_measured_shuffle_records(spark, tmp_path):
    """The compiled job shuffles each referenced reading once (plus the quarantined lines and one
    end-of-input marker per partition), in packets, then what goes to second operators. The naive
    job's windows aggregate partially before their shuffles, so it writes few shuffle records (its
    cost is elsewhere: each window re-reads the input and expands every reading into each window)."""
    write_readings(read_csv(SENSORS), tmp_path / "data", seconds=300, files=1, bad_lines=3)
    measured = reporting.measure(EXAMPLES, str(tmp_path / "data"), SENSORS, 2, tmp_path / "work",
                                 echo=lambda *_: None, warm_up=False)  # counts, not times: no warm-up run
    assert measured.referenced > 10_000
    assert measured.referenced <= measured.ours_raw_tuples <= measured.referenced + 3 + 2
    # Packets: a few per partition and Arrow batch, 20 bytes a reading before Spark compresses them.
    assert 0 < measured.ours_raw_records < 100
    assert 2 * measured.referenced < measured.ours_raw_bytes < 40 * measured.referenced
    assert measured.ours_raw_tuples <= measured.ours_crossing <= measured.ours_tuples
    assert 0 < measured.naive_records < measured.referenced
    # Hash by workflow: the same runtime and results, a reading copied to every partition reading it.
    assert measured.by_workflow_same is True
    assert measured.by_workflow_tuples >= measured.ours_raw_tuples
    assert 0 < measured.by_workflow_records < 100
    # What crossed between partitions is what the plan's model says, for ours and for hash by
    # workflow (tuples/minute x 5 minutes; the quarantined lines and markers come on top).
    from sensorscript.compiler import plan_workflows

    cost = plan_workflows([str(f) for f in EXAMPLES], SENSORS, 2)[0].cost
    assert measured.ours_crossing == pytest.approx(cost.ours * 5, rel=0.01)
    assert measured.by_workflow_tuples == pytest.approx(cost.naive_workflow_hash * 5, rel=0.01)
    # Hash by sensor id: the same results, a stage per level of the graph (bridge: 5), and every edge
    # a shuffle; the windows' tuples of the last minutes are what the per-minute model rounds away.
    assert measured.by_sensor_same is True and measured.by_sensor_stages == 5
    assert measured.by_sensor_tuples == pytest.approx(cost.naive_sensor_hash * 5, rel=0.01)
    assert measured.by_sensor_bytes > 2 * measured.ours_bytes
    assert measured.ours_crossing < measured.by_sensor_crossing < measured.by_sensor_tuples


@pytest.mark.spark
def test_measured_job_and_sweep_point_in_one_quiet_child_process(tmp_path):
    """What `sscript report --measure DATA --no-naive-run` builds (reporting.build, which the command
    calls), with a point of the n_s sweep too (20 s of 16 sensors at 20 Hz, 8 workflows sharing 8
    sensors, 4 partitions), run in the report's one child process whose chatter is filtered out: our
    plan, hash by workflow and hash by sensor id give the same results, the tuples that crossed per
    minute are what the model says, and report.md holds the measured job's row."""
    write_readings(read_csv(SENSORS), tmp_path / "data", seconds=60, files=1)
    said: list[str] = []
    built = reporting.build([EXAMPLES[0]], SENSORS, 2, str(tmp_path / "data"), tmp_path / "work", False,
                            echo=said.append, sizes=(1,), sweep_counts=(), sweep_seconds=20, sweep_shared_points=(8,))
    shown = "\n".join(said)
    assert "TransformWithStateInPandas" not in shown and "log4j" not in shown, shown
    assert "measured the job" in shown, shown
    assert built.measured is not None and built.by_sensors == []
    (point,), (model,) = [p.measured for p in built.by_shared], reporting.sweep("shared", (8,))
    assert point.same
    assert point.lower_bound == model.cost.lower_bound == 16 * 20 * 60
    assert point.ours == pytest.approx(model.cost.ours, rel=0.01)
    assert point.by_workflow == pytest.approx(model.cost.naive_workflow_hash, rel=0.01)
    assert point.by_sensor == pytest.approx(model.cost.naive_sensor_hash, rel=0.02)
    assert point.ours < point.by_workflow < point.by_sensor
    md, _ = reporting.write(built, tmp_path / "r")
    assert "| the compiled job: raw readings (one shuffle, in packets) |" in md.read_text()


def test_a_file_of_patterns_has_no_naive_job_and_a_file_of_comments_no_lines(tmp_path):
    """The summary divided by the script's lines, 0 for a file of comments (a ZeroDivisionError)."""
    patterns, comments = tmp_path / "alarms.ss", tmp_path / "notes.ss"
    patterns.write_text('A = pattern(a: "8TL3-N" -> b: "8WL3"+) within 1min;\n')
    comments.write_text("// to do: the deck's alarms\n")
    built = reporting.build([str(patterns)], None, 2, echo=lambda *_: None, sizes=(), sweep_counts=(16,))
    assert built.lines[0].naive is None and "would compute nothing" in built.lines[0].naive_note
    result = CliRunner().invoke(main, ["report", str(comments), "-o", str(tmp_path / "r"), "--generated", "1"])
    assert result.exit_code == 0 and result.exception is None, result.output
    assert "0 script lines" in result.output


def test_cli_report(tmp_path):
    result = CliRunner().invoke(main, ["report", EXAMPLES[0], "-o", str(tmp_path / "r"), "--generated", "1"],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "script lines" in result.output and (tmp_path / "r" / "report.html").exists()
