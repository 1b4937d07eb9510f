"""Figures of heads across training (:func:`attnkit.checkpoint_scores` output)."""

from __future__ import annotations

from typing import Any

import numpy as np
from matplotlib.figure import Figure

from ..errors import InputError
from ..core.labels import head_label
from .common import figure_axes, mpl_text


def plot_checkpoint_scores(data: Any, *, value: str | None = None, ax: Any = None,
                           title: str | None = None) -> Figure:
    """Each head's score against the training step, with the training loss behind.

    One line per head, labelled "L-H" (1-indexed, as in the papers); the training loss (or,
    where none was logged, the loss on the inputs) on a second axis in grey, and the
    in-context learning score as a dashed grey line where it was computed.

    Parameters
    ----------
    data : SeriesResult
        :func:`attnkit.checkpoint_scores` output.
    value : str, optional
        The column to draw (default ``data.meta["value"]``).
    ax : matplotlib Axes, optional
        Draw into these axes (else a new figure).
    title : str, optional
        The figure title (default: the column).

    Returns
    -------
    matplotlib.figure.Figure
        The figure.

    Raises
    ------
    InputError
        When ``value`` is not a column of the table.

    Examples
    --------
    >>> import pandas as pd
    >>> from attnkit.training import SeriesResult
    >>> from attnkit.plot import plot_checkpoint_scores
    >>> idx = pd.MultiIndex.from_product([[0, 10], [0], [0, 1]], names=["step", "layer", "head"])
    >>> r = SeriesResult(pd.DataFrame({"induction": [0.1, 0.0, 0.6, 0.1]}, index=idx))
    >>> [t.get_text() for t in plot_checkpoint_scores(r).axes[0].get_legend().get_texts()]
    ['1-1', '1-2']
    """
    value = value or data.meta.get("value") or str(data.table.columns[0])
    if value not in data.table.columns:
        raise InputError(f"No column {value!r}; the columns are {list(data.table.columns)}.")
    fig, ax = figure_axes(ax, (7.6, 3.4))
    wide = data.table[value].unstack("step").sort_index(axis=1)
    steps = np.asarray(wide.columns, dtype=np.float64)
    for (layer, head), row in wide.iterrows():
        ax.plot(steps, row.to_numpy(dtype=np.float64), marker=".", label=head_label(layer, head))
    ax.set_xlabel("training step")
    ax.set_ylabel(mpl_text(value))
    ax.set_title(mpl_text(title or f"{value} score across training"))
    ax.legend(title="head (L-H)", fontsize="small", loc="upper left", bbox_to_anchor=(1.13, 1.0),
              borderaxespad=0)
    per_step = getattr(data, "steps", None)
    if per_step is not None and len(per_step):
        loss = per_step["training_loss"]
        name = "training loss"
        if loss.isna().all():
            loss, name = per_step["loss"], "loss on the inputs"
        if not loss.isna().all():
            twin = ax.twinx()
            twin.plot(per_step.index, loss, color="0.6", lw=1, label=name)
            if not per_step["icl"].isna().all():
                twin.plot(per_step.index, per_step["icl"], color="0.6", lw=1, ls="--",
                          label="in-context score")
            twin.set_ylabel("loss (nats)", color="0.4")
            twin.legend(fontsize="small", loc="lower left", bbox_to_anchor=(1.13, 0.0),
                        borderaxespad=0)
    return fig
