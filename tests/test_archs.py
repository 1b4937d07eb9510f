"""One record per architecture family (attnkit.runtime.archs): every family the capture sweep
covers has exactly one complete record, and each fact in it is true of the family's model."""

import pytest
import transformers

from attnkit.errors import InputError, UnsupportedModelError
from attnkit.runtime import archs
from attnkit.runtime.archs import ARCHS, arch_of, layout_of, stream_of, submodule
from attnkit.runtime.seq2seq import SUPPORTED as SEQ2SEQ_SUPPORTED
from attnkit.runtime.vision import REFUSED as VISION_REFUSED
from attnkit.runtime.vision import SUPPORTED as VISION_SUPPORTED
from attnkit.runtime.vision import check_family
from attnkit.testing import SEQ2SEQ_KINDS, VISION_KINDS, tiny_model, tiny_seq2seq, tiny_vision
from test_capture import ARCHS as TEXT_SWEEP
from test_capture import SWEEP


def _model(kind):
    if kind in SEQ2SEQ_KINDS:
        return tiny_seq2seq(kind)
    if kind in VISION_KINDS:
        return tiny_vision(kind)
    return tiny_model(kind)


@pytest.fixture(scope="module")
def sweep():
    return {kind: _model(kind) for kind in SWEEP}


def test_every_swept_family_has_exactly_one_record(sweep):
    types = [archs.model_type(m) for m in sweep.values()]
    assert len(set(types)) == len(types)  # one family, one model of the sweep
    for kind, model in sweep.items():
        assert archs.model_type(model) in ARCHS, kind


@pytest.mark.parametrize("kind", SWEEP)
def test_each_record_is_complete_and_true(sweep, kind):
    model = sweep[kind]
    arch = arch_of(model)
    reader = "encoder-decoder" if kind in SEQ2SEQ_KINDS else "vision" if kind in VISION_KINDS else "text"
    assert arch.reader == reader
    if reader == "encoder-decoder":  # the three stacks' output projections (interventions)
        import torch

        from attnkit.runtime.capture import recording

        assert arch.stacks is not None and arch.layout is None
        calls = []
        with torch.inference_mode(), recording([calls.append]):
            model.base(**model.pair_inputs(model.encode("The cat sat."), model.encode_target("A cat.")))
        for stack in archs.STACKS:
            spec = arch.stacks.of(stack)
            layers = list(submodule(model.base, spec.layers))
            assert len(layers) == (model.n_layers if stack == "encoder" else model.n_decoder_layers)
            for layer in layers:
                for path in (spec.attention, spec.out_proj, spec.norm):
                    if path:
                        submodule(layer, path)
            # the record's attention modules are the ones the stack's calls come from, in order
            called = [c.module for c in calls if model.kind_of(c) == stack]
            assert called == [submodule(layer, spec.attention) for layer in layers], stack
        return
    assert arch.causal == model.causal
    layout = layout_of(model)
    layers = list(submodule(model.base, layout.layers))
    assert len(layers) == model.n_layers
    for layer in layers:  # every path of the record resolves on the model
        for path in (layout.attention, layout.out_proj, layout.norm):
            if path:
                submodule(layer, path)
    if reader == "text":
        assert kind in TEXT_SWEEP
        stream = stream_of(model)
        for _, path in stream.embeds:
            submodule(model.base, path)
        if stream.embed_norm:
            submodule(model.base, stream.embed_norm)
        for path in (stream.attn_norm, stream.mlp_norm, stream.q, stream.k, stream.v):
            if path:
                submodule(layers[0], path)
        assert arch.offset_positions == (model.max_length == model.hf.config.max_position_embeddings - 2)


def test_the_readers_take_their_families_from_the_records(sweep):
    assert SEQ2SEQ_SUPPORTED == archs.families("encoder-decoder")
    assert set(VISION_SUPPORTED) == set(archs.families("vision"))
    assert "swin" in VISION_REFUSED and "swin" not in VISION_SUPPORTED
    assert all(arch.reader in archs.READERS for arch in ARCHS.values())
    # the vision records' specials and towers are what the models read
    assert sweep["deit"].specials == ["[CLS]", "[DIST]"] and sweep["vit"].specials == ["[CLS]"]
    # CLIPVisionModel is the tower itself; CLIPModel keeps it in .vision_model
    assert sweep["clip"].base is sweep["clip"].hf and arch_of("clip").tower == "vision_model"
    with pytest.raises(UnsupportedModelError, match="shifted local windows"):
        check_family(transformers.SwinConfig(), "tiny-swin")
    with pytest.raises(InputError, match="reader must be one of"):
        archs.families("audio")


def test_a_family_without_a_layout_is_refused_by_name():
    class Fake:
        model_type = "opt"
        name = "fake-opt"

    assert arch_of(Fake()).causal and arch_of(Fake()).layout is None
    with pytest.raises(UnsupportedModelError, match="'opt'.*supported: bert"):
        layout_of(Fake(), what="The attention measures")
    with pytest.raises(UnsupportedModelError, match="'opt'"):
        stream_of(Fake())
    # a family attnkit has no record of reads as a non-causal text model
    Fake.model_type = "no-such-family"
    assert arch_of(Fake()) == archs.Arch()
