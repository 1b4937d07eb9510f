"""Attention knockout: block chosen edges before the softmax (Geva et al. 2023).

An edge ``(layer, head, query, key)`` is knocked out by setting its pre-softmax score to
minus infinity: query ``query`` of that head no longer reads key ``key``, and its other
keys share the probability (``p′_j = p_j / (1 − Σ_blocked p)``). The mask enters attnkit's
attention function (:mod:`attnkit.runtime.capture`), so the layer's output is computed by
the same kernel (SDPA with a mask) and only the layers with knocked-out edges get a mask of
their own; no attention map of any layer is materialised.

Edges (``edges=``):

- a list of ``(layer, head, query, key)`` tuples (0-indexed; the same edges in every input);
- a boolean array ``[layer, head, query, key]`` (True = knock out), for inputs of exactly
  that length;
- a rule ``"key = query - K"`` (or ``+ K``, or ``"key = query"``): in the heads ``heads=``
  (default all) and at the query positions ``queries=`` (default all), the edge from each
  query ``q`` to key ``q - K``, where that key exists (and, in a causal model, is not later
  than ``q``). The induction edge of a sequence repeated after ``N`` tokens is
  ``f"key = query - {N - 1}"``.

The result compares the metric with the edges knocked out to the un-intervened run, per
input and on average; ``meta["relative_change"]`` is the change over the un-intervened
value (Geva et al.'s measure).

An encoder–decoder's edges are in one stack (``stack="encoder"``, ``"decoder"`` or
``"cross"``, :mod:`attnkit.interventions.hooks`): layers and heads are the stack's, queries
and keys the source's positions (``"encoder"``), the target's (``"decoder"``, causal), or
target positions reading source positions (``"cross"``; a boolean mask is then
``[layer, head, target, source]``).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd

from ..core import validate
from ..core.results import Result
from ..errors import InputError
from . import hooks
from .metrics import Metric, resolve

_RULE = re.compile(r"^\s*key\s*=\s*query\s*(?:([+-])\s*(\d+))?\s*$")


class Blocker:
    """A capture recorder that knocks out edges: per layer, a boolean ``[B or 1, H, T, T]``
    (True = blocked) handed to attnkit's attention function through ``blocks``.

    Parameters
    ----------
    blocked : dict
        Layer (0-indexed) -> boolean tensor.
    model : Seq2SeqModel, optional
        An encoder–decoder, which tells its calls apart (``kind_of``).
    stack : str, optional
        The encoder–decoder's stack whose layers ``blocked`` numbers.

    Examples
    --------
    >>> import torch
    >>> from attnkit.interventions.knockout import Blocker
    >>> b = Blocker({1: torch.ones(1, 2, 3, 3, dtype=torch.bool)})
    >>> sorted(b.blocked)
    [1]
    """

    def __init__(self, blocked: dict[int, Any], model: Any = None, stack: str | None = None):
        self.blocked = blocked
        self.model, self.stack = model, stack
        self.seen = 0

    def layer(self, call: Any) -> int | None:
        """``call``'s layer in the blocked stack (every call's, for a one-stack model), or
        None for a call of another stack.

        Examples
        --------
        >>> from types import SimpleNamespace
        >>> from attnkit.interventions.knockout import Blocker
        >>> Blocker({}).layer(SimpleNamespace(layer=3))
        3
        """
        if self.stack is None:
            return int(call.layer)
        return self.seen if self.model.kind_of(call) == self.stack else None

    def __call__(self, call: Any) -> None:
        """Count the blocked stack's calls (a recorder must be callable)."""
        if self.stack is not None and self.model.kind_of(call) == self.stack:
            self.seen += 1

    def blocks(self, call: Any) -> Any:
        """The edges of ``call``'s layer to knock out, or None.

        Parameters
        ----------
        call : AttentionCall
            One attention layer's call.

        Returns
        -------
        torch.Tensor or None

        Examples
        --------
        >>> import torch
        >>> from types import SimpleNamespace
        >>> from attnkit.interventions.knockout import Blocker
        >>> b = Blocker({1: torch.ones(1, 2, 3, 3, dtype=torch.bool)})
        >>> b.blocks(SimpleNamespace(layer=0)) is None
        True
        """
        layer = self.layer(call)
        t = None if layer is None else self.blocked.get(layer)
        if t is None:
            return None
        k = call.key.shape[2]
        return t[..., : call.query.shape[2], :k]


def parse_rule(rule: str) -> int:
    """The offset ``K`` of a rule ``"key = query - K"`` (negative for ``+``).

    Parameters
    ----------
    rule : str
        ``"key = query - K"``, ``"key = query + K"`` or ``"key = query"``.

    Returns
    -------
    int
        ``query - key``.

    Raises
    ------
    InputError
        For any other text.

    Examples
    --------
    >>> from attnkit.interventions.knockout import parse_rule
    >>> parse_rule("key = query - 7"), parse_rule("key=query")
    (7, 0)
    """
    m = _RULE.match(rule)
    if m is None:
        raise InputError(f"edges: a rule reads 'key = query - K' (or '+ K', or 'key = query') with a "
                         f"whole number K; got {rule!r}.")
    sign, k = m.groups()
    if k is None:
        return 0
    return int(k) if sign == "-" else -int(k)


