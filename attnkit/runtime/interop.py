"""Move attention between attnkit and the tools researchers already use.

In: :func:`from_transformers` (any Hugging Face ``outputs.attentions``),
:func:`from_transformer_lens` (a TransformerLens ``ActivationCache``), :func:`from_nnsight`
(attention saved in an nnsight trace) and :func:`from_bertviz` (bertviz's input). Out:
:func:`to_bertviz` (the arguments of ``bertviz.head_view`` / ``model_view``) and
:func:`to_circuitsvis` (the arguments of ``circuitsvis.attention.attention_patterns`` /
``attention_heads``).

Every reader returns a token-level :class:`~attnkit.Attention` whose maps are float32
``[layer, head, query, key]`` (rows are *from*, columns *to*, rows sum to 1), with roles and
words inferred from the token strings unless given. Inputs may be torch tensors on any
device and in any dtype, or numpy arrays; only the optional tools' *data* are read, so none
of them is imported here.

Padding: a batch padded to a common width is cut back to one item's positions, through
``attention_mask`` when given, else by finding the right- or left-padded block whose rows
sum to 1 (padding receives no attention).

Encoder–decoder models (T5, BART) have three kinds of attention; pass their encoder
self-attention (``outputs.encoder_attentions``) or decoder self-attention
(``outputs.decoder_attentions``) as separate inputs. Cross-attention is not square
(decoder positions attend to encoder positions) and is refused.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..core.attention import ROW_SUM_TOL, Attention, infer_roles, infer_words
from ..core import validate
from ..errors import InputError
from ..core.types import AttentionLike, dense_maps

__all__ = [
    "from_bertviz",
    "from_nnsight",
    "from_transformer_lens",
    "from_transformers",
    "to_bertviz",
    "to_circuitsvis",
]

#: The TransformerLens hook that holds each layer's attention probabilities.
TL_PATTERN = "blocks.{layer}.attn.hook_pattern"


# ----------------------------------------------------------------------- reading
def _numpy(x: Any) -> np.ndarray:
    """A float32 numpy copy of a tensor (any device/dtype, grads detached) or array."""
    if hasattr(x, "detach"):
        x = x.detach()
        if hasattr(x, "float"):
            x = x.float()
        x = x.cpu().numpy()
    return np.asarray(x, dtype=np.float32)


def _layers(attentions: Any) -> list[Any]:
    """The per-layer arrays of ``attentions``: a tuple/list of ``[batch, head, n, n]`` (or
    ``[head, n, n]``) arrays, a stacked ``[layer, batch, head, n, n]`` array, or a model
    output holding them in ``.attentions``."""
    if attentions is None:
        raise InputError(
            "No attention was given (None): run the model with output_attentions=True and, for "
            "Hugging Face models, attn_implementation='eager' (SDPA and flash attention return "
            "no probabilities)."
        )
    if not isinstance(attentions, (tuple, list, np.ndarray)) and not hasattr(attentions, "shape"):
        if getattr(attentions, "attentions", None) is not None:
            return _layers(attentions.attentions)
        if getattr(attentions, "encoder_attentions", None) is not None:
            raise InputError(
                "This is the output of an encoder-decoder model: pass its encoder "
                "self-attention (outputs.encoder_attentions, with the encoder's tokens) or its "
                "decoder self-attention (outputs.decoder_attentions, with the decoder's tokens) "
                "as separate Attentions; cross-attention is not supported."
            )
        raise InputError(
            f"Cannot read attention from a {type(attentions).__name__}: pass outputs.attentions "
            "(a tuple of [batch, head, n, n] tensors, one per layer)."
        )
    layers = list(attentions)
    if not layers or any(a is None for a in layers):
        raise InputError(
            "The attentions are empty or hold None: run the model with output_attentions=True "
            "and attn_implementation='eager' (a model wrapped in attnkit.Model runs attnkit's "
            "attention function: call it inside `with model.eager():`)."
        )
    return layers


def _stack(layers: Sequence[Any], batch_index: int | None) -> np.ndarray:
    """``[layer, head, w, w]`` of one batch item from per-layer arrays."""
    arrays = [_numpy(a) for a in layers]
    ndims = {a.ndim for a in arrays}
    if len(ndims) != 1 or ndims.pop() not in (3, 4):
        raise InputError(
            "Each layer's attention must be [batch, head, n, n] (or [head, n, n]); got shapes "
            f"{sorted({a.shape for a in arrays})}."
        )
    if arrays[0].ndim == 4:
        batch = arrays[0].shape[0]
        if batch_index is None:
            if batch != 1:
                raise InputError(
                    f"The attentions hold a batch of {batch} inputs; pass batch_index= (0 to "
                    f"{batch - 1}) to choose one."
                )
            batch_index = 0
        batch_index = validate.index(batch_index, batch, "batch_index")
        arrays = [a[batch_index] for a in arrays]
    shapes = {a.shape for a in arrays}
    if len(shapes) != 1:
        raise InputError(f"Layers have different shapes: {sorted(shapes)}.")
    _, q, k = arrays[0].shape
    if q != k:
        raise InputError(
            f"Attention maps are [{q} x {k}], not square: this looks like cross-attention "
            "(decoder positions attending to encoder positions), which attnkit does not "
            "support. Pass encoder or decoder self-attention."
        )
    return np.stack(arrays)


def _item_tokens(tokens: Any, batch_index: int | None) -> list[str]:
    """One item's token strings: ``tokens`` itself, or ``tokens[batch_index]`` for a batch."""
    if isinstance(tokens, str):
        raise InputError("tokens must be a list of token strings, not one string.")
    items = list(tokens)
    if batch_index is not None:
        batch_index = validate.integer(batch_index, "batch_index")
    if items and not isinstance(items[0], str) and isinstance(items[0], (list, tuple)):
        items = list(items[0 if batch_index is None else validate.index(batch_index, len(items),
                                                                        "batch_index")])
    return [str(t) for t in items]


