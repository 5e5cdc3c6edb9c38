"""The columns of what the job writes, named once: every sink (sinks.py, postgres_sink.py), the
status's look at results (status.py) and the readers import them from here.
"""

RESULT_COLUMNS = ("stream", "ts", "window_start", "window_end", "value", "version")
MATCH_COLUMNS = ("start_ts", "end_ts", "events")  # pattern matches add these (docs/LANGUAGE.md, "Results")
# What identifies a result row across versions: a correction replaces all rows of a key at once
# (with the next version), or retracts them with a tombstone (value empty).
KEY_COLUMNS = ("stream", "ts", "window_start", "window_end", "start_ts", "end_ts")
# Which version of the plan wrote a row (`sscript update` makes the next; 1 before any update):
# the run sets it on the rows of each batch, all of which one version computed.
PLAN_COLUMN = "plan_version"
QUARANTINE_COLUMNS = ("raw", "reason")
LATE_COLUMNS = ("sensor_id", "ts", "value", "watermark", "streams", "batch_id", "too_late")
METRIC_COLUMNS = ("batch_id", "partition", "time", "name", "value")  # partition empty: the whole job
# Per minute (of wall time), partition and measure: how many batches reported it, their sum, least and most.
MINUTE_COLUMNS = ("minute", "partition", "name", "batches", "total", "low", "high")
