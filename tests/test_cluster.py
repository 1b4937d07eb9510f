"""Head clustering on hand-built attention whose Jensen–Shannon divergences are known."""

import numpy as np
import pandas as pd

from attnkit.core.results import HeadResult
import pytest

from attnkit import Attention
from attnkit.analysis.cluster import (
    BEHAVIOURS,
    classical_mds,
    embed_heads,
    head_behaviours,
    head_distances,
    uniform_entropy,
)
from attnkit.errors import InputError
from tolerances import assert_close, F32, F32_DEEP, F64

pytestmark = pytest.mark.numerics

LN2 = np.log(2)


def _att(maps, causal=False):
    maps = np.asarray(maps, np.float32)
    n = maps.shape[-1]
    roles = ["cls"] + ["word"] * (n - 2) + ["sep"]
    toks = [f"t{i}" for i in range(n)]
    return Attention(maps=maps, tokens=toks, roles=roles, word_ids=[-1] + list(range(n - 2)) + [-1],
                     words=toks[1:-1], causal=causal)


def _js(p, q):
    """Jensen–Shannon divergence in nats, written out from its definition."""
    m = (p + q) / 2
    kl = lambda a, b: sum(x * np.log(x / y) for x, y in zip(a, b) if x > 0)  # noqa: E731
    return 0.5 * kl(p, m) + 0.5 * kl(q, m)


def test_identical_and_disjoint_heads():
    n = 4
    eye = np.eye(n)
    shifted = np.roll(np.eye(n), 1, axis=1)  # one-hot on a different position in every row
    # one layer, heads: identity, identity again, shifted
    d = head_distances([_att(np.stack([eye, eye, shifted])[None])])
    assert d.shape == (3, 3)
    assert list(d.index) == [(0, 0), (0, 1), (0, 2)]
    assert d.index.names == ["layer", "head"]
    a = d.to_numpy()
    assert a[0, 1] == pytest.approx(0.0, abs=1e-7)
    assert a[0, 2] == pytest.approx(LN2, rel=1e-6)
    assert a[1, 2] == pytest.approx(LN2, rel=1e-6)
    assert_close(a, a.T, F32)
    assert np.all(np.diag(a) == 0)
    dist = head_distances([_att(np.stack([eye, eye, shifted])[None])], kind="distance").to_numpy()
    assert dist[0, 2] == pytest.approx(np.sqrt(LN2), rel=1e-6)
    assert d.meta["n_rows"] == n and d.meta["n_items"] == 1


def test_half_overlap_row():
    # row 0: p = (1, 0, 0), q = (1/2, 1/2, 0), m = (3/4, 1/4, 0):
    # KL(p||m) = ln 4/3, KL(q||m) = ½ ln 4/3, so JS = ¾ ln 4/3; rows 1 and 2 agree (JS 0)
    p = np.array([[1, 0, 0], [0, 1, 0], [0, 0, 1]], float)
    q = np.array([[0.5, 0.5, 0], [0, 1, 0], [0, 0, 1]], float)
    d = head_distances([_att(np.stack([p, q])[None])]).to_numpy()
    assert _js(p[0], q[0]) == pytest.approx(0.75 * np.log(4 / 3))
    assert d[0, 1] == pytest.approx(0.75 * np.log(4 / 3) / 3, rel=1e-5)


def test_matches_brute_force_over_ragged_corpus():
    rng = np.random.default_rng(0)
    L, H = 2, 3
    items = []
    for n in (3, 5, 8, 4):
        maps = rng.dirichlet(np.full(n, 0.3), size=(L, H, n))
        maps[0, 1, 0] = 0
        maps[0, 1, 0, 0] = 1  # exact zeros in a row
        items.append(_att(maps))
    rows = sum(len(a) for a in items)
    brute = np.zeros((L * H, L * H))
    for att in items:
        flat = att.maps.reshape(L * H, len(att), len(att)).astype(np.float64)
        for a in range(L * H):
            for b in range(L * H):
                brute[a, b] += sum(_js(flat[a, r], flat[b, r]) for r in range(len(att)))
    brute /= rows
    for chunk in (1, 40, 10_000):
        got = head_distances(items, chunk=chunk).to_numpy()
        assert_close(got, brute, F32_DEEP)


def test_head_distances_bad_input():
    with pytest.raises(InputError, match="no attention"):
        head_distances([])
    a = _att(np.full((1, 2, 3, 3), 1 / 3))
    b = _att(np.full((1, 3, 3, 3), 1 / 3))
    with pytest.raises(InputError, match="same layers"):
        head_distances([a, b])
    with pytest.raises(InputError, match="kind"):
        head_distances([a], kind="cosine")


def _pairwise(x):
    return np.sqrt(((x[:, None, :] - x[None, :, :]) ** 2).sum(-1))


def test_mds_recovers_a_known_configuration():
    rng = np.random.default_rng(1)
    pts = rng.normal(size=(12, 2)) * [3.0, 1.0]
    d = _pairwise(pts)
    emb = embed_heads(d)
    assert list(emb.columns) == ["x", "y"]
    assert_close(_pairwise(emb.to_numpy()), d, F32)
    assert emb.meta["stress1"] < 1e-6
    assert_close(_pairwise(classical_mds(d)), d, F64)
    # centred, x along the widest spread
    assert_close(emb.mean().to_numpy(), 0, F64, scale=1)
    assert emb["x"].var() >= emb["y"].var()
    # same input, same picture (a rotated copy of the points gives the same embedding)
    theta = 0.7
    rot = np.array([[np.cos(theta), -np.sin(theta)], [np.sin(theta), np.cos(theta)]])
    again = embed_heads(_pairwise(pts @ rot.T + 5))
    assert_close(again.to_numpy(), emb.to_numpy(), F32)


