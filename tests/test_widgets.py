"""Python side of the widgets: what goes over the wire, selection, linking, static output."""

from __future__ import annotations

import base64
import warnings

import numpy as np
import pandas as pd
import pytest

import attnkit
from attnkit.errors import InputError, TokenizationMismatchError
from attnkit.plot.common import downsample_max
from attnkit.core.results import head_table
from attnkit.widgets import ClusterView, HeadGrid, HeadMap, Heatmap, _base
from attnkit.widgets._codec import f16, message, read, wire
from attnkit.widgets.headgrid import DECADES, log_codes
from tolerances import assert_close, F32


def make_att(L=2, H=3, n=5, seed=0, tokens=None, model=""):
    rng = np.random.default_rng(seed)
    maps = rng.random((L, H, n, n)).astype(np.float32)
    maps /= maps.sum(-1, keepdims=True)
    tokens = tokens or ["[CLS]"] + [f"t{i}" for i in range(n - 2)] + ["[SEP]"]
    roles = ["cls"] + ["word"] * (n - 2) + ["sep"]
    return attnkit.Attention(maps, tokens=tokens, roles=roles,
                             word_ids=[-1] + list(range(n - 2)) + [-1], words=tokens[1:-1], model=model)


# ------------------------------------------------------------------ codec
def test_wire_arrays_describe_themselves():
    d = wire(np.array([[1, 2, 3], [4, 5, 6]]), "uint16")
    assert (d["dtype"], d["shape"]) == ("uint16", [2, 3])
    assert d["buffer"] == bytes([1, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6, 0])  # little-endian, C order
    assert read(d).tolist() == [[1, 2, 3], [4, 5, 6]]
    raw = wire(np.array([0.625]), "float16")["buffer"]
    assert raw == bytes([0x00, 0x39])  # 0.625 = 0x3900
    with pytest.raises(InputError, match="exactly"):
        wire(np.array([300]), "uint8")
    with pytest.raises(InputError, match="float64"):
        wire(np.zeros(2), "float64")


def test_f16_scale_keeps_small_weights_digits():
    # 1/32768 is subnormal in plain float16 (2 significant bits); with the scale it keeps 3 digits
    a = np.array([0.5, 1 / 32768, 1e-7], dtype=np.float32)
    d = f16(a)
    assert d["scale"] == 2.0 ** (-1 - 14)
    np.testing.assert_allclose(read(d), a, rtol=1e-3)
    plain = np.frombuffer(wire(a, "float16")["buffer"], dtype="<f2").astype(np.float64)
    assert abs(plain[2] - 1e-7) / 1e-7 > 0.1  # what the scale avoids
    assert "scale" not in f16(np.zeros(3))


def test_custom_messages_carry_arrays_as_buffers():
    content, buffers = message({"type": "tile", "id": 3, "array": wire(np.eye(2), "float32")})
    assert content["array"]["buffer"] == 0 and content["array"]["shape"] == [2, 2]
    assert len(buffers) == 1 and len(buffers[0]) == 16
    np.testing.assert_array_equal(read(content["array"], buffers), np.eye(2))


def test_downsample_max_keeps_block_maxima_and_pads():
    m = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    assert downsample_max(m, 2)[0, 0].tolist() == [[5, 7], [13, 15]]
    m5 = np.zeros((5, 5), dtype=np.float32)
    m5[4, 3] = 0.9
    out = downsample_max(m5, 2)  # k = 3, t = 2: the last block is padded with zeros
    assert out.shape == (2, 2) and out[1, 1] == pytest.approx(0.9) and out.sum() == pytest.approx(0.9)
    assert downsample_max(m5, 8) is m5
    with pytest.raises(InputError):
        downsample_max(np.zeros((3, 4)), 2)


