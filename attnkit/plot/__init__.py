"""Matplotlib figures for every view (papers, PDF, GitHub rendering).

One submodule per family of figures; the public functions are re-exported here.
"""

from .coref import plot_coref_accuracy, plot_coref_heads
from .flow import plot_comparison, plot_flow_graph, plot_flow_radial, plot_influence
from .heads import head_metric_grid, head_stats_figures

__all__ = [
    "head_metric_grid",
    "head_stats_figures",
    "plot_comparison",
    "plot_coref_accuracy",
    "plot_coref_heads",
    "plot_flow_graph",
    "plot_flow_radial",
    "plot_influence",
]
