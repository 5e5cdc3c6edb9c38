"""The plan a job runs, as plain data: sensors, partitions, programs (`program`), the compiled
job loaded from OUT (`loading`), and the versions an update writes (`versions`).

May import: nothing of the runtime.
"""
