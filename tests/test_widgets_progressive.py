"""HeadGrid filling in from a worker thread (issue 19): the same state as a grid built whole,
heads pushed one by one (the largest metric first), a cancel leaving a consistent state."""

from __future__ import annotations

import threading

import numpy as np
from qk_attention import QKAttention

from attnkit.widgets import HeadGrid
from attnkit.widgets._codec import read
from attnkit.widgets.headgrid import _order


def test_filled_in_grid_equals_the_one_built_whole(monkeypatch):
    att = QKAttention(96, n_layers=2, n_heads=3, seed=4)
    metric = np.array([[0.1, 0.9, np.nan], [0.5, 0.2, 0.7]])
    sent = []
    monkeypatch.setattr(HeadGrid, "send", lambda self, content, buffers=None: sent.append(content))
    grid = HeadGrid(att, metric=metric, progressive=True)
    assert grid.wait(timeout=60)
    whole = HeadGrid(att, metric=metric, progressive=False, progress=False)
    assert grid.computing == "done" and grid.ready == {}
    assert read(grid.thumbs).tolist() == read(whole.thumbs).tolist()
    assert read(grid.head_max).tolist() == read(whole.head_max).tolist()
    # one push per head, the largest metric first, NaN last
    assert [(c["layer"], c["head"]) for c in sent] == [(0, 1), (1, 2), (1, 0), (1, 1), (0, 0), (0, 2)]
    assert [c["done"] for c in sent] == list(range(1, 7)) and {c["total"] for c in sent} == {6}
    assert all(c["type"] == "push" and c["what"] == "thumb" for c in sent)


def test_cancel_leaves_the_heads_computed(monkeypatch):
    att = QKAttention(64, n_layers=2, n_heads=2, seed=1)
    gate = threading.Event()

    def send(self, content, buffers=None):  # the first head is done: cancel, then let it go on
        self.cancel()
        gate.set()

    monkeypatch.setattr(HeadGrid, "send", send)
    grid = HeadGrid(att, progressive=True)
    assert gate.wait(30)
    assert not grid.wait(timeout=30)
    assert grid.computing == "stopped: cancelled"
    ready = read(grid.ready)
    assert ready.tolist() == [[1, 0], [0, 0]]
    codes = read(grid.thumbs)
    assert codes[0, 0].any() and not codes[1].any()  # computed heads drawn, the others blank


def test_order_without_metric_is_layer_by_layer():
    assert _order(2, 2, None) == [(0, 0), (0, 1), (1, 0), (1, 1)]


# ------------------------------------------------- Heatmap: the overview band by band
def test_heatmap_filled_in_band_by_band_equals_the_one_read_whole(monkeypatch):
    """Rows of bins pushed in order, covering the overview once; the state at the end is the
    one a Heatmap read whole has (a fresh attention: nothing shared through the cache)."""
    from attnkit.widgets import Heatmap

    sent = []
    monkeypatch.setattr(Heatmap, "send", lambda self, content, buffers=None: sent.append(content))
    hm = Heatmap(QKAttention(4096, n_layers=1, n_heads=2, seed=7), head=1, progressive=True)
    assert hm.wait(timeout=120) and hm.computing == "done"
    whole = Heatmap(QKAttention(4096, n_layers=1, n_heads=2, seed=7), head=1, progressive=False)
    m = read(whole.overview_max).shape[0]
    assert hm.rows_ready == whole.rows_ready == m == 512
    bands = [(c["row0"], c["row1"]) for c in sent if c["what"] == "band"]
    assert len(bands) >= 2 and bands[0][0] == 0 and bands[-1][1] == m
    assert all(a[1] == b[0] for a, b in zip(bands, bands[1:]))  # contiguous, in order
    assert {(c["layer"], c["head"]) for c in sent} == {(0, 1)}
    for name in ("overview_max", "overview_mean"):
        assert read(getattr(hm, name)).tolist() == read(getattr(whole, name)).tolist()
    assert (hm.top, hm.top_nosink, hm.title) == (whole.top, whole.top_nosink, whole.title)


def test_heatmap_cancel_leaves_the_rows_read_and_nothing_kept(monkeypatch):
    from attnkit.core import blocks
    from attnkit.widgets import Heatmap

    att = QKAttention(4096, n_layers=1, n_heads=1, seed=2)
    first = []

    def send(self, content, buffers=None):  # the first band is there: cancel
        first.append(content)
        self.cancel()

    monkeypatch.setattr(Heatmap, "send", send)
    hm = Heatmap(att, progressive=True)
    assert not hm.wait(timeout=60)
    assert hm.computing == "stopped: cancelled" and len(first) == 1
    r1 = first[0]["row1"]
    assert hm.rows_ready == r1 < 512
    got = read(hm.overview_max)
    whole = Heatmap(QKAttention(4096, n_layers=1, n_heads=1, seed=2), progressive=False)
    assert got[:r1].tolist() == read(whole.overview_max)[:r1].tolist()  # the rows read
    assert np.isnan(got[r1:]).all()  # the rest blank, not zero
    assert blocks._cached(att, 0, 0) == {}  # a stopped pass keeps nothing


def test_heatmap_head_change_while_filling_in_shows_the_new_head(monkeypatch):
    from attnkit.widgets import Heatmap

    att = QKAttention(4096, n_layers=1, n_heads=2, seed=9)
    sent = []
    monkeypatch.setattr(Heatmap, "send", lambda self, content, buffers=None: sent.append(content))
    hm = Heatmap(att, progressive=True)
    hm.show(0, 1)  # the first head's pass stops, the second's starts
    assert hm.wait(timeout=120) and (hm.layer, hm.head) == (0, 1) and hm.computing == "done"
    whole = Heatmap(QKAttention(4096, n_layers=1, n_heads=2, seed=9), head=1, progressive=False)
    assert read(hm.overview_max).tolist() == read(whole.overview_max).tolist()
    heads = [c["head"] for c in sent]
    assert heads[-1] == 1 and heads == sorted(heads)  # no push of head 0 after head 1's


def test_heatmap_and_headgrid_read_each_head_once(monkeypatch):
    """The band-by-band pass is the one-pass reader's: a HeadGrid after it reads nothing."""
    from attnkit.widgets import Heatmap

    att = QKAttention(4096, n_layers=1, n_heads=2, seed=5)
    monkeypatch.setattr(Heatmap, "send", lambda self, content, buffers=None: None)
    hm = Heatmap(att, progressive=True)
    assert hm.wait(timeout=120)
    reads = []
    block = att.block
    monkeypatch.setattr(att, "block", lambda layer, head, rows, cols: reads.append(head) or block(layer, head, rows, cols))
    HeadGrid(att, progressive=False, progress=False)
    assert 0 not in reads and 1 in reads  # head 0 kept from the Heatmap's pass; head 1 read now
