"""Drawings of the shared DAG: Graphviz DOT text, or SVG/PNG through matplotlib.

Workflows are clusters (a box around the nodes each one uses); a node used by
several workflows sits in all of their boxes and is drawn with a thick red border.
"""

from __future__ import annotations

import json
from pathlib import Path

from sensorscript.graph.graph import Graph
from sensorscript.graph.nodes import SENSOR, Node


def _label(node: Node) -> str:
    if node.kind == SENSOR:
        return node.sensor_id
    if node.kind == "window":
        return f"{node.label}\\n{node.func}({node.length},{node.slide})"
    return f"{node.label}\\n{node.kind}"


def _users(graph: Graph) -> dict[str, list[str]]:
    """node id -> workflows that wrote it (sensors: the workflows reading them directly)."""
    users: dict[str, set[str]] = {}
    for node in graph.nodes():
        users.setdefault(node.id, set()).update(o.workflow for o in node.origins)
        for input_id in node.inputs:
            if graph.node(input_id).kind == SENSOR:
                users.setdefault(input_id, set()).update(o.workflow for o in node.origins)
    return {k: sorted(v) for k, v in users.items()}


def to_dot(graph: Graph) -> str:
    users = _users(graph)
    lines = ["digraph sensorscript {", "  rankdir=LR;", '  node [shape=box, fontname="Helvetica"];']
    for index, workflow in enumerate(sorted(graph.workflows)):
        own = [n for n, ws in users.items() if ws == [workflow]]
        lines.append(f"  subgraph cluster_{index} {{")
        lines.append(f"    label={json.dumps(workflow)};")
        lines += [f"    {json.dumps(n)};" for n in sorted(own)]
        lines.append("  }")
    for node in graph.nodes():
        shared = len(users.get(node.id, [])) > 1
        style = ', color=red, penwidth=3' if shared else ""
        shape = ", shape=ellipse" if node.kind == SENSOR else ""
        lines.append(f"  {json.dumps(node.id)} [label=\"{_label(node)}\"{shape}{style}];")
    for source, target in graph.edges():
        lines.append(f"  {json.dumps(source)} -> {json.dumps(target)};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def draw(graph: Graph, path: Path) -> None:
    """Write `path` as .dot, .svg or .png."""
    if path.suffix == ".dot":
        path.write_text(to_dot(graph))
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    users = _users(graph)
    depth: dict[str, int] = {}
    for node in graph.nodes():
        depth[node.id] = 1 + max((depth[i] for i in node.inputs), default=-1)
    order = {w: i for i, w in enumerate(sorted(graph.workflows))}
    columns: dict[int, list[str]] = {}
    for node_id in depth:
        columns.setdefault(depth[node_id], []).append(node_id)
    for ids in columns.values():  # each workflow's nodes together, so its box stays compact
        ids.sort(key=lambda n: (min((order[w] for w in users.get(n, [])), default=len(order)), graph.node(n).label))
    position = {n: (d * 3.0, -row * 1.0) for d, ids in columns.items() for row, n in enumerate(ids)}
    height = max((len(ids) for ids in columns.values()), default=1)  # workflows without statements: no node
    fig, ax = plt.subplots(figsize=(3 + 2.2 * len(columns), 1.5 + 0.45 * height))
    palette = plt.get_cmap("tab10")
    for index, workflow in enumerate(sorted(graph.workflows)):
        members = [position[n] for n, ws in users.items() if workflow in ws]
        if not members:
            continue
        xs, ys = [p[0] for p in members], [p[1] for p in members]
        color = palette(index % 10)
        ax.add_patch(Rectangle((min(xs) - 1.2, min(ys) - 0.4), max(xs) - min(xs) + 2.4, max(ys) - min(ys) + 0.8,
                               fill=True, alpha=0.08, color=color))
        ax.text(min(xs) - 1.15, max(ys) + 0.45, workflow, fontsize=8, color=color)
    for source, target in graph.edges():
        (x1, y1), (x2, y2) = position[source], position[target]
        ax.annotate("", xy=(x2 - 1.0, y2), xytext=(x1 + 1.0, y1),
                    arrowprops={"arrowstyle": "->", "color": "#888888", "lw": 0.6})
    for node in graph.nodes():
        x, y = position[node.id]
        shared = len(users.get(node.id, [])) > 1
        ax.text(x, y, _label(node).replace("\\n", "\n"), ha="center", va="center", fontsize=6,
                bbox={"boxstyle": "round" if node.kind == SENSOR else "square", "facecolor": "white",
                      "edgecolor": "red" if shared else "black", "linewidth": 2.0 if shared else 0.6})
    ax.set_xlim(-1.6, 3.0 * max(columns, default=0) + 1.6)
    ax.set_ylim(-height + 0.2, 1.0)
    ax.axis("off")
    ax.set_title("SensorScript DAG (red border: shared by several workflows)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
