"""Attention rollout (Abnar & Zuidema 2020) and the residual-augmented attention it uses.

Levels: with ``L`` attention layers there are ``L + 1`` levels of token representations;
level 0 is the input (embeddings), level ``l`` the output of layer ``l`` (maps index
``l - 1``). Matrices are ``[query, key]``: rows are "from" (the upper level), columns "to"
(the level below).
"""

from __future__ import annotations

from typing import Iterator

import numpy as np

from ..core import validate
from .._compat import renamed
from ..core.blocks import head_mean
from ..errors import InputError
from ..core.types import AttentionLike


def _square(att: AttentionLike) -> None:
    """Refuse attention that is no square self-attention (cross-attention's rectangle of
    target rows over source columns has no identity to mix in and no layers to chain)."""
    if hasattr(att, "source_tokens") or not hasattr(att, "n_layers"):
        raise InputError(
            f"attentions: rollout chains a stack's self-attention layer by layer; "
            f"{type(att).__name__} is not one. For an encoder-decoder pair use "
            "attnkit.flow.seq2seq_rollout(pair) (or roll out pair.encoder / pair.decoder)."
        )


def residual_layers(att: AttentionLike, residual: float = 0.5) -> Iterator[np.ndarray]:
    """The matrices of :func:`residual_attention`, one layer at a time (float64 ``[n, n]``).

    Each layer's heads are averaged band by band (:func:`attnkit.core.blocks.head_mean`, maps of
    another measure as each row's shares), so one ``[n, n]`` matrix is held at a time, never
    ``[L, H, n, n]``.
    """
    residual = validate.number(residual, "residual")
    if not 0.0 <= residual <= 1.0:
        raise InputError(f"residual must lie in [0, 1]; got {residual}.")
    _square(att)
    if att.n_layers == 0 or att.n_heads == 0 or len(att) == 0:
        raise InputError(f"Attention maps are empty (shape {(att.n_layers, att.n_heads, len(att))}); "
                         "nothing to roll out.")
    for layer in range(att.n_layers):
        yield layer_matrix(att, layer, residual=residual)


def layer_matrix(attentions: AttentionLike, layer: int, *, residual: float = 0.5) -> np.ndarray:
    """One layer's matrix of :func:`residual_attention`: float64 ``[n, n]``, the heads'
    mean mixed with the identity and renormalised.

    Parameters
    ----------
    attentions : AttentionLike
        Attention of one input.
    layer : int
        0-indexed layer.
    residual : float
        Weight of the identity.

    Returns
    -------
    ndarray
        Float64 ``[n, n]``; rows sum to 1.

    Examples
    --------
    >>> import numpy as np, attnkit as ak
    >>> att = ak.Attention.from_maps(np.array([[[[1, 0], [0.5, 0.5]]]]), ["[CLS]", "a"])
    >>> ak.flow.layer_matrix(att, 0).tolist()
    [[1.0, 0.0], [0.25, 0.75]]
    """
    _square(attentions)
    layer = validate.index(layer, attentions.n_layers, "layer")
    return _mix(head_mean(attentions, layer, shares=True), residual)


def _mix(mean: np.ndarray, residual: float) -> np.ndarray:
    """``(1 - residual) * mean + residual * I`` with every row renormalised."""
    a = (1.0 - residual) * mean
    a[np.diag_indices_from(a)] += residual
    sums = a.sum(axis=-1, keepdims=True)
    if np.any(sums <= 0):
        raise InputError("An attention row sums to 0 with residual=0; use residual > 0 "
                         "or pass maps whose rows sum to 1.")
    a /= sums
    return a


@renamed(positional=("residual",), att="attentions")
def residual_attention(attentions: AttentionLike, *, residual: float = 0.5) -> np.ndarray:
    """The per-layer matrices ``Â`` that rollout and attention flow use.

    Heads are averaged, the residual connection is modelled by mixing in the identity,
    ``(1 - residual) * A + residual * I``, and every row is renormalised to sum to 1
    (as in Abnar & Zuidema; it also repairs rows of float16 or pooled maps that do not sum
    exactly to 1). Maps of another measure (:mod:`attnkit.runtime.measures`) are first turned into
    each row's shares (:func:`~attnkit.core.attention.row_shares`); measures that already hold
    the residual (``"norm+residual"``, ``"alti"``) roll out with ``residual=0``.

    Parameters
    ----------
    attentions : AttentionLike
        Attention of one input.
    residual : float
        Weight of the identity.

    Returns
    -------
    ndarray
        float64 ``[L, n, n]``: entry ``[l, q, k]`` is how much position ``q`` at level
        ``l + 1`` takes from position ``k`` at level ``l``; rows sum to 1.

    Raises
    ------
    InputError
        For a row that sums to 0 with ``residual=0``.

    Examples
    --------
    >>> import numpy as np, attnkit as ak
    >>> att = ak.Attention.from_maps(np.array([[[[1, 0], [0.5, 0.5]]]]), ["[CLS]", "a"])
    >>> ak.flow.residual_attention(att, residual=0.5).tolist()
    [[[1.0, 0.0], [0.25, 0.75]]]
    """
    return np.stack(list(residual_layers(attentions, residual)))


@renamed(positional=("residual", "all_layers"), att="attentions")
def rollout(attentions: AttentionLike, *, residual: float = 0.5, all_layers: bool = False) -> np.ndarray:
    """Attention rollout: products of :func:`residual_attention` from the first layer up.

    ``R_1 = Â_1`` and ``R_l = Â_l @ R_{l-1}``, so ``R_l[q, k]`` is the share of position
    ``q`` at level ``l`` that comes from input token ``k`` (rows sum to 1).

    Parameters
    ----------
    attentions : Attention
        One input's attention (any measure; rows are renormalised).
    residual : float
        Weight of the identity in ``(1 - residual) A + residual I``.
    all_layers : bool
        Return every ``R_l``, not only the last.

    Returns
    -------
    numpy.ndarray
        float64 ``[n, n]`` (``R_L``: rows = positions at the last layer, columns = input
        tokens), or ``[L, n, n]`` with every ``R_l`` when ``all_layers=True``
        (``[l - 1]`` holds level ``l``; ``[-1]`` is the default result).

    Raises
    ------
    InputError
        For ``residual`` outside [0, 1], or empty, negative or non-finite maps.

    Examples
    --------
    >>> import numpy as np, attnkit as ak
    >>> maps = np.array([[[[1, 0], [0.5, 0.5]]], [[[0.5, 0.5], [0.5, 0.5]]]])  # 2 layers
    >>> # Â1 = [[1, 0], [.25, .75]], Â2 = [[.75, .25], [.25, .75]] (residual 0.5); R = Â2 Â1
    >>> ak.rollout(ak.Attention.from_maps(maps, ["a", "b"])).round(4).tolist()
    [[0.8125, 0.1875], [0.4375, 0.5625]]
    """
    levels: list[np.ndarray] = []
    for a in residual_layers(attentions, residual):  # one layer's matrix at a time
        levels = [*levels, a @ levels[-1]] if levels else [a]
        if not all_layers:
            levels = levels[-1:]
    return np.stack(levels) if all_layers else levels[-1]
