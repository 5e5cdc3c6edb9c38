"""Reading input: the one definition of a record (`records`), the sources Spark reads (`source`),
the socket spool (`spool`), and stage 0, which codes readings and packs them per partition
(`packets`).

May import: plan.
"""
