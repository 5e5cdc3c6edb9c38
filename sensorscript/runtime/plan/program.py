"""The program a generated job runs: its computations as plain data.

The compiler writes these declarations into job.py (one per computation, each
commented with the script lines it came from), and the `Job` that holds them all;
the engine interprets them.
They import nothing from the compiler, so the runtime ships to executors alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from sensorscript.runtime.plan import shipping

# Event times are int64 milliseconds; these two stand beyond them. NEG_INF: before any event time
# (no watermark yet; a stream whole from the start). POS_INF: past every event time (the end of
# the input); as an exact-from time, UNKNOWN: not known yet (runtime/state/exactness.py).
NEG_INF = int(np.iinfo(np.int64).min)
POS_INF = UNKNOWN = int(np.iinfo(np.int64).max)


@dataclass(frozen=True)
class Sensor:
    """A raw sensor stream; `code` is the small integer the job uses instead of the id."""

    id: str
    sensor_id: str
    code: int


@dataclass(frozen=True)
class Slices:
    """How a stream is cut into slices: cut points `offsets` within every `period` ms."""

    stream: str
    period: int
    offsets: tuple[int, ...]
    partials: tuple[str, ...]  # among sum, count, min, max


@dataclass(frozen=True)
class Window:
    id: str
    func: str  # avg max min sum count
    input: str
    length: int
    slide: int


@dataclass(frozen=True)
class Union:
    id: str
    inputs: tuple[str, ...]


@dataclass(frozen=True)
class Combine:
    """Combine-latest over `inputs`; `expression` is the compiler's canonical tuple form."""

    id: str
    inputs: tuple[str, ...]
    expression: tuple


@dataclass(frozen=True)
class Element:
    """One element of a pattern, by its variable: `var: STREAM`, Kleene (`+`), negated (`!`), or a
    registered unary operator over the stream; `link` is the binary operator joining it to the
    element before (None: the built-in `->`). What its stream is, the pattern's feeds say."""

    var: str
    kleene: bool = False
    negated: bool = False
    operator: str | None = None
    link: str | None = None


@dataclass(frozen=True)
class Feed:
    """The tuples of node `stream` are the events of `elements` (those reading one stream of the
    pattern), each `copies` times (a multiset union reaching it twice)."""

    stream: str
    elements: tuple[str, ...]
    copies: int = 1


@dataclass(frozen=True, kw_only=True)
class Condition:
    """One condition of a pattern's `where` (its top-level `and`s split). `text` is how the script
    writes it, and how the tree refers to it; `expression` is the compiler's canonical form, with
    elements by variable (`("attr", "a", "value")`) and sensors compared as codes (`("code", n)`).
    It reads the elements `reads`, those in `aggregates` inside an aggregate; a condition on a
    negated element belongs to its `negation`. `probability`: how often it passes (estimated, or
    measured by an earlier run)."""

    text: str
    expression: tuple
    reads: tuple[str, ...] = ()
    aggregates: tuple[str, ...] = ()
    negation: str | None = None
    probability: float


@dataclass(frozen=True)
class Leaf:
    """The events of `element` (for a Kleene element, its closures) that pass `conditions`."""

    element: str
    conditions: tuple[str, ...] = ()

    @property
    def elements(self) -> tuple[str, ...]:
        return (self.element,)


@dataclass(frozen=True)
class Join:
    """The partial matches of `left` followed by those of `right` (as the link of right's first
    element says), within the window, that pass `conditions` (in this order) and have no event of
    the `negations` in their gaps."""

    left: Leaf | Join
    right: Leaf | Join
    conditions: tuple[str, ...] = ()
    negations: tuple[str, ...] = ()

    @property
    def elements(self) -> tuple[str, ...]:
        return self.left.elements + self.right.elements


@dataclass(frozen=True)
class Step:
    """A step of a `Chain`: bind `element` to the earliest event that qualifies, testing
    `conditions` and `negations` then; for a Kleene element, each later event joins its closure if
    it passes `closure`."""

    element: str
    conditions: tuple[str, ...] = ()
    negations: tuple[str, ...] = ()
    closure: tuple[str, ...] = ()


