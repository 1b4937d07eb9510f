"""Relation heads and score attribution over a checkpoint series (issue 31, item 2): the
values at the last checkpoint are the direct functions' on the final model, and a hand-built
head that is made to attend to each word's gold head goes from accuracy 0 to 1."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

import attnkit as ak
from attnkit.errors import InputError
from attnkit.testing import tiny_model
from attnkit.toys import induction as toy
from tolerances import F32, assert_close

pytestmark = pytest.mark.numerics

SMALL = dict(vocab_size=16, hidden=16, start_length=8, max_length=8, tokens_per_step=64)


@pytest.fixture(autouse=True)
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)  # two threads on two shared cores spin-wait
    yield
    torch.set_num_threads(before)


def _hadamard(n: int) -> np.ndarray:
    h = np.ones((1, 1))
    while len(h) < n:
        h = np.block([[h, h], [h, -h]])
    return h


def _pointing_model(sentence, targets):
    """A one-layer BERT whose head (0, 0) sends every token of word ``w`` to the first token
    of word ``targets[w]`` (a word index, or None: the token itself), built by hand.

    Position ``p`` enters as row ``p + 1`` of a Hadamard matrix (mean 0, variance 1: the
    embedding LayerNorm leaves it as is; word and type embeddings are 0), so with
    ``W_Q[c] = C h_{c+1} / d`` and ``W_K[c] = h_{g(c)+1} / d`` the query of position ``i`` is
    ``C e_i`` and its score against key ``j`` is ``C [j = g(i)] / sqrt(k)``."""
    d = 64
    model = tiny_model("bert", layers=1, heads=2, hidden=d)
    enc = model.encode(sentence)
    first = {}
    for p, w in enumerate(enc.word_ids):
        if w >= 0:
            first.setdefault(w, p)
    goal = [p if w < 0 or targets[w] is None else first[targets[w]]
            for p, w in enumerate(enc.word_ids)]
    h = _hadamard(d)
    hf = model.hf
    with torch.no_grad():
        emb = hf.embeddings
        emb.word_embeddings.weight.zero_()
        emb.token_type_embeddings.weight.zero_()
        n_pos = emb.position_embeddings.weight.shape[0]
        emb.position_embeddings.weight.copy_(torch.tensor(h[1 + np.arange(n_pos) % (d - 1)]))
        emb.LayerNorm.weight.fill_(1.0)
        emb.LayerNorm.bias.zero_()
        att = hf.encoder.layer[0].attention.self
        strength = 200.0 * np.sqrt(d // 2)
        wq, wk = np.zeros((d, d)), np.zeros((d, d))
        for c, g in enumerate(goal):  # head 0's rows are the first d / 2 outputs
            wq[c] = strength * h[c + 1] / d
            wk[c] = h[g + 1] / d
        att.query.weight[: d // 2] = torch.tensor(wq[: d // 2], dtype=torch.float32)
        att.key.weight[: d // 2] = torch.tensor(wk[: d // 2], dtype=torch.float32)
        att.query.bias[: d // 2] = 0
        att.key.bias[: d // 2] = 0
    return model


def test_a_head_made_to_point_at_gold_heads_goes_from_0_to_1(tmp_path):
    tb = ak.read_conllu(ak.data.sample_treebank(), limit=1)  # The cat sat on the mat .
    s = tb[0]
    gold = [int(g) - 1 if g > 0 else None for g in s.heads]  # 0-indexed head word
    wrong = [min(v for v in range(len(s)) if v not in (w, gold[w])) for w in range(len(s))]
    for step, targets in ((1, wrong), (2, gold)):
        model = _pointing_model(s, targets)
        model.hf.save_pretrained(tmp_path / f"checkpoint-{step}")
        model.tokenizer.save_pretrained(tmp_path / f"checkpoint-{step}")
    r = ak.checkpoint_scores(ak.checkpoints(tmp_path), tb, tb, kinds="sink", early=1, late=2,
                             progress=False)
    rel = r.relations
    assert list(rel.index.names) == ["step", "layer", "head"]
    relations = ["all", "det", "case", "nsubj", "obl"]
    assert list(rel.columns) == ["direction", *relations]  # by frequency; punct left out
    dep = rel[rel["direction"] == "dep->head"]
    assert dep.loc[(1, 0, 0), relations].tolist() == [0.0] * 5
    assert dep.loc[(2, 0, 0), relations].tolist() == [1.0] * 5
    assert r.meta["relation_counts"] == {"all": 5, "det": 2, "case": 1, "nsubj": 1, "obl": 1}
    assert r.attribution is None


@pytest.fixture(scope="module")
def finetuned(tmp_path_factory):
    """A short fine-tune of a tiny BERT with checkpoints (the `attnkit finetune` path)."""
    from attnkit.data.pairs import GlueDataset

    torch.set_num_threads(1)
    rows = [(f"{w} the student sat on the mat", i % 2) for i, w in
            enumerate(["yesterday", "today", "now", "then", "here", "there", "so", "and"])]
    data = GlueDataset([r[0] for r in rows], np.array([r[1] for r in rows]), ("a", "b"),
                       task="toy")
    out = tmp_path_factory.mktemp("ft") / "ckpt"
    res = ak.finetune(tiny_model("bert", seed=1), data, epochs=1, batch_size=4,
                      checkpoint_every=1, checkpoint_dir=out, progress=False)
    return ak.checkpoints(out), res.model


def test_final_checkpoint_equals_the_direct_functions(finetuned):
    series, final = finetuned
    tb = ak.read_conllu(ak.data.sample_treebank(), limit=4)
    pairs = [(1, 2), (2, 1), (3, 1)]
    r = ak.checkpoint_scores(series, tb, tb, attribution=pairs, heads=[(1, 1), (0, 0)],
                             early=1, late=2, progress=False)
    assert r.relations.index.get_level_values("step").unique().tolist() == series.steps
    # the model's own float32 maps (ak.extract would store float16: argmax ties may differ)
    direct = ak.analysis.head_accuracy([final.attend(sentence) for sentence in tb], tb)
    pd.testing.assert_frame_equal(r.relations.xs(series.steps[-1], level="step"), direct.table)
    assert r.meta["relation_counts"] == direct.meta["n"]
    # attribution: the summed terms of each head, over the pairs of the four sentences
    last = r.attribution.xs(series.steps[-1], level="step")
    assert last.index.get_level_values("layer").unique().tolist() == [1, 0]  # heads= order
    for layer, head in ((1, 1), (0, 0)):
        want, score = None, 0.0
        for sentence in tb:
            d = ak.score_attribution(final, sentence, layer=layer, head=head, pairs=pairs,
                                     components="layers", aggregate="sum")
            part = d.table.assign(query_component=d.table.query_component.astype(str),
                                  key_component=d.table.key_component.astype(str))
            part = part.groupby(["query_component", "key_component"])["contribution"].sum()
            want = part if want is None else want + part
            score += float(d.meta["scores"]["score"].sum())
        got = last.xs((layer, head), level=["layer", "head"])
        assert set(got.index) == set(want.index)
        assert_close(got["contribution"].to_numpy(), want[got.index].to_numpy(), F32)
        assert_close(got["score"].to_numpy(), np.full(len(got), score), F32)
        assert_close(got["share"].sum(), 1.0, F32)
    assert r.meta["attribution_error"] < 1e-3 * abs(score) + 1e-4
    # every component pair of the "layers" grain: layer 0 sees the embeddings and the bias
    comps = set(last.xs((0, 0), level=["layer", "head"]).index.get_level_values(0))
    assert "1-attn" not in comps and "bias" in comps


def test_attribution_of_the_induction_stripe_at_the_last_step(tmp_path):
    """On the toy decoder: the stripe's terms at the last checkpoint equal
    score_attribution's of the final model (the summary notebook 05 reads)."""
    final = toy.train_induction_model(**SMALL, steps=2, checkpoint_every=2, out=tmp_path / "t",
                                      progress=False)
    inputs = ak.induction_inputs(final, 2, 8, seed=0)
    stripe = [(9 + t, 2 + t) for t in range(7)]
    r = ak.checkpoint_scores(ak.checkpoints(tmp_path / "t"), inputs, attribution=stripe,
                             components="heads", early=2, late=12, progress=False)
    assert r.attribution.index.get_level_values("step").unique().tolist() == [0, 2]
    got = r.attribution.xs((2, 1, 0), level=["step", "layer", "head"])["contribution"]
    total = None
    for x in inputs:
        d = ak.score_attribution(final, x, layer=1, head=0, pairs=stripe, components="heads",
                                 aggregate="sum")
        part = d.table.set_index([d.table.query_component.astype(str),
                                  d.table.key_component.astype(str)])["contribution"]
        total = part if total is None else total + part
    assert "1-1" in set(got.index.get_level_values(0))  # layer 0's heads are components
    assert_close(got.to_numpy(), total[got.index].to_numpy(), F32)