def test_head_table_from_dataframe_series_and_array():
    idx = pd.MultiIndex.from_tuples([(0, 1), (1, 0)], names=["layer", "head"])
    df = pd.DataFrame({"entropy": [1.5, 2.5], "name": ["a", "b"]}, index=idx)
    table, name = head_table(df)
    assert name == "entropy" and table.shape == (2, 2)
    assert table[0, 1] == 1.5 and table[1, 0] == 2.5 and np.isnan(table[0, 0])
    table, _ = head_table(df["entropy"], shape=(3, 4))
    assert table.shape == (3, 4)
    with pytest.raises(InputError, match="value="):
        head_table(df.assign(other=1.0))
    flat, _ = head_table(df.reset_index(), "entropy")  # layer/head columns work too
    np.testing.assert_array_equal(flat, table[:2, :2])
    with pytest.raises(InputError, match="indexed by"):
        head_table(df.reset_index(drop=True), "entropy")
    with pytest.raises(InputError, match="layers"):
        head_table(df, shape=(1, 1))
    with pytest.raises(InputError, match="not in"):
        head_table(df, "accuracy")


# ------------------------------------------------------------------ Heatmap
def test_heatmap_sends_the_chosen_head_exactly_when_short():
    att = make_att(model="tiny")
    hm = Heatmap(att, layer=1, head=2)
    assert hm.pyramid == {"top": 0, "size": 256}  # 5 tokens: the overview is the map
    assert hm.overview_max["dtype"] == "float32" and hm.overview_mean == {}
    np.testing.assert_array_equal(read(hm.overview_max), att.maps[1, 2])
    assert hm.n == 5 and hm.tokens == att.tokens
    assert hm.top == pytest.approx(att.maps[1, 2].max())
    # sinks: [CLS] (also the first token) and [SEP]; their columns left out of top_nosink
    assert hm.sinks == [0, 4] and hm.sink_names == "[CLS] and [SEP]"
    assert hm.top_nosink == pytest.approx(att.maps[1, 2][:, 1:4].max())
    assert not hm.diverging and hm.scale == "linear" and not hm.exclude_sinks
    assert hm.title == "tiny: layer 2, head 3 (2-3)"
    assert (hm.n_layers, hm.n_heads) == (2, 3)
    hm.show(0, 0)
    np.testing.assert_array_equal(read(hm.overview_max), att.maps[0, 0])
    assert "(1-1)" in hm.title


def test_heatmap_rejects_bad_heads_and_shapes():
    att = make_att()
    with pytest.raises(InputError, match="0-indexed"):
        Heatmap(att, layer=2, head=0)
    hm = Heatmap(att)
    with pytest.raises(InputError):
        hm.show(0, 3)
    hm.head = -1  # negative counts from the end, as everywhere
    assert hm.head == hm.n_heads - 1
    with pytest.raises(InputError, match=r"head -\d+ is outside"):
        hm.head = -hm.n_heads - 1
    with pytest.raises(InputError, match="head must be a whole number"):
        hm.show(0, True)
    with pytest.raises(InputError, match=r"\[layer, head, 5, 5\]"):
        Heatmap(att, maps=np.zeros((4, 4)))
    with pytest.raises(InputError, match="Attention"):
        Heatmap(att.maps)
    with pytest.raises(InputError, match="scale"):
        Heatmap(att, scale="sqrt")
    with pytest.raises(InputError, match="reduce"):
        Heatmap(att, reduce="median")


def test_heatmap_maps_override_and_automatic_diverging():
    att = make_att()
    signed = np.eye(5, dtype=np.float32) - 0.2
    hm = Heatmap(att, maps=signed, value_label="rollout change")
    assert hm.diverging and hm.top == pytest.approx(0.8) and hm.vmax is None
    assert (hm.n_layers, hm.n_heads) == (1, 1) and hm.title == "rollout change"
    assert Heatmap(att, vmax=0.5).vmax == 0.5


