"""Edge attribution: a score for every edge between components (EAP, EAP-IG, exact edge patching).

The score of an edge ``(u, d)`` is the change of the metric when that edge alone carries
the corrupted value of ``u`` into ``d``, everything else running on the clean input:

``"exact"``
    exact edge patching (:mod:`attnkit.interventions.edges`), one copy of the clean inputs
    per edge, many copies per forward pass;
``"eap"``
    edge attribution patching (Syed et al. 2023), its first-order estimate
    ``(u(x′) − u(x)) · ∂M/∂x_d`` at the clean run, for every edge from two forwards and one
    backward (the clean forward keeps its autograd graph for that backward);
``"eap-ig"``
    EAP with integrated gradients (Hanna et al. 2024): the gradient averaged over ``steps``
    runs whose token embeddings are ``e(x′) + k/steps (e(x) − e(x′))``, ``k = 1 … steps``.

``∂M/∂x_d`` is the gradient with respect to the stream the input ``d`` reads (before its
norm), so the EAP score is exactly the derivative of exact edge patching along the edge
(tested against a float64 central difference). Every head reads the one stream of the
clean run: the projections are linear in what they read, so head ``h``'s input gradient is
``W[h]ᵀ g[h]`` from the gradient ``g`` at its query, key or value projection's output, one
batched product per projection and layer, carried back through the norm before the read in
a pre-norm decoder at the run's row statistics
(:meth:`~attnkit.interventions.edges.Pass.gradients`). In a post-norm encoder ``u(x′) − u(x)`` is
the difference of the two runs' terms at ``d``'s read point, each carried through its own
run's norms (:meth:`~attnkit.interventions.edges.Runs.deltas`); the sums are computed
without carrying anything, the norms' maps factored into one scaling per component and one
per downstream input (:meth:`~attnkit.interventions.edges.Runs.first_order`). Scores are signed, in the metric's units and
averaged over the inputs; a circuit (:func:`~attnkit.interventions.circuit.circuit`) keeps
the edges of largest ``|score|``.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pandas as pd

from ..core import validate
from ..core.results import Result
from . import hooks
from .edges import Runs, clean_and_corrupted, edge_graph, pair_batches, run
from .metrics import Metric, check_gap, resolve

#: Ways :func:`edge_attribution` scores the edges.
METHODS = ("eap", "eap-ig", "exact")


def gradient_scores(runs: Runs, *, steps: int = 0, batch_size: int = 32) -> np.ndarray:
    """EAP (``steps=0``) or EAP-IG scores ``[upstream, downstream]`` (float64; invalid edges 0).

    Parameters
    ----------
    runs : Runs
        :func:`~attnkit.interventions.edges.clean_and_corrupted`.
    steps : int
        Interpolation steps of EAP-IG; 0 for plain EAP at the clean run.
    batch_size : int
        Rows (steps × inputs) per forward.

    Returns
    -------
    numpy.ndarray

    Examples
    --------
    >>> from attnkit.interventions.eap import gradient_scores
    >>> from attnkit.interventions.edges import clean_and_corrupted
    >>> from attnkit.interventions.metrics import loss
    >>> from attnkit.testing import tiny_model
    >>> runs = clean_and_corrupted(tiny_model("gpt2"), ["The cat sat."], ["A cat sat."], loss())
    >>> gradient_scores(runs).shape
    (8, 15)
    """
    import torch

    model, g, bc = runs.model, runs.graph, runs.clean
    grads: dict[int, Any] = {}
    leaves_of: dict[tuple[int, ...], Any] = {}  # summed over chunks: [K, B, T, d] per leaf
    if steps:
        emb = model.base.get_input_embeddings()
        with torch.no_grad():
            e_clean = emb(bc.ids)
            e_corr = emb(runs.corrupted.ids)
        alphas = [(k + 1) / steps for k in range(steps)]
    else:
        alphas = [None]  # type: ignore[list-item]
    per = max(1, batch_size // bc.size)
    for s, e in hooks.chunks(len(alphas), per):
        R = e - s
        embed = None
        if steps:
            a = torch.tensor(alphas[s:e], dtype=e_clean.dtype, device=e_clean.device)
            embed = (e_corr[None] + a[:, None, None, None] * (e_clean - e_corr)[None]).reshape(
                R * bc.size, *e_clean.shape[1:])
        if steps or runs.clean_pass is None:
            out, p = run(model, bc, g, copies=R, grad=True, embed=embed)
        else:  # plain EAP at the clean run: the kept clean pass (one copy) is that run
            out, p = runs.clean_pass
        ctx = hooks.context(model, bc, runs.reference, R)
        # the metric is a mean over inputs (and steps): its gradient is too
        value = runs.metric(out, ctx).sum() / (bc.size * len(alphas))
        for downs, gr in p.gradients(value):
            gr = gr.reshape(len(downs), R, bc.size, *gr.shape[2:])
            gr = gr.sum(1) if R > 1 else gr[:, 0]
            key = tuple(downs)
            leaves_of[key] = leaves_of[key] + gr if key in leaves_of else gr
    for key, gr in leaves_of.items():
        for i, d in enumerate(key):
            grads[d] = grads[d] + gr[i] if d in grads else gr[i]
    # a group read from one leaf uses that leaf's gradient as it is, in the leaf's order
    whole = len(grads) == sum(len(key) for key in leaves_of)
    as_read = {frozenset(key): key for key in leaves_of}
    def read(downs: list[int]) -> tuple[list[int], Any] | None:
        """The gradients of inputs that read the same stream (a layer's head inputs, its MLP
        input, the logits), scored together: ``[K, B*T*d]``."""
        downs = [d for d in downs if d in grads]
        if not downs:
            return None
        if whole and frozenset(downs) in as_read:
            downs = list(as_read[frozenset(downs)])
            return downs, leaves_of[tuple(downs)].reshape(len(downs), -1)
        # [K, B*T*d] stacked row-wise (a column-wise stack is a strided copy)
        return downs, torch.stack([grads[d].reshape(-1) for d in downs])

    return runs.first_order(read)


def exact_scores(runs: Runs, *, batch_size: int = 32, progress: bool = True) -> np.ndarray:
    """Exact scores ``[upstream, downstream]``: ``M(edge patched) − M(clean)`` per edge.

    Parameters
    ----------
    runs : Runs
        :func:`~attnkit.interventions.edges.clean_and_corrupted`.
    batch_size : int
        Rows (edges × inputs) per forward.
    progress : bool
        Show a progress bar over forward passes.

    Returns
    -------
    numpy.ndarray

    Examples
    --------
    >>> from attnkit.interventions.eap import exact_scores
    >>> from attnkit.interventions.edges import clean_and_corrupted
    >>> from attnkit.interventions.metrics import loss
    >>> from attnkit.testing import tiny_model
    >>> runs = clean_and_corrupted(tiny_model("gpt2"), ["The cat sat."], ["A cat sat."], loss())
    >>> s = exact_scores(runs, progress=False)
    >>> s.shape, float(s[~runs.graph.valid].max())
    ((8, 15), 0.0)
    """
    from .._progress import progress as progress_bar

    g = runs.graph
    pairs = [(u, d) for d in range(g.valid.shape[1]) for u in range(g.valid.shape[0]) if g.valid[u, d]]
    per = max(1, batch_size // runs.clean.size)
    scores = np.zeros(g.valid.shape)
    spans = list(hooks.chunks(len(pairs), per))
    for s, e in progress_bar(spans, show=progress, desc="edges", unit="forward"):
        values = runs.measure([[p] for p in pairs[s:e]], batch_size=batch_size)
        for (u, d), v in zip(pairs[s:e], values):
            scores[u, d] = v - runs.m_clean
    return scores


def scores_table(runs: Runs, scores: np.ndarray, meta: dict[str, Any]) -> Result:
    """The result table of edge scores (see :func:`edge_attribution`).

    Parameters
    ----------
    runs : Runs
        The runs the scores come from.
    scores : numpy.ndarray
        ``[upstream, downstream]``.
    meta : dict
        Extra meta (``method``, ``seconds``, ...).

    Returns
    -------
    Result

    Examples
    --------
    >>> import numpy as np
    >>> from attnkit.interventions.eap import scores_table
    >>> from attnkit.interventions.edges import clean_and_corrupted
    >>> from attnkit.interventions.metrics import loss
    >>> from attnkit.testing import tiny_model
    >>> runs = clean_and_corrupted(tiny_model("gpt2"), ["The cat sat."], ["A cat sat."], loss())
    >>> scores_table(runs, np.zeros((8, 15)), {"method": "none"}).table.shape
    (61, 3)
    """
    g = runs.graph
    rows = [(g.upstream[u], g.downstream[d], float(scores[u, d]), g.up_layer[u], g.down_layer[d])
            for d in range(len(g.downstream)) for u in range(len(g.upstream)) if g.valid[u, d]]
    table = pd.DataFrame(rows, columns=["upstream", "downstream", "score", "layer_up", "layer_down"])
    table = table.set_index(["upstream", "downstream"])
    tokens = None
    tok = getattr(runs.model, "tokenizer", None)
    if tok is not None:
        ids = runs.clean.ids[0, :runs.clean.lengths[0]].tolist()
        tokens = [str(t) for t in tok.convert_ids_to_tokens(ids)]
    full = {"metric": runs.metric.name, "clean": runs.m_clean, "corrupted": runs.m_corrupted,
            "n_items": runs.clean.size, "n_layers": g.n_layers, "n_heads": g.n_heads,
            "n_kv_heads": g.n_kv_heads,
            "tokens": tokens, "higher_is_better": runs.metric.higher_is_better, **meta}
    return Result(table, full)


def edge_attribution(
    model: Any,
    clean: Any,
    corrupted: Any,
    *,
    metric: str | Metric | Any = "auto",
    method: str = "eap",
    steps: int = 5,
    batch_size: int = 32,
    progress: bool = True,
) -> Result:
    """A score for every edge from an upstream component to a downstream input: the change
    of the metric when that edge alone carries the corrupted run's value (see
    :mod:`attnkit.interventions.eap`).

    Parameters
    ----------
    model : Model
        A pre-norm decoder or a post-norm encoder (:mod:`attnkit.interventions.edges` lists
        the families).
    clean, corrupted : sequence
        Matched inputs (texts or token ids), the same number of tokens pair by pair.
    metric : str, Metric or callable
        What to measure (:mod:`attnkit.interventions.metrics`).
    method : str
        ``"eap"`` (two forwards, one backward), ``"eap-ig"`` (integrated gradients over
        ``steps`` interpolations of the token embeddings) or ``"exact"`` (every edge patched
        on its own).
    steps : int
        Interpolation steps of ``"eap-ig"`` (Hanna et al. use 5 to 100).
    batch_size : int
        Rows per forward pass (steps × inputs, or edges × inputs); the pairs run at most
        ``batch_size`` at a time, so memory grows with ``batch_size``, not with the pairs.
    progress : bool
        Show a progress bar over the exact method's forward passes.

    Returns
    -------
    Result
        Indexed by ``(upstream, downstream)`` (component names of
        :func:`~attnkit.residual_stream`; downstream inputs ``"2-1.q"``, ``"2-1.k"``,
        ``"2-1.v"``, ``"1-mlp.in"``, ``"logits"``; under grouped-query attention a shared
        key/value head's ``"2-kv1.k"`` and ``"2-kv1.v"``), columns ``score`` (signed change of the
        metric, mean over inputs), ``layer_up`` and ``layer_down`` (0-indexed; embeddings −1,
        logits ``n_layers``). ``meta``: ``metric``, ``method``, ``clean``, ``corrupted``
        (the metric on each run), ``n_items``, ``n_layers``, ``n_heads``, ``n_kv_heads``, ``tokens`` (of the
        first clean input), ``steps``, ``seconds``.

    Raises
    ------
    InputError
        When clean and corrupted do not align, the metric does not tell them apart or is not
        one number per input, or for an unknown method.
    UnsupportedModelError
        For families whose edges cannot be patched exactly.

    Examples
    --------
    >>> import attnkit as ak
    >>> from attnkit.testing import tiny_model
    >>> r = ak.edge_attribution(tiny_model("gpt2"), ["The cat sat."], ["A cat sat."],
    ...                         metric=ak.interventions.loss())
    >>> r.table.index.names, r.table.shape, r.meta["method"]
    (FrozenList(['upstream', 'downstream']), (61, 3), 'eap')
    >>> r.table.loc[("1-2", "2-1.k"), ["layer_up", "layer_down"]].tolist()
    [0, 1]
    """
    validate.model(model, family="text")
    how = validate.choice(method, "method", METHODS)
    n_steps = validate.integer(steps, "steps", minimum=1)
    size = validate.integer(batch_size, "batch_size", minimum=1)
    m = resolve(metric, model)
    start = time.perf_counter()
    bc, bx = pair_batches(model, clean, corrupted)
    graph = edge_graph(model)
    scores = np.zeros(graph.valid.shape)
    m_clean = m_corrupted = 0.0
    # at most batch_size pairs at a time (each chunk's runs hold every component of every
    # input): memory grows with batch_size, not with the pairs; the scores and the metric
    # are means over the inputs, so each chunk counts by its share of them
    for s, e in hooks.chunks(bc.size, size):
        runs = clean_and_corrupted(model, bc.rows(s, e), bx.rows(s, e), m, grad=how == "eap",
                                   check=bc.size <= size)
        if how == "exact":
            part = exact_scores(runs, batch_size=size, progress=progress)
        else:
            part = gradient_scores(runs, steps=n_steps if how == "eap-ig" else 0, batch_size=size)
        share = (e - s) / bc.size
        scores += share * part
        m_clean += share * runs.m_clean
        m_corrupted += share * runs.m_corrupted
        del runs, part  # before the next chunk's runs
    check_gap(m, m_clean, m_corrupted)
    meta = {"method": how, "steps": n_steps if how == "eap-ig" else None,
            "seconds": time.perf_counter() - start}
    whole = Runs(graph, bc, bx, None, [], [], m_clean, m_corrupted, m, model)
    return scores_table(whole, scores, meta)
