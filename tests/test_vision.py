"""Vision transformers: ViT, DeiT (class and distillation tokens) and CLIP's vision model.
Their exactness against each architecture's eager attention is part of the architecture sweep
(tests/test_capture.py); here tokens, grids, rollout, loading and bad images.
"""

import numpy as np
import pytest

import attnkit as ak
from attnkit.errors import DataNotFoundError, InputError, ModelNotFoundError, UnsupportedModelError
from attnkit.testing import VISION_KINDS, tiny_vision
from attnkit.runtime.vision import VisionModel, gradient_rollout, load_image, patch_grid
from tolerances import assert_close, F32

pytestmark = pytest.mark.numerics

IMAGE = np.random.default_rng(0).integers(0, 256, (40, 52, 3), dtype=np.uint8)


@pytest.fixture(scope="module")
def models():
    return {k: tiny_vision(k, heads=4, hidden=32) for k in VISION_KINDS}


@pytest.mark.parametrize("kind", VISION_KINDS)
def test_vision_tokens_grid_and_lazy(models, kind):
    """Tokens, grid and the lazy path (exactness against eager attention is part of the
    architecture sweep, tests/test_capture.py)."""
    model = models[kind]
    att = model.attend(IMAGE)
    specials = ["[CLS]", "[DIST]"] if kind == "deit" else ["[CLS]"]
    assert att.tokens[: len(specials)] == specials
    assert att.meta["grid"] == [4, 4] and len(att) == 16 + len(specials)
    assert att.roles[0] == "cls" and (att.roles[len(specials):] == "word").all()
    assert att.meta["image"].shape == (32, 32, 3) and att.meta["image"].dtype == np.uint8
    grid = patch_grid(att)
    assert grid[len(specials)].tolist() == [0, 0] and grid[-1].tolist() == [3, 3]
    lazy = model.attend(IMAGE, lazy=True)
    # lazy maps are exp(s - lse) with the fused kernel's lse: float32 rounding
    assert_close(lazy.to_dense().maps, att.maps, F32, scale=1)


def test_rollout_and_flow_read_images(models):
    att = models["deit"].attend(IMAGE)
    roll = ak.rollout(att)
    assert roll.shape == (18, 18)
    assert_close(roll.sum(-1), 1.0, F32)
    graph = ak.attention_graph(att, threshold=0.2)
    assert graph.number_of_nodes() > 0


def test_gradient_rollout_known_properties():
    model = tiny_vision("vit", num_labels=3)
    rel = gradient_rollout(model, IMAGE)
    assert rel.shape == (17, 17) and (rel >= 0).all()
    assert (np.diag(rel) >= 1).all()  # R starts from the identity and only grows
    same = [np.allclose(rel, gradient_rollout(model, IMAGE, label=c)) for c in range(3)]
    assert sum(same) == 1  # the predicted class by default, another class explained otherwise
    with pytest.raises(InputError, match="label"):
        gradient_rollout(model, IMAGE, label=7)


@pytest.mark.parametrize("kind", VISION_KINDS)
def test_load_from_folder_with_processor(tmp_path, models, kind):
    model = models[kind]
    model.hf.save_pretrained(tmp_path)
    model.processor.save_pretrained(tmp_path)
    loaded = ak.load(tmp_path, device="cpu")
    assert isinstance(loaded, VisionModel)
    np.testing.assert_array_equal(loaded.attend(IMAGE).maps, model.attend(IMAGE).maps)


def test_missing_processor_is_named(tmp_path, models):
    models["vit"].hf.save_pretrained(tmp_path)
    with pytest.raises(ModelNotFoundError, match="preprocessor_config.json"):
        ak.load(tmp_path)


def test_swin_is_refused_clearly(tmp_path):
    import transformers as tf

    cfg = tf.SwinConfig(image_size=32, patch_size=4, embed_dim=8, depths=[1, 1],
                        num_heads=[1, 2], window_size=2)
    tf.SwinModel(cfg).save_pretrained(tmp_path)
    tiny_vision("vit").processor.save_pretrained(tmp_path)
    with pytest.raises(UnsupportedModelError, match="windows.*ViT, DeiT and CLIP"):
        ak.load(tmp_path)


def test_bad_images(tmp_path, models):
    model = models["vit"]
    with pytest.raises(DataNotFoundError, match="No image file"):
        model.attend(tmp_path / "missing.png")
    text = tmp_path / "notes.png"
    text.write_text("not an image")
    with pytest.raises(InputError, match="not an image"):
        model.attend(text)
    with pytest.raises(InputError, match="empty"):
        model.attend(np.zeros((0, 5, 3), dtype=np.uint8))
    from PIL import Image

    with pytest.raises(InputError, match="mode 'F'"):
        model.attend(Image.fromarray(np.zeros((8, 8), dtype=np.float32)))
    with pytest.raises(InputError, match="shape"):
        model.attend(np.zeros((4, 4, 7), dtype=np.uint8))
    with pytest.raises(InputError, match="Cannot read a list as an image"):
        model.attend([1, 2, 3])
    with pytest.raises(InputError, match="vision model"):
        model.encode_ids([1, 2, 3])


def test_image_file_and_modes(tmp_path, models):
    from PIL import Image

    path = tmp_path / "img.png"
    Image.fromarray(IMAGE).save(path)
    np.testing.assert_array_equal(models["vit"].attend(path).maps,
                                  models["vit"].attend(IMAGE).maps)
    assert load_image(Image.fromarray(IMAGE).convert("L")).mode == "RGB"
    assert load_image(Image.fromarray(IMAGE).convert("P")).mode == "RGB"
