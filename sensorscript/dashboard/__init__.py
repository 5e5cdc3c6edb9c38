"""`sscript dashboard OUT`: a local web page over what a job writes into OUT (results, alarms, the
job's health, the plan), refreshed every few seconds, while the job runs or after it ended.

    reading.py   OUT read-only: status.json, plan.json, the sink's tables
    figures.py   how each stream, the alarms and the health measures are drawn
    app.py       the Dash app: layout and the one refresh callback
    browser.py   headless chromium for the tests and scripts/screenshot_dashboard.py
"""

from __future__ import annotations

import errno
import logging
import socket
from datetime import tzinfo
from pathlib import Path

from sensorscript.errors import Diagnostic, SensorScriptError


class Dashboard:
    """The page's HTTP server, bound (so a port in use is known before anything is served)."""

    def __init__(self, out: Path, tz: tzinfo, port: int = 8050, host: str = "127.0.0.1"):
        from werkzeug.serving import make_server

        from sensorscript.dashboard.app import create_app

        logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no line per request
        _check_port(host, port)
        self.app = create_app(Path(out), tz)
        self.server = make_server(host, port, self.app.server, threaded=True)
        self.url = f"http://{host}:{self.server.server_port}/"

    def serve_forever(self) -> None:
        self.server.serve_forever()

    def shutdown(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _check_port(host: str, port: int) -> None:
    """Bind as the server will (werkzeug prints its own words and exits when it cannot)."""
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((host, port))
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            message = (f"port {port} on {host} is in use (another dashboard, or another program); choose another "
                       f"with --port N")
        else:  # an unknown host, an address not of this machine, a port only root may take
            message = f"cannot serve on {host}:{port}: {exc.strerror or exc}"
        raise SensorScriptError([Diagnostic("error", message)]) from None


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