@dataclass(frozen=True)
class Chain:
    """Strategy next: the positive elements bound one after another, as runs
    (runtime/state/cep/runs.py)."""

    steps: tuple[Step, ...]

    @property
    def elements(self) -> tuple[str, ...]:
        return tuple(step.element for step in self.steps)


@dataclass(frozen=True)
class Whole:
    """What is tested once a match is whole: the conditions no operator could test earlier, and the
    negations no element follows (when the window has passed)."""

    conditions: tuple[str, ...] = ()
    negations: tuple[str, ...] = ()


@dataclass(frozen=True)
class Pattern:
    """A pattern (docs/LANGUAGE.md, "Patterns") as its operator tree, its elements and conditions by name.

    `feeds` say what the engine hands it; a pattern partitioned by sensor reads the sensors (and
    derived streams) of its partition directly, not the unions its elements name. `tree` is a
    `Leaf` or `Join` tree (a `Chain` under strategy next) naming the conditions each operator
    tests, in the order tested; `whole` what waits for the whole match. `names` gives each output
    stream the variable names its workflow wrote. `order` places the derived streams whose events
    it reads by their names in its workflow, (code, place) pairs: events at one time are in the
    order of their sensors, a derived event's sensor being its stream's name. Raw sensors' codes
    follow their ids, but for sensors an update added (numbered after the highest, as the running
    job's state holds the others'): `sensor_order` then places every raw sensor the pattern reads
    by its id, (code, place) pairs.
    """

    id: str
    feeds: tuple[Feed, ...]
    elements: tuple[Element, ...]
    within: int
    tree: Leaf | Join | Chain
    conditions: tuple[Condition, ...] = ()
    whole: Whole = Whole()
    strategy: str = "any"
    emit: str = "all"
    by_sensor: bool = False
    yield_: tuple | None = None
    limit: int = 10_000
    names: dict[str, tuple[str, ...]] = field(default_factory=dict)
    order: tuple[tuple[int, int], ...] = ()
    sensor_order: tuple[tuple[int, int], ...] = ()

    @property
    def inputs(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(feed.stream for feed in self.feeds))


Node = Sensor | Window | Union | Combine | Pattern

# Where a run keeps the pass counts of pattern conditions it measured, in the job's folder; the next
# `sscript compile` into that folder orders conditions and chooses tree shapes by them.
SELECTIVITY = "selectivity.json"

# Codes of derived streams: what a derived tuple carries as its `sensor`. Sensors are numbered
# 0, 1, ... (sorted by id); a derived stream's code comes from its node id, so every partition and
# every stage agrees on it without a table.
DERIVED_CODES = 1 << 30


def derived_code(node_id: str) -> int:
    """The code of a derived stream (node id "kind:<10 hex digits>"): 2^30 plus 28 bits of its id."""
    return DERIVED_CODES + int(node_id.rsplit(":", 1)[1][:7], 16)


@dataclass(frozen=True)
class Forward:
    """Tuples of `node` go on to stage `stage` of partition `dest`, where they enter as input `code`.

    Our plans have two stages at most; the naive placement hash by sensor id (what the
    report measures us against) has one per level of the workflow graph.

    `partials`: instead of the tuples, their slice partials go, cut as each of these slice plans
    says (for the streams at `dest` whose windows are all that read `node` there: each stream's
    slices a union of one plan's, `Program.merged`; a plan's `stream` is the first it serves): one
    tuple per partial, slice and batch, whose `source` says which (`PARTIAL_KINDS`: plan k's
    partial j is k * len(PARTIAL_KINDS) + j) and whose ts is the slice's earliest reading's.
    """

    node: str
    dest: int
    code: int
    stage: int = 2
    partials: tuple[Slices, ...] = ()


# What a forwarded slice partial is, as its tuple's `source` says (Forward.partials).
PARTIAL_KINDS = ("sum", "count", "min", "max")


