"""Controlling the query: the Spark session (`session`), the stateful Spark operators
(`operators`), the run loop that starts the query and writes each batch (`run_loop`), stop
requests (`stopping`), and the batch job that corrects results for late readings (`correction`).

May import: plan, ingest, state, output.
"""
