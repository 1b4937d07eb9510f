"""Why a head attends: residual-stream decomposition, query-key score attribution and head
composition, checked against known answers.

- every architecture of the capture sweep (tests/test_capture.py): the components sum to the
  stream the forward computed, the terms sum to the head's scores (within 1e-4), and the
  softmax of those sums is the attention map transformers' eager path returns;
- hand-built weights where layer 2's key reads exactly one layer-1 head: every key-side term
  belongs to that head;
- the trained induction toy model: (token embedding, previous-token head) drives the induction
  stripe; K-composition from the previous-token head into each induction head is the largest
  layer-1 -> layer-2 pair and above the random baseline's 99th percentile.
"""

import numpy as np
import pandas as pd
import pytest
import torch

import attnkit as ak
from attnkit.errors import InputError, UnsupportedModelError
from attnkit.runtime.model import Model
from attnkit.testing import tiny_model
from tolerances import assert_close, F32, F64

pytestmark = pytest.mark.numerics

ARCHS = ["bert", "roberta", "distilbert", "gpt2", "gpt_neox", "llama", "qwen2", "mistral",
         "gemma2", "gpt_oss"]
TEXT = "A student reads the new book in the library, unbelievably."


@pytest.fixture(scope="module")
def models():
    return {k: tiny_model(k, heads=4, hidden=32) for k in ARCHS}


@pytest.fixture(scope="module")
def toy():
    return ak.toy.induction_model()


@pytest.mark.parametrize("kind", ARCHS)
def test_components_sum_to_the_stream(models, kind):
    model = models[kind]
    s = ak.residual_stream(model, TEXT, layer=1, positions=[0, 3, 5])
    assert s.names[0] == "embed" and s.names[-1] == "bias" and "1-mlp" in s.names
    assert s.vectors.shape == (len(s.names), 3, 32)
    # float64 sums of the forward's float32 pieces: within float32 rounding of the stream
    np.testing.assert_allclose(s.vectors.sum(0), s.stream, atol=1e-4 * np.abs(s.stream).max())


