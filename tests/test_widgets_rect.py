"""Heatmap and HeadGrid of cross-attention: rectangular maps (target rows over source
columns) with hand-built cells, their tiles, thumbnails and static figures."""

from __future__ import annotations

import numpy as np
import pytest

import attnkit as ak
from attnkit.core.cross import CrossAttention
from attnkit.errors import InputError
from attnkit.plot import plot_heatmap
from attnkit.plot.common import downsample_max
from attnkit.widgets import _pyramid as pyr
from tolerances import assert_close, F32


def cross(t: int = 3, s: int = 5) -> CrossAttention:
    """1 layer x 2 heads; head 0: row i puts 0.75 on column (2 i) % s, the rest spread
    evenly; head 1 uniform."""
    maps = np.full((1, 2, t, s), 1 / s)
    maps[0, 0] = 0.25 / (s - 1)
    for i in range(t):
        maps[0, 0, i, (2 * i) % s] = 0.75
    tgt = [f"t{i}" for i in range(t)]
    src = [f"s{j}" for j in range(s - 1)] + ["</s>"]
    return CrossAttention(maps, tgt, ["word"] * t, list(range(t)), tgt, src,
                          ["word"] * (s - 1) + ["sep"], [*range(s - 1), -1], src[:-1])


def test_heatmap_of_a_rectangle_has_both_axes_and_exact_cells():
    c = cross()
    hm = ak.Heatmap(c)
    assert (hm.n, hm.n_cols) == (3, 5)
    assert hm.tokens == ["t0", "t1", "t2"] and hm.col_tokens == ["s0", "s1", "s2", "s3", "</s>"]
    assert hm.sinks == [0, 4] and hm.sink_names == "the first token and </s>"  # source columns
    np.testing.assert_array_equal(hm.matrix, c.maps[0, 0])
    np.testing.assert_array_equal(hm.overview, c.maps[0, 0])  # short: the map itself
    assert hm.pyramid["top"] == 0 and hm.top == pytest.approx(0.75)
    reply = hm.answer({"type": "tile", "layer": 0, "head": 0, "k": 0, "ti": 0, "tj": 0})
    assert reply["array"]["shape"] == [3, 5]
    assert "outside the map (3 x 5 bins)" in hm.answer(
        {"type": "tile", "layer": 0, "head": 0, "k": 0, "ti": 1, "tj": 0})["error"]
    rank = hm.answer({"type": "tile", "layer": 0, "head": 0, "k": 0, "ti": 0, "tj": 0, "what": "rank"})
    assert rank["array"]["shape"] == [3, 5]
    hm.show(0, 1)
    assert_close(hm.matrix, 0.2, F32)
    assert "target" in hm._alt_text() and "s3" in hm._alt_text()
    with pytest.raises(InputError, match=r"\[layer, head, 3, 5\]"):
        ak.Heatmap(c, maps=np.ones((3, 3)))
    own = ak.Heatmap(c, maps=np.full((3, 5), 0.5))
    np.testing.assert_array_equal(own.matrix, 0.5)


def test_long_source_tiles_pool_the_rectangle():
    c = cross(t=6, s=1100)
    hm = ak.Heatmap(c)
    k = hm.pyramid["top"]
    assert k == 2 and hm.overview.shape == (2, 275)  # ceil(6 / 4) x ceil(1100 / 4)
    m = c.maps[0, 0]
    # the overview is the max of each 4 x 4 bin (the last row bin partial)
    assert_close(hm.overview[0, 0], m[:4, :4].max(), F32)
    assert_close(hm.overview[1, 2], m[4:6, 8:12].max(), F32)
    # an exact tile of the second column band: columns 256..511 of every row
    reply = hm.answer({"type": "tile", "layer": 0, "head": 0, "k": 0, "ti": 0, "tj": 1})
    assert reply["array"]["shape"] == [6, 256]
    tile = pyr.tile(c, 0, 0, 6, 1, 0, 1, cols=1100)  # level 1: 2 x 2 bins
    assert tile.shape == (3, 256)
    assert_close(tile[0, 0], m[0:2, 512:514].max(), F32)
    ranks = pyr.rank_tile(c, 0, 0, 6, 0, 0, 0, sinks=np.array([0, 1099]), causal=False,
                          exclude_sinks=False, cols=1100)
    assert ranks.shape == (6, 256) and ranks[0, 0] == 1.0  # 0.75 is the top of row 0
    with pytest.raises(InputError, match="outside"):
        pyr.tile(c, 0, 0, 6, 0, 0, 5, cols=1100)


