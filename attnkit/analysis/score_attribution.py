"""Why a head attends: each pre-softmax score written as a sum over (query component, key
component) pairs.

Head ``h`` of layer ``l`` scores query ``i`` against key ``j`` with

    s(i, j) = scaling · ⟨R_i q_i, R_j k_j⟩,   q_i = W_Q N_i(x_i) + b_Q,   k_j = W_K N_j(x_j) + b_K

(``N`` the pre-attention norm of pre-norm models, the identity for post-norm encoders; ``R``
the rotary rotation of position ``i``, the identity without rotary embeddings; ``W_K``, ``b_K``
the key/value head that ``h`` shares under grouped-query attention). The stream is a sum of
components, ``x_i = Σ_a x_i^a`` (:func:`attnkit.residual_stream`), and ``N_i`` is linear once
row ``i``'s statistics are fixed: ``N_i(u) = scale ⊙ centre(u) / σ_i`` for each component, the
norm's bias going to ``"bias"``. So

    q_i = Σ_a q_i^a,  q_i^a = R_i W_Q scale ⊙ centre(x_i^a) / σ_i,  q_i^bias = R_i (W_Q b_N + b_Q)

(and the same for keys), and

    s(i, j) = Σ_a Σ_b scaling · ⟨q_i^a, k_j^b⟩

exactly: every term is one (query component, key component) pair, and they add up to the score
the model computed (``meta["max_abs_error"]`` says how closely; within float rounding). Where
the model soft-caps its logits (Gemma 2: ``cap · tanh(s / cap)``) the terms add up to the
logit *before* the cap, and ``meta["softcap"]`` says so; a position bias or learned sinks do
not enter ``s``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..runtime.decompose import Reader, walk
from ..runtime.weights import apply_rotary, head_weights, stream_spec
from ..runtime.encoding import Encoding
from ..core import validate
from ..errors import InputError
from ..core.labels import attn_label, head_label, parse_head_label
from ..core.results import Result

#: The grains of ``components=``.
GRAINS = ("heads", "layers", "dims")

#: Terms of one block of pairs (``pairs × query candidates × key candidates``): 1 MiB in
#: float32 (2 MiB for ``dense``' float64); larger blocks of varying size fragment the heap
#: (measured: 9 GB peak RSS at 512 tokens with 32 MiB blocks, flat with these).
BLOCK_TERMS = 1 << 18

#: Up to this many pairs, ``meta["dims"]`` keeps each pair's per-dimension terms ``[N, k]``.
DIMS_PAIRS = 8192

#: ``candidates=None`` chooses among every term while ``pairs × C_q × C_k`` stays within this
#: (one query row of a 4k-token input against 64 components a side), else among the
#: :data:`CANDIDATES` largest components a side.
EXACT_TERMS = 1 << 24

#: Components a side that ``candidates=None`` chooses the ``top`` terms among on larger cases:
#: measured on the bundled encoder at 512 tokens (69 components a side), the largest term is
#: found for 98-100 % of the pairs and the kept terms carry 97-98 % of the exact top 8's
#: absolute sum (``docs/why_heads.md``).
CANDIDATES = 8

LINEARISED = ("the pre-attention norm with each row's statistics fixed (the forward's own); "
              "rotary embeddings per position")


def _layer_group(name: str) -> str:
    """A head's component name -> its layer's ``"L-attn"``; other names unchanged."""
    head = parse_head_label(name)
    return attn_label(head[0]) if head else name


def _grouping(names: list[str], components: Any) -> tuple[list[str], np.ndarray]:
    """Output names and a ``[C_out, C]`` 0/1 matrix summing the walk's components."""
    if isinstance(components, str):
        if components not in GRAINS:
            raise InputError(f"components must be one of {', '.join(map(repr, GRAINS))} or a "
                             f"list of component names; got {components!r}.")
        if components == "heads" or components == "dims":
            return names, np.eye(len(names))
        out: list[str] = []
        for nm in names:  # "layers": heads of a layer summed into "L-attn"
            g = _layer_group(nm)
            if g not in out:
                out.append(g)
    else:
        if isinstance(components, bytes) or not isinstance(components, Iterable):
            raise InputError(f"components must be one of {', '.join(map(repr, GRAINS))} or a "
                             f"list of component names; got {components!r}.")
        keep = [str(c) for c in components]
        missing = [c for c in keep if c not in names]
        if missing:
            raise InputError(f"This model's stream has no component {missing[0]!r} at this layer; "
                             f"its components are: {', '.join(names)}.")
        out = keep + (["other"] if len(keep) < len(names) else [])
    group = np.zeros((len(out), len(names)))
    for c, nm in enumerate(names):
        if isinstance(components, str):
            g = _layer_group(nm)
        else:
            g = nm if nm in out else "other"
        group[out.index(g), c] = 1.0
    return out, group