def _unpad(maps: np.ndarray, tokens: list[str], mask: Any,
           batch_index: int | None) -> tuple[np.ndarray, list[str]]:
    """Cut ``[L, H, w, w]`` maps (and a padded row of tokens) to the item's real positions."""
    w, n = maps.shape[-1], len(tokens)
    if mask is not None:
        m = _numpy(mask)
        if m.ndim == 2:
            m = m[0 if batch_index is None else validate.index(batch_index, len(m), "batch_index")]
        if m.shape != (w,):
            raise InputError(f"attention_mask has shape {m.shape} but the maps have {w} positions.")
        keep = np.flatnonzero(m > 0)
        if n == w:  # the padded row of tokens
            tokens = [tokens[i] for i in keep]
        elif len(keep) != n:
            raise InputError(
                f"attention_mask keeps {len(keep)} positions but {n} tokens were given; pass the "
                "tokens of the unpadded input (or of the whole padded row)."
            )
        return maps[:, :, keep][..., keep], tokens
    if n == w:
        return maps, tokens
    if n > w:
        raise InputError(f"{n} tokens were given but the maps have only {w} positions.")
    fits = []
    for block in (slice(0, n), slice(w - n, w)):  # right padding, left padding
        cut = maps[:, :, block, block]
        if np.abs(cut.sum(-1, dtype=np.float64) - 1.0).max() <= ROW_SUM_TOL:
            fits.append(cut)
    if len(fits) != 1:
        raise InputError(
            f"The maps have {w} positions but {n} tokens were given, and the padding could not "
            "be told from the maps; pass attention_mask= (the tokenizer's, for this batch)."
        )
    return fits[0], tokens


def _alignment(tokens: list[str], roles: Sequence[str]) -> tuple[list[int], list[str]]:
    """Word ids and words of token strings; a leading space (TransformerLens's
    ``to_str_tokens``) starts a word the way ``Ġ``/``▁`` do."""
    marked = [t for t, r in zip(tokens, roles) if r == "word"]
    spaced = any(t.startswith(" ") for t in marked) and not any(
        t[:1] in ("Ġ", "▁") or t.startswith("##") for t in marked)
    if not spaced:
        return infer_words(tokens, roles)
    ids, _ = infer_words(["Ġ" + t[1:] if t.startswith(" ") else t for t in tokens], roles)
    words: list[str] = []
    for t, w in zip(tokens, ids):
        if w == len(words):
            words.append("")
        if w >= 0:
            words[w] += t
    return ids, [w.strip() for w in words]


def _attention(
    maps: np.ndarray,
    tokens: list[str],
    roles: Sequence[str] | None,
    causal: bool | None,
    model: str,
    sentence_b_start: int | None = None,
) -> Attention:
    role_list = list(roles) if roles is not None else infer_roles(tokens)
    word_ids, words = _alignment(tokens, role_list)
    att = Attention.from_maps(maps, tokens, role_list, words=words, word_ids=word_ids,
                              causal=causal, model=model)
    if sentence_b_start is not None:
        sentence_b_start = validate.integer(sentence_b_start, "sentence_b_start", minimum=0)
        if sentence_b_start > len(tokens):
            raise InputError(f"sentence_b_start {sentence_b_start} is past the {len(tokens)} "
                             "tokens.")
        second = np.arange(len(tokens)) >= sentence_b_start
        att.segments = np.where(att.roles == "word", second.astype(np.int64), -1)
    return att


