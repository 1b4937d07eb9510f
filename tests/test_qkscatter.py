"""QKScatter's wire format: float16 positions and uint8 colour codes (5 bytes a point); in
the matrix view the points go panel by panel with one count a panel, and every index the
front end sends back (hover, click, lasso) still names the right row of the table."""

from __future__ import annotations

import json

import numpy as np
import pytest
import pandas as pd

import attnkit as ak
from attnkit.analysis import QKEmbedding
from attnkit.core.results import HeadResult
from attnkit.widgets._codec import read


def _embedding(heads, per_head: int, seed: int = 0) -> QKEmbedding:
    """``per_head`` points of each head, the heads' rows interleaved in the table (not grouped),
    x = a number unique to each row so a point can be traced back."""
    rng = np.random.default_rng(seed)
    rows = [(l, h, i) for i in range(per_head) for (l, h) in heads]
    order = rng.permutation(len(rows))
    lh = np.asarray([rows[i][:2] for i in order])
    n = len(rows)
    table = pd.DataFrame({"layer": lh[:, 0], "head": lh[:, 1], "item": 0, "position": np.arange(n) % 7,
                          "token": "w", "role": "word", "kind": np.where(np.arange(n) % 2, "key", "query"),
                          "x": np.arange(n, dtype=float), "y": rng.normal(size=n)})
    faith = HeadResult(pd.DataFrame({"spearman": 0.0}, index=pd.MultiIndex.from_tuples(heads, names=["layer", "head"])))
    return QKEmbedding(table, {"heads": [list(h) for h in heads], "method": "synthetic", "dims": 2}, faithfulness=faith)


def _payload(view) -> tuple[int, int]:
    """(bytes of binary buffers, bytes of the JSON of everything else) in the view's state."""
    binary = 0

    def walk(v):
        nonlocal binary
        if isinstance(v, (bytes, bytearray, memoryview)):
            binary += len(v)
            return None
        if isinstance(v, dict):
            return {k: walk(x) for k, x in v.items()}
        if isinstance(v, list):
            return [walk(x) for x in v]
        return v

    plain = {k: walk(v) for k, v in view.get_state().items() if k not in ("_esm", "_css")}
    return binary, len(json.dumps(plain))


def test_matrix_points_go_panel_by_panel_with_counts():
    heads = [(0, 0), (0, 1), (1, 0), (1, 1), (2, 1)]
    emb = _embedding(heads, per_head=30)
    view = ak.QKScatter(emb, mode="matrix")
    counts = read(view.panels)
    assert counts.dtype == np.uint32 and counts.tolist() == [30] * 5
    # point i of the picture (what a lasso, click or hover names) is a row of the head whose
    # panel the counts put it in, and the positions are each panel's own points fitted
    # into [-0.95, 0.95]
    view.select(range(view.n_points))
    drawn = view.selected
    ends = np.cumsum(counts)
    pts = read(view.points).astype(np.float64)
    for p, (lo, hi) in enumerate(zip(ends - counts, ends)):
        mine = drawn.iloc[lo:hi]
        assert set(zip(mine["layer"], mine["head"])) == {heads[p]}
        x, y = mine["x"].to_numpy(), mine["y"].to_numpy()
        span = max(np.ptp(x), np.ptp(y))
        np.testing.assert_allclose(pts[lo:hi, 0], (x - (x.min() + x.max()) / 2) / span * 1.9, atol=2e-3)  # float16
    assert sorted(drawn["x"]) == list(range(150))  # every point once


def test_five_bytes_a_point_in_both_views():
    heads = [(l, h) for l in range(12) for h in range(12)]
    emb = _embedding(heads, per_head=700)
    for mode in ("head", "matrix"):
        view = ak.QKScatter(emb, mode=mode)
        binary, plain = _payload(view)
        extra = 4 * len(heads) if mode == "matrix" else 0  # one uint32 count a panel
        assert binary == 5 * view.n_points + extra
        assert plain < 4000  # names, colours, the heads' labels: not per point
    # 100,800 points of 144 heads: at most 6 bytes a point with everything counted
    assert (binary + plain) / view.n_points < 5.1