def _pairs(n: int, queries: Any, keys: Any, pairs: Any) -> tuple[list[int], list[int], Any]:
    """Query positions, key positions, and explicit pairs (or None for the grid)."""
    if pairs is not None:
        if queries is not None or keys is not None:
            raise InputError("Give pairs= or queries=/keys=, not both.")
        arr = validate.position_pairs(pairs, n, "pairs")
        if len(np.unique(arr, axis=0)) != len(arr):
            raise InputError("pairs gives a (query, key) pair more than once; give each once.")
        return sorted(set(arr[:, 0].tolist())), sorted(set(arr[:, 1].tolist())), arr
    # each position once, ascending (the grid's causal mask and sums assume it)
    q = list(range(n)) if queries is None else sorted(
        validate.positions(queries, n, "queries", unique=True, empty=False).tolist())
    k = list(range(n)) if keys is None else sorted(
        validate.positions(keys, n, "keys", unique=True, empty=False).tolist())
    return q, k, None


def _side(model: Any, wts: Any, walk_: Any, part: Any, positions: list[int], head: int,
          side: str) -> Any:
    """Query or key components ``[C, P, k]`` after the norm's statistics, biases and rotary,
    computed in place in ``part`` (the walk's, used once)."""
    import torch

    h = head if side == "q" else head // wts.groups
    mat, bias = (wts.wq, wts.bq) if side == "q" else (wts.wk, wts.bk)
    where = {int(p): i for i, p in enumerate(walk_.positions.tolist())}
    rows = torch.tensor([where[p] for p in positions], dtype=torch.long)
    out = part
    extra = torch.zeros(mat.shape[1], dtype=torch.float64)
    if wts.norm is not None:
        sigma = wts.norm.sigma(walk_.stream[rows])
        out /= sigma[None, :, None]
        if wts.norm.bias is not None:
            extra = extra + mat[h] @ wts.norm.bias
    if bias is not None:
        extra = extra + bias[h]
    out[-1] += extra  # "bias" is the last component
    return apply_rotary(model, out, walk_.call.rotary, torch.tensor(positions, dtype=torch.long))


