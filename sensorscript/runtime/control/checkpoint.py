"""The checkpoint a run continues from, or starts afresh in: the last batch it committed, the plan
its state belongs to, and what a fresh start forgets (the checkpoint, the archive, pending
corrections and the results written)."""

from __future__ import annotations

import contextlib
import hashlib
import shutil
from dataclasses import dataclass
from pathlib import Path

from sensorscript.runtime.ingest import archive
from sensorscript.runtime.control import correction
from sensorscript.runtime.output import expiry
from sensorscript.runtime.output.sinks import SIDE_TABLES
from sensorscript.runtime.output.postgres_sink import PostgresSink, is_postgres
from sensorscript.runtime.plan import retention as retaining
from sensorscript.runtime.plan import versions
from sensorscript.runtime.plan.program import Job

CHECKPOINT = "checkpoint"  # under OUT: Spark's checkpoint (state/), the control folder (control/)
ENDED = "ended"  # in the checkpoint: its run ended the input, so the next run starts afresh
PLAN = "plan"  # in the checkpoint: the fingerprint of the plan whose state it holds
SPOOL = "spool"  # in the checkpoint: what a socket or broker sent, spooled for the query (runtime/ingest/spool.py)
MQTT_JOURNAL = "mqtt-journal"  # in the checkpoint: the MQTT spool's journals (runtime/ingest/mqtt_spool.py)
# A fresh start keeps these: they are input received (a broker was told so) and not yet read, not state.
KEPT_BY_A_FRESH_START = (SPOOL, MQTT_JOURNAL)


@dataclass(frozen=True)
class Resumed:
    """Where a run begins: `after` the batch the checkpoint committed last (None: afresh), with the
    state of `held` (version, fingerprint), which is an earlier version of the job's plan when
    `switching`; `retention`: the stores' horizons for this run."""

    after: int | None
    held: tuple[int, str] | None
    switching: bool
    retention: dict

    @property
    def afresh(self) -> bool:
        return self.after is None


def resume(out: Path, job: Job, fresh: bool, sink_spec: str, given: dict[str, str], echo=print) -> Resumed:
    """Continue from the checkpoint in OUT, or start afresh (`fresh`, or its last run ended its
    input), saying which; a checkpoint of another compile's plan is refused. `given`: this run's
    horizons (--retain)."""
    checkpoint = out / CHECKPOINT
    after = None if fresh else last_committed(checkpoint)
    held = _plan_of(checkpoint) if after is not None else None
    switching = held is not None and held[1] != plan_fingerprint(job)
    if switching and not _earlier_version(out, held, job):
        raise ValueError(f"{out} was compiled again since its checkpoint was written, and the checkpoint's state "
                         f"belongs to the plan it replaced: 'sscript run --fresh' starts afresh")
    # The horizons: the job's, then those earlier runs on the checkpoint gave (none when it starts
    # afresh: the checkpoint goes), then this run's; checked before a fresh start clears the sink.
    retention = retaining.resolve(job.retention, retaining.kept(checkpoint) if after is not None else {}, given)
    expiry.check(sink_spec, retention["results"])
    if after is None:  # a run that starts afresh writes its own results, with the plan as it is now
        (versions.folder(out, job.version.number) / versions.APPLIED).unlink(missing_ok=True)
        if (checkpoint / ENDED).exists() and not fresh:
            echo(f"the last run on {out} ended its input: this one starts afresh and writes its results anew")
        elif fresh and (checkpoint / "state").exists():
            echo(f"starting afresh (--fresh): the checkpoint in {checkpoint} and the results written are discarded")
        start_afresh(out, sink_spec)
    else:
        echo(f"continuing from the checkpoint in {checkpoint} after batch {after} (sscript run --fresh starts anew)")
    return Resumed(after, held, switching, retention)


