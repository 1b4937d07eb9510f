"""Matplotlib figures for every view (papers, PDF, GitHub rendering).

One submodule per family of figures; the public functions are re-exported here.
"""

from .coref import plot_coref_accuracy, plot_coref_heads
from .heads import head_metric_grid, head_stats_figures

__all__ = [
    "plot_coref_accuracy", "plot_coref_heads",
   "head_metric_grid", "head_stats_figures"]
