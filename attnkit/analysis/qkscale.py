"""Query–key space at corpus scale: fit a projection on a stratified sample, place the rest,
and measure how much of each point's neighbourhood the picture keeps.

:func:`attnkit.qk_embedding` with ``sample=`` fits UMAP, t-SNE or PCA on a sample of a
head's queries and keys (:func:`stratified_sample`: queries and keys in proportion, every
position range, spread evenly over the items) and places every other point from the fitted
ones (:func:`place_knn`: on the picture of its nearest fitted point in the normalised
query–key space, spread by the picture's local linear map there; or the estimator's own
``transform``). :func:`neighbourhood_preservation` measures the result: the share of each
point's ``k`` nearest neighbours in one picture (or space) that are also among its ``k``
nearest in another.
"""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np

from .._progress import progress as _bar
from ..core import validate
from ..errors import InputError

#: Points (queries and keys of one head) above which ``sample="auto"`` fits on a sample.
AUTO_ABOVE = 20_000
#: The sample ``sample="auto"`` fits on (points), when it samples at all.
AUTO_SAMPLE = 5_000
#: Fitted neighbours each local linear map of :func:`place_knn` is fitted on.
PLACE_K = 30
#: The share of the local map's offset :func:`place_knn` applies (chosen on EWT dev).
PLACE_STEP = 0.05
#: Points placed per chunk (bounded memory: ``chunk x k`` distances and indices).
CHUNK = 16_384


def position_bins(positions: np.ndarray) -> np.ndarray:
    """The position range of each position: 0, 1, 2-3, 4-7, ... (``floor(log2(p + 1))``).

    Parameters
    ----------
    positions : ndarray
        Int ``[N]`` positions (0-indexed).

    Returns
    -------
    ndarray
        Int ``[N]`` range numbers.

    Examples
    --------
    >>> import numpy as np
    >>> from attnkit.analysis.qkscale import position_bins
    >>> position_bins(np.array([0, 1, 2, 3, 4, 7, 8])).tolist()
    [0, 1, 1, 2, 2, 3, 3]
    """
    p = np.asarray(positions, dtype=np.int64)
    return np.floor(np.log2(p + 1.0)).astype(np.int64)


def stratified_sample(strata: np.ndarray, size: int, *, seed: int = 0) -> np.ndarray:
    """Indices of a stratified systematic sample of ``size`` rows.

    Each stratum gets its share of ``size`` in proportion to its rows (largest remainders,
    so the shares add up to ``size``); within a stratum the rows are taken at evenly spaced
    ranks of their order (with a seeded random start), so every stretch of the data — every
    range of items, for rows in item order — gets its share too.

    Parameters
    ----------
    strata : ndarray
        Int ``[N]`` stratum of each row (e.g. kind x position range).
    size : int
        Rows to take, ``1 <= size <= N``.
    seed : int
        The only source of randomness (the starts).

    Returns
    -------
    ndarray
        Sorted int ``[size]`` row indices, no repeats.

    Raises
    ------
    InputError
        For ``size`` below 1 or above the number of rows.

    Examples
    --------
    >>> import numpy as np
    >>> from attnkit.analysis.qkscale import stratified_sample
    >>> strata = np.array([0] * 8 + [1] * 4)
    >>> idx = stratified_sample(strata, 6)
    >>> len(idx), int((strata[idx] == 0).sum()), int((strata[idx] == 1).sum())
    (6, 4, 2)
    """
    s = np.asarray(strata).reshape(-1)
    n = len(s)
    size = int(size)
    if not 1 <= size <= n:
        raise InputError(f"sample={size} must be between 1 and the {n} points there are "
                         "(queries and keys together); pass a smaller sample, or sample=None "
                         "to fit on every point.")
    values, inverse, counts = np.unique(s, return_inverse=True, return_counts=True)
    quota = counts * (size / n)
    take = np.floor(quota).astype(np.int64)
    short = size - int(take.sum())
    if short:
        order = np.lexsort((np.arange(len(values)), -(quota - take)))
        take[order[:short]] += 1
    rng = np.random.default_rng(seed)
    rows_of = np.argsort(inverse, kind="stable")
    starts = np.concatenate([[0], np.cumsum(counts)])
    out = []
    for j in range(len(values)):
        if take[j] == 0:
            continue
        rows = rows_of[starts[j]:starts[j + 1]]
        ranks = np.floor((rng.random() + np.arange(take[j])) * (counts[j] / take[j])).astype(np.int64)
        out.append(rows[np.minimum(ranks, counts[j] - 1)])
    return np.sort(np.concatenate(out))


