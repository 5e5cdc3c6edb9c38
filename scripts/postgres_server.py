"""A PostgreSQL server of its own on 127.0.0.1, from Debian's package (scripts/setup.sh installs it):
for trying `sscript run --sink postgresql://...`, and for the tests and benchmarks.

    .venv/bin/python scripts/postgres_server.py [--port PORT] [--dir DIR] [--tls] [--for SECONDS]

runs `initdb` in DIR (a temporary folder by default), starts the server on a free port of 127.0.0.1
(never as a service of the machine, never on its socket folder), makes the role and database
`sensors` with a password of its own, prints `sink: postgresql://sensors@127.0.0.1:PORT/sensors`
and `PGPASSWORD=...`, and runs until Ctrl-C or SIGTERM (or for SECONDS). `--tls` makes a CA and a
certificate for 127.0.0.1 and serves TLS (the address then carries `sslmode=verify-full` and
`sslrootcert`). As root (PostgreSQL refuses to run as root) the server runs as Debian's `postgres`
user. As a library (tests/brokers.py): `PostgresServer(folder).start()`, `stop()` (`kill=True`:
SIGKILL, a crash) and `start()` again keep its data.
"""

from __future__ import annotations

import argparse
import os
import pwd
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from sensorscript.hosts import Place, free_port

ROLE = DATABASE = "sensors"
_BIN_FOLDERS = sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)  # Debian's, newest first


def _program(name: str) -> str | None:
    for folder in _BIN_FOLDERS:
        if (folder / name).exists():
            return str(folder / name)
    return shutil.which(name)


def why_no_postgres() -> str | None:
    """None where a server can be started here, else why not (in one sentence)."""
    if _program("initdb") is None or _program("postgres") is None:
        return "PostgreSQL is not installed (apt-get install postgresql as root; scripts/setup.sh does where it may)"
    if os.geteuid() == 0 and _user() is None:
        return "PostgreSQL refuses to run as root, and there is no `postgres` user to run it as"
    return None


def _user() -> pwd.struct_passwd | None:
    """The user the server runs as when this process is root (Debian's package makes `postgres`)."""
    try:
        return pwd.getpwnam("postgres")
    except KeyError:
        return None


