"""Bad files and unsupported models raise attnkit errors that say what to do, never a bare
OSError, UnicodeDecodeError or transformers ValueError."""

from __future__ import annotations

import pytest

import attnkit as ak
from attnkit.errors import (
    AttnkitError,
    ConllError,
    DataFormatError,
    ModelLoadError,
    ModelNotFoundError,
    UnsupportedModelError,
)
from attnkit.testing import tiny_model

BINARY = bytes(range(256)) * 4  # not UTF-8, holds NUL bytes


@pytest.fixture()
def saved_bert(tmp_path):
    m = tiny_model("bert")
    m.hf.save_pretrained(tmp_path)
    m.tokenizer.save_pretrained(tmp_path)
    return tmp_path


def test_saved_folder_loads(saved_bert):
    assert ak.load(saved_bert).n_layers == 2


def test_missing_weights(saved_bert):
    for f in saved_bert.glob("*.safetensors"):
        f.unlink()
    with pytest.raises(ModelNotFoundError, match=r"weights .* not found.*model\.safetensors"):
        ak.load(saved_bert)


def test_damaged_weights(saved_bert):
    for f in saved_bert.glob("*.safetensors"):
        f.write_bytes(b"not a safetensors file")
    with pytest.raises(ModelLoadError, match="could not be read.*damaged"):
        ak.load(saved_bert)


def test_encoder_decoder_loads_as_seq2seq_and_plain_model_refuses(tmp_path):
    import transformers as tf

    tok = tiny_model("bert").tokenizer
    cfg = tf.T5Config(vocab_size=len(tok), d_model=16, d_kv=8, d_ff=32, num_layers=1,
                      num_heads=2, decoder_start_token_id=0)
    t5 = tf.T5ForConditionalGeneration(cfg)
    t5.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    from attnkit.runtime.seq2seq import Seq2SeqModel

    assert isinstance(ak.load(tmp_path), Seq2SeqModel)
    with pytest.raises(UnsupportedModelError, match="encoder-decoder.*Seq2SeqModel"):
        ak.Model(t5, tok)
    assert issubclass(UnsupportedModelError, AttnkitError)


@pytest.mark.parametrize("content", [BINARY, b"# text\n1\tA\t\xff\xfe"], ids=["binary", "latin1"])
def test_read_conllu_of_a_binary_file(tmp_path, content):
    path = tmp_path / "model.bin"
    path.write_bytes(content)
    with pytest.raises(ConllError, match=r"model\.bin:\d+: .*binary file, not a CoNLL-U treebank"):
        ak.read_conllu(path)
    with pytest.raises(ConllError, match="binary file"):
        ak.read_coref(path)


def test_read_glue_of_a_binary_file(tmp_path):
    path = tmp_path / "train.tsv"
    path.write_bytes(b"Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n" + BINARY)
    with pytest.raises(DataFormatError, match=r"train\.tsv:2: .*binary file, not a GLUE tsv"):
        ak.read_glue(path)
