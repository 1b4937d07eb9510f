"""Encoder–decoder models: T5 (relative position bias on the self-attention of both
stacks), BART and Marian. Their exactness against each architecture's eager attention is part
of the architecture sweep (tests/test_capture.py); here the structure, lazy encoders, word
pooling, generation, loading and bad input.
"""

import numpy as np
import pytest
import torch

import attnkit as ak
from attnkit.core.cross import CrossAttention
from attnkit.errors import CaptureError, EmptyInputError, InputError, UnsupportedModelError
from attnkit.runtime.seq2seq import Seq2SeqModel
from attnkit.testing import SEQ2SEQ_KINDS, tiny_model, tiny_seq2seq
from eager_cases import seq2seq_eager
from tolerances import assert_close, F32, F64

pytestmark = pytest.mark.numerics

SOURCE = "A student reads the new book in the library, unbelievably."
TARGET = "The cat sat on the mat."


@pytest.fixture(scope="module")
def models():
    return {k: tiny_seq2seq(k, heads=4, hidden=32, layers=2) for k in SEQ2SEQ_KINDS}


@pytest.mark.parametrize("kind", SEQ2SEQ_KINDS)
def test_encoder_decoder_cross_structure(models, kind):
    """Shapes, tokens and masks of the three attentions (their exactness against eager
    attention is part of the architecture sweep, tests/test_capture.py)."""
    s2s = models[kind].attend(SOURCE, TARGET)
    assert s2s.cross.shape == (2, 4, len(s2s.decoder), len(s2s.encoder))
    assert_close(s2s.cross.maps.sum(-1), 1.0, F32, scale=1)
    assert s2s.cross.row_tokens == s2s.decoder.tokens
    assert s2s.cross.col_tokens == s2s.encoder.tokens
    assert s2s.decoder.causal and not s2s.encoder.causal
    assert not np.triu(s2s.decoder.maps, k=1).any()


def test_t5_relative_bias_is_in_the_maps(models):
    """T5's bias moves the maps: zeroing it changes them (so the test above checks it)."""
    model = models["t5"]
    before = model.attend(SOURCE, TARGET).encoder.maps
    table = model.hf.encoder.block[0].layer[0].SelfAttention.relative_attention_bias.weight
    saved = table.detach().clone()
    with torch.no_grad():
        table.zero_()
    try:
        after = model.attend(SOURCE, TARGET).encoder.maps
    finally:
        with torch.no_grad():
            table.copy_(saved)
    assert np.abs(before - after).max() > 1e-3


@pytest.mark.parametrize("kind", ["bart", "marian"])
def test_lazy_encoder_equals_dense(models, kind):
    model = models[kind]
    dense = model.attend(SOURCE, TARGET)
    lazy = model.attend(SOURCE, TARGET, lazy=True)
    assert isinstance(lazy.encoder, ak.LazyAttention)
    # lazy maps are exp(s - lse) from the fused kernel's lse: float32 rounding, 1e-5
    assert_close(lazy.encoder.to_dense().maps, dense.encoder.maps, F32, scale=1)
    # the lazy encoder's output comes from the fused kernel, the dense one's from the eager
    # product: the decoder reads float32 hidden states that differ in the last bits
    np.testing.assert_allclose(lazy.cross.maps, dense.cross.maps, rtol=1e-3, atol=1e-5)


def test_lazy_refused_for_position_bias(models):
    with pytest.raises(CaptureError, match="position bias"):
        models["t5"].attend(SOURCE, TARGET, lazy=True)


def test_word_pooling_on_both_sides(models):
    s2s = models["bart"].attend(SOURCE, TARGET)
    words = s2s.to_words()
    assert words.cross.level == "word"
    assert words.cross.col_tokens == words.encoder.tokens
    assert words.cross.row_tokens == words.decoder.tokens
    assert_close(words.cross.maps.sum(-1), 1.0, F32, scale=1)
    assert "library" in words.cross.col_tokens and "mat" in words.cross.row_tokens
    level = models["bart"].attend(SOURCE, TARGET, level="word")
    np.testing.assert_array_equal(level.cross.maps, words.cross.maps)


@pytest.mark.parametrize("kind", SEQ2SEQ_KINDS)
def test_generate_is_greedy_and_read_back(models, kind):
    model = models[kind]
    a = model.attend(SOURCE, generate=True, max_new_tokens=6)
    b = model.attend(SOURCE, generate=True, max_new_tokens=6, seed=3)
    assert a.meta["generated"]
    assert a.decoder.tokens == b.decoder.tokens
    assert 2 <= len(a.decoder) <= 7
    ids = model.generate(SOURCE, max_new_tokens=6)
    with torch.inference_mode():
        ref = model.hf.generate(torch.tensor([model.encode(SOURCE).input_ids]), max_new_tokens=6,
                                do_sample=False, num_beams=1)
    assert ids == ref[0].tolist()
    teacher = model.attend(SOURCE, ids)
    np.testing.assert_array_equal(teacher.cross.maps, a.cross.maps)


@pytest.mark.parametrize("kind", SEQ2SEQ_KINDS)
def test_load_from_folder(tmp_path, models, kind):
    model = models[kind]
    model.hf.save_pretrained(tmp_path)
    model.tokenizer.save_pretrained(tmp_path)
    loaded = ak.load(tmp_path, device="cpu")
    assert isinstance(loaded, Seq2SeqModel)
    np.testing.assert_array_equal(loaded.attend(SOURCE, TARGET).cross.maps,
                                  model.attend(SOURCE, TARGET).cross.maps)


