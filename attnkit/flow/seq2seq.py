"""The attention graph and rollout of an encoder–decoder, through the decoder into the encoder.

An output of the decoder is traced down its layers as in :func:`attnkit.flow.attention_graph`,
but each decoder layer reads two things: the layer below it (self-attention over the target)
and the encoder's output (cross-attention over the source). With the residual connection of
each sublayer mixed in as in rollout (Abnar & Zuidema 2020), ``(1 - residual) A + residual I``,
a decoder layer's output at target position ``q`` takes

- ``residual * Â_self[q, k]`` from target position ``k`` of the layer below
  (``Â_self`` the heads' mean of the self-attention mixed with the identity), and
- ``(1 - residual) * C[q, s]`` from source position ``s`` of the encoder's last layer
  (``C`` the heads' mean of the cross-attention),

which sum to 1 over both. From the encoder's last layer the trace goes down the encoder's
layers as rollout does. Nodes are ``("decoder", level, position)`` (level 0: the decoder's
input tokens; level ``l``: the output of decoder layer ``l``) and
``("encoder", level, position)`` (level 0: the source tokens).
"""

from __future__ import annotations

from typing import Any, Iterable

import networkx as nx
import numpy as np

from ..core.blocks import head_mean
from ..core.cross import Seq2SeqAttention
from ..core import validate
from ..errors import InputError
from .rollout import layer_matrix, rollout

Node3 = tuple[str, int, int]


def _check(attentions: Any, residual: float) -> Seq2SeqAttention:
    if not isinstance(attentions, Seq2SeqAttention):
        raise InputError(f"This takes the attention of an encoder-decoder on one pair "
                         f"(Seq2SeqModel.attend(source, target)); got {type(attentions).__name__}.")
    if attentions.encoder is None or attentions.decoder is None:
        raise InputError("The graph through the decoder into the encoder needs both stacks' "
                         "self-attention; extract pairs with keep=('cross', 'encoder', "
                         "'decoder') (or use model.attend(source, target)).")
    if not 0.0 <= residual <= 1.0:
        raise InputError(f"residual must lie in [0, 1]; got {residual}.")
    return attentions


def decoder_layer(attentions: Seq2SeqAttention, layer: int, *,
                  residual: float = 0.5) -> tuple[np.ndarray, np.ndarray]:
    """What the output of one decoder layer takes from the layer below and from the encoder.

    Parameters
    ----------
    attentions : Seq2SeqAttention
        One pair (:meth:`Seq2SeqModel.attend <attnkit.runtime.seq2seq.Seq2SeqModel.attend>`).
    layer : int
        0-indexed decoder layer.
    residual : float
        Weight of the identity in each sublayer (module docstring).

    Returns
    -------
    tuple of ndarray
        Float64 ``[target, target]`` (to the layer below) and ``[target, source]`` (to the
        encoder's last layer); each row of the two together sums to 1.

    Examples
    --------
    >>> from attnkit.flow import decoder_layer
    >>> from attnkit.testing import tiny_seq2seq
    >>> s2s = tiny_seq2seq("bart").attend("The cat sat.", "A cat.")
    >>> below, encoder = decoder_layer(s2s, 1)
    >>> bool(abs((below.sum(1) + encoder.sum(1)) - 1).max() < 1e-6)
    True
    """
    s2s = _check(attentions, residual)
    layer = validate.index(layer, s2s.decoder.n_layers, "layer")
    below = residual * layer_matrix(s2s.decoder, layer, residual=residual)
    cross = head_mean(s2s.cross, layer, shares=True)
    cross /= np.where(cross.sum(1, keepdims=True) > 0, cross.sum(1, keepdims=True), 1.0)
    return below, (1.0 - residual) * cross


