"""The test hosts (scripts/netns.py): addresses of their own on one bridge, their own /tmp, the shared
folder and nothing of the project on a worker host, a link cut and restored, a host killed, and
nothing left behind, even when a test fails."""

from __future__ import annotations

import ipaddress
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from sensorscript.runtime.control import jars
from tests.conftest import ROOT, need

sys.path.insert(0, str(ROOT / "scripts"))
import kafka_broker  # noqa: E402
from netns import PREFIX, SPARK_HOME, Hosts, sweep, why_not  # noqa: E402
from mosquitto import Broker, why_no_broker  # noqa: E402
from postgres_server import PostgresServer, why_no_postgres  # noqa: E402
from standalone import spark_home, standalone  # noqa: E402

PYTHON = "/usr/bin/python3.11"  # the machine's system Python: what a worker host has
# A TCP server that answers every connection with its host's name.
SERVER = ("import socket, sys\n"
          "s = socket.create_server(('0.0.0.0', 7000))\n"
          "print('up', flush=True)\n"
          "while True:\n"
          "    c, _ = s.accept(); c.sendall(sys.argv[1].encode()); c.close()\n")
CLIENT = ("import socket, sys\n"
          "try:\n"
          "    with socket.create_connection((sys.argv[1], 7000), timeout=2) as c: print(c.recv(100).decode())\n"
          "except OSError as e: print('unreachable', type(e).__name__)\n")


@pytest.fixture(scope="module")
def hosts():
    need(why_not(), "the tests of hosts (network namespaces)")
    with Hosts(spark=spark_home(), kafka=jars.folder(kafka_broker.PART)) as made:
        for name in ("w1", "w2"):
            server = made[name].start([PYTHON, "-c", SERVER, name], stdout=subprocess.PIPE, text=True)
            assert server.stdout.readline().strip() == "up"
        yield made


def ask(hosts, asker: str, asked: str) -> str:
    return hosts[asker].run([PYTHON, "-c", CLIENT, asked]).stdout.strip()


def test_hosts_reach_each_other_by_name_and_address(hosts):
    assert ask(hosts, "w2", "w1") == "w1"
    assert ask(hosts, "driver", hosts["w2"].address) == "w2"
    assert len({h.address for h in hosts.hosts.values()}) == 4
    assert all(ipaddress.ip_address(h.address) in hosts.network for h in hosts.hosts.values())
    # A host's own loopback is its own: the machine's 127.0.0.1 is not there.
    assert ask(hosts, "infra", "127.0.0.1").startswith("unreachable")


def test_a_worker_host_sees_the_shared_folder_its_own_tmp_and_nothing_of_the_project(hosts):
    token = uuid.uuid4().hex
    shared = hosts.shared / f"from-w1-{token}"
    mine = f"/tmp/mine-{token}"
    assert hosts["w1"].run(["sh", "-c", f"echo {token} > {shared}; echo {token} > {mine}"]).returncode == 0
    assert hosts["w2"].run(["cat", str(shared)]).stdout.strip() == token
    assert shared.read_text().strip() == token  # the machine's own disk
    assert hosts["w1"].run(["cat", mine]).stdout.strip() == token
    assert hosts["w2"].run(["cat", mine]).returncode != 0 and not Path(mine).exists()
    listing = hosts["w1"].run(["sh", "-c", f"ls -A {ROOT} 2>/dev/null || true"])  # empty, or not there
    assert listing.returncode == 0 and listing.stdout == "", listing
    assert hosts["w1"].run(["ls", str(ROOT / ".venv")]).returncode != 0
    assert hosts["driver"].run(["ls", str(ROOT / ".venv" / "bin" / "python")]).returncode == 0
    # The machine's system software is there: Java and the system Python.
    assert hosts["w1"].run(["java", "-version"]).returncode == 0
    assert hosts["w1"].run([PYTHON, "-c", "import sys; print(sys.version_info[:2])"]).stdout.strip() == "(3, 11)"


def test_a_cut_link_stops_every_packet_until_it_is_restored(hosts):
    hosts["w2"].cut()
    try:
        assert ask(hosts, "w1", "w2").startswith("unreachable")
        assert ask(hosts, "w2", "w1").startswith("unreachable")
        assert ask(hosts, "driver", "w1") == "w1"  # the others still talk
    finally:
        hosts["w2"].restore()
    assert ask(hosts, "w1", "w2") == "w2"


