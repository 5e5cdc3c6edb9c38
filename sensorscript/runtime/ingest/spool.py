"""socket://HOST:PORT through a spool: the driver reads the socket into small files that Spark's
file source reads, and deletes once a batch has committed them. An MQTT broker's topic is spooled
the same way (runtime/ingest/mqtt_spool.py), its files written durably (`write_file`).

Spark's own socket source is for tests: it keeps every line not yet committed in the driver's
heap, and its tasks fetch each row by position from a linked list, so a batch of n lines costs
on the order of n^2 (measured by scripts/soak.py: at 40,000 readings/s its batches fell behind
within a minute and the driver ran out of heap). The spool costs a file write per quarter of a
second, keeps memory flat, and makes what was read durable: lines spooled but not yet processed
when a job is killed are read by the next run.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path

PREFIX = "spool:"  # the input a query reads: spool:FOLDER (runtime/ingest/source.py)


class SocketSpool:
    """A thread that connects to HOST:PORT and writes what it reads, in whole lines, to a new file of
    `folder` every `roll` seconds (named by time, written under a hidden name, then renamed)."""

    def __init__(self, address: str, folder: Path, roll: float = 0.25, echo=print):
        host, _, port = address[len("socket://"):].rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"{address}: a socket source is socket://HOST:PORT")
        self.host, self.port = host, int(port)
        self.folder = Path(folder)
        self.roll = roll
        self.echo = echo
        self.lines = 0
        self.error: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sscript-socket-spool", daemon=True)

    @property
    def input(self) -> str:
        return PREFIX + str(self.folder.resolve())

    def start(self, timeout: float = 30.0) -> "SocketSpool":
        """Connect (retrying for `timeout` seconds, as a feed may start after the job), then spool."""
        self.folder.mkdir(parents=True, exist_ok=True)
        deadline = time.monotonic() + timeout
        while True:
            try:
                self._socket = socket.create_connection((self.host, self.port), timeout=5)
                break
            except OSError as exc:
                if time.monotonic() > deadline:
                    raise ValueError(f"socket://{self.host}:{self.port}: cannot connect ({exc.strerror or exc})") \
                        from None
                time.sleep(0.5)
        self._socket.settimeout(self.roll)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)

    def _run(self) -> None:
        pending = bytearray()
        next_roll = time.monotonic() + self.roll
        try:
            while not self._stop.is_set():
                try:
                    chunk = self._socket.recv(1 << 20)
                    if not chunk:  # the feed closed the connection: what came is spooled, nothing more comes
                        self.echo(f"socket://{self.host}:{self.port} closed its connection after "
                                  f"{self.lines:,} lines")
                        break
                    pending += chunk
                except socket.timeout:
                    pass
                if time.monotonic() >= next_roll:
                    pending = self._write(pending)
                    next_roll = time.monotonic() + self.roll
        except OSError as exc:
            self.error = f"socket://{self.host}:{self.port}: {exc.strerror or exc}"
            self.echo(f"error: {self.error}; the lines read before it are spooled")
        finally:
            self._write(pending, final=True)
            self._socket.close()

    def _write(self, pending: bytearray, final: bool = False) -> bytearray:
        """Write the whole lines of `pending` to a new file; returns what is left (a line cut short)."""
        end = len(pending) if final else pending.rfind(b"\n") + 1
        if end <= 0:
            return pending
        write_file(self.folder, bytes(pending[:end]) + (b"" if pending[end - 1:end] == b"\n" else b"\n"))
        self.lines += pending.count(b"\n", 0, end)
        return pending[end:]


def spool_name() -> str:
    """A new spool file's name: by time, so that names sort in the order the files were written."""
    return f"{time.time_ns():020d}.csv"


def write_file(folder: Path, data: bytes, durable: bool = False, name: str | None = None,
               before_rename=None) -> Path:
    """Write `data` (whole lines) to a new file of `folder`: under a hidden name (which the sources
    skip), then renamed, so a reader sees the whole file or none of it. `durable`: the data and the
    rename are on disk (fsync of the file, then of the folder) when this returns, so what the file
    holds may be acknowledged to its sender. `before_rename()` runs after the data is on disk and
    before the rename (the MQTT spool writes its journal there)."""
    name = name or spool_name()
    temporary = folder / f".{name}.tmp"  # the sources skip names starting with '.'
    with open(temporary, "wb") as stream:
        stream.write(data)
        if durable:
            stream.flush()
            os.fsync(stream.fileno())
    if before_rename is not None:
        before_rename()
    os.replace(temporary, folder / name)
    if durable:
        sync_folder(folder)
    return folder / name


def sync_folder(folder: Path) -> None:
    """fsync a folder: the names created or renamed in it are on disk."""
    handle = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(handle)
    finally:
        os.close(handle)
