"""Patterns on real local Spark, against the reference matcher: the bundled pier workflows and
random patterns, over several micro-batches and partitions, every sink's match columns."""

from __future__ import annotations

import importlib.util
import json
import os
import random
import sqlite3
import subprocess
import sys

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings

from sensorscript.codegen.program import programs
from sensorscript.compiler import compile_workflows
from sensorscript.registry import Sensor, read_csv
from sensorscript.runtime.control.run_loop import JobFailed
from sensorscript.running import run_local
from sensorscript.workload import write_readings
from tests.cep_harness import reference_rows, same_rows
from tests.conftest import ROOT
from tests.differential import write_replay, write_scripts
from tests.pattern_strategies import pattern_lines, pattern_scripts

pytestmark = pytest.mark.spark

PIER = [ROOT / "workflows" / n for n in ("pier_alarms.ss", "pier_report.ss")]


def run_batches(spark, tmp_path, files, batches, partitions=2, delay_ms=0, sink=None, sensors=None):
    out = tmp_path / "out"
    compiled = compile_workflows([str(f) for f in files], out, sensors, partitions, watermark=f"fixed:{delay_ms}")
    data = write_replay(tmp_path / "data", batches)
    summary = run_local(out, str(data), True, sink, spark=spark, echo=lambda *_: None,
                        max_files_per_trigger=1 if len(batches) > 1 else None)
    return compiled, summary, out


def sqlite_rows(out):
    db = sqlite3.connect(out / "results.db")
    try:
        return [tuple(r) for r in db.execute("SELECT stream, ts, window_start, window_end, value, start_ts, end_ts, "
                                             "events FROM results")]
    finally:
        db.close()


