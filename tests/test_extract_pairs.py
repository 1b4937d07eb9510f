"""``extract`` over (source, target) pairs of an encoder–decoder model: the cross-attention
as every item's maps ([layer, head, target, source]), the encoder's and decoder's
self-attention beside it, the store's checksums, resume and Dask, and the analyses that
read cross-attention from the store."""

from __future__ import annotations


import numpy as np
import pytest

import attnkit as ak
from attnkit.core.cross import CrossAttention
from attnkit.errors import EmptyInputError, InputError, StoreError
from attnkit.testing import tiny_model, tiny_seq2seq

PAIRS = [
    ("The cat sat on the mat.", "A cat sat."),
    ("We read.", "Nous lisons le livre."),
    ("A dog.", "Un chien."),
    ("Many more words are here now, and more.", "Beaucoup de mots."),
    ("The end.", "La fin."),
]
#: Stored maps are float16: a weight w is within w * 2**-11 of what was computed (half an
#: ulp below 1), so every cell within 2**-11 < 1e-3, and a row's sum within 2**-11 of 1.
TOL = 1e-3

KEEP_ALL = ("cross", "encoder", "decoder")


@pytest.fixture(scope="module", params=["t5", "bart"])
def s2s_model(request):
    return tiny_seq2seq(request.param)


@pytest.mark.parametrize("level", ["token", "word"])
def test_stored_cross_attention_equals_attend(s2s_model, level, tmp_path):
    sset = ak.extract(s2s_model, PAIRS, level=level, keep=KEEP_ALL, store=tmp_path / "s",
                      batch_size=2, progress=False)
    assert sset.pairs == ["cross", "encoder", "decoder"] and len(sset) == len(PAIRS)
    assert (sset.n_layers, sset.n_heads) == (s2s_model.n_decoder_layers, s2s_model.n_decoder_heads)
    for i, (source, target) in enumerate(PAIRS):
        ref = s2s_model.attend(source, target, level=level)
        got = sset[i]
        assert isinstance(got, CrossAttention) and got.level == level
        assert got.shape == ref.cross.shape and got.shape[2] != got.shape[3] or i == 4
        assert got.row_tokens == ref.cross.row_tokens and got.col_tokens == ref.cross.col_tokens
        assert got.words == ref.cross.words and got.source_words == ref.cross.source_words
        np.testing.assert_array_equal(got.word_ids, ref.cross.word_ids)
        np.testing.assert_array_equal(got.source_roles, ref.cross.source_roles)
        np.testing.assert_allclose(got.maps, ref.cross.maps, rtol=0, atol=TOL)
        # rows sum to 1 over the source
        np.testing.assert_allclose(got.maps.sum(-1), 1.0, rtol=0, atol=TOL)
        both = sset.pair(i)
        assert both.cross.shape == got.shape and both.decoder.causal and not both.encoder.causal
        assert both.encoder.tokens == ref.encoder.tokens and both.decoder.tokens == ref.decoder.tokens
        np.testing.assert_allclose(both.encoder.maps, ref.encoder.maps, rtol=0, atol=TOL)
        np.testing.assert_allclose(both.decoder.maps, ref.decoder.maps, rtol=0, atol=TOL)
    # rollout through the decoder into the encoder, from the store as from the model
    # (products of float16-rounded maps: within a few TOL)
    np.testing.assert_allclose(ak.seq2seq_rollout(sset.pair(0)),
                               ak.seq2seq_rollout(s2s_model.attend(*PAIRS[0], level=level)),
                               rtol=0, atol=4 * TOL)
    # reopened without the model: the same bits
    again = ak.open_store(tmp_path / "s")
    for i in range(len(PAIRS)):
        np.testing.assert_array_equal(again[i].maps, sset[i].maps)
        np.testing.assert_array_equal(again.pair(i).encoder.maps, sset.pair(i).encoder.maps)


