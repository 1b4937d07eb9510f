"""The tiled Heatmap: pyramid levels, tiles, row ranks, kernel answers, offline embedding, on
dense attention and on a lazy map computed from Q/K (tests/qk_attention.py)."""

from __future__ import annotations

import numpy as np
import pytest
from qk_attention import QKAttention

import attnkit
from attnkit.core import blocks
from attnkit.core.attention import pool_square
from attnkit.plot.common import row_ranks
from attnkit.widgets import HeadGrid, Heatmap
from attnkit.widgets import _pyramid as pyr
from attnkit.widgets._codec import read
from tolerances import assert_close, F16, F32


def dense(n: int, seed: int = 0, L: int = 1, H: int = 2) -> attnkit.Attention:
    rng = np.random.default_rng(seed)
    maps = rng.random((L, H, n, n)).astype(np.float32) ** 4
    maps /= maps.sum(-1, keepdims=True)
    return attnkit.Attention.from_maps(maps, ["[CLS]"] + [f"t{i}" for i in range(n - 2)] + ["[SEP]"])


class Stack:
    def __init__(self, m: np.ndarray) -> None:
        self.m = m

    def block(self, layer, head, rows, cols):
        return self.m[rows, cols]


def test_levels_and_sides():
    assert [pyr.top_level(n) for n in (1, 512, 513, 2048, 8192, 32768)] == [0, 0, 1, 2, 4, 6]
    assert pyr.side(1001, 3) == 126
    assert pyr.top_level(100, overview=16) == 3


def test_pool_known_values():
    a = np.arange(25, dtype=np.float32).reshape(5, 5)
    assert pyr.pool(a, 1, "max").tolist() == [[6, 8, 9], [16, 18, 19], [21, 23, 24]]
    assert_close(pyr.pool(a, 1, "mean"), [[3, 5, 6.5], [13, 15, 16.5], [20.5, 22.5, 24]], F32)
    signed = np.array([[0.1, -0.5], [0.2, 0.3]], dtype=np.float32)
    assert pyr.pool(signed, 1, "max", signed=True).tolist() == [[-0.5]]  # largest magnitude, sign kept
    assert pyr.pool(signed, 1, "max").tolist() == [[pytest.approx(0.3)]]


def test_overview_and_tiles_of_a_dense_map():
    n = 1000
    m = dense(n).maps[0, 1]
    src = Stack(m)
    ov = pyr.overview_bands(src, 0, 1, n, np.array([0, n - 1]), level=1, signed=True)
    assert ov is not None
    # bins of 2 x 2 cells: the same as attention.pool_square with n / 2 bins
    assert_close(ov.max, pool_square(m, 500, "max"), F32)
    assert_close(ov.mean, pool_square(m, 500, "mean"), F32)
    assert ov.top == pytest.approx(m.max()) and ov.top_nosink == pytest.approx(m[:, 1:-1].max())
    # level 0 tiles are blocks of the map; edge tiles are smaller
    np.testing.assert_array_equal(pyr.tile(src, 0, 1, n, 0, 1, 2), m[256:512, 512:768])
    assert pyr.tile(src, 0, 1, n, 0, 3, 3).shape == (1000 - 768, 1000 - 768)
    # level 1 tile (1, 0): bins 256..500 of rows, 0..256 of columns = cells 512..1000, 0..512
    assert_close(pyr.tile(src, 0, 1, n, 1, 1, 0, reduce="mean"), ov.mean[256:500, 0:256], F32)
    with pytest.raises(attnkit.errors.InputError, match="outside"):
        pyr.tile(src, 0, 1, n, 0, 4, 0)


def test_rank_tiles_are_row_ranks_of_the_level():
    m = np.array([[0.5, 0.3, 0.2, 0.0], [0.1, 0.6, 0.3, 0.0], [0.25, 0.25, 0.25, 0.25], [0.4, 0.3, 0.2, 0.1]], dtype=np.float32)
    src = Stack(m)
    r = pyr.rank_tile(src, 0, 0, 4, 0, 0, 0, sinks=np.array([0]), causal=False, exclude_sinks=False)
    assert r[0].tolist() == [1.0, pytest.approx(2 / 3), pytest.approx(1 / 3), 0.0]
    assert r[2].tolist() == [0.5] * 4  # four ties share the middle rank
    # causal: cells above the diagonal have no rank; the sink column drawn at the top
    r = pyr.rank_tile(src, 0, 0, 4, 0, 0, 0, sinks=np.array([0]), causal=True, exclude_sinks=True)
    assert np.isnan(r[1, 2]) and r[1, 0] == 1.0 and r[1, 1] == 1.0  # [1, 1] is the only ranked cell
    assert_close(r[3], [1.0, 1.0, 0.5, 0.0], F32)
    # the same rule as the static figure's
    assert_close(row_ranks(m[3:4, 1:]), [[1.0, 0.5, 0.0]], F32)


