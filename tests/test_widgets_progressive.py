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
