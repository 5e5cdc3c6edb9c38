"""The parts of scripts/soak.py (sustained load, issue #15), one module each:

    workload   the workflows and the fleet of sensors, compiled into the job
    feed       the readings, paced by the wall clock, written through the file, socket, MQTT or Kafka
               source (the brokers of their own: scripts/mosquitto.py, scripts/kafka_broker.py)
    job        the job's child process: started, its output read, its processes found, stopped
    sink       what the job wrote: committed batches, their metrics and results, the checkpoint's durations
    sampling   every second the lag, every 5 s the processes' memory and CPU
    stores     --days: what the job keeps on disk, per simulated day
    figures    latency, lag at the commits, trends, and the per-minute table
    verdict    a run against its targets (memory and state flat, lag bounded, p99 latency)
    findmax    --find-max's steps: each judged on its lag
    run        one run: start the job, feed it while sampling, stop it
    report     the report's lines and the JSON document of a run

scripts/soak.py is the command line; it imports these as the package `soaking` (its own folder is
on sys.path when it runs).
"""
