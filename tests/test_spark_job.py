"""The compiled job on real local Spark, against the reference evaluator (differential tests)."""

import json
import random
import sqlite3
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from sensorscript.codegen.buckets import bucket_keys
from sensorscript.compiler import compile_workflows
from sensorscript.parser import load
from oracles.streams import evaluate
from sensorscript.runtime.ingest import records
from sensorscript.running import run_local
from sensorscript.workload import write_readings
from sensorscript.registry import read_csv
from tests.conftest import ROOT
from tests.differential import (assert_read_as_records, assert_same, expected_rows, result_rows, write_replay,
                                write_scripts)
from tests.strategies import workflows_and_lines

pytestmark = pytest.mark.spark

EXAMPLES = [ROOT / "workflows" / n for n in ("bridge.ss", "bridge_limits.ss", "deck_vibration.ss")]


def compile_and_run(spark, tmp_path: Path, files, batches: list[list[str]], partitions=2, sink=None,
                    sensors=None):
    out = tmp_path / "out"
    compiled = compile_workflows([str(f) for f in files], out, sensors, partitions)
    data = write_replay(tmp_path / "data", batches)
    summary = run_local(out, str(data), True, sink, spark=spark, echo=lambda *_: None,
                        max_files_per_trigger=1 if len(batches) > 1 else None)
    return compiled, summary, out


def test_examples_agree_with_the_reference_row_for_row(spark, tmp_path):
    sensors = read_csv(ROOT / "workflows" / "sensors.csv")
    write_readings(sensors, tmp_path / "gen", seconds=900, files=1, bad_lines=5)
    lines = (tmp_path / "gen" / "readings-000.csv").read_text().splitlines()
    compiled, summary, out = compile_and_run(spark, tmp_path, EXAMPLES, [lines],
                                             sensors=str(ROOT / "workflows" / "sensors.csv"))
    evaluation = evaluate(load([str(f) for f in EXAMPLES]).workflows, [lines])
    assert_same(result_rows(out), expected_rows(evaluation))
    assert summary.quarantined == len(evaluation.quarantine) == 5
    assert summary.results == len(evaluation.rows) > 100
    db = sqlite3.connect(out / "results.db")
    assert sorted(db.execute("SELECT raw, reason FROM quarantine")) == sorted(evaluation.quarantine)


# The query of a job.py compiled before stage 0 read bytes (f15b3a5's template, word for word).
_OLD_QUERY = """    lines = source.read_lines(spark, input_path, max_files_per_trigger)
    records = source.parse(lines)
    keyed = assign_partitions(records, job)
    if control_path is not None:
        keyed = keyed.unionByName(control_rows(source.read_lines(spark, control_path), job))
"""


