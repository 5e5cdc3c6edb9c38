"""What a generated job imports at run time: record parsing, the stateful engine, sinks.

Nothing here imports the compiler (parser/, graph/, ...): the runtime ships to
Spark executors with the job and must stay small.
"""
