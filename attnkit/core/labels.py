"""How a head, a layer's MLP and a layer's attention are named in figures, views and component
names: one form, 1-indexed as in the papers ("L-H"); tables stay 0-indexed.

``head_label(0, 1) == "1-2"`` is layer 1, head 2 (0-indexed layer 0, head 1); a layer's MLP is
``"1-mlp"`` and its heads summed ``"1-attn"``. Under grouped-query attention a key/value head
shared by several query heads is ``"1-kv1"`` (layer 1, key/value head 1: :func:`kv_label`).
:func:`parse_head_label` and :func:`parse_kv_label` read the labels back. The front end reads
the same head forms (``js/src/lib/scoreparts.ts``).
"""

from __future__ import annotations

import re

_HEAD = re.compile(r"^(\d+)-(\d+)$")
_KV = re.compile(r"^(\d+)-kv(\d+)$")


def head_label(layer: int, head: int) -> str:
    """The displayed name of a 0-indexed head: ``"L-H"``, 1-indexed.

    Parameters
    ----------
    layer, head : int
        0-indexed.

    Returns
    -------
    str

    Examples
    --------
    >>> head_label(6, 9)
    '7-10'
    """
    return f"{int(layer) + 1}-{int(head) + 1}"


def mlp_label(layer: int) -> str:
    """The displayed name of a 0-indexed layer's MLP output: ``"L-mlp"``, 1-indexed.

    Examples
    --------
    >>> mlp_label(0)
    '1-mlp'
    """
    return f"{int(layer) + 1}-mlp"


def attn_label(layer: int) -> str:
    """The displayed name of a 0-indexed layer's heads summed: ``"L-attn"``, 1-indexed.

    Examples
    --------
    >>> attn_label(1)
    '2-attn'
    """
    return f"{int(layer) + 1}-attn"


def kv_label(layer: int, group: int) -> str:
    """The displayed name of a 0-indexed layer's 0-indexed key/value head under grouped-query
    attention (shared by several query heads): ``"L-kvG"``, 1-indexed.

    Parameters
    ----------
    layer, group : int
        0-indexed; key/value head ``group`` serves query heads ``group * r`` to
        ``(group + 1) * r - 1`` (``r`` query heads per key/value head).

    Returns
    -------
    str

    Examples
    --------
    >>> kv_label(1, 0)
    '2-kv1'
    """
    return f"{int(layer) + 1}-kv{int(group) + 1}"


def parse_kv_label(name: str) -> tuple[int, int] | None:
    """``(layer, group)`` 0-indexed of a key/value head's label (:func:`kv_label`), else None.

    Examples
    --------
    >>> parse_kv_label("2-kv1"), parse_kv_label("2-1")
    ((1, 0), None)
    """
    m = _KV.match(str(name))
    return (int(m.group(1)) - 1, int(m.group(2)) - 1) if m else None


def parse_head_label(name: str) -> tuple[int, int] | None:
    """``(layer, head)`` 0-indexed of a head's label (:func:`head_label`), else None.

    Examples
    --------
    >>> parse_head_label("2-3"), parse_head_label("1-mlp")
    ((1, 2), None)
    """
    m = _HEAD.match(str(name))
    return (int(m.group(1)) - 1, int(m.group(2)) - 1) if m else None
