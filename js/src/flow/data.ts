// What the flow view reads from the model: the graph (column layout from wire.gen.ts, which
// is generated from attnkit/widgets/_flow_wire.py), influence, ratings and head counts.

import { readArray, readFloats, WireArray } from "../lib/codec";
import { Trait } from "../traits.gen";
import { EdgeList } from "../lib/radial";
import { EDGE_HEADS, EDGES, MODEL, NODES } from "./wire.gen";

// Same colours as attnkit.plot.flow, indexed by the wire's MODEL code: shared / model A only /
// model B only; then token roles.
export const MODEL_COLORS: Record<number, string> = { [MODEL.both]: "#8c8c8c", [MODEL.a]: "#1a9e9e", [MODEL.b]: "#7b3294" };
export const SINGLE = "#1a6e9e";
export const ROLE_COLORS: Record<string, string> = { cls: "#d95f02", sep: "#e6ab02", special: "#999999", word: "#1a6e9e" };

export interface Graph {
  tokens: string[];
  roles: string[];
  layers: number;
  heads: number;
  names: string[];
  nodes: Uint16Array; // [N, NODES.width]
  edges: Uint16Array; // [E, EDGES.width]
  weight: Float32Array;
  edgeHeads: Uint16Array; // [*, EDGE_HEADS.width]
  edgeOffsets: Uint32Array;
  nNodes: number;
  nEdges: number;
  nEdgesTotal: number;
  infA: Float32Array;
  infB: Float32Array;
  ratA: Uint8Array;
  ratB: Uint8Array;
  countsA: Float32Array; // [L, H]
  countsB: Float32Array;
  source: number[][];
}

/** Reads a trait of the flow view's widget. */
export type Traits = (name: Trait<"flow">) => any;

export function readGraph(get: Traits): Graph {
  const nodes = readArray(get("nodes") as WireArray);
  const edges = readArray(get("edges") as WireArray);
  const g: Graph = {
    tokens: get("tokens") ?? [],
    roles: get("roles") ?? [],
    layers: get("n_layers"),
    heads: get("n_heads"),
    names: get("names") ?? [],
    nodes: nodes.data as Uint16Array,
    edges: edges.data as Uint16Array,
    weight: readFloats(get("edge_weight") as WireArray),
    edgeHeads: readArray(get("edge_heads") as WireArray).data as Uint16Array,
    edgeOffsets: readArray(get("edge_head_offsets") as WireArray).data as Uint32Array,
    nNodes: nodes.shape[0] ?? 0,
    nEdges: edges.shape[0] ?? 0,
    nEdgesTotal: Number(get("n_edges_total") ?? 0),
    infA: readFloats(get("influence_a") as WireArray),
    infB: readFloats(get("influence_b") as WireArray),
    ratA: readArray(get("rating_a") as WireArray).data as Uint8Array,
    ratB: readArray(get("rating_b") as WireArray).data as Uint8Array,
    countsA: readFloats(get("head_counts_a") as WireArray),
    countsB: readFloats(get("head_counts_b") as WireArray),
    source: get("source") ?? [],
  };
  if (g.weight.length !== g.nEdges || (g.edgeOffsets.length !== g.nEdges + 1 && g.nEdges > 0)) {
    throw new Error(`flow view: ${g.nEdges} edges but ${g.weight.length} weights / ${g.edgeOffsets.length} offsets`);
  }
  return g;
}

export const node = (g: Graph, i: number, col: keyof typeof NODES) => g.nodes[NODES.width * i + NODES[col]];
export const edge = (g: Graph, i: number, col: keyof typeof EDGES) => g.edges[EDGES.width * i + EDGES[col]];

export function edgeList(g: Graph): EdgeList {
  return { count: g.nEdges, upper: (i) => edge(g, i, "upper"), from: (i) => edge(g, i, "from"), to: (i) => edge(g, i, "to") };
}

/** Does edge i use head `head` (of its layer)? */
export function edgeHasHead(g: Graph, i: number, head: number): boolean {
  for (let k = g.edgeOffsets[i]; k < g.edgeOffsets[i + 1]; k++) if (g.edgeHeads[EDGE_HEADS.width * k + EDGE_HEADS.head] === head) return true;
  return false;
}
