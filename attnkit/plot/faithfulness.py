"""Figures of :func:`attnkit.faithfulness`: each measure's score with its bootstrap interval."""

from __future__ import annotations

from typing import Any

import numpy as np

from .._compat import renamed
from ..errors import InputError
from .common import figure_axes

_TITLES = {
    "spearman_blankout": "Spearman ρ with blank-out",
    "spearman_inputxgrad": "Spearman ρ with input×gradient",
    "spearman_abs_blankout": "Spearman ρ with |blank-out|",
    "spearman_abs_inputxgrad": "Spearman ρ with |input×gradient|",
    "deletion_auc": "deletion AUC (lower is better)",
    "insertion_auc": "insertion AUC (higher is better)",
}


@renamed(positional=("ax", "metric"), result="data")
def plot_faithfulness(data: Any, *, ax: Any = None, metric: str | None = None,
                      **options: Any) -> Any:
    """Bars of one metric per measure with 95 % bootstrap intervals; with ``metric=None``
    (and no ``ax``) one panel per metric.

    Parameters
    ----------
    data : Result
        What :func:`attnkit.faithfulness` returned.
    ax : matplotlib Axes, optional
        Draw one metric there.
    metric : str, optional
        One of the result's metrics (``"spearman_blankout"``, ``"deletion_auc"``, ...).
    **options
        ``color`` of the bars.

    Returns
    -------
    matplotlib.figure.Figure
        The figure.

    Raises
    ------
    InputError
        For a metric the result does not have.

    Examples
    --------
    >>> import attnkit as ak
    >>> from attnkit.plot import plot_faithfulness
    >>> from attnkit.testing import tiny_model
    >>> texts = ["The cat sat on the mat.", "A dog ran home."]
    >>> result = ak.faithfulness(tiny_model("bert-cls"), texts, measures=["weights"], progress=False)
    >>> fig = plot_faithfulness(result, metric="spearman_blankout")
    >>> fig.axes[0].get_title()
    'Spearman ρ with blank-out'
    """
    result = data
    table = result.table
    metrics = list(dict.fromkeys(table.index.get_level_values("metric")))
    if metric is None and ax is None:
        from matplotlib.figure import Figure

        cols = min(3, len(metrics))
        rows = -(-len(metrics) // cols)
        fig = Figure(figsize=(3.4 * cols, 3.0 * rows), layout="constrained")
        axes = fig.subplots(rows, cols, squeeze=False).ravel()
        for a in axes[len(metrics):]:
            a.set_visible(False)
        for a, mt in zip(axes, metrics):
            _bars(table, mt, a, **options)
        fig.suptitle(f"Faithfulness ({result.meta.get('model', '')}, target: "
                     f"{result.meta.get('objective', '')}, {result.meta.get('n_items', 0)} inputs)")
        return fig
    metric = metric or metrics[0]
    if metric not in metrics:
        raise InputError(f"No metric {metric!r}; the result has {metrics}.")
    fig, ax = figure_axes(ax, (4.0, 3.0))
    _bars(table, metric, ax, **options)
    return fig


def _bars(table: Any, metric: str, ax: Any, **options: Any) -> None:
    sub = table.xs(metric, level="metric")
    x = np.arange(len(sub))
    mean = sub["mean"].to_numpy()
    err = np.vstack([mean - sub["ci_low"].to_numpy(), sub["ci_high"].to_numpy() - mean])
    ax.bar(x, mean, yerr=err, capsize=3, color=options.get("color", "#4c72b0"))
    ax.set_xticks(x, list(sub.index), rotation=45, ha="right")
    ax.axhline(0, color="0.5", lw=0.8)
    ax.set_title(_TITLES.get(metric, metric), fontsize=9)
