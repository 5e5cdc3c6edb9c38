"""Whether a host is this machine: what the dashboard (a login off loopback) and MQTT (a password in
plain only to a broker here) both decide by; free ports for the servers the scripts and tests
start (a broker, a Spark master, a receiver), and where such a server runs (`Place`).
"""

from __future__ import annotations

import ipaddress
import random
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable


@dataclass(frozen=True)
class Place:
    """Where a server the scripts and tests start runs (a broker, a Spark master or worker): by
    default this machine, on 127.0.0.1; or a test host (scripts/netns.py): its address, how a command
    runs there, and where Spark and the Kafka broker's jars are there (None: this machine's pyspark
    package and jar cache)."""

    address: str = "127.0.0.1"
    spark_home: Path | None = None
    kafka_jars: Path | None = None
    wrap: Callable[[list[str]], list[str]] = field(default=lambda argv: argv)


def loopback(host: str) -> bool:
    """An address (or name) of this machine that no other machine can reach: 127.0.0.0/8, ::1,
    localhost; any other name when every address it resolves to is one of those."""
    host = host.strip().strip("[]")
    if host.lower() == "localhost":
        return True
    try:
        addresses = [ipaddress.ip_address(host)]
    except ValueError:
        try:
            addresses = [ipaddress.ip_address(found[4][0].split("%")[0])
                         for found in socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)]
        except (OSError, ValueError):
            return False
    return bool(addresses) and all(_loopback(address) for address in addresses)


def _loopback(address) -> bool:
    mapped = getattr(address, "ipv4_mapped", None)  # ::ffff:127.0.0.1
    return address.is_loopback or (mapped is not None and mapped.is_loopback)


def free_ports(count: int = 1, host: str = "127.0.0.1") -> list[int]:
    """`count` distinct ports nothing listens on at `host`, for a server started next by another
    program (a broker, a Spark master) that is told its port.

    Taken below the kernel's ephemeral range (ip_local_port_range), never from it: a port the system
    picked for port 0 and freed again is soon handed to the next outgoing connection (a JVM's, a
    browser's) and would be in use by the time the server binds it. A server that can be started on port
    0 and say its port is better still (`sscript dashboard --port 0`)."""
    low = _ephemeral_low()
    chooser = random.SystemRandom()
    found: list[int] = []
    while len(found) < count:
        port = chooser.randrange(max(1024, low - 12_000), low)
        if port in found:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            try:
                probe.bind((host, port))
            except OSError:
                continue
        found.append(port)
    return found


def free_port(host: str = "127.0.0.1") -> int:
    return free_ports(1, host)[0]


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default
