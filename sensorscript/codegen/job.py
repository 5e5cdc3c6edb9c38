"""The plan -> OUT/job.py, through templates/job.py.j2.

Every decision is taken here, in Python; the template only lays it out. The
output is deterministic (same plan, same bytes) and commented with the script
lines each computation came from.
"""

from __future__ import annotations

import dataclasses
from json.encoder import encode_basestring_ascii as _string  # json.dumps(a str), without its wrapping

import jinja2

from sensorscript.cep.plan import describe
from sensorscript.codegen.buckets import bucket_keys
from sensorscript.codegen.program import programs
from sensorscript.graph.nodes import SENSOR, ScriptLines
from sensorscript.parser.printer import format_ms
from sensorscript.partition.partials import cut_text
from sensorscript.partition.plan import Plan
from sensorscript.resources import templates_folder
from sensorscript.runtime.plan import program as rt

TEMPLATE = "job.py.j2"


def template_environment(autoescape: bool = False) -> jinja2.Environment:
    """The package's templates (resources.py); `autoescape` for HTML pages."""
    environment = jinja2.Environment(loader=jinja2.FileSystemLoader(str(templates_folder())), trim_blocks=True,
                                     autoescape=autoescape, lstrip_blocks=True, keep_trailing_newline=True,
                                     undefined=jinja2.StrictUndefined)
    environment.filters.update(comment=comment_text, docstring=docstring_text)
    return environment


# Names reach the job's text in three ways only: as literals (`_literal`), in `#` comments
# (`comment_text`) and in its docstring (`docstring_text`). A file name, a sensor id or a script's
# string may hold quotes, backslashes and line breaks: none may end its literal, comment or docstring.
_SHORT_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(character: str) -> str:
    """A character as Python writes it in a string literal."""
    code = ord(character)
    if character in _SHORT_ESCAPES:
        return _SHORT_ESCAPES[character]
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def comment_text(text) -> str:
    """`text` for a `#` comment: what Python or an editor takes for a line break (\\r, \\x0b, \\x85,
    \\u2028...) and other characters that do not print (bidirectional controls) as their escapes."""
    text = str(text)
    return text if text.isprintable() else "".join(c if c.isprintable() else _escape(c) for c in text)


def docstring_text(text) -> str:
    """`text` in the job's docstring, which reads back as `text`: quotes and backslashes escaped too."""
    text = str(text)
    if text.isprintable() and '"' not in text and "\\" not in text:
        return text
    return "".join(c if c.isprintable() and c not in '"\\' else "\\" + c if c in '"\\' else _escape(c)
                   for c in text)


@dataclasses.dataclass(frozen=True)
class _Call:
    """A constructor call in the job: `name(argument, ..., keyword=argument, ...)`."""

    name: str
    arguments: tuple[tuple[str, object], ...]  # (keyword, "" for a positional argument; its value)


def _call(name: str, *positional, **keywords) -> _Call:
    return _Call(name, tuple(("", value) for value in positional) + tuple(keywords.items()))


def string_literal(text: str) -> str:
    """`text` as a Python string in double quotes, ASCII only. JSON's escapes are Python's, but for a
    character beyond U+FFFF JSON writes two surrogates, which Python reads as two characters."""
    if text.isascii() or all(ord(c) < 0x10000 for c in text):
        return _string(text)
    return '"' + "".join(_string(c)[1:-1] if ord(c) < 0x10000 else _escape(c) for c in text) + '"'


