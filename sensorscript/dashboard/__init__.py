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
import sys
import threading
from datetime import tzinfo
from pathlib import Path

from cheroot import wsgi

from sensorscript.dashboard.access import (Credentials, Guesses, RequireLogin, ServedNames,
                                           content_security_policy, required, served_names)
from sensorscript.errors import Diagnostic, SensorScriptError


class Dashboard:
    """The page's HTTP(S) server (cheroot, CherryPy's WSGI server), bound first (so a port in use is
    known before anything is served).

    `credentials`: the logins it asks for (access.py); on an address other than loopback it refuses
    to start without one unless `no_auth`; failed logins are counted per client (behind a proxy of
    `trusted_proxies`, the address it was reached from: access.client_of), slowed (`guesses`) and told
    to `echo`. `tls`: (certificate, key) files, and the page is served over HTTPS. It answers only
    requests naming it: loopback names, `host` and `server_names` (--server-name). It also serves
    /metrics for Prometheus (metrics.py)."""

    def __init__(self, out: Path, tz: tzinfo, port: int = 8050, host: str = "127.0.0.1",
                 credentials: Credentials | None = None, no_auth: bool = False, server_names: tuple[str, ...] = (),
                 tls: tuple[str, str] | None = None, echo=None, guesses: Guesses | None = None,
                 trusted_proxies: tuple = ()):
        from sensorscript.dashboard.app import create_app

        adapter = _tls(*tls) if tls else None  # a certificate that does not load: said before anything is bound
        listening = _listen(host, port)  # first: an unknown host or a port in use is what to fix first
        try:
            self.credentials = required(host, listening.getsockname()[1], credentials, no_auth)
        except SensorScriptError:
            listening.close()
            raise
        self.app = create_app(Path(out), tz)
        served = self.app.server if self.credentials is None else \
            RequireLogin(self.app.server, self.credentials, echo=echo or _to_stderr, guesses=guesses,
                         trusted=trusted_proxies)
        served = ServedNames(served, served_names(host, server_names), content_security_policy(self.app.csp_hashes()))
        self.server = _Server(listening, served, adapter)
        self.port = listening.getsockname()[1]  # the one asked for, or the free one picked for port 0
        self.url = f"{'https' if tls else 'http'}://{_bracketed(host)}:{self.port}/"
        self._lock = threading.Lock()  # serving starts, or it stops: one at a time
        self._stopped = False

    def serve_forever(self) -> None:
        """Serve until shutdown() from another thread, or Ctrl-C."""
        with self._lock:
            if self._stopped:
                return
            self.server.prepare()  # its threads started, the socket listened on
        try:
            self.server.serve()
        except KeyboardInterrupt:
            pass
        finally:
            self.shutdown()

    def shutdown(self) -> None:
        """Stop serving (from any thread): no new connection, the requests under way answered (DRAIN_S
        at most), the port free when it returns."""
        with self._lock:
            self._stopped = True
            if self.server.ready:
                self.server.stop()
            self.server.listening.close()

    close = shutdown  # a server that never served: its port freed


DRAIN_S = 5.0  # how long a stop waits for the requests under way
THREADS = 8  # a page sends a request per section at each refresh (6): a few pages need more than 4


def _to_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class _Server(wsgi.Server):
    """cheroot's server on a socket bound already (`listening`), in TLS when `adapter` is given."""

    def __init__(self, listening: socket.socket, app, adapter):
        super().__init__(listening.getsockname()[:2], app, numthreads=THREADS, shutdown_timeout=DRAIN_S,
                         request_queue_size=1024)
        self.listening, self.ssl_adapter, self.software = listening, adapter, "SensorScript"

    def bind(self, family, type, proto=0):  # where prepare() binds: the socket is bound already
        self.socket = self.ssl_adapter.bind(self.listening) if self.ssl_adapter else self.listening
        return self.socket

    def error_log(self, msg="", level=logging.INFO, traceback=False):
        # A client gone mid-request, a failed TLS handshake: not news for the terminal. The server's own
        # errors are said in a line, with no traceback.
        if level >= logging.ERROR:
            print(f"dashboard: {msg}", file=sys.stderr, flush=True)


def _tls(certificate: str, key: str):
    """cheroot's TLS adapter (Python's ssl) for the files given, or one clear sentence."""
    import ssl

    from cheroot.ssl.builtin import BuiltinSSLAdapter

    for flag, path in (("--cert", certificate), ("--key", key)):
        if not Path(path).is_file():
            raise SensorScriptError([Diagnostic("error", f"{flag} {path}: no such file")])
    try:
        adapter = BuiltinSSLAdapter(certificate, key)
    except (ssl.SSLError, OSError, ValueError) as exc:
        raise SensorScriptError([Diagnostic("error", f"--cert {certificate} --key {key}: not a certificate and its "
                                                     f"private key in PEM ({getattr(exc, 'reason', None) or exc})")]) \
            from None
    adapter.context.minimum_version = ssl.TLSVersion.TLSv1_2
    return adapter


def _bracketed(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _listen(host: str, port: int) -> socket.socket:
    """The listening socket the server serves; a port in use, or an address not of this machine, in one
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