@pytest.mark.parametrize("kind", ARCHS)
def test_terms_add_to_the_scores_and_the_map(models, kind):
    model = models[kind]
    for layer, head in ((0, 1), (1, 3)):
        r = ak.score_attribution(model, TEXT, layer=layer, head=head)
        scores = r.meta["scores"]
        # the model's float32 q·k against float64 sums of exact terms: float32 rounding
        assert r.meta["max_abs_error"] < 1e-4
        sums = r.table.groupby(["query", "key"])["contribution"].sum()
        want = scores.set_index(["query", "key"])["score"]
        np.testing.assert_allclose(sums.loc[want.index].values, want.values, atol=1e-4)
        if kind == "gpt_oss":  # learned sinks take part of each row: checked by capture tests
            continue
        # the softmax of the attributed logits is the eager attention map
        att = model.attend(TEXT)
        n = len(att)
        logits = np.full((n, n), -np.inf)
        total = scores["total"].to_numpy()
        if r.meta["softcap"]:
            cap = r.meta["softcap"]
            total = cap * np.tanh(total / cap)
        logits[scores["query"], scores["key"]] = total
        p = np.exp(logits - logits.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        assert_close(p, att.map(layer, head), F32, scale=1)


def test_grains_top_dense_and_aggregates_agree(models):
    model = models["llama"]
    one = dict(layer=1, head=2, queries=[6], keys=[1, 4, 6])
    heads = ak.score_attribution(model, TEXT, **one, dense=True)
    terms = heads.meta["terms"]
    assert terms.shape == (3, len(heads.meta["query_components"]), len(heads.meta["key_components"]))
    topped = ak.score_attribution(model, TEXT, **one, top=3)
    assert set(topped.table.groupby("key").size()) == {4}  # 3 largest + "rest"
    assert (topped.table["query_component"] == "rest").sum() == 3
    layers = ak.score_attribution(model, TEXT, **one, components="layers")
    assert "1-attn" in layers.meta["query_components"]
    dims = ak.score_attribution(model, TEXT, **one, components="dims")
    assert len(dims.table) == 3 * 8 and dims.table["query_component"].iloc[0] == "dim1"
    picked = ak.score_attribution(model, TEXT, **one, components=["1-1", "embed"])
    assert picked.meta["query_components"] == ["1-1", "embed", "other"]
    summed = ak.score_attribution(model, TEXT, **one, aggregate="sum")
    for r in (heads, topped, layers, dims, picked):
        total = r.table["contribution"].sum()
        np.testing.assert_allclose(total, heads.meta["scores"]["score"].sum(), atol=1e-4)
    assert_close(summed.meta["terms"], terms.sum(0), F64)


def _hand_built():
    """2 layers, 4 heads of 8 dims, width 32: embeddings live in dims 0-15, layer-1 head 1
    writes only dims 16-23, head 2 only dims 24-31, heads 3 and 4 and the MLPs write nothing;
    layer 2's keys read only dims 16-23 (so only head 1-1)."""
    model = tiny_model("llama", layers=2, heads=4, hidden=32, kv_heads=4, seed=1)
    hf = model.hf
    with torch.no_grad():
        hf.model.embed_tokens.weight[:, 16:] = 0
        o = hf.model.layers[0].self_attn.o_proj.weight  # [d, H k]
        o.zero_()
        o[16:24, :8] = torch.randn(8, 8)
        o[24:32, 8:16] = torch.randn(8, 8)
        for layer in hf.model.layers:
            layer.mlp.down_proj.weight.zero_()
        k = hf.model.layers[1].self_attn.k_proj.weight
        k[:, :16] = 0
        k[:, 24:] = 0
    return model


def test_hand_built_key_reads_one_head():
    model = _hand_built()
    r = ak.score_attribution(model, TEXT, layer=1, head=0, queries=[9], dense=True)
    t = r.table
    by_key = t.groupby("key_component", observed=True)["contribution"].apply(lambda v: v.abs().sum())
    assert by_key.idxmax() == "1-1"
    assert_close(by_key.drop("1-1").to_numpy(), 0, F64, scale=1)  # exact zeros
    assert by_key["1-1"] > 1
    share = t.loc[t["key_component"] == "1-1", "contribution"].sum() / t["contribution"].sum()
    assert_close(share, 1.0, F64, scale=1)


def _stripe(length):
    """Induction stripe of ``[bos] r r``: query 1 + length + t, key 2 + t."""
    return [(1 + length + t, 2 + t) for t in range(length - 1)]


def test_toy_induction_heads_read_token_embedding_against_previous_token_head(toy):
    length = 50
    ids = ak.induction_inputs(toy, 1, length, seed=0)[0]
    for head in (0, 1):
        r = ak.score_attribution(toy, ids, layer=1, head=head, pairs=_stripe(length),
                                 aggregate="sum")
        best = r.table.loc[r.table["contribution"].idxmax()]
        assert (best["query_component"], best["key_component"]) == ("embed", "1-1")
        share = best["contribution"] / r.meta["scores"]["score"].sum()
        assert share > 0.8  # measured 0.89 (2-1) and 0.90 (2-2): docs/results.md


def test_toy_k_composition_known_answer(toy):
    comp = ak.composition(toy, progress=False)
    t = comp.table
    p99 = comp.meta["baseline"]["k"]["p99"]
    for th in (0, 1):
        into = t.xs((1, th), level=("target_layer", "target_head"))["k"]
        assert into.idxmax() == (0, 0)  # previous-token head 1-1
        assert into.loc[(0, 0)] > p99
    assert t["k"].idxmax()[:2] == (0, 0)
    assert set(comp.meta["baseline"]) == {"q", "k", "v"}


def test_composition_matches_dense_definition():
    """The k x k Gram formulation equals ‖W_QK W_OV‖_F / (‖W_QK‖_F ‖W_OV‖_F) of the d x d
    matrices (Elhage et al. 2021), norms folded."""
    from attnkit.runtime.weights import head_weights

    model = tiny_model("gpt2", layers=2, heads=2, hidden=16)
    comp = ak.composition(model, samples=8, progress=False)
    w0, w1 = head_weights(model, 0), head_weights(model, 1)
    n0, n1 = w0.norm, w1.norm
    for s in range(2):
        ov_s = w0.wo[s] @ n0.matrix(w0.wv[s])
        for t in range(2):
            qk = n1.matrix(w1.wq[t]).T @ n1.matrix(w1.wk[t])
            ov_t = w1.wo[t] @ n1.matrix(w1.wv[t])
            f = torch.linalg.matrix_norm
            want = {"q": f(qk.T @ ov_s) / (f(qk) * f(ov_s)),
                    "k": f(qk @ ov_s) / (f(qk) * f(ov_s)),
                    "v": f(ov_t @ ov_s) / (f(ov_t) * f(ov_s))}
            row = comp.table.loc[(0, s, 1, t)]
            for kind in "qkv":  # float32 products against float64: 1e-5 relative
                np.testing.assert_allclose(row[kind], float(want[kind]), rtol=1e-4)


def test_bad_input_names_what_is_possible(models):
    model = models["llama"]
    with pytest.raises(InputError, match=r"layer 2 is outside 0\.\.1"):
        ak.score_attribution(model, TEXT, layer=2, head=0)
    with pytest.raises(InputError, match=r"head 4 is outside 0\.\.3"):
        ak.score_attribution(model, TEXT, layer=0, head=4)
    with pytest.raises(InputError, match=r"queries \[99\] outside 0\.\."):
        ak.score_attribution(model, TEXT, layer=0, head=0, queries=[99])
    with pytest.raises(InputError, match="its components are: embed, 1-1"):
        ak.score_attribution(model, TEXT, layer=1, head=0, components=["pos_embed"])
    with pytest.raises(InputError, match="'heads', 'layers', 'dims'"):
        ak.score_attribution(model, TEXT, layer=1, head=0, components="neurons")
    with pytest.raises(InputError, match="mask keeps query 2 from key 5"):
        ak.score_attribution(model, TEXT, layer=1, head=0, pairs=[(2, 5)])
    other = tiny_model("llama")
    eager = Model(other.hf, other.tokenizer, name="eager", capture="eager")
    with pytest.raises(UnsupportedModelError, match="eager attention path"):
        ak.score_attribution(eager, TEXT, layer=0, head=0)
    with pytest.raises(InputError, match="composition needs two"):
        ak.composition(tiny_model("bert", layers=1), progress=False)


def test_score_view_sends_bytes_and_follows_heads(models):
    model = models["llama"]
    r = ak.score_attribution(model, TEXT, layer=1, head=1, queries=[8], top=3)
    view = ak.ScoreView(r, top=3)
    state = view.get_state()
    for trait in ("scores", "seg_query", "seg_key", "seg_value", "dims"):
        assert isinstance(state[trait]["buffer"], (bytes, memoryview)), trait
    assert view.n_segments == 4 and len(view.key_positions) == 9
    heatmap = view.link(ak.Heatmap(model.attend(TEXT)))
    view.clicked = [0, 2]
    assert (heatmap.layer, heatmap.head) == (0, 2)
    assert view.to_png()[:4] == b"\x89PNG"
    with pytest.raises(InputError, match="not aggregated"):
        ak.ScoreView(ak.score_attribution(model, TEXT, layer=1, head=1, aggregate="sum"))


def test_composition_widget_is_a_source_by_target_map():
    """composition(...).widget(): a HeadMap whose rows are the writing heads and columns the
    reading heads, each cell the table's score, blank where the source is not earlier."""
    from attnkit.widgets import HeadMap

    model = tiny_model("llama", layers=3, heads=2)
    comp = ak.composition(model, samples=4, progress=False)
    view = comp.widget(kind="q")
    assert isinstance(view, HeadMap)
    assert view.row_labels == ["1-1", "1-2", "2-1", "2-2"]
    assert view.col_labels == ["2-1", "2-2", "3-1", "3-2"]
    assert (view.row_title, view.col_title) == ("source", "target")
    grid = view.table
    for (sl, sh, tl, th), row in comp.table.iterrows():
        assert grid[sl * 2 + sh, (tl - 1) * 2 + th] == row["q"]
    assert np.isnan(grid[2, 0]) and np.isnan(grid[3, 1])  # layer 2 -> layer 2: no pair
    assert np.isfinite(grid).sum() == len(comp.table)
    assert view.to_png()[:4] == b"\x89PNG"
    assert "source" in view._alt_text()
    with pytest.raises(InputError, match="'q', 'k' or 'v'"):
        comp.widget(kind="x")
    # every result that has a view opens it (the view layer fills the core's registry)
    assert isinstance(ak.score_attribution(model, TEXT, layer=1, head=0, queries=[3]).widget(), ak.ScoreView)
    emb = ak.qk_embedding(model.attend(TEXT), heads=[(1, 0)], method="pca", progress=False)
    assert isinstance(emb.widget(head=0, layer=1), ak.QKScatter)
    with pytest.raises(InputError, match="no widget"):
        ak.Result(pd.DataFrame({"uas": [0.5]})).widget()
    with pytest.raises(InputError, match="row_labels has 1 labels"):
        HeadMap(np.zeros((2, 2)), row_labels=["a"])


@pytest.mark.parametrize("kind", ["bert", "llama"])
def test_top_terms_among_candidates_are_the_dense_terms(models, kind):
    """Per-pair top terms (exact, and among the largest-norm candidates a side, on the grid
    and on explicit pairs) are the dense terms at the components they name; each pair still
    sums to its score, and the exact choice keeps the largest |terms|."""
    model = models[kind]
    grid = dict(layer=1, head=2, queries=[6, 9])
    dense = ak.score_attribution(model, TEXT, **grid, dense=True)
    terms = dense.meta["terms"]  # [pairs, C_q, C_k], pairs in the order of meta["scores"]
    names = dense.meta["query_components"]
    where = {(int(q), int(k)): i for i, (q, k) in
             enumerate(zip(dense.meta["scores"]["query"], dense.meta["scores"]["key"]))}
    pairs = [(9, 2), (6, 6), (9, 9)] if kind == "llama" else [(9, 12), (6, 0), (9, 3)]
    runs = {"exact": ak.score_attribution(model, TEXT, **grid, top=3),
            "grid": ak.score_attribution(model, TEXT, **grid, top=3, candidates=2),
            "pairs": ak.score_attribution(model, TEXT, layer=1, head=2, pairs=pairs, top=3,
                                          candidates=2)}
    assert runs["exact"].meta["top_exact"] and runs["exact"].meta["candidates"] is None
    assert not runs["grid"].meta["top_exact"] and runs["grid"].meta["candidates"] == (2, 2)
    for label, r in runs.items():
        t = r.table
        sums = t.groupby(["query", "key"])["contribution"].sum()
        want = r.meta["scores"].set_index(["query", "key"])["score"]
        np.testing.assert_allclose(sums.loc[want.index].values, want.values, atol=1e-4)
        kept = t[t["query_component"] != "rest"]
        assert len(kept) == 3 * r.meta["n_pairs"], label
        for row in kept.itertuples():
            a, b = names.index(row.query_component), names.index(row.key_component)
            # float32 terms against float64 ones: 1e-5 of the pair's largest term
            ref = terms[where[(row.query, row.key)]]
            np.testing.assert_allclose(row.contribution, ref[a, b], atol=1e-5 * np.abs(ref).max())
    for (q, k), g in runs["exact"].table[runs["exact"].table["query_component"] != "rest"].groupby(
            ["query", "key"]):
        ref = np.sort(np.abs(terms[where[(q, k)]]).ravel())[::-1][:3]
        assert_close(np.sort(np.abs(g["contribution"].to_numpy()))[::-1], ref, F32)
    with pytest.raises(InputError, match="candidates must be"):
        ak.score_attribution(model, TEXT, **grid, candidates=0)


def test_composition_map_colours_from_the_baseline_mean():
    """The composition HeadMap's colour scale starts at the random baseline's mean (chance),
    so a value above the baseline's 99th percentile is in the warm part of the scale, not near
    its cold end beside the largest value (issue 28, notebook 05: 0.217-0.312 read cold)."""
    import pandas as pd

    from attnkit.core.results import Result
    from attnkit.widgets import composition_map

    idx = pd.MultiIndex.from_tuples([(0, 0, 1, 0), (0, 1, 1, 0), (0, 0, 1, 1), (0, 1, 1, 1)],
                                    names=["source_layer", "source_head", "target_layer", "target_head"])
    table = pd.DataFrame({"q": [0.03, 0.07, 0.04, 0.08], "k": [0.312, 0.217, 0.310, 0.223],
                          "v": [0.02, 0.05, 0.02, 0.06]}, index=idx)
    base = {kind: {"mean": 0.125, "p95": 0.132, "p99": 0.135} for kind in "qkv"}
    r = Result(table, {"n_layers": 2, "n_heads": 2, "baseline": base})
    view = composition_map(r, kind="k")
    assert view.vmin == 0.125 and "mean 0.12" in view.title
    top = 0.312
    assert (0.217 - view.vmin) / (top - view.vmin) > 0.45  # mid-scale (before: 0, the cold end)
    q = composition_map(r, kind="q")  # every value below chance: the values' own range
    assert q.vmin is None
