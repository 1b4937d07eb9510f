"""How ``result.plot()`` draws each analysis's result: one figure per result kind.

Analyses never import views: they name the figure of their result (``HeadResult(table,
meta, plot="head_stats")``), and :meth:`attnkit.core.results.Result.plot` looks the name up in
:data:`attnkit.core.results.FIGURES`, which this module fills when it is imported (the core
never imports a view).
"""

from __future__ import annotations

from typing import Any

from ..core.results import FIGURES
from .attention import plot_head_map
from .checkpoints import plot_checkpoint_scores
from .common import figure_axes
from .coref import plot_coref_heads
from .faithfulness import plot_faithfulness
from .flow import plot_comparison
from .interventions import plot_patching
from .qk import plot_qk_embedding
from .stats import plot_head_clusters, plot_head_distances, plot_importance, plot_special_attention
from .syntax import plot_relation_grid, plot_relation_heads


def _head_stats(result: Any, ax: Any = None, value: str | None = None, **options: Any) -> Any:
    if value is not None:
        return plot_head_map(result.grid(value), value=value, ax=ax, **options)
    return plot_special_attention(result, ax=ax, **options).figure


def _head_distances(result: Any, ax: Any = None, value: Any = None, **options: Any) -> Any:
    return plot_head_distances(result.table, kind=result.meta.get("kind", "divergence"), ax=ax, **options)


def _head_embedding(result: Any, ax: Any = None, value: Any = None, **options: Any) -> Any:
    options.setdefault("color_by", "layer")
    return plot_head_clusters(result.table, ax=ax, **options)


def _comparison(result: Any, ax: Any = None, value: Any = None, **options: Any) -> Any:
    return plot_comparison(result, ax=ax, **options)


def _coref_heads(result: Any, ax: Any = None, value: str | None = None, **options: Any) -> Any:
    return plot_coref_heads(result, ax=ax, column=value or "all", **options).figure


def _faithfulness(result: Any, ax: Any = None, metric: str | None = None, **options: Any) -> Any:
    return plot_faithfulness(result, ax=ax, metric=metric, **options)


def _importance(result: Any, ax: Any = None, **options: Any) -> Any:
    return plot_importance(result, ax=ax, **options)


def _relation_grid(result: Any, ax: Any = None, value: Any = None, **options: Any) -> Any:
    return plot_relation_grid(result, ax=ax, **options).figure


def _relation_heads(result: Any, ax: Any = None, **options: Any) -> Any:
    return plot_relation_heads(result, ax=ax, **options).figure


def _head_map(result: Any, ax: Any = None, value: str | None = None, **options: Any) -> Any:
    return plot_head_map(result.grid(value), value=result.value_column(value), ax=ax, **options)


def _table_bars(result: Any, ax: Any = None, **options: Any) -> Any:
    fig, ax = figure_axes(ax, (6.0, 3.2))
    result.table.select_dtypes("number").plot.bar(ax=ax, **options)
    return fig


def _patching(result: Any, ax: Any = None, value: str | None = None, **options: Any) -> Any:
    return plot_patching(result, value=value, ax=ax, **options)
def _checkpoint_scores(result: Any, ax: Any = None, value: str | None = None, **options: Any) -> Any:
    return plot_checkpoint_scores(result, value=value, ax=ax, **options)


# Result kind -> ``draw(result, ax=None, **options) -> Figure``.
FIGURES.update({
    "checkpoint_scores": _checkpoint_scores,
    "comparison": _comparison,
    "coref_heads": _coref_heads,
    "faithfulness": _faithfulness,
    "head_distances": _head_distances,
    "head_embedding": _head_embedding,
    "head_map": _head_map,
    "head_stats": _head_stats,
    "importance": _importance,
    "patching": _patching,
    "qk_embedding": plot_qk_embedding,
    "relation_grid": _relation_grid,
    "relation_heads": _relation_heads,
    "table": _table_bars,
})
