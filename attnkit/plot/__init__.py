"""Matplotlib figures for every view (papers, PDF, GitHub rendering).

One submodule per family of figures; the public functions are re-exported here.
"""

from .checkpoints import plot_checkpoint_scores
from .attention import plot_cluster_scatter, plot_head_grid, plot_head_map, plot_heatmap
from .coref import plot_coref_accuracy, plot_coref_heads
from .faithfulness import plot_faithfulness
from .flow import plot_comparison, plot_flow_graph, plot_flow_radial, plot_influence
from .heads import head_stats_figures
from .interventions import plot_patching
from . import results  # noqa: F401  (fills attnkit.core.results.FIGURES: how result.plot() draws)
from .syntax import plot_relation_grid, plot_relation_heads
from .stats import plot_entropy, plot_head_clusters, plot_importance, plot_special_attention

__all__ = [
    "head_stats_figures",
    "plot_checkpoint_scores",
    "plot_cluster_scatter",
    "plot_comparison",
    "plot_coref_accuracy",
    "plot_coref_heads",
    "plot_entropy",
    "plot_faithfulness",
    "plot_flow_graph",
    "plot_flow_radial",
    "plot_head_clusters",
    "plot_head_grid",
    "plot_head_map",
    "plot_heatmap",
    "plot_importance",
    "plot_influence",
    "plot_patching",
    "plot_relation_grid",
    "plot_relation_heads",
    "plot_special_attention",
]
