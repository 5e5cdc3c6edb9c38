"""Code generation: the plan -> one readable PySpark job (templates/job.py.j2)."""