def from_transformers(
    attentions: Any,
    tokens: Sequence[str] | Sequence[Sequence[str]],
    *,
    roles: Sequence[str] | None = None,
    batch_index: int | None = None,
    attention_mask: Any = None,
    causal: bool | None = None,
    model: str = "",
) -> Attention:
    """An :class:`~attnkit.Attention` from a Hugging Face model's ``outputs.attentions``.

    Parameters
    ----------
    attentions : tuple of tensors, or a model output
        ``outputs.attentions`` of a forward pass with ``output_attentions=True``: one
        ``[batch, head, n, n]`` tensor per layer (``[head, n, n]`` also works), in any dtype
        and on any device; or the output object itself.
    tokens : sequence of str
        The item's token strings (``tokenizer.convert_ids_to_tokens(ids)``), unpadded, or
        its padded row when ``attention_mask`` is given; or one list per batch item.
    roles : sequence of str, optional
        One of ``"cls"``, ``"sep"``, ``"word"``, ``"special"`` per token; inferred from the
        token strings when omitted.
    batch_index : int, optional
        Which item of a batch to read; may be omitted for a batch of one.
    attention_mask : array_like, optional
        The tokenizer's ``[batch, width]`` (or ``[width]``) mask: positions with 0 are
        padding and are dropped. Without it, padding is found from the maps (the right- or
        left-padded block whose rows sum to 1).
    causal : bool, optional
        Decoder attention; inferred when omitted (every map zero above the diagonal).
    model : str
        The model's name, for labels.

    Returns
    -------
    Attention
        Token level, maps ``[layer, head, n, n]`` float32.

    Raises
    ------
    InputError
        When no attention was returned (``None``: the model ran without
        ``output_attentions=True`` or with SDPA/flash attention), shapes disagree with the
        tokens, the padding cannot be found, maps are cross-attention (not square), or maps
        hold NaN/inf or rows that do not sum to 1.

    Examples
    --------
    >>> import attnkit as ak
    >>> from attnkit.testing import tiny_model
    >>> m = tiny_model("bert")
    >>> enc = m.tokenizer(["The cat sat.", "Mary gave John a red apple."], padding=True,
    ...                   return_tensors="pt")
    >>> with m.eager():  # Hugging Face's eager attention, as a user's own model runs
    ...     out = m.hf(**enc, output_attentions=True)
    >>> tokens = m.tokenizer.convert_ids_to_tokens(enc["input_ids"][0])
    >>> tokens
    ['[CLS]', 'the', 'cat', 'sat', '.', '[SEP]', '[PAD]', '[PAD]', '[PAD]']
    >>> att = ak.from_transformers(out.attentions, tokens[:6], batch_index=0)
    >>> att.maps.shape, att.words
    ((2, 2, 6, 6), ['the', 'cat', 'sat', '.'])
    """
    tok = _item_tokens(tokens, batch_index)
    maps, tok = _unpad(_stack(_layers(attentions), batch_index), tok, attention_mask, batch_index)
    return _attention(maps, tok, roles, causal, model)


