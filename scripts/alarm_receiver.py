"""A webhook that prints the alarms a job delivers (`sscript run ... --alerts http://127.0.0.1:9000/alarms`).

    .venv/bin/python scripts/alarm_receiver.py [--port 9000] [--host 127.0.0.1] [--for SECONDS]

Answers every POST with 200 and prints its alarm on a line: the stream, the time people read, the
value and the alarm's id; an alarm whose id it has seen already (delivery is at least once: a job
killed before it heard the 200 sends it again) is counted as a repeat and not printed again, as a
receiver should do. A body that is not an alarm object is printed as it came. Stops after
`--for` seconds, or with Ctrl-C, and says how many it received.
"""

from __future__ import annotations

import argparse
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Alarms(BaseHTTPRequestHandler):
    seen: set[str] = set()
    repeats = 0
    lock = threading.Lock()

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.end_headers()
        try:
            alarm = json.loads(body)
        except ValueError:
            alarm = None
        if not isinstance(alarm, dict) or "id" not in alarm:
            print(f"received: {body.decode(errors='replace')}", flush=True)
            return
        with self.lock:
            if alarm["id"] in self.seen:
                type(self).repeats += 1
                return
            self.seen.add(alarm["id"])
        what = "retracted" if alarm.get("retracted") else f"value {alarm.get('value')}"
        print(f"alarm {alarm.get('stream')} at {alarm.get('time') or alarm.get('ts')}: {what} "
              f"(version {alarm.get('version')}, id {alarm['id']})", flush=True)

    def log_message(self, *args) -> None:  # no line per request
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=9000)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--for", dest="seconds", type=float, help="stop after this many seconds")
    args = parser.parse_args()
    server = ThreadingHTTPServer((args.host, args.port), Alarms)
    print(f"receiving alarms on http://{args.host}:{server.server_port}/ (Ctrl-C stops)", flush=True)
    if args.seconds:
        threading.Timer(args.seconds, server.shutdown).start()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    server.server_close()
    print(f"{len(Alarms.seen):,} alarms received, {Alarms.repeats:,} repeats dropped", flush=True)


if __name__ == "__main__":
    main()
