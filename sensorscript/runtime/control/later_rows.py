"""The rows of a split plan's later stages, per key and micro-batch (`LaterStageProcessor`, which
imports this module only when its first rows come: runtime/control/later_stage.py)."""

from __future__ import annotations

import pickle
from typing import Iterator

import numpy as np
import pandas as pd

from sensorscript.runtime.output import rows as output
from sensorscript.runtime.state.engine import Tuples
from sensorscript.runtime.state.tasks import LaterStage


def later_stage_rows(processor, key, rows) -> Iterator[pd.DataFrame]:
    """Stage k >= 2 of a partition, one call per key and micro-batch (LaterStageProcessor's rows):
    computations fed by forwarded tuples; the rows that are not for this stage (results, counters,
    forwards and heartbeats for a later one) pass through."""
    job = processor.job
    own = int(key[0])
    partition = job.bucket_keys.index(own)
    frame = pd.concat(list(rows), ignore_index=True)
    kind = frame["kind"].to_numpy()
    mine = ((kind == "forward") | (kind == "heartbeat")) & (frame["stage"].to_numpy() == processor.stage)
    passing = frame[~mine]
    program = dict(job.stages_after_first())[processor.stage][partition]
    if program is None:
        yield from output.frames([passing])
        return
    tasks = processor.tasks
    task = tasks.get(partition) or tasks.setdefault(partition, LaterStage(program, job.version))
    state = pickle.loads(processor.state.get()[0]) if processor.state.exists() else task.new_state()
    forwards = frame[mine & (kind == "forward")]
    received = []
    for c, g in forwards.groupby("fcode", sort=True):
        ts = np.concatenate([np.frombuffer(b, np.int64) for b in g["times"]])
        value = np.concatenate([np.frombuffer(b, np.float64) for b in g["values"]])
        source = np.concatenate([np.frombuffer(b, np.int32) for b in g["sources"]])
        received.append((int(c), Tuples(ts, value, source)))
    beats = frame[mine & (kind == "heartbeat")]
    # Every row carries a ts, so the column arrives as int64 and the +-2^63 sentinels are exact.
    heartbeats = {int(s): int(w) for s, w in zip(beats["fcode"], beats["ts"].to_numpy(np.int64))}
    result = task.step(state, received, heartbeats)
    processor.state.update((pickle.dumps(state, protocol=5),))
    yield from output.frames([passing, *output.result_frames(result, program, own, job), output.forwards(result, job),
                              output.heartbeats(program, result.mark, job),
                              output.counters([result], program, own),
                              output.gauges(output.exact_from([result], program), own)])
