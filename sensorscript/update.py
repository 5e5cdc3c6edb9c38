"""`sscript update`: a new set of workflows for the job in OUT, compiled against the plan it runs.

The new plan keeps what it can of the running one (`partition.plan.Previous`): sensors keep their
codes, computations their partitions, streams their slices. What both versions compute (the same
node of the shared graph, on the same partition and stage) keeps its state; what the new version
no longer computes stops; what it adds starts empty at the switch (mode `clear`). An update that
would restart a computation both versions have (moved to another partition, its stream sliced
anew) says so and needs `--force`; one the running job cannot take at all (a second stage it does
not have, other partitions) is refused. The new version goes to OUT/versions/N/ and becomes
OUT/job.py; a running job switches to it at its next batch boundary (runtime/plan/versions.py).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from sensorscript.cep.plan import DEFAULT_LIMIT
from sensorscript.codegen.job import render_job
from sensorscript.codegen.program import programs
from sensorscript.compiler import _plan, measured_pass_rates, write_plan_files
from sensorscript.errors import Diagnostic, SensorScriptError, warning
from sensorscript.graph.nodes import PATTERN, WINDOW
from sensorscript.parser.printer import format_ms
from sensorscript.partition.plan import Plan, Previous
from sensorscript.runtime.plan import program as rt
from sensorscript.runtime.plan import versions
from sensorscript.runtime.plan.program import SELECTIVITY


@dataclass(frozen=True)
class Changes:
    """What an update does to the running job's computations (node ids) and output streams."""

    kept: tuple[str, ...]
    added: tuple[str, ...]
    removed: tuple[str, ...]
    restarted: dict[str, str]  # node id -> why its state starts anew (moved, sliced anew)
    outputs_added: tuple[str, ...]
    outputs_removed: tuple[str, ...]
    outputs_changed: tuple[str, ...]  # the same name, another computation
    labels: dict[str, str] = field(default_factory=dict)  # node id -> what a person calls it
    # Mode dual: the output streams handed over (name -> the handover), and those that could not
    # be (name -> why): those start empty at the switch, as in mode clear.
    handed_over: tuple = ()
    not_handed_over: dict[str, str] = field(default_factory=dict)

    def describe(self) -> list[str]:
        def named(ids) -> str:
            shown = sorted(self.labels.get(n, n) for n in ids)[:12]
            return ", ".join(shown) + (f" and {len(ids) - 12} more" if len(ids) > 12 else "")

        lines = [f"computations kept with their state: {len(self.kept)}",
                 f"computations added (start empty at the switch): {len(self.added)}"
                 + (f": {named(self.added)}" if self.added else ""),
                 f"computations removed: {len(self.removed)}" + (f": {named(self.removed)}" if self.removed else "")]
        if self.restarted:
            lines.append(f"computations of both versions whose state starts anew: {len(self.restarted)}")
            lines += [f"  {self.labels.get(n, n)}: {why}" for n, why in sorted(self.restarted.items())]
        for what, names in (("added", self.outputs_added), ("removed", self.outputs_removed),
                            ("now computed differently", self.outputs_changed)):
            if names:
                lines.append(f"output streams {what}: {', '.join(names)}")
        for name, handover in self.handed_over:
            lines.append(f"  {name}: the old computation's rows until {format_ms(handover.fill)} after the switch "
                         f"(the new one's windows have filled by then), the new one's after (mode dual)")
        for name, why in sorted(self.not_handed_over.items()):
            lines.append(f"  {name}: starts empty at the switch ({why})")
        return lines


@dataclass(frozen=True)
class Updated:
    version: int
    plan: Plan
    changes: Changes
    out: Path
    warnings: tuple[Diagnostic, ...]
    sources: dict[str, str]