def _diagonal_blocks(qt: Any, kt: Any, qi: Any, kj: Any) -> Any:
    """``(pairs slice, per-dimension terms [p, k])`` block by block."""
    step = max(1, BLOCK_TERMS // max(1, qt.shape[-1]))
    for s0 in range(0, len(qi), step):
        sl = slice(s0, min(len(qi), s0 + step))
        yield sl, qt[qi[sl]] * kt[kj[sl]]


def _chosen(side: Any, m: int, dtype: Any) -> tuple[Any, Any]:
    """The ``m`` components of largest norm at each position of ``side [C, P, k]``:
    ``(ids [P, m], vectors [P, m, k] in dtype)`` (every component, in order, when ``m`` is
    ``C``)."""
    import torch

    C, P = side.shape[:2]
    if m >= C:
        return torch.arange(C).expand(P, C), side.permute(1, 0, 2).to(dtype).contiguous()
    ids = side.norm(dim=-1).topk(m, dim=0, sorted=False).indices.T  # [P, m]
    picked = side.permute(1, 0, 2).gather(1, ids[..., None].expand(-1, -1, side.shape[-1]))
    return ids, picked.to(dtype)


def _candidate_blocks(qs: Any, ks: Any, qi: Any, kj: Any, grid: bool) -> Any:
    """``(pairs slice, terms [p, m_k, m_q])`` (key candidate first) of the chosen components
    (:func:`_chosen`'s vectors ``qs [P_q, m_q, k]``, ``ks [P_k, m_k, k]``), block by block in
    the order of ``(qi, kj)``. On the grid (pairs in row-major order) a block is a run of
    query rows against all keys: one batched product laying each pair's terms side by side,
    then the allowed pairs; explicit pairs (and rows too long for one block) are gathered and
    multiplied pair by pair."""
    import torch

    N, (Pq, mq, x), (Pk, mk, _) = len(qi), qs.shape, ks.shape
    per_pair = mq * mk
    if grid and per_pair * Pk <= BLOCK_TERMS:
        rows = BLOCK_TERMS // (per_pair * Pk)
        first = torch.searchsorted(qi, torch.arange(0, Pq + 1))  # pairs of row i start here
        kflat = ks.reshape(Pk * mk, x)
        for r0 in range(0, Pq, rows):
            r1 = min(Pq, r0 + rows)
            p0, p1 = int(first[r0]), int(first[r1])
            if p0 == p1:
                continue
            t = torch.matmul(kflat, qs[r0:r1].transpose(1, 2)).view(r1 - r0, Pk, mk, mq)
            if p1 - p0 == (r1 - r0) * Pk:  # every key of these rows
                yield slice(p0, p1), t.view(p1 - p0, mk, mq)
            else:
                yield slice(p0, p1), t[qi[p0:p1] - r0, kj[p0:p1]]
        return
    step = max(1, BLOCK_TERMS // per_pair)
    for s0 in range(0, N, step):
        sl = slice(s0, min(N, s0 + step))
        yield sl, torch.bmm(ks[kj[sl]], qs[qi[sl]].transpose(1, 2))


def _largest(flat: np.ndarray, top: int, scratch: np.ndarray) -> np.ndarray:
    """Column indices ``[p, top]`` of each row's ``top`` largest absolute values (unordered);
    ``scratch`` (at least ``flat``'s size) holds the absolute values."""
    n = flat.shape[1]
    a = np.abs(flat, out=scratch.reshape(-1)[: flat.size].reshape(flat.shape))
    return np.argpartition(a, n - top, axis=1)[:, n - top:]


def _repeat(x: np.ndarray, times: int) -> np.ndarray:
    """Each element ``times`` times in a row (``np.repeat``, as one broadcast copy)."""
    return np.broadcast_to(x[:, None], (len(x), times)).reshape(-1)


def _row_sums(k: Any, lo: Any, hi: Any) -> Any:
    """``Σ_{lo_i <= j < hi_i} k[:, j]`` for every row ``i``: ``[C, len(lo), k]`` from prefix
    sums (an allowed set of keys is a span of the sorted keys asked for)."""
    import torch

    cs = torch.cat([torch.zeros_like(k[:, :1]), k.cumsum(1)], 1)
    return cs[:, hi] - cs[:, lo]


def score_attribution(
    model: Any,
    inputs: Any,
    *,
    layer: int,
    head: int,
    queries: Any = None,
    keys: Any = None,
    pairs: Sequence[tuple[int, int]] | None = None,
    components: str | Sequence[str] = "heads",
    aggregate: str | None = None,
    top: int = 8,
    candidates: int | None = None,
    dense: bool = False,
) -> Result:
    """Each pre-softmax score of one head as a sum over (query component, key component)
    pairs: what in the query's and the key's residual streams makes the head attend.

    See :mod:`attnkit.analysis.score_attribution` for the maths. One forward pass through the
    capture path, stopped after ``layer``'s attention; the stream is decomposed only at the
    query and key positions asked for (:func:`attnkit.residual_stream`).

    Parameters
    ----------
    model : Model
        The model (:func:`attnkit.load`).
    inputs : str, Encoding or token ids
        One input.
    layer, head : int
        The head, 0-indexed.
    queries, keys : int or sequence of int, optional
        Query rows and keys (default all); pairs the model's mask blocks (later keys of a
        causal model, keys outside a sliding window) are left out.
    pairs : sequence of (int, int), optional
        Explicit ``(query, key)`` pairs instead of the grid (a stripe, a relation).
    components : str or sequence of str
        ``"heads"`` (each embedding, each earlier head, each earlier MLP, ``"bias"``),
        ``"layers"`` (a layer's heads summed into ``"L-attn"``, e.g. ``"1-attn"``), ``"dims"`` (the
        per-dimension terms ``scaling · q_x k_x`` of the head's query and key, named ``"dim1"``
        … 1-indexed), or a list of component names kept apart (the rest summed into
        ``"other"``). Names are 1-indexed as in figures (:mod:`attnkit.core.labels`): ``"1-2"``
        is layer 0, head 1; ``"1-mlp"`` layer 0's MLP.
    aggregate : {None, "sum", "mean"}
        Sum (or average) the terms over all pairs: one row per component pair, ``query`` and
        ``key`` set to -1.
    top : int
        Per (query, key), the ``top`` largest terms by absolute value are kept and the others
        summed into one ``"rest"`` row, so each pair still sums to its score.
    candidates : int, optional
        Choose each pair's ``top`` terms among those of the ``candidates`` query components
        and ``candidates`` key components with the largest norms (``‖q_i^a‖``, ``‖k_j^b‖``)
        at that query and that key: ``candidates²`` terms a pair, from one matrix product per
        block of query rows, instead of ``C_q × C_k``. None (default): among every term while
        ``pairs × C_q × C_k`` is at most :data:`EXACT_TERMS`, else among :data:`CANDIDATES`
        a side. ``meta["top_exact"]`` says whether the kept terms are the exact largest; the
        ``"rest"`` row holds everything else either way, so sums are exact.
    dense : bool
        Keep every term (no ``"rest"`` rows) and put the array ``[pairs, C_q, C_k]`` (or
        ``[C_q, C_k]`` aggregated) in ``meta["terms"]``.

    Returns
    -------
    Result
        ``.table`` with columns ``query``, ``key``, ``query_component``, ``key_component``,
        ``contribution``; ``.meta`` with ``layer``, ``head`` (0-indexed), ``scores`` (a
        DataFrame of ``query``, ``key``, ``score`` (the model's, before any soft-cap) and
        ``total`` (the terms' sum)), ``max_abs_error``, ``components``, ``linearised``,
        ``softcap``, ``tokens``, ``candidates`` (``(m_q, m_k)``, or None when every term was a
        candidate), ``top_exact``, and (up to :data:`DIMS_PAIRS` pairs, not aggregated)
        ``dims``: float32 ``[pairs, k]`` per-dimension terms ``scaling · q_x k_x`` in the
        order of ``scores``.

    Raises
    ------
    InputError
        For a layer, head or position out of range, a masked pair, an unknown grain or a
        component the model does not have.
    UnsupportedModelError
        For an architecture the capture path does not support.

    Examples
    --------
    >>> import attnkit as ak
    >>> from attnkit.testing import tiny_model
    >>> model = tiny_model("llama")
    >>> r = ak.score_attribution(model, "The cat sat.", layer=1, head=0, queries=[4])
    >>> list(r.table.columns)
    ['query', 'key', 'query_component', 'key_component', 'contribution']
    >>> sums = r.table.groupby("key")["contribution"].sum()
    >>> bool(np.allclose(sums.values, r.meta["scores"]["score"].values, atol=1e-4))
    True
    """
    import torch

    validate.model(model)
    stream_spec(model)
    layer, head = validate.head_index(layer, head, model.n_layers, model.n_heads)
    if aggregate is not None:
        validate.choice(aggregate, "aggregate", ("sum", "mean"))
    top = validate.size(top, "top")
    enc = inputs if isinstance(inputs, Encoding) else model.encode(inputs)
    n = len(enc)
    qpos, kpos, explicit = _pairs(n, queries, keys, pairs)

    with torch.inference_mode():  # the walk's tensors are inference tensors, updated in place
        return _attribute(model, enc, layer=layer, head=head, qpos=qpos, kpos=kpos,
                          explicit=explicit, components=components, aggregate=aggregate,
                          top=top, candidates=candidates, dense=dense)


@dataclass
class _Terms:
    """One head's query and key written as sums of components, at the pairs asked for.

    ``q [C_q, P_q, k]`` and ``k [C_k, P_k, k]``: per component (grouped as asked), the query
    at each query position and the key at each key position, float64; ``qt``/``kt``
    ``[P, k]`` their sums (the attributed query and key). The ``N`` pairs are ``(qi, kj)``,
    rows of ``q`` and ``k``; ``model_scores`` and ``total`` ``[N]`` are the model's scores and
    the sum of every pair's terms, both scaled."""

    q: Any
    k: Any
    qt: Any
    kt: Any
    qi: Any
    kj: Any
    names_q: list[str]
    names_k: list[str]
    diagonal: bool  # components="dims": per-dimension terms, not component pairs
    grid: bool  # the pairs are every allowed (query, key) of the grid, not explicit ones
    scaling: float
    model_scores: Any
    total: Any
    call: Any  # the head's layer's attention call (spans, soft-cap, sinks, rotary)
    linearised: str  # what the attribution treated as linear

    @property
    def n_pairs(self) -> int:
        return len(self.qi)


@dataclass
class _Selection:
    """Which terms a pair keeps: every term, or its ``kept`` largest plus a ``"rest"`` row,
    chosen among ``m_q × m_k`` candidates (``exact``: among every term)."""

    mq: int
    mk: int
    exact: bool
    keep_all: bool
    kept: int

    @property
    def width(self) -> int:
        """Rows a pair keeps in the table."""
        return self.kept if self.keep_all else self.kept + 1


def _terms(model: Any, enc: Any, *, layer: int, head: int, qpos: list[int], kpos: list[int],
           explicit: Any, components: Any) -> _Terms:
    """One forward (the walk) and the grouping into components: :class:`_Terms`."""
    import torch

    wts = head_weights(model, layer)
    g = wts.groups
    read_q = wts.norm.matrix(wts.wq[head]) if wts.norm else wts.wq[head]
    read_k = wts.norm.matrix(wts.wk[head // g]) if wts.norm else wts.wk[head // g]
    w = walk(model, enc, layer=layer, readers=[Reader(qpos, read_q), Reader(kpos, read_k)])
    q = _side(model, wts, w, w.parts[0], qpos, head, "q")  # [C, Pq, k]
    k = _side(model, wts, w, w.parts[1], kpos, head, "k")
    call = w.call
    scaling = call.scaling

    # the model's own scores at the pairs, and the mask
    where = {int(p): i for i, p in enumerate(w.positions.tolist())}
    q_model = call.query[head][torch.tensor([where[p] for p in qpos])]  # [Pq, k]
    k_model = call.key[head // g][torch.tensor([where[p] for p in kpos])]
    allowed = call.spans.allowed(torch.tensor(qpos), torch.tensor(kpos))  # [Pq, Pk]
    if explicit is not None:
        qi = torch.from_numpy(np.searchsorted(qpos, explicit[:, 0]))
        kj = torch.from_numpy(np.searchsorted(kpos, explicit[:, 1]))
        blocked = ~allowed[qi, kj]
        if bool(blocked.any()):
            a, b = explicit[int(torch.nonzero(blocked)[0, 0])]
            raise InputError(f"The model's mask keeps query {a} from key {b}, so that pair has "
                             "no score; choose pairs the head can attend to.")
    else:
        qi, kj = torch.nonzero(allowed, as_tuple=True)
        if not len(qi):
            raise InputError("The model's mask allows none of the (query, key) pairs asked for "
                             "(a causal model attends only to earlier keys).")

    names, group = _grouping(w.names, components if components != "dims" else "heads")
    diagonal = components == "dims"
    if diagonal:
        names_q = names_k = [f"dim{x + 1}" for x in range(q.shape[-1])]
    else:
        if components != "heads":  # "heads" keeps the walk's components as they are
            G = torch.from_numpy(group)
            q = torch.einsum("oc,cpx->opx", G, q)
            k = torch.einsum("oc,cpx->opx", G, k)
        names_q = names_k = names
    qt, kt = q.sum(0), k.sum(0)  # [P, k]: the attributed query and key
    grid = explicit is None
    if grid:  # scores of the whole grid as two products, read at the allowed pairs
        model_scores = scaling * (q_model @ k_model.T)[qi, kj]
        total = scaling * (qt @ kt.T)[qi, kj]  # Σ of every pair's terms
    else:
        model_scores = scaling * (q_model[qi] * k_model[kj]).sum(-1)  # [N]
        total = scaling * (qt[qi] * kt[kj]).sum(-1)
    linearised = (LINEARISED if wts.norm is not None else "rotary embeddings per position"
                  if call.rotary is not None else "nothing (the query and key read the stream directly)")
    return _Terms(q, k, qt, kt, qi, kj, list(names_q), list(names_k), diagonal, grid, scaling,
                  model_scores, total, call, linearised)


def _selection(t: _Terms, *, top: int, candidates: int | None, dense: bool) -> _Selection:
    """How many terms each pair keeps, and among how many candidates a side."""
    Cq, Ck = len(t.names_q), len(t.names_k)
    per_pair = Cq if t.diagonal else Cq * Ck
    if candidates is None:
        m = max(Cq, Ck) if dense or t.diagonal or t.n_pairs * per_pair <= EXACT_TERMS else CANDIDATES
    else:
        if isinstance(candidates, bool) or not isinstance(candidates, (int, np.integer)) or (
                candidates < 1):
            raise InputError(f"candidates must be a positive int or None; got {candidates!r}.")
        m = max(Cq, Ck) if dense else int(candidates)
    mq, mk = (Cq, Ck) if t.diagonal else (min(m, Cq), min(m, Ck))
    exact = t.diagonal or (mq == Cq and mk == Ck)
    keep_all = dense or (exact and per_pair <= top + 1)
    kept = per_pair if keep_all else min(top, per_pair if t.diagonal else mq * mk)
    return _Selection(mq, mk, exact, keep_all, kept)


def _codes(codes: np.ndarray, names: list[str]) -> Any:
    """Component codes as a categorical of the names and ``"rest"``."""
    dtype = pd.CategoricalDtype(list(names) + ["rest"])
    return pd.Categorical.from_codes(codes, dtype=dtype, validate=False)


def _aggregated(t: _Terms, *, how: str, qpos: list[int], kpos: list[int]) -> tuple[pd.DataFrame, Any]:
    """Every term summed (``how="sum"``) or averaged over the pairs: the table (one row per
    component pair, ``query`` and ``key`` -1) and the terms ``[C_q, C_k]`` (``[k]`` for dims).

    Σ_(i,j)∈S q_i^a · k_j^b = Σ_i q_i^a · (Σ_{j: (i,j)∈S} k_j^b): the keys are summed per query
    row first, so the cost is one product per component pair, not one per pair."""
    import torch

    src = t.kt[None] if t.diagonal else t.k
    if t.grid:
        spans = t.call.spans
        lo = torch.searchsorted(torch.tensor(kpos), spans.lo.cpu()[torch.tensor(qpos)])
        hi = torch.searchsorted(torch.tensor(kpos), spans.hi.cpu()[torch.tensor(qpos)])
        wk = _row_sums(src, lo, hi)
    else:
        wk = torch.zeros(src.shape[0], len(qpos), src.shape[-1], dtype=src.dtype)
        wk.index_add_(1, t.qi, src[:, t.kj])
    if t.diagonal:
        agg = t.scaling * (t.qt * wk[0]).sum(0)  # [k]
    else:
        agg = t.scaling * torch.einsum("aix,bix->ab", t.q, wk)
    if how == "mean":
        agg = agg / t.n_pairs
    Cq, Ck = len(t.names_q), len(t.names_k)
    if t.diagonal:
        a_idx = b_idx = np.arange(Cq, dtype=np.int32)
        vals = agg.numpy()
    else:
        a_idx, b_idx = np.divmod(np.arange(Cq * Ck, dtype=np.int32), Ck)
        vals = agg.reshape(-1).numpy()
    table = pd.DataFrame({
        "query": np.full(len(vals), -1), "key": np.full(len(vals), -1),
        "query_component": _codes(a_idx, t.names_q),
        "key_component": _codes(b_idx, t.names_k), "contribution": vals})
    return table, agg.numpy()


def _per_pair(t: _Terms, sel: _Selection, *, qpos: list[int], kpos: list[int],
              dense: bool) -> tuple[pd.DataFrame, Any]:
    """Each pair's kept terms (largest by absolute value) and a ``"rest"`` row, block by block
    of pairs: the table, and with ``dense`` every term ``[N, C_q, C_k]`` (``[N, k]`` for dims)."""
    import torch

    Cq, Ck = len(t.names_q), len(t.names_k)
    N, width, kept = t.n_pairs, sel.width, sel.kept
    out_v = np.empty((N, width))
    code = np.int16 if max(Cq, Ck) < 32767 else np.int32  # categorical codes
    out_a = np.empty((N, width), dtype=code)
    out_b = np.empty((N, width), dtype=code)
    terms_out: Any = None
    if dense:
        terms_out = np.empty((N, Cq) if t.diagonal else (N, Cq, Ck))
    if t.diagonal:
        blocks = _diagonal_blocks(t.qt, t.kt, t.qi, t.kj)
        ids_q = ids_k = None
    else:
        # per-pair terms in float32 (rounding below (k + 2) 2^-24 ‖q^a‖ ‖k^b‖ a term; the
        # "rest" row is float64, so each pair still sums to its float64 total); dense
        # terms in float64
        dt = torch.float64 if dense else torch.float32
        ids_q_t, vq = _chosen(t.q, sel.mq, dt)
        vq *= t.scaling  # the terms come out scaled
        ids_k_t, vk = _chosen(t.k, sel.mk, dt)
        ids_q, ids_k = ids_q_t.numpy().ravel(), ids_k_t.numpy().ravel()
        blocks = _candidate_blocks(vq, vk, t.qi, t.kj, t.grid)
    pair_m = sel.mq if not t.diagonal else 1  # terms a pair: [m_k, m_q] (diagonal: [k])
    qbase, kbase = t.qi.numpy() * sel.mq, t.kj.numpy() * sel.mk  # where a pair's candidates start
    scratch = np.empty(BLOCK_TERMS, dtype=np.float64 if dense or t.diagonal else np.float32)
    for sl, terms in blocks:
        flat = (t.scaling * terms if t.diagonal else terms).reshape(terms.shape[0], -1).numpy()
        if dense:
            terms_out[sl] = (flat if t.diagonal else flat.reshape(-1, Ck, Cq).transpose(0, 2, 1)
                             ).reshape(terms_out[sl].shape)
        if kept == flat.shape[1]:
            idx = np.broadcast_to(np.arange(kept), flat.shape)
            vals = flat
        else:
            idx = _largest(flat, kept, scratch)
            vals = np.take_along_axis(flat, idx, 1)
        if not sel.keep_all:
            out_v[sl, kept] = t.total[sl].numpy() - vals.sum(1, dtype=np.float64)
            out_a[sl, kept], out_b[sl, kept] = Cq, Ck  # "rest"
        out_v[sl, : idx.shape[1]] = vals
        if t.diagonal:
            out_a[sl, : idx.shape[1]] = out_b[sl, : idx.shape[1]] = idx
        elif sel.exact:  # candidates in component order
            out_b[sl, : idx.shape[1]], out_a[sl, : idx.shape[1]] = np.divmod(idx, pair_m)
        else:  # candidate ids, read from the flat [position x candidate] tables
            assert ids_q is not None and ids_k is not None
            if pair_m & (pair_m - 1) == 0:  # a power of two: shifts, not division
                ib, ia = idx >> (pair_m.bit_length() - 1), idx & (pair_m - 1)
            else:
                ib, ia = np.divmod(idx, pair_m)
            ia += qbase[sl, None]
            ib += kbase[sl, None]
            out_a[sl, : idx.shape[1]] = ids_q.take(ia)
            out_b[sl, : idx.shape[1]] = ids_k.take(ib)
    qpos_a, kpos_a = np.asarray(qpos, dtype=np.int32), np.asarray(kpos, dtype=np.int32)
    table = pd.DataFrame({
        "query": _repeat(qpos_a[t.qi.numpy()], width),
        "key": _repeat(kpos_a[t.kj.numpy()], width),
        "query_component": _codes(out_a.reshape(-1), t.names_q),
        "key_component": _codes(out_b.reshape(-1), t.names_k),
        "contribution": out_v.reshape(-1)}, copy=False)
    return table, terms_out


def _attribute(model: Any, enc: Any, *, layer: int, head: int, qpos: list[int], kpos: list[int],
               explicit: Any, components: Any, aggregate: str | None, top: int,
               candidates: int | None, dense: bool) -> Result:
    """:func:`score_attribution` once its arguments are checked: the terms, then the table of
    the one mode asked for (aggregated, or per pair), then what the numbers mean."""
    t = _terms(model, enc, layer=layer, head=head, qpos=qpos, kpos=kpos, explicit=explicit,
               components=components)
    sel = _selection(t, top=top, candidates=candidates, dense=dense)
    if aggregate:
        table, terms = _aggregated(t, how=aggregate, qpos=qpos, kpos=kpos)
    else:
        table, terms = _per_pair(t, sel, qpos=qpos, kpos=kpos, dense=dense)
    qpos_a, kpos_a = np.asarray(qpos, dtype=np.int64), np.asarray(kpos, dtype=np.int64)
    scores = pd.DataFrame({"query": qpos_a[t.qi.numpy()], "key": kpos_a[t.kj.numpy()],
                           "score": t.model_scores.numpy(), "total": t.total.numpy()})
    call = t.call
    meta: dict[str, Any] = {
        "layer": layer, "head": head, "label": head_label(layer, head),
        "components": "dims" if t.diagonal else (components if isinstance(components, str)
                                                  else list(components)),
        "query_components": t.names_q, "key_components": t.names_k,
        "n_pairs": t.n_pairs, "aggregate": aggregate, "top": None if sel.keep_all else int(top),
        "candidates": None if sel.exact else (sel.mq, sel.mk),
        "top_exact": bool(aggregate or sel.exact),
        "scores": scores, "max_abs_error": float((t.model_scores - t.total).abs().max()),
        "scaling": t.scaling, "softcap": call.softcap,
        "attributed": ("the logit before soft-capping (the model applies "
                       f"{call.softcap} * tanh(s / {call.softcap}) afterwards)"
                       if call.softcap else "the pre-softmax score"),
        "linearised": t.linearised,
        "sinks": call.sinks, "tokens": list(enc.tokens), "model": model.name,
    }
    if t.n_pairs <= DIMS_PAIRS and not aggregate:  # per-dimension terms, for ScoreView's pair view
        meta["dims"] = (t.scaling * t.qt[t.qi] * t.kt[t.kj]).float().numpy()  # [N, k]
    if terms is not None:
        meta["terms"] = terms
    return Result(table, meta, widget="score")
