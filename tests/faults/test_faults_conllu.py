"""Fault catalogue: CoNLL-U treebanks (issue items 4, 11, 19): invalid trees, empty files,
folders and limits refused with the file, line and sentence named."""

from __future__ import annotations

import pytest
from fault_helpers import raises_exactly

import attnkit as ak
from attnkit.errors import ConllError, DataNotFoundError, InputError


def _sentence(heads, sent_id="s1", deprels=None):
    rows = [f"{i}\tw{i}\tw\tX\tX\t_\t{h}\t{(deprels or {}).get(i, 'root' if h == 0 else 'dep')}\t_\t_"
            for i, h in enumerate(heads, 1)]
    return f"# sent_id = {sent_id}\n# text = x\n" + "\n".join(rows) + "\n\n"


GOOD = _sentence([2, 0, 2], "ok")

BAD_TREES = {
    "cycle": ([2, 1, 0], "cycle"),
    "cycle-of-three": ([2, 3, 1, 0], "cycle"),
    "self-head": ([0, 2, 1], "its own head"),
    "two-roots": ([0, 0, 1], "2 roots"),
    "no-root": ([2, 3, 1], "0 roots"),
}


@pytest.mark.parametrize("name", list(BAD_TREES))
def test_an_invalid_tree_names_sentence_and_line(tmp_path, name):
    heads, what = BAD_TREES[name]
    p = tmp_path / "t.conllu"
    p.write_text(GOOD + _sentence(heads, "bad-one"))
    err = raises_exactly(ConllError, ak.read_conllu, p)
    assert what in str(err) and "'bad-one'" in str(err) and f"{p}:" in str(err)
    line = int(str(err).split(f"{p}:")[1].split(":")[0])
    assert line > 6  # inside the second sentence, after the first one's 6 lines


@pytest.mark.parametrize("content", ["", "# only\n# comments\n", "\n\n\n"], ids=["empty", "comments", "blank"])
def test_a_file_without_sentences(tmp_path, content):
    p = tmp_path / "e.conllu"
    p.write_text(content)
    raises_exactly(ConllError, ak.read_conllu, p)


@pytest.mark.parametrize("limit", [-1, 0, 2.5, "3"])
def test_limit_must_be_a_positive_int(limit):
    raises_exactly(InputError, ak.read_conllu, ak.data.sample_treebank(), limit=limit)


def test_a_folder(tmp_path):
    (tmp_path / "a.conllu").write_text(GOOD)
    err = raises_exactly(DataNotFoundError, ak.read_conllu, tmp_path)
    assert "a.conllu" in str(err)


def test_no_file(tmp_path):
    raises_exactly(DataNotFoundError, ak.read_conllu, tmp_path / "none.conllu")


MALFORMED = {
    "nine-columns": "1\tw\tw\tX\tX\t_\t0\troot\t_\n",
    "head-not-int": "1\tw\tw\tX\tX\t_\tx\troot\t_\t_\n",
    "head-past-sentence": "1\tw\tw\tX\tX\t_\t5\troot\t_\t_\n",
    "ids-not-consecutive": "1\tw\tw\tX\tX\t_\t0\troot\t_\t_\n3\tv\tv\tX\tX\t_\t1\tdep\t_\t_\n",
    "bad-id": "a\tw\tw\tX\tX\t_\t0\troot\t_\t_\n",
}


@pytest.mark.parametrize("name", list(MALFORMED))
def test_malformed_lines(tmp_path, name):
    p = tmp_path / "m.conllu"
    p.write_text(GOOD + MALFORMED[name] + "\n")
    raises_exactly(ConllError, ak.read_conllu, p)


def test_binary_file(tmp_path):
    p = tmp_path / "b.conllu"
    p.write_bytes(bytes(range(256)) * 4)
    raises_exactly(ConllError, ak.read_conllu, p)


def test_valid_trees_with_multiword_tokens_and_empty_nodes_still_read(tmp_path):
    p = tmp_path / "ok.conllu"
    p.write_text("# sent_id = mw\n1-2\tdon't\t_\t_\t_\t_\t_\t_\t_\t_\n"
                 "1\tdo\tdo\tAUX\t_\t_\t3\taux\t_\t_\n2\tn't\tnot\tPART\t_\t_\t3\tadvmod\t_\t_\n"
                 "3\tgo\tgo\tVERB\t_\t_\t0\troot\t_\t_\n3.1\tx\tx\tX\t_\t_\t_\t_\t_\t_\n\n")
    (s,) = ak.read_conllu(p)
    assert s.words == ["do", "n't", "go"] and s.heads.tolist() == [3, 3, 0]
    assert len(ak.read_conllu(ak.data.sample_treebank())) == 12