def test_in_memory_cross_only_and_known_shapes():
    model = tiny_seq2seq("t5")
    sset = ak.extract(model, PAIRS[:2], level="token", progress=False)  # keep="maps": the cross
    assert sset.pairs == ["cross"] and sset.path is None
    src, tgt = model.encode(PAIRS[0][0]), model.encode_target(PAIRS[0][1])
    assert sset[0].shape == (2, 2, len(tgt), len(src))
    assert sset[0].col_tokens == src.tokens and sset[0].row_tokens == tgt.tokens
    s2s = sset.pair(0)
    assert s2s.encoder is None and s2s.decoder is None and "not kept" in repr(s2s)
    with pytest.raises(InputError, match="keep=\\('cross', 'encoder', 'decoder'\\)"):
        ak.seq2seq_rollout(s2s)
    with pytest.raises(InputError, match="one-stack"):
        ak.extract(tiny_model("bert"), ["The cat."], progress=False).pair(0)


def test_analyses_read_cross_attention_from_the_store(tmp_path):
    model = tiny_seq2seq("bart")
    sset = ak.extract(model, PAIRS, keep=("cross", "stats"), store=tmp_path / "s", batch_size=2,
                      progress=False)
    direct = [model.attend(s, t, level="word").cross for s, t in PAIRS]
    from_store = ak.head_stats(sset, progress=False)  # from the stored "stats" summary
    from_maps = ak.head_stats(list(sset), progress=False)
    ref = ak.head_stats(direct, progress=False)
    # float16 maps: every statistic is a mean of weights, each within TOL
    np.testing.assert_allclose(from_store.table.values, ref.table.values, rtol=0, atol=TOL)
    np.testing.assert_allclose(from_maps.table.values, ref.table.values, rtol=0, atol=TOL)
    assert from_store.table[["self", "next", "prev"]].isna().all().all()  # a rectangle


def test_toy_reversal_model_end_to_end(tmp_path):
    """The shipped reversal T5: its anti-diagonal head is found from the store as from the
    model (the known answer of docs/results.md)."""
    from attnkit.toys.tasks import reversal_gold, reversal_model, reversal_pairs

    model = reversal_model()
    pairs = reversal_pairs(20, seed=9_999)
    gold = reversal_gold(pairs)
    sset = ak.extract(model, pairs, store=tmp_path / "rev", batch_size=8, progress=False)
    got = ak.alignment_error_rate(sset, gold, progress=False)
    ref = ak.alignment_error_rate([model.attend(s, t) for s, t in pairs], gold, progress=False)
    assert got.meta["best"] == ref.meta["best"]
    layer, head = got.meta["best"]
    assert got.loc[(layer, head), "accuracy"] >= 0.9
    np.testing.assert_allclose(got.table["accuracy"], ref.table["accuracy"], atol=0.05)


def test_resume_after_interruption_gives_the_same_checksums(tmp_path, monkeypatch):
    from attnkit.storage.batches import write as write_mod

    model = tiny_seq2seq("t5")
    whole = ak.extract(model, PAIRS, level="token", keep=KEEP_ALL, store=tmp_path / "whole",
                       batch_size=1, progress=False)
    real = write_mod.run_batch
    calls = {"n": 0}

    def dies_after_two(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] > 2:
            raise KeyboardInterrupt("killed")
        return real(*args, **kwargs)

    monkeypatch.setattr(write_mod, "run_batch", dies_after_two)
    with pytest.raises(KeyboardInterrupt):
        ak.extract(model, PAIRS, level="token", keep=KEEP_ALL, store=tmp_path / "cut",
                   batch_size=1, progress=False)
    monkeypatch.setattr(write_mod, "run_batch", real)
    with pytest.raises(StoreError, match="incomplete"):
        ak.open_store(tmp_path / "cut")
    resumed = ak.extract(model, PAIRS, level="token", keep=KEEP_ALL, store=tmp_path / "cut",
                         batch_size=1, progress=False)
    assert resumed.run_info == {"computed_batches": 3, "reused_batches": 2}
    assert whole.run_info == {"computed_batches": 5, "reused_batches": 0}
    # every chunk file (data and its crc32c) is the same bytes as the uninterrupted run's
    for name in ("maps", "encoder/maps", "decoder/maps"):
        a = sorted((tmp_path / "whole" / name / "c").iterdir())
        b = sorted((tmp_path / "cut" / name / "c").iterdir())
        assert [p.name for p in a] == [p.name for p in b] and a
        assert [p.read_bytes() for p in a] == [p.read_bytes() for p in b]
    # a damaged chunk of the encoder's maps: the read refuses, extract recomputes it
    chunk = next((tmp_path / "cut" / "encoder" / "maps" / "c").iterdir())
    chunk.write_bytes(chunk.read_bytes()[:-8] + b"\0" * 8)
    with pytest.raises(StoreError, match="damaged"):
        [ak.open_store(tmp_path / "cut").pair(i) for i in range(len(PAIRS))]
    fixed = ak.extract(model, PAIRS, level="token", keep=KEEP_ALL, store=tmp_path / "cut",
                       batch_size=1, progress=False)
    assert fixed.run_info["computed_batches"] >= 1
    for i in range(len(PAIRS)):
        np.testing.assert_array_equal(fixed.pair(i).encoder.maps, whole.pair(i).encoder.maps)


