"""attnkit.runtime.interop: attention in from Hugging Face, TransformerLens and nnsight, out to bertviz
and CircuitsVis, and back.

Every reader is checked against the maps attnkit itself captures from the same tiny model
on the same tokens (exact equality, or float32 rounding: attnkit records the probabilities
of transformers' attention interface, the other tools run the eager attention), and every
writer against the real function of the other tool, which must accept what it gets and
return its HTML. The wrapped Hugging Face models run as a user's would, with eager attention
(``Model.eager()``), since an attnkit Model runs attnkit's attention function.
"""

from __future__ import annotations

import json
import re
import tempfile

import numpy as np
import pytest
import torch

import attnkit as ak
from attnkit.errors import InputError
from attnkit.testing import tiny_model
from tolerances import assert_close, F32

TEXTS = ["The cat sat on the mat.", "Mary gave John a red apple yesterday!"]


@pytest.fixture(scope="module")
def bert():
    return tiny_model("bert")


@pytest.fixture(scope="module")
def gpt2():
    return tiny_model("gpt2")


def _hf(model, texts, **kwargs):
    enc = model.tokenizer(texts, padding=True, return_tensors="pt")
    with torch.inference_mode(), model.eager():
        out = model.hf(**enc, output_attentions=True, **kwargs)
    return enc, out


def _same_alignment(a, b, words=True):
    assert a.tokens == b.tokens
    assert a.roles.tolist() == b.roles.tolist()
    if words:
        assert a.word_ids.tolist() == b.word_ids.tolist()
    assert a.causal == b.causal


# ----------------------------------------------------------------- Hugging Face
@pytest.mark.parametrize("use_mask", [True, False])
def test_from_transformers_right_padded_batch(bert, use_mask):
    enc, out = _hf(bert, TEXTS)
    assert enc["attention_mask"][0].sum() < enc["attention_mask"].shape[1]  # item 0 is padded
    for i, text in enumerate(TEXTS):
        ref = bert.attend(text)
        att = ak.from_transformers(out.attentions, ref.tokens, batch_index=i,
                                   attention_mask=enc["attention_mask"] if use_mask else None)
        assert_close(att.maps, ref.maps, F32, scale=1)
        _same_alignment(att, ref)
        assert [w.lower() for w in ref.words] == att.words
        if use_mask:  # the padded row of tokens, cut by the mask
            row = bert.tokenizer.convert_ids_to_tokens(enc["input_ids"][i])
            again = ak.from_transformers(out.attentions, row, batch_index=i,
                                         attention_mask=enc["attention_mask"])
            assert again.tokens == ref.tokens
            np.testing.assert_array_equal(again.maps, att.maps)


@pytest.mark.parametrize("use_mask", [True, False])
def test_from_transformers_left_padded_causal(gpt2, use_mask):
    gpt2.tokenizer.pad_token = gpt2.tokenizer.eos_token
    gpt2.tokenizer.padding_side = "left"
    try:
        enc = gpt2.tokenizer(TEXTS, padding=True, return_tensors="pt")
        # absolute positions start at each text's first real token, as without padding
        positions = (enc["attention_mask"].cumsum(1) - 1).clamp(min=0)
        enc, out = _hf(gpt2, TEXTS, position_ids=positions)
    finally:
        gpt2.tokenizer.padding_side = "right"
    short = int(np.argmin(enc["attention_mask"].sum(1).numpy()))
    ids = enc["input_ids"][short][enc["attention_mask"][short] > 0]
    with torch.inference_mode(), gpt2.eager():
        alone = gpt2.hf(ids[None], output_attentions=True).attentions
    ref = np.stack([a[0].numpy() for a in alone])
    tokens = gpt2.tokenizer.convert_ids_to_tokens(ids)
    att = ak.from_transformers(out, tokens, batch_index=short,
                               attention_mask=enc["attention_mask"] if use_mask else None)
    assert_close(att.maps, ref, F32, scale=1)
    assert att.causal and att.words == ["The", "cat", "sat", "on", "the", "mat."]


def test_from_transformers_on_any_device_dtype_and_one_layer_shapes(bert):
    ref = bert.attend("The cat sat.")
    half = tuple(torch.from_numpy(ref.maps[layer]).to(torch.bfloat16) for layer in range(ref.n_layers))
    att = ak.from_transformers(half, ref.tokens)  # [head, n, n] per layer, bfloat16
    np.testing.assert_allclose(att.maps, ref.maps, atol=1e-2)
    assert att.maps.dtype == np.float32


