"""One record per architecture family: every fact attnkit needs about a ``config.model_type``.

:data:`ARCHS` maps a ``model_type`` to its :class:`Arch`: which kind of model reads it (text,
encoder–decoder, vision), whether its self-attention is causal, whether its position ids
start after the padding index, where its attention block keeps the output projection and the
normalisation around it (:class:`Layout`: the measures, head interventions), and where its
embeddings, norms and query/key/value projections are (:class:`Stream`: the residual-stream
decomposition, score attribution, composition). A family that attnkit reads but cannot
decompose has ``layout=None`` or ``stream=None``, and the functions that need them refuse it
with :class:`~attnkit.errors.UnsupportedModelError`.

Adding a family is one entry here plus its tiny test model in :mod:`attnkit.testing`;
``tests/test_archs.py`` checks that every family the capture tests sweep has exactly one
complete record.

Paths are dotted attribute paths (:func:`submodule`): ``Layout.layers``, ``Stream.embeds`` and
``Stream.embed_norm`` from the bare model (:attr:`attnkit.Model.base`), the others from one
layer.

Placement of the normalisation around the attention block (``Layout.placement``):

``"post"``
    ``z = LN(x + Attn(x))`` (BERT, RoBERTa, DistilBERT).
``"pre"``
    ``z = x + Attn(LN(x))`` (GPT-2, GPT-NeoX, Llama, Qwen2, Mistral, gpt-oss, ViT, DeiT, CLIP's
    vision tower); the pre-norm is part of the value states the attention sees. For GPT-NeoX's
    parallel residual the block is ``x + Attn(LN(x))`` without the MLP branch.
``"sandwich"``
    ``z = x + N(Attn(N'(x)))`` (Gemma 2: an RMSNorm on the attention output before the
    residual sum).

An encoder–decoder has three kinds of attention (:data:`STACKS`, the names
:meth:`attnkit.runtime.seq2seq.Seq2SeqModel.kind_of` gives its calls and the attributes of
:class:`~attnkit.core.cross.Seq2SeqAttention`): the encoder's self-attention, the decoder's
self-attention and the decoder's cross-attention over the encoder's output. ``Arch.stacks``
holds one :class:`Layout` for each (:class:`Stacks`); the decoder and the cross-attention
share the decoder's layers.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ..errors import InputError, UnsupportedModelError

#: The kinds of model that read a family (``Arch.reader``).
READERS = ("text", "encoder-decoder", "vision")
#: The three kinds of attention of an encoder–decoder, as attnkit names them everywhere.
STACKS = ("encoder", "decoder", "cross")


@dataclass(frozen=True)
class Layout:
    """Where one architecture's attention block keeps its parts (see the module docstring).

    Parameters
    ----------
    layers : str
        The list of layers, from the bare model.
    attention : str
        The attention module (the one transformers' attention function receives), from a layer.
    out_proj : str
        The output projection, from a layer: its *input* is the heads' outputs side by side.
    placement : {"post", "pre", "sandwich"}
        Where the normalisation sits around the attention block.
    norm : str, optional
        The normalisation after the attention (``"post"``, ``"sandwich"``).
    conv1d : bool
        The projection stores its weight as ``[in, out]`` (GPT-2's ``Conv1D``).
    norm_offset : float
        An RMSNorm's scale is ``offset + weight`` (Gemma).
    """

    layers: str
    attention: str
    out_proj: str
    placement: str
    norm: str | None = None
    conv1d: bool = False
    norm_offset: float = 0.0


@dataclass(frozen=True)
class Stream:
    """Where one architecture keeps what the residual-stream decomposition reads.

    Parameters
    ----------
    embeds : tuple of (str, str)
        ``(component, path)`` of the embedding modules whose outputs are components. For
        pre-norm models the token embedding is what the first layer receives minus these.
    embed_norm : str or None
        The layer norm over the summed embeddings (BERT-like encoders).
    attn_norm : str or None
        The norm before the attention (pre-norm decoders).
    mlp_norm : str or None
        The layer norm after the MLP's residual sum (post-norm encoders).
    qkv : {"split", "gpt2", "neox"}
        ``"split"`` (separate query/key/value projections at ``q``, ``k``, ``v``), ``"gpt2"``
        (one ``Conv1D`` at ``q``: queries, keys, values one after the other) or ``"neox"``
        (one linear at ``q``, ``[query, key, value]`` interleaved per head).
    q, k, v : str
        Paths of the projections.
    rotary : bool
        Queries and keys are rotated per position (the model's own ``apply_rotary_pos_emb``).
    mlp_in_norm : str or None
        Pre-norm decoders: the norm whose output the MLP reads, from a layer (its input is the
        stream after the attention block); edge patching recomputes it per MLP input.
    final_norm : str or None
        Pre-norm decoders: the norm before the output head, from the bare model.
    mlp_in : str or None
        Post-norm encoders: the MLP's first module, from a layer; its input is the stream
        after the attention's norm, which edge patching gives each MLP input.
    """

    embeds: tuple[tuple[str, str], ...]
    embed_norm: str | None
    attn_norm: str | None
    mlp_norm: str | None
    qkv: str
    q: str
    k: str = ""
    v: str = ""
    rotary: bool = False
    mlp_in_norm: str | None = None
    final_norm: str | None = None
    mlp_in: str | None = None


@dataclass(frozen=True)
class Stacks:
    """Where an encoder–decoder keeps its three kinds of attention (:data:`STACKS`): one
    :class:`Layout` each, ``layers`` from the bare model (:attr:`Seq2SeqModel.base
    <attnkit.runtime.seq2seq.Seq2SeqModel.base>`), the rest from one layer.

    Parameters
    ----------
    encoder, decoder, cross : Layout
        The encoder's self-attention, the decoder's self-attention, the decoder's
        cross-attention (its ``layers`` are the decoder's).
    """

    encoder: Layout
    decoder: Layout
    cross: Layout

    def of(self, stack: str) -> Layout:
        """The layout of one stack (``"encoder"``, ``"decoder"`` or ``"cross"``).

        Examples
        --------
        >>> ARCHS["t5"].stacks.of("cross").out_proj
        'layer.1.EncDecAttention.o'
        """
        return {"encoder": self.encoder, "decoder": self.decoder, "cross": self.cross}[stack]


def _stacks(layers: tuple[str, str], self_attn: str, cross: str, out: str, placement: str,
            norms: tuple[str, str] | None = None) -> Stacks:
    enc, dec = layers
    n_self, n_cross = norms or (None, None)
    return Stacks(Layout(enc, self_attn, f"{self_attn}.{out}", placement, n_self),
                  Layout(dec, self_attn, f"{self_attn}.{out}", placement, n_self),
                  Layout(dec, cross, f"{cross}.{out}", placement, n_cross))


@dataclass(frozen=True)
class Arch:
    """Everything attnkit knows about one family (a ``config.model_type``).

    Parameters
    ----------
    reader : {"text", "encoder-decoder", "vision"}
        The :class:`~attnkit.Model` class that reads it (:data:`READERS`).
    causal : bool
        Its self-attention is causal (a decoder-only language model).
    layout : Layout, optional
        Where its attention block's parts are; None where attnkit does not decompose it.
    stream : Stream, optional
        Where its embeddings, norms and projections are; None likewise.
    offset_positions : bool
        Position ids start after the padding index (``max_position_embeddings - 2`` usable).
    type_ids : bool
        The model reads ``token_type_ids`` (where its config has a type vocabulary; RoBERTa's
        family has one of size 1 that it never reads from the tokenizer).
    specials : tuple of str
        Vision: the special tokens before the patches.
    tower : str, optional
        Vision: the attribute holding the vision transformer (CLIP's ``vision_model``).
    refused : str, optional
        Why attnkit recognises the family and refuses it ("" or None: it reads it).
    stacks : Stacks, optional
        Encoder–decoders: where each kind of attention keeps its output projection.
    """

    reader: str = "text"
    causal: bool = False
    layout: Layout | None = None
    stream: Stream | None = None
    offset_positions: bool = False
    type_ids: bool = True
    specials: tuple[str, ...] = ()
    tower: str | None = None
    refused: str | None = None
    stacks: Stacks | None = None


_BERT_LAYOUT = Layout("encoder.layer", "attention.self", "attention.output.dense", "post",
                      "attention.output.LayerNorm")
_BERT_STREAM = Stream(
    (("embed", "embeddings.word_embeddings"), ("pos_embed", "embeddings.position_embeddings"),
     ("type_embed", "embeddings.token_type_embeddings")),
    "embeddings.LayerNorm", None, "output.LayerNorm", "split",
    "attention.self.query", "attention.self.key", "attention.self.value", mlp_in="intermediate")
_DECODER_LAYOUT = Layout("layers", "self_attn", "self_attn.o_proj", "pre")
_ROTARY_STREAM = Stream((), None, "input_layernorm", None, "split", "self_attn.q_proj",
                        "self_attn.k_proj", "self_attn.v_proj", rotary=True,
                        mlp_in_norm="post_attention_layernorm", final_norm="norm")
_ROTARY = Arch(causal=True, layout=_DECODER_LAYOUT, stream=_ROTARY_STREAM)
#: ViT and DeiT: ``x + Attn(layernorm_before(x))``
_VIT_LAYOUT = Layout("layers", "attention", "attention.o_proj", "pre")
#: CLIP's vision tower (:attr:`attnkit.runtime.vision.VisionModel.base` of CLIPModel and
#: CLIPVisionModel alike): ``x + Attn(layer_norm1(x))``
_CLIP_LAYOUT = Layout("encoder.layers", "self_attn", "self_attn.out_proj", "pre")
_SWIN = Arch("vision", refused=(
    "Swin computes attention inside shifted local windows (a separate window x window map per "
    "window and layer), not one map over the image, so rollout, flow and the patch views do "
    "not apply."))
_NO_ATTENTION = Arch("vision", refused="It has no attention over the image's patches.")
_CAUSAL = Arch(causal=True)
#: T5 and mT5: ``x + Attn(LN(x))`` in ``block[i].layer[0]`` (self) and ``layer[1]`` (cross)
_T5 = Arch("encoder-decoder", stacks=_stacks(("encoder.block", "decoder.block"),
                                              "layer.0.SelfAttention", "layer.1.EncDecAttention",
                                              "o", "pre"))
#: BART and Marian: ``LN(x + Attn(x))``; mBART and Pegasus: ``x + Attn(LN(x))``
_BART_NORMS = ("self_attn_layer_norm", "encoder_attn_layer_norm")
_BART_STACKS = _stacks(("encoder.layers", "decoder.layers"), "self_attn", "encoder_attn",
                       "out_proj", "post", _BART_NORMS)
_MBART_STACKS = _stacks(("encoder.layers", "decoder.layers"), "self_attn", "encoder_attn",
                        "out_proj", "pre")

#: ``config.model_type`` -> :class:`Arch`, one record per family.
ARCHS: dict[str, Arch] = {
    # encoders, decomposed
    "bert": Arch(layout=_BERT_LAYOUT, stream=_BERT_STREAM),
    "roberta": Arch(layout=_BERT_LAYOUT, stream=_BERT_STREAM, offset_positions=True, type_ids=False),
    "xlm-roberta": Arch(layout=_BERT_LAYOUT, stream=_BERT_STREAM, offset_positions=True,
                        type_ids=False),
    "distilbert": Arch(
        layout=Layout("transformer.layer", "attention", "attention.out_lin", "post", "sa_layer_norm"),
        stream=Stream(
            (("embed", "embeddings.word_embeddings"), ("pos_embed", "embeddings.position_embeddings")),
            "embeddings.LayerNorm", None, "output_layer_norm", "split",
            "attention.q_lin", "attention.k_lin", "attention.v_lin", mlp_in="ffn")),
    # encoders read through their attention weights only
    "camembert": Arch(offset_positions=True, type_ids=False),
    "longformer": Arch(offset_positions=True),
    # decoders, decomposed
    "gpt2": Arch(causal=True, layout=Layout("h", "attn", "attn.c_proj", "pre", conv1d=True),
                 stream=Stream((("pos_embed", "wpe"),), None, "ln_1", None, "gpt2", "attn.c_attn",
                                 mlp_in_norm="ln_2", final_norm="ln_f")),
    "gpt_neox": Arch(causal=True, layout=Layout("layers", "attention", "attention.dense", "pre"),
                     stream=Stream((), None, "input_layernorm", None, "neox",
                                   "attention.query_key_value", rotary=True,
                                   mlp_in_norm="post_attention_layernorm",
                                   final_norm="final_layer_norm")),
    "llama": _ROTARY,
    "qwen2": _ROTARY,
    "mistral": _ROTARY,
    "gpt_oss": _ROTARY,
    "gemma2": Arch(causal=True, layout=Layout("layers", "self_attn", "self_attn.o_proj", "sandwich",
                                              "post_attention_layernorm", norm_offset=1.0),
                   stream=replace(_ROTARY_STREAM, mlp_in_norm="pre_feedforward_layernorm")),
    # decoders read through their attention weights only
    **{name: _CAUSAL for name in (
        "gpt_neo", "gptj", "mixtral", "opt", "bloom", "falcon", "phi", "phi3", "qwen3", "gemma",
        "olmo", "codegen", "ctrl", "openai-gpt", "xglm", "pythia", "stablelm", "starcoder2",
        "smollm", "gemma3_text", "olmo2", "qwen2_moe", "qwen3_moe", "granite", "cohere", "cohere2",
        "mistral3", "phimoe")},
    # encoder-decoders (attnkit.runtime.seq2seq)
    "t5": _T5,
    "mt5": _T5,
    "bart": Arch("encoder-decoder", offset_positions=True, stacks=_BART_STACKS),
    "mbart": Arch("encoder-decoder", stacks=_MBART_STACKS),
    "marian": Arch("encoder-decoder", stacks=_BART_STACKS),
    "pegasus": Arch("encoder-decoder", stacks=_MBART_STACKS),
    # vision transformers (attnkit.runtime.vision)
    "vit": Arch("vision", layout=_VIT_LAYOUT, specials=("[CLS]",)),
    "deit": Arch("vision", layout=_VIT_LAYOUT, specials=("[CLS]", "[DIST]")),
    "clip": Arch("vision", layout=_CLIP_LAYOUT, specials=("[CLS]",), tower="vision_model"),
    "clip_vision_model": Arch("vision", layout=_CLIP_LAYOUT, specials=("[CLS]",)),
    # vision families recognised and refused
    "swin": _SWIN,
    "swinv2": _SWIN,
    "donut-swin": _SWIN,
    "maskformer-swin": _SWIN,
    "convnext": _NO_ATTENTION,
    "resnet": _NO_ATTENTION,
}


def families(reader: str, *, refused: bool = False) -> tuple[str, ...]:
    """The ``model_type`` values one kind of model reads (or, with ``refused=True``, those
    it recognises and refuses), in :data:`ARCHS`' order.

    Parameters
    ----------
    reader : {"text", "encoder-decoder", "vision"}
        The kind of model.
    refused : bool
        The refused families instead of the read ones.

    Returns
    -------
    tuple of str

    Examples
    --------
    >>> families("vision")
    ('vit', 'deit', 'clip', 'clip_vision_model')
    """
    if reader not in READERS:
        raise InputError(f"reader must be one of {', '.join(map(repr, READERS))}; got {reader!r}.")
    return tuple(name for name, arch in ARCHS.items()
                 if arch.reader == reader and bool(arch.refused) == refused)


def arch_of(model: Any) -> Arch:
    """The record of a model's family; a family attnkit has no record of reads as a
    non-causal text model whose attention weights alone are read.

    Parameters
    ----------
    model : Model, transformers model, config or str
        Anything with ``model_type`` (or a ``config`` that has it), or the ``model_type``.

    Returns
    -------
    Arch

    Examples
    --------
    >>> from attnkit.testing import tiny_model
    >>> arch_of(tiny_model("gpt2")).causal, arch_of(tiny_model("bert")).layout.placement
    (True, 'post')
    """
    return ARCHS.get(model_type(model), Arch())


def model_type(model: Any) -> str:
    """``config.model_type`` of a Model, a transformers model or a config ('' if none); a
    string is taken as the ``model_type`` itself.

    Examples
    --------
    >>> from attnkit.testing import tiny_model
    >>> model_type(tiny_model("llama")), model_type("deit")
    ('llama', 'deit')
    """
    if isinstance(model, str):
        return model
    kind = getattr(model, "model_type", None)
    if not kind:
        kind = getattr(getattr(model, "config", None), "model_type", None)
    return str(kind or "")


def _refuse(model: Any, what: str, field: str, instead: str) -> UnsupportedModelError:
    kind = model_type(model)
    known = sorted(name for name, arch in ARCHS.items() if getattr(arch, field) is not None)
    return UnsupportedModelError(
        f"{what} does not know where {kind or type(model).__name__!r} models keep their "
        f"{'attention output projection and normalisation' if field == 'layout' else 'embeddings, norms and projections'}; "
        f"supported: {', '.join(known)}. {instead}".rstrip())


def layout_of(model: Any, *, what: str = "This", instead: str = "") -> Layout:
    """The :class:`Layout` of a model's family, or a clear refusal.

    Parameters
    ----------
    model : Model
        The model.
    what : str
        What needs it, for the message (``"The attention measures"``).
    instead : str
        What the user can do instead, for the message.

    Returns
    -------
    Layout

    Raises
    ------
    UnsupportedModelError
        For a family without a layout.

    Examples
    --------
    >>> from attnkit.testing import tiny_model
    >>> layout_of(tiny_model("gpt2")).out_proj
    'attn.c_proj'
    """
    layout = arch_of(model).layout
    if layout is None:
        raise _refuse(model, what, "layout", instead)
    return layout


def stream_of(model: Any, *, what: str = "This", instead: str = "") -> Stream:
    """The :class:`Stream` of a model's family, or a clear refusal (as :func:`layout_of`).

    Examples
    --------
    >>> from attnkit.testing import tiny_model
    >>> stream_of(tiny_model("gpt2")).qkv
    'gpt2'
    """
    arch = arch_of(model)
    if arch.stream is None or arch.layout is None:
        raise _refuse(model, what, "stream", instead)
    return arch.stream


def submodule(obj: Any, path: str) -> Any:
    """The module at a dotted attribute ``path`` below ``obj`` (``"encoder.layer"``).

    Examples
    --------
    >>> from attnkit.testing import tiny_model
    >>> type(submodule(tiny_model("bert").base, "embeddings.LayerNorm")).__name__
    'LayerNorm'
    """
    for name in path.split("."):
        obj = getattr(obj, name)
    return obj
