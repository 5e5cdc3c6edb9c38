"""Nothing lost, nothing missed (#40, items 3 and 5): a process writing results and delivering their
alarms (tests/alarm_child.py: the product's sink, outbox, staging and delivery threads) SIGKILLed
ten times, five at chosen points of writing (before a batch's write, between a batch's write and its
alarms, between a correction's staging and its write, between a correction's write and its taking)
and five at random moments of writing and delivering, then run to the end, to a receiver that
answers 503 to every 4th request and one that is down meanwhile. Each receiver ends with every
incident in the state the rows say (the reference: the newest row of every key, made by the
generator, not the product), and with every state of every incident: its revisions 1..n, each id
once but for the requests in flight at a kill."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.alarm_child import KINDS, units
from tests.receivers import Receiver

ROOT = Path(__file__).resolve().parent.parent
CHOSEN = ["before-write:3", "after-write:7", "after-stage:-2", "after-write:-3", "after-write:-4"]


def reference_incidents(newest: dict[tuple, list[dict]]) -> dict[tuple, tuple]:
    """From the newest rows of every key: every match living (open, its version), by stream, time and
    sensor; every run of 1s of a flag from where it begins (open while it lasts to the last row,
    closed once a 0 follows)."""
    found = {}
    for stream, kind in KINDS.items():
        rows = sorted((r for (s, _), key in newest.items() if s == stream for r in key if r["value"] is not None),
                      key=lambda r: r["ts"])
        if kind == "match":
            found.update({(stream, r["ts"], json.loads(r["events"])[0]["sensor"]): ("open", r["version"]) for r in rows})
            continue
        on = None
        for r in rows:
            if r["value"] == 1.0 and on is None:
                on = r["ts"]
                found[(stream, on, None)] = ("open", None)
            elif r["value"] != 1.0 and on is not None:
                found[(stream, on, None)] = ("closed", None)
                on = None
    return found


def standing(received: list[dict]) -> dict[tuple, tuple]:
    last: dict[str, dict] = {}
    for alarm in received:
        if alarm["revision"] > last.get(alarm["incident"], {"revision": 0})["revision"]:
            last[alarm["incident"]] = alarm
    return {(a["stream"], a["started_ms"], a["events"][0]["sensor"] if a["kind"] == "match" else None):
            ("closed" if a["state"] == "resolved" else "open", a["version"] if a["kind"] == "match" else None)
            for a in last.values() if not a["retracted"]}


def test_alarms_through_ten_kills_of_writing_and_delivering(tmp_path):
    failing, down = Receiver().start(), Receiver()
    failing.fail_every = 4
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "tests.alarm_child", str(tmp_path), failing.url, down.url]
    rng = random.Random(40)
    kills = 0
    try:
        for crash in CHOSEN:  # each dies by its own hand at that point
            finished = subprocess.run([*command, "--crash", crash], env=environment, capture_output=True, text=True,
                                      timeout=120)
            assert finished.returncode == -signal.SIGKILL, finished.stderr[-2000:]
            kills += 1
        down.start()  # back for the random kills: some land while it is being sent to
        for _ in range(5):
            process = subprocess.Popen(command, env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            time.sleep(rng.uniform(1.0, 3.0))
            process.send_signal(signal.SIGKILL)
            process.communicate(timeout=60)
            kills += 1
        finished = subprocess.run(command, env=environment, capture_output=True, text=True, timeout=300)
        assert finished.returncode == 0 and "done" in finished.stdout, finished.stderr[-2000:]
    finally:
        failing.stop()
        down.stop()
    assert kills == 10
    expected = reference_incidents(units()[1])
    assert len(expected) > 500 and {"open", "closed"} <= {state for state, _ in expected.values()}
    assert sum(1 for key in expected if key[2] == "S2") > 50  # matches of two sensors at the same instants
    for receiver in (failing, down):
        alarms = [alarm for _, alarm in receiver.received]
        assert standing(alarms) == expected
        revisions: dict[str, set[int]] = {}
        for alarm in alarms:
            revisions.setdefault(alarm["incident"], set()).add(alarm["revision"])
        assert all(seen == set(range(1, max(seen) + 1)) for seen in revisions.values())  # none missed
        ids = [alarm["id"] for alarm in alarms]
        assert len(ids) - len(set(ids)) <= 10 * 500  # repeats only of requests in flight at a kill
    assert any(a["retracted"] for _, a in failing.received) and any(a["state"] == "updated" for _, a in failing.received)
