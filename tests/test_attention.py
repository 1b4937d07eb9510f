"""Word pooling (Clark et al.): to a word = sum over pieces, from a word = mean over pieces."""

import numpy as np
import pytest

from attnkit import Attention
from attnkit.errors import InputError
from tolerances import assert_close, F32

pytestmark = pytest.mark.numerics


def _att(maps, tokens, roles, word_ids, words):
    m = np.asarray(maps, dtype=np.float32)
    if m.ndim == 2:
        m = m[None, None]
    return Attention(maps=m, tokens=tokens, roles=roles, word_ids=word_ids, words=words)


def test_pooling_by_hand():
    # [CLS] un ##able cat [SEP]: word 0 has two pieces (positions 1, 2)
    A = np.array(
        [
            [0.1, 0.2, 0.3, 0.2, 0.2],
            [0.0, 0.5, 0.1, 0.4, 0.0],
            [0.2, 0.2, 0.2, 0.2, 0.2],
            [0.4, 0.1, 0.1, 0.1, 0.3],
            [0.3, 0.0, 0.0, 0.3, 0.4],
        ]
    )
    att = _att(A, ["[CLS]", "un", "##able", "cat", "[SEP]"],
               ["cls", "word", "word", "word", "sep"], [-1, 0, 0, 1, -1], ["unable", "cat"])
    w = att.to_words()
    expected = np.array(
        [
            [0.1, 0.5, 0.2, 0.2],            # from [CLS]: to "unable" = 0.2 + 0.3
            [0.1, 0.5, 0.3, 0.1],            # from "unable": mean of rows 1, 2, pieces summed
            [0.4, 0.2, 0.1, 0.3],
            [0.3, 0.0, 0.3, 0.4],
        ]
    )
    assert_close(w.maps[0, 0], expected, F32)
    assert w.tokens == ["[CLS]", "unable", "cat", "[SEP]"]
    assert w.level == "word"
    assert w.roles.tolist() == ["cls", "word", "word", "sep"]
    assert w.word_positions.tolist() == [1, 2]
    assert_close(w.maps.sum(-1), 1.0, F32)


def test_pooling_keeps_rows_stochastic_random():
    rng = np.random.default_rng(0)
    maps = rng.dirichlet(np.ones(7), size=(3, 4, 7)).astype(np.float32)
    att = Attention(maps=maps, tokens=list("abcdefg"),
                    roles=["cls", "word", "word", "word", "sep", "word", "sep"],
                    word_ids=[-1, 0, 0, 1, -1, 2, -1], words=["ab", "c", "e"])
    w = att.to_words()
    assert w.maps.shape == (3, 4, 6, 6)
    assert_close(w.maps.sum(-1), 1.0, F32, scale=1)
    # attention to a word is the sum of attention to its pieces, from a word the mean
    assert_close(w.maps[..., 0, 1], maps[..., 0, 1] + maps[..., 0, 2], F32)
    assert_close(w.maps[..., 1, 0], (maps[..., 1, 0] + maps[..., 2, 0]) / 2, F32)


def test_positions_and_punct():
    att = _att(np.eye(4), ["[CLS]", "hi", ",", "[SEP]"], ["cls", "word", "word", "sep"],
               [-1, 0, 1, -1], ["hi", ","])
    assert att.cls_positions.tolist() == [0]
    assert att.sep_positions.tolist() == [3]
    assert att.punct.tolist() == [False, False, True, False]


def test_bad_shapes_raise():
    with pytest.raises(InputError):
        Attention(maps=np.zeros((2, 3)), tokens=[], roles=[], word_ids=[], words=[])
    with pytest.raises(InputError, match="tokens"):
        _att(np.eye(3), ["a", "b"], ["word"] * 3, [0, 1, 2], ["a", "b", "c"])
