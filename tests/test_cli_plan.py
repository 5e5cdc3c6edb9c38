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


# ------------------------------------------------------- one workflow's plan, and plan.txt at scale


def bridge_files(tmp_path, count: int, sensors: int = 300) -> tuple[list[str], str]:
    """`count` generated bridge workflows as files, and their sensor registry."""
    from sensorscript.registry import SensorRegistry
    from sensorscript.workload import bridge_workload

    workload = bridge_workload(count, sensors)
    folder = tmp_path / f"wf{count}"
    folder.mkdir()
    for name, text in workload.workflows.items():
        (folder / f"{name}.ss").write_text(text)
    SensorRegistry.create(tmp_path / f"sensors{count}.db").put(workload.sensors)
    return sorted(str(p) for p in folder.glob("*.ss")), str(tmp_path / f"sensors{count}.db")


def test_explain_one_workflow_names_its_statements_sharing_and_partition(write_scripts):
    files = write_scripts({"a": BRIDGE + "OUT = MD1Z - MD23;", "b": BRIDGE + "DIFF = MD23 - MD1Z;",
                           "c": 'OWN = max("8MD9-A", 1min, 1min);'})
    result = CliRunner().invoke(main, ["explain", *files, "-n", "2", "--workflow", "a"])
    assert result.exit_code == 0, result.output
    text = result.output
    assert text.startswith("Workflow a (a.ss): 4 statement(s), 4 computation(s), 3 of them shared")
    assert "Outputs: a.OUT" in text
    assert 'a.ss:1  MD1Z = avg("8MD1-AZ", 10min, 5min);' in text  # the script line itself
    assert "a.ss:4  OUT = MD1Z - MD23;" in text
    assert text.count("shared with 1 other workflow(s): b") == 3
    assert "its own: no other workflow computes it" in text  # OUT
    assert "avg of sensor 8MD1-AZ over 10min every 5min; partition " in text
    assert "8MD1-AZ        20 Hz, partition" in text and "read by 2 workflow(s)" in text
    assert "slices every 5min" in text  # the slices its windows are composed from
    assert "OWN" not in text and "8MD9-A" not in text  # nothing of the other workflows' own
    assert "grep -n 'a.ss:' OUT/job.py" in text


def test_explain_one_workflow_unknown_name_suggests_the_nearest(write_scripts):
    files = write_scripts({"pier_alarms": BRIDGE, "pier_report": BRIDGE, "bridge": BRIDGE, "wf01": BRIDGE,
                           "wf02": BRIDGE, "wf10": BRIDGE, "wf20": BRIDGE})
    runner = CliRunner()
    result = runner.invoke(main, ["explain", *files, "--workflow", "pier_alarm"])
    assert result.exit_code == 1
    assert "no workflow named 'pier_alarm' among the 7 given" in result.output
    assert "did you mean 'pier_alarms'?" in result.output
    assert "Traceback" not in result.output
    result = runner.invoke(main, ["explain", *files, "--workflow", "wf0"])  # the three nearest, closest first
    assert result.exit_code == 1 and "did you mean 'wf01', 'wf02' or 'wf10'?" in result.output
    result = runner.invoke(main, ["explain", *files, "--workflow", "a.ss"])
    assert result.exit_code == 1 and "did you mean" not in result.output


def test_explain_one_workflow_of_hundreds_summarises_who_shares(tmp_path):
    """A computation many workflows share names a few of them and counts the rest; the edges that
    cross partitions are the ones of this workflow's computations, a line per stream forwarded."""
    from sensorscript.compiler import plan_workflows

    files, sensors = bridge_files(tmp_path, 300)
    plan, _, _ = plan_workflows(files, sensors, 2)
    users = {n.id: sorted({o.workflow for o in n.origins}) for n in plan.graph.shared()}
    popular = max(users, key=lambda node_id: len(users[node_id]))
    assert len(users[popular]) > 20
    name = users[popular][0]
    crossing = next(c for c in plan.partitions.crossings if c.kind == "derived")
    crosser = plan.graph.node(crossing.source).origins[0].workflow
    runner = CliRunner()
    result = runner.invoke(main, ["explain", *files, "--sensors", sensors, "--workflow", name])
    assert result.exit_code == 0, result.output
    others = users[popular][1:]
    assert f"shared with {len(others)} other workflow(s): {', '.join(others[:8])} and {len(others) - 8} more" \
        in result.output
    assert all(len(line) < 200 for line in result.output.splitlines())
    result = runner.invoke(main, ["explain", *files, "--sensors", sensors, "--workflow", crosser])
    assert result.exit_code == 0, result.output
    edges = result.output.split("however many computations there read it):\n")[1].split("\n\n")[0]
    assert f"({crossing.kind}, partition {crossing.from_partition} -> {crossing.to_partition})" in edges
    own = {plan.graph.node(crossing.source).origins[0].stream}
    assert any(line.strip().split(" -> ")[0] in own for line in edges.splitlines())
    # One line per stream and destination partition, as the job forwards it, its readers named there.
    keys = [(line.strip().split(" -> ")[0], line.rsplit(" (", 1)[1]) for line in edges.splitlines()]
    assert len(keys) == len(set(keys))


def test_plan_txt_stays_a_summary_however_many_workflows(tmp_path):
    """plan.txt lists at most 50 items of each kind, the most shared computations first, and names
    at most 8 workflows a line: its length does not grow with the number of workflows."""
    from sensorscript.compiler import plan_workflows
    from sensorscript.partition.explain import explain

    sizes = {}
    for count in (100, 400):
        files, sensors = bridge_files(tmp_path, count)
        text = explain(plan_workflows(files, sensors, 2)[0])
        lines = text.splitlines()
        assert all(len(line) < 200 for line in lines), max(lines, key=len)
        sizes[count] = len(lines)
        shared = [line for line in lines if " <- " in line]
        counts = [int(line.split(" <- ")[1].split(" workflows:")[0]) if " workflows:" in line
                  else len(line.split(" <- ")[1].split(", ")) for line in shared]
        assert counts == sorted(counts, reverse=True)  # the most shared first
    assert sizes[100] <= 200 and sizes[400] <= 200
