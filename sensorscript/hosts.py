"""Whether a host is this machine: what the dashboard (a login off loopback) and MQTT (a password in
plain only to a broker here) both decide by.
"""

from __future__ import annotations

import ipaddress
import socket


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
