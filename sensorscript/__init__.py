"""SensorScript: a compiler from sensor-monitoring scripts to PySpark Structured Streaming jobs.

Stages, in the order a workflow flows through them: parser/ (text -> checked AST),
graph/ (one shared DAG, window slicing), partition/ (placement of sensors and
computations), codegen/ + templates/ (job.py), runtime/ (what the job imports).
"""

__version__ = "0.1.0"