@pytest.mark.filterwarnings("ignore:Recommended. pip install sacremoses")
def test_marian_slow_sentencepiece_tokenizer(tmp_path):
    spm = pytest.importorskip("sentencepiece")
    from transformers import MarianTokenizer
    import json

    from attnkit.testing import CORPUS

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(CORPUS * 5))
    spm.SentencePieceTrainer.train(input=str(corpus), model_prefix=str(tmp_path / "spm"),
                                   vocab_size=60, model_type="bpe", minloglevel=2,
                                   hard_vocab_limit=False)
    pieces = [line.split("\t")[0] for line in (tmp_path / "spm.vocab").read_text().splitlines()]
    vocab = {"</s>": 0, "<unk>": 1, **{p: i + 2 for i, p in enumerate(
        p for p in pieces if p not in ("</s>", "<unk>", "<s>"))}}
    vocab["<pad>"] = len(vocab)
    (tmp_path / "vocab.json").write_text(json.dumps(vocab))
    tok = MarianTokenizer(str(tmp_path / "spm.model"), str(tmp_path / "spm.model"),
                          str(tmp_path / "vocab.json"))
    assert not tok.is_fast
    import transformers as tf

    torch.manual_seed(0)
    cfg = tf.MarianConfig(vocab_size=len(vocab), d_model=16, encoder_layers=1, decoder_layers=1,
                          encoder_attention_heads=2, decoder_attention_heads=2,
                          encoder_ffn_dim=32, decoder_ffn_dim=32, max_position_embeddings=64,
                          pad_token_id=vocab["<pad>"], decoder_start_token_id=vocab["<pad>"],
                          eos_token_id=0)
    model = Seq2SeqModel(tf.MarianMTModel(cfg), tok, name="marian-slow")
    s2s = model.attend("The cat sat on the mat.", "A student reads.")
    enc, dec, cross = seq2seq_eager(model, "The cat sat on the mat.", "A student reads.")
    assert_close(s2s.cross.maps, cross, F32, scale=1)
    assert s2s.encoder.tokens[-1] == "</s>" and s2s.decoder.roles[0] == "cls"
    assert "cat" in s2s.encoder.words


def test_bad_input(models):
    model = models["t5"]
    with pytest.raises(InputError, match="target"):
        model.attend(SOURCE)
    with pytest.raises(InputError, match="not both"):
        model.attend(SOURCE, TARGET, generate=True)
    with pytest.raises(EmptyInputError):
        model.attend(SOURCE, "   ")
    with pytest.raises(EmptyInputError, match="tokenise"):
        model.attend(SOURCE, [model.tokenizer.eos_token_id])
    with pytest.raises(InputError):
        model.attend(SOURCE, 3.5)
    with pytest.raises(InputError, match="vocabulary"):
        model.attend(SOURCE, [10 ** 6])
    with pytest.raises(InputError, match="max_new_tokens"):
        model.attend(SOURCE, generate=True, max_new_tokens=0)


def test_plain_model_refuses_encoder_decoder(models):
    with pytest.raises(UnsupportedModelError, match="Seq2SeqModel"):
        ak.Model(models["t5"].hf, models["t5"].tokenizer)
    with pytest.raises(UnsupportedModelError, match="not an encoder-decoder"):
        Seq2SeqModel(tiny_model("bert").hf, tiny_model("bert").tokenizer)


def test_cross_attention_object():
    maps = np.array([[[[0.5, 0.5, 0.0], [0.0, 0.0, 1.0]]]])
    cross = CrossAttention(maps, ["<pad>", "x"], ["cls", "word"], [-1, 0], ["x"],
                           ["▁a", "▁b", "</s>"], ["word", "word", "sep"], [0, 1, -1], ["a", "b"])
    assert cross.pooled(0, 0, 1).tolist() == [[1.0]]
    with pytest.raises(InputError, match="source"):
        CrossAttention(maps, ["<pad>", "x"], ["cls", "word"], [-1, 0], ["x"], ["a"], ["word"],
                       [0], ["a"])
    with pytest.raises(InputError, match="sum to 1"):
        CrossAttention(maps * 2, ["<pad>", "x"], ["cls", "word"], [-1, 0], ["x"],
                       ["▁a", "▁b", "</s>"], ["word", "word", "sep"], [0, 1, -1], ["a", "b"])


def test_rectangle_analyses_work_and_others_refuse(models):
    model = models["bart"]
    items = [model.attend(SOURCE, TARGET), model.attend("Mary gave John a red apple.", "We read.")]
    stats = ak.head_stats([s.cross for s in items], progress=False)
    assert stats.table[["self", "next", "prev"]].isna().all().all()
    assert ((stats["sep"] >= 0) & (stats["sep"] <= 1)).all()
    # the source's </s> column, averaged over target rows, by hand for one head
    cross = items[0].cross
    by_hand = cross.maps[1, 2][:, cross.source_roles == "sep"].sum(-1).mean()
    sep_both = (by_hand + items[1].cross.maps[1, 2][:, items[1].cross.source_roles == "sep"]
                .sum(-1).mean()) / 2
    assert_close(stats.loc[(1, 2), "sep"], sep_both, F32)
    assert_close(stats.meta["uniform_entropy"], np.mean([np.log(s.cross.n_columns) for s in items]), F64)
    sink = ak.head_scores([s.cross for s in items], kinds=["sink"], progress=False)
    # pooled over every target row of every pair
    first = (sum(s.cross.maps[0, 1][:, 0].sum() for s in items)
             / sum(len(s.cross) for s in items))
    assert_close(sink.loc[(0, 1), "sink"], first, F32)
    with pytest.raises(InputError, match="only kinds=\\['sink'\\]"):
        ak.head_scores([s.cross for s in items], progress=False)
    graph = ak.attention_graph(items[0].encoder, threshold=0.3)
    assert graph.number_of_nodes() > 0
