"""Figures of per-head statistics (``head_stats`` output)."""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure

from .attention import plot_head_map

_LABELS = {"cls": "attention to [CLS]", "sep": "attention to [SEP]",
           "punct": "attention to punctuation", "entropy": "mean attention entropy (nats)"}


def head_stats_figures(stats: pd.DataFrame) -> dict[str, Figure]:
    """Layer × head maps of a ``head_stats`` table: name → Figure."""
    return {f"heads_{col}": plot_head_map(stats, col, title=label) for col, label in _LABELS.items()}
