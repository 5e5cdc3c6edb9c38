"""The ablation of Meng et al. 2014 (Cesar; its section 5.1) on the job's matcher: patterns of 2 to 6
elements, with and without predicate pushdown, with and without predicate ordering, and every tree
shape against the one the cost model picks.

    .venv/bin/python scripts/bench_cep.py [--events 5000] [--batches 10] [--sizes 2,3,4,5,6] [--repeat 1]

Each pattern `e0: S0 -> e1: S1 -> ...` (strategy any) reads one stream per element, `--events`
events each at the same rate over 10 minutes of event time, values uniform in [0, 1), and has the
conditions of their experiment: one on each element alone with a different pass probability
(e_i.value < 0.2 + 0.1 i, so the first elements are the most selective), one between each pair of
neighbours (e_i.value > e_{i+1}.value - 0.5) and one between the first and the last. The matcher
(runtime/state/cep/matcher.py, the code the job runs on each partition) takes the events in `--batches`
micro-batches; only its time is measured. Every configuration must find the same matches (checked):

  chosen        the compiler's plan: conditions pushed down and ordered, the cheapest shape, with
                the pass probabilities measured by a first run (as OUT/selectivity.json feeds the
                next compile), and with the estimated ones
  no pushdown   every condition at the root, tested on whole matches (their strategy 1)
  no ordering   conditions in the order written (their K123 against the best order)
  each shape    every binary tree over the elements, conditions pushed down and ordered

Prints a table per pattern size and a summary: pushdown's speedup, ordering's, the spread between
the fastest and slowest shape, and where the cost model's choice ranks.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from sensorscript.cep.plan import Options, shape_text, shapes
from sensorscript.codegen.program import programs
from sensorscript.parser import load
from sensorscript.partition.plan import make_plan
from sensorscript.registry import Sensor, SensorRegistry
from sensorscript.runtime.state.cep.matcher import POS_INF, Matcher
from sensorscript.runtime.state.engine import Tuples

SPAN_MS = 600_000
# The window is sized so that, without pushdown, the partial matches of every size stay near five
# million (events per window per stream w, (w / 2) ** (size - 1) * events ~ 5e6), at most 200 events.
INTERMEDIATE = 5e6


def within_ms(size: int, count: int) -> int:
    per_window = min(200.0, 2 * (INTERMEDIATE / count) ** (1 / (size - 1)))
    return int(per_window * SPAN_MS / count)


def script(size: int, count: int) -> str:
    elements = " -> ".join(f"e{i}: S{i}" for i in range(size))
    # Written least selective first, so that the order of testing matters: estimated from their form,
    # every inequality passes a third of the time; an earlier run measures them (`measured` below).
    conditions = [f"e{i}.value > 0.05" for i in range(size)] + [f"e{i}.value < {0.2 + 0.1 * i:.1f}" for i in range(size)]
    conditions += [f"e{i}.value > e{i + 1}.value - 0.5" for i in range(size - 1)]
    conditions += [f"e{i + 1}.value < e{i}.value + 0.2" for i in range(size - 1)]
    if size > 2:
        conditions.append(f"e0.value < e{size - 1}.value + 0.3")
    return f"P = pattern({elements}) where {' and '.join(conditions)} within {within_ms(size, count)};\n"


def events(size: int, count: int, seed: int) -> list[Tuples]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(size):
        ts = np.sort(rng.integers(0, SPAN_MS, count)).astype(np.int64)
        out.append(Tuples(ts, rng.random(count), np.full(count, i, np.int32)))
    return out


def pattern_declaration(size: int, count: int, options: Options, registry: SensorRegistry, measured=None):
    workflows = load(["w.ss"], texts={"w.ss": script(size, count)}).workflows
    plan = make_plan(workflows, registry, 1, selectivity=measured, options=options, limit=10**9)
    (first,), _ = programs(plan)
    return next(n for n in first.nodes if hasattr(n, "tree")), plan


def run(pattern, streams: list[Tuples], batches: int, stats: dict | None = None) -> tuple[float, int, int]:
    """Seconds in the matcher, matches found, and a checksum of them. `stats`: filled with the
    measured pass counts of the conditions (what a job's run writes to OUT/selectivity.json)."""
    matcher = Matcher(pattern)
    state = matcher.new_state()
    bounds = np.linspace(0, SPAN_MS, batches + 1).astype(np.int64)
    found, checksum, seconds = 0, 0, 0.0
    for b in range(batches):
        arrivals = []
        for k, t in enumerate(streams):
            mask = (t.ts >= bounds[b]) & (t.ts < bounds[b + 1])
            arrivals.append((k, Tuples(t.ts[mask], t.value[mask], t.source[mask])))
        watermark = int(bounds[b + 1]) if b < batches - 1 else POS_INF
        started = time.perf_counter()
        matches = matcher.step(state, arrivals, watermark)
        seconds += time.perf_counter() - started
        found += len(matches.ts)
        checksum += int(matches.ts.sum() % 1_000_003)
    if stats is not None:
        stats[pattern.id] = {str(i): [int(t), int(p)] for i, (t, p) in enumerate(zip(state.tested, state.passed))}
    return seconds, found, checksum


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=5000, help="events per element stream")
    parser.add_argument("--batches", type=int, default=10)
    parser.add_argument("--sizes", default="2,3,4,5,6")
    parser.add_argument("--repeat", type=int, default=1, help="runs per configuration (the best is kept)")
    args = parser.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    summary = []
    for size in sizes:
        registry = SensorRegistry.of([Sensor(f"S{i}", args.events / (SPAN_MS / 1000), "bench") for i in range(size)])
        streams = events(size, args.events, seed=size)
        variables = tuple(f"e{i}" for i in range(size))
        chosen, plan = pattern_declaration(size, args.events, Options(), registry)
        stats: dict = {}
        run(chosen, streams, args.batches, stats)  # an earlier run: it measures the conditions
        measured, measured_plan = pattern_declaration(size, args.events, Options(), registry, stats)
        planned = next(iter(measured_plan.patterns.values()))
        configs = [("chosen " + planned.chosen + " (measured)", measured),
                   ("chosen (estimated)", chosen),
                   ("no pushdown", pattern_declaration(size, args.events, Options(pushdown=False), registry)[0]),
                   ("no ordering", pattern_declaration(size, args.events, Options(ordering=False), registry)[0])]
        shape_texts = [shape_text(t) for t in shapes(variables)]
        configs += [(f"shape {t}", pattern_declaration(size, args.events, Options(shape=t), registry)[0]) for t in shape_texts]
        print(f"\n{size} elements: {args.events:,} events per stream, within {within_ms(size, args.events)} ms, "
              f"{len(shape_texts)} shapes; conditions: "
              f"{script(size, args.events).split(' where ')[1].split(' within')[0]}")
        print(f"  {'configuration':<44} {'seconds':>9} {'matches':>9}  estimated cost")
        results = {}
        reference = None
        for name, pattern in configs:
            best = min((run(pattern, streams, args.batches) for _ in range(args.repeat)), key=lambda r: r[0])
            results[name] = best
            if reference is None:
                reference = best[1:]
            assert best[1:] == reference, f"{name} found other matches: {best[1:]} vs {reference}"
            cost = dict(planned.shapes).get(name.split(" ")[1]) if name.startswith(("shape", "chosen")) else None
            print(f"  {name:<44} {best[0]:>9.3f} {best[1]:>9,}  {'' if cost is None else f'{cost:,.0f}'}")
        chosen_time = results[configs[0][0]][0]
        shape_times = sorted((results[f"shape {t}"][0], t) for t in shape_texts)
        rank = [t for _, t in shape_times].index(planned.chosen) + 1
        summary.append((size, results["no pushdown"][0] / chosen_time, results["no ordering"][0] / chosen_time,
                        results["chosen (estimated)"][0] / chosen_time,
                        shape_times[-1][0] / shape_times[0][0] - 1, rank, len(shape_texts), reference[0]))
    print("\nsize  pushdown speedup  ordering speedup  measured vs estimated  slowest/fastest shape  "
          "chosen shape's rank  matches")
    for size, push, order, feedback, spread, rank, count, found in summary:
        print(f"{size:>4}  {push:>15.1f}x  {order:>15.2f}x  {feedback:>20.2f}x  {spread:>20.1%}  "
              f"{rank:>10} of {count:<7}  {found:>8,}")


if __name__ == "__main__":
    main()