def _files(path):
    return sorted((p.relative_to(path), p.stat().st_mtime_ns) for p in path.rglob("*"))


def test_bad_input_is_refused_and_changes_nothing(tmp_path):
    model = tiny_seq2seq("t5")
    path = tmp_path / "s"
    ak.extract(model, PAIRS[:2], store=path, progress=False)
    before = _files(path)
    with pytest.raises(InputError, match=r"\(source, target\) pair"):
        ak.extract(model, ["The cat sat.", "We read."], store=path, progress=False)
    with pytest.raises(InputError, match=r"\(source, target\) pair"):
        ak.extract(model, [("a", "b", "c")], store=path, progress=False)
    with pytest.raises(EmptyInputError, match="Input 1: The target"):
        ak.extract(model, [PAIRS[0], ("We read.", "   ")], store=path, progress=False)
    with pytest.raises(InputError, match="Input 0: Token id 99999 is outside the tokenizer's vocabulary"):
        ak.extract(model, [("We read.", [0, 99999, 1])], store=path, progress=False)
    with pytest.raises(InputError, match="Input 0: A target must be a text or token ids"):
        ak.extract(model, [("We read.", ["Nous", "lisons"])], store=path, progress=False)
    with pytest.raises(InputError, match="add 'cross'"):
        ak.extract(model, PAIRS, keep="encoder", store=path, progress=False)
    with pytest.raises(InputError, match="measure='weights'"):
        ak.extract(model, PAIRS, measure="norm", store=path, progress=False)
    with pytest.raises(InputError, match="one-stack models"):
        ak.extract(model, PAIRS, level="token", keep=("maps", "qk"), store=path, progress=False)
    with pytest.raises(InputError, match="square maps"):
        ak.extract(model, PAIRS, keep=("cross", "edges"), store=path, progress=False)
    with pytest.raises(StoreError, match="attention kept of pairs"):
        ak.extract(model, PAIRS[:2], keep=KEEP_ALL, store=path, progress=False)
    # cross-attention asked of a one-stack model (a pair there is a sentence pair)
    with pytest.raises(InputError, match="one stack"):
        ak.extract(tiny_model("bert"), [("The cat.", "A dog.")], keep="cross", store=path,
                   progress=False)
    with pytest.raises(InputError, match="one stack"):
        ak.extract("attnkit.testing:tiny_model", ["The cat."], keep=KEEP_ALL, store=path,
                   progress=False)
    assert _files(path) == before
    assert not (tmp_path / "never").exists()
    with pytest.raises(InputError):
        ak.extract(model, ["The cat sat."], store=tmp_path / "never", progress=False)
    assert not (tmp_path / "never").exists()


