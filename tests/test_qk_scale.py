"""qk_embedding at corpus scale (issue 32): the stratified sample, the placement of the points
outside it, the neighbourhood preservation, streaming a store batch by batch, and bad input."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from tolerances import F16, F32, assert_close

import attnkit as ak
from attnkit.analysis import qk as qkmod
from attnkit.analysis import qkscale
from attnkit.analysis.qk import HeadPoints, embed_head, point_strata, sample_size
from attnkit.analysis.qkscale import (
    neighbourhood_preservation,
    place_knn,
    position_bins,
    stratified_sample,
)
from attnkit.errors import InputError
from attnkit.testing import tiny_model

pytestmark = pytest.mark.numerics


# ------------------------------------------------------------------ the sample
def test_sample_takes_each_stratum_in_proportion_and_spreads_over_it():
    # strata of 600, 300 and 100 rows (in that order of rows); 100 rows asked for
    strata = np.repeat([0, 1, 2], [600, 300, 100])
    idx = stratified_sample(strata, 100, seed=3)
    assert len(idx) == len(np.unique(idx)) == 100
    assert [int((strata[idx] == s).sum()) for s in (0, 1, 2)] == [60, 30, 10]
    # evenly spaced ranks: exactly one row in each block of 10 rows of stratum 0
    first = idx[strata[idx] == 0]
    assert np.bincount(first // 10, minlength=60).tolist() == [1] * 60
    # largest remainders: 5 of 7 rows in strata of 3, 2, 2 -> quotas 2.14, 1.43, 1.43; the
    # row left goes to the largest remainder, the first stratum of a tie
    s = np.repeat([0, 1, 2], [3, 2, 2])
    assert np.bincount(s[stratified_sample(s, 5)], minlength=3).tolist() == [2, 2, 1]
    # seeded: the same seed the same rows, another seed other rows
    assert np.array_equal(stratified_sample(strata, 100, seed=3), idx)
    assert not np.array_equal(stratified_sample(strata, 100, seed=4), idx)
    # every row asked for: every row
    assert np.array_equal(stratified_sample(strata, 1000), np.arange(1000))


def test_strata_are_kind_and_position_range():
    assert position_bins(np.array([0, 1, 2, 3, 4, 7, 8, 15, 16])).tolist() == [0, 1, 1, 2, 2, 3, 3, 4, 4]
    # two items of 5 and 3 positions: queries then keys
    st = point_strata(np.array([0, 5, 8]))
    assert st.tolist() == [0, 1, 1, 2, 2, 0, 1, 1] + [64, 65, 65, 66, 66, 64, 65, 65]


def test_sample_size_rule():
    assert sample_size(None, 10**6, "umap") is None
    assert sample_size("auto", qkscale.AUTO_ABOVE, "umap") is None
    assert sample_size("auto", qkscale.AUTO_ABOVE + 1, "tsne") == qkscale.AUTO_SAMPLE
    assert sample_size("auto", 10**6, "pca") is None          # PCA fits every point
    assert sample_size(500, 500, "umap") is None                # all of them: no sample
    assert sample_size(200, 500, "pca") == 200
    with pytest.raises(InputError, match="sample=501 is larger than the 500 points"):
        sample_size(501, 500, "umap")
    with pytest.raises(InputError, match="at least 10"):
        sample_size(5, 500, "umap")
    for bad in ("half", 0.5, True):
        with pytest.raises(InputError, match="sample must be"):
            sample_size(bad, 500, "umap")


# ------------------------------------------------------------------ placement
def test_knn_placement_anchors_on_the_nearest_fitted_point_and_follows_the_local_map():
    rng = np.random.default_rng(0)
    fitted = rng.normal(size=(300, 3))
    m = np.array([[2.0, 0.0], [0.0, -3.0], [1.0, 1.0]])
    coords = fitted @ m                                      # a linear picture
    # a point equal to a fitted one lands exactly on its picture
    got = place_knn(fitted, coords, fitted[[7, 42]])
    np.testing.assert_array_equal(got, coords[[7, 42]].astype(np.float32))
    pts = rng.normal(size=(200, 3))
    near = np.argmin(((pts[:, None] - fitted[None]) ** 2).sum(-1), axis=1)
    # step 0: on the nearest fitted point's picture
    assert_close(place_knn(fitted, coords, pts, step=0.0), coords[near], F32)
    # the move is linear in the step
    a = place_knn(fitted, coords, pts, step=0.05) - coords[near]
    b = place_knn(fitted, coords, pts, step=0.5) - coords[near]
    assert_close(b, 10 * a, F32)
    # by hand, for a few points: the ridge map fitted on the nearest fitted point's 30 nearest
    # fitted neighbours (itself among them, adding nothing), ridge a tenth of trace / d
    for j in (0, 1, 2, 50, 199):
        l = near[j]
        nb = np.argsort(((fitted - fitted[l]) ** 2).sum(1), kind="stable")[:31]
        dx, dy = fitted[nb] - fitted[l], coords[nb] - coords[l]
        g = dx.T @ dx
        jac = np.linalg.solve(g + 0.1 * np.trace(g) / 3 * np.eye(3), dx.T @ dy)
        assert_close(b[j], 0.5 * (pts[j] - fitted[l]) @ jac, F32)
    # with a linear picture the local maps are the picture's map shrunk by the ridge: the
    # move points the way the picture's map would move the point
    full = (pts - fitted[near]) @ m
    cos = (b * full).sum(1) / np.linalg.norm(b, axis=1) / np.linalg.norm(full, axis=1)
    assert cos.min() > 0.95
    # chunks change nothing (one code path per point)
    np.testing.assert_array_equal(place_knn(fitted, coords, pts, chunk=7), place_knn(fitted, coords, pts))


def _clusters(n_clusters=40, size=11, d=16, seed=0):
    """Tight clusters far apart: every point's 10 nearest neighbours are its cluster mates."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(0, 50, (n_clusters, d))
    return np.repeat(centres, size, axis=0) + rng.normal(0, 0.1, (n_clusters * size, d))


