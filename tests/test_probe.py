"""Dependency probes and tree decoding: known solutions on hand-built attention."""

from __future__ import annotations

import numpy as np
import pytest

from _syntax_fixtures import attention, gold_positions, pointing, sentence
from attnkit.analysis.probe import AttentionProbe
from attnkit.analysis.tree import max_spanning_tree
from attnkit.errors import InputError

L, H, D = 2, 3, 6


def random_tree(m: int, rng) -> np.ndarray:
    """1-based heads (0 = root) of a random tree over m words."""
    order = rng.permutation(m)
    heads = np.zeros(m, np.int64)
    for k, j in enumerate(order[1:], 1):
        heads[j] = order[rng.integers(0, k)] + 1
    return heads


def corpus(n_sent: int, seed: int, *, heads_fn=random_tree, informative=(0, 1), emb=True):
    """Sentences with random trees; head ``informative`` points every word to its gold
    head (the root word to [CLS]); every other head is noise."""
    rng = np.random.default_rng(seed)
    tb, atts = [], []
    for s in range(n_sent):
        m = int(rng.integers(3, 11))
        heads = heads_fn(m, rng)
        upos = ["PUNCT" if j == m - 1 else "NOUN" for j in range(m)]
        rows = [(f"w{j}", upos[j], int(heads[j]), "dep" if heads[j] else "root") for j in range(m)]
        sent = sentence(f"c{seed}-{s}", rows)
        n = m + 2
        maps = rng.uniform(0.05, 1.0, size=(L, H, n, n))
        if informative is not None:
            t = np.arange(n)
            t[1:-1] = gold_positions(sent)
            maps[informative] = pointing(t, n, weight=20.0, rng=rng)
        e = rng.normal(size=(n, D)) if emb else None
        tb.append(sent)
        atts.append(attention(sent, maps, e))
    return atts, tb


def right_branching(m, rng):
    return np.array([j + 2 for j in range(m - 1)] + [0])


def is_tree(heads: np.ndarray) -> bool:
    if (heads == 0).sum() != 1:
        return False
    for j in range(len(heads)):
        seen, v = set(), j + 1
        while v != 0:
            if v in seen:
                return False
            seen.add(v)
            v = heads[v - 1]
    return True


@pytest.mark.parametrize("kind", ["attn", "attn+emb"])
def test_probe_finds_the_head_that_points_to_the_gold_head(kind):
    train, dev, test = corpus(60, 0), corpus(20, 1), corpus(30, 2)
    probe = AttentionProbe(kind, epochs=15, budget=1000, lr=0.1, progress=False)
    probe.fit(*train, select_on=dev)
    ev = probe.evaluate(*test)
    assert ev.loc["argmax", "uas"] == 1.0
    assert ev.loc["mst", "uas"] == 1.0
    assert probe.score(*test) == 1.0
    # the learned weight of that map (dep→head reading) dominates the others
    if kind == "attn":
        w = probe.module_.w.detach().numpy()
        K = L * H
        informative = 0 * H + 1
        assert np.argmax(w[:K]) == informative
    preds = probe.predict(test[0])
    for p, sent in zip(preds, test[1]):
        assert np.array_equal(p, sent.heads)


def test_attention_only_probe_fails_without_informative_head():
    train, test = corpus(40, 0, informative=None), corpus(20, 2, informative=None)
    probe = AttentionProbe("attn", epochs=10, progress=False).fit(*train)
    assert probe.score(*test) < 0.6


def test_distance_baseline_learns_right_branching():
    train = corpus(40, 0, heads_fn=right_branching, informative=None)
    test = corpus(20, 1, heads_fn=right_branching, informative=None)
    probe = AttentionProbe("dist+emb", epochs=15, budget=500, progress=False).fit(*train)
    assert probe.score(*test) == 1.0
    assert probe.n_maps_ == 0  # uses no attention


def test_mst_decoding_gives_well_formed_trees():
    train, test = corpus(30, 0, informative=None), corpus(30, 3, informative=None)
    probe = AttentionProbe("attn", epochs=1, progress=False).fit(*train)
    argmax = probe.predict(test[0], decode="argmax")
    mst = probe.predict(test[0], decode="mst")
    assert all(is_tree(p) for p in mst)
    assert not all(is_tree(p) for p in argmax)  # the untrained argmax makes non-trees
    assert list(probe.history_.columns) == ["loss"]


