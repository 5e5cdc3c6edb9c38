"""Test hosts (issue #43): network namespaces on one bridge, each host with an address and a mount
namespace of its own, made by a test or a benchmark as root and removed after it, even when it fails.

    .venv/bin/python scripts/netns.py [--for SECONDS]   # as root: make driver, w1, w2 and infra, say them, remove them
    .venv/bin/python scripts/netns.py --sweep           # remove what runs killed before their teardown left

As a library (tests/test_hosts.py, tests/test_cluster_hosts.py, scripts/bench_job.py --hosts):

    with Hosts(("driver", "w1", "w2", "infra")) as hosts:
        hosts["w1"].start(["/usr/bin/python3.11", "-m", "http.server", "8000"])
        hosts["w2"].run(["/usr/bin/python3.11", "-c", "..."])   # reaches hosts["w1"].address:8000
        hosts["w2"].cut()  ... hosts["w2"].restore()             # its link down, then up
        hosts["w1"].kill()                                       # every process on it, as a dead machine

What a host sees: the machine's system software (/usr: Java, the system Python 3.11), its own
empty /tmp, `shared` (one folder at the same path on every host, as an NFS mount would be) and,
given `spark` and `kafka`, Spark at /opt/spark and the Kafka broker's jars at /opt/kafka (the
pyspark package's and the project's jar cache, read-only: a cluster's machines have them installed).
A worker host (every host but those in `sees_project`) does not see the project's checkout, its
.venv, or the machine's home folders: what a job needs there it must bring. Each host has one
process holding its namespaces (`unshare`), and commands run in them by `nsenter`.

The addresses are a /24 of 10.0.0.0/8 that this machine neither routes nor has (picked at the
start), the bridge's own address .1; a host has no default route: its traffic goes only to the
other hosts and the machine's side of the bridge. Names carry the test process's id and a count,
so two test runs on the machine (or two sets of hosts in one) do not meet, and `sweep` removes
what a run killed before its teardown left behind.
"""

from __future__ import annotations

import argparse
import sys

import contextlib
import ipaddress
import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from sensorscript.dashboard.browser import network_lock
from sensorscript.hosts import Place

ROOT = Path(__file__).resolve().parent.parent
PREFIX = "ssh"  # namespaces "ssh<pid>x<n>-<host>", bridge "sshb<pid>x<n>", veths "sshv<pid>x<n><i>"
OWNER = re.compile(PREFIX + r"[bv]?(\d+)x")  # the test process a name belongs to
_made = itertools.count()
HIDDEN = ("/root", "/home")  # the machine's home folders: pyenv, caches, what a worker host has not
SPARK_HOME = Path("/opt/spark")  # where a worker host has Spark
KAFKA_JARS = Path("/opt/kafka")  # and the Kafka broker's jars


def why_not() -> str | None:
    """Why hosts cannot be made here (None: they can)."""
    if os.geteuid() != 0:
        return "test hosts need root (network namespaces, veth pairs, mounts)"
    for tool in ("ip", "unshare", "nsenter"):
        if shutil.which(tool) is None:
            return f"test hosts need `{tool}` (iproute2, util-linux)"
    probe = f"{PREFIX}probe{os.getpid()}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode:
        return f"cannot make a network namespace: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


def free_range() -> ipaddress.IPv4Network:
    """A /24 of 10.0.0.0/8 that no route and no address of this machine touches."""
    taken = []
    for command in (["ip", "-j", "-4", "route", "show", "table", "all"], ["ip", "-j", "-4", "addr"]):
        for entry in json.loads(subprocess.run(command, capture_output=True, text=True, check=True).stdout or "[]"):
            if "dst" in entry and entry["dst"] not in ("default", "0.0.0.0/0"):
                taken.append(ipaddress.ip_network(entry["dst"], strict=False))
            for address in entry.get("addr_info", ()):
                taken.append(ipaddress.ip_network(f"{address['local']}/{address['prefixlen']}", strict=False))
    for third in range(213, 256):
        candidate = ipaddress.ip_network(f"10.{third}.{os.getpid() % 250 + 1}.0/24")
        if not any(candidate.overlaps(other) for other in taken):
            return candidate
    raise RuntimeError("no free /24 in 10.213-255.x.0 for the test hosts")


def sweep() -> list[str]:
    """Remove test hosts whose test process is gone (killed before its teardown): their processes,
    namespaces and links. Returns what it removed."""
    removed = []
    names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
    links = json.loads(subprocess.run(["ip", "-j", "link"], capture_output=True, text=True).stdout or "[]")
    for name in names + [link["ifname"] for link in links]:
        owner = OWNER.match(name)
        if owner and not Path(f"/proc/{owner.group(1)}").exists():
            if name in names:
                _kill_all(name)
                subprocess.run(["ip", "netns", "del", name], capture_output=True)
            else:
                subprocess.run(["ip", "link", "del", name], capture_output=True)
            removed.append(name)
    return removed