def test_heatmap_difference():
    a, b = make_att(seed=1, model="base"), make_att(seed=2, model="tuned")
    hm = Heatmap.difference(a, b, layer=1, head=1)
    want = a.maps[1, 1] - b.maps[1, 1]
    assert_close(hm.matrix, want, F32)
    assert_close(read(hm.overview_max), want, F32)
    assert hm.diverging and hm.top == pytest.approx(np.abs(want).max())
    assert hm.value_label == "base \u2212 tuned" and "(2-2)" in hm.title
    hm.show(0, 2)
    assert_close(hm.matrix, a.maps[0, 2] - b.maps[0, 2], F32)
    other = make_att(tokens=["[CLS]", "x", "y", "z", "[SEP]"])
    with pytest.raises(TokenizationMismatchError):
        Heatmap.difference(a, other)
    with pytest.raises(InputError, match="shapes differ"):
        Heatmap.difference(a, make_att(L=3))


# ------------------------------------------------------------------ HeadGrid
def test_headgrid_thumbnails_are_log_codes_below_each_heads_top():
    att = make_att(L=2, H=3, n=5)
    grid = HeadGrid(att)
    assert grid.size == 5 and grid.thumbs["shape"] == [2, 3, 5, 5] and grid.thumbs["dtype"] == "uint8"
    codes = read(grid.thumbs).astype(np.float64)
    top = att.maps.max(axis=(2, 3))
    assert_close(read(grid.head_max), top, F32)
    assert (codes.reshape(6, -1).max(axis=1) == 255).all()
    # code c stands for top * 10 ** (DECADES * (c / 255 - 1)): within half a step (2.7 %)
    back = top[:, :, None, None] * 10.0 ** (DECADES * (codes / 255 - 1))
    np.testing.assert_allclose(back, att.maps, rtol=0.03)
    assert grid.metric == {} and grid.selected == []
    assert grid.normalize == "head" and grid.scale == "linear"
    assert HeadGrid(att, normalize="global").normalize == "global"
    with pytest.warns(DeprecationWarning, match="normalize='global'"):
        assert HeadGrid(att, scale="global").normalize == "global"
    with pytest.raises(InputError):
        HeadGrid(att, scale="local")


def test_log_codes_known_values():
    thumbs = np.array([[[[1.0, 0.1], [1e-3, 0.0]]]])
    codes = log_codes(thumbs, np.array([[1.0]]))
    # 1; one decade down = 42.5 codes (212.5 rounds to even); 3 decades = 127.5 codes; zero
    assert codes.tolist() == [[[[255, 212], [128, 0]]]]


def test_headgrid_pools_long_inputs_within_its_byte_budget():
    att = make_att(L=1, H=2, n=300)
    grid = HeadGrid(att, size=128)
    assert grid.size == 128 and grid.thumbs["shape"] == [1, 2, 128, 128]
    assert_close(read(grid.head_max)[0], att.maps[0].max(axis=(1, 2)), F32)
    assert grid.n_tokens == 300
    big = make_att(L=12, H=12, n=200)
    g2 = HeadGrid(big, size=128)
    assert g2.size == 105 and 144 * 105 * 105 <= 1_600_000  # 144 heads: thumbnails shrink


def test_headgrid_metric_overlay():
    att = make_att()
    idx = pd.MultiIndex.from_tuples([(0, 0), (1, 2)], names=["layer", "head"])
    grid = HeadGrid(att, metric=pd.DataFrame({"acc": [0.5, 0.75]}, index=idx))
    table = read(grid.metric)
    assert grid.metric_name == "acc" and table[0, 0] == 0.5 and table[1, 2] == 0.75
    assert np.isnan(table).sum() == 4
    with pytest.raises(InputError, match="3 heads"):
        HeadGrid(att, metric=pd.Series([1.0], index=pd.MultiIndex.from_tuples([(0, 5)])))