def test_preservation_known_answers():
    x = _clusters()
    assert neighbourhood_preservation(x, 2 * x - 7, k=10) == 1.0
    # a picture that keeps each cluster together but scrambles points inside it still keeps
    # every neighbourhood (the 10 neighbours are the 10 cluster mates)
    rng = np.random.default_rng(1)
    grid = np.stack(np.meshgrid(np.arange(8), np.arange(5)), -1).reshape(-1, 2) * 100.0
    pic = np.repeat(rng.permutation(grid), 11, axis=0) + rng.normal(0, 0.5, (440, 2))
    assert neighbourhood_preservation(pic, x, k=10) == 1.0
    # a picture of the points shuffled: about chance (k / N)
    shuffled = pic[rng.permutation(len(pic))]
    assert neighbourhood_preservation(shuffled, x, k=10) < 0.1
    with pytest.raises(InputError, match="same points"):
        neighbourhood_preservation(x, x[:-1])
    with pytest.raises(InputError, match="k=440"):
        neighbourhood_preservation(x, x, k=440)


def _head(x: np.ndarray, item_len: int = 11) -> HeadPoints:
    """A head whose queries and keys are the rows of ``x`` (queries shifted apart)."""
    n = len(x) // 2
    q, k = x[:n].astype(np.float32), x[n:2 * n].astype(np.float32)
    offsets = np.arange(0, n + 1, item_len, dtype=np.int64)
    if offsets[-1] != n:
        offsets = np.append(offsets, n)
    return HeadPoints(0, 0, q, k, offsets, q.shape[1] ** -0.5, None, False)


def test_sampled_pca_places_by_its_linear_map():
    rng = np.random.default_rng(2)
    # points on a plane in 8-D (plus tiny noise): the axes fitted on a sample are the full ones
    basis = rng.normal(size=(2, 8))
    x = rng.normal(size=(2000, 2)) * [5, 2] @ basis + rng.normal(0, 1e-3, (2000, 8))
    hp = _head(x, item_len=20)
    full, f_full = embed_head(hp, method="pca", dims=2, normalize=False, seed=0, sample=None)
    part, f_part = embed_head(hp, method="pca", dims=2, normalize=False, seed=0, sample=300)
    assert f_full["fitted"] == 2000 and f_part["fitted"] == 300
    # the points lie on a plane: PCA fitted on every point or on a sample maps it isometrically
    # (the sample's axes are rotated within the plane, its centre shifted): every distance kept
    # up to the noise off the plane (1e-3 a coordinate: distances differ by about 1e-2 at most)
    from scipy.spatial.distance import pdist

    d = pdist(x[:400])
    np.testing.assert_allclose(pdist(full.astype(np.float64)[:400]), d, rtol=1e-3, atol=1e-2)
    np.testing.assert_allclose(pdist(part.astype(np.float64)[:400]), d, rtol=1e-3, atol=1e-2)
    assert f_part["preservation"] > 0.9


@pytest.mark.slow
def test_sampled_umap_keeps_well_separated_clusters():
    x = _clusters(n_clusters=60, size=11, d=16)
    hp = _head(x)
    cluster = np.arange(len(x)) // 11

    def own_centre(pic):
        """Share of points nearest their own cluster's centre in the picture."""
        centres = np.stack([pic[cluster == c].mean(0) for c in range(cluster.max() + 1)])
        return float((np.argmin(((pic[:, None] - centres[None]) ** 2).sum(-1), axis=1) == cluster).mean())

    y, f = embed_head(hp, method="umap", dims=2, normalize=False, seed=0, sample=200)
    assert f["fitted"] == 200
    # the clusters stay together: nearly every point's 10 neighbours in the picture are its
    # cluster mates, as in the space (0.945 measured; chance is 10 / 660), and nearly every
    # point is nearest its own cluster's centre (0.979 measured)
    assert neighbourhood_preservation(y, x, k=10) > 0.9
    assert f["preservation"] > 0.9
    assert own_centre(y) > 0.95
    # UMAP's own transform keeps the clusters apart too, less well (0.85 and 0.92 measured)
    y2, _ = embed_head(hp, method="umap", dims=2, normalize=False, seed=0, sample=200,
                       placement="transform")
    assert neighbourhood_preservation(y2, x, k=10) > 0.75
    assert own_centre(y2) > 0.85


