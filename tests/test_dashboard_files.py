"""The dashboard over CSV and Parquet sinks (issue #27, item 4): each look reads only the batches
written since the last one, and shows what a whole read of the sink shows."""

from __future__ import annotations

import json
from pathlib import Path
from collections import Counter

import pandas as pd
import pytest

from sensorscript.compiler import compile_workflows
from sensorscript.dashboard import file_look, reading, sink_look
from sensorscript.dashboard.reading import JobOutput
from sensorscript.runtime.control.correction import newest
from sensorscript.runtime.output.alarms import alarms
from sensorscript.runtime.output.sinks import METRIC_COLUMNS, BatchRows, open_sink, read_results
from tests.conftest import EXAMPLES, ROOT
from tests.test_dashboard import FLAG, MATCH, T, flag, match

SENSORS = ROOT / "workflows" / "sensors.csv"
BATCHES = [
    [flag(10, 0.0), flag(20, 1.0), match(15, 4.5)],
    [flag(30, 1.0), flag(40, 0.0), flag(50, 1.0)],
    [flag(20, 0.0, version=2)],  # a correction
    [],  # a batch without results
    [match(15, None, version=2), match(60, 5.0), flag(60, 1.0)],  # a retraction
    [flag(70, 0.0), flag(80, 1.0)],
]


@pytest.fixture(params=["csv", "parquet"])
def file_sink(request, tmp_path, monkeypatch):
    """The examples compiled, a run's status naming a CSV or Parquet sink, every look reading OUT;
    `reads` records the rows each look adds to what it keeps, and the files it opens."""
    out = tmp_path / "out"
    compile_workflows([str(p) for p in EXAMPLES], out, str(SENSORS))
    spec = {"csv": f"csv:{tmp_path / 'sink' / 'results.csv'}", "parquet": f"parquet:{tmp_path / 'sink' / 'results'}"}
    spec = spec[request.param]
    started(out, spec, 1)
    monkeypatch.setattr(reading, "READ_EVERY_S", -1.0)
    reads = {"rows": [], "files": []}
    add = file_look.Appended.add
    monkeypatch.setattr(file_look.Appended, "add", lambda self, rows, file: reads["rows"].append(len(rows)) or
                        add(self, rows, file))
    for name in ("read_csv", "read_parquet"):
        real = getattr(pd, name)
        monkeypatch.setattr(pd, name, lambda f, *a, real=real, **k: reads["files"].append(
            "/".join(Path(f).parts[-2:]) if isinstance(f, (str, Path)) else "") or real(f, *a, **k))
    return out, spec, reads


def started(out, spec: str, at: float) -> None:
    (out / "status.json").write_text(json.dumps({"job": "examples", "sink_spec": spec, "started": at}))


def write(sink, batch: int, rows: list[dict]) -> None:
    quarantine = pd.DataFrame({"raw": [f"line {batch}"] * (batch % 3), "reason": ["no such sensor", "bad time"][:batch % 3]})
    metrics = pd.DataFrame([(batch, p, 0.0, name, float(batch)) for p in (0, 1) for name in ("readings", "lag_ms", "late")],
                           columns=list(METRIC_COLUMNS))
    sink.write(batch, BatchRows(pd.DataFrame(rows, columns=["stream", "ts", "value", "version", "start_ts", "end_ts",
                                                           "events"]), quarantine, None, metrics))


def whole(out, spec: str, kinds: dict) -> tuple:
    """What the page shows, from a whole read of the sink (the oracle): the alarms, each stream's
    (ts, value) rows, the quarantine counts, the metrics shown."""
    rows = newest(read_results(spec))
    rows = rows[rows["value"].notna()]
    beside = spec.partition(":")[2].rsplit("/", 1)[0]
    side = {name: pd.concat([pd.read_csv(f) for f in sorted((out.parent / "sink" / name).glob("batch-*.csv"))])
            for name in ("quarantine", "metrics") if list((out.parent / "sink" / name).glob("batch-*.csv"))}
    assert beside.endswith("sink")
    quarantine = Counter(side["quarantine"]["reason"]) if "quarantine" in side else Counter()
    metrics = side["metrics"] if "metrics" in side else pd.DataFrame(columns=list(METRIC_COLUMNS))
    metrics = metrics[metrics["name"].isin(sink_look.METRICS_SHOWN)]
    return (alarms(rows, kinds), {s: points(rows[rows["stream"] == s]) for s in (FLAG, MATCH)},
            sorted(quarantine.items(), key=lambda item: (-item[1], item[0])), shown_metrics(metrics))


def page(output: JobOutput) -> tuple:
    health = output.health()
    return (output.alarms().newest_first, {s: points(r) for s, r in output.stream_rows([FLAG, MATCH]).items()},
            health.quarantine, shown_metrics(health.metrics))