def test_bad_input(finetuned):
    series, _ = finetuned
    tb = ak.read_conllu(ak.data.sample_treebank(), limit=2)
    with pytest.raises(InputError, match="as many sentences as inputs"):
        ak.checkpoint_scores(series, tb, tb[:1], early=1, late=2, progress=False)
    with pytest.raises(InputError, match="gold must be the treebank"):
        ak.checkpoint_scores(series, tb, ["a", "b"], early=1, late=2, progress=False)
    with pytest.raises(InputError, match="attribution"):
        ak.checkpoint_scores(series, tb, attribution="stripe", early=1, late=2, progress=False)
    with pytest.raises(InputError, match="attribution must list"):
        ak.checkpoint_scores(series, tb, attribution=[(1, 2.5)], early=1, late=2, progress=False)
    with pytest.raises(InputError, match="components"):
        ak.checkpoint_scores(series, tb, attribution="all", components="words", early=1, late=2,
                             progress=False)
    with pytest.raises(InputError, match="heads"):
        ak.checkpoint_scores(series, tb, attribution="all", heads=[(2, 0)], early=1, late=2,
                             progress=False)
    with pytest.raises(InputError):  # a pair past the end of the first sentence (9 tokens)
        ak.checkpoint_scores(series, tb, attribution=[(9, 0)], early=1, late=2, progress=False)
