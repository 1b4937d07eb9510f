"""Coreference: the Entity= reader, the coreference-head analysis, its figures and runner.

The mini documents below are hand-written; every expected mention, head word, baseline
choice and attention prediction was worked out by hand (see the comments).
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from attnkit.analysis.coref import (
    coref_heads,
    coref_rows,
    coref_predictions,
    coref_summary,
    split_documents,
)
from attnkit.core.attention import Attention
from attnkit.data.coref import Document, mention_head, read_coref
from attnkit.errors import ConllError, InputError

HEADER = ("# newdoc id = {doc}\n"
          "# global.Entity = GRP-etype-infstat-salience-centering-minspan-link-identity\n")


def _conllu(*docs: tuple[str, list[tuple[str, list[str]]]]) -> str:
    """Build CoNLL-U text from (doc id, [(sent id, [space-separated 10-column rows])])."""
    out = []
    for doc, sents in docs:
        out.append(HEADER.format(doc=doc).rstrip("\n"))
        for sid, rows in sents:
            words = [r.split()[1] for r in rows]
            out.append(f"# sent_id = {sid}\n# text = {' '.join(words)}")
            out.extend("\t".join(r.split()) for r in rows)
            out.append("")
    return "\n".join(out) + "\n"


# doc_a, words in document order: John0 saw1 his2 old3 friend4 Mary5 .6 She7 liked8 him9 .10
DOC_A = ("doc_a", [
    ("a-1", [
        "1 John John PROPN NNP Number=Sing 2 nsubj _ Entity=(1-person-new-sssss-cf1-1-coref-John)",
        "2 saw see VERB VBD _ 0 root _ _",
        "3 his he PRON PRP$ Gender=Masc|Number=Sing|Person=3|Poss=Yes 5 nmod:poss _ "
        "Entity=(2-person-new-nnnnn-cf2-3-coref(1-person-giv:act-sssss-cf3-1-ana)",
        "4 old old ADJ JJ _ 5 amod _ _",
        "5 friend friend NOUN NN Number=Sing 2 obj _ _",
        "6 Mary Mary PROPN NNP Number=Sing 5 appos _ Entity=2)",
        "7 . . PUNCT . _ 2 punct _ _",
    ]),
    ("a-2", [
        "1 She she PRON PRP Gender=Fem|Number=Sing|Person=3 2 nsubj _ "
        "Entity=(2-person-giv:act-nnnnn-cf1-1-ana)",
        "2 liked like VERB VBD _ 0 root _ _",
        "3 him he PRON PRP Gender=Masc|Number=Sing|Person=3 2 obj _ "
        "Entity=(1-person-giv:act-sssss-cf2-1-ana)",
        "4 . . PUNCT . _ 2 punct _ _",
    ]),
])

# doc_b: The0 red1 car2 hit3 a4 tree5 .6 | The7 car8 was9 a10 wreck11 .12 |
#        The13 red14 car15 burned16 .17
DOC_B = ("doc_b", [
    ("b-1", [
        "1 The the DET DT _ 3 det _ Entity=(5-object-new-nnnnn-cf1-3-coref",
        "2 red red ADJ JJ _ 3 amod _ _",
        "3 car car NOUN NN Number=Sing 4 nsubj _ Entity=5)",
        "4 hit hit VERB VBD _ 0 root _ _",
        "5 a a DET DT _ 6 det _ Entity=(6-plant-new-nnnnn-cf2-2-sgl",
        "6 tree tree NOUN NN Number=Sing 4 obj _ Entity=6)",
        "7 . . PUNCT . _ 4 punct _ _",
    ]),
    ("b-2", [
        "1 The the DET DT _ 2 det _ Entity=(5-object-giv:act-nnnnn-cf1-2-coref",
        "2 car car NOUN NN Number=Sing 5 nsubj _ Entity=5)",
        "3 was be AUX VBD _ 5 cop _ _",
        "4 a a DET DT _ 5 det _ Entity=(5-object-giv:act-nnnnn-cf2-2-pred",
        "5 wreck wreck NOUN NN Number=Sing 0 root _ Entity=5)",
        "6 . . PUNCT . _ 5 punct _ _",
    ]),
    ("b-3", [
        "1 The the DET DT _ 3 det _ Entity=(5-object-giv:act-nnnnn-cf1-3-coref",
        "2 red red ADJ JJ _ 3 amod _ _",
        "3 car car NOUN NN Number=Sing 4 nsubj _ Entity=5)",
        "4 burned burn VERB VBD _ 0 root _ _",
        "5 . . PUNCT . _ 4 punct _ _",
    ]),
])


@pytest.fixture()
def mini(tmp_path):
    path = tmp_path / "mini.conllu"
    path.write_text(_conllu(DOC_A, DOC_B), encoding="utf-8")
    return path


@pytest.fixture()
def docs(mini):
    return read_coref(mini)


# ---------------------------------------------------------------------- reader
def test_reads_documents_mentions_heads_and_clusters(docs):
    a, b = docs
    assert [d.id for d in docs] == ["doc_a", "doc_b"]
    assert a.words == "John saw his old friend Mary . She liked him .".split()
    assert list(a.offsets) == [0, 7]
    got = [(m.entity, m.sentence, m.start, m.end, m.text, m.head_word, m.doc_head, m.type)
           for m in a.mentions]
    assert got == [
        ("1", 0, 0, 1, "John", "John", 0, "proper"),
        # outer mention first; its head is "friend" (Mary hangs off friend inside the span)
        ("2", 0, 2, 6, "his old friend Mary", "friend", 4, "nominal"),
        ("1", 0, 2, 3, "his", "his", 2, "pronoun"),
        ("2", 1, 0, 1, "She", "She", 7, "pronoun"),
        ("1", 1, 2, 3, "him", "him", 9, "pronoun"),
    ]
    assert a.clusters == {"1": [0, 2, 4], "2": [1, 3]}
    m = a.mentions[1]
    assert m.fields["minspan"] == "3" and m.link == "coref" and m.fields["etype"] == "person"
    assert a.mentions[0].fields["identity"] == "John"
    assert a.mentions[2].feats["Gender"] == "Masc"
    assert [m.link for m in b.mentions] == ["coref", "sgl", "coref", "pred", "coref"]
    assert [(m.doc_start, m.doc_end, m.doc_head) for m in b.mentions] == [
        (0, 3, 2), (4, 6, 5), (7, 9, 8), (10, 12, 11), (13, 16, 15)]


def test_documents_from_a_treebank_and_cut(mini):
    import attnkit

    tb = attnkit.read_conllu(mini)
    docs = read_coref(tb)  # the path comes from the treebank
    assert [len(d.mentions) for d in docs] == [5, 5]
    cut = docs[0].cut(8)
    assert cut.words == docs[0].words[:8]
    assert [m.text for m in cut.mentions] == ["John", "his old friend Mary", "his", "She"]
    assert cut.id == "doc_a"


def test_head_of_a_span_that_is_not_one_subtree_uses_minspan_then_depth(docs):
    s = docs[0].sentences[0]
    # "saw his": saw is the root, his hangs off friend (outside) → two roots;
    # without minspan the higher one (saw, the sentence root) wins
    assert mention_head(s, start=1, end=3) == 1
    assert mention_head(s, start=1, end=3, minspan=[2]) == 2
    # "old friend": a subtree of friend
    assert mention_head(s, start=3, end=5) == 4


def test_discontinuous_mention_becomes_one_span(tmp_path):
    rows = [
        "1 John John PROPN NNP _ 2 nsubj _ Entity=(1[1/2]-person-new-sssss-cf1-1-coref)",
        "2 and and CCONJ CC _ 0 root _ _",  # one rooted tree (read_conllu checks it)
        "3 Mary Mary PROPN NNP _ 2 conj _ Entity=(1[2/2]-person-new-sssss-cf1-1-coref)",
    ]
    p = tmp_path / "disc.conllu"
    p.write_text(_conllu(("d", [("d-1", rows)])))
    (doc,) = read_coref(p)
    assert [(m.start, m.end, m.entity) for m in doc.mentions] == [(0, 3, "1")]


@pytest.mark.parametrize("misc, word, what", [
    ("Entity=3)", 2, "closes a mention of entity 3 that is not open"),
    ("Entity=(3-abstract-new-nnnnn-cf1-1-coref", 2, "never closed"),
    ("Entity=(", 2, "empty bracket"),
    ("Entity=(3-a-b-c-d-e-f-g-h-i-j)", 2, "fields"),
    ("Entity=3", 2, "neither"),
])
def test_malformed_brackets_name_file_line_and_sentence(tmp_path, misc, word, what):
    rows = [
        "1 A a DET DT _ 2 det _ _",
        f"2 dog dog NOUN NN _ 0 root _ {misc}",
        "3 . . PUNCT . _ 2 punct _ _",
    ]
    p = tmp_path / "bad.conllu"
    p.write_text(_conllu(("bad_doc", [("bad-1", ["1 Hi hi INTJ UH _ 0 root _ _"]),
                                      ("bad-2", rows)])))
    with pytest.raises(ConllError) as err:
        read_coref(p)
    msg = str(err.value)
    line = p.read_text().splitlines().index("\t".join(rows[1].split())) + 1
    assert f"{p}:{line}" in msg
    assert "bad-2" in msg and what in msg


def test_unclosed_mention_is_reported_where_it_opens(tmp_path):
    rows = ["1 A a DET DT _ 2 det _ Entity=(4-object-new-nnnnn-cf1-1-coref",
            "2 dog dog NOUN NN _ 0 root _ _"]
    p = tmp_path / "open.conllu"
    p.write_text(_conllu(("d", [("d-1", rows)])))
    with pytest.raises(ConllError, match=r"open\.conllu:5: sentence d-1, word 1"):
        read_coref(p)


# -------------------------------------------------------------------- analysis
def word_attention(words, rows, n_heads, kept=None):
    """Word-level Attention of [CLS] + words[:kept] + [SEP] with hand-set rows.

    ``rows[h]`` maps a word index to {target: weight}; targets are word indices or "cls" /
    "sep"; the rest of each row is spread evenly over the other positions.
    """
    kept = len(words) if kept is None else kept
    n = kept + 2
    maps = np.zeros((1, n_heads, n, n), np.float32)
    pos = {"cls": 0, "sep": n - 1}
    for h in range(n_heads):
        for q in range(n):
            spec = rows[h].get(q - 1, {}) if 0 < q < n - 1 else {}
            for t, w in spec.items():
                maps[0, h, q, pos[t] if isinstance(t, str) else t + 1] += w
            rest = 1 - maps[0, h, q].sum()
            free = maps[0, h, q] == 0
            maps[0, h, q, free] += rest / free.sum()
    return Attention(
        maps=maps, tokens=["[CLS]", *words[:kept], "[SEP]"],
        roles=["cls"] + ["word"] * kept + ["sep"],
        word_ids=[-1, *range(kept), -1], words=list(words), level="word",
        truncated=kept < len(words),
    )


def attention_a(words, kept=None):
    coref = {2: {"sep": 0.5, 2: 0.2, 0: 0.3},   # his → John (and itself: diagonal)
             7: {"sep": 0.5, 4: 0.3},            # She → friend (head of the antecedent)
             9: {"sep": 0.5, 2: 0.3}}            # him → his
    nxt = {w: {"cls": 0.6, w + 1 if w + 1 < len(words) else w - 1: 0.4} for w in range(len(words))}
    selfish = {w: {w: 0.9, 5: 0.1} if w != 5 else {w: 1.0} for w in range(len(words))}
    return word_attention(words, [coref, nxt, selfish], 3, kept)


def attention_b(words):
    coref = {8: {"sep": 0.7, 2: 0.2}, 15: {"sep": 0.7, 11: 0.2}}  # car→car ✓, car→wreck
    nxt = {w: {"cls": 0.6, w + 1 if w + 1 < len(words) else w - 1: 0.4} for w in range(len(words))}
    selfish = {w: {w: 0.9, 2: 0.1} if w != 2 else {w: 1.0} for w in range(len(words))}
    return word_attention(words, [coref, nxt, selfish], 3)


@pytest.fixture()
def atts(docs):
    return [attention_a(docs[0].words), attention_b(docs[1].words)]


def test_predictions_per_mention_and_head(docs, atts):
    ev = coref_predictions(atts, docs)
    m = ev.mentions
    assert list(zip(m["doc"], m["text"])) == [
        ("doc_a", "his"), ("doc_a", "She"), ("doc_a", "him"),
        ("doc_b", "The car"), ("doc_b", "The red car")]
    assert list(m["type"]) == ["pronoun"] * 3 + ["nominal"] * 2
    assert list(m["n_antecedents"]) == [1, 1, 2, 1, 2]
    assert list(m["distance"]) == [2, 3, 7, 6, 7]
    assert ev.hits.shape == (5, 1, 3)
    # head 0: his→John ✓ She→friend ✓ him→his ✓ car→car ✓ car→wreck ✗ (pred: not a mention)
    # head 1: the next word, never an antecedent's head
    # head 2: itself (excluded) then Mary / car: Mary is inside the antecedent of She but
    #         is not its head word, so ✗; car(8)→car(2) ✓, car(15)→car(2) ✓
    assert ev.hits[:, 0, 0].tolist() == [True, True, True, True, False]
    assert ev.hits[:, 0, 1].tolist() == [False] * 5
    assert ev.hits[:, 0, 2].tolist() == [False, False, False, True, True]
    assert ev.predicted[:, 0, 0].tolist() == [0, 4, 2, 2, 11]
    assert ev.predicted[:, 0, 2].tolist() == [5, 5, 5, 2, 2]
    # baselines, worked out by hand:
    # his: nearest John ✓, no earlier "his" ✗, sieve agreement → John ✓
    # She: nearest "his old friend Mary" (head 4) ✓, no head match ✗, agreement ✓
    # him: nearest She ✗, no head match ✗, sieve skips She (Fem≠Masc) but then picks the
    #      friend mention (a noun: no gender) ✗
    # The car: nearest The red car ✓, head "car" ✓, sieve head match (stage 2) ✓
    # The red car: nearest The car ✓, head ✓, sieve exact string "the red car" (stage 1) ✓
    assert m["nearest"].tolist() == [True, True, False, True, True]
    assert m["head_match"].tolist() == [False, False, False, True, True]
    assert m["sieve"].tolist() == [True, True, False, True, True]
    assert m["sieve_stage"].tolist() == [3, 3, 3, 2, 1]
    d = ev.documents
    assert d["coreferent"].tolist() == [3, 2] and d["lost"].tolist() == [0, 0]


def test_gender_sieve_picks_the_agreeing_pronoun(tmp_path):
    # He0 met1 her2 .3 She4 greeted5 him6 .7
    rows1 = ["1 He he PRON PRP Gender=Masc|Number=Sing|Person=3 2 nsubj _ Entity=(1-person-new-s-c-1-coref)",
             "2 met meet VERB VBD _ 0 root _ _",
             "3 her she PRON PRP Gender=Fem|Number=Sing|Person=3 2 obj _ Entity=(2-person-new-s-c-1-coref)",
             "4 . . PUNCT . _ 2 punct _ _"]
    rows2 = ["1 She she PRON PRP Gender=Fem|Number=Sing|Person=3 2 nsubj _ Entity=(2-person-giv-s-c-1-ana)",
             "2 greeted greet VERB VBD _ 0 root _ _",
             "3 him he PRON PRP Gender=Masc|Number=Sing|Person=3 2 obj _ Entity=(1-person-giv-s-c-1-ana)",
             "4 . . PUNCT . _ 2 punct _ _"]
    p = tmp_path / "g.conllu"
    p.write_text(_conllu(("g", [("g-1", rows1), ("g-2", rows2)])))
    docs = read_coref(p)
    att = word_attention(docs[0].words, [{}], 1)
    m = coref_predictions([att], docs).mentions
    assert m["text"].tolist() == ["She", "him"]
    # him: She and her are Fem → skipped; He agrees → correct at stage 3; nearest is She ✗
    assert m["sieve"].tolist() == [True, True] and m["sieve_stage"].tolist() == [3, 3]
    assert m["nearest"].tolist() == [True, False]


def test_excluded_links_and_singleton_candidates(docs, atts):
    # with the predicate "a wreck" kept, it is a mention of entity 5: it is evaluated too,
    # and head 0's car(15)→wreck becomes correct
    ev = coref_predictions(atts, docs, exclude_links=())
    m = ev.mentions[ev.mentions["doc"] == "doc_b"]
    assert m["text"].tolist() == ["The car", "a wreck", "The red car"]
    assert ev.hits[-1, 0, 0]
    # singletons as candidates: the nearest mention before "The car" is then "a tree" ✗
    ev = coref_predictions(atts, docs, singletons=True)
    assert ev.mentions["nearest"].tolist()[3] is False
    assert ev.mentions["head_match"].tolist()[3] is True


def test_truncation_counts_lost_mentions(docs):
    # only the first 8 words reach the model: "him" (word 9) is lost
    atts = [attention_a(docs[0].words, kept=8), attention_b(docs[1].words)]
    ev = coref_predictions(atts, docs)
    d = ev.documents.set_index("doc")
    assert d.loc["doc_a", "kept_words"] == 8 and bool(d.loc["doc_a", "truncated"])
    assert d.loc["doc_a", "coreferent"] == 3 and d.loc["doc_a", "lost"] == 1
    assert ev.mentions["text"].tolist() == ["his", "She", "The car", "The red car"]
    table = coref_heads(ev)
    assert table.meta["lost"] == 1 and (table["lost"] == 1).all()
    assert table.meta["truncated"] == 1


def test_a_document_cut_before_the_model_saw_it(docs):
    # the item holds only the first 8 words (Document.cut), scored against the full doc
    att = attention_a(docs[0].words[:8])
    ev = coref_predictions([att, attention_b(docs[1].words)], docs)
    assert ev.documents["lost"].tolist() == [1, 0]
    assert ev.hits[:2, 0, 0].tolist() == [True, True]


def test_token_level_attention_is_pooled_to_words(docs):
    # "friend" in two pieces; She's row gives 0.15 to each piece: 0.3 after pooling (sum to)
    words = docs[0].words
    tokens = ["[CLS]", *words[:4], "fri", "##end", *words[5:], "[SEP]"]
    word_ids = [-1, 0, 1, 2, 3, 4, 4, *range(5, len(words)), -1]
    n = len(tokens)
    maps = np.full((1, 1, n, n), 0.0, np.float32)
    for q in range(n):
        maps[0, 0, q] = 1.0 / n
    she = tokens.index("She")
    maps[0, 0, she] = 0.1 / (n - 3)
    maps[0, 0, she, [5, 6]] = 0.15
    maps[0, 0, she, n - 1] = 0.6
    maps[0, 0, she] /= maps[0, 0, she].sum()
    maps = np.repeat(maps, 3, axis=1)  # doc_b's attention has 3 heads
    att = Attention(maps=maps, tokens=tokens, roles=["cls"] + ["word"] * (n - 2) + ["sep"],
                    word_ids=word_ids, words=words, level="token")
    ev = coref_predictions([att, attention_b(docs[1].words)], docs)
    assert ev.predicted[1, 0, 0] == 4 and ev.hits[1, 0, 0]


def test_items_must_match_documents(docs, atts):
    with pytest.raises(InputError, match="2 documents"):
        coref_predictions(atts[:1], docs)
    with pytest.raises(InputError, match="does not hold the words of document 'doc_a'"):
        coref_predictions(atts[::-1], docs)
    bad = attention_a(docs[0].words)
    bad.meta["sent_id"] = "other"
    with pytest.raises(InputError, match="'other'"):
        coref_predictions([bad, atts[1]], docs)


def test_head_chosen_on_one_half_and_reported_on_the_other(docs, atts):
    ev = coref_predictions(atts, docs)
    t = coref_heads(ev.subset(["doc_b"]), select_on=ev.subset(["doc_a"]))
    assert t.table.index.tolist() == [(0, 0), (0, 1), (0, 2)]
    assert t["name"].tolist() == ["1-1", "1-2", "1-3"]
    assert t.meta["baselines"].index.tolist() == ["nearest", "head_match", "sieve"]
    assert coref_rows(t)["name"].tolist() == ["nearest", "head_match", "sieve", "1-1", "1-2", "1-3"]
    sel = t[t["selected"]]
    # head 0 is perfect on doc_a, but on doc_b it gets 1 of 2; head 2 (2 of 2) is not chosen
    assert sel["name"].tolist() == ["1-1"] and sel["all"].item() == 0.5
    assert t.loc[(0, 2), "all"] == 1.0
    assert sel["nominal"].item() == 0.5 and np.isnan(sel["pronoun"].item())
    assert t.meta["baselines"]["all"].tolist() == [1.0, 1.0, 1.0]
    assert t.meta["select_on"] == ["doc_a"] and t.meta["report_on"] == ["doc_b"]
    assert t.meta["same_split"] is False and t.meta["n"]["all"] == 2
    # select_on as an (attentions, documents) pair gives the same choice
    pair = coref_heads([atts[1]], [docs[1]], select_on=([atts[0]], [docs[0]]))
    assert pair.table.equals(t.table)
    # the old spelling (ids) still works, with a warning
    with pytest.warns(DeprecationWarning):
        old = coref_heads(ev, select_on=["doc_a"], report_on=["doc_b"])
    assert old.table.equals(t.table)
    # the other way round: head 2 (2/2 on doc_b) is chosen and scores 0 on doc_a
    t2 = coref_heads(ev.subset(["doc_a"]), select_on=ev.subset(["doc_b"]))
    assert t2[t2["selected"]]["name"].item() == "1-3" and t2[t2["selected"]]["all"].item() == 0
    # all documents: head 0 gets 4 of 5; selection and report overlap, and say so
    t3 = coref_heads(atts, docs)
    assert t3[t3["selected"]]["all"].item() == pytest.approx(0.8)
    assert t3.meta["same_split"] is True
    s = coref_summary(t3)
    assert s.index.tolist() == ["Nearest", "Head match", "Rule-based sieve", "Head 1-1"]
    assert s.loc["Head 1-1", "all"] == pytest.approx(80.0)
    assert s.loc["Nearest", "pronoun"] == pytest.approx(200 / 3)
    with pytest.raises(InputError, match="Unknown document"):
        ev.subset(["nope"])


def test_split_documents_balances_genres():
    def doc(i):
        return Document(i, [], [], np.zeros(0, np.int64))

    ids = ["GUM_a_1", "GUM_a_2", "GUM_b_1", "GUM_a_3", "GUM_b_2", "GUM_c_1"]
    first, second = split_documents([doc(i) for i in ids])
    assert first == ["GUM_a_1", "GUM_a_3", "GUM_b_2"]
    assert second == ["GUM_a_2", "GUM_b_1", "GUM_c_1"]
    assert not set(first) & set(second)


# ---------------------------------------------------------------------- figures
def test_figures(docs, atts):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from attnkit.plot.coref import plot_coref_accuracy, plot_coref_heads

    t = coref_heads(atts, docs)
    ax = plot_coref_accuracy(t)
    assert len(ax.patches) == 4 * 4  # 3 baselines + the head, 4 mention groups
    assert [x.get_text() for x in ax.get_legend().get_texts()] == [
        "Nearest", "Head match", "Rule-based sieve", "Head 1-1"]
    ax2 = plot_coref_heads(t)
    grid = ax2.images[0].get_array()
    assert grid.shape == (1, 3) and grid[0, 0] == pytest.approx(80.0)
    (box,) = [p for p in ax2.patches]
    assert box.get_xy() == (-0.5, -0.5)
    with pytest.raises(InputError):
        plot_coref_heads(t, column="verbs")
    plt.close("all")


# ----------------------------------------------------------------------- runner
def test_fit_documents_and_run_coref_end_to_end(docs, tmp_path):
    from attnkit.apps.pipeline.coref import fit_documents, run_coref
    from attnkit.testing import tiny_model

    model = tiny_model("bert")
    pieces = [len(model.tokenizer.tokenize(w)) for w in docs[0].words]
    fitted = fit_documents(model, docs, 8)
    want = int((np.cumsum(pieces) + 2 <= 8).sum())
    assert fitted[0].n_words == want and len(model.encode(fitted[0])) <= 8
    res = run_coref(model, docs, tmp_path / "out", progress=False)
    assert set(res["heads"]) == {"A->B", "B->A", "all"}
    assert res["splits"] == {"A": ["doc_a"], "B": ["doc_b"]}
    assert res["summary"]["split"].tolist() == ["A->B"] * 4 + ["B->A"] * 4 + ["all"] * 4
    assert res["heads"]["A->B"]["n"].iloc[0] == 2  # doc_b's two coreferent mentions
    for f in ("coref_heads_A_to_B.csv", "coref_heads_B_to_A.csv", "coref_heads_all.csv",
              "coref_summary.csv", "coref_mentions.csv", "coref_documents.csv",
              "coref_accuracy.png", "coref_heads.png"):
        assert (tmp_path / "out" / f).stat().st_size > 0
    # a 2-layer, 2-head model: 4 heads; every head's hits are between 0 and 1
    assert res["evaluation"].hits.shape == (5, 2, 2)
    # 12 tokens: doc_b keeps "The car" (words 7-8) but loses "The red car" (words 13-15)
    short = run_coref(model, docs, max_tokens=12, progress=False)
    assert short["documents"]["lost"].tolist() == [0, 1] and short["max_tokens"] == 12


# --------------------------------------------------------------------- real data
def _gum():
    from attnkit.data import data_dir

    d = data_dir()
    p = d / "ud-english-gum" / "en_gum-ud-dev.conllu" if d else None
    if p is None or not p.exists():
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("GUM dev missing (required under CI=true)")
        pytest.skip("GUM dev missing: set ATTNKIT_DATA")
    return p


def test_gum_dev_coreference():
    docs = read_coref(_gum())
    assert len(docs) == 30 and docs[0].id == "GUM_academic_exposure"
    d = docs[0]
    by_text = {m.text: m for m in d.mentions}
    # "adult - learned second language" (minspan 5): head "language"; "L2" is its apposition
    m = by_text["adult - learned second language"]
    assert m.head_word == "language" and m.entity == "3"
    assert [x.link for x in d.mentions if x.entity == "3"][:2] == ["coref", "appos"]
    for doc in docs:
        for x in doc.mentions:
            assert x.doc_start <= x.doc_head < x.doc_end
            assert doc.words[x.doc_head] == x.head_word
    links = {x.link for doc in docs for x in doc.mentions}
    assert {"coref", "ana", "appos", "pred", "sgl"} <= links
