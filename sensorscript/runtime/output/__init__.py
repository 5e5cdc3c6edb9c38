"""What leaves the stateful operators: the rows they emit (`rows`), the sinks those rows are written
to exactly once per batch (`sinks`), and the job's status (`status`).

May import: plan, ingest, state.
"""
