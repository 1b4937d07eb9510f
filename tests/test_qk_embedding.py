"""qk_embedding: AttentionViz's normalisation (softmax unchanged), the joint projection, the
faithfulness scores, their known answers on the toy induction decoder, and bad input."""

from __future__ import annotations


import numpy as np
import pandas as pd
import pytest

import attnkit as ak
from attnkit.analysis import qk as qkmod
from attnkit.analysis.qk import normalize_qk, project
from attnkit.errors import InputError
from attnkit.core.qkstates import QKStates, scores
from attnkit.testing import tiny_model
from tolerances import assert_close, F32, F64

pytestmark = pytest.mark.numerics


def _softmax_rows(q, k, causal):
    return scores(QKStates({0: q[None]}, {0: k[None]}, {0: q.shape[1] ** -0.5}), 0, 0, causal=causal)


@pytest.mark.parametrize("causal", [False, True])
def test_normalisation_leaves_every_softmax_unchanged(causal):
    rng = np.random.default_rng(0)
    q = rng.normal(2.0, 3.0, (40, 16)).astype(np.float32)
    k = (rng.normal(-5.0, 0.5, (40, 16)) * 4).astype(np.float32)
    q2, k2 = normalize_qk(q, k)
    # means equal after the translation; mean norms equal after the scaling
    assert_close(q2.mean(0) / np.linalg.norm(q2, axis=1).mean() * np.linalg.norm(k2, axis=1).mean(),
                               q2.mean(0), F64)
    assert_close(np.linalg.norm(q2, axis=1).mean(), np.linalg.norm(k2, axis=1).mean(), F64)
    # float32 scores of magnitude ~100: softmax agrees to float32 precision
    a = _softmax_rows(q, k, causal)
    b = _softmax_rows(q2.astype(np.float32), k2.astype(np.float32), causal)
    assert_close(a, b, F32, scale=1)
    # in float64 the scores differ by exactly a constant per row
    d = q2 @ k2.T - q.astype(np.float64) @ k.astype(np.float64).T
    assert_close(d, np.repeat(d[:, :1], d.shape[1], axis=1), F64)


def test_normalisation_on_a_model_head_keeps_its_map():
    att = tiny_model("llama").attend("The cat sat on the mat and the dog sat on the rug.")
    for layer in range(att.n_layers):
        q, k = att.queries(layer)[1], att.keys(layer)[0]
        q2, k2 = normalize_qk(q, k)
        st = QKStates({0: q2[None].astype(np.float32)}, {0: k2[None].astype(np.float32)},
                      {0: att.qk.scaling[layer]})
        # float32 softmax of shifted scores; the model's own map is float32 too
        np.testing.assert_allclose(scores(st, 0, 0, causal=True), att.map(layer, 1), atol=2e-5)


@pytest.mark.parametrize("method", ["pca", pytest.param("umap", marks=pytest.mark.slow),
                                    pytest.param("tsne", marks=pytest.mark.slow)])
def test_queries_equal_to_keys_land_exactly_on_them(method):
    rng = np.random.default_rng(1)
    x = rng.normal(size=(30, 8)).astype(np.float32)
    att = ak.Attention.from_maps(np.full((1, 1, 30, 30), 1 / 30), [f"t{i}" for i in range(30)])
    att.qk = QKStates({0: x[None]}, {0: x[None].copy()}, {0: 8 ** -0.5})
    emb = ak.qk_embedding(att, method=method, progress=False)
    t = emb.table
    q = t[t["kind"] == "query"].sort_values("position")[["x", "y"]].to_numpy()
    k = t[t["kind"] == "key"].sort_values("position")[["x", "y"]].to_numpy()
    np.testing.assert_array_equal(q, k)   # the same point: one projected row, bit for bit


def test_table_columns_join_and_item_map():
    model = tiny_model("gpt2")
    atts = [model.attend(t) for t in ["The cat sat on the mat.", "We read it all again."]]
    emb = ak.qk_embedding(atts, heads=[(1, 1), (0, 0)], method="pca", dims=3, progress=False)
    assert list(emb.table.columns) == list(qkmod.COLUMNS)
    n = sum(len(a) for a in atts)
    assert len(emb.table) == 2 * 2 * n and len(emb.head(1, 1)) == 2 * n
    assert emb.table["kind"].value_counts().to_dict() == {"query": 2 * n, "key": 2 * n}
    row = emb.table.iloc[len(atts[0]) + 2]
    assert (row["item"], row["position"], row["token"]) == (1, 2, atts[1].tokens[2])
    assert_close(emb.item_map(1, 0, 0), atts[1].map(0, 0), F32, scale=1)
    tags = pd.DataFrame({"item": [0, 1], "position": [1, 1], "pos": ["DET", "PRON"]})
    joined = emb.join(tags).table
    assert joined.loc[(joined["item"] == 1) & (joined["position"] == 1), "pos"].eq("PRON").all()
    assert joined["pos"].isna().sum() == len(joined) - 2 * 2 * 2
    assert set(emb.faithfulness.table.columns) >= {"spearman", "nearest_key", "nearest_key_original"}
    with pytest.raises(InputError, match="repeats"):
        emb.join(pd.concat([tags, tags]))


