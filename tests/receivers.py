"""A webhook receiver for the alarm tests and the alarm benchmark: an HTTP server on a free port of
127.0.0.1, in a thread, that keeps every alarm it is sent with the time it came, deduplicates by
`id` as a receiver should, and can be told to fail: answer 500, answer too late (a timeout), or
be down (its port closed) for a while, or hold every request after the first few unanswered."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.brokers import free_port


class Receiver:
    def __init__(self, port: int | None = None):
        self.port = port or free_port()
        self.lock = threading.Lock()
        self.received: list[tuple[float, dict]] = []  # every request answered 2xx: (receipt time, alarm)
        self.refused = 0  # requests answered with an error (or too late)
        self.fail_next = 0  # answer the next this many with `fail_status`
        self.fail_status = 500
        self.slow_next = 0  # answer the next this many only after `slow_s` (the sender times out first)
        self.slow_s = 12.0
        self.hold_after: int | None = None  # once this many are received, hold each request unanswered
        self.held = 0  # requests held so far; `release` answers them with 503
        self.release = threading.Event()
        self.server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def start(self) -> "Receiver":
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with receiver.lock:
                    hold = receiver.hold_after is not None and len(receiver.received) >= receiver.hold_after
                    receiver.held += hold
                if hold:
                    receiver.release.wait()
                    with receiver.lock:
                        receiver.refused += 1
                    self.send_response(503)
                    self.end_headers()
                    return
                with receiver.lock:
                    fail, slow = receiver.fail_next > 0, receiver.fail_next <= 0 and receiver.slow_next > 0
                    receiver.fail_next -= fail
                    receiver.slow_next -= slow
                if slow:
                    time.sleep(receiver.slow_s)
                if fail or slow:
                    with receiver.lock:
                        receiver.refused += 1
                    self.send_response(receiver.fail_status if fail else 200)
                    self.end_headers()
                    return
                with receiver.lock:
                    receiver.received.append((time.time(), json.loads(body)))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

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
