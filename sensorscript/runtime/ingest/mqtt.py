"""An MQTT broker's address and a connected paho-mqtt client: what the MQTT source
(runtime/ingest/mqtt_spool.py) and the alarms published over MQTT (runtime/output/alerts/mqtt_topic.py) share.

An address is `mqtt://[USER@]HOST[:PORT]/TOPIC` (port 1883) or `mqtts://...` (TLS, port 8883). The
password is never part of it, nor of any argument a `ps` shows: it comes from the environment, a
variable per use (`Login`: the source's PASSWORD_VARIABLE, the alarms' ALERTS_PASSWORD_VARIABLE), and
is sent over plain mqtt:// only to a broker on this host unless the user says so (`Login.plain`).
TLS takes a CA file (and, for brokers that want one, a client certificate and its key) from `Tls`;
`mqtts://` without a CA file trusts the system's certificates.
"""

from __future__ import annotations

import os
import ssl
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from sensorscript.hosts import loopback

PASSWORD_VARIABLE = "SSCRIPT_MQTT_PASSWORD"  # the source broker's password, for USER@ in an mqtt:// address
ALERTS_PASSWORD_VARIABLE = "SSCRIPT_ALERTS_MQTT_PASSWORD"  # the password of an alarms' broker (--alerts mqtt://)
PLAIN_OPTION = "--mqtt-plain-password"  # the run's option that lets a password cross the network unencrypted
SCHEMES = {"mqtt": 1883, "mqtts": 8883}


@dataclass(frozen=True)
class Tls:
    """The files TLS needs: the CA that signed the broker's certificate, a client certificate and key."""

    ca: str | None = None
    cert: str | None = None
    key: str | None = None

    def __bool__(self) -> bool:
        return any((self.ca, self.cert, self.key))


@dataclass(frozen=True)
class Address:
    host: str
    port: int
    topic: str
    user: str | None = None
    tls: bool = False

    @staticmethod
    def parse(url: str, what: str = "an MQTT address") -> "Address":
        """`mqtt://[USER@]HOST[:PORT]/TOPIC`, or ValueError in the user's words. A password in the
        address is refused: it would show in `ps` and in the shell's history."""
        parts = urlsplit(url, allow_fragments=False)  # `#` is a topic wildcard here, not a fragment
        if parts.scheme not in SCHEMES:
            raise ValueError(f"{url}: {what} is mqtt://[USER@]HOST[:PORT]/TOPIC (or mqtts:// for TLS)")
        if parts.password is not None:
            raise ValueError(f"{url}: a password in the address shows in `ps` and the shell's history; "
                             f"give it in the environment variable {PASSWORD_VARIABLE} instead")
        topic = unquote(parts.path[1:]) if parts.path.startswith("/") else ""
        try:
            port = parts.port
        except ValueError:
            raise ValueError(f"{url}: the port is not a number from 1 to 65535") from None
        if not parts.hostname or not topic:
            raise ValueError(f"{url}: {what} is mqtt://[USER@]HOST[:PORT]/TOPIC: "
                             f"{'the host' if not parts.hostname else 'the topic'} is missing")
        return Address(parts.hostname, port or SCHEMES[parts.scheme], topic,
                       unquote(parts.username) if parts.username else None, parts.scheme == "mqtts")

    def __str__(self) -> str:
        user = f"{self.user}@" if self.user else ""
        return f"{'mqtts' if self.tls else 'mqtt'}://{user}{self.host}:{self.port}/{self.topic}"


@dataclass(frozen=True)
class Login:
    """Where a use of MQTT takes its password from (`variable`), and whether it may send it over plain
    mqtt:// to a broker on another host (`plain`: the user's say, PLAIN_OPTION; anyone on the way reads
    it otherwise)."""

    variable: str = PASSWORD_VARIABLE
    plain: bool = False
    option: str = PLAIN_OPTION  # how the user says `plain` (a script may have its own flag)

    def password(self, address: Address, environ=os.environ) -> str | None:
        """The password for `address`, or ValueError in the user's words where sending it is refused."""
        password = environ.get(self.variable) if address.user else None
        if password and not address.tls and not self.plain and not loopback(address.host):
            raise ValueError(f"mqtt://{address.host}:{address.port}: the password in {self.variable} would cross the "
                             f"network unencrypted; use mqtts:// (TLS), or give {self.option} to send it anyway")
        return password


def client(address: Address, client_id: str, tls: Tls = Tls(), persistent: bool = False,
           manual_ack: bool = False, login: Login = Login()):
    """A paho-mqtt client for `address` (not connected yet): MQTT 3.1.1, the user with the password
    from `login` (ValueError where it is refused), TLS when the address is mqtts:// or `tls` names
    files. `persistent`: the broker keeps the session (subscriptions, and QoS 1 messages while the
    client is away) under `client_id`. `manual_ack`: a QoS 1 message is acknowledged when the caller says so, not when
    the message callback returns."""
    import paho.mqtt.client as paho
    from paho.mqtt.enums import CallbackAPIVersion

    made = paho.Client(CallbackAPIVersion.VERSION2, client_id=client_id, clean_session=not persistent,
                       protocol=paho.MQTTv311, manual_ack=manual_ack)
    password = login.password(address)
    if address.user:
        made.username_pw_set(address.user, password)
    if address.tls or tls:
        for name, path in (("--mqtt-ca", tls.ca), ("--mqtt-cert", tls.cert), ("--mqtt-key", tls.key)):
            if path and not os.path.isfile(path):
                raise ValueError(f"{name} {path}: no such file")
        made.tls_set(ca_certs=tls.ca, certfile=tls.cert, keyfile=tls.key, cert_reqs=ssl.CERT_REQUIRED,
                     tls_version=ssl.PROTOCOL_TLS_CLIENT)
    made.reconnect_delay_set(min_delay=1, max_delay=30)
    return made


def refused(reason_code, login: Login = Login()) -> str:
    """A broker's refusal of a connection in the user's words."""
    text = str(reason_code)
    if "authori" in text.lower() or "password" in text.lower():
        return (f"the broker refused the connection ({text}): check the user in the address and the password in "
                f"{login.variable}")
    return f"the broker refused the connection ({text})"
