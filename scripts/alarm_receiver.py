"""A webhook that receives the alarms a job delivers (`sscript run ... --alerts http://127.0.0.1:9000/alarms`):
run as a script it prints them; imported (`Receiver`), it is the receiver of the alarm tests and
benchmarks, which can be told to fail.

    .venv/bin/python scripts/alarm_receiver.py [--port 9000] [--host 127.0.0.1] [--for SECONDS]

Answers every POST with 200 and prints each alarm of it (a body holds a group's `alarms`) on a line:
its state (firing, updated, resolved), the stream, the time people read, the value and the alarm's
id; an alarm whose id it has seen already (delivery is at least once: a job killed before it heard
the 200 sends it again) is counted as a repeat and not printed again, as a receiver should do. A
body that is not SensorScript's JSON is printed as it came. Stops after `--for` seconds, or with
Ctrl-C, and says how many it received.

`Receiver` keeps every alarm it is sent with the time it came and deduplicates by `id`, and can be
told to fail: answer 500 (or any status) to the next requests, answer every Nth request 503 (a
receiver under load), answer too late (a timeout), answer every request after a delay (a slow
receiver), be down (its port closed) for a while, or hold every request after the first few
alarms unanswered.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from sensorscript.hosts import free_port


def _alarms(body: bytes) -> tuple[dict | None, list | None]:
    """A request's body read once: (its document, its alarms), None for what it is not. Strict JSON,
    as a receiver in Go or JavaScript reads it: NaN and Infinity are not JSON."""
    try:
        document = json.loads(body, parse_constant=_not_json)
    except ValueError:
        document = None
    alarms = document.get("alarms") if isinstance(document, dict) else None
    return document, alarms if isinstance(alarms, list) else None


def _not_json(constant: str):
    raise ValueError(f"{constant} is not JSON")


class Receiver:
    def __init__(self, port: int | None = None, host: str = "127.0.0.1", on_alarm=None):
        self.host, self.port = host, port or free_port()
        self.on_alarm = on_alarm  # told each alarm not seen before, and each body that is not SensorScript's
        self.lock = threading.Lock()
        self.received: list[tuple[float, dict]] = []  # every alarm of a request answered 2xx: (receipt time, alarm)
        self.bodies: list[dict] = []  # every body answered 2xx, as it came
        self.seen: set[str] = set()
        self.requests = 0  # requests come
        self.refused = 0  # requests answered with an error (or too late)
        self.fail_next = 0  # answer the next this many with `fail_status`
        self.fail_status = 500
        self.fail_every = 0  # answer every this many-th request 503 (a receiver under load)
        self.delay_s = 0.0  # answer every request after this long (a slow receiver)
        self.slow_next = 0  # answer the next this many only after `slow_s` (the sender times out first)
        self.slow_s = 12.0
        self.hold_after: int | None = None  # once this many alarms are received, hold each request unanswered
        self.held = 0  # requests held so far; `release` answers them with 503
        self.coming = 0  # alarms of the requests being answered, not yet in `received`
        self.release = threading.Event()
        self.server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/hook"

    def start(self) -> "Receiver":
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                status = receiver._answer(body)
                self.send_response(status)
                self.end_headers()

            def log_message(self, *args):  # no line per request
                pass

        self.server = ThreadingHTTPServer((self.host, self.port), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def _answer(self, body: bytes) -> int:
        # Whether to hold is decided with the alarms of the requests being answered counted, not only
        # those received: two requests that come together must not both pass `hold_after`.
        document, alarms = _alarms(body)
        with self.lock:
            hold = self.hold_after is not None and len(self.received) + self.coming >= self.hold_after
            self.held += hold
            coming = 0 if hold else len(alarms or ())
            self.coming += coming
        try:
            return self._answered(body, document, alarms, hold)
        finally:
            with self.lock:
                self.coming -= coming

    def _answered(self, body: bytes, document: dict | None, alarms: list | None, hold: bool) -> int:
        if hold:
            self.release.wait()
            with self.lock:
                self.refused += 1
            return 503
        with self.lock:
            self.requests += 1
            fail, slow = self.fail_next > 0, self.fail_next <= 0 and self.slow_next > 0
            self.fail_next -= fail
            self.slow_next -= slow
            every = bool(self.fail_every and self.requests % self.fail_every == 0)
        if self.delay_s:
            time.sleep(self.delay_s)
        if slow:
            time.sleep(self.slow_s)
        if fail or every or slow:
            with self.lock:
                self.refused += 1
            return 503 if every else self.fail_status if fail else 200
        now = time.time()
        if alarms is None or not all(isinstance(a, dict) and "id" in a for a in alarms):
            if self.on_alarm is not None:
                self.on_alarm(None, body)
            return 200
        with self.lock:
            self.bodies.append(document)
            self.received += [(now, alarm) for alarm in alarms]
            new = [alarm for alarm in alarms if alarm["id"] not in self.seen]
            self.seen.update(alarm["id"] for alarm in new)
        for alarm in new if self.on_alarm is not None else ():
            self.on_alarm(alarm, body)
        return 200

    def stop(self) -> None:
        """Down: the port closed (connections refused)."""
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None

    def ids(self) -> list[str]:
        with self.lock:
            return [alarm["id"] for _, alarm in self.received]

    def unique(self) -> dict[str, dict]:
        """The alarms as a deduplicating receiver keeps them: one per id."""
        with self.lock:
            return {alarm["id"]: alarm for _, alarm in self.received}

    def wait_for(self, count: int, timeout: float = 30.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if len(self.unique()) >= count:
                return True
            time.sleep(0.05)
        return False


def _print(alarm: dict | None, body: bytes) -> None:
    if alarm is None:
        print(f"received: {body.decode(errors='replace')}", flush=True)
        return
    what = "retracted" if alarm.get("retracted") else f"value {alarm.get('value')}"
    print(f"{alarm.get('state', 'alarm')} {alarm.get('stream')} at {alarm.get('ts')}: {what} "
          f"(version {alarm.get('version')}, id {alarm['id']})", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=9000)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--for", dest="seconds", type=float, help="stop after this many seconds")
    args = parser.parse_args()
    receiver = Receiver(args.port or None, args.host, on_alarm=_print).start()
    print(f"receiving alarms on http://{args.host}:{receiver.port}/ (Ctrl-C stops)", flush=True)
    try:
        if args.seconds:
            time.sleep(args.seconds)
        else:
            threading.Event().wait()
    except KeyboardInterrupt:
        pass
    receiver.stop()
    repeats = len(receiver.received) - len(receiver.seen)
    print(f"{len(receiver.seen):,} alarms received, {repeats:,} repeats dropped", flush=True)


if __name__ == "__main__":
    main()