def test_from_transformers_refuses_bad_input(bert):
    enc, out = _hf(bert, TEXTS)
    tokens = bert.attend(TEXTS[1]).tokens
    with pytest.raises(InputError, match="batch_index"):
        ak.from_transformers(out.attentions, tokens)
    with pytest.raises(InputError, match="output_attentions=True"):
        ak.from_transformers(None, tokens)
    with pytest.raises(InputError, match="output_attentions=True"):
        ak.from_transformers((None, None), tokens)
    with torch.inference_mode():  # a wrapped GPT-2 on attnkit's attention returns no maps
        empty = tiny_model("gpt2").hf(torch.tensor([[1, 2, 3]]), output_attentions=True)
    with pytest.raises(InputError, match="model.eager"):
        ak.from_transformers(empty.attentions, ["a", "b", "c"])
    with pytest.raises(InputError, match="attention_mask keeps"):
        ak.from_transformers(out.attentions, tokens[:-1], batch_index=1,
                             attention_mask=enc["attention_mask"])
    with pytest.raises(InputError, match="cross-attention"):
        ak.from_transformers((torch.full((1, 2, 3, 5), 0.2),), ["a", "b", "c"])
    nan = torch.full((1, 1, 3, 3), 1 / 3)
    nan[0, 0, 1, 1] = float("nan")
    with pytest.raises(InputError, match="NaN"):
        ak.from_transformers((nan,), ["[CLS]", "a", "[SEP]"])
    # padding that cannot be told apart from the maps: uniform rows over every position
    with pytest.raises(InputError, match="attention_mask="):
        ak.from_transformers((torch.full((1, 1, 4, 4), 0.25),), ["a", "b"])


def test_encoder_decoder_outputs_point_to_the_self_attentions():
    from transformers.modeling_outputs import Seq2SeqModelOutput

    square = (torch.full((1, 1, 3, 3), 1 / 3),)
    out = Seq2SeqModelOutput(encoder_attentions=square, decoder_attentions=square,
                             cross_attentions=(torch.full((1, 1, 2, 3), 1 / 3),))
    with pytest.raises(InputError, match="encoder_attentions"):
        ak.from_transformers(out, ["a", "b", "c"])
    att = ak.from_transformers(out.encoder_attentions, ["<s>", "a", "</s>"])
    assert att.roles.tolist() == ["cls", "word", "sep"]
    with pytest.raises(InputError, match="cross-attention"):
        ak.from_transformers(out.cross_attentions, ["a", "b"])


# ---------------------------------------------------------------- TransformerLens
def test_from_transformer_lens_native_model():
    """A tiny TransformerLens model built from a config (no download)."""
    from transformer_lens import TransformerBridge
    from transformer_lens.config import TransformerBridgeConfig

    cfg = TransformerBridgeConfig(n_layers=2, d_model=16, n_ctx=32, d_head=8, n_heads=2,
                                  d_vocab=50, d_mlp=32, act_fn="relu")
    bridge = TransformerBridge.boot_native(cfg)
    ids = torch.tensor([[1, 5, 7, 9, 3], [1, 4, 4, 8, 2]])
    _, cache = bridge.run_with_cache(ids)
    tokens = ["<|endoftext|>", "A", " cat", "s", " sat"]
    for b in range(2):
        att = ak.from_transformer_lens(cache, tokens, batch_index=b)
        want = np.stack([cache[f"blocks.{layer}.attn.hook_pattern"][b].detach().numpy()
                         for layer in range(2)])
        np.testing.assert_array_equal(att.maps, want)
        assert att.causal
        assert att.words == ["A", "cats", "sat"] and att.word_ids.tolist() == [-1, 0, 1, 1, 2]
    with pytest.raises(InputError, match="hook_pattern"):
        ak.from_transformer_lens({"blocks.0.hook_resid_pre": ids}, tokens)