def seq2seq_rollout(attentions: Seq2SeqAttention, *, residual: float = 0.5) -> np.ndarray:
    """Rollout through the decoder into the encoder: how much of each output of the decoder's
    last layer comes from each source token.

    The decoder layers' matrices (:func:`decoder_layer`) are multiplied from the top down;
    what reaches the encoder's last layer is carried to the source tokens by the encoder's
    rollout (:func:`attnkit.flow.rollout`).

    Parameters
    ----------
    attentions : Seq2SeqAttention
        One pair.
    residual : float
        Weight of the identity in each sublayer.

    Returns
    -------
    ndarray
        Float64 ``[target, source]``: row ``q`` is the share of decoder position ``q``'s
        output that comes from each source token; the rest of the row (``1 - row sum``)
        comes from the target's own tokens.

    Raises
    ------
    InputError
        For attention that is not of an encoder–decoder, or ``residual`` outside [0, 1].

    Examples
    --------
    >>> import attnkit as ak
    >>> from attnkit.testing import tiny_seq2seq
    >>> s2s = tiny_seq2seq("t5").attend("The cat sat.", "A cat.")
    >>> r = ak.flow.seq2seq_rollout(s2s)
    >>> r.shape == (len(s2s.decoder), len(s2s.encoder)), bool((r.sum(1) <= 1 + 1e-9).all())
    (True, True)
    """
    s2s = _check(attentions, residual)
    t = len(s2s.decoder)
    carried = np.eye(t)  # the top outputs' shares at the current decoder level
    to_encoder = np.zeros((t, s2s.cross.n_columns))
    for layer in range(s2s.cross.n_layers - 1, -1, -1):
        below, encoder = decoder_layer(s2s, layer, residual=residual)
        to_encoder += carried @ encoder
        carried = carried @ below
    return to_encoder @ rollout(s2s.encoder, residual=residual)


def _sources(s2s: Seq2SeqAttention, sources: Any, top: int) -> list[Node3]:
    t = len(s2s.decoder)
    if sources is None:
        return [("decoder", top, t - 1)]
    if isinstance(sources, (str, bytes, bool, np.bool_, float)) or not (
            isinstance(sources, (int, np.integer, tuple)) or hasattr(sources, "__iter__")):
        raise InputError(f"sources are target positions or ('decoder' | 'encoder', level, "
                         f"position) node ids; got {sources!r}.")
    items = [sources] if isinstance(sources, (int, np.integer, tuple)) else list(sources)
    if not items:
        raise InputError("sources is empty; give a target position or a list of them.")
    nodes: list[Node3] = []
    for item in items:
        if isinstance(item, (int, np.integer)) and not isinstance(item, (bool, np.bool_)):
            node: Node3 = ("decoder", top, validate.index(item, t, "sources"))
        elif isinstance(item, tuple) and len(item) == 3 and item[0] in ("decoder", "encoder"):
            levels = top if item[0] == "decoder" else s2s.encoder.n_layers
            n = t if item[0] == "decoder" else len(s2s.encoder)
            node = (str(item[0]), validate.index(item[1], levels + 1, "sources: level"),
                    validate.index(item[2], n, "sources: position"))
        else:
            raise InputError(f"sources are target positions or ('decoder' | 'encoder', level, "
                             f"position) node ids; got {item!r}.")
        if node not in nodes:
            nodes.append(node)
    return nodes


