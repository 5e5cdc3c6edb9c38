"""Reading input: the one definition of a record (`records`), the sources Spark reads (`source`),
the socket spool (`spool`), an MQTT broker's address and client (`mqtt`), stage 0, which codes readings and packs them per partition
(`packets`), and the archive of raw readings that late policy `correct` keeps (`archive`).

May import: plan.
"""
