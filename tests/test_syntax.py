"""Syntax heads: known answers on hand-built treebanks and attention maps."""

from __future__ import annotations

import numpy as np
import pytest

from _syntax_fixtures import SENTENCES, attention, gold_positions, pointing, skip_without, treebank
from attnkit.analysis.syntax import (DIRECTIONS, OFFSETS, head_accuracy, offset_accuracy,
                                     relation_heads, right_branching_uas, word_hits)
from attnkit.core.attention import Attention
from attnkit.errors import InputError

L, H = 2, 2


def build(tb, spec, seed=0):
    """Attention per sentence; ``spec[(layer, head)](sent, n) -> targets [n]`` (map
    positions each row points to); unspecified heads are uniform noise."""
    rng = np.random.default_rng(seed)
    out = []
    for sent in tb:
        n = len(sent) + 2
        maps = rng.uniform(0.05, 1.0, size=(L, H, n, n))
        for (layer, head), fn in spec.items():
            maps[layer, head] = pointing(fn(sent, n), n, rng=rng)
        out.append(attention(sent, maps))
    return out


def to_gold(sent, n):
    t = np.arange(n)  # [CLS]/[SEP] rows point to themselves
    t[1:-1] = gold_positions(sent)
    return t


def to_previous(sent, n):
    return np.maximum(np.arange(n) - 1, 0)


def gold_but_det_wrong(sent, n):
    """Points to the gold head except for determiners, which point two words further."""
    t = to_gold(sent, n)
    for j, rel in enumerate(sent.deprels):
        if rel == "det":
            t[1 + j] = min(1 + j + 2, n - 2)
    return t


def nouns_to_their_det(sent, n):
    """Rows of words that have a determiner point to it (read transposed: det → head)."""
    t = np.full(n, n - 1)  # everything else to [SEP], which is excluded
    for j, rel in enumerate(sent.deprels):
        if rel == "det":
            t[sent.heads[j]] = 1 + j
    return t


def test_best_head_and_offset_are_the_known_ones():
    tb = treebank()
    atts = build(tb, {(0, 0): to_previous, (0, 1): gold_but_det_wrong, (1, 0): nouns_to_their_det})
    df = relation_heads(atts, tb, min_count=1)
    assert df.loc["nsubj", ["layer", "head", "direction"]].tolist() == [0, 1, "dep->head"]
    assert df.loc["nsubj", "accuracy"] == 1.0
    assert df.loc["obj", "accuracy"] == 1.0
    # determiners: only the transposed reading of head (1, 0) gets them all
    det = df.loc["det", ["layer", "head", "direction", "label"]].tolist()
    assert det == [1, 0, "head->dep", "2-1"]
    assert df.loc["det", "accuracy"] == 1.0
    # offsets: det is the next word in 3 of 4, obj two words back, nsubj the next word
    assert df.loc["det", "offset"] == 1 and df.loc["det", "offset_accuracy"] == 0.75
    assert df.loc["obj", "offset"] == -2 and df.loc["obj", "offset_accuracy"] == 1.0
    assert df.loc["nsubj", "offset"] == 1 and df.loc["nsubj", "offset_accuracy"] == 1.0
    # "all" = every non-root, non-punctuation word; the root and punct get no row
    n_all = sum(1 for s in tb for r in s.deprels if r not in ("root", "punct"))
    assert df.loc["all", "n"] == n_all
    assert "root" not in df.index and "punct" not in df.index
    assert df.index[0] == "all"
    assert df.meta["selected_on_report"] is True


def test_diagonal_and_special_positions_are_ignored():
    tb = treebank()
    rng = np.random.default_rng(1)
    atts = []
    for sent in tb:
        n = len(sent) + 2
        maps = rng.uniform(0.0, 0.1, size=(L, H, n, n))
        g = to_gold(sent, n)
        maps[0, 0, np.arange(n), g] += 1.0
        maps[0, 0, np.arange(n), np.arange(n)] += 3.0  # self first
        maps[0, 0, :, 0] += 2.0  # then [CLS]
        maps[0, 0, :, n - 1] += 2.0  # and [SEP]
        atts.append(attention(sent, maps))
    acc = head_accuracy(atts, tb)
    assert _acc(acc, "all", "dep->head", 0, 0) == 1.0


def _acc(result, relation, direction, layer, head):
    t = result.table
    return t[t["direction"] == direction].loc[(layer, head), relation]


