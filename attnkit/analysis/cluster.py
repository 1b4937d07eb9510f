"""Clustering attention heads (Clark et al. 2019, §6): how alike two heads' attention is.

``head_distances`` averages the Jensen–Shannon divergence between two heads' attention
rows over a corpus, ``embed_heads`` places the heads in 2-D by multidimensional scaling,
``head_behaviours`` names what each head mostly does (from :func:`attnkit.head_stats`).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pandas as pd

from .._compat import renamed
from ..core import validate
from ..errors import InputError
from ..core.results import HeadResult, Result, head_index, table_and_meta
from ..core.types import Attentions, as_collection
from .stats import uniform_row_entropy

_LN2 = float(np.log(2.0))

#: Behaviour labels of :func:`head_behaviours`, in order of precedence (first match wins).
BEHAVIOURS = ("punctuation", "[SEP]", "[CLS]", "broad", "previous", "next", "other")


def _pair_sums(x: np.ndarray, xlx: np.ndarray) -> np.ndarray:
    """Summed JS divergence between every pair of rows of ``x`` ``[K, T]`` (float32,
    concatenated attention rows of one chunk), as float64 ``[K, K]`` (upper triangle).

    Per element, JS = ½(p log p + q log q) − m log m with m = (p+q)/2; with s = p + q,
    m log m = ½(s log s − s ln 2). Every element's term is ≥ 0 (x log x is convex), so the
    sum carries no cancellation between large numbers.
    """
    k = x.shape[0]
    out = np.zeros((k, k))
    tiny = np.float32(1e-30)  # log(0 + tiny) times 0 is 0: zero entries (fp16 underflow) are safe
    ln2 = np.float32(_LN2)
    for i in range(k - 1):
        s = x[i] + x[i + 1 :]
        term = np.log(s + tiny)
        term -= ln2
        term *= s
        # term = s log(s/2) = 2 m log m ; JS element = ½(xlx_i + xlx_j − term)
        term -= xlx[i]
        term -= xlx[i + 1 :]
        out[i, i + 1 :] = -0.5 * term.sum(axis=1, dtype=np.float64)
    return out


def head_distances(
    attentions: Attentions,
    *,
    kind: str = "divergence",
    chunk: int = 8192,
    progress: bool = True,
    client: Any = None,
) -> HeadResult:
    """Jensen–Shannon divergence between every pair of heads, averaged over a corpus.

    For heads a and b and every row r (a from-position of an item), JS(a_r, b_r) is the
    Jensen–Shannon divergence (natural log, so between 0 and ln 2) between head a's and
    head b's attention distributions from r. The result averages it over all rows of all
    items (every row counts once; [CLS]/[SEP] rows included), as Clark et al. (2019, §6) do
    (they sum instead of averaging, a constant factor, and smooth each distribution by
    0.1 % to avoid log 0; zeros are handled exactly here instead).

    Parameters
    ----------
    attentions : an :class:`~attnkit.storage.corpus.AttentionSet` or any iterable of
        :class:`Attention` with the same layers and heads (token or word level).
    kind : ``"divergence"`` (the mean JS divergence, in nats, the paper's distance) or
        ``"distance"`` (its square root: a true metric, the root-mean-square
        Jensen–Shannon distance; identical heads 0, heads with disjoint attention √ln 2).
    chunk : attention values (per head) processed at a time; bigger uses more memory.
    progress : show a progress bar over items.
    client : dask.distributed.Client, optional
        Compute the per-batch sums on this Dask cluster; ``None`` here. Same result.

    Returns
    -------
    HeadResult
        ``table`` ``[L*H, L*H]``, symmetric with zero diagonal, index and columns both the
        (layer, head) MultiIndex (0-indexed; head ``h`` of layer ``l`` is row ``l*H + h``);
        ``.to_numpy()`` gives the plain array. ``meta``: ``n_items``, ``n_rows``, ``kind``.
        ``plot()`` draws the matrix.

    Raises
    ------
    InputError
        When there is no input or inputs disagree on layers and heads.

    Examples
    --------
    >>> import numpy as np, attnkit as ak
    >>> one = np.full((1, 2, 2, 2), 0.5)
    >>> one[0, 1] = np.eye(2)  # head 1 attends to itself, head 0 uniformly
    >>> d = ak.head_distances([ak.Attention.from_maps(one, ["a", "b"])], progress=False)
    >>> # JS([.5, .5], [1, 0]) = ½ KL(p ‖ m) + ½ KL(q ‖ m) with m = [.75, .25]
    >>> # = ½ (½ ln(2/3) + ½ ln 2) + ½ ln(4/3) = 0.2158 on every row
    >>> round(float(d.to_numpy()[0, 1]), 4)
    0.2158

    Cost: ½(L·H)² logarithms per attention value (2,556 for 72 heads); EWT dev (2,001
    sentences, word level) takes about 14 s of CPU on one core (docs/benchmarks.md).
    """
    chunk = validate.size(chunk, "chunk")
    if kind not in ("divergence", "distance"):
        raise InputError(f"kind must be 'divergence' or 'distance', not {kind!r}.")
    if chunk < 1:
        raise InputError(f"chunk must be at least 1, not {chunk}.")
    from ..storage.engine import map_blocks, sum_partials

    parts = map_blocks(attentions, functools.partial(_distance_partial, chunk=chunk),
                       client=client, progress=progress, desc="head distances")
    if not parts:
        raise InputError("head_distances() got no attention to compare.")
    shapes = {p.pop("shape") for p in parts}
    if len(shapes) > 1:
        raise InputError(f"All attentions must have the same layers and heads; got {sorted(shapes)}.")
    (shape,) = shapes
    p = sum_partials(parts)
    total, n_rows, n_items = p["total"], int(p["rows"]), int(p["items"])
    div = (total + total.T) / n_rows
    np.clip(div, 0.0, _LN2, out=div)
    np.fill_diagonal(div, 0.0)
    values = np.sqrt(div) if kind == "distance" else div
    index = head_index(*shape)
    out = pd.DataFrame(values, index=index, columns=index.copy())
    return HeadResult(out, {"n_items": n_items, "n_rows": n_rows, "kind": kind},
                      plot="head_distances")


def _distance_partial(block: Any, chunk: int) -> dict:
    """Summed pairwise JS divergence of one block's rows (``chunk`` values at a time)."""
    total: np.ndarray | None = None
    shape: tuple[int, int] | None = None
    buf: list[np.ndarray] = []
    size = n_rows = 0

    def flush() -> None:
        nonlocal buf, size, total
        x = np.ascontiguousarray(np.concatenate(buf, axis=1), dtype=np.float32)
        xlx = x * np.log(x + np.float32(1e-30))
        part = _pair_sums(x, xlx)
        total = part if total is None else total + part
        buf, size = [], 0

    if block.attentions is None:
        raise InputError("head_distances needs attention maps; this set keeps summaries only.")
    for att in block.attentions:
        maps = att.maps
        L, H, n, _ = maps.shape
        if shape is None:
            shape = (L, H)
        elif (L, H) != shape:
            raise InputError(
                f"All attentions must have the same layers and heads; got {L}x{H} after "
                f"{shape[0]}x{shape[1]}."
            )
        buf.append(maps.reshape(L * H, n * n))
        size += n * n
        n_rows += n
        if size >= chunk:
            flush()
    if buf:
        flush()
    return {"total": total, "rows": n_rows, "items": len(block.attentions), "shape": shape}


# ----------------------------------------------------------------------- MDS
def _as_square(distances: Any) -> tuple[np.ndarray, pd.Index]:
    if isinstance(distances, Result):
        distances = distances.table
    if isinstance(distances, pd.DataFrame):
        index = distances.index
        d = distances.to_numpy(dtype=np.float64)
    else:
        d = np.asarray(distances, dtype=np.float64)
        index = pd.RangeIndex(d.shape[0] if d.ndim else 0)
    if d.ndim != 2 or d.shape[0] != d.shape[1]:
        raise InputError(f"distances must be a square matrix; got shape {d.shape}.")
    if d.shape[0] < 3:
        raise InputError(f"Embedding needs at least 3 heads; got {d.shape[0]}.")
    if not np.all(np.isfinite(d)):
        raise InputError("distances hold NaN or infinite values; compute them again.")
    if np.any(d < 0):
        raise InputError("distances must not be negative.")
    if not np.allclose(d, d.T, atol=1e-8 * max(1.0, float(np.abs(d).max()))):
        raise InputError("distances must be symmetric (d[i, j] == d[j, i]).")
    d = (d + d.T) / 2
    np.fill_diagonal(d, 0.0)
    return d, index


@renamed(positional=("dims",))
def classical_mds(distances: np.ndarray, *, dims: int = 2) -> np.ndarray:
    """Classical (Torgerson) scaling: ``[N, N]`` distances → ``[N, dims]`` coordinates.

    Double-centres the squared distances and keeps the top eigenvectors; exact (up to
    rotation, reflection and translation) when the distances are Euclidean in ``dims``
    dimensions. Negative eigenvalues (non-Euclidean input) are clipped to 0.

    Parameters
    ----------
    distances : numpy.ndarray
        ``[N, N]`` symmetric distances.
    dims : int
        Dimensions of the embedding.

    Returns
    -------
    numpy.ndarray
        Float64 ``[N, dims]`` coordinates.

    Examples
    --------
    >>> import numpy as np
    >>> from scipy.spatial.distance import pdist
    >>> from attnkit.analysis import classical_mds
    >>> x = classical_mds(np.array([[0, 3, 4], [3, 0, 5], [4, 5, 0.0]]))  # a 3-4-5 triangle
    >>> np.round(pdist(x), 6).tolist()
    [3.0, 4.0, 5.0]
    """
    dims = validate.size(dims, "dims")
    d2 = np.asarray(distances, dtype=np.float64) ** 2
    n = d2.shape[0]
    j = np.eye(n) - 1.0 / n
    b = -0.5 * j @ d2 @ j
    vals, vecs = np.linalg.eigh(b)
    top = np.argsort(vals)[::-1][:dims]
    return vecs[:, top] * np.sqrt(np.clip(vals[top], 0.0, None))


def _pairwise(x: np.ndarray) -> np.ndarray:
    sq = (x * x).sum(1)
    d2 = sq[:, None] + sq[None, :] - 2 * x @ x.T
    return np.sqrt(np.clip(d2, 0.0, None))


def _stress(d: np.ndarray, x: np.ndarray) -> float:
    return float(((d - _pairwise(x)) ** 2).sum() / 2)


def _smacof(d: np.ndarray, x: np.ndarray, max_iter: int, tol: float) -> tuple[np.ndarray, float]:
    """Metric SMACOF (de Leeuw 1977): Guttman transforms until raw stress stops falling."""
    n = d.shape[0]
    stress = _stress(d, x)
    for _ in range(max_iter):
        dist = _pairwise(x)
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(dist > 0, d / dist, 0.0)
        b = -ratio
        np.fill_diagonal(b, 0.0)
        np.fill_diagonal(b, -b.sum(1))
        x = b @ x / n
        new = _stress(d, x)
        if stress - new <= tol * max(stress, 1e-300):
            stress = new
            break
        stress = new
    return x, stress


def embed_heads(
    distances: HeadResult | pd.DataFrame | np.ndarray,
    *,
    seed: int = 0,
    n_init: int = 4,
    max_iter: int = 500,
    tol: float = 1e-9,
) -> Result:
    """Place heads in 2-D so that Euclidean distances follow ``distances`` (metric MDS).

    Minimises the raw stress Σ_{i<j} (d_ij − ‖x_i − x_j‖)² with SMACOF, started from
    classical scaling and from ``n_init - 1`` random configurations (numpy generator
    seeded with ``seed``), keeping the lowest stress. The result is centred and rotated
    onto its principal axes (x = widest spread) with signs fixed, so the same input gives
    the same picture.

    Parameters
    ----------
    distances : HeadResult, DataFrame or array
        ``[N, N]`` symmetric, non-negative (a :func:`head_distances` result or an array).
    seed : int
        Seed of the random starts.
    n_init : int
        Starts: classical scaling plus ``n_init - 1`` random configurations.
    max_iter, tol : int, float
        SMACOF iterations per start, and the relative stress change that stops them.

    Returns
    -------
    HeadResult or Result
        ``table`` with columns ``x``, ``y``, one row per head, indexed like ``distances``:
        a :class:`HeadResult` for :func:`head_distances` output ((layer, head) index), a
        :class:`Result` indexed 0…N-1 for a bare array. ``meta["stress"]`` is the raw
        stress, ``meta["stress1"]`` Kruskal's normalised stress √(stress / Σ d²).
        ``plot()`` draws the heads coloured by layer (paper Fig. 6).

    Raises
    ------
    InputError
        When ``distances`` is not square, symmetric, finite and non-negative, or has fewer
        than 3 heads.

    Examples
    --------
    >>> import numpy as np, attnkit as ak
    >>> square = np.array([[0, 1, 1, 1.414], [1, 0, 1.414, 1], [1, 1.414, 0, 1], [1.414, 1, 1, 0]])
    >>> emb = ak.embed_heads(square)
    >>> bool(emb.meta["stress1"] < 1e-3)  # a square fits in the plane exactly
    True
    """
    seed = validate.seed(seed)
    n_init = validate.size(n_init, "n_init")
    max_iter = validate.size(max_iter, "max_iter")
    d, index = _as_square(distances)
    if n_init < 1:
        raise InputError(f"n_init must be at least 1, not {n_init}.")
    rng = np.random.default_rng(seed)
    scale = float(d.max()) or 1.0
    starts = [classical_mds(d)]
    starts += [rng.normal(scale=scale, size=(d.shape[0], 2)) for _ in range(n_init - 1)]
    best_x, best_stress = starts[0], np.inf
    for x0 in starts:
        x, stress = _smacof(d, x0, max_iter, tol)
        if stress < best_stress:
            best_x, best_stress = x, stress
    x = best_x - best_x.mean(0)
    _, _, vt = np.linalg.svd(x, full_matrices=False)
    x = x @ vt.T
    # Sign convention: the point farthest along each axis lies on its positive side.
    for k in range(2):
        if x[np.argmax(np.abs(x[:, k])), k] < 0:
            x[:, k] = -x[:, k]
    out = pd.DataFrame(x, index=index.copy(), columns=["x", "y"])
    denom = float((d[np.triu_indices_from(d, 1)] ** 2).sum())
    meta = {"stress": best_stress, "stress1": float(np.sqrt(best_stress / denom)) if denom else 0.0}
    if list(out.index.names) == ["layer", "head"]:
        return HeadResult(out, meta, plot="head_embedding")
    return Result(out, meta)


# ----------------------------------------------------------------- behaviours
def uniform_entropy(attentions: Attentions) -> float:
    """Mean row entropy (nats) of uniform attention over the same items: the Fig. 4
    baseline and the yardstick of "broad" heads.

    Every row attends uniformly to all positions it can see: all ``n`` of its item (so its
    entropy is ln n), or, for a causal model, the ``q + 1`` positions up to itself. Rows
    are averaged per item, then items averaged, as :func:`attnkit.head_stats` does.

    Parameters
    ----------
    attentions : Attention or iterable of Attention
        The corpus (only lengths and ``causal`` are read).

    Returns
    -------
    float
        Nats.

    Raises
    ------
    InputError
        When there is no attention.

    Examples
    --------
    >>> import numpy as np, attnkit as ak
    >>> maps = np.zeros((1, 2, 4, 4))
    >>> maps[0, 0, :, 3] = 1  # head 0: every row attends to [SEP]
    >>> maps[0, 1] = 0.25  # head 1: uniform
    >>> att = ak.Attention.from_maps(maps, ["[CLS]", "a", "b", "[SEP]"])
    >>> round(ak.analysis.uniform_entropy([att]), 4)  # ln 4
    1.3863
    """
    total, count = 0.0, 0
    for att in as_collection(attentions):
        if len(att) == 0:
            continue
        total += uniform_row_entropy(att)
        count += 1
    if count == 0:
        raise InputError("uniform_entropy() got no attention.")
    return total / count


def head_behaviours(
    stats: HeadResult | pd.DataFrame,
    *,
    uniform_entropy: float | None = None,
    special: float = 0.6,
    position: float = 0.5,
    broad: float = 0.78,
) -> pd.Series:
    """Label each head with the behaviour Clark et al. (2019, Fig. 6) colour it by.

    Parameters
    ----------
    stats : output of :func:`attnkit.head_stats` (columns ``cls``, ``sep``, ``punct``,
        ``prev``, ``next``, ``entropy``; index (layer, head)).
    uniform_entropy : mean entropy of uniform attention on the same corpus
        (:func:`uniform_entropy`); taken from ``stats.meta["uniform_entropy"]`` when
        omitted.
    special : a head attends to [CLS], [SEP] or punctuation when its mean attention to
        it exceeds this (the paper's 0.6).
    position : a head attends to the previous/next position when its mean attention there
        exceeds this (the paper's 0.5).
    broad : a head attends broadly when its mean row entropy exceeds ``broad`` times the
        uniform entropy. The paper used an absolute 3.8 nats on 128-token Wikipedia
        segments, where uniform attention has ln 128 = 4.85 nats: 3.8 / 4.85 ≈ 0.78. A
        relative threshold carries over to corpora of other lengths (EWT sentences are
        much shorter).

    Returns
    -------
    pandas.Series
        Categorical, indexed like ``stats``, with categories :data:`BEHAVIOURS`. When
        several tests pass, the first in that order wins (punctuation, [SEP], [CLS], broad,
        previous, next) — the paper's plotting order, last drawn on top. Unlike the paper,
        punctuation means any all-punctuation word (``Attention.punct``), not just "." and
        ",".

    Raises
    ------
    InputError
        When ``stats`` lacks a column, the uniform entropy is unknown, or a threshold is
        outside [0, 1].

    Examples
    --------
    >>> import numpy as np, attnkit as ak
    >>> maps = np.zeros((1, 2, 4, 4))
    >>> maps[0, 0, :, 3] = 1  # head 0: every row attends to [SEP]
    >>> maps[0, 1] = 0.25  # head 1: uniform
    >>> att = ak.Attention.from_maps(maps, ["[CLS]", "a", "b", "[SEP]"])
    >>> ak.head_behaviours(ak.head_stats([att], progress=False)).tolist()
    ['[SEP]', 'broad']
    """
    stats, meta = table_and_meta(stats)
    need = {"cls", "sep", "punct", "prev", "next", "entropy"}
    missing = need - set(getattr(stats, "columns", []))
    if missing:
        raise InputError(
            f"head_behaviours() needs head_stats() output; columns {sorted(missing)} are missing."
        )
    if uniform_entropy is None:
        uniform_entropy = meta.get("uniform_entropy")
    if uniform_entropy is None:
        raise InputError(
            "head_behaviours() needs the entropy of uniform attention on the same corpus to "
            "judge broad heads: pass uniform_entropy=attnkit.analysis.uniform_entropy(attentions)."
        )
    for name, v in (("special", special), ("position", position), ("broad", broad)):
        if not 0 <= v <= 1:
            raise InputError(f"{name} must lie between 0 and 1, not {v}.")
    tests = [
        stats["punct"] > special,
        stats["sep"] > special,
        stats["cls"] > special,
        stats["entropy"] > broad * float(uniform_entropy),
        stats["prev"] > position,
        stats["next"] > position,
    ]
    labels = np.select([t.to_numpy() for t in tests], list(BEHAVIOURS[:-1]), default="other")
    return pd.Series(pd.Categorical(labels, categories=list(BEHAVIOURS)), index=stats.index,
                     name="behaviour")
