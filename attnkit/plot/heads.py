"""Figures of per-head statistics (``head_stats`` output)."""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure

from .attention import plot_head_map

_LABELS = {"cls": "attention to [CLS]", "sep": "attention to [SEP]",
           "punct": "attention to punctuation", "entropy": "mean attention entropy (nats)"}


def head_stats_figures(stats: pd.DataFrame) -> dict[str, Figure]:
    """Layer × head maps of a ``head_stats`` table: name → Figure.

    Parameters
    ----------
    stats : HeadResult or DataFrame
        :func:`attnkit.head_stats` output.

    Returns
    -------
    dict of str to matplotlib.figure.Figure
        ``heads_cls``, ``heads_sep``, ``heads_punct`` and ``heads_entropy``.

    Examples
    --------
    >>> import attnkit as ak
    >>> from attnkit.plot import head_stats_figures
    >>> from attnkit.testing import tiny_model
    >>> stats = ak.head_stats([tiny_model("bert").attend("The cat sat on the mat.")], progress=False)
    >>> sorted(head_stats_figures(stats))
    ['heads_cls', 'heads_entropy', 'heads_punct', 'heads_sep']
    """
    return {f"heads_{col}": plot_head_map(stats, col, title=label) for col, label in _LABELS.items()}