def test_selection_is_validated_and_observable():
    grid = HeadGrid(make_att())
    seen = []
    grid.observe(lambda ch: seen.append(ch["new"]), names="selected")
    grid.set_state({"selected": [1, 2]})  # what a click in the browser sends
    assert grid.selected == [1, 2] and seen == [[1, 2]]
    with pytest.raises(InputError):
        grid.selected = [2, 0]
    with pytest.raises(InputError):
        grid.selected = [0]


def test_link_keeps_heatmap_and_grid_in_step():
    att = make_att()
    grid = HeadGrid(att)
    hm = grid.link(Heatmap(att))
    grid.selected = [1, 1]
    assert (hm.layer, hm.head) == (1, 1)
    assert_close(hm.matrix, att.maps[1, 1], F32)
    hm.show(0, 2)  # the heatmap's arrows
    assert grid.selected == [0, 2]
    hmap = HeadMap(np.zeros((2, 3)), value="zero")
    hm2 = hmap.link(Heatmap(att))
    hmap.selected = [1, 0]
    assert (hm2.layer, hm2.head) == (1, 0)
    with pytest.raises(InputError, match="cannot link"):
        HeadGrid(make_att(L=3)).link(hm)
    with pytest.raises(InputError, match="Heatmap"):
        grid.link(grid)


# ------------------------------------------------------------------ HeadMap
def test_headmap_table_and_diverging():
    idx = pd.MultiIndex.from_product([range(2), range(2)], names=["layer", "head"])
    df = pd.DataFrame({"delta": [-0.5, 0.25, 0.0, 1.0], "n": [1, 2, 3, 4]}, index=idx)
    hmap = HeadMap(df, value="delta")
    np.testing.assert_array_equal(read(hmap.values), [[-0.5, 0.25], [0.0, 1.0]])
    assert hmap.diverging and hmap.value_name == "delta" and hmap.title == "delta per head"
    assert not HeadMap(df, value="n").diverging
    padded = HeadMap(df, value="n", n_layers=4)
    assert (padded.n_layers, padded.n_heads) == (4, 2) and np.isnan(padded.table[3]).all()
    with pytest.raises(InputError, match="value="):
        HeadMap(df)


# ------------------------------------------------------------------ ClusterView
def test_cluster_view_from_array_and_labels():
    emb = np.arange(12, dtype=float).reshape(6, 2)
    cv = ClusterView(emb, n_heads=3)
    assert cv.layers == [0, 0, 0, 1, 1, 1] and cv.heads == [0, 1, 2, 0, 1, 2]
    assert cv.categories == [] and cv.codes == cv.layers and cv.label_name == "layer"
    np.testing.assert_array_equal(read(cv.points), emb)
    cv = ClusterView(emb, labels=["b", "a", "b", None, "a", "c"], n_heads=3)
    assert cv.categories == ["a", "b", "c"] and cv.codes == [1, 0, 1, -1, 0, 2]
    with pytest.raises(InputError, match="n_heads"):
        ClusterView(emb)
    with pytest.raises(InputError, match="labels"):
        ClusterView(emb, labels=["a"], n_heads=3)
    with pytest.raises(InputError, match="NaN"):
        ClusterView(np.full((3, 2), np.nan), n_heads=3)


def test_cluster_view_from_dataframe_subset():
    idx = pd.MultiIndex.from_tuples([(0, 1), (2, 0)], names=["layer", "head"])
    df = pd.DataFrame({"x": [0.0, 1.0], "y": [1.0, 0.0]}, index=idx)
    labels = pd.Series({(0, 1): "positional", (2, 0): "broad"}, name="behaviour")
    cv = ClusterView(df, labels=labels)
    assert (cv.layers, cv.heads) == ([0, 2], [1, 0])
    assert cv.label_name == "behaviour" and cv.codes == [1, 0]
    cv.selected = [2, 0]
    with pytest.raises(InputError, match="not in this embedding"):
        cv.selected = [1, 0]


