"""`python -m sensorscript.report ...`: the child process in which `sscript report` runs Spark."""

from sensorscript.report.measured import measure_main

measure_main()
