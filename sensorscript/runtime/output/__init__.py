"""What leaves the stateful operators: the rows they emit (`rows`), the sinks those rows are written
to exactly once per batch (`sinks`), the job's status (`status`), which rows are alarms (`alarms`)
and their delivery (`alerts/`).

May import: plan, ingest, state.
"""