def update_workflows(files: Sequence[str], out: str | Path, sensors: str | None = None, force: bool = False,
                     rebalance: bool = False, operators: Sequence[str] = (),
                     pattern_limit: int = DEFAULT_LIMIT, mode: str = "clear") -> Updated:
    """Compile FILES as the next version of the job in OUT and hand it to the job (see the module).
    `mode`: `clear` (what the update adds or changes starts empty at the switch) or `dual` (an
    output stream computed differently is written by the old computation, kept running, until the
    new one's windows have filled: `handovers`)."""
    out = Path(out)
    if not (out / "job.py").exists() or not (out / "plan.json").exists():
        raise SensorScriptError([Diagnostic("error", f"{out}: no compiled job there to update (sscript compile "
                                                     f"FILES -o {out} compiles one)")])
    current = adopt(out)
    running_plan = json.loads((versions.folder(out, current) / "plan.json").read_text())
    running, _ = versions.load(out, current)
    selectivity, unreadable = measured_pass_rates(out / SELECTIVITY)
    plan, found, loaded = _plan(files, sensors, running.partitions, running_plan["partitions"]["epsilon"], operators,
                                selectivity, pattern_limit, previous=Previous.of(running_plan), rebalance=rebalance,
                                cuts=running.has_second_stage,
                                partials=running_plan["partitions"].get("partials", True))
    firsts, seconds = programs(plan)
    if any(p is not None for p in seconds) and not running.has_second_stage:
        raise SensorScriptError([Diagnostic("error", "these workflows need a second stage (computations fed by "
                                                     "other partitions), which the running job does not have, and "
                                                     "Spark cannot add one to a query's checkpoint: compile them "
                                                     "into a new folder, or keep the sensors they join on one "
                                                     "partition")])
    changes = compare(running, firsts, seconds, plan, running_plan["nodes"])
    number = current + 1
    notes = list(found)
    lost = changes.restarted
    if lost and not force and not rebalance:
        raise SensorScriptError([Diagnostic("error", "this update restarts computations both versions have, and "
                                                     "their windows would start empty: "
                                                     + "; ".join(f"{changes.labels.get(n, n)} ({why})"
                                                                 for n, why in sorted(lost.items()))
                                                     + ". sscript update --force applies it anyway")])
    bound = 1 + plan.partitions.epsilon
    if plan.partitions.balance > bound + 1e-9:
        notes.append(warning(f"the partitions' balance has drifted to {plan.partitions.balance:.3f} (bound "
                             f"{bound:.3f}): sscript update --rebalance places every computation anew, which "
                             f"restarts the windows of those that move (it lists them)"))
    present = {n.id for p in (*firsts, *seconds) if p is not None for n in p.nodes}
    restarted = {key: v for key, v in running.version.restarted.items() if key.split(":", 1)[-1] in present}
    restarted.update({key: number for key in _restart_keys(changes, firsts, seconds)})
    version = rt.Version(number, dict(sorted(restarted.items())))
    adjust = None
    if mode == "dual" and changes.outputs_changed:
        handed, kept_clear = handovers(running, firsts, seconds, plan, changes)
        pairs = tuple((name, handover) for name, handover, _, _ in sorted(handed, key=lambda h: h[0]))
        changes = dataclasses.replace(changes, handed_over=pairs, not_handed_over=kept_clear)
        adjust = handed
    write_version(out, number, plan, loaded.sources, running, version, operators, changes,
                  keep_second_stage=running.has_second_stage, adjust=adjust, running_nodes=running_plan["nodes"])
    versions.request(out, number)
    return Updated(number, plan, changes, out, (*unreadable, *notes), loaded.sources)


def adopt(out: Path) -> int:
    """The newest version in OUT/versions; a job compiled before versions were kept becomes version 1."""
    numbers = versions.numbers(out)
    if numbers:
        return numbers[-1]
    versions.keep_first(out)
    return 1


def where(firsts, seconds) -> dict[str, set[tuple[int, int]]]:
    """Node id -> the (partition, stage) pairs that compute it (a pattern partitioned by sensor: several)."""
    found: dict[str, set[tuple[int, int]]] = {}
    for program in (*firsts, *seconds):
        if program is None:
            continue
        for node in program.nodes:
            if isinstance(node, rt.Sensor) and program.stage > 1:
                continue  # a forwarded stream's entry into stage 2: no state of its own
            found.setdefault(node.id, set()).add((program.partition, program.stage))
    return found