def from_transformer_lens(
    cache: Mapping[str, Any],
    tokens: Sequence[str] | Sequence[Sequence[str]],
    *,
    roles: Sequence[str] | None = None,
    batch_index: int | None = None,
    attention_mask: Any = None,
    causal: bool | None = None,
    model: str = "",
) -> Attention:
    """An :class:`~attnkit.Attention` from a TransformerLens ``ActivationCache``.

    Reads the attention probabilities ``cache["blocks.{l}.attn.hook_pattern"]`` of every
    layer ``l`` (``[batch, head, query, key]``, or ``[head, query, key]`` in a cache made
    with ``remove_batch_dim=True``).

    Parameters
    ----------
    cache : ActivationCache or mapping
        What ``model.run_with_cache(...)`` returned second (any mapping from hook names to
        tensors works, e.g. one filtered with ``names_filter``).
    tokens : sequence of str
        The token strings, e.g. ``model.to_str_tokens(text)``; a leading space marks the
        start of a word.
    roles, batch_index, attention_mask, causal, model
        As in :func:`from_transformers`.

    Returns
    -------
    Attention
        Token level, maps ``[layer, head, n, n]`` float32.

    Raises
    ------
    InputError
        When the cache holds no ``hook_pattern`` (run it without a ``names_filter`` that
        drops them), layers are missing, or shapes disagree with the tokens.

    Examples
    --------
    >>> import attnkit as ak, torch
    >>> cache = {f"blocks.{l}.attn.hook_pattern": torch.full((1, 3, 4, 4), 0.25)
    ...          for l in range(2)}
    >>> att = ak.from_transformer_lens(cache, ["<|endoftext|>", "The", " cat", "s"])
    >>> att.maps.shape, att.words, att.roles.tolist()
    ((2, 3, 4, 4), ['The', 'cats'], ['cls', 'word', 'word', 'word'])
    """
    keys = list(cache.keys()) if hasattr(cache, "keys") else None
    if keys is None:
        raise InputError(
            f"Cannot read a TransformerLens cache from a {type(cache).__name__}: pass the "
            "ActivationCache that run_with_cache returned."
        )
    layers: list[Any] = []
    while TL_PATTERN.format(layer=len(layers)) in keys:
        layers.append(cache[TL_PATTERN.format(layer=len(layers))])
    extra = [k for k in keys if k.endswith("attn.hook_pattern")]
    if not layers or len(extra) != len(layers):
        raise InputError(
            f"The cache holds {len(extra)} attention patterns, not blocks.0 to blocks.L-1 "
            "(blocks.{l}.attn.hook_pattern): run run_with_cache without a names_filter that "
            "drops them, or with names_filter=lambda n: n.endswith('hook_pattern')."
        )
    tok = _item_tokens(tokens, batch_index)
    maps, tok = _unpad(_stack(layers, batch_index), tok, attention_mask, batch_index)
    return _attention(maps, tok, roles, causal, model)


def from_nnsight(
    saved: Any,
    tokens: Sequence[str] | Sequence[Sequence[str]],
    *,
    roles: Sequence[str] | None = None,
    batch_index: int | None = None,
    attention_mask: Any = None,
    causal: bool | None = None,
    model: str = "",
) -> Attention:
    """An :class:`~attnkit.Attention` from attention saved inside an nnsight trace.

    Two recipes work (the model loaded with ``attn_implementation="eager"``; access modules
    in the order they run, as nnsight requires)::

        with net.trace(input_ids, output_attentions=True):
            out = net.output.save()                      # the whole model output
        att = ak.from_nnsight(out, tokens)

        saved = []
        with net.trace(input_ids):
            for block in net.transformer.h:              # GPT-2; model.layers / encoder.layer …
                saved.append(block.attn.output[1].save())  # (output, weights) of each layer
        att = ak.from_nnsight(saved, tokens)

    Parameters
    ----------
    saved : model output or list of tensors
        The saved output of a trace run with ``output_attentions=True``, or the saved
        per-layer attention weights (``[batch, head, n, n]`` each).
    tokens, roles, batch_index, attention_mask, causal, model
        As in :func:`from_transformers`.

    Returns
    -------
    Attention
        Token level, maps ``[layer, head, n, n]`` float32.

    Raises
    ------
    InputError
        As :func:`from_transformers`; also when a saved value was never filled (read it
        after the ``with`` block ends).

    Examples
    --------
    >>> import attnkit as ak, torch
    >>> saved = [torch.eye(3)[None, None].repeat(1, 2, 1, 1) for _ in range(2)]
    >>> ak.from_nnsight(saved, ["[CLS]", "hi", "[SEP]"]).maps.shape
    (2, 2, 3, 3)
    """
    values = saved
    if isinstance(saved, (list, tuple)):
        values = [getattr(v, "value", v) if not hasattr(v, "shape") else v for v in saved]
    elif not hasattr(saved, "shape") and hasattr(saved, "value") and not hasattr(saved, "attentions"):
        values = saved.value
    return from_transformers(values, tokens, roles=roles, batch_index=batch_index,
                             attention_mask=attention_mask, causal=causal, model=model)


def from_bertviz(
    attention: Sequence[Any],
    tokens: Sequence[str],
    *,
    sentence_b_start: int | None = None,
    roles: Sequence[str] | None = None,
    causal: bool | None = None,
    model: str = "",
) -> Attention:
    """An :class:`~attnkit.Attention` from bertviz's input (what :func:`to_bertviz` writes).

    Parameters
    ----------
    attention : sequence of tensors
        One ``[1, head, n, n]`` tensor per layer, as ``bertviz.head_view`` takes.
    tokens : sequence of str
        The ``n`` token strings.
    sentence_b_start : int, optional
        Position of the first token of the second text of a pair: word positions from it on
        get segment 1.
    roles, causal, model
        As in :func:`from_transformers`.

    Returns
    -------
    Attention
        Token level.

    Raises
    ------
    InputError
        As :func:`from_transformers`.

    Examples
    --------
    >>> import attnkit as ak
    >>> from attnkit.testing import tiny_model
    >>> att = tiny_model("bert").attend(("The cat sat.", "We read."))
    >>> back = ak.from_bertviz(**ak.to_bertviz(att))
    >>> bool((back.maps == att.maps).all()), back.segments.tolist() == att.segments.tolist()
    (True, True)
    """
    tok = _item_tokens(tokens, None)
    maps = _stack(_layers(attention), None)
    if maps.shape[-1] != len(tok):
        raise InputError(f"The maps have {maps.shape[-1]} positions but {len(tok)} tokens were given.")
    return _attention(maps, tok, roles, causal, model, sentence_b_start)


