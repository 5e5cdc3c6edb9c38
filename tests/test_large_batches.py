"""A micro-batch of 1,000,000 result rows through each sink with the driver's memory capped (#42,
item 3): the driver's Python may grow by LIMIT_MIB while the batch is written, well under what the
batch would take collected at once; every row is written once, with the value the workflows say.

The batch (scripts/bench_large_batch.py's `write_workload`): 100 workflows of ten 1-second averages
of ten sensors read once a second, 1,000 seconds of readings in one file (the workflows share the
windows; each writes its own rows). A 1-second average over one reading is that reading: the
expected rows need no evaluator (`expected`)."""

from __future__ import annotations

import resource
import sys
from pathlib import Path

import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
from bench_large_batch import SENSORS, expected, write_workload  # noqa: E402

pytestmark = pytest.mark.spark

WORKFLOWS, SECONDS = 100, 1_000
DRIVER_ROWS = 100_000  # rows the driver takes in at once (SSCRIPT_DRIVER_ROWS)
LIMIT_MIB = 450  # the growth allowed: measured 90-110 MiB (250 in a fresh process); the batch at once, 750


@pytest.fixture(scope="module")
def workload(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("large")
    write_workload(folder, WORKFLOWS, SECONDS)
    return folder


def data_mib() -> float:
    """This process's data segment (what RLIMIT_DATA bounds), in MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmData:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmData in /proc/self/status")


@pytest.mark.parametrize("kind", ["sqlite", "csv", "parquet", "postgresql"])
def test_a_batch_of_a_million_results_with_the_drivers_memory_capped(spark, workload, kind, tmp_path, monkeypatch,
                                                                      request):
    from sensorscript.compiler import compile_workflows
    from sensorscript.running import run_local
    from sensorscript.runtime.output.sinks import read_results

    if kind == "postgresql":
        _, sink = request.getfixturevalue("postgres")
    else:
        sink = f"{kind}:{tmp_path / ('results' if kind == 'parquet' else f'results.{kind}')}"
    monkeypatch.setenv("SSCRIPT_DRIVER_ROWS", str(DRIVER_ROWS))
    out = tmp_path / "out"
    compile_workflows(sorted(str(f) for f in (workload / "workflows").glob("*.ss")), out,
                      str(workload / "sensors.csv"), 2)
    said = []
    limits = resource.getrlimit(resource.RLIMIT_DATA)
    resource.setrlimit(resource.RLIMIT_DATA, (int((data_mib() + LIMIT_MIB) * 2**20), limits[1]))
    try:
        summary = run_local(out, str(workload / "data"), True, sink, spark=spark, echo=said.append)
    finally:
        resource.setrlimit(resource.RLIMIT_DATA, limits)
    assert any("batch 0:" in line and "1,000,000 results" in line for line in said), said
    assert summary.results == WORKFLOWS * SENSORS * SECONDS
    found = read_results(sink)[["stream", "ts", "window_start", "window_end", "value"]]
    found = found.astype({"ts": "int64", "window_start": "int64", "window_end": "int64"})
    found = found.sort_values(["stream", "ts"], ignore_index=True)
    pd.testing.assert_frame_equal(found, expected(WORKFLOWS, SECONDS), check_dtype=False)