def test_chosen_on_one_split_reported_on_the_other():
    tb_sel, tb_rep = treebank(prefix="sel"), treebank(prefix="rep")
    sel = build(tb_sel, {(1, 1): to_gold})
    rep = build(tb_rep, {(0, 1): to_gold}, seed=3)
    df = relation_heads(rep, tb_rep, select_on=(sel, tb_sel), min_count=1)
    row = df.loc["all"]
    assert (row["layer"], row["head"], row["direction"]) == (1, 1, "dep->head")
    assert row["select_accuracy"] == 1.0
    expected = _acc(head_accuracy(rep, tb_rep), "all", "dep->head", 1, 1)
    assert row["accuracy"] == pytest.approx(expected) and expected < 1.0
    assert df.meta["selected_on_report"] is False
    # precomputed hits give the same table
    again = relation_heads(word_hits(rep, tb_rep), select_on=word_hits(sel, tb_sel), min_count=1)
    assert again == df
    # the old argument names still work, with a warning
    with pytest.warns(DeprecationWarning):
        old = relation_heads(attention_set=rep, treebank=tb_rep, select_on=(sel, tb_sel), min_count=1)
    assert old == df
    with pytest.raises(InputError, match="poss_rule"):
        relation_heads(word_hits(rep, tb_rep), select_on=word_hits(sel, tb_sel, poss_rule=True))
    with pytest.raises(InputError, match="treebank"):
        relation_heads(rep)


def possessive_map(sent, n):
    """"John 's dog": the clitic attends to the possessed noun, John to the clitic; every
    other word to its gold head."""
    t = to_gold(sent, n)
    for j in range(len(sent) - 1):
        if sent.words[j + 1] == "'s":
            t[1 + j] = 1 + j + 1
            t[1 + j + 1] = sent.heads[j]
    return t


def test_possessive_rule():
    tb = treebank()
    atts = build(tb, {(0, 0): possessive_map})
    plain = relation_heads(atts, tb, min_count=1)
    rule = relation_heads(atts, tb, min_count=1, poss_rule=True)
    assert _acc(head_accuracy(atts, tb), "nmod:poss", "dep->head", 0, 0) == 0.5  # "John" -> 's
    assert _acc(head_accuracy(atts, tb, poss_rule=True), "nmod:poss", "dep->head", 0, 0) == 1.0
    assert rule.loc["nmod:poss", "accuracy"] == 1.0
    assert plain.loc["nmod:poss", "offset_accuracy"] == 0.5
    assert rule.loc["nmod:poss", "offset"] == 1 and rule.loc["nmod:poss", "offset_accuracy"] == 1.0
    # the rule changes possessors only
    assert rule.loc["nsubj", "accuracy"] == plain.loc["nsubj", "accuracy"] == 1.0
    assert rule.meta["poss_rule"] and not plain.meta["poss_rule"]


def test_subtypes_fold_into_base_relation():
    tb = treebank(SENTENCES + [[("he", "PRON", 2, "nsubj"), ("ran", "VERB", 0, "root"),
                                ("home", "NOUN", 2, "obl:npmod")],
                               [("time", "NOUN", 2, "obl"), ("flies", "VERB", 0, "root")]])
    atts = build(tb, {(0, 0): to_gold})
    with_sub = relation_heads(atts, tb, min_count=1)
    without = relation_heads(atts, tb, min_count=1, subtypes=False)
    assert "nmod:poss" in with_sub.index and "obl:npmod" in with_sub.index
    assert "nmod" in without.index and "nmod:poss" not in without.index
    assert without.loc["obl", "n"] == 2 and with_sub.loc["obl", "n"] == 1
    assert without.loc["nmod", "n"] == with_sub.loc["nmod:poss", "n"] == 2


def test_min_count_filters_relations():
    tb = treebank()
    atts = build(tb, {(0, 0): to_gold})
    df = relation_heads(atts, tb, min_count=3)
    assert set(df.index) == {"all", "det", "nsubj"}


def test_offsets_and_direction_tables():
    tb = treebank()
    atts = build(tb, {(0, 0): to_gold})
    off = offset_accuracy(atts, tb)
    assert list(off.columns) == list(OFFSETS)
    assert off.loc["obj", -2] == 1.0 and off.loc["obj", 2] == 0.0
    acc = head_accuracy(atts, tb)
    assert acc.table.index.names == ["layer", "head"] and acc.columns[0] == "direction"
    assert acc.shape[0] == 2 * L * H
    assert set(acc["direction"]) == set(DIRECTIONS)
    assert acc.meta["n"]["det"] == 4
    assert acc.grid("det").shape == (L, H)


