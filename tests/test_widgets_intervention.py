"""InterventionView (issue 29, item 8), kernel side: a click's knockout is ``ak.knockout``'s,
the induction toy's induction edges matter and others do not, the later heads' difference
maps have the causal structure they must have, what travels to the browser, and bad input."""

from __future__ import annotations

import numpy as np
import pytest

import attnkit as ak
from attnkit.errors import InputError
from attnkit.testing import tiny_model
from attnkit.widgets import intervention as iv
from attnkit.widgets._codec import read
from tolerances import EXACT, F16, F32, assert_close

N = 32  # tokens of each random sequence: <bos> r r has 2N + 1


@pytest.fixture(scope="module")
def toy():
    model = ak.toy.induction_model()
    inputs = ak.induction_inputs(model, 4, N, seed=1)
    metric = ak.interventions.loss(positions=slice(N + 2, 2 * N + 1))
    return model, inputs, metric, ak.InterventionView(model, inputs, metric=metric, progress=False)


@pytest.fixture(scope="module")
def small():
    model = tiny_model("gpt2")
    inputs = ["The cat sat on the mat.", "A dog ran in the park."]
    return model, inputs, ak.InterventionView(model, inputs, progress=False)


def test_induction_stripe_is_knockouts_and_raises_the_loss(toy):
    model, inputs, metric, view = toy
    # the default effects are ablate's, and the head selected first is the one that matters most
    effects = ak.ablate(model, inputs, metric=metric, progress=False)
    assert_close(view.effects, effects.grid("effect"), EXACT)
    assert view.selected == [0, 0]  # the previous-token head: ablating it destroys induction
    # a click with Alt on (query 50, key 19) of head 2-1: the induction diagonal key = query - 31
    r = view.knock_out(1, 0, query=50, key=50 - (N - 1), stripe="diagonal")
    direct = ak.knockout(model, inputs, f"key = query - {N - 1}", heads=[(1, 0)], metric=metric,
                         progress=False)
    assert r["n_edges"] == direct.meta["n_edges"] // len(inputs) == 2 * N + 1 - (N - 1)
    for ours, theirs in (("before", "clean"), ("after", "knocked_out"), ("change", "change")):
        assert_close(r[ours], direct.meta[theirs], EXACT)
    assert r["before"] < 0.1 and r["after"] > 10 * r["before"]  # the in-context prediction suffers
    # as many edges at another offset (earlier tokens the induction head does not read) do not
    other = view.knock_out(1, 0, query=50, key=50 - (N - 9), stripe="diagonal")
    assert abs(other["change"]) < 0.1 * r["change"]
    # the previous-token head's diagonal (key = query - 1) feeds both induction heads
    prev = view.knock_out(0, 0, query=50, key=49, stripe="diagonal")
    assert prev["after"] > 1.0
    assert [d[:2] for d in prev["downstream"]] == [[1, 0], [1, 1]]
    assert min(d[2] for d in prev["downstream"]) > 0.5  # both induction heads look elsewhere


def test_one_edge_equals_knockout_and_later_rows_change_only_from_its_query(small):
    model, inputs, view = small
    r = view.knock_out(0, 1, query=4, key=2)
    direct = ak.knockout(model, inputs, [(0, 1, 4, 2)], progress=False)
    assert (r["n_edges"], r["kept"], r["stripe"]) == (1, [], "edge")
    for ours, theirs in (("before", "clean"), ("after", "knocked_out"), ("relative_change", "relative_change")):
        assert_close(r[ours], direct.meta[theirs], EXACT)
    assert view.knocked == r
    # layer 1 of a decoder: rows before query 4 never see position 4, so they do not change at
    # all; row 4 reads the changed stream; every row of a difference of two distributions sums to 0
    for head in range(model.n_heads):
        d = view.difference(1, head)
        assert_close(d[:4], np.zeros((4, d.shape[1])), EXACT)
        assert np.abs(d[4]).max() > 0
        assert_close(d.sum(-1), np.zeros(d.shape[0]), F32, scale=1.0)
    # what the browser gets is the same numbers in float16, one map per later head
    assert view.diff_heads == [[1, 0], [1, 1]] and view.diff_bin == 1
    assert_close(read(view.diffs), np.stack([view.difference(1, h) for h in (0, 1)]), F16)


