"""Why Spark stopped a job's query, in one sentence a user can act on.

Spark's account of a failure is long: error classes in brackets (`[STREAM_FAILED]`), their causes
nested in one another, a Python worker's traceback, a JVM's, then the query's whole plan. Its first
line that names an error is often a line of source (`raise PySparkRuntimeError(`). What a user
needs is what happened, in the job's terms: a table of the error classes and crashes a job meets,
else the innermost error the account names (a Python exception with where it was raised, or the
message of Spark's innermost error class). Spark's own account stays in OUT/spark.log
(runtime/control/session.py).
"""

from __future__ import annotations

import re

# Spark's error classes a job meets, and what they mean for it; several in one account are told
# from the outermost to the innermost, each phrase following the one before it after a colon.
MEANINGS = {
    "STREAMING_PYTHON_RUNNER_INITIALIZATION_FAILURE":
        "the Python worker Spark starts on the driver to set up a stateful stage failed",
    "STREAMING_PYTHON_RUNNER_INITIALIZATION_TIMEOUT_FAILURE":
        "the Python worker Spark starts on the driver to set up a stateful stage did not answer in time",
    "STREAMING_PYTHON_RUNNER_INITIALIZATION_COMMUNICATION_FAILURE":
        "the Python worker Spark starts on the driver to set up a stateful stage lost its connection",
    "KAFKA_DATA_SOURCE_NOT_ENABLED":
        "Spark has no Kafka connector (scripts/setup.sh fetches it into .venv/jars/kafka-connector, and the job "
        "hands it to Spark)",
    "BROADCAST_VARIABLE_NOT_LOADED":
        "it could not load the job's plan, which Spark sent as a broadcast variable such a worker cannot read",
}
# Crashes Spark reports as text rather than as an error class of their own.
CRASHES = {
    "All masters are unresponsive": "the Spark master did not admit the job: it is down, or it was started with "
                                    "another secret than --cluster-secret gives, or with none "
                                    "(--cluster-unauthenticated)",
    "Python worker exited unexpectedly": "a Python worker of the job died (killed, or out of memory)",
    "java.lang.OutOfMemoryError": "a JVM of Spark's ran out of memory",
}

# Failures that say nothing of the job: Spark gives a Python process it starts beside the driver (a
# Python source's runner, the planner of a stateful stage) a fixed 10 seconds to connect back, which a
# loaded machine can miss. The query started again from its checkpoint goes on (run_loop.py).
PASSING = ("Python worker failed to connect back",
           "Timed out while waiting for the Python worker to connect back",
           "[STREAMING_PYTHON_RUNNER_INITIALIZATION_TIMEOUT_FAILURE]")

_CLASS = re.compile(r"\[([A-Z][A-Z0-9_]*_[A-Z0-9_]+)\]")
_ERROR = re.compile(r"^(?:Caused by: )?(?:[A-Za-z_][\w$]*\.)*([A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt)): ?(.*)$")
_FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+), in (\S+)')
_SQLSTATE = re.compile(r"\s*SQLSTATE: \w+")
LONGEST = 500  # characters of a message


def describe(error: BaseException | str) -> str:
    """What went wrong, in one line. An exception that is not Spark's (a sink's OSError) is its
    type and its message's first line."""
    text = str(error)
    if not isinstance(error, str) and not _from_spark(error, text):
        first = next((line.strip() for line in text.splitlines() if line.strip()), "")
        return f"{type(error).__name__}: {first}"[:LONGEST]
    account = _account(text)
    meanings = list(dict.fromkeys(MEANINGS[name] for name in _CLASS.findall(account) if name in MEANINGS))
    if meanings:
        return ": ".join(meanings)[:LONGEST]
    crash = next((meaning for fragment, meaning in CRASHES.items() if fragment in account), None)
    raised = _innermost_error(account)
    if crash:
        return (crash + (f" ({raised})" if raised else ""))[:LONGEST]
    if raised:
        return raised[:LONGEST]
    names = _CLASS.findall(account)
    if names:  # the innermost error class's message
        message = account.rsplit(f"[{names[-1]}]", 1)[1].strip().splitlines()[0]
        return f"Spark stopped the query: {_SQLSTATE.sub('', message).strip()} ({names[-1]})"[:LONGEST]
    return next((line.strip() for line in account.splitlines() if line.strip()), "an unknown error")[:LONGEST]


def passing(error: BaseException | str) -> bool:
    """Whether Spark's account of a failure is one of PASSING's: nothing of the job is wrong."""
    account = _account(str(error))
    return any(fragment in account for fragment in PASSING)


def _account(text: str) -> str:
    """Spark's account of a failure without the query's plan, which follows it."""
    return text.split("=== Streaming Query ===", 1)[0]


def _from_spark(error: BaseException, text: str) -> bool:
    module = type(error).__module__ or ""
    return module.startswith(("pyspark", "py4j")) or "Traceback (most recent call last)" in text


def _innermost_error(account: str) -> str | None:
    """The last error a traceback ends with (a Python worker's or the driver's), with the frame
    that raised it unless that frame is Spark's own: `ValueError: ... (at FILE, line N, in F)`."""
    found, frame = None, None
    last_frame = None
    for line in account.splitlines():
        where = _FRAME.match(line)
        if where:
            last_frame = where
            continue
        raised = _ERROR.match(line.strip())
        if raised and not line.startswith((" ", "\t")):
            found, frame = raised, last_frame
    if found is None:
        return None
    name, message = found.group(1), _SQLSTATE.sub("", _CLASS.sub("", found.group(2))).strip()
    sentence = f"{name}: {message}" if message else name
    if frame is not None and "/pyspark/" not in frame.group(1) and "pyspark.zip" not in frame.group(1):
        sentence += f" (at {_short(frame.group(1))}, line {frame.group(2)}, in {frame.group(3)})"
    return sentence


def _short(path: str) -> str:
    """A file of the product by its place in the package; another (a user's operators) as it is."""
    marker = "/sensorscript/runtime/"
    return "sensorscript/runtime/" + path.rsplit(marker, 1)[1] if marker in path else path