def test_mds_on_non_euclidean_distances_beats_classical_scaling():
    rng = np.random.default_rng(2)
    maps = rng.dirichlet(np.full(6, 0.2), size=(3, 4, 6))
    d = head_distances([_att(maps)])
    emb = embed_heads(d, seed=0)
    assert list(emb.index) == list(d.index)
    dd = d.to_numpy()
    raw = lambda x: ((dd - _pairwise(x)) ** 2).sum() / 2  # noqa: E731
    assert emb.meta["stress"] == pytest.approx(raw(emb.to_numpy()), rel=1e-6)
    assert emb.meta["stress"] <= raw(classical_mds(dd)) + 1e-12
    try:
        from sklearn.manifold import smacof
    except ImportError:
        return
    ref, ref_stress = smacof(dd, n_components=2, metric=True, n_init=8, random_state=0,
                             max_iter=3000, eps=1e-12, normalized_stress=False)
    assert emb.meta["stress"] <= ref_stress * 1.01


def test_embed_bad_input():
    with pytest.raises(InputError, match="square"):
        embed_heads(np.zeros((3, 4)))
    with pytest.raises(InputError, match="symmetric"):
        embed_heads(np.array([[0, 1, 2], [1, 0, 1], [5, 1, 0]], float))
    with pytest.raises(InputError, match="NaN"):
        embed_heads(np.array([[0, 1, np.nan], [1, 0, 1], [np.nan, 1, 0]], float))


def test_uniform_entropy():
    a = _att(np.full((1, 1, 3, 3), 1 / 3))
    b = _att(np.full((1, 1, 5, 5), 1 / 5))
    assert uniform_entropy([a, b]) == pytest.approx((np.log(3) + np.log(5)) / 2)
    c = _att(np.tril(np.ones((4, 4)))[None, None] / np.arange(1, 5)[:, None], causal=True)
    assert uniform_entropy([c]) == pytest.approx(np.mean(np.log([1, 2, 3, 4])))


def test_behaviour_labels_on_hand_made_stats():
    cols = ["cls", "sep", "punct", "self", "next", "prev", "entropy", "cls_entropy"]
    rows = {
        (0, 0): [0.05, 0.10, 0.10, 0.1, 0.1, 0.1, 2.5, 2.0],   # broad: 2.5 > 0.78 * 3
        (0, 1): [0.0, 0.1, 0.0, 0.0, 0.0, 0.8, 0.5, 0.5],      # previous
        (0, 2): [0.0, 0.1, 0.0, 0.0, 0.7, 0.1, 0.5, 0.5],      # next
        (1, 0): [0.7, 0.1, 0.0, 0.0, 0.0, 0.0, 0.5, 0.5],      # [CLS]
        (1, 1): [0.0, 0.9, 0.0, 0.0, 0.0, 0.0, 0.3, 0.5],      # [SEP]
        (1, 2): [0.0, 0.0, 0.65, 0.0, 0.0, 0.6, 0.3, 0.5],     # punctuation beats previous
        (2, 0): [0.3, 0.3, 0.3, 0.0, 0.0, 0.0, 1.0, 0.5],      # other
        (2, 1): [0.0, 0.61, 0.0, 0.0, 0.0, 0.0, 2.9, 0.5],     # [SEP] beats broad
        (2, 2): [0.0, 0.2, 0.0, 0.0, 0.5, 0.5, 1.0, 0.5],      # 0.5 is not > 0.5: other
    }
    idx = pd.MultiIndex.from_tuples(list(rows), names=["layer", "head"])
    stats = pd.DataFrame(list(rows.values()), index=idx, columns=cols)
    got = head_behaviours(stats, uniform_entropy=3.0)
    assert list(got) == ["broad", "previous", "next", "[CLS]", "[SEP]", "punctuation",
                         "other", "[SEP]", "other"]
    assert list(got.cat.categories) == list(BEHAVIOURS)
    assert got.index.equals(stats.index)
    # the entropy threshold is relative to the uniform entropy
    assert head_behaviours(stats, uniform_entropy=4.0).loc[(0, 0)] == "other"
    assert head_behaviours(HeadResult(stats, {"uniform_entropy": 3.0})).loc[(0, 0)] == "broad"
    with pytest.raises(InputError, match="uniform_entropy"):
        head_behaviours(stats)
    with pytest.raises(InputError, match="missing"):
        head_behaviours(stats.drop(columns=["prev"]), uniform_entropy=3.0)


def test_cluster_pipeline_on_a_tiny_model():
    pytest.importorskip("torch")
    from attnkit import extract, head_stats
    from attnkit.testing import CORPUS, tiny_model

    model = tiny_model("bert", layers=2, heads=4)
    sset = extract(model, CORPUS, progress=False)
    d = head_distances(sset)
    assert d.shape == (8, 8)
    assert np.all(d.to_numpy() >= 0) and np.all(d.to_numpy() <= LN2)
    emb = embed_heads(d)
    beh = head_behaviours(head_stats(sset), uniform_entropy=uniform_entropy(sset))
    assert emb.index.equals(beh.index)
