"""What a correction or a backfill writes (runtime/control/correction.py `changes`): per key, the
recomputed rows with the next version where they differ from the newest version stored, and a
tombstone where a stored key has no rows any more. No Spark: frames in, frames out (and one
correction end to end, over an archive and a SQLite sink: what it reads to give its rows)."""

from __future__ import annotations

import math
import random

import numpy as np
import pandas as pd

from sensorscript.runtime.control.correction import changes

COLUMNS = ["stream", "ts", "window_start", "window_end", "value", "version", "start_ts", "end_ts", "events"]
KEY = ["stream", "ts", "window_start", "window_end", "start_ts", "end_ts"]


def frame(rows: list[dict]) -> pd.DataFrame:
    return pd.DataFrame([{c: r.get(c) for c in COLUMNS} for r in rows], columns=COLUMNS)


def window(ts, value, version=None, stream="avg"):
    return {"stream": stream, "ts": ts, "window_start": ts - 1000, "window_end": ts, "value": value,
            "version": version}


def match(ts, start, events, version=None, stream="ab"):
    return {"stream": stream, "ts": ts, "start_ts": start, "end_ts": ts, "value": 1.0, "events": events,
            "version": version}


def written(recomputed, stored, lowest=None, until=None) -> list[tuple]:
    streams = {r["stream"] for r in recomputed + stored}
    out = changes(frame(recomputed), frame(stored), lowest or {s: 0 for s in streams},
                  until or {s: 10**12 for s in streams})
    return [(r.stream, int(r.ts), None if pd.isna(r.value) else float(r.value), int(r.version))
            for r in out.itertuples()]


def test_an_unchanged_key_is_not_written_and_a_changed_one_gets_the_next_version():
    stored = [window(1000, 2.0, 1), window(2000, 3.0, 1), window(2000, 9.0, 2)]
    assert written([window(1000, 2.0), window(2000, 9.0)], stored) == []
    assert written([window(1000, 2.0 * (1 + 1e-12)), window(2000, 4.0)], stored) == [("avg", 2000, 4.0, 3)]


def test_a_key_with_no_rows_any_more_gets_one_tombstone_and_only_once():
    stored = [window(1000, 2.0, 1), window(2000, 3.0, 1)]
    assert written([window(1000, 2.0)], stored) == [("avg", 2000, None, 2)]
    retracted = stored + [window(2000, None, 2)]
    assert written([window(1000, 2.0)], retracted) == []
    # Rows again after a tombstone: the next version after it.
    assert written([window(1000, 2.0), window(2000, 3.0)], retracted) == [("avg", 2000, 3.0, 3)]


def test_a_new_key_gets_version_one():
    assert written([window(1000, 2.0), window(2000, 5.0)], [window(1000, 2.0, 1)]) == [("avg", 2000, 5.0, 1)]


def test_matches_compare_as_multisets_of_value_and_events():
    stored = [match(3000, 1000, "a@1000,b@3000", 1), match(3000, 1000, "a@1000,b@2500", 1)]
    same_rows_other_order = [match(3000, 1000, "a@1000,b@2500"), match(3000, 1000, "a@1000,b@3000")]
    assert written(same_rows_other_order, stored) == []
    one_more = same_rows_other_order + [match(3000, 1000, "a@2000,b@3000")]
    assert written(one_more, stored) == [("ab", 3000, 1.0, 2)] * 3  # all the key's rows, again
    other_events = [match(3000, 1000, "a@1000,b@2500"), match(3000, 1000, "a@1200,b@3000")]
    assert len(written(other_events, stored)) == 2


def test_rows_outside_each_streams_range_are_left_alone():
    stored = [window(1000, 2.0, 1), window(5000, 3.0, 1), window(1000, 7.0, 1, stream="max")]
    recomputed = [window(1000, 4.0), window(5000, 6.0), window(1000, 8.0, stream="max")]
    assert written(recomputed, stored, lowest={"avg": 2000, "max": 0}, until={"avg": 6000, "max": 1000}) == [
        ("avg", 5000, 6.0, 2)]


