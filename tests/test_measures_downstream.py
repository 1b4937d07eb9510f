"""Measures go wherever an Attention goes: head_stats, rollout, flow, attention_graph,
compare, extract/AttentionSet, relation_heads."""

from dataclasses import replace

import numpy as np
import pytest
from tolerances import assert_close, F32

pytest.importorskip("torch")

import attnkit as ak
from attnkit.core.headstats import item_stats
from attnkit.core.attention import Attention
from attnkit.errors import InputError, StoreError
from attnkit.runtime.measures import mixed
from attnkit.testing import CORPUS, tiny_model

pytestmark = pytest.mark.numerics

TEXT = CORPUS[0]


@pytest.fixture(scope="module")
def bert():
    return tiny_model("bert")


def _norm_att():
    """A hand-set 'norm' attention: 1 layer, 1 head, 3 tokens; rows do not sum to 1."""
    maps = np.array([[[[2.0, 1.0, 1.0], [0.0, 3.0, 1.0], [4.0, 0.0, 0.0]]]])
    return Attention.from_maps(maps, ["[CLS]", "cat", "[SEP]"], measure="norm")


def test_head_stats_read_shares_of_each_row():
    att = _norm_att()
    s = item_stats(att)[0, 0]
    # attention to [CLS]: rows' shares 2/4, 0/4, 4/4 -> mean 0.5
    assert s[0] == pytest.approx(0.5)
    assert s[1] == pytest.approx((0.25 + 0.25 + 0.0) / 3)  # to [SEP]
    assert s[3] == pytest.approx((0.5 + 0.75 + 0.0) / 3)  # self


def test_rollout_and_flow_of_a_measure_use_row_shares():
    att = _norm_att()
    shares = att.maps / att.maps.sum(-1, keepdims=True)
    as_weights = replace(att, maps=shares, measure="weights")
    assert_close(ak.rollout(att), ak.rollout(as_weights), F32)
    assert_close(ak.attention_flow(att, sources=0), ak.attention_flow(as_weights, sources=0), F32)
    g = ak.attention_graph(att, threshold=0.4)  # [CLS]'s shares: 0.5, 0.25, 0.25
    assert set(g.edges) == {((1, 0), (0, 0))}
    assert g.edges[(1, 0), (0, 0)]["weight"] == pytest.approx(0.5)


def test_alti_rolls_out_without_identity(bert):
    att = bert.attend(TEXT, measure="alti")
    expected = att.maps[1, 0].astype(np.float64) @ att.maps[0, 0].astype(np.float64)
    assert_close(ak.rollout(att, residual=0.0), expected, F32, scale=1)
    assert_close(ak.rollout(att, residual=0.0).sum(-1), 1.0, F32, scale=1)


def test_signed_measure_is_refused_where_probabilities_are_needed(bert):
    att = bert.attend(TEXT, measure="grad×attn")
    with pytest.raises(InputError, match="signed"):
        ak.rollout(att)
    with pytest.raises(InputError, match="signed"):
        ak.attention_graph(att)


def test_compare_two_measures_on_one_model(bert):
    w = bert.attend(TEXT)
    n = bert.attend(TEXT, measure="norm")
    c = ak.compare(w, n, names=("weights", "norm"))
    assert c.names == ("weights", "norm") and len(c.heads) == bert.n_layers * bert.n_heads
    assert (c.heads["jsd"] >= 0).all()
    alti = bert.attend(TEXT, measure="alti")
    c2 = ak.compare(mixed(w), alti, names=("weights (mixed)", "alti"))
    assert len(c2.heads) == bert.n_layers


def test_extract_stores_the_measure(bert, tmp_path):
    items = CORPUS[:4]
    s = ak.extract(bert, items, measure="norm", level="token", store=tmp_path / "norm",
                   progress=False)
    assert s.measure == "norm" and s[0].measure == "norm"
    direct = bert.attend(items[0], measure="norm").maps
    np.testing.assert_allclose(s[0].maps, direct, rtol=2e-3, atol=2e-3)  # float16 store
    again = ak.AttentionSet.open(tmp_path / "norm")
    assert again.measure == "norm" and again.n_heads == bert.n_heads
    with pytest.raises(StoreError, match="measure 'norm' vs 'weights'"):  # never mixed
        ak.extract(bert, items, level="token", store=tmp_path / "norm", progress=False)
    assert ak.open_store(tmp_path / "norm").measure == "norm"  # the store is left as it was
    a = ak.extract(bert, items, measure="alti", progress=False)
    assert a.n_heads == 1 and a[1].maps.shape[1] == 1
    stats = ak.head_stats(a)
    assert len(stats) == bert.n_layers


def test_relation_heads_on_a_measure_read_the_argmax(bert):
    """Syntax heads use each row's argmax, which a measure's row shares do not change: on
    maps scaled row by row the table is the same as on the shares."""
    tb = ak.read_conllu(ak.data.sample_treebank())
    norm = ak.extract(bert, tb, measure="norm", progress=False)
    shares = [replace(a, maps=a.maps / a.maps.sum(-1, keepdims=True), measure="weights")
              for a in norm]
    a = ak.relation_heads(norm, tb, min_count=1)
    b = ak.relation_heads(shares, tb, min_count=1)
    assert a["accuracy"].tolist() == pytest.approx(b["accuracy"].tolist())
    assert list(a.index) == list(b.index)