@dataclass(frozen=True)
class Handover:
    """An update in mode `dual`: output stream `name` is written from `old` (the previous version's
    computation, kept running beside the new one) for its rows before the switch plus `fill` ms,
    and from `new` for the rows after: by then every window of the new one holds only readings
    it has seen since the switch, so none is partial."""

    name: str
    old: str
    new: str
    fill: int
    old_version: int  # the version of the plan the old computation belongs to (what its rows say)

    def cut(self, switch_at: int | None, new_exact: int) -> tuple[int, int]:
        """(the old computation's rows are written below, the new one's from): the switch plus the
        fill, or the new computation's exact-from time if that is later (runtime/state/exactness.py:
        `new_exact`, NEG_INF when whole from the start, UNKNOWN while not known: then the old rows
        stop at the fill and no new row is written yet). The old rows never reach past where the new
        ones start, so a row is written once, and never a partial one."""
        base = switch_at + self.fill
        if new_exact == UNKNOWN:
            return base, UNKNOWN
        cut = max(base, new_exact)
        return cut, cut

    def written(self, node_id: str, ts: np.ndarray, switch_at: int | None, new_exact: int = NEG_INF) -> np.ndarray:
        """Which rows of `node_id` under this output name are written."""
        if switch_at is None:  # a run that started with this version: the new computation only
            return np.full(len(ts), node_id == self.new)
        old_below, new_from = self.cut(switch_at, new_exact)
        return ts < old_below if node_id == self.old else ts >= new_from


@dataclass(frozen=True)
class Program:
    """Everything one stage of one partition computes.

    `nodes` are in dependency order; in stage 1 the `Sensor` nodes are the sensors
    whose readings land here; in later stages they are the streams forwarded to it
    (`code` = the forward's code). `outputs` maps a node id to the result stream
    names (WORKFLOW.NAME) it is written under. `forwards` lists what this stage sends
    on; `senders` are the stages that send to this one (its watermark is the smallest
    of theirs), each as `sender_id` (for stage 1, the partition's number).
    """

    partition: int
    stage: int
    nodes: tuple[Node, ...]
    slices: tuple[Slices, ...]
    outputs: dict[str, tuple[str, ...]] = field(default_factory=dict)
    forwards: tuple[Forward, ...] = ()
    senders: tuple[int, ...] = ()
    # An update in mode dual: the output streams handed over from the previous version's
    # computations to this one's, and those of the previous version's computations kept running
    # only for that (dropped once every handover here is done).
    handovers: tuple[Handover, ...] = ()
    retiring: tuple[str, ...] = ()
    # Received streams that arrive as slice partials (Forward.partials) -> (stream, k): the streams
    # whose slices they are added to, each from the forward's k-th slice plan (its own cuts, or finer
    # ones). Nothing else here reads them. In stage 1: sensors here whose readings only windows read
    # (directly, or through unions only windows read), which stage 0 sends as the slice partials of
    # `summed` where it can (on time, below the guard: runtime/state/summaries.py), and as readings
    # where it cannot; the partials go into the slices of these streams, the readings as any others.
    merged: dict[str, tuple[tuple[str, int], ...]] = field(default_factory=dict)
    # Stage 1: sensor node id -> the slice plans stage 0 cuts its readings into (as Forward.partials).
    summed: dict[str, tuple[Slices, ...]] = field(default_factory=dict)

    def written(self, node_id: str, name: str, ts: np.ndarray, switch_at: int | None,
                exact: dict[str, int] | None = None) -> np.ndarray | None:
        """Which of a node's rows are written under output `name` (None: all of them); `exact`: the
        exact-from time of the handovers' new computations (BatchResult.handovers)."""
        for handover in self.handovers:
            if handover.name == name and node_id in (handover.old, handover.new):
                return handover.written(node_id, ts, switch_at, (exact or {}).get(handover.new, NEG_INF))
        return None

    def exact_names(self, node_id: str) -> tuple[str, ...]:
        """The output streams whose exact-from time is the node's (BatchResult.exact): the names it is
        written under, but not a stream it writes as a handover's old computation, which is whole
        from the handover on (its new computation's time, BatchResult.handovers), whatever the old
        one's own time (a retiring computation an update restarted has one too)."""
        handed = {h.name for h in self.handovers if h.old == node_id}
        return tuple(name for name in self.outputs.get(node_id, ()) if name not in handed)

    def retired_at(self, switch_at: int | None, exact: dict[str, int]) -> int | None:
        """The event time from which the retiring computations are no longer needed (None: never ran):
        once every handover's new computation writes the rows (UNKNOWN while one's cut is not known)."""
        if not self.retiring or switch_at is None:
            return None
        return max(h.cut(switch_at, exact.get(h.new, NEG_INF))[1] for h in self.handovers)


