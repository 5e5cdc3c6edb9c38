"""A bridge gateway for trying the MQTT source: publishes readings to a broker, paced by their time.

    .venv/bin/python scripts/gateway.py DATA_FOLDER --broker mqtt://127.0.0.1:1884 [--topic bridge]
        [--speed 60] [--qos 1]

Reads the readings of DATA_FOLDER (CSV `sensor_id,ts,value` files, as scripts/generate_data.py writes
them), in time order, and publishes them as a gateway does: every tenth of a second of their time,
one message per sensor on TOPIC/SENSOR holding its readings of that tenth as lines `ts,value` (so
the job reads them with `--sensor-from-topic -1`), with QoS 1. `--speed N` plays N seconds of
readings per second (0: as fast as the broker takes them). Lines that are not readings (the bad
lines generate_data.py adds) are published as they are, on TOPIC/unparsed, for the job's
quarantine. The broker's password, if it needs one, comes from SSCRIPT_MQTT_PASSWORD, as the job's, and
crosses the network unencrypted (mqtt:// to another host) only with --plain-password.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import defaultdict
from pathlib import Path

from sensorscript.runtime.ingest import mqtt

TICK_MS = 100


def readings(folder: Path) -> tuple[list[tuple[int, str, str]], list[str]]:
    """(ts, sensor, "ts,value") of every reading in the folder's CSV files, in time order, and the
    lines that are not readings."""
    found, bad = [], []
    for path in sorted(folder.glob("*.csv")):
        for line in path.read_text(errors="replace").splitlines():
            parts = line.split(",")
            if line == "sensor_id,ts,value":
                continue
            if len(parts) == 3 and parts[1].lstrip("-").isdigit():
                found.append((int(parts[1]), parts[0], f"{parts[1]},{parts[2]}"))
            else:
                bad.append(line)
    found.sort()
    return found, bad


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--broker", default="mqtt://127.0.0.1:1884", help="mqtt://[USER@]HOST:PORT (mqtts:// for TLS)")
    parser.add_argument("--topic", default="bridge", help="readings go to TOPIC/SENSOR")
    parser.add_argument("--speed", type=float, default=60.0, help="seconds of readings per second (0: at once)")
    parser.add_argument("--qos", type=int, choices=(0, 1), default=1)
    parser.add_argument("--ca", help="the broker's CA certificate (TLS)")
    parser.add_argument("--plain-password", action="store_true",
                        help="send the password over plain mqtt:// to a broker on another host (refused otherwise)")
    args = parser.parse_args()
    try:
        address = mqtt.Address.parse(f"{args.broker.rstrip('/')}/{args.topic}", "--broker")
    except ValueError as exc:
        raise SystemExit(f"gateway: {exc}") from None
    found, bad = readings(args.folder)
    if not found:
        raise SystemExit(f"gateway: no readings in {args.folder} (scripts/generate_data.py writes some)")
    try:
        client = mqtt.client(address, f"gateway-{os.getpid()}", mqtt.Tls(ca=args.ca),
                             login=mqtt.Login(plain=args.plain_password, option="--plain-password"))
    except ValueError as exc:
        raise SystemExit(f"gateway: {exc}") from None
    client.max_inflight_messages_set(1000)
    try:
        client.connect(address.host, address.port)
    except OSError as exc:
        raise SystemExit(f"gateway: cannot connect to {address.host}:{address.port}: {exc.strerror or exc}") from None
    client.loop_start()
    sent = client.publish(f"{args.topic}/unparsed", "\n".join(bad), qos=args.qos) if bad else None
    first, started, messages = found[0][0], time.monotonic(), 0
    tick: dict[str, list[str]] = defaultdict(list)
    tick_end = first - first % TICK_MS + TICK_MS
    for index, (ts, sensor, line) in enumerate(found + [(None, "", "")]):
        if ts is None or ts >= tick_end:
            if args.speed:
                time.sleep(max(0.0, (tick_end - first) / 1000 / args.speed - (time.monotonic() - started)))
            for name, lines in tick.items():
                sent = client.publish(f"{args.topic}/{name}", "\n".join(lines), qos=args.qos)
                messages += 1
                if messages % 20_000 == 0:  # paho numbers at most 65,535 messages in flight
                    sent.wait_for_publish(120)
            tick.clear()
            if ts is None:
                break
            tick_end = ts - ts % TICK_MS + TICK_MS
        tick[sensor].append(line)
    if sent is not None:
        sent.wait_for_publish(120)
    client.disconnect()
    client.loop_stop()
    print(f"published {len(found):,} readings of {len({s for _, s, _ in found})} sensors in {messages:,} messages "
          f"to {address.host}:{address.port}/{args.topic}/SENSOR" + (f", and {len(bad)} bad lines" if bad else "")
          + f", in {time.monotonic() - started:.1f} s")


if __name__ == "__main__":
    sys.exit(main())
