"""The references of the architecture sweep (tests/test_capture.py): each family's own eager
attention (``output_attentions=True``) beside what attnkit captured on the same input."""

import numpy as np
import torch

from attnkit.testing import SEQ2SEQ_KINDS, TINY_WINDOW, VISION_KINDS

TEXTS = ["The cat sat on the mat.",
         "A student reads the new book in the library, unbelievably.",
         "Mary gave John a red apple yesterday!"]
SOURCE, TARGET = TEXTS[1], TEXTS[0]
IMAGE = np.random.default_rng(0).integers(0, 256, (40, 52, 3), dtype=np.uint8)


def eager_maps(model, encs):
    """Per-item maps of a padded text batch from transformers' own eager attention."""
    with model.eager():
        kw = model.to_device(model.pad(encs))
        with torch.inference_mode():
            out = model.base(**kw, output_attentions=True)
    return [torch.stack([a[i, :, :len(e), :len(e)] for a in out.attentions]).float().numpy()
            for i, e in enumerate(encs)]


def seq2seq_eager(model, source, target):
    """Encoder, decoder and cross maps of one pair from transformers' eager path."""
    src, tgt = model.encode(source), model.encode_target(target)
    with model.eager(), torch.inference_mode():
        out = model.hf(input_ids=torch.tensor([src.input_ids]),
                       decoder_input_ids=torch.tensor([tgt.input_ids]), output_attentions=True)
    return [torch.stack([a[0] for a in part]).float().numpy()
            for part in (out.encoder_attentions, out.decoder_attentions, out.cross_attentions)]


def vision_eager(model, image):
    """The maps of one image from transformers' eager path."""
    pixels = model.encode(image).meta["pixel_values"]
    with model.eager(), torch.inference_mode():
        out = model.base(pixel_values=pixels, output_attentions=True)
    return torch.stack([a[0] for a in out.attentions]).float().numpy()


def captured_and_eager(model, kind):
    """``[(captured, eager reference)]`` map pairs of one architecture: per item of a
    padded batch (text), encoder / decoder / cross-attention of a pair (encoder–decoder),
    the maps of one image (vision)."""
    if kind in SEQ2SEQ_KINDS:
        s2s = model.attend(SOURCE, TARGET)
        return list(zip([s2s.encoder.maps, s2s.decoder.maps, s2s.cross.maps],
                        seq2seq_eager(model, SOURCE, TARGET)))
    if kind in VISION_KINDS:
        return [(model.attend(IMAGE).maps, vision_eager(model, IMAGE))]
    encs = [model.encode(t) for t in TEXTS]
    assert len({len(e) for e in encs}) == 3  # a padded batch
    if kind in ("mistral", "gemma2", "gpt_oss"):
        assert min(len(e) for e in encs) > TINY_WINDOW  # the window cuts every input
    got, _ = model.run(encs)
    return list(zip(got, eager_maps(model, encs)))
