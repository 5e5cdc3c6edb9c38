"""The operator of a split plan's later stages, light to import.

Spark runs a `transformWithStateInPandas` processor once more while it plans each query: in a
fresh Python process on the driver, it unpickles the processor and calls `init` to learn its state
(`TransformWithStateInPySparkPythonPreInitRunner`). That process starts anew at every query start,
so what unpickling the processor imports is paid there each time: this module imports only
pyspark's `StatefulProcessor`, and the processor travels as its shipped job's file name, loaded (and
the runtime that computes the stage imported) on its first rows (`later_rows.later_stage_rows`).
"""

from __future__ import annotations

from pyspark.sql.streaming.stateful_processor import StatefulProcessor

STATE_SCHEMA = "blob binary"  # one value per partition: its stage's state, pickled


class LaterStageProcessor(StatefulProcessor):
    """Stage k >= 2 of every partition (runtime/control/later_rows.py)."""

    def __init__(self, job, stage: int = 2):
        self._job, self._shipped, self.stage = job, None, stage

    def __reduce__(self):
        shipped = self._job.__dict__.get("_shipped") if self._job is not None else self._shipped
        if shipped:  # runtime/plan/shipping.py: the job travels as its file's name, loaded when needed
            return _unpickled, (shipped, self.stage)
        return LaterStageProcessor, (self._job, self.stage)

    @property
    def job(self):
        if self._job is None:
            from sensorscript.runtime.plan import shipping

            self._job = shipping.load(*self._shipped)
        return self._job

    def init(self, handle) -> None:
        self.state = handle.getValueState(f"stage{self.stage}", STATE_SCHEMA)
        self.tasks = {}

    def handleInputRows(self, key, rows, timerValues):  # noqa: N802 (Spark's name)
        from sensorscript.runtime.control.later_rows import later_stage_rows

        yield from later_stage_rows(self, key, rows)

    def close(self) -> None:
        pass


def _unpickled(shipped: tuple[str, str], stage: int) -> LaterStageProcessor:
    processor = LaterStageProcessor(None, stage)
    processor._shipped = shipped
    return processor