def test_heatmap_on_lazy_attention_reads_strips_only():
    att = QKAttention(2048, n_layers=2, n_heads=2, seed=1)
    hm = Heatmap(att, layer=1, head=0)
    assert hm.causal and hm.scale == "log" and hm.exclude_sinks  # decoder defaults
    assert hm.sinks == [0] and hm.sink_names == "<s>"
    assert hm.pyramid == {"top": 2, "size": 256} and hm.overview_max["shape"] == [512, 512]
    assert hm.overview_max["dtype"] == "float16" and "scale" in hm.overview_max
    full = att.map(1, 0)
    assert_close(read(hm.overview_max), pool_square(full, 512, "max"), F16)
    assert hm.top_nosink == pytest.approx(full[:, 1:].max(), rel=1e-6)
    assert att.largest_read <= blocks.BAND_ELEMENTS  # never a whole 2048 x 2048 map at once
    # a tile request, as the browser sends it: exact weights of rows 512..768, columns 256..512
    reply = hm.answer({"id": 7, "type": "tile", "layer": 1, "head": 0, "k": 0, "ti": 2, "tj": 1, "reduce": "max", "what": "value"})
    assert reply["id"] == 7 and "error" not in reply
    # the tile is computed from its own block of logits, the full map from all of them: the
    # matrix products may round differently by CPU (up to 1.9e-8 seen on an AMD EPYC), so
    # equal to float32 rounding of weights at most 1, not to the bit
    assert_close(read(reply["array"]), full[512:768, 256:512], F32)
    # causal: the upper triangle is empty in every tile
    up = read(hm.answer({"type": "tile", "layer": 1, "head": 0, "k": 1, "ti": 0, "tj": 1, "reduce": "max"})["array"])
    assert up.shape == (256, 256) and up.max() == 0
    bad = hm.answer({"type": "tile", "layer": 1, "head": 0, "k": 9, "ti": 0, "tj": 0})
    assert "outside" in bad["error"]
    bad = hm.answer({"type": "tile", "layer": 5, "head": 0, "k": 0, "ti": 0, "tj": 0})
    assert "0-indexed" in bad["error"]


def test_heatmap_matches_dense_and_lazy_on_the_same_map():
    lazy = QKAttention(600, n_layers=1, n_heads=1, seed=3)
    maps = lazy.map(0, 0)[None, None]
    dense_att = attnkit.Attention.from_maps(maps, lazy.tokens, roles=list(lazy.roles), causal=True)
    a, b = Heatmap(lazy), Heatmap(dense_att)
    np.testing.assert_array_equal(read(a.overview_max), read(b.overview_max))
    q = {"type": "tile", "layer": 0, "head": 0, "k": 0, "ti": 1, "tj": 0, "reduce": "max", "what": "rank", "exclude": True}
    np.testing.assert_array_equal(read(a.answer(q)["array"]), read(b.answer(q)["array"]))


def test_offline_copies_embed_levels_within_the_budget(monkeypatch):
    att = dense(2048, L=1, H=1)
    hm = Heatmap(att, embed=2_200_000)
    # overview = level 2 (512); level 1 (1024^2 float16 = 2.1 MB) fits, level 0 (16.8 MB float32) does not
    assert {e["k"] for e in hm.embedded} == {1} and len(hm.embedded) == 16
    assert "2\u00d72 tokens per cell" in hm.embed_note and "kernel" in hm.embed_note
    e = next(e for e in hm.embedded if (e["ti"], e["tj"]) == (1, 2))
    np.testing.assert_allclose(read(e["array"]), pool_square(att.maps[0, 0], 1024, "max")[256:512, 512:768], rtol=2e-3)
    assert Heatmap(att).embedded == []  # none unless asked (or ATTNKIT_EMBED_BYTES is set)
    monkeypatch.setenv("ATTNKIT_EMBED_BYTES", "20000000")
    everything = Heatmap(dense(600, L=1, H=1))
    assert everything.embed_note == "every cell embedded" and {e["k"] for e in everything.embedded} == {0}


def test_headgrid_on_lazy_attention_uses_pooled_heads(monkeypatch):
    monkeypatch.setattr(blocks, "BAND_ELEMENTS", 64 * 1000)  # bands of 64 rows
    att = QKAttention(1000, n_layers=3, n_heads=2, seed=2)
    grid = HeadGrid(att, size=64, progress=False)
    assert grid.size == 64 and grid.causal and grid.scale == "log" and grid.exclude_sinks
    assert att.largest_read <= 64 * 1000  # one band at a time, never a whole map
    want = np.stack([np.stack([att.pooled(l, h, 64) for h in range(2)]) for l in range(3)])
    # the same pooled weights, from bands of exp(logits - lse) here and normalised row strips
    # in att.pooled: equal to float32 rounding
    assert_close(grid._thumbs, want, F32)
    assert_close(read(grid.head_max), want.max(axis=(2, 3)), F32)


