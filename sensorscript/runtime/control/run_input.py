"""What a run reads and what becomes of it: a folder's files in name order (`--replay-order name`),
what becomes of them once read (`--input-cleanup`), the source that reads them (Spark's file
source or the drop-folder source: runtime/ingest/drop_folder.py), and a socket's or an MQTT topic's
spool (a feed), which the query reads as a folder."""

from __future__ import annotations

import dataclasses
import os
import time
from dataclasses import dataclass
from pathlib import Path

from sensorscript.runtime.control.checkpoint import CHECKPOINT, MQTT_JOURNAL, SPOOL
from sensorscript.runtime.control.run_options import RunSettings
from sensorscript.runtime.ingest import drop_folder, source as sources
from sensorscript.runtime.plan.program import Job


def prepare(job: Job, build_query, settings: RunSettings, echo=print) -> Job:
    """Before the checkpoint is looked at: a folder replayed in name order is ordered, and the job
    reads with this run's input cleanup."""
    if settings.replay_order == "name" and not sources.streamed(settings.input):
        files = order_by_name(Path(settings.input))
        echo(f"replaying {files:,} files in name order (their modification times now follow their names)")
    cleanup = _input_cleanup(build_query, settings.input_cleanup, settings.input, settings.once, echo)
    return dataclasses.replace(job, input_cleanup=cleanup, kafka=settings.kafka_settings)


@dataclass
class RunInput:
    """The folder the query's files come from (the source's, or a feed's spool), the source that
    reads it (drop_folder.DROP or FILES), and the feed: a socket's or MQTT topic's spool, or None."""

    folder: str
    kind: str
    feed: object | None = None

    @staticmethod
    def open(job: Job, build_query, settings: RunSettings, afresh: bool, echo=print) -> tuple["RunInput", Job]:
        """This run's input, and the job with the cleanup its source reads with. A run that continues
        first cleans up what a killed run left of the batches it committed."""
        checkpoint, source = settings.out / CHECKPOINT, settings.input
        spooled = sources.spooled(source)
        folder = str((checkpoint / SPOOL).resolve()) if spooled else source
        kind, cleanup = drop_folder.source_of(checkpoint, folder, job.input_cleanup, afresh, spooled,
                                              _takes_cleanup(build_query), echo)
        job = dataclasses.replace(job, input_cleanup=cleanup)
        if not afresh:
            sources.clean_committed(checkpoint / "state", folder, job.input_cleanup)
        return RunInput(folder, kind), job

    def open_feed(self, settings: RunSettings, echo=print, on_broker=None) -> None:
        """A socket or an MQTT topic is read by the driver into a spool of small files that the query
        reads (runtime/ingest/spool.py: Spark's socket source keeps its backlog in the driver's heap;
        mqtt_spool.py: a message is acknowledged to the broker once its file is on disk)."""
        if sources.spooled(settings.input):
            checkpoint = settings.out / CHECKPOINT
            self.feed = sources.open_feed(settings.input, checkpoint / SPOOL, checkpoint / MQTT_JOURNAL, settings.out,
                                          settings.sensor_from_topic, settings.tls, echo,
                                          settings.mqtt_login, on_broker)

    def reads(self, source: str) -> str:
        """What the query reads."""
        return drop_folder.PREFIX + self.folder if self.kind == drop_folder.DROP else \
            self.feed.input if self.feed else source

    def clean_all(self, checkpoint: Path, cleanup: str) -> None:
        """The input has ended: what Spark left of the input read (the last batch's files) goes."""
        sources.clean_committed(checkpoint / "state", self.folder, cleanup, everything=True)


def order_by_name(folder: Path) -> int:
    """Set the modification times of the files in `folder` one second apart, in name order, ending
    now: Spark's file source takes files by modification time."""
    files = sorted(p for p in folder.rglob("*") if p.is_file() and not p.name.startswith((".", "_")))
    now = time.time()
    for index, path in enumerate(files):
        stamp = now - (len(files) - index)
        os.utime(path, (stamp, stamp))
    return len(files)


def _takes_cleanup(build_query) -> bool:
    """Whether the job.py passes the run's input cleanup to its source (compiled since --input-cleanup)."""
    return "input_cleanup" in getattr(getattr(build_query, "__code__", None), "co_names", ("input_cleanup",))


def _input_cleanup(build_query, requested: str | None, source: str, once: bool, echo) -> str:
    """This run's input cleanup (runtime/ingest/source.py, `input_cleanup`), said when files go. A
    job.py compiled before --input-cleanup existed reads its folder without it: its files are kept."""
    cleanup = sources.input_cleanup(requested, source, once)
    if cleanup == "keep":
        return cleanup
    if not _takes_cleanup(build_query):
        echo(f"this job.py was compiled before --input-cleanup: the files of {source} are kept "
             f"('sscript compile' again to have them {'deleted' if cleanup == 'delete' else 'moved'} once read)")
        return "keep"
    echo(f"the files of {source} are " + ("deleted" if cleanup == "delete" else f"moved to {cleanup[len('archive:'):]}")
         + " once the batch that read them is committed (--input-cleanup; keep keeps them)")
    return cleanup
