"""Figures of the coreference-head analysis (:func:`attnkit.analysis.coref.coref_heads`)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.axes import Axes

from .._compat import renamed
from ..analysis.coref import ACCURACY_COLUMNS, BASELINE_NAMES
from ..errors import InputError
from ..core.results import HeadResult
from .common import figure_axes


def _check(table) -> tuple[pd.DataFrame, dict]:
    need = {"name", "selected", *ACCURACY_COLUMNS}
    if not isinstance(table, HeadResult) or not need <= set(table.columns) or "baselines" not in table.meta:
        raise InputError(
            f"Expected a coref_heads() result (per-head columns {sorted(need)}); got "
            f"{type(table).__name__}."
        )
    return table.table, table.meta


@renamed(positional=("ax",), table="data")
def plot_coref_accuracy(data: HeadResult, *, ax: Axes | None = None,
                        title: str | None = None) -> Axes:
    """Grouped bars: accuracy (%) per mention type (all, pronoun, proper, nominal) of the
    three baselines and of the selected head of a :func:`coref_heads` table.

    The head is labelled "Head L-H" (1-indexed).

    Parameters
    ----------
    data : HeadResult
        What :func:`attnkit.coref_heads` returned.
    ax : matplotlib Axes, optional
        Draw into these axes (else a new pyplot figure).
    title : str, optional
        The title (default: how many documents, and where the head was chosen).

    Returns
    -------
    matplotlib.axes.Axes
        The axes drawn on.

    Raises
    ------
    InputError
        For anything but a :func:`coref_heads` result.

    Examples
    --------
    >>> import attnkit as ak
    >>> from attnkit.testing import tiny_model
    >>> docs = ak.read_coref(ak.data.sample_coref())
    >>> result = ak.coref_heads(ak.extract(tiny_model("bert"), docs, progress=False), docs)
    >>> from attnkit.plot import plot_coref_accuracy
    >>> plot_coref_accuracy(result, title="GUM sample").get_title()
    'GUM sample'
    """
    heads, meta = _check(data)
    base = meta["baselines"].assign(kind="baseline").reset_index()
    rows = pd.concat([base, heads[heads["selected"]].assign(kind="head")], ignore_index=True)
    _, ax = figure_axes(ax, (7, 3.6), pyplot=True)
    groups = list(ACCURACY_COLUMNS)
    x = np.arange(len(groups))
    width = 0.8 / max(len(rows), 1)
    colors = ["#bbbbbb", "#888888", "#555555", "#d95f02"]
    for k, (_, r) in enumerate(rows.iterrows()):
        label = BASELINE_NAMES.get(r["name"], f"Head {r['name']}")
        vals = np.array([r[g] for g in groups], dtype=float) * 100
        bars = ax.bar(x - 0.4 + width * (k + 0.5), np.nan_to_num(vals), width,
                      label=label, color=colors[k % len(colors)] if r["kind"] == "baseline"
                      else colors[-1])
        for b, v in zip(bars, vals):
            if np.isfinite(v):
                ax.text(b.get_x() + b.get_width() / 2, b.get_height() + 1, f"{v:.0f}",
                        ha="center", va="bottom", fontsize=7)
    n = meta.get("n", {})
    ax.set_xticks(x, [f"{g}\n(n={n[g]})" if g in n else g for g in groups])
    ax.set_ylabel("antecedent accuracy (%)")
    ax.set_ylim(0, 105)
    ax.legend(fontsize=8, ncol=2, loc="upper left", frameon=False)
    if title is None:
        title = _title(meta)
    ax.set_title(title, fontsize=9)
    return ax


@renamed(positional=("ax",), table="data")
def plot_coref_heads(data: HeadResult, *, ax: Axes | None = None, column: str = "all",
                     title: str | None = None) -> Axes:
    """Heatmap of every head's accuracy (%) on one mention type (``column``), layers as rows
    and heads as columns (both labelled 1-indexed); the selected head is boxed.

    Parameters
    ----------
    data : HeadResult
        What :func:`attnkit.coref_heads` returned.
    ax : matplotlib Axes, optional
        Draw into these axes (else a new pyplot figure).
    column : {"all", "pronoun", "proper", "nominal"}
        The mention type.
    title : str, optional
        The title.

    Returns
    -------
    matplotlib.axes.Axes
        The axes drawn on.

    Raises
    ------
    InputError
        For anything but a :func:`coref_heads` result, or an unknown column.

    Examples
    --------
    >>> import attnkit as ak
    >>> from attnkit.testing import tiny_model
    >>> docs = ak.read_coref(ak.data.sample_coref())
    >>> result = ak.coref_heads(ak.extract(tiny_model("bert"), docs, progress=False), docs)
    >>> from attnkit.plot import plot_coref_heads
    >>> plot_coref_heads(result, column="pronoun").get_xlabel()
    'head'
    """
    from matplotlib.patches import Rectangle

    table = data
    heads, meta = _check(table)
    if column not in ACCURACY_COLUMNS:
        raise InputError(f"column must be one of {ACCURACY_COLUMNS}, not {column!r}.")
    grid = table.grid(column) * 100
    L, H = grid.shape
    heads = heads.reset_index()
    _, ax = figure_axes(ax, (0.45 * H + 1.8, 0.4 * L + 1.2), pyplot=True)
    im = ax.imshow(grid, cmap="viridis", aspect="auto", vmin=0)
    ax.figure.colorbar(im, ax=ax, label=f"accuracy (%), {column}")
    ax.set_xticks(range(H), [str(h + 1) for h in range(H)], fontsize=7)
    ax.set_yticks(range(L), [str(l + 1) for l in range(L)], fontsize=7)
    ax.set_xlabel("head")
    ax.set_ylabel("layer")
    sel = heads[heads["selected"]]
    for _, r in sel.iterrows():
        ax.add_patch(Rectangle((r["head"] - 0.5, r["layer"] - 0.5), 1, 1, fill=False,
                               edgecolor="#d95f02", linewidth=2))
    ax.set_title(title if title is not None else _title(meta), fontsize=9)
    return ax


def _title(a: dict) -> str:
    if not a:
        return "Coreference heads"
    where = (f"{a.get('documents', '?')} docs" +
             (" (selected on the same docs)" if a.get("same_split") else
              f", head chosen on {len(a.get('select_on', []))} other docs"))
    return f"Antecedent selection, {where}"
