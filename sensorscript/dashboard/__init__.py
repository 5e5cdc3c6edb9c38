"""`sscript dashboard OUT`: a local web page over what a job writes into OUT (results, alarms, the
job's health, the plan), refreshed every few seconds, while the job runs or after it ended.

    reading.py   OUT read-only (JobOutput): status.json, plan.json, the sink's tables, each part at most once a second
      plan_summary.py  plan.json boiled down to what the page shows
      kept.py          what is kept between looks: the alarms, the streams shown, the health tables
      sink_look.py     one look at a sink; sqlite_look.py, file_look.py (CSV, Parquet): only what is new
    figures.py   how each stream, the alarms and the health measures are drawn
    app.py       the Dash app: layout and a refresh callback per section
    access.py    who may open it: basic auth or a bearer token, and when one is required
    metrics.py   /metrics for Prometheus, from status.json at each scrape
    browser.py   headless chromium for the tests and scripts/screenshot_dashboard.py
"""

from __future__ import annotations

import errno
import logging
import socket
import threading
import time
from datetime import tzinfo
from pathlib import Path

from sensorscript.dashboard.access import (Credentials, RequireLogin, ServedNames, content_security_policy,
                                           required, served_names)
from sensorscript.errors import Diagnostic, SensorScriptError


class Dashboard:
    """The page's HTTP server (waitress), bound (so a port in use is known before anything is served).

    `credentials`: the logins it asks for (access.py); on an address other than loopback it refuses
    to start without one unless `no_auth`. It answers only requests naming it: loopback names, `host`
    and `server_names` (--server-name). It also serves /metrics for Prometheus (metrics.py)."""

    def __init__(self, out: Path, tz: tzinfo, port: int = 8050, host: str = "127.0.0.1",
                 credentials: Credentials | None = None, no_auth: bool = False, server_names: tuple[str, ...] = ()):
        from waitress import create_server

        from sensorscript.dashboard.app import create_app

        listening = _listen(host, port)  # first: an unknown host or a port in use is what to fix first
        try:
            self.credentials = required(host, listening.getsockname()[1], credentials, no_auth)
        except SensorScriptError:
            listening.close()
            raise
        self.app = create_app(Path(out), tz)
        wsgi = self.app.server if self.credentials is None else RequireLogin(self.app.server, self.credentials)
        wsgi = ServedNames(wsgi, served_names(host, server_names), content_security_policy(self.app.csp_hashes()))
        # A page sends a request per section at each refresh (6), so a few pages need more threads than
        # waitress' 4; a request past them waits in its queue.
        self.server = create_server(wsgi, sockets=[listening], threads=THREADS, ident="SensorScript")
        # Waitress says "Task queue depth is N" whenever its threads are all busy: a moment's wait for
        # a section of a page, not news for the terminal the dashboard runs in.
        logging.getLogger("waitress.queue").setLevel(logging.ERROR)
        self.url = f"http://{_bracketed(host)}:{listening.getsockname()[1]}/"
        self._serving, self._stop, self._done = threading.Event(), threading.Event(), threading.Event()
        self._closing, self._closed = threading.Lock(), False

    def serve_forever(self) -> None:
        """Serve until shutdown() from another thread, or Ctrl-C."""
        from waitress import wasyncore

        self._serving.set()
        try:
            # Waitress' loop, a poll at a time, so that it stops at a flag and everything is closed here,
            # in its own thread, once nothing polls (closing from another thread races with its select).
            while not self._stop.is_set() and self.server._map:
                wasyncore.loop(timeout=POLL_S, map=self.server._map, use_poll=self.server.adj.asyncore_use_poll,
                               count=1)
        except KeyboardInterrupt:
            pass
        finally:
            self._drain()
            self.close()
            self._done.set()

    def _drain(self) -> None:
        """In the server's thread, as it stops: no new connection; the requests under way answered
        (their threads need the loop to send, and pull its trigger when done), for DRAIN_S at most;
        then no thread left to pull the trigger once it is closed."""
        from waitress import wasyncore

        wasyncore.dispatcher.close(self.server)  # its listening socket only (server.close() closes the trigger too)
        workers = self.server.task_dispatcher
        deadline = time.monotonic() + DRAIN_S
        while (workers.active_count or workers.queue) and self.server._map and time.monotonic() < deadline:
            wasyncore.loop(timeout=0.05, map=self.server._map, use_poll=self.server.adj.asyncore_use_poll, count=1)
        workers.shutdown(timeout=DRAIN_S)

    def shutdown(self) -> None:
        """Stop serving, from another thread; returns once the server has stopped."""
        self._stop.set()
        if not self._serving.is_set():
            self.close()
            return
        with self._closing:
            if not self._closed:
                self.server.pull_trigger()  # wakes its loop at once (else within POLL_S)
        self._done.wait(10)

    def close(self) -> None:
        """Free the port (of a server that never served: serve_forever() closes when it stops)."""
        from waitress import wasyncore

        with self._closing:  # once; and no trigger pulled after (its file descriptor may be another's by then)
            if not self._closed:
                self._closed = True
                wasyncore.close_all(self.server._map, ignore_all=True)
                self.server.task_dispatcher.shutdown(timeout=DRAIN_S)


POLL_S = 1.0  # how long a stop may wait for the loop when its trigger cannot wake it
DRAIN_S = 5.0  # how long a stop waits for the requests under way
THREADS = 8


def _bracketed(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _listen(host: str, port: int) -> socket.socket:
    """The listening socket waitress serves; a port in use, or an address not of this machine, in one
    sentence before anything is served."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        listening = socket.socket(family, kind, proto)
    except OSError as exc:  # an unknown host
        raise _cannot_serve(host, port, exc) from None
    try:
        listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listening.bind(address)
        listening.listen(1024)
    except OSError as exc:
        listening.close()
        raise _cannot_serve(host, port, exc) from None
    return listening


def _cannot_serve(host: str, port: int, exc: OSError) -> SensorScriptError:
    if exc.errno == errno.EADDRINUSE:
        message = (f"port {port} on {host} is in use (another dashboard, or another program); choose another "
                   f"with --port N")
    else:  # an unknown host, an address not of this machine, a port only root may take
        message = f"cannot serve on {host}:{port}: {exc.strerror or exc}"
    return SensorScriptError([Diagnostic("error", message)])


def check_out(out: Path) -> None:
    """A folder that holds a compiled job (its plan.json), or one clear sentence."""
    from sensorscript.runtime.plan.loading import compiled_job

    if not Path(out).exists():
        raise SensorScriptError([Diagnostic("error", f"{out}: no such folder; give the folder a job was compiled "
                                                     f"into (sscript compile WORKFLOWS... -o {out})")])
    compiled_job(Path(out))
    if not (Path(out) / "plan.json").is_file():
        raise SensorScriptError([Diagnostic("error", f"{Path(out) / 'plan.json'}: missing; compile the job again "
                                                     f"(sscript compile WORKFLOWS... -o {out})")])