def per_key(recomputed: pd.DataFrame, stored: pd.DataFrame) -> dict:
    """The definition, key by key: what each key's newest stored rows and recomputed rows are."""
    def key(r):
        return tuple(None if pd.isna(r[c]) else r[c] for c in KEY)

    new, old = {}, {}
    for r in recomputed.to_dict("records"):
        new.setdefault(key(r), []).append(r)
    for r in stored.to_dict("records"):
        old.setdefault(key(r), []).append(r)
    expected = {}
    for k in set(new) | set(old):
        rows = old.get(k, [])
        top = max((r["version"] for r in rows), default=0)
        latest = [r for r in rows if r["version"] == top]
        fresh = new.get(k, [])
        if not fresh:
            if latest and not all(pd.isna(r["value"]) for r in latest):
                expected[k] = [(None, top + 1)]
            continue
        pairs = (sorted((float(r["value"]), r["events"] or "") for r in fresh),
                 sorted((float(r["value"]), r["events"] or "") for r in latest))
        if (len(pairs[0]) == len(pairs[1]) and not any(pd.isna(r["value"]) for r in latest)
                and all(a[1] == b[1] and math.isclose(a[0], b[0], rel_tol=1e-9, abs_tol=1e-9)
                        for a, b in zip(*pairs))):
            continue
        expected[k] = sorted((float(r["value"]), top + 1) for r in fresh)
    return expected


def test_random_frames_agree_with_the_definition_key_by_key():
    rng = random.Random(7)
    for _ in range(40):
        stored, recomputed = [], []
        for ts in range(1000, 1000 + 1000 * rng.randint(1, 30), 1000):
            for make in (lambda v, ver=None: window(ts, v, ver),
                         lambda v, ver=None: match(ts, ts - 500, f"a@{ts - 500},b@{ts}", ver) | {"value": v}):
                versions = rng.randint(0, 3)
                for version in range(1, versions + 1):
                    if rng.random() < 0.15:
                        stored.append(make(None, version) | {"events": None})
                    else:
                        stored.extend(make(float(rng.randint(0, 3)), version) for _ in range(rng.randint(1, 2)))
                if rng.random() < 0.7:
                    recomputed.extend(make(float(rng.randint(0, 3))) for _ in range(rng.randint(1, 2)))
        got = changes(frame(recomputed), frame(stored), {"avg": 0, "ab": 0}, {"avg": 10**12, "ab": 10**12})
        found: dict = {}
        for r in got.to_dict("records"):
            k = tuple(None if pd.isna(r[c]) else r[c] for c in KEY)
            found.setdefault(k, []).append((None if pd.isna(r["value"]) else float(r["value"]), int(r["version"])))
        found = {k: sorted(v, key=lambda x: (x[0] is None, x)) for k, v in found.items()}
        assert found == per_key(frame(recomputed), frame(stored))
        assert got["version"].dtype == np.int64


def test_nothing_in_nothing_out():
    assert changes(frame([]), frame([]), {"avg": 0}, {"avg": 10}).empty


def test_a_correction_reads_past_its_end_while_a_trailing_closure_is_open(tmp_path):
    """A correction up to U (what the job has emitted) of a pattern whose trailing closure under
    strategy next ends with its window, not with its last event: the run that begins at 1000 takes
    S3 at 1200 and at 1900, so its match is at 1900, after U = 1500. The correction reads past U
    (JobGraph.lookahead) and writes nothing; reading only up to U, it closed the closure there and
    wrote a match at 1200 that the readings do not make."""
    import dataclasses

    from sensorscript.compiler import compile_workflows
    from sensorscript.runtime.control import correction
    from sensorscript.runtime.ingest import archive
    from sensorscript.runtime.output import rows as output
    from sensorscript.runtime.output.sinks import BatchRows, newest, open_sink, read_results
    from sensorscript.runtime.plan import versions
    from sensorscript.runtime.state.tasks import LocalRun

    (tmp_path / "w.ss").write_text("P = pattern(a: S2 -> b: S3+) within 1s strategy next;\n")
    out = tmp_path / "out"
    compile_workflows([str(tmp_path / "w.ss")], out, partitions=1, late="correct")
    job, _ = versions.load(out, 1)
    job = dataclasses.replace(job, archive=str(out / archive.FOLDER))
    s2, s3 = job.sensors["S2"][0], job.sensors["S3"][0]
    code, ts, value = np.array([s3, s2, s3, s3]), np.array([500, 1000, 1200, 1900]), np.ones(4)
    archive.begin(job.archive)
    archive.write(job.archive, 0, 0, code, ts, value)  # every reading, the late one (S3 at 500) too
    run = LocalRun(job.first_stage, job.second_stage, job.watermark, version=job.version)
    live = output.stacked([output.results(result, program, 0, job)
                           for program, result in run.batch(code[1:], ts[1:], value[1:], end_of_input=True)])
    spec = f"sqlite:{tmp_path / 'results.db'}"
    open_sink(spec, matches=True).write(0, BatchRows(live, pd.DataFrame()))
    correction.Pending(out).add(1, code[:1], ts[:1], value[:1])
    done = correction.correct(job, out, spec, 1500)
    assert (done.rows, done.retracted) == (0, 0)
    assert newest(read_results(spec))["ts"].tolist() == [1900]
