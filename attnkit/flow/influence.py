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

* Rating. The 0-5 scale the paper shows next to each token is the influence itself,
  clamped at 5 (§4.2: "the displayed influence is clamped to 5"):
  ``rating(w) = min(5, ceil(I(w)))`` for ``I(w) > 0``, and 0 for tokens the graph never
  reaches. ``rating="relative"`` gives fifths of the largest influence among words instead
  (the source and special tokens, which collect most heads, left out of that maximum).
  :func:`ratings` is the one definition: :func:`influence`, :func:`attnkit.compare` and
  the FlowView all use it.
"""

from __future__ import annotations

from collections.abc import Sequence

import networkx as nx
import numpy as np
import pandas as pd

from ..core import validate
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


#: how influence becomes a 0-5 rating: the paper's clamp, or fifths of the largest among words
RATINGS = ("clamp", "relative")


def ratings(scores: np.ndarray, roles: Sequence[str], sources: Sequence[int], mode: str = "clamp") -> np.ndarray:
    """The 0-5 ratings of influence scores (the module docstring's definition).

    ``"clamp"`` (DeRose et al. 2020, §4.2): the influence score itself, clamped at 5
    (``min(5, ceil(score))``, 0 where the score is 0). ``"relative"``: fifths of the largest
    score among word positions, the source and special tokens left out of that maximum (they
    get 5 when above it).
    """
    scores = np.asarray(scores, dtype=np.float64)
    out = np.zeros(scores.shape, dtype=np.int64)
    pos = scores > 0
    if mode == "clamp":
        # the 1e-9 keeps whole numbers (2.0000000000000004) on their step
        out[pos] = np.minimum(5, np.ceil(scores[pos] - 1e-9))
        return out.astype(np.uint8)
    if mode != "relative":
        raise InputError(f"rating must be one of {RATINGS}, not {mode!r}.")
    top = rating_top(scores, roles, sources, mode)
    out[pos] = np.clip(np.ceil(5.0 * scores[pos] / top - 1e-9), 1, 5)
    return out.astype(np.uint8)


def rating_top(scores: np.ndarray, roles: Sequence[str], sources: Sequence[int], mode: str = "clamp") -> float:
    """The influence score a full rating (5/5) stands for: 5 (clamp), or the largest score
    among words, the source and special tokens left out (relative)."""
    if mode == "clamp":
        return 5.0
    scores = np.asarray(scores, dtype=np.float64)
    words = np.array([r == "word" for r in roles], dtype=bool) & ~np.isin(np.arange(scores.size), list(sources))
    top = float(scores[words].max()) if words.any() else 0.0
    return top if top > 0 else 5.0


def rating_text(mode: str) -> str:
    """How a rating reads, for legends."""
    if mode == "clamp":
        return "rating: influence clamped at 5, as in DeRose et al. (2020)"
    return "rating: fifths of the largest influence among words (the source and special tokens left out)"


@renamed(positional=("alpha",), g="graph")
def influence(graph: nx.DiGraph, *, alpha: float = 0.5, rating: str = "clamp") -> pd.DataFrame:
    """Influence of every input position on the source of an attention graph.

    Parameters
    ----------
    graph : networkx.DiGraph
        From :func:`attention_graph`.
    alpha : float
        Each earlier layer's head counts are down-weighted by this factor (in (0, 1]).
    rating : {"clamp", "relative"}
        How ``rating`` is read from ``score`` (:func:`ratings`): ``"clamp"`` (default, the
        paper's and the FlowView's: the score clamped at 5) or ``"relative"`` (fifths of the
        largest score among words).

    Returns
    -------
    pandas.DataFrame
        Indexed by ``position`` (0..n-1) with columns ``token``, ``role``, ``score``
        (``I(w)`` of the module docstring: the layer-weighted mean head count), ``rating``
        (0-5, as the FlowView shows it) and ``heads`` (the unweighted total of head edges entering ``w`` in any
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
    >>> ak.influence(g)[["score", "rating"]].values.tolist()
    [[0.0, 0.0], [0.0, 0.0], [1.0, 1.0]]
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
    tokens = list(g.graph["tokens"])
    roles = list(g.graph.get("roles") or ["word"] * n)
    sources = sorted({int(pos) for _, pos in g.graph.get("source") or []})
    rated = ratings(score, roles, sources, rating).astype(np.int64)
    return pd.DataFrame(
        {"token": tokens, "role": roles, "score": score, "rating": rated,
         "heads": counts.sum(0)},
        index=pd.RangeIndex(n, name="position"),
    )


def _shape(g: nx.DiGraph) -> tuple[int, int]:
    try:
        return int(g.graph["n_layers"]), len(g.graph["tokens"])
    except KeyError:
        raise InputError("This graph lacks the attributes of attention_graph() "
                         "(n_layers, tokens); build it with attnkit.attention_graph.") from None