class PostgresServer:
    """One PostgreSQL server on 127.0.0.1:`port`, its cluster under `folder` (made by initdb at the
    first start, kept by a restart), password logins only (scram-sha-256) for the role `sensors`,
    owner of the database `sensors`; `tls`: TLS too, with a certificate for 127.0.0.1 signed by a
    CA of its own (`ca`). `durable=False` (tests): no fsync, so a test's server costs no disk flushes;
    a SIGKILL of the server still loses nothing committed (the machine does not crash). `place`: a
    test host to run on (scripts/netns.py), serving its address to the hosts of its network (`samenet`);
    `folder` must then be one the host sees."""

    def __init__(self, folder: Path | None = None, port: int | None = None, tls: bool = False,
                 durable: bool = True, password: str | None = None, place: Place = Place()):
        self.place, self.address = place, place.address
        # As root, the server's user must reach the folder: a folder of its own under /tmp, not inside
        # a test's folder (pytest's are private to root).
        self.owned = folder is None
        self.folder = Path(folder) if folder is not None else Path(tempfile.mkdtemp(prefix="sscript-pg-"))
        self.folder.mkdir(parents=True, exist_ok=True)
        self.port = port or free_port()
        self.tls, self.durable = tls, durable
        self.password = password or f"pg-{secrets.token_hex(12)}"
        self.data = self.folder / "data"
        self.log = self.folder / "postgres.log"
        self.ca: Path | None = None
        self.process: subprocess.Popen | None = None
        self._as = _user() if os.geteuid() == 0 else None

    # ------------------------------------------------------------------ what a client needs
    @property
    def url(self) -> str:
        """The sink's address (no password: it comes from PGPASSWORD, `environment`)."""
        query = f"?sslmode=verify-full&sslrootcert={self.ca}" if self.tls else ""
        return f"postgresql://{ROLE}@{self.address}:{self.port}/{DATABASE}{query}"

    @property
    def environment(self) -> dict[str, str]:
        return {"PGPASSWORD": self.password}

    def connect(self, **settings):
        """A psycopg connection as `sensors` (autocommit unless told otherwise)."""
        import psycopg

        tls = {"sslmode": "verify-full", "sslrootcert": str(self.ca)} if self.tls else {"sslmode": "disable"}
        settings = {"autocommit": True, "dbname": DATABASE, **tls, **settings}
        return psycopg.connect(host=self.address, port=self.port, user=ROLE, password=self.password,
                               connect_timeout=5, **settings)

    # ------------------------------------------------------------------ running it
    def _run(self, *command: str) -> subprocess.CompletedProcess:
        return subprocess.run(command, capture_output=True, text=True, user=self._as.pw_uid if self._as else None)

    def _own(self, path: Path) -> None:
        if self._as is not None:
            os.chown(path, self._as.pw_uid, self._as.pw_gid)

    def _init(self) -> None:
        """initdb once, the role's password in a file only the server's user reads; the server's
        settings; the certificates for TLS."""
        if (self.data / "PG_VERSION").exists():
            return
        self._own(self.folder)
        secret = self.folder / "pwfile"
        secret.write_text(self.password + "\n")
        secret.chmod(0o600)
        self._own(secret)
        done = self._run(_program("initdb"), "-D", str(self.data), "-U", ROLE, f"--pwfile={secret}",
                         "--auth-host=scram-sha-256", "--auth-local=scram-sha-256", "-E", "UTF8", "--locale=C",
                         *([] if self.durable else ["--no-sync"]))
        secret.unlink()
        if done.returncode:
            raise RuntimeError(f"initdb failed: {done.stdout}{done.stderr}")
        settings = [f"listen_addresses = '{self.address}'", f"port = {self.port}",
                    f"unix_socket_directories = '{self.folder}'", "max_connections = 100",
                    "shared_buffers = 128MB", "log_min_messages = warning"]
        if not self.durable:
            settings += ["fsync = off", "synchronous_commit = off", "full_page_writes = off"]
        if self.tls:
            from mosquitto import Broker

            self.ca, cert, key = Broker.certificates(self.folder / "tls", self.address)
            for path in (self.folder / "tls", cert, key):
                self._own(path)
            key.chmod(0o600)
            settings += ["ssl = on", f"ssl_cert_file = '{cert}'", f"ssl_key_file = '{key}'"]
        with (self.data / "postgresql.auto.conf").open("a") as f:
            f.write("\n".join(settings) + "\n")
        # Password logins only, over TCP (TLS or not) and the socket; `hostssl` alone with TLS.
        clients = "127.0.0.1/32" if self.address == "127.0.0.1" else "samenet"
        (self.data / "pg_hba.conf").write_text(
            "local all all scram-sha-256\n" + f"{'hostssl' if self.tls else 'host'} all all {clients} scram-sha-256\n")

    def start(self, timeout: float = 60.0) -> "PostgresServer":
        if (reason := why_no_postgres()) is not None:
            raise RuntimeError(reason)
        fresh = not (self.data / "PG_VERSION").exists()
        self._init()
        if self.tls and self.ca is None:
            self.ca = self.folder / "tls" / "ca.pem"
        log = open(self.log, "ab")
        self._own(self.log)
        command = [_program("postgres"), "-D", str(self.data)]
        if self.place == Place():
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                            start_new_session=True, user=self._as.pw_uid if self._as else None)
        else:  # entered there as root, then the server's user (setpriv execs it: the process is the server)
            user = ["setpriv", f"--reuid={self._as.pw_uid}", f"--regid={self._as.pw_gid}", "--init-groups"] \
                if self._as else []
            self.process = subprocess.Popen(self.place.wrap([*user, *command]), stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, start_new_session=True)
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"PostgreSQL exited with {self.process.returncode}: {self.tail()}")
            if self.answers():
                break
            time.sleep(0.1)
        else:
            self.stop(kill=True)
            raise RuntimeError(f"PostgreSQL did not answer on {self.address}:{self.port} within {timeout} s: "
                               f"{self.tail()}")
        if fresh:
            with self.connect(dbname="postgres") as db:  # the role owns a database of its name
                db.execute(f"CREATE DATABASE {DATABASE} OWNER {ROLE}")
        return self

    def answers(self) -> bool:
        import psycopg

        try:
            with self.connect(dbname="postgres"):
                return True
        except psycopg.OperationalError:
            return False

    def tail(self, lines: int = 30) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:]) if self.log.exists() else ""

    def stop(self, kill: bool = False) -> None:
        """Stop the server: SIGINT (PostgreSQL's fast shutdown) or, with `kill`, SIGKILL of it and its
        processes (a crash: the next start recovers from the write-ahead log)."""
        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGKILL if kill else signal.SIGINT)
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        if kill:  # its backends see the postmaster gone and leave; wait for them to let go of the cluster
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and self._backends_left():
                time.sleep(0.05)

    def _backends_left(self) -> bool:
        try:
            os.killpg(self.process.pid, 0)
            return True
        except ProcessLookupError:
            return False

    def remove(self) -> None:
        """Stop it and remove its folder, when this server made the folder."""
        self.stop(kill=True)
        if self.owned:
            shutil.rmtree(self.folder, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int)
    parser.add_argument("--dir", type=Path, help="the cluster's folder (kept; default: a temporary one, removed); "
                                                 "as root, one the postgres user can reach")
    parser.add_argument("--tls", action="store_true", help="serve TLS with a certificate for 127.0.0.1")
    parser.add_argument("--for", dest="seconds", type=float, help="stop after this many seconds")
    arguments = parser.parse_args()
    server = PostgresServer(arguments.dir, arguments.port, tls=arguments.tls,
                            password=os.environ.get("PGPASSWORD") or None).start()
    print(f"sink: {server.url}", flush=True)
    print(f"PGPASSWORD={server.password}", flush=True)
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    try:
        deadline = time.monotonic() + arguments.seconds if arguments.seconds else None
        while not stopping and (deadline is None or time.monotonic() < deadline):
            time.sleep(0.2)
    except KeyboardInterrupt:
        pass
    finally:
        if arguments.dir is None:
            server.remove()
        else:
            server.stop()
        print("PostgreSQL stopped", flush=True)


if __name__ == "__main__":
    main()