def last_committed(checkpoint: Path) -> int | None:
    """The last micro-batch the checkpoint committed (None: nothing to continue from, or its run
    ended its input)."""
    if (checkpoint / ENDED).exists():
        return None
    commits = [int(p.name) for p in (checkpoint / "state" / "commits").glob("[0-9]*") if p.name.isdigit()]
    return max(commits) if commits else None


def hold_plan(checkpoint: Path, job: Job) -> None:
    """Note in the checkpoint which plan (version, fingerprint) its state now belongs to."""
    (checkpoint / PLAN).write_text(f"{job.version.number} {plan_fingerprint(job)}\n")


def _earlier_version(out: Path, held: tuple[int, str], job: Job) -> bool:
    """Whether the checkpoint's plan is an earlier version of the job's, kept in OUT/versions
    (an update the job has not switched to yet), rather than another compile's."""
    number, fingerprint = held
    if number >= job.version.number or not (versions.folder(out, number) / "job.py").exists():
        return False
    try:
        earlier, _ = versions.load(out, number)
    except Exception:  # noqa: BLE001 (a version that cannot be loaded is not one to continue from)
        return False
    return plan_fingerprint(earlier) == fingerprint


def plan_fingerprint(job: Job) -> str:
    """What the checkpoint's state depends on: the sensors, partitions and programs (not the
    policies, which a run may change and whose state carries over)."""
    shape = (job.sensors, job.bucket_keys, job.first_stage, job.second_stage, job.later_stages, job.replicas)
    return hashlib.sha1(repr(shape).encode()).hexdigest()


def _plan_of(checkpoint: Path) -> tuple[int, str] | None:
    """(version, fingerprint) of the plan whose state the checkpoint holds (a bare fingerprint:
    version 1, as written before updates existed)."""
    path = checkpoint / PLAN
    if not path.exists():
        return None
    words = path.read_text().split()
    return (int(words[0]), words[1]) if len(words) == 2 else (1, words[0]) if words else None


def start_afresh(out: Path, sink_spec: str) -> None:
    """Forget the checkpoint, the archive, pending corrections and the results written. A feed's
    spool stays (KEPT_BY_A_FRESH_START): its readings were received, and acknowledged to an MQTT
    broker, which will not send them again; the fresh run reads them."""
    checkpoint = out / CHECKPOINT
    for entry in checkpoint.iterdir() if checkpoint.is_dir() else ():
        if entry.name not in KEPT_BY_A_FRESH_START:
            shutil.rmtree(entry, ignore_errors=True) if entry.is_dir() else entry.unlink(missing_ok=True)
    for folder in (archive.FOLDER, archive.UNREAD, correction.FOLDER):
        shutil.rmtree(out / folder, ignore_errors=True)
    (out / expiry.EXPIRED).unlink(missing_ok=True)
    reset_sink(sink_spec)


def reset_sink(spec: str) -> None:
    """Remove what the sink's earlier runs wrote, and only that: a folder beside a file sink may
    hold files of the user's, which stay."""
    if is_postgres(spec):  # its tables, made anew
        PostgresSink(spec).reset()
        return
    kind, _, path = spec.partition(":")
    target = Path(path)
    if kind == "sqlite" and target.exists():
        target.unlink()
    elif kind in ("csv", "parquet"):  # the results, the journal of batches written, the folders beside
        if target.is_dir():
            _remove_batches(target, "batch-*.parquet")
        else:
            target.unlink(missing_ok=True)
        (target.parent / f".{target.name}.batches").unlink(missing_ok=True)
        for folder in SIDE_TABLES:
            _remove_batches(target.parent / folder, "batch-*.csv")
        _remove_batches(target.parent / expiry.MINUTES_FOLDER, "minutes-*.csv")


def _remove_batches(folder: Path, pattern: str) -> None:
    """The files a sink wrote per batch, then the folder if nothing else is left in it."""
    for path in folder.glob(pattern):
        path.unlink(missing_ok=True)
    with contextlib.suppress(OSError):
        folder.rmdir()
