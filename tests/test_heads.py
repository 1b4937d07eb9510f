"""head_scores: sink, previous-token, induction and duplicate-token shares on hand-built maps."""

from __future__ import annotations

import numpy as np
import pytest

import attnkit as ak
from attnkit.core import blocks
from attnkit.errors import InputError
from tolerances import assert_close, F32

pytestmark = pytest.mark.numerics

# One causal head over "<s> a b a c a": "a" occurs at 1, 3 and 5.
ROWS = [
    [1.0],
    [0.5, 0.5],
    [0.2, 0.3, 0.5],
    [0.1, 0.2, 0.6, 0.1],
    [0.4, 0.1, 0.1, 0.3, 0.1],
    [0.05, 0.15, 0.2, 0.1, 0.3, 0.2],
]
TOKENS = ["<s>", "a", "b", "a", "c", "a"]


def hand_map() -> np.ndarray:
    a = np.zeros((6, 6))
    for q, row in enumerate(ROWS):
        a[q, : len(row)] = row
    return a


def test_hand_built_every_kind():
    att = ak.Attention.from_maps(hand_map(), TOKENS, causal=True)
    assert att.roles[0] == "cls"
    r = ak.head_scores(att, progress=False)
    got = r.loc[(0, 0)]
    # sink: rows 1-5 to position 0 (row 0 left out)
    assert got["sink"] == pytest.approx((0.5 + 0.2 + 0.1 + 0.4 + 0.05) / 5)
    # previous: A[q, q-1] for q = 1..5 (row 1's previous token is the BOS)
    assert got["previous"] == pytest.approx((0.5 + 0.3 + 0.6 + 0.3 + 0.3) / 5)
    # induction: row 3 ("a", seen at 1) -> 2; row 5 ("a", seen at 1 and 3) -> 2 and 4, summed
    assert got["induction"] == pytest.approx((0.6 + (0.2 + 0.3)) / 2)
    # duplicate: row 3 -> 1; row 5 -> 1 and 3, summed
    assert got["duplicate"] == pytest.approx((0.2 + (0.15 + 0.1)) / 2)
    assert r.meta["n_rows"] == {"sink": 5, "previous": 5, "induction": 2, "duplicate": 2}
    uniform = r.meta["uniform"]
    assert uniform["sink"] == pytest.approx(np.mean([1 / 2, 1 / 3, 1 / 4, 1 / 5, 1 / 6]))
    assert uniform["induction"] == pytest.approx((1 / 4 + 2 / 6) / 2)
    assert r.meta["identity"] == "tokens" and r.meta["causal"] is True and r.meta["n_items"] == 1
    assert isinstance(r, ak.HeadResult) and list(r.table.index.names) == ["layer", "head"]


def test_kinds_select_and_order_columns():
    att = ak.Attention.from_maps(hand_map(), TOKENS, causal=True)
    r = ak.head_scores(att, kinds=("duplicate", "sink"), progress=False)
    assert list(r.columns) == ["duplicate", "sink"]
    assert r.meta["value"] == "duplicate"
    one = ak.head_scores(att, kinds="induction", progress=False)
    assert list(one.columns) == ["induction"]
    assert one.loc[(0, 0), "induction"] == pytest.approx(0.55)


def test_immediate_repeat_counts_attention_to_itself():
    # "<s> x x": in row 2 the token after the earlier "x" (position 1) is row 2 itself
    a = np.array([[1, 0, 0], [0.5, 0.5, 0], [0.1, 0.2, 0.7]])
    r = ak.head_scores(ak.Attention.from_maps(a, ["<s>", "x", "x"]), progress=False)
    assert r.loc[(0, 0), "induction"] == pytest.approx(0.7)
    assert r.loc[(0, 0), "duplicate"] == pytest.approx(0.2)


def test_special_tokens_are_not_query_rows():
    # GPT-2 style: <|endoftext|> as BOS and again as separator; only row 3 ("x") counts
    a = np.tril(np.ones((4, 4)))
    a /= a.sum(1, keepdims=True)
    att = ak.Attention.from_maps(a, ["<|endoftext|>", "x", "<|endoftext|>", "x"])
    assert att.roles.tolist() == ["cls", "word", "sep", "word"]
    r = ak.head_scores(att, progress=False)
    assert r.meta["n_rows"]["induction"] == 1
    assert r.loc[(0, 0), "induction"] == pytest.approx(0.25)  # to position 2
    assert r.loc[(0, 0), "duplicate"] == pytest.approx(0.25)  # to position 1