def points(rows: pd.DataFrame) -> list[tuple]:
    return sorted(zip(rows["ts"].astype("int64") - T, rows["value"].astype(float)))


def shown_metrics(metrics: pd.DataFrame) -> list[tuple]:
    return sorted(metrics.reindex(columns=list(METRIC_COLUMNS)).drop(columns="time").astype(str).itertuples(index=False))


def test_each_look_reads_only_the_batches_written_since(file_sink):
    """After each batch (a correction, a retraction, a batch without results, quarantined lines and
    metrics among them) the page shows what a whole read of the sink gives, and the look read only
    that batch's rows and opened only its files."""
    out, spec, reads = file_sink
    sink = open_sink(spec, matches=True)
    output = JobOutput(out)
    kinds = output.plan().alarm_kinds
    for batch, rows in enumerate(BATCHES):
        write(sink, batch, rows)
        reads["rows"].clear()
        reads["files"].clear()
        shown = page(output)
        # the new results (and metrics rows shown, and quarantined lines), nothing read before
        assert sum(reads["rows"]) == len(rows) + 2 * 2 + batch % 3, (batch, reads["rows"])
        opened = {name for name in reads["files"] if name}
        expected = {f"metrics/batch-{batch:06d}.csv"} | ({f"quarantine/batch-{batch:06d}.csv"} if batch % 3 else set())
        if spec.startswith("parquet") and rows:
            expected.add(f"results/batch-{batch:06d}.parquet")
        assert opened == expected, batch
        assert shown == whole(out, spec, kinds), batch
        reads["rows"].clear()
        assert page(output) == whole(out, spec, kinds) and reads["rows"] == []  # nothing new: nothing read
    assert page(JobOutput(out)) == whole(out, spec, kinds)  # a page opened now


def test_removed_files_take_their_rows_and_a_sink_written_anew_is_read_afresh(file_sink):
    """Per-batch files removed (retention) take their rows from what is kept for the next page
    (a stream first shown, the health of a page opened again), and nothing is read again; a row
    appended but not journalled (a run killed while writing) is not read; a sink written anew,
    by the same run or by a new one, is read from its beginning."""
    out, spec, reads = file_sink
    sink = open_sink(spec, matches=True)
    output = JobOutput(out)
    kinds = output.plan().alarm_kinds
    for batch, rows in enumerate(BATCHES[:3]):
        write(sink, batch, rows)
    assert page(output) == whole(out, spec, kinds)
    folder = out.parent / "sink"
    (folder / "metrics" / "batch-000000.csv").unlink()
    if spec.startswith("parquet"):
        (folder / "results" / "batch-000001.parquet").unlink()
    else:  # appended by a run killed before it journalled the batch
        with (folder / "results.csv").open("a") as f:
            f.write(f"{FLAG},{T + 90},,,1.0,1,,,,1\n")
    reads["rows"].clear()
    page(output)
    assert reads["rows"] == []
    stored = read_results(spec)
    stored = stored[stored["ts"] != T + 90]
    with output._sink() as kept:
        rows = kept.rows([FLAG, MATCH], 0, kept.last_rowid(), sink_look.COLUMNS)
        assert sorted(zip(rows["ts"], rows["value"].fillna(-1))) == sorted(zip(stored["ts"], stored["value"].fillna(-1)))
        metrics = pd.concat([pd.read_csv(f) for f in sorted((folder / "metrics").glob("*.csv"))])
        assert shown_metrics(kept.metrics(0)[0]) == shown_metrics(metrics[metrics["name"].isin(sink_look.METRICS_SHOWN)])
    if spec.startswith("parquet"):  # written by a run killed before it journalled batch 3: not read
        (folder / "results" / "batch-000003.parquet").write_bytes((folder / "results" / "batch-000000.parquet").read_bytes())
        reads["rows"].clear()
        page(output)
        assert reads["rows"] == []
    write(sink, 3, BATCHES[4])  # the CSV sink cuts the killed run's row first; the Parquet sink's file replaced
    assert page(JobOutput(out)) == whole(out, spec, kinds)
    if spec.startswith("csv"):
        assert page(output)[:3] == whole(out, spec, kinds)[:3]  # (its health plots keep the metrics shown)
    # The sink written anew (fewer rows) by the same run (its health plots keep what they showed), then by a new one.
    for run in (1, 2):
        for path in [*folder.rglob("batch-*"), *folder.glob("*.csv"), *folder.glob(".*")]:
            path.unlink()
        sink = open_sink(spec, matches=True)
        write(sink, 0, BATCHES[5][:run])
        started(out, spec, run)
        assert page(output)[:3 if run == 1 else 4] == whole(out, spec, kinds)[:3 if run == 1 else 4], run
