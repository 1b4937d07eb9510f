"""Per-item summaries a store can keep instead of (or beside) the attention maps.

``extract(..., keep=("stats", "edges"))`` stores, for every item, only what the corpus
analyses need, for corpora whose maps would not fit on any disk:

- ``"stats"``: :func:`attnkit.core.headstats.item_stats` (``[layer, head, 8]``: attention
  to [CLS], [SEP], punctuation, self, next, previous, mean row entropy, [CLS]-row entropy);
  :func:`attnkit.head_stats` reads them instead of the maps.
- ``"edges"``: for every head, the :data:`EDGES_K` strongest attention edges
  (``[layer, head, k, 3]``: from-position, to-position, weight; weight-descending, ties by
  position; unused slots ``(-1, -1, 0)``).

Word-level maps are ``level="word"`` with ``keep="maps"``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core.headstats import item_stats

#: Edges kept per head and item by the "edges" summary.
EDGES_K = 16


@dataclass(frozen=True)
class Summary:
    """A per-item summary: how to compute it from one Attention and its per-item shape."""

    compute: Callable[[Any], np.ndarray]
    shape: Callable[[dict], tuple[int, ...]]
    dtype: Any = np.float64


def top_edges(att: Any, k: int = EDGES_K) -> np.ndarray:
    """The ``k`` strongest edges of every head of one input, ``[layer, head, k, 3]``
    (from, to, weight), strongest first, equal weights in position order (row-major);
    slots past ``n*n`` hold ``(-1, -1, 0)``.

    Linear in the number of attention values: the k-th largest weight of each head is found
    by partitioning, not by sorting every map.
    """
    L, H = att.n_layers, att.n_heads
    n = len(att)
    out = np.zeros((L, H, k, 3), dtype=np.float32)  # positions and float16 weights are exact
    out[..., :2] = -1
    m = min(k, n * n)
    flat = np.asarray(att.maps, dtype=np.float32).reshape(L * H, n * n)
    kth = -np.partition(-flat, m - 1, axis=-1)[:, m - 1 : m]  # the m-th largest weight per head
    above = flat > kth
    need = m - above.sum(-1, keepdims=True)  # how many of the weights equal to it to take
    equal = flat == kth
    chosen = above | (equal & (np.cumsum(equal, axis=-1) <= need))
    idx = np.nonzero(chosen)[1].reshape(L * H, m)  # ascending position within each head
    w = np.take_along_axis(flat, idx, axis=-1)
    order = np.argsort(-w, axis=-1, kind="stable")  # ties keep the lower position first
    idx = np.take_along_axis(idx, order, axis=-1)
    w = np.take_along_axis(w, order, axis=-1)
    out[..., :m, 0] = (idx // n).reshape(L, H, m)
    out[..., :m, 1] = (idx % n).reshape(L, H, m)
    out[..., :m, 2] = w.reshape(L, H, m)
    return out


SUMMARIES: dict[str, Summary] = {
    "stats": Summary(item_stats, lambda info: (info["n_layers"], info["n_heads"], 8)),
    "edges": Summary(top_edges, lambda info: (info["n_layers"], info["n_heads"], EDGES_K, 3),
                     np.float32),
}
