"""read_conllu on hand-written treebanks: multiword tokens, empty nodes, malformed files."""

import pytest

import attnkit
from attnkit.errors import ConllError, DataNotFoundError

GOOD = """# newdoc id = doc1
# sent_id = s1
# text = I don't know.
1	I	I	PRON	PRP	Case=Nom|Number=Sing|Person=1	4	nsubj	_	_
2-3	don't	_	_	_	_	_	_	_	_
2	do	do	AUX	VBP	_	4	aux	_	_
3	n't	not	PART	RB	_	4	advmod	_	_
4	know	know	VERB	VB	_	0	root	_	SpaceAfter=No
5	.	.	PUNCT	.	_	4	punct	_	_

# sent_id = s2
1	Sue	Sue	PROPN	NNP	_	2	nsubj	_	_
2	left	leave	VERB	VBD	_	0	root	_	_
2.1	left	leave	VERB	VBD	_	_	_	2:conj	CopyOf=2
3	her	her	PRON	PRP$	Poss=Yes	4	nmod:poss	_	_
4	bag	bag	NOUN	NN	_	2	obj	_	Entity=(e1)
"""


def write(tmp_path, text, name="t.conllu"):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_reads_words_heads_relations(tmp_path):
    tb = attnkit.read_conllu(write(tmp_path, GOOD))
    assert len(tb) == 2
    s1, s2 = tb
    assert s1.id == "s1" and s1.doc_id == "doc1" and s1.text == "I don't know."
    assert s1.words == ["I", "do", "n't", "know", "."]
    assert s1.multiword == [(1, 2, "don't")]
    assert s1.heads.tolist() == [4, 4, 4, 0, 4]
    assert s1.head_index.tolist() == [3, 3, 3, -1, 3]
    assert s1.upos == ["PRON", "AUX", "PART", "VERB", "PUNCT"]
    assert s1.feats[0]["Person"] == "1"
    # empty node 2.1 skipped; subtypes kept and stripped on request
    assert s2.words == ["Sue", "left", "her", "bag"]
    assert s2.deprels == ["nsubj", "root", "nmod:poss", "obj"]
    assert s2.deprels_base == ["nsubj", "root", "nmod", "obj"]
    assert s2.misc[3]["Entity"] == "(e1)"
    assert s2.doc_id == "doc1"


@pytest.mark.parametrize(
    "bad, line, what",
    [
        (GOOD.replace("4\tnsubj\t_\t_", "4\tnsubj\t_", 1), 4, "10 tab-separated"),
        (GOOD.replace("leave\tVERB\tVBD\t_\t0", "leave\tVERB\tVBD\t_\tX", 1), 13, "HEAD"),
        (GOOD.replace("\n4\tbag", "\nfour\tbag"), 16, "word ID"),
    ],
)
def test_malformed_names_file_and_line(tmp_path, bad, line, what):
    p = write(tmp_path, bad)
    with pytest.raises(ConllError, match=f"{p.name}:{line}:.*{what}"):
        attnkit.read_conllu(p)


def test_head_out_of_range(tmp_path):
    p = write(tmp_path, GOOD.replace("\t2\tobj", "\t9\tobj"))
    with pytest.raises(ConllError, match="past the sentence"):
        attnkit.read_conllu(p)


def test_missing_file():
    with pytest.raises(DataNotFoundError):
        attnkit.read_conllu("/no/such/file.conllu")


def test_sample_treebank_is_a_tree():
    tb = attnkit.read_conllu(attnkit.data.sample_treebank())
    assert len(tb) == 12
    for s in tb:
        assert (s.heads == 0).sum() == 1
        # following heads from any word reaches the root without cycles
        for i in range(len(s)):
            seen, j = set(), i
            while s.heads[j] != 0:
                assert j not in seen
                seen.add(j)
                j = s.heads[j] - 1


@pytest.mark.realdata
def test_ewt_counts(ewt_dir):
    tb = attnkit.read_conllu(ewt_dir / "en_ewt-ud-dev.conllu")
    assert len(tb) == 2001 and sum(map(len, tb)) == 25147