# ------------------------------------------------------------------ from a store
TEXTS = ["The cat sat on the mat and looked at the dog.", "We read it all again.",
         "A dog ran.", "Nobody knew where the old road went after the river.", "Yes."]


def test_store_read_batch_by_batch_equals_items(tmp_path, monkeypatch):
    model = tiny_model("llama")
    sset = ak.extract(model, TEXTS, level="token", keep=("maps", "qk"), batch_size=2,
                      store=tmp_path / "s", progress=False)
    # qk_batch holds what qk_states holds, item by item
    for b in range(sset.n_batches):
        items, states = sset.qk_batch(b)
        for i, st in zip(items, states):
            ref = sset.qk_states(int(i))
            np.testing.assert_array_equal(st.queries(1), ref.queries(1))
            assert st.tokens == ref.tokens
    with pytest.raises(InputError, match="batch 9 is outside"):
        sset.qk_batch(9)
    # the streamed store and its items as a list: the same float16 values, the same picture
    stored = ak.qk_embedding(sset, method="pca", progress=False)
    listed = ak.qk_embedding([sset[i] for i in range(len(sset))], method="pca", progress=False)
    # (the same float32 vectors, one PCA: equal up to float32 summation order)
    assert_close(stored.table[["x", "y"]], listed.table[["x", "y"]], F32)
    assert stored.table[["item", "position", "token", "kind"]].equals(listed.table[["item", "position", "token", "kind"]])
    # heads read in groups (one pass over the store each): the same embedding
    monkeypatch.setattr(qkmod, "GATHER_BYTES", 1)
    grouped = ak.qk_embedding(sset, method="pca", progress=False)
    np.testing.assert_array_equal(grouped.table[["x", "y"]], stored.table[["x", "y"]])
    # an item's map is read from the store when asked for: the stored map (this store keeps
    # maps), within float16 of the map computed from its stored queries and keys
    np.testing.assert_array_equal(stored.item_map(3, 1, 0), sset[3].map(1, 0))
    assert_close(stored.item_map(3, 1, 0), qkmod.scores(sset.qk_states(3), 1, 0, causal=True), F16, scale=1)


def test_sampled_embedding_of_a_store_says_how_it_was_made(tmp_path):
    model = tiny_model("gpt2")
    sset = ak.extract(model, TEXTS * 4, level="token", keep="qk", store=tmp_path / "s", progress=False)
    n = int(sset.items()["n"].sum())
    emb = ak.qk_embedding(sset, heads=[(1, 0), (0, 1)], method="pca", sample=60, progress=False)
    assert len(emb.table) == 2 * 2 * n
    m = emb.meta
    assert m["sample"] == 60 and m["n_points"] == 2 * n
    assert "stratified" in m["sampling"] and "linear map" in m["placement"]
    f = emb.faithfulness.table
    assert f["fitted"].tolist() == [60, 60]
    assert ((f["preservation"] >= 0) & (f["preservation"] <= 1)).all()
    assert m["quality"]["mean_preservation"] == pytest.approx(f["preservation"].mean())
    # reproducible: the same seed gives the same picture
    again = ak.qk_embedding(sset, heads=[(1, 0), (0, 1)], method="pca", sample=60, progress=False)
    np.testing.assert_array_equal(again.table[["x", "y"]], emb.table[["x", "y"]])
    full = ak.qk_embedding(sset, heads=[(1, 0)], method="pca", sample=None, progress=False)
    assert full.meta["sample"] is None and full.meta["placement"] is None


def test_bad_input_at_scale(tmp_path):
    model = tiny_model("gpt2")
    sset = ak.extract(model, TEXTS, level="token", keep="qk", store=tmp_path / "s", progress=False)
    n = int(sset.items()["n"].sum())
    with pytest.raises(InputError, match=f"sample={2 * n + 1} is larger than the {2 * n} points"):
        ak.qk_embedding(sset, method="pca", sample=2 * n + 1, progress=False)
    with pytest.raises(InputError, match=r"names \[\(1, 0\)\] more than once"):
        ak.qk_embedding(sset, heads=[(1, 0), (0, 1), (1, 0)], method="pca", progress=False)
    with pytest.raises(InputError, match="placement must be"):
        ak.qk_embedding(sset, method="pca", placement="nearest", progress=False)
    att = model.attend("The cat sat.")
    with pytest.raises(InputError, match="more than once"):
        ak.qk_embedding(att, heads=[(0, 0), (0, 0)], method="pca")
    # one position: one query and one key, two points; no projection of so few
    one = model.attend("a")
    with pytest.raises(InputError, match="needs at least"):
        ak.qk_embedding(one if len(one) == 1 else one, method="umap", sample=None)
    # a store without queries and keys
    ak.extract(model, ["The cat sat."], level="token", store=tmp_path / "m", progress=False)
    with pytest.raises(InputError, match="keeps no queries"):
        ak.qk_embedding(ak.open_store(tmp_path / "m"), method="pca", sample=10)


