"""What a generated job imports at run time, on the driver and on every executor.

Nothing here imports the compiler (parser/, graph/, partition/, codegen/): the runtime ships
to Spark executors with the job and must stay small. Its packages follow a micro-batch; each
may import the packages listed before it and none listed after it (`tests/test_layers.py`):

Layers:
    plan: the plan as data (Job, Program), loaded from OUT, and its versions
    ingest: reading input: record rules, sources, the socket spool, stage 0's packets, the raw archive
    state: one partition's state per batch: watermark, engine, tasks, patterns (cep/)
    output: what leaves the operators: rows, sinks, the status
    control: the query: Spark session, stateful operators, run loop, stops, corrections
    job: what a generated job.py imports, with its main
"""
