"""Figures of general head behaviour (Clark et al. 2019, Figs. 2, 3, 4 and 6).

Every function draws on ``ax`` when given, else on a new figure that is not registered
with pyplot (so a notebook shows it once, as the returned value), and returns the Figure.
Layers are drawn 1-indexed and heads labelled "L-H" (1-indexed), as in the paper.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from .._compat import renamed
from ..errors import InputError
from ..core.results import table_and_meta
from .common import figure_axes

_COLOURS = {
    "cls": "#9b59b6",
    "sep": "#2ecc71",
    "punct": "#16a085",
    "other": "#7f8c8d",
}
_NAMES = {"cls": "[CLS]", "sep": "[SEP]", "punct": "punctuation", "other": "other"}
_BEHAVIOUR_STYLE = {  # colour, marker
    "punctuation": ("#16a085", "s"),
    "[SEP]": ("#2ecc71", "$S$"),
    "[CLS]": ("#9b59b6", "$C$"),
    "broad": ("#f39c12", "^"),
    "previous": ("#3498db", "<"),
    "next": ("#e74c3c", ">"),
    "other": ("#95a5a6", "o"),
}


def _need(df: pd.DataFrame, cols, what: str) -> None:
    missing = [c for c in cols if c not in getattr(df, "columns", [])]
    if missing:
        raise InputError(f"{what} needs columns {missing}; pass the output of the matching analysis.")
    if not isinstance(df.index, pd.MultiIndex) or list(df.index.names[:2]) != ["layer", "head"]:
        raise InputError(f"{what} needs a DataFrame indexed by (layer, head), as head_stats() returns.")


def _per_layer_scatter(ax, series: pd.Series, colour: str, label: str, jitter: float, marker="o"):
    layers = series.index.get_level_values("layer").to_numpy() + 1
    ax.scatter(layers + jitter, series.to_numpy(), s=10, color=colour, alpha=0.45, marker=marker,
               linewidths=0)
    means = series.groupby(level="layer").mean()
    ax.plot(means.index + 1, means.to_numpy(), color=colour, marker=marker, label=label, lw=1.6)


@renamed(positional=("ax", "columns"))
def plot_special_attention(stats: Any, *, ax: Axes | None = None,
                           columns: Sequence[str] = ("cls", "sep", "punct")) -> Figure:
    """Average attention to [CLS], [SEP] and punctuation per layer (paper Fig. 2, top).

    One dot per head (fraction of its attention, averaged over all from-positions and
    items) and a line through each layer's mean.

    Parameters
    ----------
    stats : HeadResult or DataFrame
        :func:`attnkit.head_stats` output.
    ax : matplotlib Axes, optional
        Draw into these axes (else a new figure, not registered with pyplot).
    columns : sequence of str
        The statistics to draw.

    Returns
    -------
    matplotlib.figure.Figure
        The figure.

    Raises
    ------
    InputError
        For a table without those columns or not indexed by ``(layer, head)``.

    Examples
    --------
    >>> import attnkit as ak
    >>> from attnkit.testing import tiny_model
    >>> stats = ak.head_stats([tiny_model("bert").attend("The cat sat on the mat.")], progress=False)
    >>> from attnkit.plot import plot_special_attention
    >>> plot_special_attention(stats).axes[0].get_xlabel()
    'layer'
    """
    stats, _ = table_and_meta(stats)
    _need(stats, list(columns), "plot_special_attention()")
    fig, ax = figure_axes(ax, (5.5, 3.4))
    offsets = np.linspace(-0.15, 0.15, len(columns))
    for off, col in zip(offsets, columns):
        _per_layer_scatter(ax, stats[col], _COLOURS.get(col, "#555555"), _NAMES.get(col, col), off)
    L = stats.index.get_level_values("layer").max() + 1
    ax.set_xticks(range(1, L + 1))
    ax.set_xlabel("layer")
    ax.set_ylabel("avg. attention")
    ax.set_ylim(0, 1)
    ax.set_title("Attention to special tokens and punctuation")
    ax.legend(frameon=False)
    return fig


@renamed(positional=("uniform_entropy", "ax", "column"))
def plot_entropy(stats: Any, *, uniform_entropy: float | None = None, ax: Axes | None = None,
                 column: str = "entropy") -> Figure:
    """Per-head attention entropy by layer (paper Fig. 4), with the entropy of uniform
    attention as a dashed line.

    Parameters
    ----------
    stats : HeadResult or DataFrame
        :func:`attnkit.head_stats` output.
    uniform_entropy : float, optional
        The dashed line (default ``stats.meta["uniform_entropy"]``, see
        :func:`attnkit.analysis.cluster.uniform_entropy`); left out without it.
    ax : matplotlib Axes, optional
        Draw into these axes (else a new figure, not registered with pyplot).
    column : {"entropy", "cls_entropy"}
        Mean over all rows, or the [CLS] row (Fig. 4 bottom).

    Returns
    -------
    matplotlib.figure.Figure
        The figure.

    Raises
    ------
    InputError
        For a table without ``column``.

    Examples
    --------
    >>> import attnkit as ak
    >>> from attnkit.testing import tiny_model
    >>> stats = ak.head_stats([tiny_model("bert").attend("The cat sat on the mat.")], progress=False)
    >>> from attnkit.plot import plot_entropy
    >>> plot_entropy(stats, column="cls_entropy").axes[0].get_title()
    'Entropy of [CLS] attention'
    """
    stats, meta = table_and_meta(stats)
    _need(stats, [column], "plot_entropy()")
    if uniform_entropy is None:
        uniform_entropy = meta.get("uniform_entropy")
    fig, ax = figure_axes(ax, (5.5, 3.4))
    _per_layer_scatter(ax, stats[column], "#2c3e50", "heads (line: layer mean)", 0.0)
    if uniform_entropy is not None:
        ax.axhline(uniform_entropy, color="#e74c3c", ls="--", lw=1.2, label="uniform attention")
    L = stats.index.get_level_values("layer").max() + 1
    ax.set_xticks(range(1, L + 1))
    ax.set_xlabel("layer")
    ax.set_ylabel("avg. attention entropy (nats)")
    ax.set_ylim(bottom=0)
    ax.set_title("Entropy of [CLS] attention" if column == "cls_entropy" else "Attention entropy")
    ax.legend(frameon=False)
    return fig


@renamed(positional=("ax", "columns"), importance="data")
def plot_importance(data: Any, *, ax: Axes | None = None,
                    columns: Sequence[str] = ("sep", "punct", "other", "cls")) -> Figure:
    """Average gradient magnitude of the objective w.r.t. attention per layer, by what is
    attended to (paper Fig. 3); missing categories (e.g. no [CLS] in GPT-2) are skipped.

    Parameters
    ----------
    data : Result or DataFrame
        :func:`attnkit.attention_importance` output (per layer, or per head: averaged
        over each layer's heads).
    ax : matplotlib Axes, optional
        Draw into these axes (else a new figure, not registered with pyplot).
    columns : sequence of str
        The categories to draw.

    Returns
    -------
    matplotlib.figure.Figure
        The figure.

    Raises
    ------
    InputError
        For a table with none of the categories.

    Examples
    --------
    >>> import attnkit as ak
    >>> from attnkit.plot import plot_importance
    >>> from attnkit.testing import tiny_model
    >>> imp = ak.attention_importance(tiny_model("bert-mlm"), ["The cat sat on the mat."],
    ...                               progress=False)
    >>> plot_importance(imp).axes[0].get_xlabel()
    'layer'
    """
    importance, meta = table_and_meta(data)
    cols = [c for c in columns if c in importance.columns and importance[c].notna().any()]
    if not cols:
        raise InputError("plot_importance() needs attention_importance() output (columns "
                         "cls, sep, punct, other).")
    if isinstance(importance.index, pd.MultiIndex):
        importance = importance.groupby(level="layer").mean()
    fig, ax = figure_axes(ax, (5.5, 3.4))
    layers = importance.index.to_numpy() + 1
    for col in cols:
        ax.plot(layers, importance[col].to_numpy(), marker="o", color=_COLOURS.get(col),
                label=_NAMES.get(col, col))
    ax.set_xticks(layers)
    ax.set_xlabel("layer")
    ax.set_ylabel("avg. |∂ objective / ∂ attention|")
    objective = meta.get("objective")
    ax.set_title("Gradient importance of attention" + (f" ({objective})" if objective else ""))
    ax.set_ylim(bottom=0)
    ax.legend(frameon=False)
    return fig


@renamed(positional=("behaviours", "ax", "color_by", "annotate"))
def plot_head_clusters(embedding: Any, *, behaviours: pd.Series | None = None,
                       ax: Axes | None = None, color_by: str = "behaviour",
                       annotate: dict[tuple[int, int], str] | None = None) -> Figure:
    """Heads embedded in 2-D by MDS of their Jensen–Shannon distances (paper Fig. 6).

    Parameters
    ----------
    embedding : HeadResult or DataFrame
        :func:`attnkit.embed_heads` output (columns ``x``, ``y``; index (layer, head)).
    behaviours : pandas.Series, optional
        :func:`attnkit.head_behaviours` output, for ``color_by="behaviour"``.
    ax : matplotlib Axes, optional
        Draw into these axes (else a new figure, not registered with pyplot).
    color_by : {"behaviour", "layer"}
        Markers as in the paper, or a colour map from the first to the last layer.
    annotate : dict, optional
        ``{(layer, head): text}`` (0-indexed) written beside those heads, e.g. the paper's
        linguistic heads.

    Returns
    -------
    matplotlib.figure.Figure
        The figure.

    Raises
    ------
    InputError
        For an embedding that is not indexed by ``(layer, head)`` with columns ``x``,
        ``y``, behaviours that do not cover it, or an unknown ``color_by``.

    Examples
    --------
    >>> import attnkit as ak
    >>> from attnkit.plot import plot_head_clusters
    >>> from attnkit.testing import tiny_model
    >>> atts = [tiny_model("bert").attend("The cat sat on the mat.")]
    >>> emb = ak.embed_heads(ak.head_distances(atts, progress=False))
    >>> beh = ak.head_behaviours(ak.head_stats(atts, progress=False))
    >>> plot_head_clusters(emb, behaviours=beh).axes[0].get_title()
    'Heads by Jensen–Shannon distance (MDS)'
    """
    if not {"x", "y"} <= set(getattr(embedding, "columns", [])):
        raise InputError("plot_head_clusters() needs embed_heads() output (columns x, y).")
    if not isinstance(embedding.index, pd.MultiIndex):
        raise InputError("plot_head_clusters() needs an embedding indexed by (layer, head); "
                         "embed a head_distances() DataFrame.")
    fig, ax = figure_axes(ax, (5.0, 4.6))
    layer = embedding.index.get_level_values("layer").to_numpy()
    if color_by == "layer":
        import matplotlib as mpl

        L = int(layer.max()) + 1
        cmap = mpl.colormaps["viridis"]
        sc = ax.scatter(embedding["x"], embedding["y"], c=layer + 1, cmap=cmap, s=28,
                        vmin=1, vmax=L)
        fig.colorbar(sc, ax=ax, label="layer", ticks=range(1, L + 1))
    elif color_by == "behaviour":
        if behaviours is None:
            raise InputError("color_by='behaviour' needs behaviours=head_behaviours(...).")
        beh = behaviours.reindex(embedding.index)
        if beh.isna().any():
            raise InputError("behaviours do not cover every head of the embedding.")
        for name, (colour, marker) in _BEHAVIOUR_STYLE.items():
            sel = (beh == name).to_numpy()
            if sel.any():
                ax.scatter(embedding["x"][sel], embedding["y"][sel], color=colour, marker=marker,
                           s=36 if marker.startswith("$") else 22, label=f"{name} ({sel.sum()})")
        ax.legend(frameon=False, fontsize="small", loc="best")
    else:
        raise InputError(f"color_by must be 'behaviour' or 'layer', not {color_by!r}.")
    for key, text in (annotate or {}).items():
        if key in embedding.index:
            x, y = embedding.loc[key, ["x", "y"]]
            ax.annotate(f"{key[0] + 1}-{key[1] + 1} {text}", (x, y), fontsize="x-small",
                        xytext=(3, 3), textcoords="offset points")
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_aspect("equal", adjustable="datalim")
    ax.set_title("Heads by Jensen–Shannon distance (MDS)")
    return fig


def plot_head_distances(distances: Any, *, kind: str = "divergence", ax: Axes | None = None) -> Figure:
    """The ``[L*H, L*H]`` matrix of :func:`attnkit.head_distances`, heads in layer order
    (1-indexed layer ticks), darker = more alike."""
    distances, meta = table_and_meta(distances)
    d = distances.to_numpy()
    fig, ax = figure_axes(ax, (5.2, 4.6))
    im = ax.imshow(d, cmap="viridis_r", interpolation="nearest")
    if isinstance(distances.index, pd.MultiIndex):
        layers = distances.index.get_level_values("layer").to_numpy()
        starts = np.flatnonzero(np.r_[True, layers[1:] != layers[:-1]])
        ax.set_xticks(starts, [f"L{layers[i] + 1}" for i in starts], fontsize=7)
        ax.set_yticks(starts, [f"L{layers[i] + 1}" for i in starts], fontsize=7)
    fig.colorbar(im, ax=ax, shrink=0.8,
                 label="JS divergence (nats)" if kind == "divergence" else "JS distance")
    ax.set_title("Distances between heads")
    return fig