def test_view_of_a_store_embedding_opens_the_clicked_sentence_from_the_store(tmp_path):
    model = tiny_model("gpt2")
    sset = ak.extract(model, TEXTS * 3, level="token", keep="qk", store=tmp_path / "s", progress=False)
    emb = ak.qk_embedding(sset, heads=[(1, 1)], method="pca", sample=40, progress=False)
    view = ak.QKScatter(emb)
    box = view.linked_heatmap()
    # the drawn point of the query at position 2 of item 4 (hover reads its sentence back)
    i = next(j for j in range(view.n_points)
             if (p := view.point(j))["item"] == 4 and p["kind"] == "query" and p["position"] == 2)
    assert view.point(i)["tokens"] == sset.qk_states(4).tokens
    view.clicked = i
    heat = box.children[0]
    assert type(heat).__name__ == "Heatmap"
    # the map shown is item 4's, recomputed from the queries and keys the store holds
    np.testing.assert_array_equal(heat.matrix, qkmod.scores(sset.qk_states(4), 1, 1, causal=True))


MORE = ["Old maps hung on every wall of the small station.", "Rain came early that year.",
        "She counted the boats twice before leaving.", "Nothing moved in the garden after dark.",
        "They sold bread, fish and a little cheese.", "Why would anyone build a bridge there?"]


@pytest.mark.parametrize("method", ["pca", "umap"])
def test_a_streamed_store_gives_the_in_memory_embedding_holding_one_chunk(tmp_path, monkeypatch, method):
    model = tiny_model("gpt2")
    sset = ak.extract(model, TEXTS + MORE, level="token", keep="qk", batch_size=2,
                      store=tmp_path / "s", progress=False)
    heads = [(1, 0), (0, 1)]
    largest = max(int(sset.items()["n"].iloc[sset.batch_items(b)].sum()) for b in range(sset.n_batches))
    # a test double around the store's chunk reader: the raw vectors of earlier chunks still
    # alive when a chunk is read (weak references: whatever the embedding keeps, it holds)
    import weakref

    real, alive, most = type(sset).qk_head_rows, [], [0]

    def counting(self, b, *, heads, **kw):
        held = sum(len(a) for ref in alive if (a := ref()) is not None) // (2 * len(heads))
        most[0] = max(most[0], held)
        items, lens, rows, labels = real(self, b, heads=heads, **kw)
        alive.extend(weakref.ref(a) for part in rows.values() for a in part.values())
        if len(rows) == 1:  # a keys-only pass: count its arrays twice, like a whole chunk
            alive.extend(weakref.ref(a) for a in rows["keys"].values())
        return items, lens, rows, labels

    monkeypatch.setattr(type(sset), "qk_head_rows", counting)
    monkeypatch.setattr(qkmod, "_gather_store", None)  # never every vector of a head at once
    emb = ak.qk_embedding(sset, heads=heads, method=method, sample=60, progress=False)
    assert most[0] <= largest  # one chunk of raw vectors (the one before) at any read
    assert emb.meta["streamed"] and "stored batch" in emb.meta["chunk"]
    monkeypatch.undo()
    n = int(sset.items()["n"].sum())
    f = emb.faithfulness.table
    for j, hp in enumerate(qkmod.store_head_points(sset, heads, progress=False)):
        # the in-memory path on the same vectors: every point where it put it
        y, ref = embed_head(hp, method=method, dims=2, normalize=True, seed=0, sample=60)
        got = np.c_[emb.table["x"].to_numpy(), emb.table["y"].to_numpy()][2 * n * j:2 * n * (j + 1)]
        assert_close(got, y, F32)
        for col in ("spearman", "nearest_key", "nearest_key_original", "rows"):
            assert f.iloc[j][col] == pytest.approx(ref[col], rel=1e-9)
        # the scored points' neighbours, kept as the points went by: ties may fall otherwise
        assert abs(f.iloc[j]["preservation"] - ref["preservation"]) <= 0.01