def test_report_kernels_get_an_embedding_budget(monkeypatch):
    import os

    from attnkit.apps import report

    monkeypatch.delenv("ATTNKIT_EMBED_BYTES", raising=False)
    with report._embedding_budget():
        assert os.environ["ATTNKIT_EMBED_BYTES"] == str(report.EMBED_BYTES)
    assert "ATTNKIT_EMBED_BYTES" not in os.environ
    monkeypatch.setenv("ATTNKIT_EMBED_BYTES", "123")
    with report._embedding_budget():
        assert os.environ["ATTNKIT_EMBED_BYTES"] == "123"  # the user's choice stands


def test_views_on_a_real_lazy_capture_match_the_dense_one():
    from attnkit.testing import tiny_model
    from attnkit.widgets import FlowView

    model = tiny_model("llama", heads=4, kv_heads=2, max_positions=256)
    text = " ".join(["The cat sat on the mat."] * 12)
    lazy, dense = model.attend(text, lazy=True), model.attend(text)
    assert type(lazy).__name__ == "LazyAttention" and len(lazy) > 100
    a, b = Heatmap(lazy, layer=1, head=2), Heatmap(dense, layer=1, head=2)
    assert_close(read(a.overview_max), read(b.overview_max), F32, scale=1)
    q = {"type": "tile", "layer": 1, "head": 2, "k": 0, "ti": 0, "tj": 0, "reduce": "max"}
    assert_close(read(a.answer(q)["array"]), dense.maps[1, 2, :, :], F32, scale=1)
    g1, g2 = HeadGrid(lazy, progress=False), HeadGrid(dense, progress=False)
    assert_close(read(g1.head_max), read(g2.head_max), F32, scale=1)
    f1, f2 = FlowView(lazy, threshold=0.2), FlowView(dense, threshold=0.2)
    assert set(f1.graph.edges) == set(f2.graph.edges)


def test_views_read_in_worker_threads_match_the_dense_maps(band_workers, monkeypatch):
    """Issue 28: outside a kernel, long lazy maps are read in worker threads (torch on one
    thread each) for Heatmap and HeadGrid; their numbers are the eager maps'."""
    from attnkit.testing import tiny_model

    model = tiny_model("llama", heads=4, kv_heads=2, max_positions=640)
    text = " ".join(["The cat sat on the mat."] * 45)
    lazy, dense = model.attend(text, lazy=True), model.attend(text)
    n = len(lazy)
    assert n > 512  # a pooled overview (level 1)
    monkeypatch.setattr(blocks, "BAND_ELEMENTS", 32 * n)  # bands of 32 rows: many per head
    hm = Heatmap(lazy, layer=1, head=2)
    grid = HeadGrid(lazy, progress=False)
    assert any(name.startswith("attnkit-bands") for name in band_workers)
    full = dense.maps[1, 2]
    assert hm.pyramid["top"] == 1
    assert_close(read(hm.overview_max), pool_square(full, hm.overview_max["shape"][0], "max"), F16)
    assert_close(hm.top_nosink, full[:, 1:].max(), F32, scale=1)
    want = np.stack([np.stack([dense.pooled(l, h, grid.size) for h in range(4)]) for l in range(2)])
    assert_close(grid._thumbs, want, F32, scale=1)
    assert_close(read(grid.head_max), want.max(axis=(2, 3)), F32, scale=1)


def test_views_say_which_measure_they_show():
    """The views carry the maps' measure in their state (a measure switch can set it)."""
    from attnkit.widgets import FlowView

    att = dense(12, L=2)
    assert Heatmap(att).measure == HeadGrid(att).measure == FlowView(att).measure == "weights"
    assert Heatmap(att).value_label == "attention"
    norm = attnkit.Attention.from_maps(att.maps * 3.0, list(att.tokens), measure="norm")
    hm = Heatmap(norm)
    assert (hm.measure, hm.value_label, HeadGrid(norm).measure) == ("norm", "norm", "norm")


class CountingQK(QKAttention):
    """QKAttention that counts the cells its blocks compute."""

    cells = 0

    def block(self, layer, head, rows, cols):
        out = super().block(layer, head, rows, cols)
        self.cells += out.size
        return out


def test_heatmap_and_headgrid_read_each_head_once():
    att = CountingQK(700, n_layers=2, n_heads=2, seed=4)  # overview level 1: a pooled overview
    grid = HeadGrid(att, progress=False)
    read_by_grid = att.cells
    assert 0 < read_by_grid <= 4 * 700 * 700  # causal: about half of every map
    hm = Heatmap(att, layer=1, head=1)  # its overview was read with the grid's thumbnails
    hm.show(0, 1)
    assert att.cells == read_by_grid
    full = att.map(0, 1)
    assert_close(read(hm.overview_max), pyr.pool(full, 1, "max"), F16)
    # the other way round: the grid does not read the heatmap's head again
    other = CountingQK(700, n_layers=2, n_heads=2, seed=4)
    Heatmap(other, layer=0, head=0)
    again = HeadGrid(other, progress=False)
    assert other.cells == read_by_grid
    np.testing.assert_array_equal(again._thumbs, grid._thumbs)