def test_a_job_compiled_before_stage_0_read_bytes_still_runs(spark, tmp_path):
    """A job compiled by the previous sscript (and the versions an update wrote) runs on this runtime
    without being compiled again, with the same results."""
    import re

    sensors = read_csv(ROOT / "workflows" / "sensors.csv")
    write_readings(sensors, tmp_path / "gen", seconds=120, files=1, bad_lines=3)
    lines = (tmp_path / "gen" / "readings-000.csv").read_text().splitlines()
    out = tmp_path / "out"
    compile_workflows([str(f) for f in EXAMPLES], out, str(ROOT / "workflows" / "sensors.csv"), 2)
    job = (out / "job.py").read_text()
    old, count = re.subn(r"    inputs = source\.read_input.*?control_rows\(source\.read_input\(spark, control_path\), job\)\)\n",
                         lambda _: _OLD_QUERY, job, flags=re.S)
    assert count == 1 and "read_input" not in old
    (out / "job.py").write_text(old)
    data = write_replay(tmp_path / "data", [lines[: len(lines) // 2], lines[len(lines) // 2:]])
    summary = run_local(out, str(data), True, None, spark=spark, echo=lambda *_: None, max_files_per_trigger=1)
    evaluation = evaluate(load([str(f) for f in EXAMPLES]).workflows, [lines[: len(lines) // 2], lines[len(lines) // 2:]])
    assert_same(result_rows(out), expected_rows(evaluation))
    assert summary.quarantined == 3


def test_late_readings_across_micro_batches_and_partitions(spark, tmp_path):
    rng = random.Random(5)
    scripts = {"w": "A = avg(S1, 1000, 500);\nB = max(S2, 2000, 1000);\nC = union(S1, S3);\n"
                    "D = sum(C, 1000, 1000);\nE = A - B;\nF = D / B;"}
    files = []
    for name, text in scripts.items():
        (tmp_path / f"{name}.ss").write_text(text)
        files.append(tmp_path / f"{name}.ss")
    batches = []
    for b in range(3):
        batch = [f"S{rng.randint(1, 3)},{b * 5000 + rng.randint(-3000, 5000)},{rng.randint(-8, 8) / 4}"
                 for _ in range(200)]
        batches.append(batch)
    compiled, summary, out = compile_and_run(spark, tmp_path, files, batches, partitions=2)
    partition_of = compiled.plan.partitions.sensor_partition
    evaluation = evaluate(load([str(f) for f in files]).workflows, batches, 0, partition_of)
    assert summary.late == evaluation.late > 0
    assert_same(result_rows(out), expected_rows(evaluation))


@pytest.mark.parametrize("watermark", ["fixed:0", "adaptive:2s"])
def test_stage_0_sends_slice_partials_of_on_time_readings(spark, tmp_path, watermark):
    """Issue #44: from the second micro-batch on, stage 0 sends the slice partials of the examples'
    sensors that only windows read (on every partition, forwarded to another's second stage or
    not), not their on-time readings; late readings, and every reading of the first batch, go as
    readings. The results and the late count equal the reference's over all the readings. Under
    the policy adaptive, which observes every reading, readings cross."""
    sensors = read_csv(ROOT / "workflows" / "sensors.csv")
    write_readings(sensors, tmp_path / "gen", seconds=600, files=1)
    lines = (tmp_path / "gen" / "readings-000.csv").read_text().splitlines()
    rng = random.Random(44)
    batches = [lines[i * len(lines) // 5:(i + 1) * len(lines) // 5] for i in range(5)]
    for b in range(1, 5):  # 30 readings of each batch held back to the next: late ones under fixed:0
        held = set(rng.sample(range(len(batches[b - 1])), 30))
        batches[b] += [batches[b - 1][i] for i in sorted(held)]
        batches[b - 1] = [line for i, line in enumerate(batches[b - 1]) if i not in held]
    files = [ROOT / "workflows" / n for n in ("bridge.ss", "bridge_limits.ss", "deck_vibration.ss", "pier_report.ss")]
    out = tmp_path / "out"
    compiled = compile_workflows([str(f) for f in files], out, str(ROOT / "workflows" / "sensors.csv"), 2,
                                 watermark=watermark)
    summary = run_local(out, str(write_replay(tmp_path / "data", batches)), True, None, spark=spark,
                        echo=lambda *_: None, max_files_per_trigger=1)
    readings = summary.readings  # (the lines are readings, a header and readings of sensors no workflow reads)
    assert readings + summary.unread + summary.skipped == sum(len(b) for b in batches) and summary.results > 100
    if watermark == "fixed:0":
        evaluation = evaluate(load([str(f) for f in files]).workflows, batches, 0,
                              compiled.plan.partitions.sensor_partition)
        assert_same(result_rows(out), expected_rows(evaluation))
        assert summary.late == evaluation.late > 0
        # Batches 1-4 hold 4/5 of the readings; the sensors summed (all but the tilt meters, which a
        # pattern reads) are 96 % of them at their frequencies: most readings come as partials.
        assert summary.summed > readings // 2
        assert summary.summary_rows < summary.summed // 50
    else:  # (the run still publishes its watermarks: a later run under fixed must not trust older ones)
        assert summary.summed == summary.summary_rows == 0
        entries = [json.loads(f.read_text()) for f in (out / "checkpoint" / "watermarks").rglob("*.json")]
        assert entries and {e["spec"] for e in entries} == {"adaptive:2s"}


def test_the_naive_placements_give_the_same_results(spark, tmp_path):
    """The naive placements the report measures. Hash by workflow: each workflow whole on the
    partition of its name's hash (north, south -> 0; deck, pier -> 1), a sensor's readings copied
    to every partition that hosts a reader. Hash by sensor id: a stage per level of the graph,
    every edge a shuffle. Same results as our plan and the reference; copies and forwards counted."""
    from sensorscript.codegen.placements import by_sensor, by_workflow
    from sensorscript.runtime.plan.loading import load_job
    from sensorscript.runtime.control.run_loop import run
    from sensorscript.runtime.control.run_options import RunSettings

    scripts = {"north": "A = avg(S1, 1000, 500);\nU = union(S1, S2);\nB = max(U, 2000, 1000);\nC = A - B;",
               "south": "A = avg(S1, 1000, 500);\nD = min(S3, 1000, 1000);",
               "deck": "A = avg(S1, 1000, 500);\nE = sum(S2, 1000, 1000);\nF = A * E;",
               "pier": "G = count(S4, 3000, 1000);"}
    files = write_scripts(tmp_path, scripts)
    rng = random.Random(7)
    lines = [f"S{rng.randint(1, 4)},{rng.randint(0, 20_000)},{rng.randint(-8, 8) / 4}" for _ in range(2_000)]
    lines += ["S1,not-a-time,1.0"]
    compiled, ours, out = compile_and_run(spark, tmp_path, files, [lines], partitions=2)
    module = load_job(out)
    workflows = load(files).workflows
    placed = by_workflow(module.JOB, workflows, None)
    assert placed.replicas == {"S1": (1,), "S2": (1,)}  # read on both sides
    assert [p.partition for p in placed.first_stage] == [0, 1] and not placed.has_second_stage
    naive_out = tmp_path / "by-workflow"
    summary = run(placed, module.build_query, RunSettings(out=naive_out, input=str(tmp_path / "data"), once=True),
                  spark, echo=lambda *_: None)
    expected = expected_rows(evaluate(workflows, [lines]))
    assert_same(result_rows(out), expected)
    assert_same(result_rows(naive_out), expected)
    counts = {s: sum(line.startswith(f"{s},") for line in lines[:-1]) for s in ("S1", "S2", "S3", "S4")}
    assert ours.readings == sum(counts.values())
    assert summary.readings == sum(counts.values()) + counts["S1"] + counts["S2"]
    assert summary.quarantined == ours.quarantined == 1
    # Hash by sensor id: S1 -> avg, union -> max -> (A - B); S2 -> union, sum -> (A * E).
    placed = by_sensor(module.JOB, compiled.plan)
    assert [n for n, _ in placed.stages_after_first()] == [2, 3, 4]
    by_sensor_out = tmp_path / "by-sensor"
    summary = run(placed, module.build_query, RunSettings(out=by_sensor_out, input=str(tmp_path / "data"), once=True),
                  spark, echo=lambda *_: None)
    assert_same(result_rows(by_sensor_out), expected)
    assert summary.readings == sum(counts.values())  # each reading once, to its sensor's hash
    assert summary.forwarded > counts["S1"] + counts["S2"]  # the union's raw inputs, then derived tuples


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                               HealthCheck.function_scoped_fixture])
@given(workflows_and_lines())
# Found by hypothesis: a second stage whose watermark heartbeat (+2^63-1 at the end of the
# input) went through a float column and came back as 2^63.
@example(({"w0": "X0 = avg(S0, 1000, 1000);\nX1 = avg(S0, 1000, 1000);\n",
           "w1": "X0 = S2;\nX1 = avg(S0, 1000, 1000);\nX2 = avg(S0, 1000, 1000);\nX3 = avg(X1, 1000, 6000);\n"
                 "X4 = (0.5 + X3);\nX5 = union(S2, X2);\n",
           "w2": "X0 = sum(S3, 10s, 6000);\nX1 = union(S4, S3);\nX2 = avg(X1, 1s, 5_000);\n"
                 "X3 = union(S1, X2, S3);\nX4 = (0.5 + S3);\nX5 = union(S2, S4);\n"},
          ["S1,14596,-238.5", '{"sensor_id": "S4", "ts": 14596, "value": false}', "S0,8738,0"]))
def test_random_workflows_agree_with_the_reference(spark, tmp_path_factory, example):
    scripts, lines = example
    tmp_path = tmp_path_factory.mktemp("random")
    files = write_scripts(tmp_path, scripts)
    compiled, summary, out = compile_and_run(spark, tmp_path, files, [lines], partitions=2)
    evaluation = evaluate(load(files).workflows, [lines])
    assert_same(result_rows(out), expected_rows(evaluation))
    assert summary.quarantined == len(evaluation.quarantine)


TRICKY_LINES = [
    "S1,1000,2.5", "  S1 , 1000 , 2.5 ", "S1,1000,true", "S1,1000,FALSE", "S1,+12,-0.5", "S1,1000,1e-3",
    "S1,1000,.5", "S1,1000,5.", "S1,1.5,2", "S1,abc,2", "S1,1000,abc", "S1,1000,nan", "S1,1000,inf",
    "S1,1000,1e999", ",1000,1", "S1,1000", "S1,1000,1,2", "sensor_id,ts,value", "", "   ", "S1,1000,2\r",
    '{"sensor_id": "S1", "ts": 12, "value": 1.5}', '{"sensor_id": "S1", "ts": "12", "value": "2"}',
    '{"sensor_id": "S1", "ts": 12, "value": true}', '{"sensor_id": "S1", "ts": 1.0, "value": 1}',
    '{"sensor_id": "S1", "ts": 12}', '{"sensor_id": "S1", "ts": 12, "value": null}',
    '{"sensor_id": "S1", "ts": 12, "value": [1]}', '{"sensor_id": "S1", "ts": 12, "value": {"a": 1}}',
    '{"sensor_id": "S1", "ts": 12, "value": NaN}', '{not json', '{"sensor_id": "", "ts": 1, "value": 1}',
    "S1,99999999999999999999,1", "S1,-5,1",
]


def test_stage_0_reads_by_the_record_rules(tmp_path):
    assert_read_as_records("\n".join(TRICKY_LINES).encode(), tmp_path)



# Fields built from the characters the parser's checks turn on: signs, points, exponents,
# blanks, booleans, and stray letters, so that lines fall on both sides of its fast path.
_FIELD = st.lists(st.sampled_from(["0", "7", "12", ".", "+", "-", "e", "E", " ", "\t", "\r", "true", "False",
                                   "x", "nan", "Inf", "9" * 19, ","]), max_size=5).map("".join)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(st.tuples(st.sampled_from(["S1", " S2", "", "S 3"]),
                                st.one_of(st.sampled_from(["1000", "+12", "-7", " 70\t", "1.0", "1e3"]), _FIELD),
                                st.one_of(st.sampled_from(["2.5", "true", "FALSE", "1d", "1f", "+.5", "5.", "-0",
                                                           "Infinity", "NaN", "0x10", "1.2.3", "+-1", "1e-3"]),
                                          _FIELD)).map(",".join), min_size=1, max_size=60))
def test_stage_0_reads_random_lines_by_the_record_rules(tmp_path, lines):
    assert_read_as_records("\n".join(lines).encode(), tmp_path)


def test_stage_0_takes_exactly_the_referenced_ids_and_counts_the_others(spark, tmp_path):
    """The Packer's lookup is the job's filter to the sensors its workflows read: exactly those ids
    (not one differing by case, quoting, an escape or a blank) go on; the others are counted."""
    import numpy as np

    from sensorscript.runtime.ingest.packets import assign_partitions
    from sensorscript.runtime.plan.program import Job

    referenced = ["8MD1-AZ", "it's", "back\\slash", "tab\tin", "ünï cödé", "a,b", "' OR 1=1 --", "\\'", 'q"uote']
    others = ["8MD1-az", "its", "back\\\\slash", "'", "\\", "a", "b", "8MD1-AZ\x00", '"8MD1-AZ"', "8MD1-AZ,"]
    job = Job("t", ("w",), {s: (code, 0) for code, s in enumerate(referenced)}, (), (), bucket_keys(1))
    # CSV where an id can be written so, JSON where it holds a comma; a blank line and a bad line.
    lines = [json.dumps({"sensor_id": s, "ts": 1000 + i, "value": i}) if "," in s else f"{s},{1000 + i},{i}"
             for i, s in enumerate(referenced + others)] + ["", ",1,1"]
    data = "\n".join(lines).encode()
    (tmp_path / "readings.csv").write_bytes(data)
    # From a file (its path), and as one Kafka value.
    frame = spark.createDataFrame([(str(tmp_path / "readings.csv"), len(data), None), (None, None, data)],
                                  "path string, length long, value binary")
    packed = assign_partitions(frame, job).collect()
    codes = np.concatenate([np.frombuffer(r.code, np.int32) for r in packed if r.code is not None])
    assert sorted(codes) == sorted(list(range(len(referenced))) * 2)
    assert sum(r.unread for r in packed) == len(others) * 2 and sum(r.skipped for r in packed) == 2
    assert [(r.raw, r.reason) for r in packed if r.reason is not None] == [(",1,1", "empty sensor_id")] * 2


def test_stage_0_reads_a_file_larger_than_its_block_a_block_at_a_time(spark, tmp_path):
    """A file of 1.5 MB read in blocks of 64 KiB (through Spark, as the job reads it) gives what it gives
    read whole; no block holds more than 64 KiB and the rest of its last line."""
    import numpy as np

    from sensorscript.runtime.ingest.packets import assign_partitions
    from sensorscript.runtime.ingest.source import blocks
    from sensorscript.runtime.plan.program import Job

    rng = random.Random(26)
    sensors = [f"S{i}" for i in range(40)]
    lines = [f"{rng.choice(sensors)},{1000 + i},{rng.uniform(-5, 5):.4f}" for i in range(80_000)]
    lines[1_000] = "S1,5," + "9" * 200_000  # a line longer than the block (quarantined)
    lines[40_000] = "\r"  # and a line break of \r\n that the cuts may split
    data = ("\n".join(lines) + "\n").encode()
    path = tmp_path / "big.csv"
    path.write_bytes(data)
    assert len(data) > 1_500_000
    longest = max(len(line) for line in data.splitlines(keepends=True))
    assert all(len(block) <= 64 * 1024 + longest for block in blocks(str(path), len(data), 64 * 1024))
    assert b"".join(blocks(str(path), len(data), 64 * 1024)) == data
    job = Job("t", ("w",), {s: (code, code % 2) for code, s in enumerate(sensors)}, (), (), bucket_keys(2))
    frame = spark.createDataFrame([(str(path), len(data), None)], "path string, length long, value binary")

    def readings(block_bytes):
        packed = assign_partitions(frame, job, block_bytes).collect()
        codes = np.concatenate([np.frombuffer(r.code, np.int32) for r in packed if r.code])
        stamps = np.concatenate([np.frombuffer(r.ts, np.int64) for r in packed if r.ts])
        values = np.concatenate([np.frombuffer(r.value, np.float64) for r in packed if r.value])
        rejected = [(r.raw, r.reason) for r in packed if r.reason is not None]
        return sorted(zip(codes.tolist(), stamps.tolist(), values.tolist())), rejected, sum(r.skipped for r in packed)

    small, whole = readings(64 * 1024), readings(16 << 20)
    assert small == whole
    assert len(small[0]) == len(lines) - 2 and small[1] == [(lines[1_000], records.REASON_VALUE)] and small[2] == 1


def test_stage_0_archives_the_readings_no_workflow_reads_by_sensor_id(spark, tmp_path):
    """Late policy correct: the readings stage 0 drops (sensors no workflow reads) are archived by
    sensor id, each once, exactly as read (ids any string), under the micro-batch's id; the read ones
    go on (stage 1 archives them). archive.read gives them back under a code once a job reads them."""
    import dataclasses

    import numpy as np

    from sensorscript.runtime.ingest import archive
    from sensorscript.runtime.ingest.packets import assign_partitions
    from sensorscript.runtime.plan.program import Job

    referenced = ["8MD1-AZ", "it's"]
    others = ["8MD1-az", "ünï cödé", "a,b", "' OR 1=1 --", "8MD1-AZ\x00"]
    job = Job("t", ("w",), {s: (code, 0) for code, s in enumerate(referenced)}, (), (), bucket_keys(1))
    job = dataclasses.replace(job, archive=str(tmp_path / archive.FOLDER))
    hour = archive.HOUR_MS
    lines = [(s, hour * (i % 3) + i, float(i), None, None) for i, s in enumerate(referenced + others * 3)]
    files = []
    for half in (0, 1):  # two files, read by two tasks
        path = tmp_path / f"readings-{half}.csv"
        path.write_text("\n".join(json.dumps({"sensor_id": s, "ts": t, "value": v}) for s, t, v, _, _ in lines[half::2]))
        files.append((str(path), path.stat().st_size, None))
    frame = spark.createDataFrame(files, "path string, length long, value binary")
    spark.sparkContext.setLocalProperty("streaming.sql.batchId", "7")
    try:
        packed = assign_partitions(frame.repartition(2), job).collect()
    finally:
        spark.sparkContext.setLocalProperty("streaming.sql.batchId", None)
    assert sum(r.unread for r in packed) == len(others) * 3
    files = sorted(p.relative_to(tmp_path / archive.UNREAD).as_posix()
                   for p in (tmp_path / archive.UNREAD).rglob("*.parquet"))
    assert files and all(f.endswith("-b7.parquet") for f in files), files
    assert not (tmp_path / archive.FOLDER).exists()  # the read ones are stage 1's to archive
    # A job that reads two of them now: their readings, under its codes.
    code, ts, value = archive.read(tmp_path / archive.FOLDER, {5: "ünï cödé", 6: "8MD1-AZ\x00"}, 0, 3 * hour)
    expected = sorted((5 if s == "ünï cödé" else 6, t, v) for s, t, v, _, _ in lines if s in ("ünï cödé", "8MD1-AZ\x00"))
    assert sorted(zip(code.tolist(), ts.tolist(), value.tolist())) == expected
    assert archive.forget(tmp_path / archive.FOLDER, 7) == len(files)
    assert np.size(archive.read(tmp_path / archive.FOLDER, {5: "ünï cödé"}, 0, 3 * hour)[0]) == 0


def test_bucket_keys_land_on_distinct_spark_tasks(spark):
    from pyspark.sql import functions as F

    for count in (2, 3, 4, 8):
        keys = bucket_keys(count)
        frame = spark.createDataFrame([(k,) for k in keys], "k int").repartition(count, "k")
        tasks = dict(frame.select("k", F.spark_partition_id().alias("task")).collect())
        assert [tasks[k] for k in keys] == list(range(count))


def test_one_shuffle_without_cut_edges(spark, tmp_path):
    scripts = {"a": "X = avg(S1, 1000, 1000);\nY = X * 2;", "b": "Z = max(S2, 1000, 500);"}
    files = []
    for name, text in scripts.items():
        (tmp_path / f"{name}.ss").write_text(text)
        files.append(tmp_path / f"{name}.ss")
    out = tmp_path / "out"
    compiled = compile_workflows([str(f) for f in files], out, None, 2)
    assert not compiled.plan.partitions.crossings
    from sensorscript.runtime.plan.loading import load_job

    module = load_job(out)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "x.csv").write_text("S1,1,1\nS2,2,2\n")
    (tmp_path / "control").mkdir()
    query = (module.build_query(spark, str(tmp_path / "data"), str(tmp_path / "control"))
             .writeStream.format("noop").trigger(availableNow=True)
             .option("checkpointLocation", str(tmp_path / "ck")).start())
    query.awaitTermination()
    plan = query._jsq.streamingQuery().lastExecution().executedPlan().toString()
    assert plan.count("Exchange") == 1, plan


@pytest.mark.parametrize("kind", ["csv", "parquet"])
def test_file_sinks(spark, tmp_path, kind):
    files = [ROOT / "workflows" / "bridge.ss"]
    lines = [f"8MD1-AZ,{t * 1000},{t % 7}" for t in range(0, 1800)] + ["8MD1-AZ,oops,1"]
    target = tmp_path / ("results.csv" if kind == "csv" else "results")
    compiled, summary, out = compile_and_run(spark, tmp_path, files, [lines], sink=f"{kind}:{target}")
    evaluation = evaluate(load([str(f) for f in files]).workflows, [lines])
    if kind == "csv":
        frame = pd.read_csv(target)
        assert list(frame.columns) == ["stream", "ts", "window_start", "window_end", "value", "version",
                                       "plan_version"]
    else:
        frame = pd.read_parquet(target)
    got = sorted((r.stream, int(r.ts), int(r.window_start), int(r.window_end), float(r.value))
                 for r in frame.itertuples())
    assert_same(got, expected_rows(evaluation))
    quarantine = pd.concat(pd.read_csv(f) for f in (target.parent / "quarantine").glob("*.csv"))
    assert list(quarantine["reason"]) == [records.REASON_TS]


def test_a_batch_that_fails_to_be_written_fails_the_run_in_one_sentence(spark, tmp_path, monkeypatch):
    """A sink that fails in the second micro-batch, with a long message (a Java stack trace is
    thousands of characters): the run stops with the sink's error in one sentence, not with Spark's
    (whose matching of a long foreachBatch error overflows the stream thread's stack) and not as
    a run that finished."""
    from sensorscript.runtime.control import run_loop

    opened = run_loop.open_sink

    class Failing:
        def __init__(self, target):
            self.target = target

        def __getattr__(self, name):
            return getattr(self.target, name)

        def write(self, batch_id, rows):
            if batch_id == 1:
                raise OSError("the disk is full\n" + "\n".join(f"\tat frame{i}(Sink.java:{i})" for i in range(800)))
            return self.target.write(batch_id, rows)

    monkeypatch.setattr(run_loop, "open_sink", lambda *a, **k: Failing(opened(*a, **k)))
    (tmp_path / "w.ss").write_text("A = avg(S1, 1000, 500);\n")
    batches = [[f"S1,{b * 1000 + i * 10},1.0" for i in range(100)] for b in range(3)]
    with pytest.raises(run_loop.JobFailed) as failed:
        compile_and_run(spark, tmp_path, [tmp_path / "w.ss"], batches)
    message = str(failed.value)
    assert "micro-batch 1" in message and "OSError: the disk is full" in message and "frame" not in message


def test_a_python_worker_that_misses_its_connect_restarts_the_query_not_the_job(spark, tmp_path, monkeypatch):
    """Spark gives the Python process it starts beside the driver for a stateful stage a fixed 10 s
    to connect back, which a loaded machine misses (the suite's runs have). The query starts again
    from its checkpoint, in the same process, and the results are the reference's: the Python that
    Spark starts is a wrapper that holds that process's first start 11 s, as a busy machine does."""
    from sensorscript.runtime.control import run_loop

    held = tmp_path / "held"
    wrapper = tmp_path / "slow-python"
    wrapper.write_text("#!/bin/sh\n"
                       f'case "$*" in *transform_with_state_driver_worker*) [ -e {held} ] || '
                       f'{{ touch {held}; sleep 11; }};; esac\n'
                       f'exec {spark.sparkContext.pythonExec} "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setattr(spark.sparkContext, "pythonExec", str(wrapper))
    monkeypatch.setattr(run_loop, "RESTART_WAIT", 0.1)
    sensors = read_csv(ROOT / "workflows" / "sensors.csv")
    write_readings(sensors, tmp_path / "gen", seconds=180, files=1, bad_lines=0)
    lines = (tmp_path / "gen" / "readings-000.csv").read_text().splitlines()
    batches = [lines[:len(lines) // 2], lines[len(lines) // 2:]]
    compile_workflows([str(f) for f in EXAMPLES], tmp_path / "out", str(ROOT / "workflows" / "sensors.csv"), 2)
    said = []
    summary = run_local(tmp_path / "out", str(write_replay(tmp_path / "data", batches)), True, None, spark=spark,
                        echo=said.append, max_files_per_trigger=1)
    assert held.exists()
    restarted = [line for line in said if "starts again from its checkpoint" in line]
    assert len(restarted) == 1 and "Python worker" in restarted[0], said
    evaluation = evaluate(load([str(f) for f in EXAMPLES]).workflows, batches)
    assert summary.results == len(evaluation.rows) > 0
    assert_same(result_rows(tmp_path / "out"), expected_rows(evaluation))


def test_an_arrow_batch_to_the_python_workers_holds_at_most_64_mib(spark):
    """Kafka messages reach stage 0 (mapInArrow) in Arrow batches bounded in bytes as well as rows
    (session.ARROW_BATCHES): 200 messages of 1 MiB, 5,000 of 600 KB would be 3 GB at once (issue #62)."""
    from pyspark.sql import functions as F

    def sizes(batches):
        import pyarrow as pa

        for batch in batches:
            yield pa.RecordBatch.from_pydict({"rows": [batch.num_rows], "bytes": [batch.nbytes]})

    messages = spark.range(0, 200, 1, 1).select(F.expr("cast(repeat('x', 1048576) as binary)").alias("value"))
    found = messages.mapInArrow(sizes, "rows long, bytes long").collect()
    assert sum(row["rows"] for row in found) == 200 and len(found) > 3
    assert max(row["bytes"] for row in found) <= 64 * 2**20 + 2**20


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(values=st.lists(st.one_of(st.sampled_from([1e308, -1e308, float("inf"), float("-inf"), float("nan"), 5e-324,
                                                   -0.0]), st.floats()), min_size=1, max_size=6),
       ts=st.sampled_from([-62_135_596_800_000, -1, 0, 253_402_300_799_999, 253_402_300_800_999]))
def test_a_results_topics_messages_read_back_exactly(spark, values, ts):
    """The Kafka sink's half of the hostile-sinks property test (tests/test_kafka.py, which has no
    Spark): rows at the time boundaries with values past the double range, made into the topic's
    messages as the executors make them (kafka_sink.messages) and read as a read back reads them,
    come back exactly."""
    import math

    from pyspark.sql import functions as F

    from sensorscript.runtime.output.kafka_sink import _SCHEMA, messages

    rows = [("h.M", ts + n, ts + n - 1000, ts + n, value, 1, None, None, json.dumps([{"value": value}]), 1)
            for n, value in enumerate(values)]
    sent = messages(spark.createDataFrame(rows, schema=_SCHEMA), None)
    back = (sent.select(F.from_json(F.col("value").cast("string"), _SCHEMA).alias("row")).select("row.*")
            .orderBy("ts").collect())
    assert [r["ts"] for r in back] == [ts + n for n in range(len(values))]
    for row, value in zip(back, values):
        assert row["value"] == value or (math.isnan(row["value"]) and math.isnan(value)), (row["value"], value)
        assert math.copysign(1, row["value"]) == math.copysign(1, value) or math.isnan(value)
