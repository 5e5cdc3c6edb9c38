"""SensorScript: a compiler from sensor-monitoring scripts to PySpark Structured Streaming jobs.

Stages, in the order a workflow flows through them: parser/ (text -> checked AST),
graph/ (one shared DAG, window slicing), partition/ (placement of sensors and
computations), codegen/ + templates/ (job.py), runtime/ (what the job imports).

The modules import each other in layers, listed lowest first: a module may import from its own
layer (without forming a circle) and from the layers before it, never from one after it
(`tests/test_layers.py`). The runtime sits low because the compiler writes the runtime's plan
data, while the runtime, shipped alone to Spark's executors, knows nothing of the compiler.

Layers:
    errors, times, memory, processes, redaction, atomic, hosts, resources: what every stage shares (diagnostics, forks, secrets, files, this host, the templates)
    runtime: what a generated job imports, on the driver and the executors
    registry, parser: the sensors' registry; scripts read into a checked AST
    graph: one shared DAG of every workflow's computations; window slicing
    cep: each pattern planned as an operator tree
    partition: computations placed on partitions; network cost
    codegen: job.py and the naive job from the placed plan
    workload, compiler, update: `sscript compile` and `update`; generated workloads
    shipping: what a job on a cluster brings to its executors (the package, its Python libraries)
    running, report, dashboard: a compiled job run; what SensorScript saved; the live page
    cli: the commands
"""

__version__ = "0.1.0"
