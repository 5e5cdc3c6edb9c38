"""What the tests need of a real MQTT broker, a real Kafka broker and a real PostgreSQL: `Broker` is
scripts/mosquitto.py's (Debian's mosquitto on a free port of 127.0.0.1, which the benchmarks and the
soak start too), `KafkaBroker` scripts/kafka_broker.py's (Apache Kafka in KRaft mode, from the jars
scripts/setup.sh fetched), `PostgresServer` scripts/postgres_server.py's (Debian's PostgreSQL, initdb
in a temporary folder); here the rule for a machine without one (`need_broker`, `need_kafka`,
`need_postgres`), a subscriber, a publisher (scripts/mosquitto.py's), and the `broker`, `kafka` and `postgres` fixtures.
"""

from __future__ import annotations

import secrets
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
from kafka_broker import KafkaBroker, why_no_kafka  # noqa: E402
from mosquitto import Broker, Publisher, why_no_broker  # noqa: E402
from postgres_server import PostgresServer, why_no_postgres  # noqa: E402


def need_broker() -> None:
    """A broker test's first line: skip where none can be started, but fail in CI (CI=true)."""
    from tests.conftest import need

    need(why_no_broker(), "the MQTT tests")


def subscribe(broker: Broker, topic: str, client_id: str) -> tuple[object, list[dict]]:
    """A QoS 1 subscriber with a persistent session on `topic`, connected and looping: (the paho
    client, the list the JSON objects it receives are appended to). Disconnect and stop its loop."""
    import json

    import paho.mqtt.client as paho
    from paho.mqtt.enums import CallbackAPIVersion

    received: list[dict] = []
    client = paho.Client(CallbackAPIVersion.VERSION2, client_id=client_id, clean_session=False)
    if broker.user:
        client.username_pw_set(broker.user, broker.password)
    client.on_connect = lambda connected, *_: connected.subscribe(topic, qos=1)
    client.on_message = lambda _, userdata, message: received.append(json.loads(message.payload))
    client.connect("127.0.0.1", broker.port)
    client.loop_start()
    return client, received


@pytest.fixture
def broker(tmp_path):
    """A running mosquitto on a free port (anonymous), stopped after the test."""
    need_broker()
    started = Broker(tmp_path / "broker").start()
    yield started
    started.stop()


def need_kafka() -> None:
    """A Kafka test's first line: skip where no broker can be started (its jars not fetched, no Java),
    but fail in CI (CI=true)."""
    from tests.conftest import need

    need(why_no_kafka(), "the Kafka tests")


# The Kafka broker's SASL user (its second listener, `KafkaBroker.sasl_bootstrap`) and a password
# of this test run's own, which the tests look for where it must never be (status, logs, output).
SASL_USER, SASL_PASSWORD = "sensors", f"pw-{secrets.token_hex(12)}"


def sasl_options() -> tuple[tuple[str, ...], dict[str, str]]:
    """The `--kafka-option` values of a job that logs in as SASL_USER, and the environment that holds
    the secret (the JAAS line) they name."""
    jaas = (f'org.apache.kafka.common.security.plain.PlainLoginModule required username="{SASL_USER}" '
            f'password="{SASL_PASSWORD}";')
    options = ("security.protocol=SASL_PLAINTEXT", "sasl.mechanism=PLAIN", "sasl.jaas.config=env:SSCRIPT_TEST_JAAS")
    return tuple(a for o in options for a in ("--kafka-option", o)), {"SSCRIPT_TEST_JAAS": jaas}


@pytest.fixture(scope="module")
def kafka(tmp_path_factory):
    """A running Apache Kafka broker (KRaft) on a free port of 127.0.0.1 for the tests of a module
    (each with topics of its own; a test that stops it starts it again), killed after them; a second
    listener takes SASL PLAIN logins of SASL_USER (`sasl_bootstrap`)."""
    need_kafka()
    started = KafkaBroker(tmp_path_factory.mktemp("kafka"), users={SASL_USER: SASL_PASSWORD}).start()
    yield started
    started.stop(kill=True)


def need_postgres() -> None:
    """A PostgreSQL test's first line: skip where no server can be started, but fail in CI (CI=true)."""
    from tests.conftest import need

    need(why_no_postgres(), "the PostgreSQL tests")


@pytest.fixture(scope="session")
def postgres_server():
    """One PostgreSQL server for the tests of a worker that share it (each in a schema of its own:
    `postgres`); a test that stops or kills its server starts one of its own."""
    need_postgres()
    server = PostgresServer(durable=False).start()
    yield server
    server.remove()


@pytest.fixture
def postgres(postgres_server, request, monkeypatch):
    """(the server, the address of a sink in a schema of this test's own); its password in PGPASSWORD."""
    import re

    schema = "t_" + re.sub(r"[^a-z0-9_]", "_", request.node.name.lower())[:50]
    monkeypatch.setenv("PGPASSWORD", postgres_server.password)
    with postgres_server.connect() as db:
        db.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    return postgres_server, f"{postgres_server.url}{'&' if '?' in postgres_server.url else '?'}schema={schema}"
