"""The attention graph and rollout of an encoder–decoder on hand-built maps (known answers)."""

import numpy as np
import pytest

import attnkit as ak
from attnkit.core.cross import CrossAttention, Seq2SeqAttention
from attnkit.errors import InputError
from tolerances import assert_close, F64

pytestmark = pytest.mark.numerics


def pair():
    """Encoder: 1 layer over 2 source tokens (identity); decoder: 1 layer over 2 target
    tokens; cross-attention: target 0 reads source 1, target 1 reads source 0."""
    enc = ak.Attention.from_maps(np.eye(2)[None, None], ["a", "b"])
    dec = ak.Attention.from_maps(np.array([[[[1.0, 0.0], [0.5, 0.5]]]]), ["<s>", "x"],
                                 causal=True)
    cross = CrossAttention(np.array([[[[0.0, 1.0], [1.0, 0.0]]]]), ["<s>", "x"],
                           ["cls", "word"], [-1, 0], ["x"], ["a", "b"], ["word", "word"], [0, 1],
                           ["a", "b"])
    return Seq2SeqAttention(enc, dec, cross)


def test_rollout_by_hand():
    # decoder row 1: residual 0.5 of self (mixed: [0.25, 0.75]) and 0.5 of cross ([1, 0]);
    # the encoder is the identity, so the cross share lands on the source tokens as it is
    got = ak.seq2seq_rollout(pair(), residual=0.5)
    assert_close(got, [[0.0, 0.5], [0.5, 0.0]], F64, scale=1)
    below, to_encoder = ak.flow.decoder_layer(pair(), 0)
    assert_close(below, [[0.5, 0.0], [0.125, 0.375]], F64, scale=1)
    assert_close(below.sum(1) + to_encoder.sum(1), 1.0, F64, scale=1)


def test_graph_nodes_edges_and_kinds():
    g = ak.attention_graph(pair(), threshold=0.3, sources=[1])
    assert set(g.nodes) == {("decoder", 1, 1), ("decoder", 0, 1), ("encoder", 1, 0),
                            ("encoder", 0, 0)}
    kinds = {(u, v): d["kind"] for u, v, d in g.edges(data=True)}
    assert kinds == {(("decoder", 1, 1), ("decoder", 0, 1)): "decoder",
                     (("decoder", 1, 1), ("encoder", 1, 0)): "cross",
                     (("encoder", 1, 0), ("encoder", 0, 0)): "encoder"}
    assert g.edges[("decoder", 1, 1), ("encoder", 1, 0)]["weight"] == pytest.approx(0.5)
    assert g.graph["source_tokens"] == ["a", "b"] and g.graph["n_encoder_layers"] == 1
    assert g.nodes[("encoder", 0, 0)]["token"] == "a"
    default = ak.flow.seq2seq_graph(pair())
    assert default.graph["source"] == [("decoder", 1, 1)]  # the last target position


def test_bad_input():
    with pytest.raises(InputError, match="heads"):
        ak.attention_graph(pair(), heads=[(0, 0)])
    with pytest.raises(InputError, match="Cross-attention alone"):
        ak.attention_graph(pair().cross)
    with pytest.raises(InputError, match="outside"):
        ak.flow.seq2seq_graph(pair(), sources=[5])
    with pytest.raises(InputError, match="encoder-decoder"):
        ak.seq2seq_rollout(pair().encoder)
    with pytest.raises(InputError, match="residual"):
        ak.seq2seq_rollout(pair(), residual=2.0)
