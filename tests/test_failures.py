"""Spark's accounts of a failed query, told in one sentence (runtime/control/failures.py).

The accounts in tests/spark_errors/ are what real runs of pyspark 4.3 raised (paths shortened):
plan_as_broadcast.txt, a job whose plan rode in the second stage's closure (issue #25: a closure of
over 1 MiB travels as a broadcast variable, which the worker that sets up a transformWithStateInPandas
stage cannot load); user_operator_raised.txt, a user's pattern operator that raised in a worker.
"""

from pathlib import Path

from sensorscript.runtime.control.failures import describe

ACCOUNTS = Path(__file__).parent / "spark_errors"


def test_the_plan_that_travelled_as_a_broadcast_is_told_as_what_happened():
    said = describe(ACCOUNTS.joinpath("plan_as_broadcast.txt").read_text())
    assert said == ("the Python worker Spark starts on the driver to set up a stateful stage failed: it could "
                    "not load the job's plan, which Spark sent as a broadcast variable such a worker cannot read")


def test_an_error_a_worker_raised_is_named_with_where_it_was_raised():
    said = describe(ACCOUNTS.joinpath("user_operator_raised.txt").read_text())
    assert said == "ValueError: cannot judge 7.0 (at /home/engineer/alarms/out/operators/bad_ops.py, line 9, in Q)"


def test_an_error_in_the_product_names_its_place_in_the_package():
    account = ('An exception was thrown from the Python worker:\nTraceback (most recent call last):\n'
               '  File "/opt/spark/python/lib/pyspark.zip/pyspark/worker.py", line 4327, in invoke_udf\n'
               '    run_process()\n'
               '  File "/srv/app/sensorscript.zip/sensorscript/runtime/state/engine.py", line 12, in step\n'
               '    raise KeyError(name)\n'
               "KeyError: 'fragile'\n")
    assert describe(account) == "KeyError: 'fragile' (at sensorscript/runtime/state/engine.py, line 12, in step)"


def test_a_crash_says_what_died():
    account = ("[STREAM_FAILED] Query [id = 1] terminated with exception: Job aborted due to stage failure: "
               "Task 0 in stage 3.0 failed 1 times: org.apache.spark.SparkException: Python worker exited "
               "unexpectedly (crashed)\n=== Streaming Query ===\nIdentifier: x\n")
    assert describe(account).startswith("a Python worker of the job died (killed, or out of memory)")


def test_another_error_class_is_told_by_its_innermost_message():
    account = ("[STREAM_FAILED] Query [id = 1] terminated with exception: [PATH_NOT_FOUND] Path does not exist: "
               "file:/data/in. SQLSTATE: 42K03\n=== Streaming Query ===\nLogical Plan: ...")
    assert describe(account) == "Spark stopped the query: Path does not exist: file:/data/in. (PATH_NOT_FOUND)"


def test_an_exception_not_from_spark_is_its_type_and_first_line():
    error = OSError("the disk is full\n\tat frame0(Sink.java:0)")
    assert describe(error) == "OSError: the disk is full"
