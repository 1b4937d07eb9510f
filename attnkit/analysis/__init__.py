"""Analyses of attention: pure functions returning DataFrames or arrays."""

from .stats import STAT_COLUMNS, head_stats, item_stats

__all__ = ["STAT_COLUMNS", "head_stats", "item_stats"]
