"""Token ids as inputs (Model.encode) and the repeated-random-token inputs of induction_inputs."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import attnkit as ak
from attnkit.errors import EmptyInputError, InputError


def test_encode_ids_as_given(tiny_gpt2):
    tok = tiny_gpt2.tokenizer
    text_ids = tok("The cat sat")["input_ids"]
    bos = tok.bos_token_id
    for ids in ([bos] + text_ids, np.array([bos] + text_ids), torch.tensor([bos] + text_ids)):
        enc = tiny_gpt2.encode(ids)
        assert enc.input_ids == [bos] + text_ids
        assert enc.tokens == tok.convert_ids_to_tokens([bos] + text_ids)
        assert enc.roles == ["cls"] + ["word"] * len(text_ids)
        assert enc.word_ids == [-1] + list(range(len(text_ids)))
        # one word per token: its decoded text, or the token itself when that is blank
        assert enc.words == [tok.decode([i]).strip() or t
                             for i, t in zip(text_ids, tok.convert_ids_to_tokens(text_ids))]
        assert not enc.truncated
    # the same ids as text give the same maps
    att = tiny_gpt2.attend(text_ids)
    np.testing.assert_array_equal(att.maps, tiny_gpt2.attend("The cat sat").maps)
    np.testing.assert_array_equal(att.input_ids, text_ids)


def test_encode_ids_special_roles_and_truncation(tiny_bert):
    tok = tiny_bert.tokenizer
    ids = tok("the cat sat")["input_ids"]  # [CLS] ... [SEP]
    enc = tiny_bert.encode(ids)
    assert enc.roles[0] == "cls" and enc.roles[-1] == "sep" and enc.segments[0] == -1
    assert enc.type_ids == [0] * len(ids)
    long = [ids[1]] * (tiny_bert.max_length + 5)
    enc = tiny_bert.encode(long)
    assert enc.truncated and len(enc) == tiny_bert.max_length


def test_encode_ids_bad(tiny_gpt2):
    with pytest.raises(InputError, match="outside the tokenizer's vocabulary"):
        tiny_gpt2.encode([1, 10**6])
    with pytest.raises(InputError, match="1-D"):
        tiny_gpt2.encode(np.zeros((2, 3), dtype=np.int64))
    with pytest.raises(InputError, match="integers"):
        tiny_gpt2.encode(np.array([1.0, 2.0]))
    with pytest.raises(EmptyInputError, match="besides special"):
        tiny_gpt2.encode([tiny_gpt2.tokenizer.bos_token_id])
    # a list of words is still a list of words
    assert tiny_gpt2.encode(["The", "cat"]).words == ["The", "cat"]


def test_induction_inputs_shape_and_vocabulary(tiny_gpt2):
    inputs = ak.induction_inputs(tiny_gpt2, 4, 10, seed=3)
    bos = tiny_gpt2.tokenizer.bos_token_id
    special = set(tiny_gpt2.tokenizer.all_special_ids)
    assert len(inputs) == 4
    for x in inputs:
        assert x.dtype == np.int64 and x.shape == (21,) and x[0] == bos
        np.testing.assert_array_equal(x[1:11], x[11:])
        assert len(set(x[1:11].tolist())) == 10  # drawn without replacement
        assert not special & set(x[1:].tolist())
    assert not all(np.array_equal(inputs[0], x) for x in inputs[1:])
    again = ak.induction_inputs(tiny_gpt2, 4, 10, seed=3)
    assert all(np.array_equal(a, b) for a, b in zip(inputs, again))
    other = ak.induction_inputs(tiny_gpt2, 4, 10, seed=4)
    assert not np.array_equal(inputs[0], other[0])
    no_bos = ak.induction_inputs(tiny_gpt2, 1, 10, bos=False, seed=3)[0]
    assert no_bos.shape == (20,)


def test_induction_inputs_run_everywhere(tiny_gpt2):
    inputs = ak.induction_inputs(tiny_gpt2, 2, 5)
    sset = ak.extract(tiny_gpt2, inputs, level="token", progress=False)
    assert [len(a) for a in sset] == [11, 11]
    att = tiny_gpt2.attend(inputs[0])
    assert att.roles[0] == "cls" and (att.roles[1:] == "word").all()


def test_induction_inputs_with_replacement_when_vocabulary_is_small():
    from attnkit.toys.induction import train_induction_model

    model = train_induction_model(vocab_size=8, hidden=8, start_length=4, max_length=4, steps=0,
                                  progress=False)
    x = ak.induction_inputs(model, 1, 20, seed=0)[0]  # 8 words < 20: drawn with replacement
    assert x.shape == (41,) and set(x[1:].tolist()) <= set(range(3, 11))
    np.testing.assert_array_equal(x[1:21], x[21:])
    assert len(set(ak.induction_inputs(model, 1, 8)[0][1:9].tolist())) == 8  # enough: without
    with pytest.raises(InputError, match="replace=True"):
        ak.induction_inputs(model, 1, 20, replace=False)


def test_induction_inputs_bad(tiny_gpt2):
    with pytest.raises(InputError, match="maximum"):
        ak.induction_inputs(tiny_gpt2, 1, tiny_gpt2.max_length)
    with pytest.raises(InputError, match="at least 1"):
        ak.induction_inputs(tiny_gpt2, 0, 5)
