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

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from ..decompose import (
    Reader,
    apply_rotary,
    check_layer,
    check_positions,
    head_weights,
    stream_spec,
    walk,
)
from ..encoding import Encoding
from ..errors import InputError
from ..results import Result

#: The grains of ``components=``.
GRAINS = ("heads", "layers", "dims")

#: Terms of one block of pairs (``pairs × query components × key components``): 2 MiB in
#: float64; larger blocks of varying size fragment the heap (measured: 9 GB peak RSS at 512
#: tokens with 32 MiB blocks, flat with these).
BLOCK_TERMS = 1 << 18

#: Up to this many pairs, ``meta["dims"]`` keeps each pair's per-dimension terms ``[N, k]``.
DIMS_PAIRS = 8192

LINEARISED = ("the pre-attention norm with each row's statistics fixed (the forward's own); "
              "rotary embeddings per position")


def _grouping(names: list[str], components: Any) -> tuple[list[str], np.ndarray]:
    """Output names and a ``[C_out, C]`` 0/1 matrix summing the walk's components."""
    if isinstance(components, str):
        if components not in GRAINS:
            raise InputError(f"components must be one of {', '.join(map(repr, GRAINS))} or a "
                             f"list of component names; got {components!r}.")
        if components == "heads" or components == "dims":
            return names, np.eye(len(names))
        out: list[str] = []
        for nm in names:  # "layers": heads of a layer summed into "L{m}.attn"
            g = nm.split("H")[0] + ".attn" if nm.startswith("L") and "H" in nm else nm
            if g not in out:
                out.append(g)
    else:
        keep = [str(c) for c in components]
        missing = [c for c in keep if c not in names]
        if missing:
            raise InputError(f"This model's stream has no component {missing[0]!r} at this layer; "
                             f"its components are: {', '.join(names)}.")
        out = keep + (["other"] if len(keep) < len(names) else [])
    group = np.zeros((len(out), len(names)))
    for c, nm in enumerate(names):
        if isinstance(components, str):
            g = nm.split("H")[0] + ".attn" if nm.startswith("L") and "H" in nm else nm
        else:
            g = nm if nm in out else "other"
        group[out.index(g), c] = 1.0
    return out, group


def _pairs(n: int, queries: Any, keys: Any, pairs: Any) -> tuple[list[int], list[int], Any]:
    """Query positions, key positions, and explicit pairs (or None for the grid)."""
    if pairs is not None:
        arr = np.asarray(list(pairs), dtype=np.int64)
        if arr.ndim != 2 or arr.shape[1] != 2 or not len(arr):
            raise InputError("pairs must be a non-empty sequence of (query, key) positions.")
        check_positions(arr[:, 0].tolist(), n, "query positions")
        check_positions(arr[:, 1].tolist(), n, "key positions")
        return sorted(set(arr[:, 0].tolist())), sorted(set(arr[:, 1].tolist())), arr
    q = list(range(n)) if queries is None else check_positions(_listed(queries), n, "query positions")
    k = list(range(n)) if keys is None else check_positions(_listed(keys), n, "key positions")
    return q, k, None


def _listed(x: Any) -> list[int]:
    return [int(x)] if np.ndim(x) == 0 else [int(v) for v in np.asarray(x).ravel()]


def _side(model: Any, wts: Any, walk_: Any, part: Any, positions: list[int], head: int,
          side: str) -> Any:
    """Query or key components ``[C, P, k]`` after the norm's statistics, biases and rotary."""
    import torch

    h = head if side == "q" else head // wts.groups
    mat, bias = (wts.wq, wts.bq) if side == "q" else (wts.wk, wts.bk)
    where = {int(p): i for i, p in enumerate(walk_.positions.tolist())}
    rows = torch.tensor([where[p] for p in positions], dtype=torch.long)
    out = part.clone()
    extra = torch.zeros(mat.shape[1], dtype=torch.float64)
    if wts.norm is not None:
        sigma = wts.norm.sigma(walk_.stream[rows])
        out = out / sigma[None, :, None]
        if wts.norm.bias is not None:
            extra = extra + mat[h] @ wts.norm.bias
    if bias is not None:
        extra = extra + bias[h]
    out[-1] = out[-1] + extra  # "bias" is the last component
    return apply_rotary(model, out, walk_.call.rotary, torch.tensor(positions, dtype=torch.long))


