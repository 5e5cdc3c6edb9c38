"""A mosquitto broker of its own on 127.0.0.1, from Debian's package: for trying `sscript run --input
mqtt://...` and `--alerts mqtt://...`, and for the MQTT benchmarks, the soak and the tests.

    .venv/bin/python scripts/mosquitto.py [--port PORT] [--dir DIR] [--user USER --password PASSWORD] [--for SECONDS]

prints the broker's address and runs until Ctrl-C (or for SECONDS), then stops it. As a library
(scripts/bench_mqtt.py, scripts/soaking/feed.py, scripts/cluster_faults.py, tests/brokers.py):
`Broker(folder).start()`, and `Publisher(broker)` to publish to it; the broker has a
configuration of its own in `folder` (never the machine's service). `Broker` keeps its messages on
disk (persistence), so a run can restart it mid-feed and a persistent session's queued messages
survive; it may require a user and password (a password file made with mosquitto_passwd), speak TLS,
and queue up to `max_queued` messages per offline client.
"""

from __future__ import annotations

import argparse
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from sensorscript.hosts import Place, free_port

MOSQUITTO = shutil.which("mosquitto") or ("/usr/sbin/mosquitto" if Path("/usr/sbin/mosquitto").exists() else None)


def why_no_broker() -> str | None:
    """None where a broker can be started here, else why not (in one sentence)."""
    if MOSQUITTO is None:
        return "Debian's mosquitto is not installed (scripts/setup.sh installs it where it may)"
    return None


class Broker:
    """mosquitto on 127.0.0.1:`port` (or at `place`: a test host's address), its data and log under
    `folder` (one the place sees)."""

    def __init__(self, folder: Path, user: str | None = None, password: str | None = None,
                 max_queued: int = 1_000_000, port: int | None = None, tls: tuple[Path, Path, Path] | None = None,
                 place: Place = Place()):
        self.folder, self.place = Path(folder), place
        self.folder.mkdir(parents=True, exist_ok=True)
        self.port = port or free_port()
        self.user, self.password = user, password
        self.process: subprocess.Popen | None = None
        # Run as root, mosquitto drops to user `mosquitto`, who may not write our folder: stay who we are.
        lines = [f"listener {self.port} {place.address}", "user " + (pwd.getpwuid(os.getuid()).pw_name),
                 "persistence true", f"persistence_location {self.folder}/",
                 "autosave_interval 1",  # a broker killed loses at most a second of its queues
                 f"max_queued_messages {max_queued}", "max_inflight_messages 1000",
                 f"log_dest file {self.folder / 'mosquitto.log'}", "log_type error", "log_type warning",
                 "log_type notice"]
        if tls:  # (CA, the broker's certificate, its key): clients must speak TLS
            ca, cert, key = tls
            lines += [f"cafile {ca}", f"certfile {cert}", f"keyfile {key}"]
        if user:
            passwords = self.folder / "passwords"
            subprocess.run([shutil.which("mosquitto_passwd") or "mosquitto_passwd", "-b", "-c", str(passwords),
                            user, password or ""], check=True, capture_output=True)
            passwords.chmod(0o600)
            lines += ["allow_anonymous false", f"password_file {passwords}"]
        else:
            lines += ["allow_anonymous true"]
        self.config = self.folder / "mosquitto.conf"
        self.config.write_text("\n".join(lines) + "\n")

    @property
    def url(self) -> str:
        return f"mqtt://{self.place.address}:{self.port}"

    def start(self, timeout: float = 10.0) -> "Broker":
        self.process = subprocess.Popen(self.place.wrap([MOSQUITTO, "-c", str(self.config)]), stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"mosquitto exited with {self.process.returncode}: "
                                   f"{(self.folder / 'mosquitto.log').read_text(errors='replace')[-2000:]}")
            try:
                socket.create_connection((self.place.address, self.port), timeout=0.5).close()
                return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"mosquitto did not listen on {self.place.address}:{self.port} within {timeout} s")

    def stop(self, kill: bool = False) -> None:
        """Stop the broker: SIGTERM (it saves its queues) or, with `kill`, SIGKILL."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    @staticmethod
    def certificates(folder: Path, address: str = "127.0.0.1") -> tuple[Path, Path, Path]:
        """A CA and a certificate for `address` it signed, made with openssl: (CA, certificate, key)."""
        folder.mkdir(parents=True, exist_ok=True)
        ca, ca_key, cert, key, request = (folder / n for n in ("ca.pem", "ca.key", "broker.pem", "broker.key",
                                                               "broker.csr"))
        run = lambda *a: subprocess.run(["openssl", *a], check=True, capture_output=True)  # noqa: E731
        run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=sscript test CA",
            "-keyout", str(ca_key), "-out", str(ca))
        run("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={address}", "-keyout", str(key), "-out", str(request))
        extensions = folder / "san.cnf"
        extensions.write_text(f"subjectAltName=IP:{address}\n")
        run("x509", "-req", "-in", str(request), "-CA", str(ca), "-CAkey", str(ca_key), "-CAcreateserial", "-days", "2",
            "-extfile", str(extensions), "-out", str(cert))
        return ca, cert, key

    def restart(self) -> None:
        self.stop()
        self.start()


class Publisher:
    """A QoS 1 publisher with a persistent session of its own: what it published before a broker
    restart is sent again after it (the publisher's side of at least once)."""

    def __init__(self, broker: "Broker", name: str = "test-publisher", ca: Path | None = None):
        import paho.mqtt.client as paho
        from paho.mqtt.enums import CallbackAPIVersion

        self.client = paho.Client(CallbackAPIVersion.VERSION2, client_id=name, clean_session=False)
        if broker.user:
            self.client.username_pw_set(broker.user, broker.password)
        if ca is not None:  # a broker that speaks only TLS, its certificate signed by `ca`
            self.client.tls_set(ca_certs=str(ca))
        self.client.max_inflight_messages_set(1000)
        self.client.reconnect_delay_set(0.1, 1)
        self.client.connect(broker.place.address, broker.port)
        self.client.loop_start()
        self.sent = []

    def connected(self, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while not self.client.is_connected():
            assert time.monotonic() < deadline, f"the publisher did not connect again within {timeout} s"
            time.sleep(0.05)

    def publish(self, topic: str, payload: str) -> None:
        self.sent.append(self.client.publish(topic, payload, qos=1))

    def wait(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        for info in self.sent:
            while not info.is_published():
                assert time.monotonic() < deadline, "the broker did not take every message"
                time.sleep(0.01)

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()



def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0, help="0: a free port")
    parser.add_argument("--dir", help="its configuration, data and log (default: a new temporary folder)")
    parser.add_argument("--user")
    parser.add_argument("--password")
    parser.add_argument("--for", dest="seconds", type=float, help="stop after this many seconds")
    args = parser.parse_args()
    if (reason := why_no_broker()) is not None:
        raise SystemExit(f"mosquitto.py: {reason}")
    folder = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="sscript-mosquitto-"))
    broker = Broker(folder, args.user, args.password, port=args.port or None).start()
    print(f"mosquitto listens on {broker.url} (its data and log in {folder}); Ctrl-C stops it", flush=True)
    try:
        time.sleep(args.seconds) if args.seconds is not None else signal.pause()
    except KeyboardInterrupt:
        pass
    finally:
        broker.stop()
    print("mosquitto stopped")


if __name__ == "__main__":
    main()