@pytest.mark.parametrize("method", ["pca", pytest.param("tsne", marks=pytest.mark.slow), "umap"])
def test_transform_placement_streamed_as_in_memory(tmp_path, monkeypatch, method):
    model = tiny_model("gpt2")
    sset = ak.extract(model, TEXTS + MORE, level="token", keep="qk", batch_size=2,
                      store=tmp_path / "s", progress=False)
    heads = [(1, 0), (0, 1)]
    hps = qkmod.store_head_points(sset, heads, progress=False)
    monkeypatch.setattr(qkmod, "_gather_store", None)  # streamed: never a whole head
    emb = ak.qk_embedding(sset, heads=heads, method=method, sample=60, placement="transform",
                          progress=False)
    monkeypatch.undo()
    assert emb.meta["streamed"]
    n = int(sset.items()["n"].sum())
    xy = np.c_[emb.table["x"].to_numpy(), emb.table["y"].to_numpy()]
    f = emb.faithfulness.table
    for j, hp in enumerate(hps):
        got = xy[2 * n * j:2 * n * (j + 1)]
        y, ref = embed_head(hp, method=method, dims=2, normalize=True, seed=0, sample=60,
                            placement="transform")
        if method != "umap":
            # PCA's linear map and openTSNE's transform place each point by itself: every
            # point where the in-memory path put it
            assert_close(got, y, F32)
            for col in ("spearman", "nearest_key", "nearest_key_original", "rows"):
                assert f.iloc[j][col] == pytest.approx(ref[col], rel=1e-9)
            assert abs(f.iloc[j]["preservation"] - ref["preservation"]) <= 0.01
            continue
        # UMAP's transform places a call's points together (one seeded random stream for
        # their negative samples, edges cut relative to the call's largest weight): the
        # streamed path calls it once a stored batch, the in-memory path once for all. The
        # known answer: the same fit, then UMAP's transform of each stored batch's points
        q, k = qkmod.normalize_qk(hp.queries, hp.keys)
        x = np.concatenate([q, k]).astype(np.float32)
        idx = qkscale.stratified_sample(qkmod.point_strata(hp.offsets), 60, seed=0)
        ys, place = qkmod._fit_projection(x[idx], method="umap", dims=2, seed=0, exact_knn=False)
        want = np.empty_like(got)
        for b in range(sset.n_batches):
            items = sset.batch_items(b)
            rows = np.concatenate([np.arange(hp.offsets[i], hp.offsets[i + 1]) for i in items])
            ids = np.concatenate([rows, rows + n])
            want[ids] = place(x[ids])
        want[idx] = ys  # the fitted points keep their fitted pictures, on both paths
        assert_close(got[idx], y[idx], F32)
        assert_close(got, want, F32)


# ------------------------------------------------------------------ resume, progress, the fit
def test_a_stopped_embedding_of_a_store_resumes_from_the_heads_it_saved(tmp_path, monkeypatch):
    model = tiny_model("gpt2")
    sset = ak.extract(model, TEXTS * 3, level="token", keep="qk", store=tmp_path / "s", progress=False)
    heads = [(1, 0), (0, 1), (1, 1)]
    whole = ak.qk_embedding(sset, heads=heads, method="pca", sample=40, progress=False)
    # a sampled embedding of a store streams its heads in groups that fit (here one head each)
    monkeypatch.setattr(qkmod, "GATHER_BYTES", 1)
    real, calls = qkmod._stream_heads, []

    def stops_at_the_second(aset, heads, **kw):  # one group of heads a call
        calls.extend(heads)
        if len(calls) == 2:
            raise KeyboardInterrupt  # the user stops the run during the second head
        return real(aset, heads, **kw)

    monkeypatch.setattr(qkmod, "_stream_heads", stops_at_the_second)
    with pytest.raises(KeyboardInterrupt):
        ak.qk_embedding(sset, heads=heads, method="pca", sample=40, progress=False, save=tmp_path / "run")
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == [
        "attnkit-qk-embedding.json", "head-1-0.npz"]  # the finished head, nothing half-written
    calls.clear()
    monkeypatch.setattr(qkmod, "_stream_heads", lambda aset, heads, **kw: (calls.extend(heads), real(aset, heads, **kw))[1])
    again = ak.qk_embedding(sset, heads=heads, method="pca", sample=40, progress=False, save=tmp_path / "run")
    assert calls == [(0, 1), (1, 1)]  # the saved head is read back, not recomputed
    np.testing.assert_array_equal(again.table[["x", "y"]], whole.table[["x", "y"]])
    assert again.table[["layer", "head", "item", "position", "token", "kind"]].equals(
        whole.table[["layer", "head", "item", "position", "token", "kind"]])
    assert_close(again.faithfulness.table.drop(columns=["fit_seconds", "place_seconds", "seconds"]),
                 whole.faithfulness.table.drop(columns=["fit_seconds", "place_seconds", "seconds"]), F32)
    calls.clear()
    ak.qk_embedding(sset, heads=heads, method="pca", sample=40, progress=False, save=tmp_path / "run")
    assert calls == []  # everything saved: nothing recomputed
    # other settings, a user's folder, attention in memory: refused, nothing written
    with pytest.raises(InputError, match="other settings.*seed: 0 there, 1 now"):
        ak.qk_embedding(sset, heads=heads, method="pca", sample=40, seed=1, progress=False, save=tmp_path / "run")
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    with pytest.raises(InputError, match="not empty and was not made by qk_embedding"):
        ak.qk_embedding(sset, heads=heads, method="pca", sample=40, progress=False, save=mine)
    assert [p.name for p in mine.iterdir()] == ["notes.txt"]
    with pytest.raises(InputError, match="save= keeps the per-head results of a stored corpus"):
        ak.qk_embedding(model.attend("The cat sat."), method="pca", save=tmp_path / "x")
    assert not (tmp_path / "x").exists()