@dataclass
class Host:
    """One test host: its name, address, and the process holding its namespaces."""

    name: str
    address: str
    namespace: str
    veth: str
    spark_home: Path | None = None  # where Spark is on this host (None: none)
    kafka_jars: Path | None = None  # where the Kafka broker's jars are
    holder: subprocess.Popen | None = None
    started: list[subprocess.Popen] = field(default_factory=list)

    def command(self, argv: list[str]) -> list[str]:
        """`argv` as run on this host (its network and mounts; the working folder /)."""
        return ["nsenter", "-t", str(self.holder.pid), "--net", "--mount", "--wd=/", "--", *argv]

    def place(self) -> Place:
        """This host as the place of a server the scripts start (a Spark master or worker, a broker)."""
        return Place(self.address, self.spark_home, self.kafka_jars, self.command)

    def run(self, argv: list[str], timeout: float = 60, **kwargs) -> subprocess.CompletedProcess:
        """Run a command on this host and wait for it (its output captured, as text)."""
        return subprocess.run(self.command(argv), capture_output=True, text=True, timeout=timeout, **kwargs)

    def start(self, argv: list[str], **kwargs) -> subprocess.Popen:
        """Start a command on this host, in the background (killed with the host at the end)."""
        process = subprocess.Popen(self.command(argv), **kwargs)
        self.started.append(process)
        return process

    def cut(self) -> None:
        """Its link down: no packet in or out until `restore` (a cable pulled)."""
        with network_lock(exclusive=True):  # the machine's links change: no browser is running meanwhile
            subprocess.run(["ip", "link", "set", self.veth, "down"], check=True)

    def restore(self) -> None:
        with network_lock(exclusive=True):
            subprocess.run(["ip", "link", "set", self.veth, "up"], check=True)

    def kill(self) -> None:
        """Every process on this host SIGKILLed, as a machine that died (its namespaces stay, empty
        of processes but for the holder)."""
        _kill_all(self.namespace, spare=self.holder.pid if self.holder else None)
        for process in self.started:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(10)

    def pids(self) -> list[int]:
        """The processes on this host (its network namespace), the holder's included."""
        found = subprocess.run(["ip", "netns", "pids", self.namespace], capture_output=True, text=True).stdout
        return [int(p) for p in found.split()]


