"""The flow view's wire format, described once: the Python writer (:func:`encode_graph`) and
the TypeScript reader's column indices (``js/src/flow/wire.gen.ts``, generated from
:data:`FIELDS` by ``python -m attnkit.widgets._flow_wire``; a test checks it is current).

Every array goes through the codec (:mod:`attnkit.widgets._codec`), so it arrives with its
dtype and shape; the generated file only names the columns.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np

from ._codec import wire

#: model code of a node or edge of a comparison's union graph (``model`` attribute)
MODEL_CODE = {"both": 0, "a": 1, "b": 2}
#: which models' graphs an edge's head is in
WHO = {"a": 1, "b": 2, "both": 3}


@dataclass(frozen=True)
class Field:
    dtype: str
    columns: tuple[str, ...]  # empty: a flat array
    doc: str


#: Graph arrays of the flow view, by trait name.
FIELDS: dict[str, Field] = {
    "nodes": Field("uint16", ("level", "position", "model"),
                   "one row per drawn node; model: MODEL code (0 in both graphs, 1 only a or the only model, 2 only b)"),
    "edges": Field("uint16", ("upper", "from", "to", "model"),
                   "one row per drawn edge (upper, from) -> (upper - 1, to), strongest first within each layer"),
    "edge_weight": Field("float32", (), "[E]: the edge's weight (largest of its heads)"),
    "edge_heads": Field("uint16", ("head", "who"),
                        "the heads of every edge in CSR order: head index in its layer, WHO code"),
    "edge_head_offsets": Field("uint32", (), "[E + 1]: edge i's heads are rows offsets[i]..offsets[i+1] of edge_heads"),
}

#: Per-position and per-head arrays that go with the graph.
TABLES: dict[str, Field] = {
    "influence_a": Field("float32", (), "[n]: influence score of each input position (model a)"),
    "influence_b": Field("float32", (), "[n]: the same for model b (comparisons)"),
    "rating_a": Field("uint8", (), "[n]: displayed 0-5 rating (see FlowView's rating option)"),
    "rating_b": Field("uint8", (), "[n]: the same for model b"),
    "head_counts_a": Field("float32", (), "[L, H]: edges per head (collection: mean per input)"),
    "head_counts_b": Field("float32", (), "[L, H]: the same for model b"),
    "head_share": Field("float32", (), "[L, H]: share of inputs where the head makes an edge (collection)"),
    "category_share": Field("float32", (), "[C]: mean influence share per token category (collection)"),
    "category_std": Field("float32", (), "[C]: its standard deviation"),
    "top_share": Field("float32", (), "[T]: influence share per occurrence of the top tokens"),
}


def _rows(name: str, rows: Sequence[Sequence[int]]) -> dict[str, Any]:
    f = FIELDS[name]
    return wire(np.array(rows, dtype=np.int64).reshape(-1, len(f.columns)), f.dtype)


def encode_graph(g: nx.DiGraph, *, max_edges: int | None = None) -> dict[str, Any]:
    """The traits describing graph ``g`` (an attention graph or a comparison's union).

    ``max_edges`` keeps the strongest edges of each layer only (and the nodes they touch,
    besides the sources); ``n_edges_total`` says how many the graph has.
    """
    by_layer: dict[int, list] = {}
    for u, v, d in g.edges(data=True):
        by_layer.setdefault(u[0], []).append((u, v, d))
    kept = []
    for level in sorted(by_layer, reverse=True):
        edges = sorted(by_layer[level], key=lambda e: (-e[2]["weight"], e[0][1], e[1][1]))
        kept.extend(edges[:max_edges] if max_edges else edges)
    sources = [tuple(map(int, s)) for s in g.graph.get("source", [])]
    touched = set(sources) | {u for u, _, _ in kept} | {v for _, v, _ in kept}
    nodes = sorted(n for n in g.nodes if n in touched)
    edge_rows: list[tuple[int, int, int, int]] = []
    weights: list[float] = []
    pairs: list[tuple[int, int]] = []
    offsets = [0]
    for (lu, pu), (_, pv), d in kept:
        edge_rows.append((lu, pu, pv, MODEL_CODE[d.get("model", "a")]))
        weights.append(d["weight"])
        if "heads_a" in d:
            ha, hb = set(d["heads_a"]), set(d["heads_b"])
            pairs.extend((h, (h in ha) * WHO["a"] + (h in hb) * WHO["b"]) for h in sorted(ha | hb))
        else:
            pairs.extend((h, WHO["a"]) for h in d["heads"])
        offsets.append(len(pairs))
    return {
        "nodes": _rows("nodes", [(lv, pos, MODEL_CODE[g.nodes[(lv, pos)].get("model", "a")]) for lv, pos in nodes]),
        "edges": _rows("edges", edge_rows),
        "edge_weight": wire(np.array(weights, dtype=np.float32), FIELDS["edge_weight"].dtype),
        "edge_heads": _rows("edge_heads", pairs),
        "edge_head_offsets": wire(np.array(offsets), FIELDS["edge_head_offsets"].dtype),
        "n_nodes": len(nodes),
        "n_edges": len(kept),
        "n_edges_total": g.number_of_edges(),
        "source": [list(s) for s in sources],
    }


def typescript() -> str:
    """The text of ``js/src/flow/wire.gen.ts``."""
    lines = [
        "// Generated by `python -m attnkit.widgets._flow_wire` from attnkit/widgets/_flow_wire.py; do not edit.",
        "// Column indices of the flow view's arrays (each arrives through lib/codec.ts with its dtype and shape).",
        "",
    ]
    for name, f in FIELDS.items():
        const = name.upper()
        lines.append(f"/** {name}: {f.dtype}{f' [rows, {len(f.columns)}]' if f.columns else ''}: {f.doc} */")
        if f.columns:
            cols = ", ".join(f"{c}: {i}" for i, c in enumerate(f.columns))
            lines.append(f"export const {const} = {{ {cols}, width: {len(f.columns)} }} as const;")
    lines.append("")
    for name, f in TABLES.items():
        lines.append(f"// {name}: {f.dtype} {f.doc}")
    lines += [
        "",
        f"export const MODEL = {{ {', '.join(f'{k}: {v}' for k, v in MODEL_CODE.items())} }} as const;",
        f"// edge_heads.who: {', '.join(f'{v} {k}' for k, v in WHO.items())} (the view reads head counts instead)",
        f"export const GRAPH_ARRAYS = [{', '.join(repr(k).replace(chr(39), chr(34)) for k in FIELDS)}] as const;",
        f"export const TABLE_ARRAYS = [{', '.join(repr(k).replace(chr(39), chr(34)) for k in TABLES)}] as const;",
        "",
    ]
    return "\n".join(lines)


GENERATED = Path(__file__).resolve().parents[2] / "js" / "src" / "flow" / "wire.gen.ts"


if __name__ == "__main__":  # pragma: no cover - a build step
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else GENERATED
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(typescript(), encoding="utf-8")