def test_a_killed_host_keeps_no_process():
    need(why_not(), "the tests of hosts (network namespaces)")
    with Hosts(("w1", "w2")) as made:
        made["w1"].start(["sleep", "600"])
        made["w1"].start(["sh", "-c", "sleep 600 & sleep 600"])
        deadline = time.monotonic() + 30
        while len(made["w1"].pids()) < 4 and time.monotonic() < deadline:  # the holder, the sleeps, the shell
            time.sleep(0.05)
        assert len(made["w1"].pids()) >= 4
        made["w1"].kill()
        assert made["w1"].pids() == [made["w1"].holder.pid]
        assert made["w2"].run(["true"]).returncode == 0


def namespaces() -> list[str]:
    return [n for n in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
            if n.startswith(PREFIX)]


def test_everything_is_removed_even_when_the_test_fails():
    need(why_not(), "the tests of hosts (network namespaces)")
    with pytest.raises(ZeroDivisionError):
        with Hosts(("w1", "w2")) as made:
            made["w1"].start(["sleep", "600"])
            names, bridge, shared = [h.namespace for h in made.hosts.values()], made.bridge, made.shared
            assert set(names) <= set(namespaces())
            1 / 0
    assert set(names).isdisjoint(namespaces())
    assert subprocess.run(["ip", "link", "show", bridge], capture_output=True).returncode != 0
    assert not shared.exists()


