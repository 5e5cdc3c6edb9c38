"""A job whose plan is several MB starts and runs on real Spark (issue #25).

Spark sends the Python functions of a query to its workers pickled with what they hold; the
plan grows with the number of workflows, and a function of over 1 MiB travels as a broadcast
variable, which the Python worker Spark runs on the driver to set up the second stage
(transformWithStateInPandas) cannot load: at 10,240 workflows the query failed in its first batch.
And that worker prints banners at every query start: the job's output must stay the job's.
"""

import os
import pickle
import random
import subprocess
import sys

import pytest

from sensorscript.compiler import compile_workflows
from sensorscript.parser import load
from sensorscript.runtime.plan.loading import load_job
from sensorscript.runtime.control.session import SPARK_LOG
from sensorscript.workload import write_readings, write_workflows
from tests.differential import assert_same, expected_rows, result_rows
from oracles.streams import evaluate

pytestmark = pytest.mark.spark


def test_a_plan_of_several_megabytes_with_a_second_stage_runs_and_says_only_its_own_lines(tmp_path):
    sensors = write_workflows(tmp_path, 4096, 4096)
    files = sorted(str(p) for p in (tmp_path / "workflows").glob("*.ss"))
    out = tmp_path / "out"
    compile_workflows(files, out, str(tmp_path / "sensors.csv"), 2)
    job = load_job(out).JOB
    assert job.has_second_stage  # the plan cut edges: a transformWithStateInPandas stage follows
    assert len(pickle.dumps(job)) > 2 * 2**20  # well past the 1 MiB above which a closure is broadcast

    write_readings(sensors, tmp_path / "data", seconds=3, files=1)
    # As a user runs it on its own (sscript run passes its output on as it is).
    environment = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    environment.pop("SSCRIPT_SPARK_LOG", None)
    done = subprocess.run([sys.executable, str(out / "job.py"), "--input", str(tmp_path / "data"), "--once"],
                          capture_output=True, text=True, env=environment, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    ours = ("batch ", "done: ", "results: ", "the input ended ")
    assert lines and all(line.startswith(ours) for line in lines), lines  # nothing of Spark's
    # Spark's own output, the second stage's Python worker's banners among it, is in OUT/spark.log.
    assert "TransformWithStateInPandas Python worker" in (out / SPARK_LOG).read_text()

    # The results of a sample of workflows are the reference evaluator's, row for row.
    sample = random.Random(25).sample(files, 40)
    lines = (tmp_path / "data" / "readings-000.csv").read_text().splitlines()
    evaluation = evaluate(load(sample).workflows, [lines])
    streams = {row.stream for row in evaluation.rows}
    assert len(streams) > 40
    assert_same([r for r in result_rows(out) if r[0] in streams], expected_rows(evaluation))