def test_stripes(small):
    model, inputs, view = small
    n = min(len(model.encode(t)) for t in inputs)
    # the column of key 0 in a decoder: row 0 has no other key, so it is left alone
    edges, kept = iv.stripe_edges(0, 0, 3, 0, "column", n, True)
    assert kept == [0] and edges == [(0, 0, q, 0) for q in range(1, n)]
    r = view.knock_out(0, 0, query=3, key=0, stripe="column")
    direct = ak.knockout(model, inputs, edges, progress=False)
    assert r["n_edges"] == n - 1 and r["kept"] == [0]
    assert_close(r["after"], direct.meta["knocked_out"], EXACT)
    # an encoder's column reaches every query; a diagonal stays inside the map
    assert iv.stripe_edges(1, 0, 0, 2, "column", 4, False)[0] == [(1, 0, q, 2) for q in range(4)]
    assert iv.stripe_edges(1, 0, 1, 3, "diagonal", 4, False)[0] == [(1, 0, 0, 2), (1, 0, 1, 3)]
    # the last layer has no later heads to compare
    last = view.knock_out(1, 0, query=3, key=1)
    assert last["downstream"] == [] and view.diff_heads == [] and view.diffs == {}


def test_kernel_messages_and_bad_input(small):
    model, inputs, view = small
    reply = view.answer({"type": "knockout", "id": 7, "layer": 0, "head": 1, "query": 4, "key": 2,
                         "stripe": "edge"})
    assert reply["id"] == 7 and "error" not in reply
    assert_close(reply["result"]["after"], ak.knockout(model, inputs, [(0, 1, 4, 2)], progress=False)
                 .meta["knocked_out"], EXACT)
    for bad, word in (({"query": 2, "key": 4}, "key 4 is after query 2"),
                      ({"query": 99, "key": 0}, "query 99"),
                      ({"query": 1, "key": 0, "stripe": "row"}, "stripe"),
                      ({"query": 1, "key": 0, "layer": 5}, "layer 5"),
                      ({"query": 0, "key": 0}, "no edge to knock out")):
        msg = {"type": "knockout", "layer": 0, "head": 0, "stripe": "edge", **bad}
        out = view.answer(msg)
        assert "error" in out and word in out["error"], out
    with pytest.raises(InputError, match="effects"):
        ak.InterventionView(model, inputs, effects=np.zeros((3, 2)), progress=False)
    with pytest.raises(InputError, match="item"):
        ak.InterventionView(model, inputs, item=2, progress=False)
    with pytest.raises(InputError, match="key"):
        view.knock_out(0, 0, query=0, key=0)  # row 0's only key: the row would be left empty
    with pytest.raises(InputError, match="layer"):
        view.difference(0, 0)


def test_maps_travel_and_large_inputs_send_the_selected_head(small, monkeypatch):
    model, inputs, view = small
    n = len(model.encode(inputs[0]))
    assert view.tokens == [str(t) for t in model.encode(inputs[0]).tokens]
    assert view.map_heads == [[l, h] for l in range(2) for h in range(2)]
    maps = read(view.maps)
    att = model.attend(inputs[0])
    for i, (l, h) in enumerate(view.map_heads):
        assert_close(view.attention(l, h), att.map(l, h), F32)
        assert_close(maps[i], att.map(l, h), F16)
    monkeypatch.setattr(iv, "MAP_CELLS", n * n)  # one head's map fits
    one = ak.InterventionView(model, inputs, effects=np.arange(4.0).reshape(2, 2), progress=False)
    assert one.selected == [1, 1] and one.map_heads == [[1, 1]]  # the largest |effect|
    one.show(0, 1)
    assert one.map_heads == [[0, 1]]
    assert_close(read(one.maps)[0], att.map(0, 1), F16)


def test_static_picture_and_words(small, tmp_path):
    model, inputs, view = small
    view.knock_out(0, 0, query=5, key=1, stripe="diagonal")
    text = view._alt_text()
    k = view.knocked
    assert f"{k['before']:.4g} → {k['after']:.4g}" in text and "diagonal" in text
    fig = view.figure()
    titles = [a.get_title(loc="left") for a in fig.axes]
    assert any("knocked out" in t for t in titles)
    assert {"2-1", "2-2"} <= {a.get_title() for a in fig.axes}
    assert view.save(tmp_path / "iv.png").stat().st_size > 0
    assert view.to_png()[:4] == b"\x89PNG"


def test_links_a_heatmap_like_the_other_head_views(small):
    model, inputs, view = small
    heatmap = view.link(ak.Heatmap(model.attend(inputs[0])))
    view.show(1, 0)
    assert (heatmap.layer, heatmap.head) == (1, 0)
    assert_close(heatmap.matrix, view.attention(1, 0), F32)  # the same map, shown by the full Heatmap
    heatmap.show(0, 1)
    assert view.selected == [0, 1]
