"""Analyses of attention: pure functions returning DataFrames or arrays."""

from .coref import CorefEvaluation, coref_heads, coref_predictions, coref_summary, split_documents
from .stats import STAT_COLUMNS, head_stats, item_stats

__all__ = [
    "CorefEvaluation", "coref_heads", "coref_predictions", "coref_summary", "split_documents",
   "STAT_COLUMNS", "head_stats", "item_stats"]
