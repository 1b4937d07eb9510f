"""Streaming reductions on lazy attention equal the dense ones, and never build all maps."""

import numpy as np
import pytest
from tolerances import assert_close, F32

pytest.importorskip("torch")

import attnkit as ak
from attnkit.core import blocks
from attnkit.core.headstats import item_stats
from attnkit.runtime.lazy import LazyAttention
from attnkit.testing import CORPUS, tiny_model

TEXT = CORPUS[2] + " " + CORPUS[4]


@pytest.fixture(scope="module", params=["llama", "bert", "mistral"])
def pair(request):
    model = tiny_model(request.param, heads=4, hidden=32, max_positions=128)
    return model.attend(TEXT, lazy=True), model.attend(TEXT, lazy=False)


@pytest.fixture()
def no_dense_maps(monkeypatch):
    """Fail if anything asks a LazyAttention for all its maps."""
    def refuse(self):
        raise AssertionError("a streaming reduction materialised [L, H, n, n]")

    monkeypatch.setattr(LazyAttention, "maps", property(refuse))
    monkeypatch.setattr(LazyAttention, "to_dense", refuse)


def test_row_bands_cover_the_map(pair):
    lazy, dense = pair
    for att in (lazy, dense):
        rebuilt = np.zeros((len(att), len(att)), np.float32)
        for rows, cols, block in blocks.row_bands(att, 1, 2, elements=3 * len(att)):
            assert block.shape == (rows.stop - rows.start, cols.stop - cols.start)
            rebuilt[rows, cols] = block
        assert_close(rebuilt, dense.map(1, 2), F32, scale=1)


def reference_stats(att):
    """The eight statistics in float64 from the whole dense maps at once, written
    independently of attnkit.core.headstats (which reads band by band in float32)."""
    maps = att.maps.astype(np.float64)
    L, H, n, _ = maps.shape
    out = np.zeros((L, H, 8))
    for col, positions in enumerate((att.cls_positions, att.sep_positions, np.flatnonzero(att.punct))):
        out[..., col] = maps[..., positions].sum(-1).mean(-1)
    i = np.arange(n)
    out[..., 3] = maps[..., i, i].mean(-1)
    out[..., 4] = maps[..., i[:-1], i[:-1] + 1].sum(-1) / n
    out[..., 5] = maps[..., i[1:], i[1:] - 1].sum(-1) / n
    ent = -(maps * np.log(np.where(maps > 0, maps, 1.0))).sum(-1)
    out[..., 6] = ent.mean(-1)
    out[..., 7] = ent[..., att.cls_positions[0]] if len(att.cls_positions) else np.nan
    return out


def test_head_stats_streamed(pair, no_dense_maps, monkeypatch):
    lazy, dense = pair
    want = reference_stats(dense)
    # float32 band sums against float64 whole-map sums: equal to float32 rounding
    assert_close(item_stats(dense), want, F32)
    # lazy weights are computed from Q/K, dense ones by the eager forward: float32 rounding
    assert_close(item_stats(lazy), want, F32, scale=1)
    monkeypatch.setattr(blocks, "BAND_ELEMENTS", 2 * len(lazy) + 1)  # bands of two rows
    # sums over bands of two rows, in another order than over whole heads: float32 rounding
    assert_close(item_stats(dense), want, F32)
    assert_close(item_stats(lazy), want, F32, scale=1)
    table = ak.head_stats([lazy])
    assert_close(table.to_numpy(), ak.head_stats([dense]).to_numpy(), F32, scale=1)


def test_word_level_stats_streamed(pair, no_dense_maps):
    lazy, dense = pair
    assert_close(item_stats(lazy.to_words()), item_stats(dense.to_words()), F32, scale=1)


def _same_edges(a, b):
    assert set(a.nodes) == set(b.nodes) and set(a.edges) == set(b.edges)
    for u, v, d in a.edges(data=True):
        assert d["heads"] == b.edges[u, v]["heads"]
        assert_close(d["weights"], b.edges[u, v]["weights"], F32, scale=1)


def test_attention_graph_and_influence_exact(pair, no_dense_maps):
    lazy, dense = pair
    threshold = 0.2
    gaps = np.abs(dense.maps - threshold)
    assert gaps.min() > 1e-4  # no weight so close to the threshold that rounding could flip it
    gl, gd = ak.attention_graph(lazy, threshold=threshold), ak.attention_graph(dense, threshold=threshold)
    assert gl.number_of_edges() > 10
    _same_edges(gl, gd)
    assert ak.influence(gl).equals(ak.influence(gd))
    heads = [(0, 1), (1, 3)]
    _same_edges(ak.attention_graph(lazy, threshold=threshold, heads=heads),
                ak.attention_graph(dense, threshold=threshold, heads=heads))


def test_rollout_of_head_averages(pair, no_dense_maps):
    lazy, dense = pair
    assert_close(ak.rollout(lazy), ak.rollout(dense), F32)
    assert_close(ak.rollout(lazy, all_layers=True),
                               ak.rollout(dense, all_layers=True), F32)
    assert_close(blocks.head_mean(lazy, 1), dense.maps[1].mean(0), F32)
