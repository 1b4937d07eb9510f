"""Token influence on an attention graph (DeRose, Wang & Berger 2020, §4.2).

Our reading of §4.2 ("head counts propagated backward from the source, averaged over
layers with exponential down-weighting of earlier layers"), written out as the exact
formula implemented here:

* Head counts. For attention layer ``l`` (1..L; its edges join level ``l`` to level
  ``l - 1``) and position ``w``, ``c_l(w)`` is the number of *(query node, head)* pairs of
  layer ``l`` whose attention to ``w`` exceeds the threshold, counting only query nodes
  that are themselves in the graph traced back from the source. This is how the counts
  "propagate backward from the source": a token earns counts in layer ``l`` only through
  tokens of level ``l`` that the source reaches, so a token attended strongly by tokens
  the source never reaches earns nothing. It is the sum of ``len(heads)`` over the graph's
  edges entering ``(l - 1, w)``.
* Layer weighting. Counts are averaged over layers with weights ``alpha ** (L - l)``: the
  last layer (closest to the classification) has weight 1 and each earlier layer is
  down-weighted by a further factor ``alpha``::

      I(w) = sum_l alpha**(L - l) * c_l(w) / sum_l alpha**(L - l)

* Rating. ``rating(w) = ceil(5 * I(w) / max_w I(w))`` for ``I(w) > 0`` (1..5, the token
  with the largest influence gets 5) and 0 for tokens the graph never reaches; this is the
  0-5 scale the paper shows next to each token.
"""

from __future__ import annotations

import networkx as nx
import numpy as np
import pandas as pd

from .. import validate
from .._compat import renamed
from ..errors import InputError


@renamed(g="graph")
def head_counts(graph: nx.DiGraph) -> np.ndarray:
    """Head counts ``c_l(w)`` of an attention graph (see the module docstring).

    Parameters
    ----------
    graph : networkx.DiGraph
        From :func:`attnkit.attention_graph`.

    Returns
    -------
    numpy.ndarray
        Int ``[L, n]``: ``[l - 1, w]`` = ``c_l(w)``, the head edges of layer ``l`` (maps
        index ``l - 1``) that enter position ``w`` at level ``l - 1``.

    Examples
    --------
    >>> import numpy as np, attnkit as ak
    >>> maps = np.array([[[[1, 0], [0.5, 0.5]]], [[[0.5, 0.5], [0.5, 0.5]]]])  # 2 layers, 1 head
    >>> att = ak.Attention.from_maps(maps, ["[CLS]", "a"])
    >>> from attnkit.flow.influence import head_counts
    >>> g = ak.attention_graph(att, threshold=0.3)  # traced back from [CLS]
    >>> head_counts(g).tolist()  # layer 1: [CLS] is attended by both nodes, "a" by one
    [[2, 1], [1, 1]]
    """
    g = graph
    n_layers, n = _shape(g)
    counts = np.zeros((n_layers, n), dtype=np.int64)
    for (level, _), (_, pos), heads in g.edges(data="heads"):
        counts[level - 1, pos] += len(heads)
    return counts


@renamed(positional=("alpha",), g="graph")
def influence(graph: nx.DiGraph, *, alpha: float = 0.5) -> pd.DataFrame:
    """Influence of every input position on the source of an attention graph.

    Parameters
    ----------
    graph : networkx.DiGraph
        From :func:`attention_graph`.
    alpha : float
        Each earlier layer's head counts are down-weighted by this factor (in (0, 1]).

    Returns
    -------
    pandas.DataFrame
        Indexed by ``position`` (0..n-1) with columns ``token``, ``role``, ``score``
        (``I(w)`` of the module docstring: the layer-weighted mean head count), ``rating``
        (0-5) and ``heads`` (the unweighted total of head edges entering ``w`` in any
        layer).

    Raises
    ------
    InputError
        For ``alpha`` outside (0, 1] or a graph not made by :func:`attention_graph`.

    Examples
    --------
    >>> import numpy as np, attnkit as ak
    >>> maps = np.array([[[[1, 0, 0], [0.5, 0.5, 0], [0.2, 0.2, 0.6]]]])
    >>> g = ak.attention_graph(ak.Attention.from_maps(maps, ["a", "b", "c"]), sources=[2])
    >>> ak.influence(g)["score"].tolist()
    [0.0, 0.0, 1.0]
    """
    g = graph
    alpha = validate.number(alpha, "alpha")
    if not 0.0 < alpha <= 1.0:
        raise InputError(f"alpha must lie in (0, 1]; got {alpha}. It down-weights each "
                         "earlier layer by that factor.")
    counts = head_counts(g)
    n_layers, n = counts.shape
    weights = float(alpha) ** (n_layers - np.arange(1, n_layers + 1))
    score = weights @ counts / weights.sum()
    top = score.max() if n else 0.0
    rating = np.zeros(n, dtype=np.int64)
    if top > 0:
        # the 1e-9 keeps exact fifths (e.g. 0.4 * 5 = 2.0000000000000004) on their step
        steps = np.clip(np.ceil(5.0 * score / top - 1e-9), 1, 5)
        rating = np.where(score > 0, steps, 0).astype(np.int64)
    tokens = list(g.graph["tokens"])
    roles = list(g.graph.get("roles") or ["word"] * n)
    return pd.DataFrame(
        {"token": tokens, "role": roles, "score": score, "rating": rating,
         "heads": counts.sum(0)},
        index=pd.RangeIndex(n, name="position"),
    )


def _shape(g: nx.DiGraph) -> tuple[int, int]:
    try:
        return int(g.graph["n_layers"]), len(g.graph["tokens"])
    except KeyError:
        raise InputError("This graph lacks the attributes of attention_graph() "
                         "(n_layers, tokens); build it with attnkit.attention_graph.") from None