CLOCK = ["fit_seconds", "place_seconds", "seconds"]


def test_a_store_is_streamed_on_the_dask_workers_as_here(tmp_path, monkeypatch, dask_cluster):
    with dask_cluster(processes=False) as client:  # two worker threads in this process
        model = tiny_model("gpt2")
        sset = ak.extract(model, TEXTS + MORE, level="token", keep="qk", batch_size=2,
                          store=tmp_path / "s", progress=False)
        heads = [(0, 0), (0, 1), (1, 0), (1, 1)]
        here = ak.qk_embedding(sset, heads=heads, method="umap", sample=60, progress=False)
        real, tasks = qkmod._stream_heads, []

        def on_a_worker(aset, heads, **kw):  # each task: a store the worker opened, a group of heads
            tasks.append((aset is sset, list(heads), kw.get("want_items", False)))
            return real(aset, heads, **kw)

        monkeypatch.setattr(qkmod, "_stream_heads", on_a_worker)
        monkeypatch.setattr(qkmod, "_gather_store", None)  # nothing gathered whole, here or there
        there = ak.qk_embedding(sset, heads=heads, method="umap", sample=60, progress=False,
                                client=client)
        assert there.meta["streamed"] and "stored batch" in there.meta["chunk"]
        # at least a task a worker, consecutive heads together, each task its own opened store
        assert len(tasks) >= 2 and sorted(h for _, g, _ in tasks for h in g) == heads
        assert all(not same and not items for same, _, items in tasks)
        assert all(g == heads[heads.index(g[0]):heads.index(g[0]) + len(g)] for _, g, _ in tasks)
        # the same embedding, to the bit: one seed, the same passes, whichever worker ran a head
        pd.testing.assert_frame_equal(there.table, here.table)
        pd.testing.assert_frame_equal(there.faithfulness.table.drop(columns=CLOCK),
                                      here.faithfulness.table.drop(columns=CLOCK))
        # saved as they finish (from this process) and resumed: a saved head is not sent again
        tasks.clear()
        ak.qk_embedding(sset, heads=heads[:1], method="umap", sample=60, progress=False,
                        save=tmp_path / "run")
        tasks.clear()
        again = ak.qk_embedding(sset, heads=heads, method="umap", sample=60, progress=False,
                                client=client, save=tmp_path / "run")
        assert sorted(h for _, g, _ in tasks for h in g) == heads[1:]
        assert sorted(p.name for p in (tmp_path / "run").glob("head-*")) == [
            f"head-{l}-{h}.npz" for l, h in heads]
        pd.testing.assert_frame_equal(again.table, here.table)
        tasks.clear()
        ak.qk_embedding(sset, heads=heads, method="umap", sample=60, progress=False,
                        client=client, save=tmp_path / "run")
        assert tasks == []  # every head saved: only the tokens are read


def test_heads_go_to_the_workers_whole_when_they_cannot_open_the_store(tmp_path, monkeypatch,
                                                                       dask_cluster):
    with dask_cluster(processes=False) as client:  # two worker threads in this process
        model = tiny_model("gpt2")
        heads = [(1, 0), (0, 1)]
        stored = ak.extract(model, TEXTS, level="token", keep="qk", batch_size=2,
                            store=tmp_path / "s", progress=False)
        held = ak.extract(model, TEXTS, level="token", keep="qk", batch_size=2, progress=False)
        here = ak.qk_embedding(stored, heads=heads, method="pca", sample=40, progress=False)
        monkeypatch.setattr(qkmod, "_stream_task", None)  # no task streams
        # a set in this process's memory (no path), and a store the workers do not find
        monkeypatch.setattr(qkmod, "_opens_store", lambda where, key: False)
        for sset in (held, stored):
            there = ak.qk_embedding(sset, heads=heads, method="pca", sample=40, progress=False,
                                    client=client)
            assert not there.meta["streamed"] and there.meta["chunk"] is None
            # the gathered heads' embedding: the streamed one's up to float32 summation order
            assert_close(there.table[["x", "y"]], here.table[["x", "y"]], F32)


