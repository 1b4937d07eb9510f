"""Attention Flows (DeRose et al. 2020) and attention rollout / flow (Abnar & Zuidema 2020).

Graphs are the exchange format: :func:`attention_graph` returns a ``networkx.DiGraph`` with
nodes ``(level, position)`` (level 0 = input tokens, level ``l`` = output of layer ``l``)
and edges pointing down from a query to the keys it attends to.
"""

from .collection import FlowSummary, SetComparison, compare_sets, flow_summary
from .compare import Comparison, check_tokenization, compare, head_edge_counts, js_divergence
from .graph import PathQuery, attention_graph, paths_between, resolve_source, subgraph_through
from .influence import head_counts, influence
from .maxflow import attention_flow, flow_network, layered_max_flow
from .routes import flow_routes
from .rollout import layer_matrix, residual_attention, rollout
from .seq2seq import decoder_layer, seq2seq_graph, seq2seq_rollout

__all__ = [
    "Comparison",
    "FlowSummary",
    "PathQuery",
    "SetComparison",
    "attention_flow",
    "attention_graph",
    "check_tokenization",
    "compare",
    "compare_sets",
    "decoder_layer",
    "flow_network",
    "flow_routes",
    "flow_summary",
    "head_counts",
    "head_edge_counts",
    "influence",
    "js_divergence",
    "layer_matrix",
    "layered_max_flow",
    "paths_between",
    "residual_attention",
    "resolve_source",
    "rollout",
    "seq2seq_graph",
    "seq2seq_rollout",
    "subgraph_through",
]