def test_tall_rectangle_tiles_are_what_its_view_draws():
    """1,100 target rows over 60 source columns: the overview pools 4 x 4 bins; the view,
    whose 60 columns are drawn wide (exact), asks for the exact tiles down the rows (one
    column band: 60 < 256) and pools their rows itself, as a wide view pools its columns."""
    rng = np.random.default_rng(3)
    maps = rng.random((1, 1, 1100, 60)) + 0.5
    maps /= maps.sum(-1, keepdims=True)
    tgt, src = [f"t{i}" for i in range(1100)], [f"s{j}" for j in range(60)]
    c = CrossAttention(maps, tgt, ["word"] * 1100, list(range(1100)), tgt, src, ["word"] * 60, list(range(60)), src)
    m = c.maps[0, 0]
    hm = ak.Heatmap(c)
    assert hm.pyramid["top"] == 2 and hm.overview.shape == (275, 15)  # ceil(1100 / 4) x ceil(60 / 4)
    assert_close(hm.overview[100, 14], m[400:404, 56:60].max(), F32)
    for ti, rows in ((0, slice(0, 256)), (2, slice(512, 768)), (4, slice(1024, 1100))):
        reply = hm.answer({"type": "tile", "layer": 0, "head": 0, "k": 0, "ti": ti, "tj": 0})
        got = np.frombuffer(reply["array"]["buffer"], dtype=np.float32).reshape(reply["array"]["shape"])
        assert got.shape == (rows.stop - rows.start, 60)
        assert_close(got, m[rows], F32)
    assert "outside the map (1100 x 60 bins)" in hm.answer(
        {"type": "tile", "layer": 0, "head": 0, "k": 0, "ti": 0, "tj": 1})["error"]


def test_head_grid_of_a_rectangle():
    c = cross(t=3, s=5)
    grid = ak.HeadGrid(c, progress=False)
    assert grid.thumbs["shape"] == [1, 2, 3, 5] and (grid.size, grid.size_cols) == (3, 5)
    assert (grid.n_tokens, grid.n_cols) == (3, 5)
    assert_close(grid._thumbs[0, 0], c.maps[0, 0], F32)
    assert "3 target \u00d7 5 source tokens" in grid.title
    long = ak.HeadGrid(cross(t=20, s=300), size=64, progress=False)
    assert long.thumbs["shape"] == [1, 2, 20, 64]
    assert_close(long._thumbs[0, 0], cross(t=20, s=300).pooled(0, 0, 64), F32)
    assert len(long.figure().axes) >= 1
    filled = ak.HeadGrid(c, progressive=True)
    assert filled.wait() and filled.thumbs["shape"] == [1, 2, 3, 5]


def test_static_figures_of_a_rectangle():
    c = cross()
    fig = plot_heatmap(c.maps[0, 0], c.tokens, col_tokens=c.col_tokens)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == c.col_tokens
    assert [t.get_text() for t in ax.get_yticklabels()] == c.tokens
    assert ax.get_ylabel() == "from (target)"
    with pytest.raises(InputError, match="square"):
        plot_heatmap(c.maps[0, 0], c.tokens)
    assert ak.Heatmap(c).to_png()[:4] == b"\x89PNG"
    # max-pooling a rectangle: 4 x 10 by blocks of 5 (the longer side over size 2)
    m = np.arange(40, dtype=float).reshape(4, 10)
    np.testing.assert_array_equal(downsample_max(m, 2, rectangular=True), [[34.0, 39.0]])  # row 3, cols 4 and 9
    np.testing.assert_array_equal(downsample_max(np.eye(4), 2), [[1.0, 0.0], [0.0, 1.0]])
    with pytest.raises(InputError, match="square"):
        downsample_max(m, 2)


def test_toy_reversal_cross_attention_in_the_views():
    """The shipped reversal T5: its anti-diagonal head's cells, read in the Heatmap."""
    from attnkit.toys.tasks import reversal_model, reversal_pairs

    model = reversal_model()
    source, target = reversal_pairs(1, seed=9_999)[0]
    c = model.attend(source, target).cross
    hm = ak.Heatmap(c, layer=1, head=0)
    assert hm.tokens == c.row_tokens and hm.col_tokens == c.col_tokens
    np.testing.assert_array_equal(hm.matrix, c.maps[1, 0])
    grid = ak.HeadGrid(c, progress=False)
    assert grid.thumbs["shape"][2:] == [len(c.row_tokens), len(c.col_tokens)]