def nearest(points: np.ndarray, reference: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` nearest rows of ``reference`` to each row of ``points`` (Euclidean, exact).

    scikit-learn's brute-force search (blocked, multi-threaded over the cores).

    Parameters
    ----------
    points : ndarray
        ``[N, d]``.
    reference : ndarray
        ``[M, d]``, ``M >= k``.
    k : int
        Neighbours.

    Returns
    -------
    tuple of ndarray
        Distances and indices ``[N, k]``, nearest first.

    Examples
    --------
    >>> import numpy as np
    >>> from attnkit.analysis.qkscale import nearest
    >>> d, i = nearest(np.array([[0.1, 0.0]]), np.array([[0.0, 0.0], [1.0, 0.0], [5.0, 5.0]]), 2)
    >>> i.tolist()
    [[0, 1]]
    """
    from sklearn.neighbors import NearestNeighbors

    nn = NearestNeighbors(n_neighbors=k, algorithm="brute").fit(np.asarray(reference, dtype=np.float32))
    d, i = nn.kneighbors(np.asarray(points, dtype=np.float32))
    return d, i


_CONTROLLER: list[Any] = []


def one_thread() -> Any:
    """A context in which BLAS runs on one thread: the searches below multiply small blocks,
    where a second BLAS thread costs more in waiting than it gains (and the caller may run
    one search a core). The libraries are looked up once a process."""
    if not _CONTROLLER:
        try:
            from threadpoolctl import ThreadpoolController
        except ImportError:  # pragma: no cover - scikit-learn brings it
            _CONTROLLER.append(None)
        else:
            _CONTROLLER.append(ThreadpoolController())
    if _CONTROLLER[0] is None:  # pragma: no cover
        return contextlib.nullcontext()
    return _CONTROLLER[0].limit(limits=1, user_api="blas")


def nearest_index(points: np.ndarray, reference: np.ndarray, *, chunk: int = 64) -> np.ndarray:
    """The nearest row of ``reference`` to each row of ``points`` (Euclidean, exact; the
    lowest row among exact ties).

    Candidates come from a float32 search (one matrix product a block of points, on one
    BLAS thread, the block's distances kept in cache); only the points whose runner-up lies
    within the float32 rounding bound of the best are settled in float64, among those
    candidates alone.

    Parameters
    ----------
    points : ndarray
        ``[N, d]``.
    reference : ndarray
        ``[M, d]``, ``M >= 1``.
    chunk : int
        Points searched at a time (memory: ``chunk x M`` float32 distances).

    Returns
    -------
    ndarray
        Int ``[N]`` row numbers of ``reference``.

    Examples
    --------
    >>> import numpy as np
    >>> from attnkit.analysis.qkscale import nearest_index
    >>> ref = np.array([[0.0, 0.0], [1.0, 0.0], [1.0, 0.0]])
    >>> nearest_index(np.array([[0.9, 0.1], [-1.0, 0.0]]), ref).tolist()   # a tie: the lower row
    [1, 0]
    """
    chunk = validate.integer(chunk, "chunk", minimum=1)
    x = np.asarray(points)
    r64 = np.asarray(reference, dtype=np.float64)
    rn = np.einsum("md,md->m", r64, r64)
    rmax = float(np.sqrt(rn.max())) if len(rn) else 0.0
    # [x, 1] . [-2 r, |r|^2]: the squared distance less |x|^2 (the same for a row), one product
    right = np.ascontiguousarray(np.vstack([-2.0 * r64.T, rn[None, :]]), dtype=np.float32)
    left = np.empty((chunk, r64.shape[1] + 1), dtype=np.float32)
    left[:, -1] = 1.0
    out = np.empty(len(x), dtype=np.int64)
    # float32 rounding of the product and the sums: a few d x 2^-24 of (|x| + |r|)^2
    rel = 1e-6 * (4 + x.shape[1] if x.ndim == 2 else 4)
    with one_thread():
        for a in range(0, len(x), chunk):
            xb = np.asarray(x[a:a + chunk])
            lb = left[:len(xb)]
            lb[:, :-1] = xb
            g = lb @ right
            best = g.argmin(1)
            lo = g[np.arange(len(g)), best]
            xb64 = xb.astype(np.float64)
            tol = rel * (np.sqrt(np.einsum("nd,nd->n", xb64, xb64)) + rmax) ** 2
            close = g <= (lo + tol)[:, None]
            rows = np.flatnonzero(np.count_nonzero(close, axis=1) > 1)
            out[a:a + len(g)] = best
            if len(rows):
                ri, ci = np.nonzero(close[rows])
                diff = xb64[rows[ri]] - r64[ci]
                d2 = np.einsum("nd,nd->n", diff, diff)
                order = np.lexsort((ci, d2, ri))
                first = np.concatenate([[True], ri[order][1:] != ri[order][:-1]])
                out[a + rows[ri[order][first]]] = ci[order][first]
    return out


class KnnPlacer:
    """The placement of :func:`place_knn` prepared once (the fitted points' local linear
    maps), to place points chunk by chunk as they are read.

    Parameters
    ----------
    fitted : ndarray
        ``[M, d]`` the points the picture was fitted on.
    coords : ndarray
        ``[M, dims]`` their pictures.
    k, step, chunk
        As :func:`place_knn`.

    Examples
    --------
    >>> import numpy as np
    >>> from attnkit.analysis.qkscale import KnnPlacer
    >>> fitted = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    >>> KnnPlacer(fitted, 10 * fitted, k=3, step=1.0).place(np.array([[0.2, 0.0]])).round(1).tolist()
    [[1.8, 0.1]]
    """

    def __init__(self, fitted: np.ndarray, coords: np.ndarray, *, k: int = PLACE_K,
                 step: float = PLACE_STEP, chunk: int = CHUNK) -> None:
        from sklearn.neighbors import NearestNeighbors

        f = np.asarray(fitted, dtype=np.float32)
        c = np.asarray(coords, dtype=np.float64)
        m = len(f)
        k = min(int(k), m - 1)
        jac = np.zeros((m, f.shape[1], c.shape[1]))
        if k >= 1 and step != 0:
            _, nb = NearestNeighbors(n_neighbors=k + 1, algorithm="brute").fit(f).kneighbors(f)
            jac = np.empty((m, f.shape[1], c.shape[1]))
            for a in range(0, m, chunk):
                rows = nb[a:a + chunk]
                own = np.arange(a, a + len(rows))
                # a point's own row among its neighbours (or a duplicate of it) adds nothing
                dx = f[rows].astype(np.float64) - f[own, None, :]
                dy = c[rows] - c[own, None, :]
                g = np.einsum("smd,sme->sde", dx, dx)
                ridge = 0.1 * np.trace(g, axis1=1, axis2=2) / f.shape[1] + 1e-300
                g += ridge[:, None, None] * np.eye(f.shape[1])
                jac[a:a + chunk] = np.linalg.solve(g, np.einsum("smd,smc->sdc", dx, dy))
        self.fitted, self.coords, self.jac, self.step = f, c, jac, float(step)

    def place(self, points: np.ndarray) -> np.ndarray:
        """Float32 ``[N, dims]`` pictures of ``points`` (``[N, d]``)."""
        x = np.asarray(points, dtype=np.float32)
        near = nearest_index(x, self.fitted)
        off = x.astype(np.float64) - self.fitted[near]
        return (self.coords[near] + self.step * np.einsum("nd,ndc->nc", off, self.jac[near])).astype(np.float32)


def place_knn(fitted: np.ndarray, coords: np.ndarray, points: np.ndarray, *, k: int = PLACE_K,
              step: float = PLACE_STEP, chunk: int = CHUNK, progress: bool = False) -> np.ndarray:
    """Place ``points`` in a picture fitted on other points: each lands on the picture of its
    nearest fitted point, moved by ``step`` times the image of its offset from that point
    under the picture's local linear map there.

    The local linear map of a fitted point is the ridge least-squares map from the offsets of
    its ``k`` nearest fitted neighbours (in the space) to the offsets of their pictures
    (ridge penalty a tenth of the mean eigenvalue of the offsets' scatter matrix). With ``step`` 1 a point would land where the
    local map puts it, with 0 on its nearest fitted point: the points that share a nearest
    fitted point are spread around its picture in the order of their offsets, and a point
    equal to a fitted one lands exactly on it. The step was chosen on UD English EWT dev
    (docs/benchmarks.md, ``## qk``): it kept the most neighbourhoods. The nearest fitted
    point is found exactly (:func:`nearest_index`).

    Parameters
    ----------
    fitted : ndarray
        ``[M, d]`` the points the picture was fitted on (the space the neighbours are
        found in: the normalised queries and keys).
    coords : ndarray
        ``[M, dims]`` their pictures.
    points : ndarray
        ``[N, d]`` the points to place.
    k : int
        Fitted neighbours each local map is fitted on (at most ``M - 1``).
    step : float
        The share of the local map's offset applied.
    chunk : int
        Points placed at a time (memory: ``chunk x d``).
    progress : bool
        Show a progress bar over the chunks placed.

    Returns
    -------
    ndarray
        Float32 ``[N, dims]``.

    Examples
    --------
    >>> import numpy as np
    >>> from attnkit.analysis.qkscale import place_knn
    >>> fitted = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    >>> coords = 10 * fitted                        # a picture that scales the space by 10
    >>> place_knn(fitted, coords, np.array([[1.0, 1.0], [0.2, 0.0]]), k=3, step=1.0).round(1).tolist()
    [[10.0, 10.0], [1.8, 0.1]]
    """
    chunk = validate.integer(chunk, "chunk", minimum=1)
    placer = KnnPlacer(fitted, coords, k=k, step=step, chunk=chunk)
    out = np.empty((len(points), placer.coords.shape[1]), dtype=np.float32)
    starts = range(0, len(points), chunk)
    for a in _bar(starts, show=progress, desc="placing points", unit="chunk"):
        out[a:a + chunk] = placer.place(points[a:a + chunk])
    return out


class RunningNeighbours:
    """The ``k`` nearest of all points seen so far to each of a few fixed points, kept while
    the points stream past chunk by chunk (memory: ``len(queries) x k``, whatever the number
    of points): :func:`neighbourhood_preservation` of a corpus that is never held whole.

    Each chunk is searched in float32 (one matrix product); only the points closer than a
    fixed point's current ``k``-th neighbour (plus the float32 rounding bound) are measured
    again in float64 and merged, so after the first chunks little is merged.

    Parameters
    ----------
    queries : ndarray
        ``[E, d]`` the fixed points (float64).
    ids : ndarray
        Int ``[E]`` their own point numbers (a point is not its own neighbour).
    k : int
        Neighbours kept.

    Examples
    --------
    >>> import numpy as np
    >>> from attnkit.analysis.qkscale import RunningNeighbours
    >>> x = np.array([[0.0], [1.0], [3.0], [0.5]])
    >>> run = RunningNeighbours(x[[0]], np.array([0]), k=2)
    >>> run.add(x[:2], np.arange(2)); run.add(x[2:], np.arange(2, 4))
    >>> run.result().tolist()
    [[3, 1]]
    """

    def __init__(self, queries: np.ndarray, ids: np.ndarray, k: int) -> None:
        self.q = np.asarray(queries, dtype=np.float64)
        # [-2 q, 1] . [x, |x|^2]: the squared distance less |q|^2, one product
        self.left = np.ascontiguousarray(np.hstack([-2.0 * self.q, np.ones((len(self.q), 1))]),
                                         dtype=np.float32)
        self.qn = np.einsum("ed,ed->e", self.q, self.q)
        self.qnorm = np.sqrt(self.qn)
        self.ids = np.asarray(ids, dtype=np.int64)
        self.k = int(k)
        self.d = np.full((len(self.q), self.k), np.inf)
        self.i = np.full((len(self.q), self.k), -1, dtype=np.int64)
        self.rel = 1e-6 * (4 + self.q.shape[1])

    def add(self, points: np.ndarray, ids: np.ndarray) -> None:
        """Take ``points`` (``[n, d]``) numbered ``ids`` (``[n]``) into account."""
        x = np.asarray(points, dtype=np.float64)
        ids = np.asarray(ids, dtype=np.int64)
        if not len(x) or not len(self.q):
            return
        xn = np.einsum("nd,nd->n", x, x)
        right = np.empty((x.shape[1] + 1, len(x)), dtype=np.float32)
        right[:-1] = x.T
        right[-1] = xn
        with one_thread():
            g = self.left @ right  # [E, n]
        worst = self.d.max(1) - self.qn  # the k-th neighbour so far, on g's scale
        tol = self.rel * (self.qnorm + np.sqrt(xn.max())) ** 2
        er, xc = np.nonzero(g <= (worst + tol)[:, None])
        keep = ids[xc] != self.ids[er]
        er, xc = er[keep], xc[keep]
        if not len(er):
            return
        diff = self.q[er] - x[xc]
        d2 = np.einsum("nd,nd->n", diff, diff)
        rows, start, count = np.unique(er, return_index=True, return_counts=True)
        width = self.k + int(count.max())
        dd = np.full((len(rows), width), np.inf)
        ii = np.full((len(rows), width), np.iinfo(np.int64).max)
        dd[:, :self.k], ii[:, :self.k] = self.d[rows], np.where(self.i[rows] < 0, ii[:, :self.k], self.i[rows])
        slot = self.k + np.arange(len(er)) - np.repeat(start, count)
        row_of = np.repeat(np.arange(len(rows)), count)
        dd[row_of, slot], ii[row_of, slot] = d2, ids[xc]
        order = np.lexsort((ii, dd), axis=1)[:, :self.k]
        self.d[rows] = np.take_along_axis(dd, order, 1)
        got = np.take_along_axis(ii, order, 1)
        self.i[rows] = np.where(got == np.iinfo(np.int64).max, -1, got)

    def result(self) -> np.ndarray:
        """Int ``[E, k]`` the nearest point numbers, nearest first (ties by number)."""
        return self.i.copy()


def neighbourhood_preservation(a: np.ndarray, b: np.ndarray, *, k: int = 10, n_eval: int = 1000,
                               seed: int = 0) -> float:
    """The share of each point's ``k`` nearest neighbours in ``a`` that are also among its
    ``k`` nearest neighbours in ``b``, averaged over ``n_eval`` seeded points.

    ``a`` and ``b`` are two descriptions of the same points, row for row: a sampled
    projection and the full one, or a projection and the normalised query–key space.
    Neighbours are searched among *all* rows (exactly; a point is not its own neighbour).
    1.0: every neighbourhood kept; about ``k / N``: no better than chance.

    Parameters
    ----------
    a, b : ndarray
        ``[N, da]`` and ``[N, db]``, the same points in the same order.
    k : int
        Neighbours, ``1 <= k < N``.
    n_eval : int
        Points whose neighbourhoods are compared (all when ``N`` is smaller).
    seed : int
        The only source of randomness (which points).

    Returns
    -------
    float
        In ``[0, 1]``.

    Raises
    ------
    InputError
        When ``a`` and ``b`` hold different numbers of rows, or ``k`` is not below it.

    Examples
    --------
    >>> import numpy as np
    >>> from attnkit.analysis.qkscale import neighbourhood_preservation
    >>> x = np.random.default_rng(0).normal(size=(200, 5))
    >>> neighbourhood_preservation(x, 3 * x + 1, k=5)          # the same neighbours
    1.0
    """
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.ndim != 2 or b.ndim != 2 or len(a) != len(b):
        raise InputError(f"a and b must describe the same points row for row: shapes {a.shape} "
                         f"and {b.shape}.")
    n = len(a)
    k = validate.integer(k, "k")
    if not 1 <= k < n:
        raise InputError(f"k={k} must be at least 1 and below the {n} points.")
    n_eval = validate.integer(n_eval, "n_eval", minimum=1)
    rng = np.random.default_rng(validate.seed(seed))
    ev = np.sort(rng.choice(n, size=min(n_eval, n), replace=False))
    return shared_share(neighbours(a, ev, k), neighbours(b, ev, k))


def shared_share(na: np.ndarray, nb: np.ndarray) -> float:
    """The mean share of each row of ``na`` found in the same row of ``nb``.

    Parameters
    ----------
    na, nb : ndarray
        Int ``[E, k]`` neighbour lists of the same points (each row without repeats).

    Returns
    -------
    float
        In ``[0, 1]``.

    Examples
    --------
    >>> import numpy as np
    >>> from attnkit.analysis.qkscale import shared_share
    >>> shared_share(np.array([[1, 2], [3, 4]]), np.array([[2, 1], [3, 5]]))
    0.75
    """
    same = [len(np.intersect1d(x, y, assume_unique=True)) for x, y in zip(na, nb)]
    return float(np.mean(same) / na.shape[1])


def neighbours(x: np.ndarray, ev: np.ndarray, k: int) -> np.ndarray:
    """The ``k`` nearest rows of ``x`` to rows ``ev`` (themselves excluded; ties broken by
    row number, so identical points count in a fixed order).

    Parameters
    ----------
    x : ndarray
        ``[N, d]`` float64 points (a k-d tree for ``d <= 3``, a brute-force search above).
    ev : ndarray
        Int ``[E]`` the rows whose neighbours are wanted.
    k : int
        Neighbours, ``k < N``.

    Returns
    -------
    ndarray
        Int ``[E, k]``, nearest first.

    Examples
    --------
    >>> import numpy as np
    >>> from attnkit.analysis.qkscale import neighbours
    >>> neighbours(np.array([[0.0], [1.0], [3.0], [0.5]]), np.array([0]), 2).tolist()
    [[3, 1]]
    """
    if x.shape[1] <= 3:
        from scipy.spatial import cKDTree

        _, idx = cKDTree(x).query(x[ev], k + 1 + 8, workers=-1)
        idx = np.asarray(idx)
    else:
        _, idx = nearest(x[ev], x, min(k + 1 + 8, len(x)))
    out = np.empty((len(ev), k), dtype=np.int64)
    for r, (row, cand) in enumerate(zip(ev, idx)):
        cand = cand[(cand != row) & (cand < len(x))]
        out[r] = cand[:k]
    return out
