"""The feed, paced by the wall clock: a reading's event time is the wall-clock time (ms) at which it is
generated; sensor i reads at ts = (k + phase_i) * period, period = 1000 * sensors / rate ms.
  file:   every second, the readings of the last second ([k s + 0.5 s, k s + 1.5 s): Spark triggers on
          whole seconds, so a file lands half a trigger interval from one) go into a new CSV file in
          OUT/input, written as a dot-file and renamed (os.replace), which Spark's file source ignores
          until the rename. Files more than a minute behind what the job has processed are deleted.
  socket: a TCP server on 127.0.0.1 (`--input socket://127.0.0.1:PORT`); every 100 ms the readings of
          the last 100 ms, as CSV lines, written with sendall. Spark's socket source reads every line
          into the driver as it comes, so a send blocked for 60 s means the job stopped reading: the
          run ends there.
  mqtt:   a mosquitto broker of its own on 127.0.0.1 (scripts/mosquitto.py; `--input
          mqtt://127.0.0.1:PORT/soak/#`); every 100 ms the readings of the last 100 ms, as messages of
          `--lines-per-message` CSV lines (a gateway's batch) on 64 gateway topics, published with QoS 1; a
          chunk is written once the broker has acknowledged every message of it.
  kafka:  an Apache Kafka broker of its own on 127.0.0.1 (scripts/kafka_broker.py, in OUT/broker;
          `--input kafka://127.0.0.1:PORT/soak`): a topic of `--partitions` partitions, the job's own
          count (one Spark task a topic partition per batch); every 100 ms the readings of the last
          100 ms, as messages of `--lines-per-message` CSV lines (a gateway's batch, as for mqtt),
          produced by kafka_broker.Gateway (librdkafka, lz4); a chunk is written once the broker has
          taken every message of it (the producer's flush), so a broker that takes nothing for 60 s
          ends the run. The broker is stopped once the job has stopped (`release`).
--days (a compressed month, `Clock`): event time runs `speedup` times faster than the wall clock
from the start (a day of event time per `--day-seconds`), each sensor reading `speedup` times less
often per event second so that the rate per wall second stays --rate, and LATE_SHARE of the
readings come late: 1 to 10 event minutes, and TOO_LATE_SHARE of those TOO_LATE_DAYS days (past a
short archive horizon: too late to correct).
Each chunk's wall time once written (the rename done, sendall returned, a broker's acknowledgements
in) is recorded with the newest event time in it: the lag and the latency are measured from there,
for every source alike (soaking.sampling, soaking.figures). The job is started on a priming chunk
(one second of readings); the paced feed begins when told (`go`) and runs until `until`.
"""

from __future__ import annotations

import bisect
import io
import math
import os
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pa_csv

from .job import JobProcess

HEADER = b"sensor_id,ts,value\n"
FILE_CHUNK_MS, FILE_PHASE_MS = 1000, 500
SOCKET_CHUNK_MS = 100
SEND_TIMEOUT = 60.0
LATE_SHARE, LATE_MINUTES = 0.001, (1, 10)  # --days: readings this late (event minutes)
TOO_LATE_SHARE, TOO_LATE_DAYS = 0.01, 3  # of those late: this many days late instead


@dataclass(frozen=True)
class Clock:
    """Event time from wall time: the same (`speedup` 1), or `speedup` times faster from `origin_ms`."""

    speedup: float = 1.0
    origin_ms: int = 0

    def event_ms(self, wall_ms: float) -> int:
        return int(self.origin_ms + (wall_ms - self.origin_ms) * self.speedup)


class Readings:
    """The fleet's readings, paced by the wall clock: sensor i at ts = (k + phase_i) * period."""

    def __init__(self, sensors: list[str], referenced: frozenset[str], rate: float, seed: int = 7,
                 speedup: float = 1.0):
        rng = np.random.default_rng(seed)
        self.speedup = speedup  # event time per wall time (--days); above 1, some readings come late
        self.names = pa.array(sensors, pa.string())
        self.phase = rng.random(len(sensors))
        self.wave = rng.uniform(0, 2 * np.pi, len(sensors))
        self.is_referenced = np.array([s in referenced for s in sensors])
        self.rng = rng
        self.rate = rate

    def between(self, start_ms: int, end_ms: int) -> tuple[bytes, int, int, int]:
        """CSV lines of the readings with start_ms <= ts < end_ms: (text, readings, referenced, newest ts)."""
        period = 1000.0 * len(self.phase) * self.speedup / self.rate  # event ms between two readings of a sensor
        k = np.arange(math.floor(start_ms / period) - 1, math.ceil(end_ms / period) + 1)
        times = (k[:, None] + self.phase[None, :]) * period
        ts = np.floor(times).astype(np.int64)
        inside = (ts >= start_ms) & (ts < end_ms)
        row, sensor = np.nonzero(inside)
        ts = ts[row, sensor]
        order = np.argsort(ts, kind="stable")
        ts, sensor = ts[order], sensor[order]
        value = np.round(10 * np.sin(2 * np.pi * ts / 600_000 + self.wave[sensor])
                         + self.rng.normal(0, 1, len(ts)), 3)
        newest = int(ts[-1]) if len(ts) else start_ms - 1
        if self.speedup > 1 and len(ts):
            ts = self._some_late(ts)
        table = pa.table({"sensor_id": self.names.take(pa.array(sensor)), "ts": pa.array(ts), "value": value})
        buffer = io.BytesIO()
        pa_csv.write_csv(table, buffer, pa_csv.WriteOptions(include_header=False, quoting_style="none"))
        return buffer.getvalue(), len(ts), int(self.is_referenced[sensor].sum()), newest

    def _some_late(self, ts: np.ndarray) -> np.ndarray:
        """`ts` with LATE_SHARE of them moved back 1-10 event minutes (TOO_LATE_SHARE of those
        TOO_LATE_DAYS days): late readings, corrected or too late to correct."""
        late = self.rng.random(len(ts)) < LATE_SHARE
        delay = self.rng.uniform(*LATE_MINUTES, len(ts)) * 60_000
        delay[self.rng.random(len(ts)) < TOO_LATE_SHARE] = TOO_LATE_DAYS * 86_400_000
        return np.where(late, ts - delay.astype(np.int64), ts)