def test_the_byte_budget_samples_and_selection_maps_back():
    heads = [(0, 0), (0, 1)]
    emb = _embedding(heads, per_head=400)
    view = ak.QKScatter(emb, mode="matrix", max_bytes=5 * 300)
    assert view.n_points == 300 and view.n_total == 800
    assert int(read(view.panels).sum()) == 300
    view.select([0, 299])
    sel = view.selected
    assert len(sel) == 2 and sel.iloc[0]["head"] == 0 and sel.iloc[1]["head"] == 1


def test_position_bins_do_not_overlap():
    """``color_by="position"`` names each bin by the first and last position it holds: no
    position is in two labels ("0–2, 2–5" put 2 in both; issue 28), every position's label
    holds it, and non-integer columns get half-open bins."""
    import pandas as pd

    from attnkit.widgets.qkscatter import _categories

    positions = pd.Series(np.tile(np.arange(25), 3))
    codes, cats, colors = _categories(positions, "position")
    assert cats[-1] == "missing" and len(colors) == len(cats)
    spans = [tuple(int(v) for v in c.split("–")) if "–" in c else (int(c), int(c)) for c in cats[:-1]]
    covered = [p for lo, hi in spans for p in range(lo, hi + 1)]
    assert covered == list(range(25))  # each position in exactly one bin, bins in order
    for p, code in zip(positions, codes):
        lo, hi = spans[code]
        assert lo <= p <= hi
    _, cats, _ = _categories(pd.Series(np.linspace(0.0, 1.0, 50)), "score")
    assert cats[0] == "[0, 0.1)" and cats[-2] == "[0.9, 1]"


# ------------------------------------------------------------------ the view at corpus scale
TEXTS = ["The cat sat on the mat.", "We read it.", "A dog barked twice at night.", "Many more words are here now."]


def _no_table(monkeypatch):
    """Make any attempt to build an embedding's whole table fail the test."""
    def boom(self):
        raise AssertionError("the embedding's whole table was made")
    monkeypatch.setattr(QKEmbedding, "_make_table", boom)


def test_wire_buffers_are_the_embeddings_arrays(monkeypatch):
    """The points and colour codes sent are the embedding's own columns (float16 positions
    fitted into the view, query/key codes), and no table of the points is made for them."""
    from attnkit.testing import tiny_model
    from attnkit.widgets.qkscatter import _normalised
    from tolerances import F16, assert_close

    emb = ak.qk_embedding([tiny_model("gpt2").attend(t) for t in TEXTS], method="pca", progress=False)
    _no_table(monkeypatch)
    view = ak.QKScatter(emb, layer=1, head=0)
    rows = emb.head_rows(1, 0)
    assert view.n_points == len(rows) == 2 * sum(len(emb.tokens(i)) for i in range(len(TEXTS)))
    xy = np.stack([emb.column("x", rows), emb.column("y", rows)], axis=1)
    assert_close(read(view.points), _normalised(xy), F16, scale=1)
    assert read(view.codes).tolist() == (emb.column("kind", rows) == "key").astype(int).tolist()
    # the matrix: every point once, panel by panel, each panel's own arrays
    view.mode = "matrix"
    counts = read(view.panels)
    ends = np.cumsum(counts)
    pts = read(view.points)
    for p, (lo, hi) in enumerate(zip(ends - counts, ends)):
        mine = emb.head_rows(*emb.meta["heads"][p])
        xy = np.stack([emb.column("x", mine), emb.column("y", mine)], axis=1)
        assert_close(pts[lo:hi], _normalised(xy), F16, scale=1)
    view.color_by = "token"  # a label column looked up from the inputs, for the drawn points only
    top = pd.Series(emb.column("token")).value_counts()
    assert top[view.categories[0]] == top.iloc[0] and set(view.categories) - {"other"} <= set(top.index)
    assert view.point(0)["token"] == emb.tokens(0)[0]