def test_hosts_change_the_network_only_while_no_browser_runs(monkeypatch):
    """Making, cutting, restoring and removing hosts changes this machine's addresses and links, which
    fails a browser's requests in flight (net::ERR_NETWORK_CHANGED): each holds the network lock
    exclusively, which every browser holds shared for its life (sensorscript/dashboard/browser.py)."""
    import fcntl

    from sensorscript.dashboard.browser import NETWORK_LOCK, network_lock

    need(why_not(), "the tests of hosts (network namespaces)")

    def browser_could_start() -> bool:
        with open(NETWORK_LOCK, "a") as other:  # another open file: what another process would try
            try:
                fcntl.flock(other, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                return False
            fcntl.flock(other, fcntl.LOCK_UN)
            return True

    seen = []  # (what changed the network, whether a browser could have started meanwhile)
    for name in ("_make", "_close"):
        def probe(self, real=getattr(Hosts, name), name=name):
            seen.append((name, browser_could_start()))
            real(self)
        monkeypatch.setattr(Hosts, name, probe)

    def run(argv, *args, real=subprocess.run, **kwargs):
        if argv[:2] == ["ip", "link"] and argv[2:3] in (["add"], ["set"], ["del"]):
            seen.append((" ".join(argv[1:4]), browser_could_start()))
        return real(argv, *args, **kwargs)

    monkeypatch.setattr(subprocess, "run", run)
    with Hosts(("w1",)) as made:
        made["w1"].cut()
        made["w1"].restore()
        veth = made["w1"].veth
    assert [w for w, _ in seen][0] == "_make" and "_close" in [w for w, _ in seen], seen
    assert f"link set {veth}" in [w for w, _ in seen], seen  # the cut and the restore
    assert [w for w, could in seen if could] == [], seen
    assert browser_could_start()
    with network_lock(exclusive=False):  # a browser's: other browsers run beside it
        assert browser_could_start()


def test_what_a_killed_test_left_is_swept():
    need(why_not(), "the tests of hosts (network namespaces)")
    stale = f"{PREFIX}4194399x0-w1"  # above the kernel's largest process id: its test is gone
    subprocess.run(["ip", "netns", "add", stale], check=True)
    try:
        assert stale in sweep()
        assert stale not in namespaces()
    finally:
        subprocess.run(["ip", "netns", "del", stale], capture_output=True)


def test_a_standalone_cluster_with_its_master_on_the_driver_and_a_worker_on_each_worker_host(hosts):
    """Spark's master on `driver` (the pyspark package), a worker on w1 and on w2 (Spark at
    /opt/spark there): both register with the master at the driver's address, over the bridge."""
    assert hosts["w1"].run(["ls", str(SPARK_HOME / "bin" / "spark-class")]).returncode == 0
    assert hosts["w1"].run(["touch", str(SPARK_HOME / "written")]).returncode != 0  # read-only
    base = hosts.shared / f"cluster-{uuid.uuid4().hex[:8]}"
    base.mkdir()
    with standalone(base, [(1, "1g"), (1, "1g")], 120, hosts["driver"].place(),
                    [hosts["w1"].place(), hosts["w2"].place()]) as cluster:
        assert cluster.url.startswith(f"spark://{hosts['driver'].address}:")
        master = (base / "master.log").read_text()
        for name in ("w1", "w2"):
            assert re.search(rf"Registering worker {re.escape(hosts[name].address)}:\d+", master), master[-3000:]
        for log in ("worker-0.log", "worker-1.log"):  # the host's own Spark
            assert f"Spark home: {SPARK_HOME}\n" in (base / log).read_text()


# On `driver` (the project's Python and paho): publish to the broker, and read it back.
ROUND_TRIP = """
import sys, paho.mqtt.client as mqtt
got = []
client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="hosts-test")
client.on_message = lambda c, u, m: got.append(m.payload.decode())
client.connect(sys.argv[1], int(sys.argv[2]))
client.subscribe("readings", qos=1)
client.loop_start()
import time
time.sleep(0.5)
client.publish("readings", "7,1000,2.5", qos=1).wait_for_publish(10)
deadline = time.time() + 10
while not got and time.time() < deadline:
    time.sleep(0.05)
print(got)
"""


def test_mosquitto_on_infra_is_reached_from_driver_over_the_bridge(hosts):
    need(why_no_broker(), "the MQTT tests")
    broker = Broker(hosts.shared / f"mosquitto-{uuid.uuid4().hex[:8]}", place=hosts["infra"].place()).start()
    try:
        assert broker.url == f"mqtt://{hosts['infra'].address}:{broker.port}"
        assert broker.process.pid in hosts["infra"].pids()  # it runs on infra
        done = hosts["driver"].run([str(ROOT / ".venv" / "bin" / "python"), "-c", ROUND_TRIP, "infra",
                                    str(broker.port)])
        assert done.stdout.strip() == "['7,1000,2.5']", done.stderr[-2000:]
    finally:
        broker.stop()


def test_postgresql_on_infra_is_reached_from_driver_with_tls(hosts):
    """PostgreSQL on infra (its user, its address, clients of its network only, TLS with a
    certificate for that address): the driver host connects by address with verify-full."""
    need(why_no_postgres(), "the PostgreSQL tests")
    server = PostgresServer(hosts.shared / f"pg-{uuid.uuid4().hex[:8]}", tls=True, durable=False,
                            place=hosts["infra"].place()).start()
    try:
        assert server.url.startswith(f"postgresql://sensors@{hosts['infra'].address}:{server.port}/sensors?")
        assert server.process.pid in hosts["infra"].pids()
        query = ("import psycopg, sys; c = psycopg.connect(sys.argv[1]); "
                 "print(c.execute('select inet_server_addr(), ssl from pg_stat_ssl where pid = pg_backend_pid()')"
                 ".fetchone())")
        done = hosts["driver"].run([str(ROOT / ".venv" / "bin" / "python"), "-c", query, server.url],
                                   env={**server.environment, "PATH": "/usr/bin:/bin"})
        assert done.stdout.strip() == f"(IPv4Address('{hosts['infra'].address}'), True)", done.stderr[-2000:]
    finally:
        server.remove()


def test_a_kafka_broker_on_infra_takes_and_gives_messages_from_driver(hosts):
    need(kafka_broker.why_no_kafka(), "the Kafka tests")
    broker = kafka_broker.KafkaBroker(hosts.shared / f"kafka-{uuid.uuid4().hex[:8]}",
                                      place=hosts["infra"].place()).start()
    try:
        assert broker.bootstrap == f"{hosts['infra'].address}:{broker.port}"
        assert broker.process.pid in hosts["infra"].pids()
        broker.topic("readings", 2)
        script = ("import sys\n"
                  "from confluent_kafka import Consumer, Producer\n"
                  "p = Producer({'bootstrap.servers': sys.argv[1]})\n"
                  "p.produce('readings', b'7,1000,2.5'); p.flush(30)\n"
                  "c = Consumer({'bootstrap.servers': sys.argv[1], 'group.id': 't', 'auto.offset.reset': 'earliest'})\n"
                  "c.subscribe(['readings'])\n"
                  "m = None\n"
                  "for _ in range(60):\n"
                  "    m = c.poll(1)\n"
                  "    if m is not None and not m.error(): break\n"
                  "print(m.value().decode() if m is not None and not m.error() else 'nothing')\n")
        done = hosts["driver"].run([str(ROOT / ".venv" / "bin" / "python"), "-c", script, broker.bootstrap],
                                   timeout=120)
        assert done.stdout.strip() == "7,1000,2.5", done.stderr[-2000:]
    finally:
        broker.stop(kill=True)
