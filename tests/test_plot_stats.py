"""Figures of general head behaviour: they draw the numbers they are given."""

import numpy as np
import pandas as pd

from attnkit.core.results import HeadResult
import pytest
from tolerances import assert_close, F32

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")

from matplotlib.figure import Figure  # noqa: E402

from attnkit.errors import InputError  # noqa: E402
from attnkit.plot.stats import (  # noqa: E402
    plot_entropy,
    plot_head_clusters,
    plot_importance,
    plot_special_attention,
)

L, H = 3, 4


def _stats():
    idx = pd.MultiIndex.from_product([range(L), range(H)], names=["layer", "head"])
    rng = np.random.default_rng(0)
    cols = ["cls", "sep", "punct", "self", "next", "prev", "entropy", "cls_entropy"]
    return pd.DataFrame(rng.random((L * H, len(cols))), index=idx, columns=cols)


def _line(ax, label):
    return next(line for line in ax.get_lines() if line.get_label() == label)


def test_special_attention_draws_layer_means():
    stats = _stats()
    fig = plot_special_attention(stats)
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    line = _line(ax, "[SEP]")
    assert_close(line.get_xdata(), [1, 2, 3], F32)
    assert_close(line.get_ydata(), stats["sep"].groupby(level="layer").mean(), F32)
    # one dot per head per category
    assert sum(len(c.get_offsets()) for c in ax.collections) == 3 * L * H


def test_entropy_has_uniform_baseline_and_uses_given_axes():
    stats = HeadResult(_stats(), {"uniform_entropy": 2.5})
    import matplotlib.pyplot as plt

    fig0, ax = plt.subplots()
    fig = plot_entropy(stats, ax=ax)
    assert fig is fig0
    base = _line(ax, "uniform attention")
    assert base.get_ydata()[0] == pytest.approx(2.5)
    plt.close(fig0)
    fig = plot_entropy(stats, uniform_entropy=1.0, column="cls_entropy")
    assert_close(_line(fig.axes[0], "heads (line: layer mean)").get_ydata(), stats["cls_entropy"].groupby(level="layer").mean(), F32)


def test_importance_lines():
    imp = pd.DataFrame({"cls": [np.nan] * L, "sep": [0.3, 0.2, 0.1], "punct": [0.1, 0.1, 0.1],
                        "other": [0.5, 0.4, 0.3]}, index=pd.RangeIndex(L, name="layer"))
    fig = plot_importance(imp)
    ax = fig.axes[0]
    labels = [line.get_label() for line in ax.get_lines()]
    assert labels == ["[SEP]", "punctuation", "other"]  # no [CLS] in the data: skipped
    assert_close(_line(ax, "[SEP]").get_ydata(), [0.3, 0.2, 0.1], F32)
    with pytest.raises(InputError):
        plot_importance(pd.DataFrame({"a": [1.0]}))


def test_head_clusters():
    stats = _stats()
    emb = pd.DataFrame(np.random.default_rng(1).normal(size=(L * H, 2)), index=stats.index,
                       columns=["x", "y"])
    beh = pd.Series(["other"] * (L * H), index=stats.index)
    beh.iloc[:3] = "[SEP]"
    fig = plot_head_clusters(emb, behaviours=beh, annotate={(0, 1): "det"})
    ax = fig.axes[0]
    assert sum(len(c.get_offsets()) for c in ax.collections) == L * H
    texts = [t.get_text() for t in ax.get_legend().get_texts()]
    assert texts == ["[SEP] (3)", "other (9)"]
    assert any(t.get_text() == "1-2 det" for t in ax.texts)
    fig = plot_head_clusters(emb, color_by="layer")
    assert len(fig.axes) == 2  # with a colour bar
    with pytest.raises(InputError, match="behaviours"):
        plot_head_clusters(emb)
    with pytest.raises(InputError):
        plot_special_attention(stats.reset_index())