def test_selection_rows_are_the_tables_rows(monkeypatch):
    """``selected`` holds the selected points' rows; their table (made when read) is the
    embedding's table at those rows, and a big selection makes no table until read."""
    from attnkit.testing import tiny_model

    emb = ak.qk_embedding([tiny_model("bert").attend(t) for t in TEXTS], method="pca", progress=False)
    view = ak.QKScatter(emb, mode="matrix")
    ids = np.arange(0, view.n_points, 3)
    view.select(ids)
    with monkeypatch.context() as m:
        _no_table(m)
        sel = view.selected
        assert len(sel) == len(ids) and sorted(sel.rows.tolist()) == sorted(set(sel.rows.tolist()))
        tokens = sel.column("token")
        got = sel.table  # the selected rows alone, made here
    want = emb.table.iloc[sel.rows]
    pd.testing.assert_frame_equal(got, want)
    assert tokens.tolist() == want["token"].tolist()
    assert sel[["kind", "position"]].values.tolist() == want[["kind", "position"]].values.tolist()
    assert sel.meta["n_points"] == len(ids)
    # the same rows from a table built by hand (the DataFrame constructor still works)
    again = QKEmbedding(emb.table, emb.meta, faithfulness=emb.faithfulness)
    pd.testing.assert_frame_equal(again.take(sel.rows).table, want)
    view.select([])
    assert len(view.selected) == 0 and list(view.selected.table.columns) == list(emb.columns)


def test_join_and_columns_without_the_table(monkeypatch):
    from attnkit.testing import tiny_model

    emb = ak.qk_embedding([tiny_model("bert").attend(t) for t in TEXTS[:2]], method="pca", progress=False)
    pos = pd.DataFrame({"item": [0, 0], "position": [1, 2], "pos": ["DET", "NOUN"]})
    with monkeypatch.context() as m:
        _no_table(m)
        joined = emb.join(pos)
        got = joined.column("pos")
        assert list(joined.columns) == list(emb.columns) + ["pos"] and "pos" in joined
        assert len(joined) == len(emb)
    want = emb.table.merge(pos, on=["item", "position"], how="left")["pos"]
    assert [None if v is np.nan or v is None or v != v else v for v in got] == \
        [None if v != v else v for v in want.tolist()]
    with pytest.raises(ak.errors.InputError, match="column must be one of"):
        emb.column("nope")
    with pytest.raises(ak.errors.InputError, match="rows"):
        emb.take([len(emb)])


@pytest.mark.parametrize("keep", ["qk", ("maps", "qk")])
def test_linked_heatmap_reads_the_clicked_input_from_the_store(tmp_path, keep):
    """A click on a point of an embedding of a store opens that input's map for the head:
    the stored map (keep maps), or the map computed from its stored queries and keys
    (keep="qk"); either equals the eager map up to float16 storage."""
    from attnkit.testing import tiny_model
    from tolerances import F16, assert_close

    model = tiny_model("gpt2")
    sset = ak.extract(model, TEXTS, level="token", keep=keep, store=tmp_path / "s.zarr", batch_size=2,
                      progress=False)
    emb = ak.qk_embedding(sset, method="pca", progress=False)
    view = ak.QKScatter(emb, layer=1, head=1)
    box = view.linked_heatmap()
    for kind, where in (("query", "row"), ("key", "column")):
        i = next(j for j in range(view.n_points) if view.point(j)["item"] == 2 and view.point(j)["kind"] == kind
                 and view.point(j)["position"] == 3)
        view.clicked = i
        heat = box.children[0]
        assert type(heat).__name__ == "Heatmap" and f"item 2, head 2-2: {where} 3" in heat.title
        eager = model.attend(TEXTS[2])
        assert heat.tokens == eager.tokens
        # float16 queries and keys (or maps) in the store: weights within F16 of the eager map
        assert_close(heat.matrix, eager.map(1, 1), F16, scale=1)
        view.clicked = -1