def compare(running: rt.Job, firsts, seconds, plan: Plan, running_nodes: list[dict] = ()) -> Changes:
    """What the new programs keep, add, remove and restart of the running job's (`running_nodes`: its
    plan.json's nodes, for the names of those it removes)."""
    before = where(running.first_stage, running.second_stage)
    after = where(firsts, seconds)
    labels = {node["id"]: node["label"] + (f" ({node['defined_in'][0].split(' ', 1)[1]})" if node["defined_in"] else "")
              for node in running_nodes}
    labels.update({n.id: f"{n.label} ({n.origins[0].workflow}.{n.origins[0].stream})" if n.origins else n.label
                   for n in plan.graph.nodes()})
    restarted: dict[str, str] = {}
    for node_id in sorted(set(before) & set(after)):
        if before[node_id] != after[node_id]:
            went = ", ".join(f"partition {p}" + (f" stage {s}" if s > 1 else "") for p, s in sorted(after[node_id]))
            restarted[node_id] = f"moves to {went}"
    old_slices = _slices(running.first_stage, running.second_stage)
    new_slices = _slices(firsts, seconds)
    for key, cut in new_slices.items():
        if key in old_slices and old_slices[key] != cut:
            partition, stream = key
            for program in (*firsts, *seconds):
                if program is not None and program.partition == partition:
                    for node in program.nodes:
                        if isinstance(node, rt.Window) and node.input == stream and node.id in before \
                                and node.id not in restarted:
                            restarted[node.id] = "its stream is sliced anew for the new windows beside it"
    old_outputs = {name: node for p in (*running.first_stage, *running.second_stage) if p is not None
                   for node, names in p.outputs.items() for name in names}
    new_outputs = dict(plan.graph.outputs)
    return Changes(
        kept=tuple(sorted(n for n in set(before) & set(after) if n not in restarted)),
        added=tuple(sorted(set(after) - set(before))),
        removed=tuple(sorted(set(before) - set(after))),
        restarted=restarted,
        outputs_added=tuple(sorted(set(new_outputs) - set(old_outputs))),
        outputs_removed=tuple(sorted(set(old_outputs) - set(new_outputs))),
        outputs_changed=tuple(sorted(n for n in set(old_outputs) & set(new_outputs)
                                     if old_outputs[n] != new_outputs[n])),
        labels=labels)


def _slices(firsts, seconds) -> dict[tuple[int, str], tuple[int, tuple[int, ...]]]:
    return {(p.partition, s.stream): (s.period, s.offsets) for p in (*firsts, *seconds) if p is not None
            for s in p.slices}


def _restart_keys(changes: Changes, firsts, seconds) -> list[str]:
    """The keys of `Version.restarted` this update sets: restarted windows (a node id) and the
    slices of the streams they read (`slices:` + stream id), which are cut anew; and what reads them,
    at any depth, on to a later stage: a stage reading a stream an earlier stage forwards it (its
    entry bears the stream's node id) cannot see that the stream restarted upstream, and must take
    it as first forwarded there (whole from its first tuple) and start what reads it anew."""
    keys = []
    programs_ = [p for p in (*firsts, *seconds) if p is not None]
    windows = {n.id: n for p in programs_ for n in p.nodes if isinstance(n, rt.Window)}
    for node_id, why in changes.restarted.items():
        if why.startswith("moves"):
            continue  # a node on another partition starts there anyway
        keys.append(node_id)
        if node_id in windows:
            keys.append(f"slices:{windows[node_id].input}")
    restarted = {key for key in keys if not key.startswith("slices:")}
    readers: dict[str, set[str]] = {}
    for program in programs_:
        for node in program.nodes:
            if not isinstance(node, rt.Sensor):
                for input_id in (node.input,) if isinstance(node, rt.Window) else node.inputs:
                    readers.setdefault(input_id, set()).add(node.id)
    later = {n.id for p in programs_ if p.stage > 1 for n in p.nodes if isinstance(n, rt.Sensor)}
    downstream, todo = set(), list(restarted)
    while todo:
        for reader in readers.get(todo.pop(), ()):
            if reader not in downstream:
                downstream.add(reader)
                todo.append(reader)
    keys += sorted(downstream & later)  # a forwarded stream's entry in a later stage (what reads it follows)
    return sorted(set(keys))


def fill_times(plan: Plan, changes: Changes) -> dict[str, int]:
    """Node id -> how long after the switch a node the update added is whole at the latest (its
    exact-from time, runtime/state/exactness.py, when it does not depend on the data): the largest
    sum, on a path from a node it added to it, itself included, of what each step adds: a window
    its length plus its slide (its first window that starts at or after its input's time ends
    before that), a pattern its `within`."""
    added = set(changes.added) | set(changes.restarted)
    fill: dict[str, int] = {}
    for node in plan.graph.nodes():
        if node.id not in added:
            continue
        own = node.length + node.slide if node.kind == WINDOW else node.key[1][2] if node.kind == PATTERN else 0
        fill[node.id] = own + max((fill[i] for i in node.inputs if i in fill), default=0)
    return fill