# ----------------------------------------------------------------------- writing
def _dense(att: AttentionLike) -> np.ndarray:
    """``[layer, head, n, n]`` float32 maps of one input."""
    return np.asarray(dense_maps(att), dtype=np.float32)


def _check_one(att: Any, what: str) -> None:
    if not isinstance(att, AttentionLike):
        raise InputError(
            f"{what} exports the attention of one input (an Attention), not a "
            f"{type(att).__name__}; pick one item, e.g. attentions[0]."
        )


def to_bertviz(attentions: AttentionLike) -> dict[str, Any]:
    """The keyword arguments of ``bertviz.head_view`` and ``bertviz.model_view``.

    Parameters
    ----------
    attentions : AttentionLike
        The attention of one input (token or word level; a lazy attention is materialised,
        ``[layer, head, n, n]`` float32).

    Returns
    -------
    dict
        ``attention``: a tuple of float32 torch tensors ``[1, head, n, n]``, one per layer
        (rows *from*, columns *to*, as bertviz reads them); ``tokens``: the ``n`` position
        labels; ``sentence_b_start``: the first position of the second text of a pair, or
        None. Call ``bertviz.head_view(**ak.to_bertviz(att))``.

    Raises
    ------
    InputError
        When given more than one input.

    Examples
    --------
    >>> import attnkit as ak
    >>> from attnkit.testing import tiny_model
    >>> args = ak.to_bertviz(tiny_model("bert").attend("The cat sat."))
    >>> len(args["attention"]), tuple(args["attention"][0].shape), args["tokens"]
    (2, (1, 2, 6, 6), ['[CLS]', 'the', 'cat', 'sat', '.', '[SEP]'])
    """
    import torch

    _check_one(attentions, "to_bertviz")
    maps = _dense(attentions)
    segments = getattr(attentions, "segments", None)
    second = np.flatnonzero(np.asarray(segments) == 1) if segments is not None else np.zeros(0, int)
    return {
        "attention": tuple(torch.from_numpy(maps[layer][None].copy()) for layer in range(len(maps))),
        "tokens": list(attentions.tokens),
        "sentence_b_start": int(second[0]) if len(second) else None,
    }


def to_circuitsvis(attentions: AttentionLike, *, layer: int | None = None) -> dict[str, Any]:
    """The keyword arguments of ``circuitsvis.attention.attention_patterns`` (and
    ``attention_heads``).

    Parameters
    ----------
    attentions : AttentionLike
        The attention of one input (token or word level).
    layer : int, optional
        Export the heads of this layer (0-indexed); None exports every head of every layer
        in order (layer 0's heads first), ``n_layers * n_heads`` patterns.

    Returns
    -------
    dict
        ``tokens``: the ``n`` position labels; ``attention``: float32 numpy array
        ``[heads, n, n]`` (destination = *from* rows, source = *to* columns, as CircuitsVis
        reads them). Call ``circuitsvis.attention.attention_patterns(**ak.to_circuitsvis(att))``.

    Raises
    ------
    InputError
        When given more than one input or a layer it does not have.

    Examples
    --------
    >>> import attnkit as ak
    >>> from attnkit.testing import tiny_model
    >>> att = tiny_model("gpt2").attend("The cat sat.")
    >>> ak.to_circuitsvis(att)["attention"].shape, ak.to_circuitsvis(att, layer=1)["attention"].shape
    ((4, 7, 7), (2, 7, 7))
    """
    _check_one(attentions, "to_circuitsvis")
    if layer is not None:
        layer = validate.index(layer, attentions.n_layers, "layer")
    if layer is None:
        maps = _dense(attentions)
        pats = maps.reshape(-1, *maps.shape[2:])
    else:
        pats = np.stack([np.asarray(attentions.map(layer, h), dtype=np.float32)
                         for h in range(attentions.n_heads)])
    return {"tokens": list(attentions.tokens), "attention": pats}
