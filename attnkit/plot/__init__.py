"""Matplotlib figures for every view (papers, PDF, GitHub rendering).

One submodule per family of figures; the public functions are re-exported here.
"""

from .heads import head_metric_grid, head_stats_figures

__all__ = ["head_metric_grid", "head_stats_figures"]
