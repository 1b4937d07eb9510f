"""ImageAttention, Python side: what goes over the wire, overlays, validation, static output."""

from __future__ import annotations

import numpy as np
import pytest

import attnkit as ak
from attnkit.errors import InputError
from attnkit.testing import tiny_model, tiny_vision
from attnkit.runtime.vision import gradient_rollout
from attnkit.widgets._codec import read
from tolerances import assert_close, F16

IMAGE = np.random.default_rng(0).integers(0, 256, (32, 32, 3), dtype=np.uint8)


@pytest.fixture(scope="module")
def deit():
    model = tiny_vision("deit", heads=2, num_labels=3)
    return model, model.attend(IMAGE)


def test_image_and_matrix_are_bytes_and_rows_are_exact_enough(deit):
    _, att = deit
    view = ak.ImageAttention(att, layer=1, head=0)
    assert view.image["dtype"] == "uint8" and view.image["shape"] == [32, 32, 3]
    assert isinstance(view.image["buffer"], bytes)
    np.testing.assert_array_equal(read(view.image), att.meta["image"])
    assert view.grid == [4, 4] and view.first_patch == 2 and view.tokens[:3] == ["[CLS]", "[DIST]", "0,0"]
    # float16 with a power-of-two scale: 3 significant digits
    assert_close(read(view.matrix), att.maps[1, 0], F16)
    view.query = 7
    assert_close(view.row(), att.maps[1, 0, 7], F16)


def test_mean_of_heads_layer_and_overlays_follow_the_traits(deit):
    model, att = deit
    grad = gradient_rollout(model, IMAGE)
    alti = model.attend(IMAGE, measure="alti")
    view = ak.ImageAttention(att, overlays={"gradient rollout": grad, "alti": alti,
                                            "fixed": np.arange(18.0)})
    assert view.overlays == ["attention", "rollout", "gradient rollout", "alti", "fixed"]
    assert (view.layer, view.head, view.layered) == (1, -1, True)  # the last layer, mean of heads
    assert_close(view.row(), att.maps[1, :, 0].mean(0), F16)
    view.overlay = "rollout"
    assert_close(view.row(), ak.rollout(att)[0], F16)
    assert not view.layered and view.value_label == "rollout"
    view.overlay = "gradient rollout"
    assert_close(view.row(), grad[0], F16)
    view.overlay = "alti"
    assert view.layered and view.n_heads == 1 and view.value_label == "alti"
    view.layer = 0
    assert_close(view.row(), alti.maps[0, 0, 0], F16)
    view.overlay = "fixed"
    view.query = 9
    np.testing.assert_allclose(view.row(), np.arange(18.0), rtol=2e-3)  # the same for every query


def test_lazy_attention_is_read_in_blocks(deit):
    model, att = deit
    lazy = model.attend(IMAGE, lazy=True)
    view = ak.ImageAttention(lazy, layer=0, head=1)
    np.testing.assert_allclose(view.row(), att.maps[0, 1, 0], rtol=2e-3, atol=1e-5)


def test_bad_input(deit):
    _, att = deit
    with pytest.raises(InputError, match="attention of an image"):
        ak.ImageAttention(tiny_model("bert").attend("The cat sat."))
    with pytest.raises(InputError, match="must be"):
        ak.ImageAttention(att, overlays={"bad": np.zeros((3, 3))})
    with pytest.raises(InputError, match="built-in"):
        ak.ImageAttention(att, overlays={"attention": np.zeros(18)})
    with pytest.raises(InputError, match="overlay must be one of"):
        ak.ImageAttention(att, overlay="nope")
    with pytest.raises(InputError, match="outside"):
        ak.ImageAttention(att, query=99)
    view = ak.ImageAttention(att)
    with pytest.raises(InputError):
        view.head = 5
    with pytest.raises(InputError):
        view.query = -1
    with pytest.raises(InputError, match="opacity"):
        ak.ImageAttention(att, opacity=2)


def test_static_figure_and_png_follow_the_query(deit, tmp_path):
    _, att = deit
    view = ak.ImageAttention(att, query=5)
    first = view.to_png()
    assert first[:8] == b"\x89PNG\r\n\x1a\n"
    view.query = 12
    assert view.to_png() != first
    fig = view.figure()
    assert "query patch 2,2" in fig.axes[0].get_title(loc="left")
    assert view.save(tmp_path / "image.svg").stat().st_size > 0
    data, _ = view._repr_mimebundle_()
    assert "image/png" in data and "query patch" in data["text/html"]