def test_the_pier_workflows_agree_with_the_reference(spark, tmp_path):
    sensors = read_csv(ROOT / "workflows" / "sensors.csv")
    pier = [s for s in sensors if s.sensor_id.startswith(("8TL3", "8WL3"))]
    write_readings(pier, tmp_path / "gen", seconds=1800, files=1, disorder_ms=300)
    lines = (tmp_path / "gen" / "readings-000.csv").read_text().splitlines()
    batches = [lines[i:i + len(lines) // 3 + 1] for i in range(0, len(lines), len(lines) // 3 + 1)]
    compiled, summary, out = run_batches(spark, tmp_path, PIER, batches, partitions=2, delay_ms=1000,
                                         sensors=str(ROOT / "workflows" / "sensors.csv"))
    workflows = {f.stem: f.read_text() for f in PIER}
    expected, evaluation = reference_rows(workflows, batches, 1000, compiled.plan)
    rows = sqlite_rows(out)
    same_rows(rows, expected)
    streams = {r[0] for r in rows}
    assert {"pier_alarms.SURGE", "pier_alarms.FLOOD", "pier_alarms.JUMP", "pier_report.SURGES_PER_HOUR"} <= streams
    assert summary.matches == sum(1 for r in rows if r[7] is not None) > 20
    assert (out / "selectivity.json").exists()  # the measured pass rates, for the next compile
    # JUMP is partitioned by sensor: it runs on both partitions, each for its own tilt meter (the
    # two tilt meters are placed apart), and each piece where its meter's readings land.
    jump = next(n for n in compiled.plan.patterns if compiled.plan.graph.node(n).label == "JUMP")
    placement = compiled.plan.partitions.node_partition
    meters = {f"sensor:{s}": placement[f"sensor:{s}"] for s in ("8TL3-N", "8TL3-S")}
    assert sorted(meters.values()) == [0, 1]
    assert compiled.plan.partitions_of(jump) == (0, 1)
    pieces = compiled.plan.pieces[jump]
    assert set(pieces) == set(meters) and all(placement[pieces[m]] == p for m, p in meters.items())
    event = json.loads(next(r[7] for r in rows if r[0] == "pier_alarms.FLOOD"))
    assert [e["var"] for e in event] == ["w", "t"] and event[0]["sensor"] == "WATER"


@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
@given(pattern_scripts(), pattern_lines())
def test_random_patterns_on_spark(spark, tmp_path_factory, scripts, lines):
    tmp_path = tmp_path_factory.mktemp("random")
    files = write_scripts(tmp_path, scripts)
    rng = random.Random(len(lines))
    cuts = sorted(rng.randint(0, len(lines)) for _ in range(2))
    batches = [lines[a:b] for a, b in zip([0, *cuts], [*cuts, len(lines)])]
    compiled, _, out = run_batches(spark, tmp_path, files, batches, partitions=2, delay_ms=10)
    expected, _ = reference_rows(scripts, batches, 10, compiled.plan)
    same_rows(sqlite_rows(out), expected)


def test_match_columns_in_csv_and_parquet_sinks(spark, tmp_path):
    scripts = {"w": "P = pattern(a: A -> b: B) where b.value > a.value within 100 yield b.value - a.value;\n"
                    "N = count(A, 50, 50);"}
    files = write_scripts(tmp_path, scripts)
    lines = ["A,1,1", "B,5,3", "A,10,2", "B,20,1", "B,30,4"]
    for kind in ("csv", "parquet"):
        target = tmp_path / kind / ("results.csv" if kind == "csv" else "results")
        run_batches(spark, tmp_path / kind, files, [lines], partitions=1, sink=f"{kind}:{target}") \
            if (tmp_path / kind).mkdir(parents=True) is None else None
        frame = pd.read_csv(target) if kind == "csv" else pd.read_parquet(target)
        assert list(frame.columns) == ["stream", "ts", "window_start", "window_end", "value", "version",
                                       "start_ts", "end_ts", "events", "plan_version"]
        assert set(frame["plan_version"]) == {1}
        matches = frame[frame["stream"] == "w.P"].sort_values("ts")
        assert matches["value"].tolist() == [2.0, 3.0, 2.0] and matches["start_ts"].tolist() == [1, 1, 10]
        assert json.loads(matches["events"].iloc[0])[1] == {"var": "b", "ts": 5, "value": 3.0, "sensor": "B"}
        others = frame[frame["stream"] == "w.N"]
        assert others["events"].isna().all()


# The example of docs/OPERATORS.md.
USER_OPERATORS = """\
from sensorscript.runtime.state.cep.operators import BinaryOperator, UnaryOperator, register


@register("soon_after")
class SoonAfter(BinaryOperator):
    \"\"\"b at most 5 s after a.\"\"\"

    def Q(self, left, right):
        return left.end < right.start <= left.end + 5_000


@register("rising")
class Rising(UnaryOperator):
    \"\"\"Keeps the events whose value is above the previous one of the same sensor.\"\"\"

    def Q(self, state, event):
        return state is not None and event.value > state

    def Z(self, state, event):
        return event.value
"""


def _user_operators(path):
    """The operators a user's file defines, by name, for the oracle (loaded as user code, not through the product)."""
    spec = importlib.util.spec_from_file_location("users_operators_for_the_oracle", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return {"soon_after": module.SoonAfter(), "rising": module.Rising()}


def test_user_operators_reach_the_workers_of_every_stage(spark, tmp_path):
    """A user's operators (docs/OPERATORS.md) are registered in Spark's Python workers, which cannot
    import the file that defines them: in the first stage and in the second (c.R reads a sensor whose
    readings the plan forwards from the other partition)."""
    (tmp_path / "ops.py").write_text(USER_OPERATORS)
    scripts = {"a": "P = pattern(a: rising(S1) ->[soon_after] b: S2) within 10s strategy next;\n",
               "b": "Q = pattern(x: rising(S3) -> y: S4) where y.value > x.value + 1 within 2s strategy next;\n",
               "c": "R = pattern(m: rising(S5) ->[soon_after] n: S6) within 10s strategy next emit first;\n"}
    files = write_scripts(tmp_path, scripts)
    sensors = [Sensor(f"S{i}", 10.0 if i > 4 else 1.0, "test") for i in range(1, 7)]
    (tmp_path / "sensors.csv").write_text("sensor_id,frequency_hz,type\n"
                                          + "".join(f"{s.sensor_id},{s.frequency_hz},{s.type}\n" for s in sensors))
    write_readings(sensors, tmp_path / "gen", seconds=60, files=1)
    lines = (tmp_path / "gen" / "readings-000.csv").read_text().splitlines()
    batches = [lines[: len(lines) // 2], lines[len(lines) // 2:]]
    out = tmp_path / "out"
    compiled = compile_workflows(files, out, str(tmp_path / "sensors.csv"), 2, operators=[str(tmp_path / "ops.py")])
    stages = {program.stage for program in (p for ps in programs(compiled.plan) for p in ps if p is not None)
              for node in program.nodes if hasattr(node, "tree")}
    assert stages == {1, 2}  # patterns with user operators in both stages
    data = write_replay(tmp_path / "data", batches)
    run_local(out, str(data), True, None, spark=spark, echo=lambda *_: None, max_files_per_trigger=1)
    expected, _ = reference_rows(scripts, batches, 0, compiled.plan, _user_operators(tmp_path / "ops.py"))
    rows = sqlite_rows(out)
    same_rows(rows, expected)
    assert {r[0] for r in rows} == {"a.P", "b.Q", "c.R"}


def test_an_operator_that_raises_stops_the_job_with_its_error_in_one_sentence(spark, tmp_path):
    """A user's operator that raises: the run stops and says which error, and where in the user's
    file, in one line (not a line of its source, not Spark's account)."""
    (tmp_path / "ops.py").write_text(
        "from sensorscript.runtime.state.cep.operators import UnaryOperator, register\n\n\n"
        "@register('fragile')\n"
        "class Fragile(UnaryOperator):\n"
        "    def Q(self, state, event):\n"
        "        if event.value > 5:\n"
        "            raise ValueError(f'cannot judge {event.value}')\n"
        "        return True\n")
    files = write_scripts(tmp_path, {"w": "P = pattern(a: fragile(S1) -> b: S1) within 1min;\n"})
    out = tmp_path / "out"
    compile_workflows(files, out, None, 1, operators=[str(tmp_path / "ops.py")])
    data = write_replay(tmp_path / "data", [["S1,1000,1", "S1,2000,7"]])
    with pytest.raises(JobFailed) as failed:
        run_local(out, str(data), True, None, spark=spark, echo=lambda *_: None)
    message = str(failed.value)
    assert "\n" not in message and "raise ValueError" not in message, message
    assert message.endswith(f"ValueError: cannot judge 7.0 (at {out / 'operators' / 'ops.py'}, line 8, in Q)"), message


def _spike_then_higher(ts, value, within_ms: int) -> set[tuple[int, int]]:
    """The user's reading of `a -> b where a.value > 9 and b.value > a.value + 0.95 within 1s
    strategy next partition by sensor` over one sensor's readings in time order: each reading above 9
    takes the first later one within the window that is higher by more than 0.95. (start, end)."""
    found = set()
    for i in range(len(ts)):
        if value[i] > 9:
            for j in range(i + 1, len(ts)):
                if ts[j] - ts[i] >= within_ms:
                    break
                if value[j] > value[i] + 0.95:
                    found.add((int(ts[i]), int(ts[j])))
                    break
    return found


def test_a_long_batch_of_next_matches_in_capped_worker_memory(tmp_path):
    """Issue #38: 8 sensors x 20,000 readings in one micro-batch (a day caught up at once) through
    `sscript run --once`, strategy next, with the Python workers' address space capped at 1.5 GB
    (spark.executor.pyspark.memory, as a cluster would): the matcher of before paired every run with
    every later candidate of its key (400 million pairs here) and died; now the batch is swept in
    slices. Its own Spark (the cap is set when a JVM starts), in a child process."""
    import numpy as np

    sensors, count = 8, 20_000
    names = [f"U{i:02d}" for i in range(sensors)]
    script = ("U = union(" + ", ".join(f'"{n}"' for n in names) + ");\n"
              "P = pattern(a: U -> b: U) where a.value > 9 and b.value > a.value + 0.95 within 1s strategy next "
              "partition by sensor;\n")
    (tmp_path / "w.ss").write_text(script)
    rng = np.random.default_rng(38)
    ts = np.arange(count, dtype=np.int64) * 100 + 1_700_000_000_000
    values = {name: np.round(rng.random(count) * 10, 4) for name in names}
    data = tmp_path / "data"
    data.mkdir()
    with open(data / "readings.csv", "w") as f:
        for i in range(count):
            f.writelines(f"{name},{ts[i]},{values[name][i]}\n" for name in names)
    out = tmp_path / "out"
    environment = {**os.environ, "PYSPARK_SUBMIT_ARGS": "--conf spark.executor.pyspark.memory=1536m pyspark-shell"}
    for arguments in (["compile", str(tmp_path / "w.ss"), "-o", str(out), "--partitions", "2"],
                      ["run", str(out), "--input", str(data), "--once"]):
        done = subprocess.run([sys.executable, "-m", "sensorscript.cli", *arguments], env=environment,
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    found = {(s, e) for s, e in sqlite3.connect(out / "results.db").execute(
        "SELECT start_ts, end_ts FROM results WHERE stream = 'w.P'")}
    expected = set().union(*(_spike_then_higher(ts, values[name], 1000) for name in names))
    assert len(expected) > 20 and found == expected
