"""Functional tests of compile, explain, graph and sensors, run through the CLI (dbt-style)."""

import json

from click.testing import CliRunner

from sensorscript.cli import main
from tests.conftest import ROOT

BRIDGE = 'MD1Z = avg("8MD1-AZ", 10min, 5min);\nUNI = union("8MD2-A", "8MD3-A");\nMD23 = avg(UNI, 10min, 5min);\n'


def test_compile_writes_a_stable_plan(write_scripts, tmp_path):
    files = write_scripts({"a": BRIDGE + "OUT = MD1Z - MD23;", "b": BRIDGE + "DIFF = MD23 - MD1Z;"})
    runner = CliRunner()
    first = runner.invoke(main, ["compile", *files, "-o", str(tmp_path / "out1"), "-n", "2"])
    second = runner.invoke(main, ["compile", *files, "-o", str(tmp_path / "out2"), "-n", "2"])
    assert first.exit_code == 0 and second.exit_code == 0, first.output
    assert "3 shared" in first.output
    plan1 = (tmp_path / "out1" / "plan.json").read_text()
    assert plan1 == (tmp_path / "out2" / "plan.json").read_text()
    plan = json.loads(plan1)
    assert set(plan["workflows"]) == {"a", "b"}
    assert plan["workflows"]["a"]["outputs"].keys() == {"OUT"}
    assert sorted(plan["partitions"]["sensors"]) == ["8MD1-AZ", "8MD2-A", "8MD3-A"]
    assert "Shared computations" in (tmp_path / "out1" / "plan.txt").read_text()


def test_compile_errors_exit_1(write_scripts, tmp_path):
    (bad,) = write_scripts({"bad": "X = avg(S, 10min);"})
    result = CliRunner().invoke(main, ["compile", bad, "-o", str(tmp_path / "out")])
    assert result.exit_code == 1
    assert "bad.ss:1:5" in result.output and "1 error" in result.output


def test_explain_names_sharing_and_costs(write_scripts):
    files = write_scripts({"a": BRIDGE + "X = MD1Z + MD23;", "b": BRIDGE + "Y = MD23 * 2;"})
    result = CliRunner().invoke(main, ["explain", *files, "-n", "2"])
    assert result.exit_code == 0, result.output
    assert "MD1Z" in result.output and "<- a, b" in result.output
    assert "naive, hash by sensor id" in result.output and "lower bound" in result.output


def test_unknown_sensor_warning_with_registry(write_scripts, tmp_path):
    csv = tmp_path / "s.csv"
    csv.write_text("sensor_id,frequency_hz\n8MD1-AZ,50\n")
    files = write_scripts({"a": BRIDGE})
    result = CliRunner().invoke(main, ["explain", *files, "--sensors", str(csv)])
    assert result.exit_code == 0
    assert "sensor '8MD2-A' is not in the registry; planning with the default 20 Hz" in result.output
    assert "sensor 8MD1-AZ (50 Hz)" not in result.output  # not shared, but its frequency drives the load
    assert "partition" in result.output


def test_graph_drawings(tmp_path):
    examples = [str(p) for p in sorted((ROOT / "workflows").glob("*.ss"))]
    runner = CliRunner()
    for suffix in (".dot", ".svg", ".png"):
        out = tmp_path / f"dag{suffix}"
        result = runner.invoke(main, ["graph", *examples, "-o", str(out)])
        assert result.exit_code == 0, result.output
        assert out.stat().st_size > 100
    dot = (tmp_path / "dag.dot").read_text()
    assert "cluster_" in dot and "color=red" in dot  # workflows as clusters, shared nodes marked
    assert (tmp_path / "dag.svg").read_text().lstrip().startswith("<?xml")


def test_a_workflow_without_statements_is_drawn(tmp_path):
    """An empty DAG: max() of no columns raised a ValueError."""
    (tmp_path / "empty.ss").write_text("// nothing yet\n")
    result = CliRunner().invoke(main, ["graph", str(tmp_path / "empty.ss"), "-o", str(tmp_path / "dag.svg")])
    assert result.exit_code == 0 and result.exception is None, result.output
    assert (tmp_path / "dag.svg").read_text().lstrip().startswith("<?xml")


def test_sensors_import_and_list(tmp_path):
    db = tmp_path / "sensors.db"
    runner = CliRunner()
    result = runner.invoke(main, ["sensors", "import", str(ROOT / "workflows" / "sensors.csv"), "--db", str(db)])
    assert result.exit_code == 0 and "imported 12 sensor(s)" in result.output
    listed = runner.invoke(main, ["sensors", "list", "--db", str(db)])
    assert "8MD1-AZ" in listed.output and "12 sensor(s)" in listed.output
