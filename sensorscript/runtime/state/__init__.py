"""One partition's work and state per micro-batch: the watermark policies (`watermark`), the
vectorised engine of slices, windows and combines (`engine`, `expressions`), the stages of a
partition shared by Spark and the Spark-free `LocalRun` (`tasks`), and patterns (`cep/`).

May import: plan, ingest.
"""
