"""Planning at the scale of Zhou et al.: 1,000 bridge sensors of 21 types, 1,024 workflows.

    .venv/bin/python scripts/bench_plan.py [--workflows 1024] [--partitions 2 4 8 16]

Prints the time from script text to plan, and for each partition count the load
balance and the communication cost of our plan against the lower bound and the
two naive placements. Targets: parse to plan under 2 s; ours within 1 % of the
lower bound; most loaded partition at most 1.1 x the average.
"""

from __future__ import annotations

import argparse
import time

from sensorscript.parser import load
from sensorscript.partition.plan import make_plan
from sensorscript.registry import SensorRegistry
from sensorscript.workload import bridge_workload


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workflows", type=int, default=1024)
    parser.add_argument("--sensors", type=int, default=1000)
    parser.add_argument("--partitions", type=int, nargs="+", default=[2, 4, 8, 16])
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    workload = bridge_workload(args.workflows, args.sensors, args.seed)
    texts = {f"{name}.ss": text for name, text in workload.workflows.items()}
    registry = SensorRegistry.of(workload.sensors)
    print(f"workload: {args.workflows} workflows, {args.sensors} sensors, seed {args.seed}")
    print(f"{'n':>3} {'parse s':>7} {'plan s':>6} {'total s':>7} {'nodes':>6} {'shared':>6} {'balance':>7} {'crossings':>9} "
          f"{'ours/lower':>10} {'vs sensor-hash':>14} {'vs workflow-hash':>16}")
    for count in args.partitions:
        start = time.perf_counter()
        loaded = load(list(texts), registry.ids(), texts=texts)
        parsed = time.perf_counter()
        plan = make_plan(loaded.workflows, registry, count)
        planned = time.perf_counter()
        cost = plan.cost
        print(f"{count:>3} {parsed - start:>7.2f} {planned - parsed:>6.2f} {planned - start:>7.2f} {len(plan.graph):>6} {len(plan.graph.shared()):>6} "
              f"{plan.partitions.balance:>7.3f} {len(plan.partitions.crossings):>9} "
              f"{cost.ours / cost.lower_bound:>10.5f} {cost.saving(cost.naive_sensor_hash):>13.1%} "
              f"{cost.saving(cost.naive_workflow_hash):>15.1%}")
    print(f"tuples/minute at n={count}: ours {cost.ours:,.0f}, lower bound {cost.lower_bound:,.0f}, "
          f"naive by sensor {cost.naive_sensor_hash:,.0f}, naive by workflow {cost.naive_workflow_hash:,.0f}")


if __name__ == "__main__":
    main()
