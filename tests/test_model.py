"""load() and Model.attend on BERT-, RoBERTa- and GPT-2-style models."""

import numpy as np
import pytest

import attnkit
from attnkit.errors import EmptyInputError, InputError, ModelNotFoundError, NoAttentionError, TruncationWarning
from tolerances import assert_close, F32


@pytest.mark.parametrize("fixture", ["tiny_bert", "tiny_roberta", "tiny_gpt2"])
def test_attend_text_rows_sum_to_one(fixture, request):
    model = request.getfixturevalue(fixture)
    att = model.attend("The cat sat on the mat, unbelievably.")
    assert att.maps.shape == (2, 2, len(att), len(att))
    assert att.maps.dtype == np.float32
    assert_close(att.maps.sum(-1), 1.0, F32, scale=1)
    assert att.words == ["The", "cat", "sat", "on", "the", "mat", ",", "unbelievably", "."]
    # every word keeps at least one position, in order
    assert (np.diff(att.word_positions) > 0).all()
    w = att.to_words()
    assert [w.tokens[p] for p in w.word_positions] == att.words


def test_bert_special_tokens(tiny_bert):
    att = tiny_bert.attend("The cat sat.")
    assert att.tokens[0] == "[CLS]" and att.tokens[-1] == "[SEP]"
    assert att.roles[0] == "cls" and att.roles[-1] == "sep"
    assert not att.causal


def test_roberta_special_tokens(tiny_roberta):
    att = tiny_roberta.attend(("The cat sat.", "She reads."))
    assert att.tokens[0] == "<s>"
    assert att.roles.tolist().count("sep") == 3  # </s></s> between texts and </s> at the end
    assert att.segments.max() == 1
    assert att.words == ["The", "cat", "sat", ".", "She", "reads", "."]


def test_gpt2_is_causal(tiny_gpt2):
    att = tiny_gpt2.attend("The cat sat on the mat.")
    assert tiny_gpt2.causal and att.causal
    assert np.allclose(np.triu(att.maps, k=1), 0)
    assert (att.roles == "word").all()


def test_word_list_splits_pieces(tiny_bert):
    att = tiny_bert.attend(["The", "cat", "unbelievably"])
    assert att.tokens == ["[CLS]", "the", "cat", "un", "##believ", "##ably", "[SEP]"]
    assert att.word_ids.tolist() == [-1, 0, 1, 2, 2, 2, -1]
    w = att.to_words()
    assert w.tokens == ["[CLS]", "The", "cat", "unbelievably", "[SEP]"]
    assert_close(w.maps[:, :, :3, 3], att.maps[:, :, :3, 3:6].sum(-1), F32)
    assert_close(w.maps[:, :, 3, 0], att.maps[:, :, 3:6, 0].mean(-1), F32)


def test_pair_of_word_lists(tiny_bert):
    att = tiny_bert.attend((["The", "cat"], ["She", "reads"]))
    assert att.words == ["The", "cat", "She", "reads"]
    assert att.word_ids.tolist() == [-1, 0, 1, -1, 2, 3, -1]


@pytest.mark.parametrize("bad", ["", "   ", [], ["ok", ""], ("", "b")])
def test_empty_input(tiny_bert, bad):
    with pytest.raises(EmptyInputError):
        tiny_bert.attend(bad)


def test_wrong_type(tiny_bert):
    with pytest.raises(InputError):
        tiny_bert.attend(42)


def test_too_long_is_truncated_not_crashed(tiny_bert):
    text = " ".join(["the cat sat on the mat ."] * 40)  # > 64 tokens
    with pytest.warns(TruncationWarning):
        att = tiny_bert.attend(text)
    assert att.truncated and len(att) == tiny_bert.max_length
    assert att.tokens[-1] == "[SEP]"
    assert (att.word_positions == -1).any()  # words cut away are marked
    assert_close(att.maps.sum(-1), 1.0, F32, scale=1)


def test_unknown_model_says_how_to_get_it():
    with pytest.raises(ModelNotFoundError, match="no-such-org/no-such-model"):
        attnkit.load("no-such-org/no-such-model")
    with pytest.raises(ModelNotFoundError, match="No model folder"):
        attnkit.load("./definitely/not/here")


def test_sdpa_without_attention_raises(tiny_bert):
    """transformers returns () attentions under SDPA: attnkit must refuse, not go on."""
    from attnkit.runtime.model import Model

    class NoAttn:
        config = tiny_bert.hf.config

        def eval(self):
            return self

        def __call__(self, **kw):
            from types import SimpleNamespace
            return SimpleNamespace(attentions=())

    m = Model(NoAttn(), tiny_bert.tokenizer, name="sdpa")
    with pytest.raises(NoAttentionError, match="eager"):
        m.attend("The cat sat.")


def test_local_folder_roundtrip(tiny_bert, tmp_path):
    tiny_bert.hf.save_pretrained(tmp_path, safe_serialization=True)
    tiny_bert.tokenizer.save_pretrained(tmp_path)
    assert (tmp_path / "model.safetensors").exists()
    m = attnkit.load(tmp_path)
    a, b = m.attend("The cat sat."), tiny_bert.attend("The cat sat.")
    assert_close(a.maps, b.maps, F32, scale=1)


@pytest.mark.realmodel
def test_bundled_minilm(minilm):
    assert (minilm.n_layers, minilm.n_heads, minilm.max_length) == (6, 12, 512)
    att = minilm.attend("The unbelievable cat sat.")
    assert att.tokens[0] == "[CLS]" and att.tokens[-1] == "[SEP]"
    assert att.words == ["The", "unbelievable", "cat", "sat", "."]
    assert_close(att.maps.sum(-1), 1.0, F32, scale=1)
