"""Controlling the query: the Spark session (`session`), the stateful Spark operators
(`operators`), a run's options (`run_options`), the run loop that starts the query and watches
it (`run_loop`) with its collaborators (`run_input`, `checkpoint`, `batch_writer`, `query`,
`switching`, `late_corrections`, `run_summary`), stop requests (`stopping`), and the batch job
that corrects results for late readings (`correction`).

May import: plan, ingest, state, output.
"""
