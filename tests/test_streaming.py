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


def test_passes_in_worker_threads_equal_the_dense_maps(pair, no_dense_maps, band_workers, monkeypatch):
    """Bands read in worker threads (issue 28: the views at long context) give what the dense
    maps give, and the caller's torch threads stay as they were."""
    import threading

    import torch

    from attnkit.core.attention import pool_edges

    lazy, dense = pair
    n = len(lazy)
    monkeypatch.setattr(blocks, "BAND_ELEMENTS", 4 * n)  # bands of four rows, one head each
    grid, pool, ends = blocks.GridPool(2), blocks.EdgePool(5), blocks.Extremes((0,))
    got = blocks.summarize(lazy, 1, range(4), [grid, pool, ends], cache=False)
    assert any(name.startswith("attnkit-bands") for name in band_workers)  # read in the workers
    for h in range(4):
        full = dense.maps[1, h].astype(np.float64)
        # level 2: bins of 4 x 4 cells from the origin, the last ones partial
        cut = np.r_[np.arange(0, n, 4), n]
        sizes = np.diff(cut)
        hi = np.maximum.reduceat(np.maximum.reduceat(full, cut[:-1], axis=0), cut[:-1], axis=1)
        lo = np.minimum.reduceat(np.minimum.reduceat(full, cut[:-1], axis=0), cut[:-1], axis=1)
        mean = np.add.reduceat(np.add.reduceat(full, cut[:-1], axis=0), cut[:-1], axis=1) / sizes[:, None] / sizes
        p = got[h][grid.key]
        # lazy weights from Q/K, dense ones from the eager forward: float32 rounding
        assert_close(p.max, hi, F32, scale=1)
        assert_close(p.min, lo, F32, scale=1)
        assert_close(p.mean, mean, F32, scale=1)
        e = pool_edges(n, 5)
        thumb = np.maximum.reduceat(np.maximum.reduceat(full, e[:-1], axis=0), e[:-1], axis=1)
        assert_close(got[h][pool.key], thumb, F32, scale=1)
        b = got[h][ends.key]  # causal: the zeros above the diagonal are the smallest values
        assert_close([b.max, b.min, b.max_nosink, b.min_nosink], [full.max(), 0, full[:, 1:].max(), 0], F32, scale=1)
    assert_close(item_stats(lazy), reference_stats(dense), F32, scale=1)
    # the caller's thread count is its own again, and a thread started now gets the same
    assert torch.get_num_threads() == 2
    fresh: list[int] = []
    t = threading.Thread(target=lambda: fresh.append(torch.get_num_threads()))
    t.start()
    t.join()
    assert fresh == [2]


def test_a_pass_in_worker_threads_tells_every_band_in_order(pair, band_workers, monkeypatch):
    lazy, dense = pair
    n = len(lazy)
    monkeypatch.setattr(blocks, "BAND_ELEMENTS", 3 * n)  # bands of three rows
    seen = []

    def each_band(band, so_far):
        seen.append((band.heads, band.span.start))
        # the rows read so far are complete: the largest value of the head up to here
        upto = dense.maps[0, band.heads[0], :band.span.stop]
        assert_close(so_far(blocks.Extremes().key)[0].max, upto.max(), F32, scale=1)
        return True

    blocks.summarize_bands(lazy, 0, [2], [blocks.Extremes()], each_band, cache=False)
    assert seen == [((2,), a) for a in range(0, n, 3)]
    stopped = []
    out = blocks.summarize_bands(lazy, 0, [2], [blocks.Extremes()],
                                 lambda band, so_far: stopped.append(band.span.start) or len(stopped) < 2,
                                 cache=False)
    assert out is None and stopped == [0, 3]  # stopped after the second band