def _literal(value) -> str:
    """Python source on one line, with double quotes as in the rest of the file."""
    if isinstance(value, str):
        return string_literal(value)
    if isinstance(value, tuple):
        inner = ", ".join(_literal(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if isinstance(value, (_Call, dict)):
        opening, closing = _brackets(value)
        return opening + ", ".join(prefix + _literal(v) for prefix, v in _parts(value)) + closing
    return repr(value)


def _wrapped(value, indent: int, taken: int = 0) -> str:
    """`value` as source whose first line starts at column `indent` (`taken` columns of that line
    used by what is written around it): on one line if that fits in 100 columns, else its items or
    arguments one a line, each wrapped in turn, as a formatter would."""
    flat = _literal(value)
    if indent + taken + len(flat) <= 100 or not _parts(value):
        return flat
    pad = " " * (indent + 4)
    opening, closing = _brackets(value)
    lines = "".join(f"{pad}{prefix}{_wrapped(v, indent + 4, len(prefix) + 1)},\n" for prefix, v in _parts(value))
    return f"{opening}\n{lines}{' ' * indent}{closing}"


def _parts(value) -> list[tuple[str, object]]:
    """What a bracketed value holds, each with what is written before it."""
    if isinstance(value, tuple):
        return [("", v) for v in value]
    if isinstance(value, _Call):
        return [(f"{keyword}=" if keyword else "", v) for keyword, v in value.arguments]
    if isinstance(value, dict):
        return [(f"{_literal(k)}: ", v) for k, v in value.items()]
    return []


def _brackets(value) -> tuple[str, str]:
    if isinstance(value, _Call):
        return f"{value.name}(", ")"
    return ("{", "}") if isinstance(value, dict) else ("(", ")")


# Declarations written with their first field bare: the element they are about.
_ABOUT_AN_ELEMENT = (rt.Element, rt.Leaf, rt.Step)


def _declaration(value):
    """A pattern's parts (runtime/plan/program.py) as constructor calls, keyword arguments left out
    where they have their default; tuples item by item, other values as they are."""
    if isinstance(value, tuple):
        return tuple(_declaration(v) for v in value)
    if not dataclasses.is_dataclass(value):
        return value
    positional, keywords = [], {}
    for n, field in enumerate(dataclasses.fields(value)):
        given = getattr(value, field.name)
        if n == 0 and isinstance(value, _ABOUT_AN_ELEMENT):
            positional.append(given)
        elif field.default is dataclasses.MISSING or given != field.default:
            keywords[field.name] = round(given, 4) if isinstance(given, float) else _declaration(given)
    return _call(f"p.{type(value).__name__}", *positional, **keywords)


def _node_code(node: rt.Node) -> str:
    if isinstance(node, rt.Sensor):
        return f"p.Sensor({_literal(node.id)}, {_literal(node.sensor_id)}, {node.code})"
    if isinstance(node, rt.Window):
        return (f"p.Window({_literal(node.id)}, {_literal(node.func)}, {_literal(node.input)}, "
                f"{node.length}, {node.slide})")
    if isinstance(node, rt.Union):
        return f"p.Union({_literal(node.id)}, {_literal(node.inputs)})"
    if isinstance(node, rt.Pattern):
        return _pattern_code(node)
    head = f"p.Combine({_literal(node.id)}, {_literal(node.inputs)}, "
    expression = _literal(node.expression)
    if len(head) + len(expression) + 9 <= 100:
        return head + expression + ")"
    return head + _wrapped(node.expression, 8) + ")"


def _pattern_code(node: rt.Pattern) -> str:
    """A pattern's declaration, every field given (`order` where it reads derived streams,
    `sensor_order` where an update numbered its sensors out of the order of their ids): its tree,
    feeds and conditions naming the elements by variable and the conditions by text, as the plan reads."""
    fields = {field.name: _declaration(getattr(node, field.name)) for field in dataclasses.fields(node)}
    fields["names"] = dict(sorted(node.names.items()))
    for empty in ("order", "sensor_order"):
        if not getattr(node, empty):
            del fields[empty]
    return _wrapped(_call("p.Pattern", **fields), 8)


def _slices_code(s: rt.Slices) -> str:
    """A slice plan's declaration in job.py."""
    return f"p.Slices({_literal(s.stream)}, {s.period}, {_literal(s.offsets)}, {_literal(s.partials)})"


def _forward_entry(f: rt.Forward, label: dict[str, str], served: dict[tuple[int, str], list[list[str]]]) -> dict:
    """A forward's declaration and its comment; one with slice partials says what crosses instead,
    and for which streams there (`served`: (destination, node) -> the streams each slice plan serves)."""
    if not f.partials:
        return {"code": f"p.Forward({_literal(f.node)}, {f.dest}, {f.code})", "above": False,
                "comment": f"{label[f.node]} to partition {f.dest}'s second stage"}
    plans = "".join(f"            {_slices_code(s)},\n" for s in f.partials)
    what = "; ".join(f"{', '.join(s.partials)} per {cut_text(s.period, s.offsets)} for {', '.join(label[x] for x in streams)}"
                     for s, streams in zip(f.partials, served[f.dest, f.node]))
    return {"code": f"p.Forward({_literal(f.node)}, {f.dest}, {f.code}, partials=(\n{plans}        ))",
            "above": True,
            "comment": f"{label[f.node]} to partition {f.dest}'s second stage as slice partials, not "
                       f"readings: {what}"}


def render_job(plan: Plan, sources: dict[str, str], out_name: str = "OUT", watermark: str = "fixed:0",
               operator_files: tuple[str, ...] = (), late: str = "log", version: rt.Version = rt.Version(),
               keep_second_stage: bool = False, adjust=None, retired: dict[str, list[str]] | None = None,
               retention: dict[str, str] | None = None) -> str:
    """job.py for the plan; `operator_files`: files registering pattern operators, relative to OUT;
    `watermark` and `late`: the job's policies (a run may override them); `retention`: how long it
    keeps each store, where not the defaults (runtime/plan/retention.py); `version`: which version
    of the plan this is (sscript update); `keep_second_stage`: an update of a job that has a second
    stage keeps one on every partition (Spark continues a checkpoint only with the same operators);
    `adjust(firsts, seconds)`: the programs as an update in mode dual keeps the previous version's
    computations beside them; `retired`: node id -> the script lines of such a computation."""
    graph = plan.graph
    codes = plan.codes
    lines = ScriptLines(sources)
    firsts, seconds = programs(plan)
    if keep_second_stage:
        seconds = tuple(rt.Program(partition=n, stage=2, nodes=(), slices=()) if program is None else program
                        for n, program in enumerate(seconds))
    if adjust is not None:
        firsts, seconds = adjust(firsts, seconds)
    label = {n.id: n.label for n in graph.nodes()}
    served: dict[tuple[int, str], list[list[str]]] = {}  # a forward of partials: the streams of each slice plan
    for program in seconds:
        for node_id, into in (program.merged if program is not None else {}).items():
            for stream, k in into:
                plans = served.setdefault((program.partition, node_id), [])
                plans.extend([] for _ in range(k + 1 - len(plans)))
                plans[k].append(stream)

    def node_entry(node: rt.Node, program: rt.Program) -> dict:
        comments = []
        if isinstance(node, rt.Sensor) and program.stage == 2:
            comments.append(f"{node.sensor_id}: forwarded from another partition's first stage")
        elif node.id not in graph:  # the previous version's, kept until its output stream is handed over
            comments += [f"{line}  (previous version, until handed over)" for line in (retired or {}).get(node.id, [])]
        elif not isinstance(node, rt.Sensor):
            origins = graph.node(node.id).origins
            for o in origins:
                comments.append(f"{lines.name(o.file)}:{o.line}  {lines.statement(o.file, o.line)}")
            if len({o.workflow for o in origins}) > 1:
                comments.append(f"(one computation, shared by {len({o.workflow for o in origins})} workflows)")
            if isinstance(node, rt.Pattern):
                comments += describe(plan.patterns[node.id])
        return {"code": _node_code(node), "comments": comments}

    def program_entry(program: rt.Program, variable: str) -> dict:
        hz = sum(plan.frequencies[n.sensor_id] for n in program.nodes
                 if isinstance(n, rt.Sensor) and program.stage == 1)
        title = (f"{hz:g} Hz of readings" if program.stage == 1
                 else f"computations fed by {len(program.senders)} partition(s)")
        return {
            "partition": program.partition, "stage": program.stage, "variable": variable, "title": title,
            "nodes": [node_entry(n, program) for n in program.nodes],
            "slices": [{"code": _slices_code(s),
                        "comment": f"{label.get(s.stream, s.stream)}: "
                                   + (f"slices of {format_ms(s.period)}" if len(s.offsets) == 1 else
                                      f"slices cut at {', '.join(format_ms(o) for o in s.offsets)} of every "
                                      f"{format_ms(s.period)}")
                                   + f", partials {', '.join(s.partials)}"} for s in program.slices],
            "outputs": [{"node": _literal(node_id), "names": _literal(names)}
                        for node_id, names in program.outputs.items()],
            "forwards": [_forward_entry(f, label, served) for f in program.forwards],
            "merged": [{"node": _literal(node_id), "into": _literal(into),
                        "comment": (f"{label[node_id]} arrives as slice partials, added to the slices of "
                                    if program.stage > 1 else
                                    f"{label[node_id]}: its slice partials from stage 0 go into the slices of ")
                                   + ', '.join(label[s] for s, _ in into)}
                       for node_id, into in program.merged.items()],
            "summed": [{"node": _literal(node_id),
                        "plans": "".join(f"            {_slices_code(s)},\n" for s in plans),
                        "comment": f"{label[node_id]}: stage 0 sends slice partials, not readings, where they "
                                   f"are on time: " + "; ".join(f"{', '.join(s.partials)} per {cut_text(s.period, s.offsets)}"
                                                                for s in plans)}
                       for node_id, plans in program.summed.items()],
            "senders": _literal(program.senders) if program.senders else "",
            "handovers": [f"p.Handover({_literal(h.name)}, {_literal(h.old)}, {_literal(h.new)}, {h.fill}, "
                          f"{h.old_version})"
                          for h in program.handovers],
            "retiring": _literal(program.retiring) if program.retiring else "",
        }

    entries, first_vars, second_vars = [], [], []
    for program in firsts:
        variable = f"PARTITION_{program.partition}"
        entries.append(program_entry(program, variable))
        first_vars.append(variable)
    for partition, program in enumerate(seconds):
        if program is None:
            second_vars.append("None")
            continue
        variable = f"PARTITION_{partition}_STAGE_2"
        entries.append(program_entry(program, variable))
        second_vars.append(variable)
    outputs_of: dict[str, list[str]] = {}
    for output in graph.outputs:
        workflow, stream = output.rsplit(".", 1)
        outputs_of.setdefault(workflow, []).append(stream)
    statements_of: dict[str, set[str]] = {}
    for node in graph.nodes():
        for origin in node.origins:
            statements_of.setdefault(origin.workflow, set()).add(origin.stream)
    workflows = [{"file": lines.name(path), "statements": len(statements_of.get(name, ())),
                  "outputs": ", ".join(sorted(outputs_of.get(name, [])))}
                 for name, path in sorted(graph.workflows.items())]
    placement = plan.partitions.sensor_partition
    return template_environment().get_template(TEMPLATE).render(
        name=_job_name(graph.workflows), name_literal=_literal(_job_name(graph.workflows)),
        workflows=workflows, workflow_names=_wrapped(tuple(sorted(graph.workflows)), 4, len("workflows=,")),
        out_name=out_name,
        node_count=sum(1 for n in graph.nodes() if n.kind != SENSOR), shared_count=len(graph.shared()),
        partitions=plan.partitions.count, balance=f"{plan.partitions.balance:.3f}",
        sensors=[{"id": _literal(s), "code": codes[s], "partition": placement[s], "hz": f"{plan.frequencies[s]:g}"}
                 for s in sorted(codes)],
        bucket_keys=_literal(bucket_keys(plan.partitions.count)),
        programs=entries, first_stage=first_vars, second_stage=second_vars,
        watermark=_literal(watermark), watermark_text=watermark.replace(":", " "), late=_literal(late),
        retention=_literal(dict(sorted((retention or {}).items()))) if retention else "",
        stream_names=[(_literal(w), "{" + ", ".join(f"{code}: {_literal(name)}" for code, name in names.items()) + "}")
                      for w, names in plan.stream_names.items()],
        operator_files=[_literal(f) for f in operator_files], operator_literal=_literal(tuple(operator_files)),
        cep_text=(f"{len(plan.patterns)} pattern(s)" if plan.patterns else "no patterns in these workflows"),
        version=version.number,
        version_code=(f"p.Version({version.number}, " + "{" + ", ".join(
            f"{_literal(k)}: {v}" for k, v in sorted(version.restarted.items())) + "})") if version.number > 1 else "",
    )


def _job_name(workflows: dict[str, str]) -> str:
    names = sorted(workflows)
    return names[0] if len(names) == 1 else f"{names[0]}+{len(names) - 1}"
