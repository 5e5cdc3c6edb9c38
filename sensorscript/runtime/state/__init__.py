"""One partition's work and state per micro-batch: the watermark policies (`watermark`), the
vectorised engine of slices, windows and combines (`engine`), the stages of a partition shared by
Spark and the Spark-free `LocalRun` (`tasks`), patterns (`cep/`), and the numpy kernels that the
engine and the patterns both run (`kernels/`: expressions, sorting).

May import: plan, ingest.
"""
