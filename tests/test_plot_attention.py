"""Matplotlib twins of the widgets."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure

from attnkit.errors import InputError
from attnkit.plot import attention as plots
from attnkit.plot.common import display_token, label_stride, mpl_text


def render(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=50)
    return buf.getvalue()


def test_heatmap_labels_every_token_when_short_and_strides_when_long():
    tokens = ["[CLS]", "$5", "$x$", "\u0120the", "[SEP]"]
    fig = plots.plot_heatmap(np.eye(5) * 0.5 + 0.1, tokens, title="t")
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == ["[CLS]", r"\$5", r"\$x\$", "\u00b7the", "[SEP]"]
    assert ax.get_ylabel() == "from (query)" and ax.get_xlabel() == "to (key)"
    assert render(fig)[:4] == b"\x89PNG"
    long = plots.plot_heatmap(np.full((200, 200), 1 / 200), [f"w{i}" for i in range(200)], max_labels=64)
    assert len(long.axes[0].get_xticks()) == 40  # every 5th


def test_heatmap_scales():
    m = np.array([[0.2, -0.4], [0.1, 0.0]])
    im = plots.plot_heatmap(m, ["a", "b"]).axes[0].images[0]
    assert (im.norm.vmin, im.norm.vmax) == (-0.4, 0.4) and im.get_cmap().name == "RdBu_r"
    im = plots.plot_heatmap(np.abs(m), ["a", "b"]).axes[0].images[0]
    assert (im.norm.vmin, im.norm.vmax) == (0.0, 0.4) and im.get_cmap().name == "Blues"
    with pytest.raises(InputError, match="tokens"):
        plots.plot_heatmap(m, ["a"])
    with pytest.raises(InputError, match="square"):
        plots.plot_heatmap(np.zeros((2, 3)), ["a", "b"])


def test_head_grid_labels_every_head():
    maps = np.random.default_rng(0).random((3, 4, 6, 6))
    fig = plots.plot_head_grid(maps, metric=np.arange(12.0).reshape(3, 4), metric_name="entropy")
    ax = fig.axes[0]
    texts = {t.get_text() for t in ax.texts}
    assert {f"{l}-{h}" for l in range(1, 4) for h in range(1, 5)} <= texts
    assert len(fig.axes) == 2  # grid + metric colour bar
    mosaic = ax.images[0].get_array()
    assert np.nanmax(mosaic) == pytest.approx(1.0)  # per-head scaling
    assert render(fig)[:4] == b"\x89PNG"
    with pytest.raises(InputError):
        plots.plot_head_grid(maps, metric=np.zeros((4, 3)))


def test_head_map_and_cluster_scatter():
    idx = pd.MultiIndex.from_tuples([(0, 0), (1, 1)], names=["layer", "head"])
    fig = plots.plot_head_map(pd.DataFrame({"acc": [0.25, 0.75]}, index=idx))
    ax = fig.axes[0]
    assert sorted(t.get_text() for t in ax.texts) == ["0.25", "0.75"]  # blanks have no text
    assert render(fig)[:4] == b"\x89PNG"
    emb = np.array([[0, 0], [1, 1], [2, 0]], dtype=float)
    fig = plots.plot_cluster_scatter(emb, heads=[(0, 0), (0, 1), (1, 0)], labels=["b", "a", "b"],
                                     label_name="kind")
    legend = fig.axes[0].get_legend()
    assert [t.get_text() for t in legend.get_texts()] == ["a", "b"]
    assert render(fig)[:4] == b"\x89PNG"
    with pytest.raises(InputError):
        plots.plot_cluster_scatter(emb, heads=[(0, 0)])
    with pytest.raises(InputError, match="heads="):
        plots.plot_cluster_scatter(emb)
    # an embed_heads() table carries its heads
    table = pd.DataFrame(emb, columns=["x", "y"],
                         index=pd.MultiIndex.from_tuples([(0, 0), (0, 1), (1, 0)], names=["layer", "head"]))
    assert len(plots.plot_cluster_scatter(table).axes[0].texts) == 3
    # the old spelling (layers and heads of the points, positionally) for one release
    with pytest.warns(DeprecationWarning, match="heads="):
        old = plots.plot_cluster_scatter(emb, [0, 0, 1], [0, 1, 0])
    assert [t.get_text() for t in old.axes[0].texts] == ["1-1", "1-2", "2-1"]


def test_text_helpers():
    assert mpl_text("$5 and $6") == r"\$5 and \$6"
    assert display_token("\u2581x") == "\u00b7x" and display_token("") == "\u2205"
    assert [label_stride(n, 64) for n in (64, 65, 200, 512, 1000)] == [1, 2, 5, 10, 20]
