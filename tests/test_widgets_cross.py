"""CrossView, Python side: the weights on the wire, layer and head, clicked links, output."""

from __future__ import annotations

import numpy as np
import pytest

import attnkit as ak
from attnkit.core.cross import CrossAttention
from attnkit.errors import InputError
from attnkit.testing import tiny_model, tiny_seq2seq
from attnkit.widgets._codec import read
from tolerances import assert_close, F16


@pytest.fixture(scope="module")
def s2s():
    return tiny_seq2seq("bart", heads=4, hidden=32).attend("The cat sat on the mat.", "A cat sat.")


def test_weights_travel_as_float16_and_follow_the_layer(s2s):
    view = ak.CrossView(s2s)
    assert view.target_tokens == s2s.decoder.tokens and view.source_tokens == s2s.encoder.tokens
    assert (view.n_layers, view.n_heads, view.head) == (2, 4, -1)
    assert isinstance(view.weights["buffer"], bytes)
    assert_close(read(view.weights), s2s.cross.maps[0], F16)
    view.layer = 1
    assert_close(read(view.weights), s2s.cross.maps[1], F16)


def test_clicked_token_lists_its_links(s2s):
    view = ak.CrossView(s2s.cross, layer=1, head=2)
    view.clicked = [0, 2]  # the third target token
    links = view.links()
    assert len(links) == s2s.cross.n_columns and (links["head"] == 2).all()
    assert links["weight"].iloc[0] == pytest.approx(s2s.cross.maps[1, 2, 2].max())
    assert links["target"].iloc[0] == s2s.decoder.tokens[2]
    view.clicked = [1, 0]
    assert len(view.links()) == len(s2s.decoder)
    view.clicked = []
    assert view.links().empty


def test_bad_input(s2s):
    with pytest.raises(InputError, match="cross-attention"):
        ak.CrossView(tiny_model("bert").attend("The cat sat."))
    with pytest.raises(InputError):
        ak.CrossView(s2s, layer=5)
    with pytest.raises(InputError, match="min_weight"):
        ak.CrossView(s2s, min_weight=1.5)
    view = ak.CrossView(s2s)
    with pytest.raises(InputError, match="clicked"):
        view.clicked = [2, 0]
    with pytest.raises(InputError):
        view.head = 9


def test_static_figure_text_only_tokens(tmp_path):
    maps = np.array([[[[0.9, 0.1], [0.2, 0.8]]]])
    cross = CrossAttention(maps, ["<s>", "<b>x</b>"], ["cls", "word"], [-1, 0], ["<b>x</b>"],
                           ["a", "b"], ["word", "word"], [0, 1], ["a", "b"])
    view = ak.CrossView(cross)
    texts = [t.get_text() for t in view.figure().axes[0].texts]
    assert "<b>x</b>" in texts
    data, _ = view._repr_mimebundle_()
    assert "<b>x</b>" not in data["text/html"] and "&lt;b&gt;" in data["text/html"]
    assert view.save(tmp_path / "cross.png").stat().st_size > 0