def test_from_transformer_lens_matches_hugging_face_on_the_same_model():
    """The same tiny GPT-2 wrapped by TransformerLens: its patterns are HF's eager maps."""
    from transformer_lens import TransformerBridge
    from transformers import AutoTokenizer

    reference = tiny_model("gpt2")  # the same seed: the same weights as the bridged copy
    bridged = tiny_model("gpt2")
    with tempfile.TemporaryDirectory() as d:  # TransformerLens re-reads the tokenizer by name
        bridged.tokenizer.save_pretrained(d)
        tok = AutoTokenizer.from_pretrained(d)
        bridge = TransformerBridge.boot_transformers(d, hf_model=bridged.hf, tokenizer=tok)
    text = TEXTS[0]
    _, cache = bridge.run_with_cache(text)
    ids = bridge.to_tokens(text)
    with torch.inference_mode(), reference.eager():
        hf = reference.hf(ids, output_attentions=True).attentions
    att = ak.from_transformer_lens(cache, bridge.to_str_tokens(text), model="tiny-gpt2")
    assert_close(att.maps, np.stack([a[0].numpy() for a in hf]), F32, scale=1)
    assert att.roles[0] == "cls" and att.causal and att.model == "tiny-gpt2"
    assert att.words == ["The", "cat", "sat", "on", "the", "mat."]


# ------------------------------------------------------------------------ nnsight
def test_from_nnsight_both_recipes(gpt2):
    from nnsight import NNsight

    ref = gpt2.attend(TEXTS[1])
    ids = torch.tensor([gpt2.tokenizer.convert_tokens_to_ids(ref.tokens)])
    net = NNsight(gpt2.hf)
    with gpt2.eager(), net.trace(ids, output_attentions=True):
        out = net.output.save()
    att = ak.from_nnsight(out, ref.tokens)
    assert_close(att.maps, ref.maps, F32, scale=1)
    # words come from the Ġ markers: "yesterday!" is one word here, two in the tokenizer's
    _same_alignment(att, ref, words=False)
    assert att.words[-1] == "yesterday!"

    saved = []
    with gpt2.eager(), net.trace(ids):
        for block in net.transformer.h:
            saved.append(block.attn.output[1].save())
    att2 = ak.from_nnsight(saved, ref.tokens)
    assert_close(att2.maps, ref.maps, F32, scale=1)


# ------------------------------------------------------------------------ bertviz
@pytest.mark.parametrize("item", [TEXTS[0], (TEXTS[0], TEXTS[1])], ids=["text", "pair"])
def test_bertviz_accepts_the_export_and_round_trips(bert, item):
    from bertviz import head_view, model_view

    att = bert.attend(item)
    args = ak.to_bertviz(att)
    assert all(a.dtype == torch.float32 and a.shape == (1, 2, len(att), len(att))
               for a in args["attention"])
    if isinstance(item, tuple):
        assert args["sentence_b_start"] == int(np.flatnonzero(att.segments == 1)[0])
    for view in (head_view, model_view):
        html = view(**args, html_action="return").data
        assert "bertviz" in html and "[CLS]" in html
        # the maps bertviz writes into its page are ours
        params = json.loads(re.search(r"const params = (\{.*?\}); //", html).group(1))
        assert_close(params["attention"][0]["attn"], att.maps, F32)
    back = ak.from_bertviz(**args)
    np.testing.assert_array_equal(back.maps, att.maps)
    _same_alignment(back, att)
    assert back.segments.tolist() == att.segments.tolist()
    assert [w.lower() for w in att.words] == back.words


def test_bertviz_word_level_and_lazy_like_inputs(bert):
    words = bert.attend(TEXTS[0]).to_words()
    back = ak.from_bertviz(**ak.to_bertviz(words))
    np.testing.assert_array_equal(back.maps, words.maps)
    with pytest.raises(InputError, match="one input"):
        ak.to_bertviz([words, words])


# --------------------------------------------------------------------- CircuitsVis
def test_circuitsvis_accepts_the_export(gpt2):
    from circuitsvis.attention import attention_heads, attention_patterns

    att = gpt2.attend(TEXTS[0])
    every = ak.to_circuitsvis(att)
    assert every["attention"].shape == (4, len(att), len(att))
    np.testing.assert_array_equal(every["attention"][3], att.maps[1, 1])  # layer-major order
    one = ak.to_circuitsvis(att, layer=1)
    np.testing.assert_array_equal(one["attention"], att.maps[1])
    for fn in (attention_patterns, attention_heads):
        html = fn(**one).local_src  # the offline HTML (no network check)
        props = json.loads(re.search(r"CircuitsVis\.\w+,\s*(\{.*\})\s*\)", html, re.DOTALL).group(1))
        assert props["tokens"] == att.tokens
        assert_close(props["attention"], att.maps[1], F32)
    with pytest.raises(InputError, match="layer 5"):
        ak.to_circuitsvis(att, layer=5)
