"""Path patching: only the sender's difference reaches the receivers (Wang et al. 2023, IOI).

The corrupted inputs ``x′`` run unchanged except at the receivers: each receiver head
``r`` (in a later layer than the sender ``s``) computes its query, key or value (``via=``)
from

    norm_r(x′_r + W_O^s (z_s(x) − z_s(x′))),

the stream entering its layer on the corrupted run plus the sender's clean-minus-corrupted
output written through its output projection, after the receiver's own pre-attention norm.
Every other path, including the sender's route through the heads between them and its own
effect on its layer's later computations, stays at the corrupted run. The result is the share
of the clean–corrupted gap restored, as in :func:`~attnkit.interventions.patch.patch`.

The direct path is exact for pre-norm models (the attention output is added to the stream
as it is): GPT-2, GPT-NeoX, Llama, Qwen2, Mistral, gpt-oss. Gemma 2 normalises the attention
output before adding it (``x + N(o)``, ``o`` the output projection's output): there the
sender's difference as the stream receives it is ``N(o′ + W_O^s Δz_s) − N(o′)``, the sender's
layer's norm recomputed with the sender's output clean and every other head at the corrupted
run, and it reaches later layers unchanged, so the path is exact again. Post-norm encoders
(BERT: ``LN(x + o)``) are refused: every later norm rescales the whole stream, so no part of a
receiver's input is the sender's difference alone; defining one needs a convention (the norms'
statistics frozen at the corrupted run, or recomputed with every block between held), and the
two differ in general. Under grouped-query attention, query heads share
their key/value head: a path into keys or values reaches every query head of the group, so
the receivers must list the whole group.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pandas as pd

from ..core import validate
from ..core.results import Result
from ..errors import InputError, UnsupportedModelError
from ..runtime.archs import arch_of, submodule
from . import hooks
from .metrics import Metric, resolve
from .patch import clean_and_corrupted

#: Which input of the receivers the sender's difference reaches.
VIA = ("q", "k", "v")


def _projection(model: Any, layer_module: Any, via: str, heads: list[int]) -> tuple[Any, list[slice]]:
    """The module whose output holds ``via`` of ``heads`` (query heads for ``"q"``, key/value
    heads otherwise) of one layer, and those heads' column slices of its output."""
    stream = arch_of(model).stream
    assert stream is not None
    site = hooks.sites(model)
    d = site.head_dim
    if stream.qkv == "split":
        mod = submodule(layer_module, {"q": stream.q, "k": stream.k, "v": stream.v}[via])
        return mod, [slice(h * d, (h + 1) * d) for h in heads]
    mod = submodule(layer_module, stream.q)
    i = VIA.index(via)
    if stream.qkv == "gpt2":
        width = site.n_heads * d
        return mod, [slice(i * width + h * d, i * width + (h + 1) * d) for h in heads]
    return mod, [slice(h * 3 * d + i * d, h * 3 * d + (i + 1) * d) for h in heads]  # neox