def edge_masks(model: Any, b: hooks.Batch, edges: Any, heads: Any = None,
               queries: Any = None, stack: str | None = None) -> tuple[dict[int, Any], int]:
    """Per layer, the edges to knock out as booleans ``[B or 1, H, T_query, T_key]``, and how
    many edges that is over all inputs (edges a causal mask already hides not counted).

    Parameters
    ----------
    model : Model
        The model.
    b : Batch
        The inputs.
    edges : list of tuples, boolean array or str
        See :mod:`attnkit.interventions.knockout`.
    heads : pairs, optional
        Heads of a rule (default all).
    queries : slice, ints or boolean mask, optional
        Query positions of a rule (default all).
    stack : str, optional
        An encoder–decoder's stack.

    Returns
    -------
    tuple
        ``(masks, n_edges)``.

    Raises
    ------
    InputError
        For edges out of range, an array of the wrong shape, or a malformed rule.

    Examples
    --------
    >>> from attnkit.interventions.hooks import batch
    >>> from attnkit.interventions.knockout import edge_masks
    >>> from attnkit.testing import tiny_model
    >>> model = tiny_model("gpt2")
    >>> masks, n = edge_masks(model, batch(model, ["The cat sat."]), [(1, 0, 3, 1)])
    >>> sorted(masks), n, bool(masks[1][0, 0, 3, 1])
    ([1], 1, True)
    """
    import torch

    site = hooks.sites(model, stack)
    stack = site.stack
    L, H, B = site.n_layers, site.n_heads, b.size
    key_stack = "encoder" if stack == "cross" else stack
    q_len = np.asarray(b.lengths_of(stack))
    k_len = np.asarray(b.lengths_of(key_stack))
    Tq, Tk = b.width_of(stack), b.width_of(key_stack)
    dev = b.device
    causal = stack == "decoder" or (stack is None and bool(model.causal))
    masks: dict[int, Any] = {}

    def layer_mask(layer: int, per_item: bool) -> Any:
        if layer not in masks:
            masks[layer] = torch.zeros(B if per_item else 1, H, Tq, Tk, dtype=torch.bool, device=dev)
        return masks[layer]

    if isinstance(edges, str):
        k = parse_rule(edges)
        pairs = (validate.head_pairs(heads, L, H) if heads is not None
                 else [(l, h) for l in range(L) for h in range(H)])
        for l, _h in pairs:
            layer_mask(l, True)
        for i, (n, nk) in enumerate(zip(q_len, k_len)):
            qs = validate.positions(queries if queries is not None else slice(None), int(n), "queries")
            ks = qs - k
            ok = (ks >= 0) & (ks < nk) & ((ks <= qs) if causal else True)
            tq, tk = torch.as_tensor(qs[ok], device=dev), torch.as_tensor(ks[ok], device=dev)
            for l, h in pairs:
                masks[l][i, h, tq, tk] = True
        n_edges = sum(int(m.sum()) for m in masks.values())
        if n_edges == 0:
            raise InputError(f"edges: the rule {edges!r} selects no edge of these inputs "
                             "(check queries= and the offset).")
        return masks, n_edges
    if isinstance(edges, (np.ndarray, torch.Tensor)) and getattr(edges, "dtype", None) in (
            np.bool_, torch.bool, bool):
        arr = torch.as_tensor(np.asarray(edges.cpu() if isinstance(edges, torch.Tensor) else edges))
        square = stack != "cross"
        shape = "[layer, head, query, key] = " + (f"[{L}, {H}, n, n]" if square
                                                  else f"[{L}, {H}, target, source]")
        if arr.dim() != 4 or tuple(arr.shape[:2]) != (L, H) or (
                square and arr.shape[2] != arr.shape[3]):
            raise InputError(f"edges: a boolean mask is {shape}; got shape {tuple(arr.shape)}.")
        n, nk = int(arr.shape[2]), int(arr.shape[3])
        if any(int(x) != n for x in q_len) or any(int(x) != nk for x in k_len):
            side = "" if square else f" (targets of {n}, sources of {nk})"
            have = sorted(set(q_len.tolist())) if square else (
                f"targets of {sorted(set(q_len.tolist()))} and sources of {sorted(set(k_len.tolist()))}")
            raise InputError(f"edges: the mask is for inputs of {n} tokens{side}; these have "
                             f"{have}. Give inputs of one length, or "
                             "edges as (layer, head, query, key) tuples.")
        if causal:
            arr = arr & torch.tril(torch.ones(n, n, dtype=torch.bool))
        for layer in range(L):
            if bool(arr[layer].any()):
                layer_mask(layer, False)[0, :, :n, :nk] = arr[layer].to(dev)
        n_edges = int(arr.sum()) * B
        if n_edges == 0:
            raise InputError("edges: the mask knocks out no edge.")
        return masks, n_edges
    try:
        items = [tuple(e) for e in edges]
    except TypeError:
        raise InputError("edges must be (layer, head, query, key) tuples, a boolean mask "
                         f"[layer, head, query, key] or a rule 'key = query - K'; got {edges!r}.") from None
    if not items:
        raise InputError("edges is empty; give at least one (layer, head, query, key) edge.")
    n_min, nk_min = int(q_len.min()), int(k_len.min())
    count = 0
    for e in items:
        if len(e) != 4:
            raise InputError(f"edges: each edge is (layer, head, query, key); got {e!r}.")
        layer, head = validate.head_index(e[0], e[1], L, H)
        qi = validate.index(e[2], n_min, "edges: query")
        ki = validate.index(e[3], nk_min, "edges: key")
        if causal and ki > qi:
            raise InputError(f"edges: in a causal model query {qi} never reads the later key {ki}.")
        m = layer_mask(layer, False)
        if not bool(m[0, head, qi, ki]):
            m[0, head, qi, ki] = True
            count += 1
    return masks, count * B