def seq2seq_graph(attentions: Seq2SeqAttention, *, threshold: float = 0.3, residual: float = 0.5,
                  sources: Any = None) -> nx.DiGraph:
    """The attention graph of one pair traced from decoder outputs down the decoder, across
    the cross-attention into the encoder's last layer, and down the encoder to the source.

    Edges carry the layer matrices of the module docstring (the heads' mean, the residual
    mixed in): an edge is drawn where an entry is strictly greater than ``threshold``, and
    only nodes reached from ``sources`` are kept (as :func:`attnkit.flow.attention_graph`).

    Parameters
    ----------
    attentions : Seq2SeqAttention
        One pair.
    threshold : float
        An entry must be strictly greater than this to make an edge.
    residual : float
        Weight of the identity in each sublayer.
    sources : int, list of int or node ids, optional
        Target positions at the decoder's last layer (``None``: the last target position),
        or ``("decoder" | "encoder", level, position)`` node ids.

    Returns
    -------
    networkx.DiGraph
        Nodes ``(side, level, position)`` (attributes ``side``, ``level``, ``position``,
        ``token``, ``role``); edges point down, from the reading node to the node read, with
        ``kind`` (``"decoder"``, ``"cross"`` or ``"encoder"``) and ``weight``. Graph
        attributes: ``tokens`` and ``roles`` (target), ``source_tokens`` and
        ``source_roles``, ``n_layers`` (decoder), ``n_encoder_layers``, ``source`` (the start
        nodes), ``threshold``, ``residual``.

    Raises
    ------
    InputError
        For attention that is not of an encoder–decoder, a threshold outside [0, 1),
        ``residual`` outside [0, 1], or sources outside the graph.

    Examples
    --------
    >>> import attnkit as ak
    >>> from attnkit.testing import tiny_seq2seq
    >>> s2s = tiny_seq2seq("bart").attend("The cat sat.", "A cat.")
    >>> g = ak.flow.seq2seq_graph(s2s, threshold=0.2, sources=[2])
    >>> any(side == "encoder" and level == 0 for side, level, _ in g)  # reaches the source
    True
    """
    s2s = _check(attentions, residual)
    if not 0.0 <= float(threshold) < 1.0:
        raise InputError(f"threshold must lie in [0, 1); got {threshold}.")
    top, enc_top = s2s.cross.n_layers, s2s.encoder.n_layers
    starts = _sources(s2s, sources, top)
    g = nx.DiGraph(tokens=list(s2s.decoder.tokens), roles=[str(r) for r in s2s.decoder.roles],
                   source_tokens=list(s2s.encoder.tokens),
                   source_roles=[str(r) for r in s2s.encoder.roles], n_layers=top,
                   n_encoder_layers=enc_top, source=starts, threshold=float(threshold),
                   residual=float(residual))
    frontier: dict[tuple[str, int], set[int]] = {}
    for node in starts:
        frontier.setdefault(node[:2], set()).add(node[2])
        g.add_node(node, **_attrs(s2s, node))
    for level in range(top, 0, -1):
        rows = sorted(frontier.get(("decoder", level), ()))
        if not rows:
            continue
        below, encoder = decoder_layer(s2s, level - 1, residual=residual)
        _link(g, s2s, frontier, ("decoder", level), rows, below, ("decoder", level - 1),
              "decoder", threshold)
        _link(g, s2s, frontier, ("decoder", level), rows, encoder, ("encoder", enc_top),
              "cross", threshold)
    for level in range(enc_top, 0, -1):
        rows = sorted(frontier.get(("encoder", level), ()))
        if rows:
            _link(g, s2s, frontier, ("encoder", level), rows,
                  layer_matrix(s2s.encoder, level - 1, residual=residual), ("encoder", level - 1),
                  "encoder", threshold)
    return g


def _attrs(s2s: Seq2SeqAttention, node: Node3) -> dict[str, Any]:
    side, level, pos = node
    att = s2s.decoder if side == "decoder" else s2s.encoder
    return {"side": side, "level": level, "position": pos, "token": att.tokens[pos],
            "role": str(att.roles[pos])}


def _link(g: nx.DiGraph, s2s: Seq2SeqAttention, frontier: dict, at: tuple[str, int],
          rows: Iterable[int], matrix: np.ndarray, to: tuple[str, int], kind: str,
          threshold: float) -> None:
    reached = frontier.setdefault(to, set())
    for q in rows:
        for k in np.flatnonzero(matrix[q] > threshold).tolist():
            node = (to[0], to[1], k)
            if k not in reached:
                reached.add(k)
                g.add_node(node, **_attrs(s2s, node))
            g.add_edge((at[0], at[1], q), node, kind=kind, weight=float(matrix[q, k]))


__all__ = ["decoder_layer", "seq2seq_graph", "seq2seq_rollout"]
