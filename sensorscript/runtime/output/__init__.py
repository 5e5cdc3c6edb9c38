"""What leaves the stateful operators: the rows they emit (`rows`), the sinks those rows are written
to exactly once per batch (`sinks`), the archive of raw readings for corrections (`archive`), and the
job's status (`status`).

May import: plan, ingest, state.
"""