def test_widgets_keep_the_anywidget_protocol_traits():
    att = make_att(model="tiny-bert")
    for w in (Heatmap(att), Heatmap.difference(att, make_att(seed=3)), HeadGrid(att),
              HeadMap(np.zeros((2, 3)), value="zero"), ClusterView(np.zeros((6, 2)) + np.arange(6)[:, None], n_heads=3)):
        state = w.get_state()
        assert (state["_model_name"], state["_view_name"]) == ("AnyModel", "AnyView")
        assert state["_anywidget_id"] == f"attnkit.widgets.{type(w).__module__.rsplit('.', 1)[1]}.{type(w).__name__}"


# ------------------------------------------------------------------ static output
def test_mimebundle_has_png_and_escaped_html():
    xss = "<img src=x onerror=alert(1)>"
    att = make_att(tokens=["[CLS]", xss, "$5", "a\"b", "[SEP]"])
    for w in (Heatmap(att), HeadGrid(att), HeadMap(att.maps.max(axis=(2, 3)), value="max"),
              ClusterView(np.random.default_rng(0).random((6, 2)), n_heads=3)):
        data, _ = w._repr_mimebundle_()
        assert "application/vnd.jupyter.widget-view+json" in data
        png = base64.b64decode(data["image/png"])
        assert png[:8] == b"\x89PNG\r\n\x1a\n"
        html = data["text/html"]
        assert html.startswith('<img src="data:image/png;base64,') and data["image/png"] in html
        assert "<img" not in html[5:] and "onerror=alert" not in html.replace("onerror=alert(1)&gt;", "")
    hm_html = Heatmap(att)._repr_mimebundle_()[0]["text/html"]
    assert "&lt;img src=x onerror=alert(1)&gt;" in hm_html and "a&quot;b" in hm_html


def test_png_is_cached_until_the_view_changes():
    hm = Heatmap(make_att())
    first = hm.to_png()
    assert hm.to_png() is first
    hm.show(1, 1)
    assert hm.to_png() is not first


def test_save_png_svg_pdf(tmp_path):
    hm = Heatmap(make_att())
    assert hm.save(tmp_path / "a.png").read_bytes()[:4] == b"\x89PNG"
    assert b"<svg" in hm.save(tmp_path / "a.svg").read_bytes()[:500]
    assert hm.save(tmp_path / "a.pdf").read_bytes()[:4] == b"%PDF"
    with pytest.raises(InputError, match=".png, .svg or .pdf"):
        hm.save(tmp_path / "a.jpg")
    with pytest.raises(InputError, match="does not exist"):
        hm.save(tmp_path / "nope" / "a.png")


def test_missing_bundle_shows_a_message_not_a_crash(monkeypatch, tmp_path):
    monkeypatch.setattr(_base, "STATIC", tmp_path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        hm = Heatmap(make_att())
    assert any("make js-build" in str(w.message) for w in caught)
    assert "make js-build" in hm._esm and "textContent" in hm._esm


def test_views_take_the_analyses_outputs_as_they_are():
    """embed_heads / head_behaviours / head_stats outputs go straight into the views."""
    atts = [make_att(L=3, H=4, n=n, seed=n) for n in (6, 7, 8)]
    stats = attnkit.head_stats(atts)
    emb = attnkit.embed_heads(attnkit.head_distances(atts))
    behaviours = attnkit.head_behaviours(stats)
    cv = ClusterView(emb, labels=behaviours)
    assert cv.label_name == "behaviour" and len(cv.layers) == 12
    assert [cv.categories[c] for c in cv.codes] == [str(behaviours[k]) for k in zip(cv.layers, cv.heads)]
    hmap = HeadMap(stats, value="entropy")
    assert_close(hmap.table, stats["entropy"].unstack("head").to_numpy(), F32)
    grid = HeadGrid(atts[0], metric=stats, value="entropy")
    assert_close(read(grid.metric), stats["entropy"].unstack("head").to_numpy(), F32)