def sender_id(stage: int, partition: int, partitions: int) -> int:
    """The number a stage's heartbeats carry: stage 1 of partition p is p, stage 2 is n + p, ..."""
    return (stage - 1) * partitions + partition


def plan_versions_of(number: int, handed_over, stream: np.ndarray, ts: np.ndarray) -> np.ndarray:
    """`Job.plan_versions`' rule from its inputs (version `number`, `Job.handed_over()`), for whoever
    holds those and not the job (the executors writing to PostgreSQL)."""
    found = np.full(len(ts), number, np.int64)
    for name, before, old_version in handed_over:
        found[(stream == name) & (ts < before)] = old_version
    return found


@dataclass(frozen=True)
class Version:
    """Which version of the plan a job runs (`sscript update` makes the next) and what its state
    needs to carry an earlier version's into it: the nodes whose state starts anew at each
    version (node id -> version), and the event time the run switched at (set by the run that
    switched; None in a job that started with this version)."""

    number: int = 1
    restarted: dict[str, int] = field(default_factory=dict)
    switch_at: int | None = None


@dataclass(frozen=True)
class Job:
    """A compiled job: the plan as data. `sensors` maps sensor id -> (code, home partition)."""

    name: str
    workflows: tuple[str, ...]
    sensors: dict[str, tuple[int, int]]
    first_stage: tuple[Program, ...]
    second_stage: tuple[Program | None, ...]
    bucket_keys: tuple[int, ...]  # partition p's rows carry key bucket_keys[p]: Spark hashes it to task p
    watermark: str = "fixed:0"
    # What happens to late readings: drop (counted), log (kept in the late store), correct[:GAMMA]
    # (logged, and every reading archived so that corrections recompute what they touched).
    late: str = "log"
    archive: str | None = None  # with `correct`: the archive's folder, set by the run (OUT/archive)
    # Store -> how long it is kept, as compiled (`--retain`; runtime/plan/retention.py): a run may
    # give others, which its checkpoint keeps.
    retention: dict[str, str] = field(default_factory=dict)
    # What becomes of a folder's files once read: keep, delete or archive:DIR (set by the run:
    # runtime/ingest/source.py, `input_cleanup`).
    input_cleanup: str = "keep"
    # A Kafka source's settings, as the run gave them (set by the run: runtime/ingest/kafka.py,
    # `Settings`): (--kafka-start, --max-readings-per-batch, --kafka-option values, --sensor-from-key).
    kafka: tuple = ()
    # Sensor id -> further partitions its readings also go to. Our plans send each reading to
    # one partition; the naive placements the report measures (hash by workflow) copy them.
    replicas: dict[str, tuple[int, ...]] = field(default_factory=dict)
    # Stages 3, 4, ...: only the naive placement hash by sensor id (a shuffle per level) has them.
    later_stages: tuple[tuple[Program | None, ...], ...] = ()
    # Names of derived streams (code -> name) in each workflow, for the events of pattern matches.
    stream_names: dict[str, dict[int, str]] = field(default_factory=dict)
    operator_files: tuple[str, ...] = ()  # Python files registering operators, relative to job.py
    version: Version = Version()
    # Where stage 1 publishes each partition's watermark for the next batch, so that stage 0 may send
    # slice partials instead of readings (runtime/state/summaries.py); set by the run (None: readings).
    board: str | None = None

    def __reduce_ex__(self, protocol):
        """Pickled as its shipped file's name once `shipping.ship` has shipped it (what Spark sends
        with every Python function of the query), else whole."""
        shipped = self.__dict__.get("_shipped")
        if shipped:
            return shipping.load, shipped
        return super().__reduce_ex__(protocol)

    @property
    def partitions(self) -> int:
        return len(self.first_stage)

    @property
    def has_matches(self) -> bool:
        """Whether a pattern stream is among the outputs (its rows carry start_ts, end_ts, events)."""
        return any(isinstance(node, Pattern) and node.id in program.outputs
                   for program in (*self.first_stage, *self.second_stage) if program is not None
                   for node in program.nodes)

    @cached_property
    def handovers(self) -> tuple[Handover, ...]:
        """Mode dual: every output stream the previous version's computation writes until its handover."""
        found = {h for program in (*self.first_stage, *self.second_stage) if program is not None
                 for h in program.handovers}
        return tuple(sorted(found, key=lambda h: h.name))

    def plan_versions(self, stream: np.ndarray, ts: np.ndarray) -> np.ndarray:
        """The version of the plan that computed each result row (results' `plan_version`): this one's,
        but the previous version's for a handed-over stream's rows before its handover."""
        return plan_versions_of(self.version.number, self.handed_over(), stream, ts)

    def handed_over(self) -> list[tuple[str, int, int]]:
        """(stream, time, version): the rows of that stream before that time came from that earlier
        version of the plan (`plan_versions`; a later entry wins where two hold). None before an update."""
        if self.version.switch_at is None:
            return []
        return [(h.name, self.version.switch_at + h.fill, h.old_version) for h in self.handovers]

    @property
    def has_second_stage(self) -> bool:
        return any(p is not None for p in self.second_stage)

    @cached_property
    def code_names(self) -> dict[str, dict[int, str]]:
        """Per workflow, code -> the name of the sensor or stream it stands for (the events of matches)."""
        sensors = {code: sensor_id for sensor_id, (code, _) in self.sensors.items()}
        return {w: {**sensors, **self.stream_names.get(w, {})} for w in self.workflows}

    @property
    def programs(self) -> list[Program]:
        """Every program the job runs, stage after stage (a partition without a stage left out)."""
        return [p for p in (*self.first_stage, *self.second_stage, *(q for s in self.later_stages for q in s))
                if p is not None]

    @cached_property
    def streams_fed(self) -> dict[int, tuple[str, ...]]:
        """Sensor code -> the result streams (WORKFLOW.NAME) its readings reach: what a late
        reading of it missed. Derived from the programs (node ids are the same in every stage);
        worked out once per job object (cached on it, also where it travels to Spark's workers)."""
        readers: dict[str, set[str]] = {}
        outputs: dict[str, set[str]] = {}
        for program in self.programs:
            for node in program.nodes:
                inputs = () if isinstance(node, Sensor) else (node.input,) if isinstance(node, Window) else node.inputs
                for i in inputs:
                    readers.setdefault(i, set()).add(node.id)
            for node_id, names in program.outputs.items():
                outputs.setdefault(node_id, set()).update(names)
        node_of = {n.sensor_id: n.id for p in self.first_stage for n in p.nodes if isinstance(n, Sensor)}
        fed: dict[int, tuple[str, ...]] = {}
        for sensor_id, (code, _) in self.sensors.items():
            reached, todo = set(), [node_of[sensor_id]] if sensor_id in node_of else []
            while todo:
                node_id = todo.pop()
                if node_id in reached:
                    continue
                reached.add(node_id)
                todo.extend(readers.get(node_id, ()))
            fed[code] = tuple(sorted(name for n in reached for name in outputs.get(n, ())))
        return fed

    def stages_after_first(self) -> list[tuple[int, tuple[Program | None, ...]]]:
        """(stage number, a program or None per partition) for stage 2 on, where any exists."""
        stages = [(2, self.second_stage)] if self.has_second_stage or self.later_stages else []
        return stages + list(enumerate(self.later_stages, start=3))