@pytest.mark.slow
def test_worker_processes_stream_a_folder_and_are_sent_a_memory_store(tmp_path, dask_cluster):
    model = tiny_model("gpt2")
    heads = [(1, 0), (0, 1), (1, 1)]
    folder = ak.extract(model, TEXTS, level="token", keep="qk", store=tmp_path / "s", progress=False)
    memory = ak.extract(model, TEXTS, level="token", keep="qk", store="memory://qk-dask-test",
                        progress=False)
    here = ak.qk_embedding(folder, heads=heads, method="pca", sample=40, progress=False)
    with dask_cluster(processes=True) as client:
        streamed = ak.qk_embedding(folder, heads=heads, method="pca", sample=40, progress=False,
                                   client=client)
        sent = ak.qk_embedding(memory, heads=heads, method="pca", sample=40, progress=False,
                               client=client)  # another process's memory: not readable there
    assert streamed.meta["streamed"] and not sent.meta["streamed"]
    pd.testing.assert_frame_equal(streamed.table, here.table)
    assert_close(sent.table[["x", "y"]], here.table[["x", "y"]], F32)


def test_progress_within_a_head_shows_the_fit_then_each_placement_chunk(monkeypatch):
    bars = []

    class Bar:
        def __init__(self, items=None, *, show=True, desc="", total=None, unit="item", **kw):
            self.items, self.desc, self.total, self.n, self.descs = items, desc, total, 0, [desc]
            self.show = show
            bars.append(self)

        def __iter__(self):
            for x in self.items:
                self.n += 1
                yield x

        def update(self, k=1):
            self.n += k

        def set_description(self, d):
            self.descs.append(d)

        def close(self):
            pass

    monkeypatch.setattr(qkmod, "_bar", Bar)
    monkeypatch.setattr(qkscale, "_bar", Bar)
    monkeypatch.setattr(qkscale, "CHUNK", 100)
    hp = _head(_clusters(n_clusters=30, size=10, d=8))
    embed_head(hp, method="pca", dims=2, normalize=False, seed=0, sample=50, progress=True)
    (steps,) = bars  # PCA places by its linear map: the steps, no chunks
    assert steps.show
    assert steps.descs == ["head 1-1: fitting 50 points", "head 1-1: placing 250 points", "head 1-1: scoring"]
    assert steps.total == 3 and steps.n == 3
    bars.clear()
    embed_head(hp, method="umap", dims=2, normalize=False, seed=0, sample=50, progress=True)
    steps, chunks = bars
    assert steps.descs == ["head 1-1: fitting 50 points", "head 1-1: placing 250 points", "head 1-1: scoring"]
    assert steps.n == 3
    assert chunks.desc == "placing points" and chunks.n == 3  # 250 points, 100 a chunk
    bars.clear()
    embed_head(hp, method="pca", dims=2, normalize=False, seed=0, sample=50, progress=False)
    assert [b.show for b in bars] == [False]  # progress=False: nothing shown


def _dies_on_the_last_group(where, key, heads, *, size, **options):
    """On a worker (pickled by value): the group holding head (1, 1) waits until the client
    has saved the other heads, then its worker process dies (as one killed for memory)."""
    import os
    import time
    from pathlib import Path

    if (1, 1) in heads:
        folder = Path(os.environ["ATTNKIT_TEST_SAVE"])
        t = time.monotonic()
        while len(list(folder.glob("head-*.npz"))) < 3 and time.monotonic() - t < 120:
            time.sleep(0.05)
        os._exit(1)
    return qkmod._stream_task(where, key, heads, size=size, **options)


