"""head_stats on hand-built attention whose averages are known."""

import numpy as np
import pytest

from attnkit import Attention, head_stats
from attnkit.analysis import STAT_COLUMNS, item_stats
from attnkit.errors import InputError

pytestmark = pytest.mark.numerics


def _att(maps, tokens):
    roles = ["cls"] + ["word"] * (len(tokens) - 2) + ["sep"]
    wid = [-1] + list(range(len(tokens) - 2)) + [-1]
    return Attention(maps=np.asarray(maps, np.float32), tokens=tokens, roles=roles,
                     word_ids=wid, words=tokens[1:-1])


def test_known_heads():
    n = 5
    toks = ["[CLS]", "a", ",", "b", "[SEP]"]
    to_cls = np.zeros((n, n))
    to_cls[:, 0] = 1
    prev = np.zeros((n, n))
    prev[0, 0] = 1
    for i in range(1, n):
        prev[i, i - 1] = 1
    uniform = np.full((n, n), 1 / n)
    att = _att(np.stack([to_cls, prev, uniform])[None], toks)
    s = item_stats(att)
    assert s.shape == (1, 3, len(STAT_COLUMNS))
    c = {k: i for i, k in enumerate(STAT_COLUMNS)}
    assert s[0, 0, c["cls"]] == pytest.approx(1.0)
    assert s[0, 0, c["entropy"]] == pytest.approx(0.0)
    assert s[0, 1, c["prev"]] == pytest.approx(4 / 5)
    assert s[0, 1, c["self"]] == pytest.approx(1 / 5)
    assert s[0, 1, c["punct"]] == pytest.approx(1 / 5)  # only row 3 looks at ","
    assert s[0, 2, c["sep"]] == pytest.approx(1 / 5)
    assert s[0, 2, c["next"]] == pytest.approx(4 / 25)
    assert s[0, 2, c["entropy"]] == pytest.approx(np.log(5))
    assert s[0, 2, c["cls_entropy"]] == pytest.approx(np.log(5))


def test_average_is_per_item():
    a = _att(np.eye(3)[None, None], ["[CLS]", "x", "[SEP]"])            # self = 1
    shift = np.zeros((5, 5))
    shift[:, 0] = 1                                                      # all to [CLS]
    b = _att(shift[None, None], ["[CLS]", "x", "y", "z", "[SEP]"])
    df = head_stats([a, b])
    assert df.index.names == ["layer", "head"]
    assert df.loc[(0, 0), "self"] == pytest.approx((1 + 1 / 5) / 2)
    assert df.loc[(0, 0), "cls"] == pytest.approx((1 / 3 + 1) / 2)
    assert df.meta["n_items"] == 2
    assert df.meta["uniform_entropy"] == pytest.approx((np.log(3) + np.log(5)) / 2)


def test_errors():
    with pytest.raises(InputError):
        head_stats([])
    a = _att(np.eye(3)[None, None], ["[CLS]", "x", "[SEP]"])
    b = _att(np.stack([np.eye(3)] * 2)[None], ["[CLS]", "x", "[SEP]"])
    with pytest.raises(InputError, match="same layers"):
        head_stats([a, b])
