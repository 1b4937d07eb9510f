"""Analyses of attention: pure functions returning DataFrames or arrays."""

from .cluster import (
    BEHAVIOURS,
    classical_mds,
    embed_heads,
    head_behaviours,
    head_distances,
    uniform_entropy,
)
from .coref import CorefEvaluation, coref_heads, coref_predictions, coref_summary, split_documents
from .importance import TARGETS, AttentionGradients, attention_gradients, attention_importance
from .stats import STAT_COLUMNS, head_stats, item_stats, uniform_row_entropy

__all__ = [
    "BEHAVIOURS",
    "STAT_COLUMNS",
    "TARGETS",
    "AttentionGradients",
    "CorefEvaluation",
    "attention_gradients",
    "attention_importance",
    "classical_mds",
    "coref_heads",
    "coref_predictions",
    "coref_summary",
    "embed_heads",
    "head_behaviours",
    "head_distances",
    "head_stats",
    "item_stats",
    "split_documents",
    "uniform_entropy",
    "uniform_row_entropy",
]