@dataclass
class Chunk:
    written: float  # wall time once written (s since the epoch)
    newest_ts: int  # ms
    readings: int
    referenced: int
    rate: float  # the rate it was fed at
    lateness: float  # written - end of the chunk's event time (s): the feed's own delay
    span: float  # the event time it covers (s)


class Feed(threading.Thread):
    """Writes the fleet's readings in chunks paced by the wall clock, and records every chunk."""

    chunk_ms = FILE_CHUNK_MS
    phase_ms = 0

    def __init__(self, readings: Readings, clock: Clock = Clock()):
        super().__init__(daemon=True, name=type(self).__name__)
        self.readings = readings
        self.clock = clock
        self.chunks: list[Chunk] = []
        self.started_at: float | None = None  # wall time the paced feed began
        self.until: float = math.inf
        self.go = threading.Event()
        self.done = threading.Event()
        self.error: str | None = None
        self.cursor_ms = 0

    def prime(self) -> None:
        """One second of readings before the paced feed, to start the job on."""
        now = int(time.time() * 1000)
        self.write_chunk(now - 1000, now)

    def write_chunk(self, start_ms: int, end_ms: int) -> None:
        text, count, referenced, newest = self.readings.between(self.clock.event_ms(start_ms), self.clock.event_ms(end_ms))
        self.emit(text, newest)
        written = time.time()
        self.chunks.append(Chunk(written, newest, count, referenced, self.readings.rate, written - end_ms / 1000,
                                 (end_ms - start_ms) / 1000))
        self.cursor_ms = end_ms

    def run(self) -> None:
        self.go.wait()
        try:
            self.started_at = time.time()
            start = self._boundary(self.started_at * 1000)
            self.cursor_ms = start - self.chunk_ms  # the first chunk ends at the first boundary
            while not self.done.is_set():
                end = self._boundary(max(time.time() * 1000, self.cursor_ms + 1))
                if end / 1000 > self.until:
                    break
                time.sleep(max(0.0, end / 1000 - time.time()))
                if self.done.is_set():  # closed while it slept (--find-max's failed step): nothing more to write
                    break
                self.write_chunk(self.cursor_ms, end)
        except TimeoutError as exc:  # the socket's send blocked, or a broker acknowledged nothing
            self.error = str(exc) or f"the job read nothing from the socket for {SEND_TIMEOUT:.0f} s"
        except (OSError, ValueError) as exc:
            if not self.done.is_set():  # else close() shut the socket under a write: not the job's failure
                self.error = f"{type(exc).__name__}: {exc}"
        finally:
            self.done.set()

    def _boundary(self, ms: float) -> int:
        """The next chunk boundary at or after `ms`."""
        return int(math.ceil((ms - self.phase_ms) / self.chunk_ms) * self.chunk_ms + self.phase_ms)

    def emit(self, text: bytes, newest_ts: int) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """Stop feeding (the paced feed ends after the chunk it is writing)."""
        self.done.set()

    def release(self) -> None:
        """Once the job has stopped: what its source needed until then goes (a broker of its own)."""

    # Read by the watcher and the sampler (lists only grow; a snapshot of their length is safe).
    def newest_written(self, at: float | None = None) -> int | None:
        chunks = self.chunks[:]
        if at is None:
            return chunks[-1].newest_ts if chunks else None
        index = bisect.bisect_right([c.written for c in chunks], at)  # written times only grow
        return chunks[index - 1].newest_ts if index else None