@pytest.mark.slow
def test_dask_extracts_the_same_pairs(tmp_path, dask_cluster):
    with dask_cluster(processes=True) as client:
        ref = ak.extract(tiny_seq2seq("t5"), PAIRS, level="token", keep=KEEP_ALL, batch_size=2,
                         progress=False)
        on = ak.extract("attnkit.testing:tiny_seq2seq", PAIRS, level="token", keep=KEEP_ALL,
                        batch_size=2, store=tmp_path / "s", client=client, progress=False)
        assert on.run_info == {"computed_batches": 3, "reused_batches": 0}
        again = ak.extract("attnkit.testing:tiny_seq2seq", PAIRS, level="token", keep=KEEP_ALL,
                           batch_size=2, store=tmp_path / "s", client=client, progress=False)
        assert again.run_info == {"computed_batches": 0, "reused_batches": 3}
        for i in range(len(PAIRS)):
            a, b = ref.pair(i), on.pair(i)
            assert a.cross.row_tokens == b.cross.row_tokens
            # one torch thread per worker: float32 order, then float16 rounding (see test_engine)
            for x, y in ((a.cross, b.cross), (a.encoder, b.encoder), (a.decoder, b.decoder)):
                np.testing.assert_allclose(x.maps, y.maps, rtol=0, atol=TOL)
        with pytest.raises(InputError, match=r"Input 0: .*\(source, target\) pair"):
            ak.extract("attnkit.testing:tiny_seq2seq", ["The cat."], store=tmp_path / "t",
                       client=client, progress=False)


# ------------------------------------------- sources alone: targets generated (issue 28)
SOURCES = [source for source, _ in PAIRS]


def test_generate_extracts_the_models_own_targets_into_a_store_and_back(s2s_model, tmp_path):
    """``extract(model, sources, generate=True)``: each item's target is the model's greedy
    output for its source (the ids ``model.generate`` returns), stored as the item's target,
    and the stored maps are those of ``model.attend(source, generate=True)``; a second call
    reuses every batch of the store."""
    from tolerances import EXACT, F16, assert_close

    store = tmp_path / "gen"
    sset = ak.extract(s2s_model, SOURCES, level="token", keep=KEEP_ALL, store=store, batch_size=2,
                      generate=True, max_new_tokens=4, progress=False)
    assert len(sset) == len(SOURCES)
    for i, source in enumerate(SOURCES):
        ids = s2s_model.generate(source, max_new_tokens=4)
        ref = s2s_model.attend(source, generate=True, max_new_tokens=4, level="token")
        got = sset.pair(i)
        assert got.decoder.tokens == s2s_model.encode_target(ids).tokens == ref.decoder.tokens
        assert got.cross.source_tokens == s2s_model.encode(source).tokens
        assert got.cross.shape == ref.cross.shape == (s2s_model.n_decoder_layers, s2s_model.n_decoder_heads,
                                                      len(ids), len(ref.encoder.tokens))
        assert_close(got.cross.maps, ref.cross.maps, F16)
        assert_close(got.decoder.maps, ref.decoder.maps, F16)
    again = ak.extract(s2s_model, SOURCES, level="token", keep=KEEP_ALL, store=store, batch_size=2,
                       generate=True, max_new_tokens=4, progress=False)
    assert again.run_info["computed_batches"] == 0 and again.run_info["reused_batches"] > 0, again.run_info
    assert_close(again[2].maps, sset[2].maps, EXACT)


def test_generate_refuses_pairs_one_stack_models_and_names():
    t5 = tiny_seq2seq("t5")
    with pytest.raises(InputError, match="Input 1: with generate=True every input is a source alone"):
        ak.extract(t5, ["The cat.", ("A dog.", "Un chien.")], generate=True, progress=False)
    with pytest.raises(InputError, match="generate=True needs a loaded encoder-decoder"):
        ak.extract(tiny_model("bert"), ["The cat."], generate=True, progress=False)
    with pytest.raises(InputError, match="max_new_tokens"):
        ak.extract(t5, ["The cat."], generate=True, max_new_tokens=0, progress=False)
    with pytest.raises(InputError, match="encoder-decoder model"):  # sources without generate
        ak.extract(t5, ["The cat."], progress=False)