def _blocks(q: Any, k: Any, qt: Any, kt: Any, qi: Any, kj: Any, grid: bool, diagonal: bool,
            per_pair: int) -> Any:
    """``(pairs slice, terms [p, C_q, C_k] or [p, k])`` block by block, in the order of
    ``(qi, kj)``. On the grid (pairs in row-major order) a block is a run of query rows against
    all keys, one product without gathering; explicit pairs (and rows too long for one
    block) are gathered."""
    import torch

    N = len(qi)
    n_keys = k.shape[1]
    if grid and not diagonal and per_pair * n_keys <= BLOCK_TERMS:
        rows = BLOCK_TERMS // max(1, per_pair * n_keys)
        first = torch.searchsorted(qi, torch.arange(0, q.shape[1] + 1))  # pairs of row i start
        for r0 in range(0, q.shape[1], rows):
            r1 = min(q.shape[1], r0 + rows)
            p0, p1 = int(first[r0]), int(first[r1])
            if p0 == p1:
                continue
            t = torch.einsum("aix,bjx->ijab", q[:, r0:r1], k)  # [r, Pk, Cq, Ck]
            yield slice(p0, p1), t[qi[p0:p1] - r0, kj[p0:p1]]
        return
    step = max(1, BLOCK_TERMS // max(1, per_pair))
    for s0 in range(0, N, step):
        sl = slice(s0, min(N, s0 + step))
        if diagonal:
            yield sl, qt[qi[sl]] * kt[kj[sl]]
        else:
            yield sl, torch.bmm(q[:, qi[sl]].permute(1, 0, 2), k[:, kj[sl]].permute(1, 2, 0))


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
        ``"layers"`` (a layer's heads summed into ``"L{m}.attn"``), ``"dims"`` (the
        per-dimension terms ``scaling · q_x k_x`` of the head's query and key, named ``"dim1"``
        … 1-indexed), or a list of component names kept apart (the rest summed into
        ``"other"``). Head names are 1-indexed as in figures: ``"L1H2"`` is layer 0, head 1.
    aggregate : {None, "sum", "mean"}
        Sum (or average) the terms over all pairs: one row per component pair, ``query`` and
        ``key`` set to -1.
    top : int
        Per (query, key), the ``top`` largest terms by absolute value are kept and the others
        summed into one ``"rest"`` row, so each pair still sums to its score.
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
        ``softcap``, ``tokens``, and (up to :data:`DIMS_PAIRS` pairs, not aggregated)
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

    stream_spec(model)
    layer = check_layer(model, layer)
    if isinstance(head, bool) or not isinstance(head, (int, np.integer)) or not (
            0 <= int(head) < model.n_heads):
        raise InputError(f"head must be an int from 0 to {model.n_heads - 1} (0-indexed: layer "
                         f"{layer} has {model.n_heads} heads); got {head!r}.")
    head = int(head)
    if aggregate not in (None, "sum", "mean"):
        raise InputError(f"aggregate must be None, 'sum' or 'mean'; got {aggregate!r}.")
    if isinstance(top, bool) or not isinstance(top, (int, np.integer)) or top < 1:
        raise InputError(f"top must be a positive int; got {top!r}.")
    enc = inputs if isinstance(inputs, Encoding) else model.encode(inputs)
    n = len(enc)
    qpos, kpos, explicit = _pairs(n, queries, keys, pairs)

    wts = head_weights(model, layer)
    g = wts.groups
    mq = wts.norm.matrix(wts.wq[head]) if wts.norm else wts.wq[head]
    mk = wts.norm.matrix(wts.wk[head // g]) if wts.norm else wts.wk[head // g]
    w = walk(model, enc, layer=layer, readers=[Reader(qpos, mq), Reader(kpos, mk)])
    q = _side(model, wts, w, w.parts[0], qpos, head, "q")  # [C, Pq, k]
    k = _side(model, wts, w, w.parts[1], kpos, head, "k")
    call = w.call
    scaling = call.scaling

    # the model's own scores at the pairs, and the mask
    where = {int(p): i for i, p in enumerate(w.positions.tolist())}
    qi_all = torch.tensor([where[p] for p in qpos])
    kj_all = torch.tensor([where[p] for p in kpos])
    q_model = call.query[head][qi_all]  # [Pq, k]
    k_model = call.key[head // g][kj_all]
    allowed = call.spans.allowed(torch.tensor(qpos), torch.tensor(kpos))  # [Pq, Pk]
    if explicit is not None:
        qi = torch.tensor([qpos.index(int(a)) for a in explicit[:, 0]])
        kj = torch.tensor([kpos.index(int(b)) for b in explicit[:, 1]])
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
    if components == "dims":
        qt, kt = q.sum(0), k.sum(0)  # [P, k]
        dims = qt.shape[-1]
        names_q = names_k = [f"dim{x + 1}" for x in range(dims)]
    else:
        G = torch.from_numpy(group)
        q = torch.einsum("oc,cpx->opx", G, q)
        k = torch.einsum("oc,cpx->opx", G, k)
        names_q = names_k = names
    model_scores = scaling * (q_model[qi] * k_model[kj]).sum(-1)  # [N]

    Cq, Ck = len(names_q), len(names_k)
    N = len(qi)
    diagonal = components == "dims"
    if not diagonal:
        qt, kt = q.sum(0), k.sum(0)
    total = scaling * (qt[qi] * kt[kj]).sum(-1)  # Σ of every pair's terms
    per_pair = Cq if diagonal else Cq * Ck
    keep_all = dense or per_pair <= top + 1
    agg = None
    dense_terms: list[Any] = []
    rows_i: list[Any] = []
    rows_a: list[Any] = []
    rows_b: list[Any] = []
    rows_v: list[Any] = []
    if aggregate:
        # Σ_(i,j)∈S q_i^a · k_j^b = Σ_i q_i^a · (Σ_j W_ij k_j^b), W the pairs' counts
        weight = torch.zeros(len(qpos), len(kpos), dtype=torch.float64)
        weight.index_put_((qi, kj), torch.ones(N, dtype=torch.float64), accumulate=True)
        if diagonal:
            agg = scaling * (qt * (weight @ kt)).sum(0)  # [k]
        else:
            wk = torch.einsum("ij,bjx->bix", weight, k)
            agg = scaling * torch.einsum("aix,bix->ab", q, wk)
    else:
        for sl, t in _blocks(q, k, qt, kt, qi, kj, explicit is None, diagonal, per_pair):
            t = scaling * t
            flat = t.reshape(t.shape[0], -1)
            if dense:
                dense_terms.append(t)
            if keep_all:
                idx = torch.arange(flat.shape[1]).expand(flat.shape[0], -1)
                vals = flat
            else:
                _, idx = flat.abs().topk(top, dim=-1, sorted=False)
                vals = flat.gather(1, idx)
                rest = total[sl] - vals.sum(-1)
                idx = torch.cat([idx, torch.full((flat.shape[0], 1), -1)], 1)
                vals = torch.cat([vals, rest[:, None]], 1)
            rows_i.append(torch.arange(sl.start, sl.stop).repeat_interleave(idx.shape[1]))
            if diagonal:
                rows_a.append(idx.reshape(-1))
                rows_b.append(idx.reshape(-1))
            else:
                rows_a.append(torch.where(idx < 0, -1, idx // Ck).reshape(-1))
                rows_b.append(torch.where(idx < 0, -1, idx % Ck).reshape(-1))
            rows_v.append(vals.reshape(-1))

    qpos_t, kpos_t = torch.tensor(qpos), torch.tensor(kpos)
    cats_q = list(names_q) + ["rest"]
    cats_k = list(names_k) + ["rest"]
    if aggregate:
        assert agg is not None
        if aggregate == "mean":
            agg = agg / N
        agg = agg.cpu()
        if diagonal:
            a_idx = b_idx = np.arange(Cq)
            vals_np = agg.numpy()
        else:
            a_idx, b_idx = np.divmod(np.arange(Cq * Ck), Ck)
            vals_np = agg.reshape(-1).numpy()
        table = pd.DataFrame({
            "query": np.full(len(vals_np), -1), "key": np.full(len(vals_np), -1),
            "query_component": pd.Categorical.from_codes(a_idx, cats_q),
            "key_component": pd.Categorical.from_codes(b_idx, cats_k),
            "contribution": vals_np})
    else:
        pi = torch.cat(rows_i)
        a_all, b_all = torch.cat(rows_a), torch.cat(rows_b)
        table = pd.DataFrame({
            "query": qpos_t[qi[pi]].numpy(), "key": kpos_t[kj[pi]].numpy(),
            "query_component": pd.Categorical.from_codes(
                torch.where(a_all < 0, len(names_q), a_all).numpy(), cats_q),
            "key_component": pd.Categorical.from_codes(
                torch.where(b_all < 0, len(names_k), b_all).numpy(), cats_k),
            "contribution": torch.cat(rows_v).numpy()})
    scores = pd.DataFrame({"query": qpos_t[qi].numpy(), "key": kpos_t[kj].numpy(),
                           "score": model_scores.numpy(), "total": total.numpy()})
    meta: dict[str, Any] = {
        "layer": layer, "head": head, "label": f"L{layer + 1}-H{head + 1}",
        "components": "dims" if diagonal else (components if isinstance(components, str)
                                                else list(components)),
        "query_components": list(names_q), "key_components": list(names_k),
        "n_pairs": N, "aggregate": aggregate, "top": None if keep_all else int(top),
        "scores": scores, "max_abs_error": float((model_scores - total).abs().max()),
        "scaling": scaling, "softcap": call.softcap,
        "attributed": ("the logit before soft-capping (the model applies "
                       f"{call.softcap} * tanh(s / {call.softcap}) afterwards)"
                       if call.softcap else "the pre-softmax score"),
        "linearised": LINEARISED if wts.norm is not None else "rotary embeddings per position"
        if call.rotary is not None else "nothing (the query and key read the stream directly)",
        "sinks": call.sinks, "tokens": list(enc.tokens), "model": model.name,
    }
    if N <= DIMS_PAIRS and not aggregate:  # per-dimension terms, for ScoreView's pair view
        meta["dims"] = (scaling * qt[qi] * kt[kj]).float().numpy()  # [N, k]
    if agg is not None:
        meta["terms"] = agg.numpy()
    elif dense:
        meta["terms"] = torch.cat(dense_terms).numpy()
    return Result(table, meta)