def handovers(running: rt.Job, firsts, seconds, plan: Plan, changes: Changes):
    """Mode dual: for each output stream the update computes differently, keep the old computation
    (and what only it needs) running on its partition beside the new one. Returns the handovers as
    (name, Handover, old programs' retiring nodes by partition) and, for the streams that cannot be
    handed over, why (they start empty at the switch)."""
    old_outputs = {name: (program, node) for program in running.first_stage
                   for node, names in program.outputs.items() for name in names}
    new_ids = {n.id for p in (*firsts, *seconds) if p is not None for n in p.nodes}
    fill = fill_times(plan, changes)
    handed, refused = [], {}
    for name in changes.outputs_changed:
        if name not in old_outputs:
            refused[name] = "the old computation runs in a second stage"
            continue
        program, old = old_outputs[name]
        new = plan.graph.outputs[name]
        if new not in fill:
            refused[name] = "the new computation has no window to fill"
            continue
        here = {n.id for n in firsts[program.partition].nodes}
        nodes = {n.id: n for n in program.nodes}
        needed, todo = set(), [old]
        while todo:  # the old computation and what it reads that the new version no longer has here
            node_id = todo.pop()
            if node_id in needed or node_id in here:
                continue
            if node_id in new_ids or isinstance(nodes[node_id], rt.Sensor):
                break  # computed elsewhere now (moved), or a sensor read elsewhere
            needed.add(node_id)
            node = nodes[node_id]
            todo.extend((node.input,) if isinstance(node, rt.Window) else node.inputs)
        else:
            handed.append((name, rt.Handover(name, old, new, fill[new], running.version.number), program.partition,
                           tuple(n for n in program.nodes if n.id in needed)))
            continue
        refused[name] = "what the old computation reads now runs on another partition"
    return handed, refused


def _with_handovers(firsts, seconds, running: rt.Job, handed) -> tuple[tuple, tuple]:
    """The new programs with the old computations of `handed` kept where they ran, and every
    program writing a handed-over stream told when to switch."""
    firsts, seconds = list(firsts), list(seconds)
    for name, handover, partition, nodes in handed:
        program = firsts[partition]
        ids = {n.id for n in program.nodes}
        extra = tuple(n for n in nodes if n.id not in ids)
        old_slices = {s.stream: s for s in running.first_stage[partition].slices}
        slices = {s.stream: s for s in program.slices}
        for node in extra:
            if isinstance(node, rt.Window):
                kept = slices.get(node.input, old_slices[node.input])
                partials = tuple(sorted(set(kept.partials) | set(old_slices[node.input].partials)))
                slices[node.input] = dataclasses.replace(kept, partials=partials)
        firsts[partition] = dataclasses.replace(
            program, nodes=(*program.nodes, *extra), slices=tuple(slices[k] for k in sorted(slices)),
            outputs={**program.outputs, handover.old: (*program.outputs.get(handover.old, ()), name)},
            retiring=tuple(sorted({*program.retiring, *(n.id for n in extra)})))
        for stages in (firsts, seconds):
            for index, other in enumerate(stages):
                if other is not None and (handover.new in other.outputs or handover.old in other.outputs):
                    stages[index] = dataclasses.replace(other, handovers=(*other.handovers, handover))
    return tuple(firsts), tuple(seconds)


def write_version(out: Path, number: int, plan: Plan, sources: dict[str, str], running: rt.Job,
                  version: rt.Version, operators: Sequence[str], changes: Changes, keep_second_stage: bool,
                  adjust=None, running_nodes: list[dict] = ()) -> None:
    """OUT/versions/N (written aside, then renamed: a version is whole or absent), then OUT's copy."""
    target = versions.folder(out, number)
    staging = target.with_name(f".{number}.{os.getpid()}.tmp")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    retired = {node["id"]: node["defined_in"] for node in running_nodes}
    copied = write_plan_files(staging, plan, operators, lambda copied: render_job(
        plan, sources, str(out), running.watermark, copied, running.late, version, keep_second_stage,
        adjust=None if not adjust else (lambda f, s: _with_handovers(f, s, running, adjust)), retired=retired,
        retention=running.retention))
    (staging / "changes.txt").write_text(f"plan version {number}, from version {number - 1}\n"
                                         + "\n".join(changes.describe()) + "\n")
    os.replace(staging, target)
    for name in versions.FILES:
        temporary = out / f".{name}.{os.getpid()}.tmp"
        shutil.copyfile(target / name, temporary)
        os.replace(temporary, out / name)
    if copied:
        shutil.copytree(target / "operators", out / "operators", dirs_exist_ok=True)