def test_truncated_words_get_no_prediction():
    atts, tb = corpus(20, 0)
    probe = AttentionProbe("attn", epochs=3, progress=False).fit(atts, tb)
    sent = tb[0]
    m = len(sent)
    att = atts[0]
    keep = list(range(m))  # positions 1..m-1 survive, word m-1 is cut away
    n = m + 1
    maps = np.concatenate([att.maps[:, :, :m], att.maps[:, :, -1:]], axis=2)
    maps = np.concatenate([maps[..., :m], maps[..., -1:]], axis=3)
    cut = type(att)(maps=maps / maps.sum(-1, keepdims=True), tokens=att.tokens[:m] + ["[SEP]"],
                    roles=np.array(["cls"] + ["word"] * (m - 1) + ["sep"]),
                    word_ids=np.array([-1, *range(m - 1), -1]), words=att.words, level="word",
                    embeddings=np.concatenate([att.embeddings[:m], att.embeddings[-1:]]),
                    meta=att.meta, truncated=True)
    assert len(keep) == n - 1
    p = probe.predict([cut])[0]
    assert p.shape == (m,) and p[-1] == -1 and (p[:-1] >= 0).all()


def test_bad_input():
    atts, tb = corpus(5, 0)
    with pytest.raises(InputError, match="not fitted"):
        AttentionProbe().predict(atts)
    with pytest.raises(InputError, match="kind"):
        AttentionProbe("glove").fit(atts, tb)
    with pytest.raises(InputError, match="decode"):
        AttentionProbe(decode="viterbi").fit(atts, tb)
    no_emb, tb2 = corpus(5, 0, emb=False)
    with pytest.raises(InputError, match="embeddings=True"):
        AttentionProbe("attn+emb", progress=False).fit(no_emb, tb2)
    with pytest.raises(InputError, match="pair"):
        AttentionProbe("attn", progress=False).fit(atts, tb, select_on=atts)
    fitted = AttentionProbe("attn", epochs=1, progress=False).fit(atts, tb)
    other = [a.select(layers=[0]) for a in atts]
    with pytest.raises(InputError, match="maps"):
        fitted.score(other, tb)


def test_init_does_no_work():
    p = AttentionProbe("attn", epochs=0)  # invalid values are only checked by fit
    assert not hasattr(p, "module_")
    with pytest.raises(InputError, match="epochs"):
        p.fit(*corpus(3, 0))


# ------------------------------------------------------------------ trees
def _networkx_tree(scores: np.ndarray) -> np.ndarray:
    import networkx as nx

    m = scores.shape[0]
    g = nx.DiGraph()
    penalty = 1e3
    for j in range(m):
        g.add_edge(0, j + 1, weight=scores[j, 0] - penalty)
        for i in range(m):
            if i != j:
                g.add_edge(i + 1, j + 1, weight=scores[j, i + 1])
    heads = np.zeros(m, np.int64)
    for a, b in nx.maximum_spanning_arborescence(g).edges():
        heads[b - 1] = a
    return heads


def _total(scores, heads):
    return sum(scores[j, h] for j, h in enumerate(heads))


def test_mst_matches_networkx_on_random_scores():
    rng = np.random.default_rng(0)
    for _ in range(150):
        m = int(rng.integers(1, 9))
        s = rng.normal(size=(m, m + 1)) * rng.choice([0.1, 1.0, 5.0])
        mine = max_spanning_tree(s)
        assert is_tree(mine)
        assert _total(s, mine) == pytest.approx(_total(s, _networkx_tree(s)))


def test_mst_breaks_a_cycle_and_keeps_one_root():
    # columns: ROOT, word 0, word 1, word 2. Words 0 and 1 prefer each other (a cycle) and
    # word 2 prefers ROOT. Best single-root tree, by hand: 0 <- ROOT, 1 <- 0, 2 <- 0
    # (log-score -4.04, against -5.07 for 2 <- ROOT, 0 <- 1, 1 <- 2).
    p = np.array([
        [0.30, 0.0, 0.70, 0.0],
        [0.01, 0.98, 0.0, 0.00999],
        [0.90, 0.06, 0.04, 0.0],
    ])
    s = np.log(p + 1e-8)
    assert max_spanning_tree(s).tolist() == [0, 1, 1]
    # without the single-root constraint words 0 and 2 both hang from ROOT
    assert max_spanning_tree(s, single_root=False).tolist() == [0, 1, 0]
    with pytest.raises(InputError, match="shape"):
        max_spanning_tree(np.zeros((3, 3)))


def test_probe_data_is_read_once_and_gives_the_same_probe():
    from attnkit.analysis.probe import probe_data

    train, test = corpus(20, 0), corpus(10, 1)
    a = AttentionProbe("attn+emb", epochs=2, progress=False).fit(*train)
    data = probe_data(*train)
    b = AttentionProbe("attn+emb", epochs=2, progress=False).fit(data)
    assert np.allclose(a.history_["loss"], b.history_["loss"])
    assert a.score(*test) == b.score(probe_data(*test))
    with pytest.raises(InputError, match="alone"):
        AttentionProbe("attn").fit(data, train[1])
    no_emb = probe_data(*train, embeddings=False)
    with pytest.raises(InputError, match="no embeddings"):
        AttentionProbe("attn+emb").fit(no_emb)
    unlabelled = probe_data(train[0])
    with pytest.raises(InputError, match="gold trees"):
        AttentionProbe("attn").fit(unlabelled)
    assert len(b.predict(unlabelled)) == len(train[1])