def test_toy_decoder_normalisation_makes_nearest_keys_the_attended_ones():
    """AttentionViz's claim, on the toy decoder's previous-token head (layer 1, head 1, as
    attnkit.head_scores finds it) and its two induction heads (layer 2): the share of rows
    whose nearest key in the original space is the key they attend to most rises clearly."""
    model = ak.toy.induction_model()
    atts = [model.attend(x) for x in ak.induction_inputs(model, 8, 24, seed=0)]
    r = ak.qk_faithfulness(atts, method="pca", progress=False).table
    for head in [(0, 0), (1, 0), (1, 1)]:
        raw, norm = r.loc[head, "nearest_key_original_raw"], r.loc[head, "nearest_key_original_normalized"]
        assert norm > raw + 0.25 and norm > 0.75, (head, raw, norm)
        assert r.loc[head, "spearman_normalized"] > r.loc[head, "spearman_raw"]
    assert r.loc[(0, 0), "nearest_key_original_normalized"] > 0.99


def test_bad_input(tmp_path, monkeypatch):
    model = tiny_model("llama")
    att = model.attend("The cat sat on the mat.")
    with pytest.raises(InputError, match=r"heads: head 5 is outside 0\.\.1"):
        ak.qk_embedding(att, heads=[(0, 5)], method="pca")
    with pytest.raises(InputError, match=r"heads: layer 3 is outside 0\.\.1"):
        ak.qk_embedding(att, heads=[(3, 0)], method="pca")
    with pytest.raises(InputError, match="method must be"):
        ak.qk_embedding(att, method="mds")
    with pytest.raises(InputError, match="dims"):
        ak.qk_embedding(att, method="pca", dims=4)
    with pytest.raises(InputError, match="word level"):
        ak.qk_embedding(att.to_words(), method="pca")
    real_import = qkmod.importlib.import_module

    def no_umap(name, *a):
        if name == "umap":
            raise ImportError(name)
        return real_import(name, *a)

    monkeypatch.setattr(qkmod.importlib, "import_module", no_umap)
    with pytest.raises(InputError, match="pip install umap-learn"):
        ak.qk_embedding(att, method="umap")
    monkeypatch.undo()
    with pytest.raises(InputError, match="at least 10 distinct points"):
        project(np.eye(4), method="umap")
    with pytest.raises(InputError, match="at least 3 distinct"):
        ak.qk_embedding(_one_point(), method="pca")
    bad = model.attend("The cat sat.")
    bad.qk.query_by_layer[1] = bad.qk.queries(1).copy()
    bad.qk._cache.clear()
    bad.qk.query_by_layer[1][0, 2, 3] = np.nan
    with pytest.raises(InputError, match="NaN"):
        ak.qk_embedding(bad, heads=[(1, 0)], method="pca")
    # a store without queries and keys: refused, and not touched
    path = tmp_path / "s.zarr"
    ak.extract(model, ["The cat sat.", "We read."], level="token", store=path, progress=False)
    before = {p: p.stat().st_mtime_ns for p in path.rglob("*")}
    with pytest.raises(InputError, match="keeps no queries"):
        ak.qk_embedding(ak.open_store(path), method="pca")
    assert {p: p.stat().st_mtime_ns for p in path.rglob("*")} == before


def _one_point():
    """An input of one position whose query equals its key: one distinct point."""
    x = np.ones((1, 1, 4), np.float32)
    one = ak.Attention.from_maps(np.ones((1, 1, 1, 1)), ["a"])
    one.qk = QKStates({0: x}, {0: x.copy()}, {0: 0.5})
    return one


def test_store_and_lazy_give_the_same_picture(tmp_path):
    model = tiny_model("gpt2")
    texts = ["The cat sat on the mat.", "We read it all again.", "A dog ran."]
    dense = ak.qk_embedding([model.attend(t) for t in texts], method="pca", progress=False)
    lazy = ak.qk_embedding([model.attend(t, lazy=True) for t in texts], method="pca", progress=False)
    sset = ak.extract(model, texts, level="token", keep="qk", store=tmp_path / "s", progress=False)
    stored = ak.qk_embedding(sset, method="pca", progress=False)
    # dense and lazy capture: two forwards, float32 apart; the store rounds to float16
    np.testing.assert_allclose(dense.table[["x", "y"]], lazy.table[["x", "y"]], atol=1e-4)
    np.testing.assert_allclose(dense.table[["x", "y"]], stored.table[["x", "y"]], atol=0.05)
    assert (dense.table["token"] == stored.table["token"]).all()


@pytest.mark.slow
def test_dask_gives_the_same_embedding(dask_cluster):
    with dask_cluster(processes=True) as client:
        atts = [tiny_model("gpt2").attend(t) for t in ["The cat sat on the mat.", "We read it."]]
        here = ak.qk_embedding(atts, method="pca", progress=False)
        there = ak.qk_embedding(atts, method="pca", client=client, progress=False)
        pd.testing.assert_frame_equal(here.table, there.table)
        clock = ["seconds", "fit_seconds", "place_seconds"]
        pd.testing.assert_frame_equal(here.faithfulness.table.drop(columns=clock),
                                      there.faithfulness.table.drop(columns=clock))
