"""ACDC: automatic circuit discovery by greedy pruning (Conmy et al. 2023).

Start from the whole model (every edge clean, metric ``M(x)``). Visit the downstream
inputs in reverse topological order (the logits first, then the last layer's MLP input,
its heads' value, key and query inputs, ... down to the first layer), and each input's
upstream components from the latest to the earliest; patch the edge to the corrupted run
on top of the edges already removed, and keep it removed if the metric gets worse by less
than ``threshold``:

    remove (u, d)  if  damage = ±(M(current) − M(current + (u, d) patched)) < threshold,

with the sign that makes a drop of a higher-is-better metric (a rise of a loss, or of
:func:`~attnkit.interventions.metrics.kl`) positive. Inputs of a component none of whose
outgoing edges survived are removed without a forward pass (nothing reads that component
any more, so its inputs cannot matter). One forward per remaining edge; the run time is
in ``graph["seconds"]``.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from .._progress import progress as progress_bar
from ..core import validate
from .circuit import component_kind, split_input
from .edges import clean_and_corrupted
from .metrics import Metric, resolve


def acdc(
    model: Any,
    clean: Any,
    corrupted: Any,
    *,
    metric: str | Metric | Any = "auto",
    threshold: float = 0.3,
    progress: bool = True,
) -> Any:
    """The circuit ACDC's greedy pruning keeps (see :mod:`attnkit.interventions.acdc`).

    Parameters
    ----------
    model : Model
        A pre-norm decoder (:mod:`attnkit.interventions.edges` lists the families).
    clean, corrupted : sequence
        Matched inputs, the same number of tokens pair by pair.
    metric : str, Metric or callable
        What to measure (Conmy et al. use :func:`~attnkit.interventions.metrics.kl`).
    threshold : float
        An edge is removed when patching it worsens the metric by less than this (in the
        metric's units; at least 0).
    progress : bool
        Show a progress bar over the edges.

    Returns
    -------
    networkx.MultiDiGraph
        The kept edges as :func:`~attnkit.interventions.circuit.circuit` draws them, each with
        ``score`` (the metric's change when it alone is then patched on top of the removed
        edges); ``graph``: ``metric``, ``method`` (``"acdc"``), ``n_layers``, ``n_heads``,
        ``n_kv_heads``, ``tokens``, ``clean``, ``corrupted``, ``kept`` (the metric of the
        circuit), ``threshold``, ``n_forwards``, ``seconds``.

    Raises
    ------
    InputError
        When the inputs do not align, the metric does not tell them apart, or the threshold
        removes every edge.

    Examples
    --------
    >>> import attnkit as ak
    >>> from attnkit.testing import tiny_model
    >>> G = ak.acdc(tiny_model("gpt2", layers=1, heads=1), ["The cat sat."], ["A cat sat."],
    ...             metric=ak.interventions.kl(), threshold=0.01, progress=False)
    >>> G.graph["method"], G.number_of_edges() > 0, G.graph["seconds"] > 0
    ('acdc', True, True)
    """
    import networkx as nx

    from ..errors import InputError

    validate.model(model, family="text")
    tau = validate.number(threshold, "threshold", low=0.0)
    m = resolve(metric, model)
    start = time.perf_counter()
    runs = clean_and_corrupted(model, clean, corrupted, m)
    g = runs.graph
    sign = 1.0 if m.higher_is_better else -1.0
    removed: set[tuple[int, int]] = set()
    alive = np.ones(len(g.upstream), dtype=bool)  # does the component still feed anything?
    up_index = {n: i for i, n in enumerate(g.upstream)}
    # the components whose output reads each input (a shared key/value head's: its query heads)
    readers = [[up_index[c] for c in g.readers(d)] for d in g.downstream]
    current, forwards = runs.m_clean, 0
    scores: dict[tuple[int, int], float] = {}
    order = [(u, d) for d in reversed(range(len(g.downstream)))
             for u in reversed(range(len(g.upstream))) if g.valid[u, d]]
    # which edges leave each upstream component, to know when it feeds nothing
    out_edges = {u: {(u, d) for d in range(len(g.downstream)) if g.valid[u, d]}
                 for u in range(len(g.upstream))}
    for u, d in progress_bar(order, show=progress, desc="acdc", unit="edge"):
        if readers[d] and not alive[readers[d]].any():
            removed.add((u, d))
        else:
            value = float(runs.measure([sorted(removed | {(u, d)})])[0])
            forwards += 1
            damage = sign * (current - value)
            scores[(u, d)] = value - current
            if damage < tau:
                removed.add((u, d))
                current = value
        if out_edges[u] <= removed:
            alive[u] = False
    everything = [e for e in order]
    kept = [e for e in everything if e not in removed]
    if not kept:
        raise InputError(f"threshold={tau} removes every edge (no edge worsens the metric by "
                         "as much); lower it.")
    G = nx.MultiDiGraph(metric=m.name, method="acdc", n_layers=g.n_layers, n_heads=g.n_heads,
                        n_kv_heads=g.n_kv_heads, tokens=None, clean=runs.m_clean,
                        corrupted=runs.m_corrupted, kept=current, threshold=tau, n_forwards=forwards,
                        seconds=time.perf_counter() - start)
    tok = getattr(model, "tokenizer", None)
    if tok is not None:
        ids = runs.clean.ids[0, :runs.clean.lengths[0]].tolist()
        G.graph["tokens"] = [str(t) for t in tok.convert_ids_to_tokens(ids)]
    for u, d in reversed(kept):
        up, (comp, via) = g.upstream[u], split_input(g.downstream[d])
        G.add_node(up, layer=g.up_layer[u], kind=component_kind(up))
        G.add_node(comp, layer=g.down_layer[d], kind=component_kind(comp))
        G.add_edge(up, comp, key=via, score=float(scores.get((u, d), 0.0)), input=via)
    return G
