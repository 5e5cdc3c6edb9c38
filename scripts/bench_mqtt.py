"""What a job away from its MQTT broker costs, and how fast it catches up (issue #28).

    .venv/bin/python scripts/bench_mqtt.py [--messages 200000] [--lines-per-message 20]

A mosquitto of its own on 127.0.0.1 (scripts/mosquitto.py). The job's spool (runtime/ingest/mqtt_spool.py,
without Spark) subscribes once and leaves, as a job that stops; `--messages` messages of
`--lines-per-message` readings are published with QoS 1 while it is away, and the broker's resident
memory is read before and after: what a queued message costs the broker (docs/SOURCES_AND_SINKS.md,
"What the broker must be told"). Then the spool comes back and takes the backlog: messages and readings a second,
each written to disk (fsync) before it is acknowledged. The spool's pace bounds the MQTT source's;
the whole job's, with Spark, is scripts/soak.py --source mqtt.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import psutil

from mosquitto import Broker, why_no_broker
from sensorscript.runtime.ingest.mqtt_spool import MqttSpool


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--lines-per-message", type=int, default=20)
    args = parser.parse_args()
    import paho.mqtt.client as paho
    from paho.mqtt.enums import CallbackAPIVersion

    if (reason := why_no_broker()) is not None:
        raise SystemExit(f"bench_mqtt: {reason}")
    work = Path(tempfile.mkdtemp(prefix="sscript-bench-mqtt-"))
    broker = Broker(work / "broker").start()
    url = f"{broker.url}/gateways/#"
    try:
        MqttSpool(url, work / "spool", work / "journal", "sscript-bench", echo=lambda _: None).start().stop()
        before = psutil.Process(broker.process.pid).memory_info().rss
        publisher = paho.Client(CallbackAPIVersion.VERSION2, client_id="bench-gateways")
        publisher.max_inflight_messages_set(1000)
        publisher.connect("127.0.0.1", broker.port)
        publisher.loop_start()
        payload = b"".join(f"8MD{i % 100}-AZ,{1767225600000 + i},{i % 977 / 10:.3f}\n".encode()
                           for i in range(args.lines_per_message))
        started = time.perf_counter()
        for number in range(args.messages):
            sent = publisher.publish(f"gateways/gw{number % 64}", payload, qos=1)
            if number % 20_000 == 19_999:  # paho numbers at most 65,535 messages in flight
                sent.wait_for_publish(120)
        sent.wait_for_publish(120)
        published = time.perf_counter() - started
        time.sleep(1)
        after = psutil.Process(broker.process.pid).memory_info().rss
        print(f"published {args.messages:,} messages of {len(payload)} bytes ({args.lines_per_message} readings each) "
              f"while the job was away, in {published:.1f} s")
        print(f"broker memory: {before / 2**20:.1f} -> {after / 2**20:.1f} MiB: {(after - before) / args.messages:,.0f} "
              f"bytes a queued message; an hour of 1,000 messages a second would take "
              f"{(after - before) / args.messages * 3_600_000 / 2**30:.1f} GiB")
        started = time.perf_counter()
        spool = MqttSpool(url, work / "spool", work / "journal", "sscript-bench", echo=lambda _: None).start()
        while spool.messages < args.messages:
            if time.perf_counter() - started > 600:
                raise SystemExit(f"bench_mqtt: only {spool.messages:,} messages spooled in 600 s")
            time.sleep(0.02)
        took = time.perf_counter() - started
        spool.stop()
        files = len(list((work / "spool").glob("*.csv")))
        print(f"the spool took the backlog in {took:.1f} s: {args.messages / took:,.0f} messages/s, "
              f"{args.messages * args.lines_per_message / took:,.0f} readings/s, in {files:,} files "
              f"(each on disk before its messages were acknowledged); {spool.duplicates} repeats dropped")
        publisher.disconnect()
        publisher.loop_stop()
    finally:
        broker.stop()


if __name__ == "__main__":
    main()