def test_first_position_and_single_token():
    # the first row is never counted: a one-token input has no row for any kind
    att = ak.Attention.from_maps(np.ones((1, 1)), ["<s>"])
    with pytest.warns(UserWarning, match="NaN"):
        r = ak.head_scores(att, progress=False)
    assert r.table.isna().all().all()
    assert r.meta["n_rows"] == {"sink": 0, "previous": 0, "induction": 0, "duplicate": 0}


def test_no_repeat_warns_and_gives_nan():
    a = np.tril(np.ones((3, 3)))
    a /= a.sum(1, keepdims=True)
    with pytest.warns(UserWarning, match="induction_inputs"):
        r = ak.head_scores(ak.Attention.from_maps(a, ["a", "b", "c"]), progress=False)
    assert np.isnan(r.loc[(0, 0), "induction"]) and r.loc[(0, 0), "previous"] == pytest.approx(
        (1 / 2 + 1 / 3) / 2)


def test_input_ids_define_identity():
    a = np.tril(np.ones((3, 3)))
    a /= a.sum(1, keepdims=True)
    att = ak.Attention.from_maps(a, ["a", "b", "a"])
    att.input_ids = np.array([7, 8, 9])  # same string, different ids: not a repeat
    with pytest.warns(UserWarning):
        r = ak.head_scores(att, progress=False)
    assert r.meta["identity"] == "input_ids" and r.meta["n_rows"]["induction"] == 0
    att.input_ids = np.array([7, 8, 7])
    r = ak.head_scores(att, progress=False)
    assert r.loc[(0, 0), "induction"] == pytest.approx(1 / 3)


def test_collection_pools_rows_over_inputs():
    one = ak.Attention.from_maps(hand_map(), TOKENS, causal=True)
    a = np.array([[1, 0, 0], [0.5, 0.5, 0], [0.1, 0.2, 0.7]])
    two = ak.Attention.from_maps(a, ["<s>", "x", "x"])
    r = ak.head_scores([one, two], progress=False)
    # induction rows: 0.6 and 0.5 from the first input, 0.7 from the second
    assert r.loc[(0, 0), "induction"] == pytest.approx((0.6 + 0.5 + 0.7) / 3)
    assert r.loc[(0, 0), "sink"] == pytest.approx((1.25 + 0.5 + 0.1) / 7)
    assert r.meta["n_items"] == 2 and r.meta["n_rows"]["sink"] == 7


def test_heads_and_layers_are_kept_apart():
    rng = np.random.default_rng(0)
    maps = np.tril(rng.random((2, 3, 7, 7)) + 1e-3)
    maps /= maps.sum(-1, keepdims=True)
    tokens = ["<s>", "p", "q", "r", "p", "q", "r"]
    r = ak.head_scores(ak.Attention.from_maps(maps, tokens), progress=False)
    for layer in range(2):
        for head in range(3):
            single = ak.Attention.from_maps(maps[layer, head], tokens)
            expect = ak.head_scores(single, progress=False).loc[(0, 0)]
            assert_close(r.loc[(layer, head)], expect, F32)
    # reference: a plain loop over rows
    a = maps[1, 2]
    ind = np.mean([a[q, q - 2] for q in (4, 5, 6)])
    assert r.loc[(1, 2), "induction"] == pytest.approx(ind, rel=1e-6)


class BlockOnly:
    """AttentionLike that is not an Attention: it answers only block reads, and records them."""

    def __init__(self, att):
        self._att = att
        self.tokens, self.roles, self.word_ids, self.words = att.tokens, att.roles, att.word_ids, att.words
        self.level, self.causal, self.meta = att.level, att.causal, {}
        self.input_ids = att.input_ids
        self.reads: list[tuple[int, int]] = []

    n_layers = property(lambda self: self._att.n_layers)
    n_heads = property(lambda self: self._att.n_heads)

    def __len__(self):
        return len(self._att)

    def map(self, layer, head):
        raise AssertionError("head_scores must read blocks, not whole maps")

    def block(self, layer, head, rows, cols):
        out = self._att.block(layer, head, rows, cols)
        self.reads.append(out.shape)
        return out.copy()

    def pooled(self, layer, head, size, reduce="max"):
        raise AssertionError("not needed")