@pytest.mark.slow
def test_a_worker_that_dies_mid_run_loses_no_saved_head_and_a_rerun_resumes(tmp_path, monkeypatch,
                                                                            dask_cluster):
    import sys

    import cloudpickle

    from attnkit.errors import ClusterError

    model = tiny_model("gpt2")
    heads = [(0, 0), (0, 1), (1, 0), (1, 1)]
    sset = ak.extract(model, TEXTS + MORE, level="token", keep="qk", batch_size=2,
                      store=tmp_path / "s", progress=False)
    here = ak.qk_embedding(sset, heads=heads, method="pca", sample=60, progress=False)
    run = tmp_path / "run"
    monkeypatch.setenv("ATTNKIT_TEST_SAVE", str(run))  # the workers inherit it
    module = sys.modules[__name__]
    cloudpickle.register_pickle_by_value(module)  # the workers cannot import the tests
    groups = []
    real_groups = qkmod._worker_groups
    monkeypatch.setattr(qkmod, "_worker_groups",
                        lambda *a: (groups.append(g := real_groups(*a)), g)[1])
    try:
        # a worker that dies on a task fails it at once (Dask retries it 3 times by default)
        with dask_cluster(processes=True, config={"distributed.scheduler.allowed-failures": 0}) as client:
            monkeypatch.setattr(qkmod, "_stream_task", _dies_on_the_last_group)
            with pytest.raises(ClusterError) as info:
                ak.qk_embedding(sset, heads=heads, method="pca", sample=60, progress=False,
                                client=client, save=run)
            assert groups[-1] == [[h] for h in heads]  # a head a task; the last one's worker dies
            msg = str(info.value)
            assert "KilledWorker" in msg and "a worker died" in msg
            assert f"Finished and saved in {run}: 3 of 4 heads ((0, 0), (0, 1), (1, 0);" in msg
            assert "not done: (1, 1)." in msg
            assert "again with the same save= (and settings) to resume" in msg
            # the heads finished before the death are on disk, whole, as an uninterrupted run
            # made them; nothing of the lost head
            assert sorted(p.name for p in run.iterdir()) == [
                "attnkit-qk-embedding.json", "head-0-0.npz", "head-0-1.npz", "head-1-0.npz"]
            n = int(sset.items()["n"].sum())
            xy = np.c_[here.table["x"].to_numpy(), here.table["y"].to_numpy()]
            for j, (l, h) in enumerate(heads[:3]):
                with np.load(run / f"head-{l}-{h}.npz") as z:
                    assert_close(z["coords"], xy[2 * n * j:2 * n * (j + 1)], F32)
            # a rerun on a healthy cluster with the same save=: only the lost head is computed
            monkeypatch.undo()
            monkeypatch.setattr(qkmod, "_worker_groups",
                                lambda *a: (groups.append(g := real_groups(*a)), g)[1])
            again = ak.qk_embedding(sset, heads=heads, method="pca", sample=60, progress=False,
                                    client=client, save=run)
            assert groups[-1] == [[(1, 1)]]
    finally:
        cloudpickle.unregister_pickle_by_value(module)
    assert_close(again.table[["x", "y"]], here.table[["x", "y"]], F32)
    assert again.table[["layer", "head", "item", "position", "token", "kind"]].equals(
        here.table[["layer", "head", "item", "position", "token", "kind"]])
    assert_close(again.faithfulness.table.drop(columns=CLOCK),
                 here.faithfulness.table.drop(columns=CLOCK), F32)


def test_a_lost_cluster_names_the_saved_heads_and_a_task_error_passes_through(tmp_path, monkeypatch,
                                                                             dask_cluster):
    with dask_cluster(processes=False) as client:  # two worker threads in this process
        from concurrent.futures import CancelledError

        from attnkit.errors import ClusterError

        model = tiny_model("gpt2")
        heads = [(0, 0), (1, 1)]
        sset = ak.extract(model, TEXTS, level="token", keep="qk", store=tmp_path / "s", progress=False)
        real = qkmod._stream_task

        def lost(where, key, heads, **kw):  # the scheduler dropped the task (a lost connection)
            if (1, 1) in heads:  # once the other head is saved
                import time

                t = time.monotonic()
                while not (tmp_path / "run" / "head-0-0.npz").exists() and time.monotonic() - t < 60:
                    time.sleep(0.02)
                raise CancelledError("lost")
            return real(where, key, heads, **kw)

        def own_error(where, key, heads, **kw):  # the task's own OSError is not the cluster's
            raise OSError("disk full on the worker")

        monkeypatch.setattr(qkmod, "_stream_task", lost)
        with pytest.raises(ClusterError, match=r"CancelledError: lost.*1 of 2 heads \(\(0, 0\);"
                                               r".*not done: \(1, 1\)\..*same save="):
            ak.qk_embedding(sset, heads=heads, method="pca", sample=40, progress=False,
                            client=client, save=tmp_path / "run")
        with pytest.raises(ClusterError, match="were not kept: save=folder keeps"):
            ak.qk_embedding(sset, heads=heads, method="pca", sample=40, progress=False,
                            client=client)
        monkeypatch.setattr(qkmod, "_stream_task", own_error)
        with pytest.raises(OSError, match="disk full on the worker"):
            ak.qk_embedding(sset, heads=[(1, 1)], method="pca", sample=40, progress=False,
                            client=client, save=tmp_path / "run")
        # the heads read here and sent whole (the workers cannot open the store): the same
        monkeypatch.setattr(qkmod, "_opens_store", lambda where, key: False)
        real_embed = qkmod.embed_head

        def lost_head(hp, **kw):
            if (hp.layer, hp.head) == (1, 1):
                import time

                t = time.monotonic()
                while not (tmp_path / "sent" / "head-0-0.npz").exists() and time.monotonic() - t < 60:
                    time.sleep(0.02)
                raise CancelledError("lost")
            return real_embed(hp, **kw)

        monkeypatch.setattr(qkmod, "embed_head", lost_head)
        with pytest.raises(ClusterError, match=r"CancelledError: lost.*1 of 2 heads \(\(0, 0\);"
                                               r".*not done: \(1, 1\)\."):
            ak.qk_embedding(sset, heads=heads, method="pca", sample=40, progress=False,
                            client=client, save=tmp_path / "sent")
        assert sorted(p.name for p in (tmp_path / "sent").glob("head-*")) == ["head-0-0.npz"]