def receivers_by_layer(model: Any, sender: tuple[int, int], receivers: Any,
                       via: str) -> dict[int, list[int]]:
    """Receivers grouped by layer, as the heads of the projection ``via`` reads (key/value
    heads for ``"k"`` and ``"v"``), checked.

    Parameters
    ----------
    model : Model
        The model.
    sender : (layer, head)
        The sender.
    receivers : (layer, head) pairs
        The receivers (query heads).
    via : str
        One of :data:`VIA`.

    Returns
    -------
    dict
        Layer -> projection heads.

    Raises
    ------
    InputError
        For receivers not after the sender, or a key/value group only partly listed.

    Examples
    --------
    >>> from attnkit.interventions.path import receivers_by_layer
    >>> from attnkit.testing import tiny_model
    >>> receivers_by_layer(tiny_model("llama", heads=4, kv_heads=2), (0, 1), [(1, 2), (1, 3)], "k")
    {1: [1]}
    """
    pairs = validate.head_pairs(receivers, model.n_layers, model.n_heads)
    if not pairs:
        raise InputError("receivers is empty; give at least one (layer, head) pair.")
    late = [p for p in pairs if p[0] <= sender[0]]
    if late:
        raise InputError(f"receivers {late} are not in a later layer than the sender {sender}: "
                         "a path runs from an earlier head to later ones.")
    groups = model.n_heads // hooks.kv_heads(model)
    out: dict[int, list[int]] = {}
    for layer in sorted({p[0] for p in pairs}):
        heads = sorted({h for l, h in pairs if l == layer})
        if via == "q" or groups == 1:
            out[layer] = heads
            continue
        shared = sorted({h // groups for h in heads})
        for g in shared:
            group = set(range(g * groups, (g + 1) * groups))
            if not group <= set(heads):
                raise InputError(
                    f"receivers: query heads {sorted(group)} of layer {layer} share key/value "
                    f"head {g}, so a path into its {'keys' if via == 'k' else 'values'} reaches "
                    f"all of them; list the whole group (or use via='q').")
        out[layer] = shared
    return out


@contextmanager
def routing(model: Any, by_layer: dict[int, list[int]], via: str, delta: Any) -> Iterator[None]:
    """Within the block, the receivers' ``via`` projections read ``norm(x + delta)`` (``delta``
    ``[B, T, d]``, the sender's difference through its output projection) instead of
    ``norm(x)``; everything else is untouched.

    Parameters
    ----------
    model : Model
        The model.
    by_layer : dict
        :func:`receivers_by_layer`.
    via : str
        One of :data:`VIA`.
    delta : torch.Tensor
        ``[B, T, d]``.

    Yields
    ------
    None

    Examples
    --------
    >>> import torch
    >>> from attnkit.interventions.hooks import batch, forward
    >>> from attnkit.interventions.path import routing
    >>> from attnkit.testing import tiny_model
    >>> model = tiny_model("gpt2")
    >>> b = batch(model, ["The cat sat."])
    >>> with routing(model, {1: [0]}, "q", torch.zeros(1, 7, 16)):
    ...     same = forward(model, b)
    >>> bool(torch.allclose(same, forward(model, b)))
    True
    """
    stream = arch_of(model).stream
    assert stream is not None and stream.attn_norm is not None
    site = hooks.sites(model)
    handles, seen = [], {}

    def store(layer: int) -> Any:
        def hook(module: Any, args: Any) -> None:
            seen[layer] = args[0]
        return hook

    def reroute(layer: int, norm: Any, cols: list[slice]) -> Any:
        def hook(module: Any, args: Any, out: Any) -> Any:
            x = seen[layer]
            # .forward: no hooks (this one, and the norm's store) run again
            patched = module.forward(norm.forward(x + delta.to(x.dtype)))
            out = out.clone()
            for c in cols:
                out[..., c] = patched[..., c]
            return out
        return hook

    try:
        for layer, heads in by_layer.items():
            mod = site.layers[layer]
            norm = submodule(mod, stream.attn_norm)
            proj, cols = _projection(model, mod, via, heads)
            handles.append(norm.register_forward_pre_hook(store(layer)))
            handles.append(proj.register_forward_hook(reroute(layer, norm, cols)))
        yield
    finally:
        for h in handles:
            h.remove()


def sender_delta(model: Any, sender: tuple[int, int], runs: dict[str, Any]) -> Any:
    """``W_O^s (z_s(x) − z_s(x′))``: the sender's difference as its output projection writes
    it into the stream, ``[B, T, d]`` (no bias: it cancels); for Gemma 2's normalised attention
    output, ``N(o′ + W_O^s Δz_s) − N(o′)`` (:mod:`attnkit.interventions.path`).

    Parameters
    ----------
    model : Model
        The model.
    sender : (layer, head)
        The sender.
    runs : dict
        :func:`~attnkit.interventions.patch.clean_and_corrupted` (with the corrupted run's
        head outputs under ``"corrupted_z"``).

    Returns
    -------
    torch.Tensor

    Examples
    --------
    >>> from attnkit.interventions.hooks import forward
    >>> from attnkit.interventions.metrics import kl
    >>> from attnkit.interventions.patch import clean_and_corrupted
    >>> from attnkit.interventions.path import sender_delta
    >>> from attnkit.testing import tiny_model
    >>> model = tiny_model("gpt2")
    >>> runs = clean_and_corrupted(model, ["The cat sat."], ["A cat sat."], kl())
    >>> runs["corrupted_z"] = {}
    >>> _ = forward(model, runs["corrupted"], capture=runs["corrupted_z"])
    >>> tuple(sender_delta(model, (0, 1), runs).shape)
    (1, 7, 16)
    """
    import torch

    layer, head = sender
    site = hooks.sites(model)
    layout = arch_of(model).layout
    assert layout is not None
    d = site.head_dim
    dz = runs["sources"][("z", layer)][:, :, head] - runs["corrupted_z"][("z", layer)][:, :, head]
    w = site.out_proj[layer].weight
    if layout.placement == "sandwich":  # x + N(o): N recomputed with the sender's output clean
        assert layout.norm is not None
        norm = submodule(site.layers[layer], layout.norm)
        proj = site.out_proj[layer]
        z = runs["corrupted_z"][("z", layer)]
        mixed = z.clone()
        mixed[:, :, head] = runs["sources"][("z", layer)][:, :, head].to(z.dtype)
        with torch.no_grad():  # .forward: no hooks of an editing forward run here
            o_corr = proj.forward(z.reshape(*z.shape[:2], -1))
            o_mix = proj.forward(mixed.reshape(*z.shape[:2], -1))
            return norm.forward(o_mix) - norm.forward(o_corr)
    block = w[head * d:(head + 1) * d, :] if layout.conv1d else w[:, head * d:(head + 1) * d].T
    return dz.to(block.dtype) @ block


def path_patch(
    model: Any,
    clean: Any,
    corrupted: Any,
    *,
    sender: tuple[int, int],
    receivers: Any,
    via: str = "q",
    metric: str | Metric | Any = "auto",
    progress: bool = True,
) -> Result:
    """Share of the clean–corrupted gap restored when only the sender's difference reaches
    the receivers' queries, keys or values (see :mod:`attnkit.interventions.path`).

    Parameters
    ----------
    model : Model
        A pre-norm decoder (or Gemma 2) loaded with :func:`attnkit.load`.
    clean, corrupted : sequence
        Matched inputs, the same number of tokens pair by pair.
    sender : (layer, head)
        The sending head (0-indexed).
    receivers : (layer, head) pairs
        Receiving heads, in later layers.
    via : str
        ``"q"``, ``"k"`` or ``"v"``: which input of the receivers the difference reaches.
    metric : str, Metric or callable
        What to measure (:mod:`attnkit.interventions.metrics`).
    progress : bool
        Kept for the contract (three forward passes).

    Returns
    -------
    Result
        One row: ``sender``, ``receivers``, ``via``, ``restored`` (the share of the gap) and
        ``metric``; ``meta``: ``metric``, ``clean``, ``corrupted``.

    Raises
    ------
    InputError
        For heads out of range, receivers not after the sender, a key/value group only
        partly listed, or inputs that cannot be matched.
    UnsupportedModelError
        For post-norm models and encoder–decoders.

    Examples
    --------
    >>> import attnkit as ak
    >>> from attnkit.testing import tiny_model
    >>> r = ak.interventions.path_patch(tiny_model("gpt2"), ["The cat sat."], ["A cat sat."],
    ...                                 sender=(0, 1), receivers=[(1, 0)], via="k", progress=False)
    >>> list(r.table.columns)
    ['sender', 'receivers', 'via', 'restored', 'metric']
    """
    del progress
    if hooks.is_seq2seq(model):
        raise UnsupportedModelError(
            f"model: path patching is not defined here for encoder-decoders ({model.name}): a "
            "sender's direct path into later heads would also run from the encoder's stream "
            "into every decoder layer's cross-attention keys and values; use ablate, patch, "
            "knockout or attribution_patching with stack=.")
    hooks.sites(model)
    arch = arch_of(model)
    if arch.layout is None or arch.stream is None or \
            arch.layout.placement not in ("pre", "sandwich") or arch.stream.attn_norm is None:
        raise UnsupportedModelError(
            f"model: path patching follows the sender's output straight into later heads' "
            f"inputs, which is exact where the attention output joins the stream as it is, or "
            f"normalised on its own (pre-norm decoders: GPT-2, GPT-NeoX, Llama, Qwen2, Mistral, "
            f"gpt-oss; Gemma 2); {model.name} ({model.model_type}) normalises the whole stream "
            f"after every block (post-norm), so no part of a later head's input is the "
            f"sender's alone.")
    v = validate.choice(via, "via", VIA)
    s = validate.head_index(*_pair(sender), model.n_layers, model.n_heads)
    by_layer = receivers_by_layer(model, s, receivers, v)
    m = resolve(metric, model)
    runs = clean_and_corrupted(model, clean, corrupted, m)
    runs["corrupted_z"] = {}
    hooks.forward(model, runs["corrupted"], capture=runs["corrupted_z"])
    delta = sender_delta(model, s, runs)
    with routing(model, by_layer, v, delta):
        out = hooks.forward(model, runs["corrupted"])
    value = float(hooks.per_copy(m(out, hooks.context(model, runs["clean"], runs["reference"])), 1)[0])
    gap = runs["m_clean"] - runs["m_corrupted"]
    pairs = validate.head_pairs(receivers, model.n_layers, model.n_heads)
    table = pd.DataFrame({"sender": [s], "receivers": [tuple(pairs)], "via": [v],
                          "restored": [(value - runs["m_corrupted"]) / gap], "metric": [value]},
                         index=pd.RangeIndex(1, name="path"))
    meta = {"metric": m.name, "clean": runs["m_clean"], "corrupted": runs["m_corrupted"],
            "n_items": runs["corrupted"].size, "higher_is_better": m.higher_is_better}
    return Result(table, meta)


def _pair(sender: Any) -> tuple[Any, Any]:
    try:
        layer, head = sender
    except (TypeError, ValueError):
        raise InputError(f"sender must be one (layer, head) pair; got {sender!r}.") from None
    return layer, head
