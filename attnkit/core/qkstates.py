"""Post-rotary queries and keys of one input, as the model scores them.

A layer's attention scores are ``s(q, k) = query[q] . key[k] * scaling`` (soft-capped where
the model caps logits), with the queries and keys *after* rotary position embedding: these
are the vectors :mod:`attnkit.runtime.capture` hands to its recorders. :class:`QKStates` keeps
them for some layers of one input; :class:`QKRecorder` collects them during a forward pass
(any batch, padding stripped). :class:`attnkit.Attention` carries one (``att.qk``) and
answers ``att.queries(layer)`` / ``att.keys(layer)`` from it; a store extracted with
``keep="qk"`` keeps them per token (:mod:`attnkit.storage.extraction`).

Examples
--------
>>> import numpy as np
>>> from attnkit.core.qkstates import QKStates
>>> q = np.ones((2, 3, 4), np.float32)          # 2 query heads, 3 positions, d = 4
>>> k = np.zeros((1, 3, 4), np.float32)         # 1 key head (grouped-query attention)
>>> states = QKStates({0: q}, {0: k}, {0: 0.5})
>>> states.queries(0).shape, states.keys(0).shape, states.groups(0)
((2, 3, 4), (1, 3, 4), 2)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import validate
from ..errors import InputError


def _numpy(t: Any) -> np.ndarray:
    """A float32 numpy copy of a torch tensor or an array (CPU)."""
    if hasattr(t, "detach"):
        t = t.detach().float().cpu().numpy()
    return np.asarray(t, dtype=np.float32)


@dataclass
class QKStates:
    """Queries ``[H, n, d]`` and keys ``[H_kv, n, d]`` of some layers of one input.

    Parameters
    ----------
    query_by_layer : dict
        Layer (0-indexed) -> post-rotary queries ``[H, n, d]`` (numpy or torch).
    key_by_layer : dict
        Layer -> post-rotary keys ``[H_kv, n, d]`` (before grouped-query repetition: query
        head ``h`` is scored against key head ``h // (H // H_kv)``).
    scaling : dict
        Layer -> the factor of the scores (``d ** -0.5`` in most models).
    softcap : float, optional
        Logit soft-capping of the scores, ``tanh(s / cap) * cap`` (Gemma 2).
    tokens, roles : optional
        The positions' labels and roles (a store's states carry them, for sets that keep
        no maps).
    causal : bool
        Rows see no later key.

    Examples
    --------
    >>> import numpy as np
    >>> from attnkit.core.qkstates import QKStates
    >>> s = QKStates({1: np.ones((1, 2, 3))}, {1: np.ones((1, 2, 3))}, {1: 1.0})
    >>> s.layers
    [1]
    """

    query_by_layer: dict[int, Any]
    key_by_layer: dict[int, Any]
    scaling: dict[int, float]
    softcap: float | None = None
    tokens: list[str] | None = field(default=None, repr=False)
    roles: Any = field(default=None, repr=False)
    causal: bool = field(default=False, repr=False)
    _cache: dict[tuple[str, int], np.ndarray] = field(default_factory=dict, repr=False)

    @property
    def layers(self) -> list[int]:
        """The layers whose queries and keys are kept, ascending."""
        return sorted(self.query_by_layer)

    def _check(self, layer: int) -> int:
        layer = validate.integer(layer, "layer")
        if layer not in self.query_by_layer:
            raise InputError(
                f"No queries and keys of layer {layer} were kept; this input has them for "
                f"layers {self.layers}. Extract with keep='qk' and qk_layers including {layer}."
            )
        return layer

    def _get(self, kind: str, layer: int) -> np.ndarray:
        layer = self._check(layer)
        hit = self._cache.get((kind, layer))
        if hit is None:
            src = self.query_by_layer if kind == "q" else self.key_by_layer
            hit = _numpy(src[layer])
            self._cache[(kind, layer)] = hit
        return hit

    def queries(self, layer: int) -> np.ndarray:
        """Float32 ``[H, n, d]`` post-rotary queries of ``layer``.

        Parameters
        ----------
        layer : int
            0-indexed layer.

        Returns
        -------
        ndarray
            Float32 ``[H, n, d]``.

        Raises
        ------
        InputError
            For a layer whose queries were not kept.

        Examples
        --------
        >>> import numpy as np
        >>> from attnkit.core.qkstates import QKStates
        >>> QKStates({0: np.ones((2, 3, 4))}, {0: np.ones((1, 3, 4))}, {0: 0.5}).queries(0).dtype
        dtype('float32')
        """
        return self._get("q", layer)

    def keys(self, layer: int) -> np.ndarray:
        """Float32 ``[H_kv, n, d]`` post-rotary keys of ``layer``.

        Parameters
        ----------
        layer : int
            0-indexed layer.

        Returns
        -------
        ndarray
            Float32 ``[H_kv, n, d]``.

        Raises
        ------
        InputError
            For a layer whose keys were not kept.

        Examples
        --------
        >>> import numpy as np
        >>> from attnkit.core.qkstates import QKStates
        >>> QKStates({0: np.ones((2, 3, 4))}, {0: np.ones((1, 3, 4))}, {0: 0.5}).keys(0).shape
        (1, 3, 4)
        """
        return self._get("k", layer)

    def groups(self, layer: int) -> int:
        """Query heads per key head of ``layer`` (1 for multi-head attention).

        Parameters
        ----------
        layer : int
            0-indexed layer.

        Returns
        -------
        int

        Examples
        --------
        >>> import numpy as np
        >>> from attnkit.core.qkstates import QKStates
        >>> QKStates({0: np.ones((4, 3, 2))}, {0: np.ones((2, 3, 2))}, {0: 1.0}).groups(0)
        2
        """
        layer = self._check(layer)
        return int(self.query_by_layer[layer].shape[0]) // int(self.key_by_layer[layer].shape[0])


class QKRecorder:
    """Keeps the post-rotary queries and keys of the asked layers for every item of a batch
    (padding stripped), as float32 numpy on the CPU — memory ``O(L n d)`` per item.

    Parameters
    ----------
    lengths : sequence of int
        Tokens of each item of the batch.
    layers : sequence of int, optional
        Layers to keep (0-indexed); ``None`` keeps every layer.

    Examples
    --------
    >>> from attnkit.core.qkstates import QKRecorder
    >>> from attnkit.testing import tiny_model
    >>> model = tiny_model("llama")
    >>> enc = model.encode("The cat sat.")
    >>> rec = QKRecorder([len(enc)], layers=[1])
    >>> _ = model.record([enc], [rec])
    >>> st = rec.states()[0]
    >>> st.layers, st.queries(1).shape, st.keys(1).shape
    ([1], (2, 7, 8), (1, 7, 8))
    """

    needs_lse = False

    def __init__(self, lengths: Sequence[int], layers: Sequence[int] | None = None):
        self.lengths = [int(n) for n in lengths]
        self.layers = None if layers is None else {int(x) for x in layers}
        self.queries: dict[int, list[np.ndarray]] = {}
        self.keys: dict[int, list[np.ndarray]] = {}
        self.scaling: dict[int, float] = {}
        self.softcap: float | None = None

    def __call__(self, call: Any) -> None:
        if self.layers is not None and call.layer not in self.layers:
            return
        q = call.query.detach().float().cpu().numpy()
        k = call.key.detach().float().cpu().numpy()
        self.queries[call.layer] = [q[i, :, :n] for i, n in enumerate(self.lengths)]
        self.keys[call.layer] = [k[i, :, :n] for i, n in enumerate(self.lengths)]
        self.scaling[call.layer] = float(call.scaling)
        self.softcap = None if call.softcap is None else float(call.softcap)

    def states(self) -> list[QKStates]:
        """One :class:`QKStates` per item of the batch.

        Returns
        -------
        list of QKStates

        Examples
        --------
        >>> from attnkit.core.qkstates import QKRecorder
        >>> QKRecorder([3, 4]).states()   # nothing recorded yet: empty states
        [QKStates(query_by_layer={}, key_by_layer={}, scaling={}, softcap=None), \
QKStates(query_by_layer={}, key_by_layer={}, scaling={}, softcap=None)]
        """
        return [QKStates({l: q[i] for l, q in self.queries.items()},
                         {l: k[i] for l, k in self.keys.items()},
                         dict(self.scaling), self.softcap)
                for i in range(len(self.lengths))]


def scores(states: QKStates, layer: int, head: int, *, causal: bool) -> np.ndarray:
    """Float32 ``[n, n]`` attention weights of one head recomputed from its queries and keys:
    the softmax of the scaled (soft-capped) scores, causal rows masked.

    Equal to the model's map for models without a position bias or learned sinks (up to
    float rounding; float16 storage rounds queries and keys).

    Parameters
    ----------
    states : QKStates
        One input's queries and keys.
    layer, head : int
        0-indexed layer and query head.
    causal : bool
        Rows see no later key.

    Returns
    -------
    ndarray
        Float32 ``[n, n]``: rows are *from*, columns *to*; rows sum to 1.

    Examples
    --------
    >>> import numpy as np
    >>> from attnkit.core.qkstates import QKStates, scores
    >>> s = QKStates({0: np.zeros((1, 3, 2))}, {0: np.zeros((1, 3, 2))}, {0: 1.0})
    >>> scores(s, 0, 0, causal=True).round(2).tolist()
    [[1.0, 0.0, 0.0], [0.5, 0.5, 0.0], [0.33, 0.33, 0.33]]
    """
    q = states.queries(layer)[head]
    k = states.keys(layer)[head // states.groups(layer)]
    s = (q @ k.T) * np.float32(states.scaling[layer])
    if states.softcap:
        s = np.tanh(s / states.softcap) * states.softcap
    if causal:
        n = len(q)
        s = np.where(np.tri(n, dtype=bool), s, -np.inf)
    s = s - s.max(-1, keepdims=True)
    e = np.exp(s)
    return (e / e.sum(-1, keepdims=True)).astype(np.float32)