def test_truncated_words_are_left_out():
    sent = treebank()[0]  # the dog chased a cat .
    m = len(sent)
    n = m + 1  # [CLS] + first m-1 words + [SEP]: the "." was cut away
    maps = np.random.default_rng(0).uniform(0.05, 1, size=(L, H, n, n))
    t = np.arange(n)
    t[1:-1] = gold_positions(sent)[:-1]
    maps[0, 0] = pointing(t, n)
    att = Attention(maps=maps / maps.sum(-1, keepdims=True),
                    tokens=["[CLS]", *sent.words[:-1], "[SEP]"],
                    roles=np.array(["cls"] + ["word"] * (m - 1) + ["sep"]),
                    word_ids=np.array([-1, *range(m - 1), -1]), words=sent.words, level="word",
                    meta={"sent_id": sent.id}, truncated=True)
    hits = word_hits([att], [sent])
    assert hits.n_skipped == 1  # the cut-away "."
    assert len(hits.deprels) == m - 2  # non-root words that survived
    assert hits.hits[:, 0, 0, 0].all()


def test_mismatched_treebank_raises():
    tb = treebank()
    atts = build(tb, {})
    with pytest.raises(InputError, match="does not match"):
        relation_heads(atts, list(reversed(tb)))
    with pytest.raises(InputError, match="items"):
        relation_heads(atts[:2], tb)
    with pytest.raises(InputError, match="pair"):
        relation_heads(atts, tb, select_on=atts)


def test_right_branching():
    tb = treebank()
    # counted by hand (punctuation left out): the, dog, a of 5 in sentence 1; my, sister,
    # the of 5 in sentence 2; dog of 4 in sentence 3; big, house of 5 in sentence 4
    correct = 3 + 3 + 1 + 2
    total = 5 + 5 + 4 + 5
    assert right_branching_uas(tb) == pytest.approx(correct / total)


def test_on_a_tiny_model_end_to_end():
    import attnkit as ak
    from attnkit.data import sample_treebank
    from attnkit.testing import tiny_model

    tb = ak.read_conllu(sample_treebank())
    sset = ak.extract(tiny_model("bert"), tb, progress=False)
    df = relation_heads(sset, tb, select_on=(sset, tb), min_count=2, subtypes=False)
    assert df.index[0] == "all"
    assert df["accuracy"].between(0, 1).all()
    assert (df["label"].str.match(r"^[12]-[12]$")).all()


def test_real_model_det_head_beats_offset():
    """On 300 EWT dev sentences (chosen on the first 150, reported on the rest), the bundled
    model's best det head clearly beats the best fixed offset."""
    import attnkit as ak
    from attnkit.data import data_dir
    from attnkit.errors import ModelNotFoundError

    d = data_dir()
    if d is None or not (d / "ud-english-ewt").is_dir():
        skip_without("UD English EWT missing")
    try:
        model = ak.load("minilm")
    except ModelNotFoundError as exc:
        skip_without(str(exc))
    tb = ak.read_conllu(d / "ud-english-ewt" / "en_ewt-ud-dev.conllu", limit=300)
    sset = ak.extract(model, tb, progress=False)
    sel, rep = (sset[:150], tb[:150]), (sset[150:], tb[150:])
    df = relation_heads(*rep, select_on=sel, min_count=20)
    assert df.loc["det", "accuracy"] > df.loc["det", "offset_accuracy"] + 0.1
    assert df.loc["all", "accuracy"] > df.loc["all", "offset_accuracy"]


# ------------------------------------------------------------------ figures
def test_relation_figures_show_the_table():
    import matplotlib

    matplotlib.use("Agg")
    from attnkit.plot.syntax import plot_relation_grid, plot_relation_heads

    tb = treebank()
    atts = build(tb, {(0, 0): to_previous, (0, 1): gold_but_det_wrong, (1, 0): nouns_to_their_det})
    df = relation_heads(atts, tb, min_count=2)
    ax = plot_relation_heads(df)
    heights = [p.get_height() for p in ax.patches]
    assert heights[: len(df)] == pytest.approx(list(100 * df["accuracy"]))
    assert heights[len(df):] == pytest.approx(list(100 * df["offset_accuracy"]))
    assert [t.get_text() for t in ax.get_xticklabels()] == list(df.index)
    assert "2-1←" in [t.get_text() for t in ax.texts]  # det: head 2-1, head→dep

    acc = head_accuracy(atts, tb)
    ax = plot_relation_grid(acc, direction="head->dep", relations=["det", "nsubj"])
    shown = np.asarray(ax.images[0].get_array())
    assert shown.shape == (2, L * H)
    t = acc.table
    assert np.allclose(shown[0], 100 * t[t["direction"] == "head->dep"]["det"].to_numpy())
    best = np.asarray(plot_relation_grid(acc).images[0].get_array())
    rel_cols = [c for c in t.columns if c != "direction"]
    assert best[rel_cols.index("det"), 2] == 100.0  # head 2-1 (column 2) reads det
    with pytest.raises(InputError, match="direction"):
        plot_relation_grid(acc, direction="up")
    with pytest.raises(InputError, match="relation_heads"):
        plot_relation_heads(acc)