class Hosts:
    """Hosts on one bridge (see the module's text); a context manager that removes them."""

    def __init__(self, names=("driver", "w1", "w2", "infra"), sees_project=("driver",),
                 shared: Path | None = None, spark: Path | None = None, kafka: Path | None = None):
        self.names, self.sees_project = tuple(names), set(sees_project)
        self.software = {SPARK_HOME: spark, KAFKA_JARS: kafka}  # where it is on a worker host: where it is here
        self.tag = f"{os.getpid()}x{next(_made)}"  # this process's n-th hosts
        self.bridge = f"{PREFIX}b{self.tag}"
        self.network = free_range()
        self.gateway = str(self.network[1])
        # The shared folder: on the machine's disk, outside /tmp (each host's own) and the checkout.
        self.shared = Path(shared) if shared else Path(tempfile.mkdtemp(prefix="sscript-shared-", dir="/var/tmp"))
        self._made_shared = shared is None
        if self._made_shared:  # servers on a host run as their own users (PostgreSQL): they pass through
            self.shared.chmod(0o711)
        self.hosts: dict[str, Host] = {}

    def __getitem__(self, name: str) -> Host:
        return self.hosts[name]

    def __enter__(self) -> "Hosts":
        # The machine's addresses and links change while hosts are made and removed: no browser runs
        # meanwhile (chromium fails its requests in flight then; sensorscript/dashboard/browser.py).
        with network_lock(exclusive=True):
            try:
                self._make()
            except BaseException:
                self._close()
                raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _make(self) -> None:
        sweep()
        _ip("link", "add", self.bridge, "type", "bridge")
        _ip("addr", "add", f"{self.gateway}/{self.network.prefixlen}", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")
        for index, name in enumerate(self.names):
            namespace, veth = f"{PREFIX}{self.tag}-{name}", f"{PREFIX}v{self.tag}{index}"
            address = str(self.network[10 + index])
            there = {at: None if here is None else here if name in self.sees_project else at
                     for at, here in self.software.items()}
            host = self.hosts[name] = Host(name, address, namespace, veth, there[SPARK_HOME], there[KAFKA_JARS])
            _ip("netns", "add", namespace)
            _ip("link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", namespace)
            _ip("link", "set", veth, "master", self.bridge, "up")
            for argv in (["addr", "add", f"{address}/{self.network.prefixlen}", "dev", "eth0"],
                         ["link", "set", "eth0", "up"], ["link", "set", "lo", "up"]):  # no default route
                _ip("-n", namespace, *argv)
            host.holder = subprocess.Popen(
                ["ip", "netns", "exec", namespace, "unshare", "--mount", "--propagation", "private", "--",
                 "sh", "-c", self._mounts(name) + 'echo ready; exec sleep infinity'],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            line = host.holder.stdout.readline()
            if line.strip() != "ready":
                raise RuntimeError(f"host {name}: its mounts failed: {host.holder.stderr.read().strip()}")
            host.holder.stdout.close()
        # /etc/hosts of every host: the hosts by name (each host's /etc is the machine's: a file
        # mounted over it in each mount namespace).
        names = "".join(f"{h.address} {h.name}\n" for h in self.hosts.values())
        (self.shared / ".hosts").write_text(f"127.0.0.1 localhost\n{names}")
        for host in self.hosts.values():
            host.run(["mount", "--bind", str(self.shared / ".hosts"), "/etc/hosts"]).check_returncode()

    def _mounts(self, name: str) -> str:
        """The shell lines that give a host its view of the machine's files."""
        sees = name in self.sees_project
        lines = ["set -e", "mount --make-rprivate /"]
        if not sees:  # Spark and Kafka bound first: they may lie under /tmp (a checkout there), hidden next
            lines.append("mount -t tmpfs -o mode=0755 tmpfs /opt")
            for at, here in self.software.items():
                if here is not None:
                    lines += [f"mkdir {at}", f"mount --bind {here} {at}", f"mount -o remount,bind,ro {at}"]
        # /tmp becomes the host's own; a checkout under /tmp stays where it is for a host that sees it
        # (moved aside and back). The shared folder is outside /tmp.
        keep = sees and Path("/tmp") in ROOT.parents
        if keep:
            lines += ["mount -t tmpfs tmpfs /mnt", "mkdir /mnt/project", f"mount --bind {ROOT} /mnt/project"]
        lines.append("mount -t tmpfs -o mode=1777 tmpfs /tmp")
        if keep:
            lines += [f"mkdir -p {ROOT}", f"mount --move /mnt/project {ROOT}", "umount /mnt"]
        hide = [] if sees else [str(ROOT), *HIDDEN]
        lines += [f"[ -d {path} ] && mount -t tmpfs -o mode=0755 tmpfs {path} || true" for path in hide]
        return "; ".join(lines) + "; "

    def close(self) -> None:
        """Every host's processes killed, its namespace and links removed; the shared folder too
        when these hosts made it."""
        with network_lock(exclusive=True):
            self._close()

    def _close(self) -> None:
        for host in self.hosts.values():
            for process in host.started:
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
            _kill_all(host.namespace)
            if host.holder is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    host.holder.wait(10)
            subprocess.run(["ip", "netns", "del", host.namespace], capture_output=True)
            subprocess.run(["ip", "link", "del", host.veth], capture_output=True)
        subprocess.run(["ip", "link", "del", self.bridge], capture_output=True)
        if self._made_shared:
            shutil.rmtree(self.shared, ignore_errors=True)


def _ip(*argv: str) -> None:
    done = subprocess.run(["ip", *argv], capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"ip {' '.join(argv)}: {done.stderr.strip()}")


def _kill_all(namespace: str, spare: int | None = None) -> None:
    """SIGKILL every process in a network namespace (but `spare`), until none is left."""
    for _ in range(50):
        found = subprocess.run(["ip", "netns", "pids", namespace], capture_output=True, text=True).stdout
        pids = [int(p) for p in found.split() if int(p) != spare]
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweep", action="store_true", help="only remove what killed runs left behind")
    parser.add_argument("--for", dest="seconds", type=float, default=0.0, help="keep the hosts this long")
    args = parser.parse_args()
    reason = why_not()
    if reason is not None:
        raise SystemExit(f"netns.py: {reason}")
    if args.sweep:
        removed = sweep()
        print(f"left behind by killed runs, removed: {', '.join(removed) if removed else 'nothing'}")
        return
    with Hosts() as hosts:
        for host in hosts.hosts.values():
            print(f"{host.name}: {host.address} (nsenter -t {host.holder.pid} --net --mount)")
        print(f"shared folder: {hosts.shared}")
        sys.stdout.flush()
        time.sleep(args.seconds)
    print("hosts removed")


if __name__ == "__main__":
    main()
