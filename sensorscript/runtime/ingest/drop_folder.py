"""A drop folder: a folder whose files are deleted or archived once read (a live feed), read by a
streaming source whose checkpoint stays bounded (issue #27).

Spark's file source remembers every file it has ever read (its metadata log, an entry per file,
rewritten in full at every compaction, with no retention), because a folder whose files stay
must not be read twice. A folder whose files go once read needs no such memory: what is in it has
not been read, except the files of the batches in flight. So this source (pyspark's Python data
source API) lists the folder at each trigger and puts a batch's files in the batch's offset
({"files": [[path, length, mtime_ns], ...], "n": sequence}), which Spark keeps in its offset log
and purges itself (minBatchesToRetain): the checkpoint holds the last batches' files, never all.

Exactly once, with kills:
- a batch run again after a kill reads its offset's files (`partitions` hands out `end`'s files);
- files handed out in a batch not yet committed are not handed out again (the reader remembers
  them, and the files of the batch it continues from);
- Spark calls `commit(end)` once the next batch is written to the offset log: `end`'s files go
  then. What a killed run leaves (a committed batch whose files are still there, which Spark never
  commits again after a restart) the run loop cleans before the query starts, from the offset and
  commit logs (`clean_committed`).

Only paths and lengths cross into Spark, never the files' bytes: stage 0 reads those itself
(source.blocks). A folder on another file system (hdfs://, s3://) stays on Spark's file source.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxFiles, SupportsTriggerAvailableNow

PREFIX = "drop:"  # the input a query reads: drop:FOLDER (runtime/ingest/source.py, `read_input`)
FORMAT = "sensorscript_drop_folder"
SCHEMA = "path string, length long, value binary"  # source.INPUT_COLUMNS
# Which source began a checkpoint (OUT/checkpoint/input-source): its offset log holds that source's
# offsets, so a checkpoint goes on with the source it began with.
RECORD = "input-source"
DROP, FILES = "drop", "files"


class DropFolder(DataSource):
    """Options: path (a local folder), cleanup (delete | archive:DIR), maxFilesPerTrigger,
    partitions (how many tasks a batch's files are spread over at most)."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> str:
        return SCHEMA

    def streamReader(self, schema) -> "DropFolderReader":
        return DropFolderReader(self.options)


class DropFolderReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Lists the folder at each trigger; a batch's offset carries its files (the module's doc)."""

    def __init__(self, options):
        self.folder = Path(options["path"])
        cleanup = options.get("cleanup", "delete")
        self.archive_dir = cleanup[len("archive:"):] if cleanup.startswith("archive:") else None
        self.max_files = int(options["maxFilesPerTrigger"]) if options.get("maxFilesPerTrigger") else None
        self.partition_count = max(1, int(options.get("partitions", 1)))
        self.handed_out: set[str] = set()  # paths in batches not yet committed
        self.available_now: set[str] | None = None  # Trigger.AvailableNow (--once): the files there at its start

    def initialOffset(self) -> dict:
        return {"files": [], "n": 0}

    def prepareForTriggerAvailableNow(self) -> None:
        self.available_now = {path for path, _, _ in listing(self.folder)}

    def getDefaultReadLimit(self):
        return ReadMaxFiles(self.max_files) if self.max_files else ReadAllAvailable()

    def latestOffset(self, start: dict, limit) -> dict:
        self.handed_out.update(path for path, _, _ in start["files"])  # after a restart: not yet cleaned
        new = [entry for entry in listing(self.folder) if entry[0] not in self.handed_out
               and (self.available_now is None or entry[0] in self.available_now)]
        if isinstance(limit, ReadMaxFiles):
            new = new[:limit.max_files]
        if not new:
            return start  # no new data: the same offset
        return {"files": new, "n": start["n"] + 1}

    def partitions(self, start: dict, end: dict):
        if start["n"] == end["n"]:
            return []
        files = [(path, length) for path, length, _ in end["files"]]
        self.handed_out.update(path for path, _ in files)  # a batch run again after a kill
        return [FilesPartition(group) for group in _spread(files, self.partition_count)]

    def read(self, partition: "FilesPartition"):
        for path, length in partition.files:
            yield "file:" + path, length, None

    def commit(self, end: dict) -> None:
        for path, length, mtime_ns in end["files"]:
            discard(path, length, mtime_ns, self.archive_dir)
            self.handed_out.discard(path)


class FilesPartition(InputPartition):
    def __init__(self, files: list[tuple[str, int]]):
        super().__init__(None)
        self.files = files


def listing(folder: Path) -> list[list]:
    """[path, length, mtime_ns] of the files under `folder`, in (modification time, path) order;
    names starting with "." or "_" are skipped, with what is under them (as Spark does: files being
    written, _SUCCESS markers)."""
    found = []
    stack = [str(folder)]
    while stack:
        try:
            entries = list(os.scandir(stack.pop()))
        except FileNotFoundError:  # the folder, or one under it, went meanwhile
            continue
        for entry in entries:
            if entry.name.startswith((".", "_")):
                continue
            try:
                if entry.is_dir():
                    stack.append(entry.path)
                elif entry.is_file():
                    stat = entry.stat()
                    found.append([os.path.abspath(entry.path), stat.st_size, stat.st_mtime_ns])
            except FileNotFoundError:
                continue
    found.sort(key=lambda f: (f[2], f[0]))
    return found


def discard(path: str, length: int, mtime_ns: int, archive_dir: str | None) -> bool:
    """Delete or archive (under `archive_dir`, at its own absolute path, as Spark's sourceArchiveDir
    does) the file read at `path`, if it is still the file that was read (same length and
    modification time: a new file may come under the same name). Returns whether it went."""
    try:
        stat = os.stat(path)
    except FileNotFoundError:
        return False
    if (stat.st_size, stat.st_mtime_ns) != (length, mtime_ns):
        return False
    remove(Path(path), archive_dir)
    return True


def remove(path: Path, archive_dir: str | None) -> None:
    """Delete the file at `path`, or move it under `archive_dir` at its own absolute path (where
    Spark's sourceArchiveDir puts it)."""
    if archive_dir:
        target = Path(archive_dir) / str(path).lstrip(os.sep)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(path, target)
    else:
        path.unlink(missing_ok=True)


def offsets_files(offset_line: str) -> list[list] | None:
    """The files of a line of Spark's offset log, if it is this source's offset."""
    if not offset_line.startswith("{"):
        return None
    offset = json.loads(offset_line)
    return offset.get("files") if isinstance(offset, dict) and "n" in offset else None


def _spread(files: list[tuple[str, int]], count: int) -> list[list[tuple[str, int]]]:
    """`files` in at most `count` runs of about equal bytes, each in the batch's order."""
    total = sum(length for _, length in files) or 1
    groups: list[list[tuple[str, int]]] = [[]]
    filled = 0
    for path, length in files:
        if groups[-1] and filled >= total * len(groups) / count:
            groups.append([])
        groups[-1].append((path, length))
        filled += length
    return groups


# ---- Which source reads a checkpoint's input -------------------------------------------------------

def source_of(checkpoint: Path, folder: str, cleanup: str, afresh: bool, spooled: bool,
              takes_cleanup: bool = True, echo=print) -> tuple[str, str]:
    """The source that reads `folder` for a run on `checkpoint`: (DROP or FILES, the cleanup it
    reads with). A run that starts afresh reads a local folder whose files go once read (cleanup
    delete or archive, or a socket's spool) with this one, and records it; a run that continues
    reads with the source its checkpoint began with (a checkpoint from before this source has no
    record: Spark's file source). `takes_cleanup`: the job.py passes the cleanup on (one compiled
    before --input-cleanup does not: Spark's file source, as it was compiled for)."""
    record = checkpoint / RECORD
    if afresh or not record.exists():
        live = spooled or cleanup != "keep"
        kind = DROP if afresh and live and takes_cleanup and "://" not in folder else FILES
        began = "delete" if spooled else cleanup
        checkpoint.mkdir(parents=True, exist_ok=True)
        record.write_text(f"{kind} {began}\n")
    else:
        kind, began = record.read_text().split(maxsplit=1)
        began = began.strip()
    if kind == DROP and cleanup == "keep" and not spooled:
        echo(f"the checkpoint in {checkpoint} reads {folder} as a live feed, its files "
             + ("deleted" if began == "delete" else f"moved to {began[len('archive:'):]}")
             + " once read: it goes on so ('sscript run --fresh' starts afresh and keeps them)")
        return kind, began
    if kind == FILES and cleanup != "keep" and not afresh:
        echo(f"the checkpoint in {checkpoint} began on Spark's file source, which goes on reading {folder} "
             f"(its log keeps an entry per file read; 'sscript run --fresh' starts on the drop-folder source)")
    return kind, ("delete" if spooled and kind == DROP else cleanup)