def knockout(
    model: Any,
    inputs: Any,
    edges: Any,
    *,
    stack: str | None = None,
    heads: Any = None,
    queries: Any = None,
    metric: str | Metric | Any = "auto",
    progress: bool = True,
) -> Result:
    """The change of a metric when attention edges are blocked before the softmax.

    See :mod:`attnkit.interventions.knockout` for the three ways to give edges.

    Parameters
    ----------
    model : Model
        A text model loaded with :func:`attnkit.load` (its attention must run through
        attnkit's attention function).
    inputs : sequence
        Texts or token ids (or one of them).
    edges : list of (layer, head, query, key), boolean array or str
        What to knock out.
    stack : str, optional
        An encoder–decoder's attention the edges are in: ``"encoder"``, ``"decoder"`` or
        ``"cross"`` (query a target position, key a source position); None for other models.
    heads : (layer, head) pairs, optional
        Where a rule applies (default every head).
    queries : slice, ints or boolean mask, optional
        The query positions a rule applies to (default all).
    metric : str, Metric or callable
        What to measure (:mod:`attnkit.interventions.metrics`).
    progress : bool
        Kept for the contract: one forward pass with and one without the knockout.

    Returns
    -------
    Result
        Indexed by ``item``, columns ``clean``, ``knocked_out`` and ``change``; ``meta``:
        ``metric``, ``clean`` and ``knocked_out`` (means), ``change``,
        ``relative_change`` (``change / |clean|``), ``n_edges``, ``layers``.

    Raises
    ------
    InputError
        For edges out of range or a row left without any key.
    UnsupportedModelError
        For models whose attention does not run through attnkit's function.

    Examples
    --------
    >>> import attnkit as ak
    >>> from attnkit.testing import tiny_model
    >>> r = ak.knockout(tiny_model("llama"), ["The cat sat on the mat."], "key = query - 1",
    ...                 heads=[(1, 0)], progress=False)
    >>> r.meta["n_edges"], list(r.table.columns)
    (11, ['clean', 'knocked_out', 'change'])
    >>> from attnkit.testing import tiny_seq2seq
    >>> r = ak.knockout(tiny_seq2seq("t5"), [("The cat sat.", "A cat.")], [(1, 0, 2, 1)],
    ...                 stack="cross", progress=False)
    >>> r.meta["stack"], r.meta["n_edges"]
    ('cross', 1)
    """
    del progress
    site = hooks.sites(model, stack)
    stack = site.stack
    m = resolve(metric, model)
    b = hooks.batch(model, inputs)
    masks, n_edges = edge_masks(model, b, edges, heads, queries, stack)
    clean = hooks.forward(model, b, recorders=[Blocker({}, model, stack)], stack=stack)
    ctx = hooks.context(model, b, clean)
    out = hooks.forward(model, b, recorders=[Blocker(masks, model, stack)], stack=stack)
    before = m(clean, ctx).detach().double().cpu().numpy()
    after = m(out, ctx).detach().double().cpu().numpy()
    table = pd.DataFrame({"clean": before, "knocked_out": after, "change": after - before},
                         index=pd.RangeIndex(b.size, name="item"))
    c, k = float(before.mean()), float(after.mean())
    meta = {"metric": m.name, "clean": c, "knocked_out": k, "change": k - c,
            "relative_change": (k - c) / abs(c) if c != 0 else float("nan"),
            "n_edges": n_edges, "layers": sorted(masks), "n_items": b.size,
            "higher_is_better": m.higher_is_better}
    if stack is not None:
        meta["stack"] = stack
    return Result(table, meta)