def test_streams_blocks_from_non_dense_attention(monkeypatch):
    rng = np.random.default_rng(1)
    n = 40
    maps = np.tril(rng.random((2, 2, n, n)) + 1e-3)
    maps /= maps.sum(-1, keepdims=True)
    tokens = ["<s>"] + [f"t{i}" for i in rng.integers(0, 8, n - 1)]
    dense = ak.Attention.from_maps(maps, tokens)
    lazy = BlockOnly(dense)
    monkeypatch.setattr(blocks, "BAND_ELEMENTS", 5 * n)  # bands of 5 rows
    assert isinstance(lazy, ak.core.types.AttentionLike)
    got = ak.head_scores(lazy, progress=False)
    want = ak.head_scores(dense, progress=False)
    assert_close(got.table.to_numpy(), want.table.to_numpy(), F32)
    assert got.meta == want.meta
    assert lazy.reads and max(r * c for r, c in lazy.reads) <= 5 * n
    # causal: a band of rows r0..r1 reads columns up to r1 only; row 0 has no cell to
    # score (no previous token), so the first band is rows 1..5 and columns 0..5
    assert lazy.reads[0] == (5, 6)


def test_word_level_uses_words():
    maps = np.tril(np.ones((1, 1, 6, 6)))
    maps /= maps.sum(-1, keepdims=True)
    att = ak.Attention.from_maps(maps, ["[CLS]", "play", "##ing", "play", "##ing", "[SEP]"])
    words = att.to_words()
    assert words.tokens == ["[CLS]", "playing", "playing", "[SEP]"]
    r = ak.head_scores(words, kinds=("duplicate",), progress=False)
    assert r.meta["identity"] == "tokens" and r.meta["level"] == "word"
    assert r.meta["n_rows"]["duplicate"] == 1


def test_real_decoder_tokens_and_set(tiny_gpt2):
    inputs = ak.induction_inputs(tiny_gpt2, 3, 6, seed=1)
    atts = [tiny_gpt2.attend(x) for x in inputs]
    r = ak.head_scores(atts, progress=False)
    assert r.meta["identity"] == "input_ids"
    assert r.meta["n_rows"] == {"sink": 36, "previous": 36, "induction": 18, "duplicate": 18}
    # induction reference: the row 6 positions into the second copy attends back length-1
    ref = np.mean([a.maps[:, :, q, q - 5] for a in atts for q in range(7, 13)], axis=0)
    assert_close(r.grid("induction"), ref, F32)
    # from a stored set: the store keeps the token ids too, same numbers
    sset = ak.extract(tiny_gpt2, inputs, level="token", progress=False)
    s = ak.head_scores(sset, progress=False)
    assert s.meta["identity"] == "input_ids" and s.meta["n_rows"] == r.meta["n_rows"]
    np.testing.assert_allclose(s.table.to_numpy(), r.table.to_numpy(), atol=2e-3)  # float16 store
    assert r.widget("induction").value_name == "induction"


def test_bad_input():
    att = ak.Attention.from_maps(hand_map(), TOKENS, causal=True)
    with pytest.raises(InputError, match="kinds"):
        ak.head_scores(att, kinds=("sinks",), progress=False)
    with pytest.raises(InputError, match="kinds"):
        ak.head_scores(att, kinds=(), progress=False)
    with pytest.raises(InputError, match="twice"):
        ak.head_scores(att, kinds=("sink", "sink"), progress=False)
    with pytest.raises(InputError, match="no attention"):
        ak.head_scores([], progress=False)
    other = ak.Attention.from_maps(np.stack([hand_map()] * 2)[None], TOKENS)
    with pytest.raises(InputError, match="same layers and heads"):
        ak.head_scores([att, other], progress=False)
    with pytest.raises(InputError, match="client must be"):
        ak.head_scores(att, client=object(), progress=False)


def test_other_measures_are_read_as_row_shares():
    weights = hand_map()
    scaled = weights * np.arange(1, 7)[:, None]  # each row a different total, same shares
    att = ak.Attention.from_maps(scaled, TOKENS, causal=True, measure="norm")
    got = ak.head_scores(att, progress=False)
    want = ak.head_scores(ak.Attention.from_maps(weights, TOKENS, causal=True), progress=False)
    assert_close(got.table.to_numpy(), want.table.to_numpy(), F32)
    assert got.meta["measure"] == "norm"
    signed = ak.Attention.from_maps(weights - 0.1, TOKENS, causal=True, measure="grad×attn")
    with pytest.raises(InputError, match="negative"):
        ak.head_scores(signed, progress=False)