class FileFeed(Feed):
    chunk_ms, phase_ms = FILE_CHUNK_MS, FILE_PHASE_MS

    def __init__(self, readings: Readings, folder: Path, clock: Clock = Clock()):
        super().__init__(readings, clock)
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.files: list[tuple[Path, int]] = []  # (file, newest ts), until deleted
        self.written = 0

    @property
    def source(self) -> str:
        return str(self.folder)

    def emit(self, text: bytes, newest_ts: int) -> None:
        name = f"readings-{self.written:06d}.csv"
        temporary = self.folder / f".{name}"
        temporary.write_bytes(HEADER + text)
        os.replace(temporary, self.folder / name)
        self.written += 1
        self.files.append((self.folder / name, newest_ts))

    def clean(self, processed_ms: int) -> None:
        """Delete files more than a minute of event time behind what every partition has processed:
        Spark read them in a committed batch (files are read in modification-time order, whole)."""
        while self.files and self.files[0][1] < processed_ms - 60_000:
            path, _ = self.files.pop(0)
            path.unlink(missing_ok=True)


class MqttFeed(Feed):
    chunk_ms, phase_ms = SOCKET_CHUNK_MS, 0
    gateways = 64

    def __init__(self, readings: Readings, folder: Path, lines_per_message: int, clock: Clock = Clock()):
        import paho.mqtt.client as paho
        from mosquitto import Broker  # scripts/mosquitto.py
        from paho.mqtt.enums import CallbackAPIVersion

        super().__init__(readings, clock)
        self.lines_per_message = lines_per_message
        self.broker = Broker(folder).start()
        self.client = paho.Client(CallbackAPIVersion.VERSION2, client_id="soak-gateways")
        self.client.max_inflight_messages_set(1000)
        self.client.max_queued_messages_set(0)
        self.client.connect("127.0.0.1", self.broker.port)
        self.client.loop_start()
        self.messages = 0

    @property
    def source(self) -> str:
        return f"mqtt://127.0.0.1:{self.broker.port}/soak/#"

    def emit(self, text: bytes, newest_ts: int) -> None:
        from paho.mqtt.enums import MQTTErrorCode

        lines = text.splitlines(keepends=True)
        sent = []
        for start in range(0, len(lines), self.lines_per_message):
            payload = b"".join(lines[start:start + self.lines_per_message])
            while True:  # paho numbers messages in flight 1..65,535: a number still in use waits its turn
                info = self.client.publish(f"soak/gw{self.messages % self.gateways}", payload, qos=1)
                if info.rc != MQTTErrorCode.MQTT_ERR_QUEUE_SIZE:
                    break
                time.sleep(0.001)
            sent.append(info)
            self.messages += 1
        deadline = time.monotonic() + SEND_TIMEOUT
        for info in sent:  # the chunk is written once the broker has acknowledged every message of it
            info.wait_for_publish(max(0.0, deadline - time.monotonic()))
            if not info.is_published():
                raise TimeoutError(f"the MQTT broker acknowledged nothing for {SEND_TIMEOUT:.0f} s")

    def close(self) -> None:
        super().close()
        self.client.disconnect()
        self.client.loop_stop()
        self.broker.stop()


class KafkaFeed(Feed):
    chunk_ms, phase_ms = SOCKET_CHUNK_MS, 0
    topic = "soak"

    def __init__(self, readings: Readings, folder: Path, lines_per_message: int, partitions: int,
                 clock: Clock = Clock()):
        from kafka_broker import Gateway, KafkaBroker  # scripts/kafka_broker.py

        super().__init__(readings, clock)
        self.broker = KafkaBroker(folder, heap="1g").start()
        try:
            self.url = self.broker.topic(self.topic, partitions)
            self.gateway = Gateway(self.broker.bootstrap, self.topic, lines_per_message)
        except BaseException:
            self.broker.stop(kill=True)
            raise

    @property
    def source(self) -> str:
        return self.url

    def emit(self, text: bytes, newest_ts: int) -> None:
        self.gateway.send(text.decode().splitlines())
        try:  # the chunk is written once the broker has taken every message of it
            self.gateway.flush(SEND_TIMEOUT)
        except RuntimeError as exc:
            raise TimeoutError(str(exc)) from None

    def release(self) -> None:
        """The broker, once the job has stopped (stopped before it, the job's batch in flight would wait
        for it and the stop with it)."""
        self.broker.stop()


class SocketFeed(Feed):
    chunk_ms, phase_ms = SOCKET_CHUNK_MS, 0

    def __init__(self, readings: Readings, clock: Clock = Clock()):
        super().__init__(readings, clock)
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.connection: socket.socket | None = None

    @property
    def source(self) -> str:
        return f"socket://127.0.0.1:{self.port}"

    def accept(self, job: "JobProcess", timeout: float) -> None:
        """Wait for the job's socket source to connect (while the job lives)."""
        self.server.settimeout(1.0)
        deadline = time.time() + timeout
        while self.connection is None:
            try:
                self.connection, _ = self.server.accept()
            except TimeoutError:
                if not job.alive() or time.time() > deadline:
                    raise SystemExit("the job did not connect to the socket:\n" + "\n".join(job.tail[-20:]))
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        # Spark's socket source reads every line into the driver as it comes; a send that blocks this
        # long means the job has stopped reading.
        self.connection.settimeout(SEND_TIMEOUT)

    def emit(self, text: bytes, newest_ts: int) -> None:
        self.connection.sendall(text)

    def close(self) -> None:
        super().close()
        for end in (self.connection, self.server):
            if end is not None:
                try:
                    end.close()
                except OSError:
                    pass
