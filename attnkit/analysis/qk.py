"""Query–key space: the queries and keys of a head embedded together (Yeh et al. 2023).

AttentionViz (Yeh, Chen, Kim, Wattenberg, Viégas, Wattenberg, *AttentionViz: A Global View of
Transformer Attention*, IEEE VIS 2023) draws, for one head, every token's query and every
token's key as points of one 2-D (or 3-D) projection, so that a query lands near the keys it
attends to. :func:`qk_embedding` does this for any model attnkit captures, on one input or a
stored corpus: per head it

1. *normalises* the head's queries and keys (AttentionViz §4.1): translate the keys so their
   mean equals the queries' mean, then scale queries by ``c`` and keys by ``1 / c`` so that
   their mean norms match. Neither changes any attention weight: with ``t`` the translation,
   ``(c q) . ((k + t) / c) = q . k + q . t``, and ``q . t`` is the same for every key of a
   row, which the row's softmax removes;
2. projects queries and keys *together* with UMAP (umap-learn), t-SNE (openTSNE) or PCA;
3. scores how faithful the picture is (:func:`qk_faithfulness`): per row, the rank
   correlation between the attention weight of each key and the closeness of the query to
   it in the picture; the share of rows whose nearest key in the picture is the key they
   attend to most; and the same share in the original ``d``-dimensional space.

The attention weights the scores compare against are recomputed from the queries and keys
(:func:`attnkit.core.qkstates.scores`: softmax of the scaled scores, causal rows masked), equal to
the maps up to float rounding (float16 in a store) for models without a position bias or
learned sinks.
"""

from __future__ import annotations

import importlib
import time
import warnings
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .._progress import progress as _bar
from ..core import validate
from ..core.labels import head_label
from ..errors import AttnkitError, ClusterError, InputError, StoreError
from ..core.qkstates import QKStates, scores
from ..core.results import HeadResult, Result
from ..core.types import as_collection
from . import qkscale

#: Projection methods and the package each needs.
METHODS = {"umap": "umap", "tsne": "openTSNE", "pca": None}
#: Fewest distinct points (queries and keys together) each method projects.
MIN_POINTS = {"umap": 10, "tsne": 10, "pca": 3}
#: How points outside the fitted sample are placed: by their nearest fitted point's picture
#: and the local linear map there (:func:`~attnkit.analysis.qkscale.place_knn`), or
#: the fitted estimator's own ``transform`` (PCA is always placed by its linear map).
PLACEMENTS = {"knn": (f"on the picture of the nearest fitted point (normalised query-key space), moved by "
                     f"{qkscale.PLACE_STEP} x the local linear map (ridge, {qkscale.PLACE_K} nearest "
                     "fitted points) of the offset"),
              "transform": "the fitted estimator's own transform"}
#: Neighbours and evaluated points of the neighbourhood preservation every embedding reports.
QUALITY_K, QUALITY_EVAL = 10, 1000
#: Bytes of raw query and key vectors one pass over a store gathers (the chosen heads are
#: read in groups that fit; each group is one pass).
GATHER_BYTES = 1 << 30
#: The file that marks a folder of per-head results as written by :func:`qk_embedding`
#: (``save=``), and its format.
SAVE_MARKER, SAVE_FORMAT = "attnkit-qk-embedding.json", "attnkit-qk-embedding/1"
#: Columns of :attr:`QKEmbedding.table`, before any joined by the user.
COLUMNS = ("layer", "head", "item", "position", "token", "role", "kind", "x", "y", "z")


# ------------------------------------------------------------------ normalisation
def normalize_qk(queries: np.ndarray, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """AttentionViz's normalisation of one head's queries and keys (rows are points).

    Keys are translated so their mean equals the queries' mean; then queries are scaled by
    ``c`` and keys by ``1 / c`` with ``c = sqrt(mean |k| / mean |q|)``, so that both have
    the same mean norm. Every attention weight is unchanged: ``q' . k' = q . k + q . t``
    (``t`` the translation), and ``q . t`` is a constant of each row that its softmax
    removes; the scaling leaves every score as it was.

    Parameters
    ----------
    queries : ndarray
        ``[N, d]`` query vectors.
    keys : ndarray
        ``[M, d]`` key vectors.

    Returns
    -------
    tuple of ndarray
        Normalised ``(queries, keys)``, float64.

    Raises
    ------
    InputError
        When the queries or keys are all zero (no scale to match).

    Examples
    --------
    >>> import numpy as np
    >>> from attnkit.analysis.qk import normalize_qk
    >>> q, k = np.array([[2.0, 0.0], [0.0, 2.0]]), np.array([[10.0, 10.0], [12.0, 10.0]])
    >>> q2, k2 = normalize_qk(q, k)
    >>> mean_norm = lambda x: float(np.linalg.norm(x, axis=1).mean())
    >>> round(mean_norm(q2), 6) == round(mean_norm(k2), 6)     # norms match
    True
    >>> bool(np.allclose((q2 @ k2.T) - (q @ k.T), (q2 @ k2.T - q @ k.T)[:, :1]))  # shift per row
    True
    """
    q = np.asarray(queries, dtype=np.float64)
    k = np.asarray(keys, dtype=np.float64)
    k = k + (q.mean(0) - k.mean(0))
    nq, nk = np.linalg.norm(q, axis=1).mean(), np.linalg.norm(k, axis=1).mean()
    if not (nq > 0 and nk > 0):
        raise InputError("The queries or keys of this head are all zero: there is no scale to match.")
    c = np.sqrt(nk / nq)
    return q * c, k / c


# ------------------------------------------------------------------ sources
@dataclass
class _Item:
    """One input's positions; its queries and keys held (``held``) or read from ``store``
    when asked for (an embedding of a corpus keeps no item's vectors)."""

    item: int
    tokens: list[str]
    roles: np.ndarray
    causal: bool
    n_layers: int = 0
    held: QKStates | None = None
    store: Any = None

    @property
    def states(self) -> QKStates:
        return self.held if self.held is not None else self.store.qk_states(self.item)


def _is_store(attentions: Any) -> bool:
    from ..storage.corpus import AttentionSet

    if isinstance(attentions, AttentionSet):
        if not attentions.qk_layers:
            raise InputError(
                "This set keeps no queries and keys. Extract it with keep=('maps', 'qk') and "
                "level='token' (qk_layers= picks the layers)."
            )
        if len(attentions) == 0:
            raise InputError("qk_embedding got an empty set.")
        return True
    return False


def _sources(attentions: Any) -> list[_Item]:
    out = []
    items: Iterable[Any] = as_collection(attentions)  # Attention, LazyAttention: qk_states()
    for i, att in enumerate(items):
        try:
            st = att.qk_states()
        except (InputError, AttributeError) as exc:
            raise InputError(
                f"Item {i} keeps no queries and keys ({type(att).__name__}"
                + (", word level" if getattr(att, "level", "token") == "word" else "")
                + "). Use model.attend(text) at token level, or a store extracted with keep='qk'."
            ) from exc
        out.append(_Item(i, list(att.tokens), np.asarray(att.roles), bool(att.causal),
                         int(att.n_layers), held=st))
    if not out:
        raise InputError("qk_embedding got no inputs.")
    first = out[0]
    for it in out[1:]:
        if it.causal != first.causal or it.n_layers != first.n_layers or \
                it.states.layers != first.states.layers or \
                it.states.queries(it.states.layers[0]).shape[::2] != \
                first.states.queries(first.states.layers[0]).shape[::2]:
            raise InputError(
                f"attentions: item {it.item} does not come from the same model as item 0 (causal "
                f"{it.causal} vs {first.causal}, layers kept {it.states.layers} vs "
                f"{first.states.layers}); one query-key picture needs one model's heads."
            )
    return out


def _heads(layers: list[int], n_heads: int, n_layers: int,
           heads: Sequence[tuple[int, int]] | None) -> list[tuple[int, int]]:
    if heads is None:
        return [(l, h) for l in layers for h in range(n_heads)]
    n_layers = n_layers or (max(layers) + 1 if layers else 0)
    if not isinstance(heads, (str, bytes)) and isinstance(heads, Iterable):
        heads = list(heads)
    out = validate.head_pairs(heads, n_layers, n_heads)
    for l, h in out:
        if l not in layers:
            raise InputError(f"heads: layer {l} of head {(l, h)} is not among the layers whose "
                             f"queries and keys are kept: {layers} (0-indexed).")
    if not out:
        raise InputError("heads is empty; pass (layer, head) pairs or None for every head.")
    if len(out) < len(heads):  # head_pairs drops repeats; a repeat here is a mistake
        given = [validate.head_index(tuple(p)[0], tuple(p)[1], n_layers, n_heads, "heads") for p in heads]
        twice = sorted({x for x in given if given.count(x) > 1})
        raise InputError(f"heads names {twice} more than once; name each (layer, head) once.")
    return out


def _check_method(method: str, dims: int) -> None:
    if method not in METHODS:
        raise InputError(f"method must be one of {sorted(METHODS)}, not {method!r}.")
    if validate.integer(dims, "dims") not in (2, 3):
        raise InputError(f"dims must be 2 or 3, not {dims!r}.")
    package = METHODS[method]
    if package is not None:
        try:
            importlib.import_module(package)
        except ImportError:
            pip = {"umap": "umap-learn", "openTSNE": "openTSNE"}[package]
            raise InputError(
                f"method={method!r} needs the package {pip}, which is not installed: "
                f"pip install {pip} (or pip install 'attnkit[embed]'), or use method='pca'."
            ) from None


# ------------------------------------------------------------------ one head
@dataclass
class HeadPoints:
    """What one head's embedding is computed from (picklable, sent to Dask workers).

    Parameters
    ----------
    layer, head : int
        0-indexed.
    queries, keys : ndarray
        ``[N, d]`` float32: every position's query and key (items one after another).
    offsets : ndarray
        ``[items + 1]``: item ``i`` holds rows ``offsets[i]:offsets[i + 1]``.
    scaling : float
        The layer's score factor.
    softcap : float or None
        Logit soft-capping.
    causal : bool
        Rows see no later key.
    """

    layer: int
    head: int
    queries: np.ndarray
    keys: np.ndarray
    offsets: np.ndarray
    scaling: float
    softcap: float | None
    causal: bool

    def weights(self, i: int) -> np.ndarray:
        """Attention weights ``[n, n]`` of item ``i`` recomputed from its queries and keys."""
        a, b = self.offsets[i], self.offsets[i + 1]
        st = QKStates({0: self.queries[None, a:b]}, {0: self.keys[None, a:b]}, {0: self.scaling},
                      self.softcap)
        return scores(st, 0, 0, causal=self.causal)


def _checked(hp: HeadPoints) -> HeadPoints:
    if not (np.isfinite(hp.queries).all() and np.isfinite(hp.keys).all()):
        raise InputError(f"The queries or keys of head {(hp.layer, hp.head)} hold NaN or infinite "
                         "values; there is nothing to embed (check the model's dtype and inputs).")
    return hp


def _gather(items: list[_Item], layer: int, heads: list[int]) -> list[HeadPoints]:
    qs: dict[int, list[np.ndarray]] = {h: [] for h in heads}
    ks: dict[int, list[np.ndarray]] = {h: [] for h in heads}
    offsets = [0]
    for it in items:
        q, k = it.states.queries(layer), it.states.keys(layer)
        groups = q.shape[0] // k.shape[0]
        for h in heads:
            qs[h].append(q[h])
            ks[h].append(k[h // groups])
        offsets.append(offsets[-1] + q.shape[1])
    st = items[0].states
    return [_checked(HeadPoints(layer, h, np.concatenate(qs[h]).astype(np.float32),
                                np.concatenate(ks[h]).astype(np.float32),
                                np.asarray(offsets, dtype=np.int64), float(st.scaling[layer]),
                                st.softcap, items[0].causal)) for h in heads]


def _gather_store(aset: Any, chosen: list[tuple[int, int]], *, want_items: bool,
                  progress: bool) -> tuple[list[_Item], list[HeadPoints]]:
    """The chosen heads' queries and keys over a store, read batch by batch (one verified
    read of each batch's queries, keys and tokens; no batch kept), each item's rows put
    at its place in input order. Holds the chosen heads' vectors and one batch."""
    qk = aset.info["qk"]
    lengths = aset.items()["n"].to_numpy(dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    n, d = int(offsets[-1]), int(qk["dim"])
    groups = int(qk["heads"]) // int(qk["kv_heads"])
    qs = {lh: np.empty((n, d), dtype=np.float32) for lh in chosen}
    ks = {lh: np.empty((n, d), dtype=np.float32) for lh in chosen}
    items: list[_Item | None] = [None] * len(lengths)
    bar = _bar(range(aset.n_batches), show=progress, desc="reading queries and keys", unit="batch")
    for b in bar:
        idx, states = aset.qk_batch(b)
        for i, st in zip(idx, states):
            a, z = offsets[i], offsets[i + 1]
            for (l, h) in chosen:
                qs[(l, h)][a:z] = st.queries(l)[h]
                ks[(l, h)][a:z] = st.keys(l)[h // groups]
            if want_items:
                items[i] = _Item(int(i), list(st.tokens or []), np.asarray(st.roles), aset.causal,
                                 store=aset)
    scaling = dict(zip(qk["layers"], qk["scaling"]))
    hps = [_checked(HeadPoints(l, h, qs[(l, h)], ks[(l, h)], offsets, float(scaling[l]),
                               qk.get("softcap"), aset.causal)) for l, h in chosen]
    return [it for it in items if it is not None], hps


def store_head_points(attentions: Any, heads: Sequence[tuple[int, int]], *,
                      progress: bool = True) -> list[HeadPoints]:
    """The queries and keys of some heads over a store, read batch by batch (what
    :func:`qk_embedding` projects; for measuring projections of a corpus by hand).

    Parameters
    ----------
    attentions : AttentionSet
        A set extracted with ``keep="qk"``.
    heads : sequence of (layer, head)
        0-indexed heads, each once.
    progress : bool
        Show a progress bar over the store's batches.

    Returns
    -------
    list of HeadPoints
        One per head, in order: ``[N, d]`` float32 queries and keys of every position of
        every item (input order).

    Raises
    ------
    InputError
        For anything but a set with queries and keys, heads out of range or named twice.

    Examples
    --------
    >>> import attnkit as ak
    >>> from attnkit.testing import tiny_model
    >>> from attnkit.analysis.qk import store_head_points
    >>> sset = ak.extract(tiny_model("gpt2"), ["The cat sat.", "We read."], level="token",
    ...                   keep="qk", progress=False)
    >>> (hp,) = store_head_points(sset, [(1, 0)], progress=False)
    >>> hp.queries.shape[0] == sum(sset.items()["n"]), hp.offsets.tolist()[0]
    (True, 0)
    """
    if not _is_store(attentions):
        raise InputError(f"store_head_points reads an AttentionSet extracted with keep='qk', not "
                         f"{type(attentions).__name__}; qk_embedding takes attention in memory.")
    qk = attentions.info["qk"]
    chosen = _heads(list(qk["layers"]), int(qk["heads"]), attentions.n_layers, heads)
    return _gather_store(attentions, chosen, want_items=False, progress=progress)[1]


def project(points: np.ndarray, *, method: str = "umap", dims: int = 2, seed: int = 0) -> np.ndarray:
    """Project rows of ``points`` to ``dims`` dimensions; identical rows land on one point.

    Parameters
    ----------
    points : ndarray
        ``[N, d]``.
    method : {"umap", "tsne", "pca"}
        UMAP (umap-learn), t-SNE (openTSNE) or PCA (numpy).
    dims : {2, 3}
        Output dimensions.
    seed : int
        The only source of randomness.

    Returns
    -------
    ndarray
        Float32 ``[N, dims]``.

    Raises
    ------
    InputError
        For fewer distinct points than the method needs (:data:`MIN_POINTS`), an unknown
        method, or one whose package is not installed.

    Examples
    --------
    >>> import numpy as np
    >>> from attnkit.analysis.qk import project
    >>> x = np.array([[0.0, 0, 0], [1, 0, 0], [0, 2, 0], [1, 0, 0]])
    >>> y = project(x, method="pca")
    >>> y.shape, bool((y[1] == y[3]).all())
    ((4, 2), True)
    """
    y, _ = fit_projection(points, method=method, dims=dims, seed=seed)
    return y


def fit_projection(points: np.ndarray, *, method: str = "umap", dims: int = 2,
                   seed: int = 0) -> tuple[np.ndarray, Any]:
    """:func:`project`, and the fitted map that places further points (the estimator's own
    ``transform``: UMAP's, openTSNE's, PCA's linear map).

    Parameters
    ----------
    points : ndarray
        ``[N, d]`` the points the projection is fitted on.
    method : {"umap", "tsne", "pca"}
        As :func:`project`.
    dims : {2, 3}
        Output dimensions.
    seed : int
        The only source of randomness.

    Returns
    -------
    tuple
        Float32 ``[N, dims]`` coordinates, and a function from ``[M, d]`` further points to
        float32 ``[M, dims]`` coordinates.

    Raises
    ------
    InputError
        As :func:`project`.

    Examples
    --------
    >>> import numpy as np
    >>> from attnkit.analysis.qk import fit_projection
    >>> x = np.array([[0.0, 0, 0], [1, 0, 0], [0, 2, 0], [1, 1, 0]])
    >>> y, place = fit_projection(x, method="pca")
    >>> bool(np.allclose(place(x[1:2]), y[1:2], rtol=1e-5))
    True
    """
    return _fit_projection(points, method=method, dims=dims, seed=seed, exact_knn=False)


def _fit_projection(points: np.ndarray, *, method: str, dims: int, seed: int,
                    exact_knn: bool) -> tuple[np.ndarray, Any]:
    """:func:`fit_projection`; ``exact_knn``: UMAP on the exact neighbour graph, without a
    ``transform`` (see :func:`_umap_fit`)."""
    _check_method(method, dims)
    x = np.ascontiguousarray(points, dtype=np.float64)
    if method == "pca":  # linear: identical rows land on one point by themselves
        uniq, inverse = x, np.arange(len(x))
        n = len(np.unique(x.view(np.dtype((np.void, x.dtype.itemsize * x.shape[1]))).ravel()[: 10 * MIN_POINTS["pca"]])) \
            if len(x) < 10 * MIN_POINTS["pca"] else len(x)
    else:  # one row per distinct point (rows as bytes: a 1-D sort, not a lexsort of columns)
        rows = x.view(np.dtype((np.void, x.dtype.itemsize * x.shape[1]))).ravel()
        _, first, inverse = np.unique(rows, return_index=True, return_inverse=True)
        uniq, inverse = x[first], np.asarray(inverse).reshape(-1)
        n = len(uniq)
    if n < MIN_POINTS[method]:
        raise InputError(
            f"method={method!r} needs at least {MIN_POINTS[method]} distinct points (queries and "
            f"keys together); this head has {n}. Embed more inputs, or use method='pca'."
        )
    place: Any
    if method == "pca":
        mean = uniq.mean(0)
        c = uniq - mean
        # principal axes from the d x d covariance (a thin SVD of the N x d points would
        # also compute an N x d basis nobody needs)
        vals, vecs = np.linalg.eigh(c.T @ c)
        axes = vecs[:, np.argsort(vals)[::-1][:dims]]
        y = c @ axes
        if y.shape[1] < dims:
            axes = np.pad(axes, ((0, 0), (0, dims - y.shape[1])))
            y = np.pad(y, ((0, 0), (0, dims - y.shape[1])))
        # a sign convention, so that the same data give the same picture
        flip = np.sign(y[np.abs(y).argmax(0), range(dims)])
        flip = np.where(flip == 0, 1, flip)
        y, axes = y * flip, axes * flip

        def place(more: np.ndarray) -> np.ndarray:
            return ((np.asarray(more, dtype=np.float64) - mean) @ axes).astype(np.float32)
    elif method == "umap":
        reducer = _umap_fit(uniq, dims=dims, seed=seed, exact_knn=exact_knn)
        y = reducer.embedding_

        def place(more: np.ndarray) -> np.ndarray:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                return np.asarray(reducer.transform(np.asarray(more, dtype=np.float64)), dtype=np.float32)
    else:
        from openTSNE import TSNE

        fitted = TSNE(n_components=dims, perplexity=min(30.0, (n - 1) / 3.0), random_state=seed,
                      n_jobs=1, verbose=False,
                      negative_gradient_method="fft" if dims == 2 else "bh").fit(uniq)
        y = np.asarray(fitted)

        def place(more: np.ndarray) -> np.ndarray:
            return np.asarray(fitted.transform(np.asarray(more, dtype=np.float64)), dtype=np.float32)
    return np.asarray(y, dtype=np.float32)[inverse], place


def _umap_module() -> Any:
    """umap-learn, with numba's on-disk cache turned on for its jitted functions.

    umap-learn compiles most of its numba functions on first use in every process, without
    caching them (about 10 CPU seconds of a fresh process's first fit here); with caching
    on, numba keeps the machine code beside umap-learn's sources (its own ``__pycache__``,
    or numba's user cache folder where that is read-only), as it does for pynndescent, which
    asks for it itself. Only functions not compiled yet are affected.
    """
    import umap
    from numba.core.dispatcher import Dispatcher

    global _UMAP_CACHING
    if not _UMAP_CACHING:
        import sys

        for name, module in list(sys.modules.items()):
            if name == "umap" or name.startswith("umap."):
                for value in list(vars(module).values()):
                    if isinstance(value, Dispatcher) and not value.signatures and \
                            type(getattr(value, "_cache", None)).__name__ == "NullCache":
                        try:
                            value.enable_caching()
                        except RuntimeError:  # no writable cache folder: compile as before
                            pass
        _UMAP_CACHING = True
    return umap


_UMAP_CACHING = False


def _umap_fit(points: np.ndarray, *, dims: int, seed: int, exact_knn: bool) -> Any:
    """A seeded UMAP fitted on distinct ``points`` (``[n, d]``); with ``exact_knn`` on the
    exact 15-nearest-neighbour graph (:func:`~attnkit.analysis.qkscale.nearest`, every core),
    not pynndescent's approximate one: faster for a sample of a few thousand points (no
    pynndescent compile), but the estimator then has no ``transform``."""
    umap = _umap_module()
    n = len(points)
    k = min(15, n - 1)
    extra: dict[str, Any] = {}
    if exact_knn:
        dist, idx = qkscale.nearest(points, points, k)
        extra["precomputed_knn"] = (idx, dist)
    reducer = umap.UMAP(n_components=dims, n_neighbors=k, random_state=seed, n_jobs=1,
                        init="spectral" if n > 2 * dims + 10 else "random", **extra)
    with warnings.catch_warnings():  # "spectral initialisation failed, falling back": fine
        warnings.simplefilter("ignore", UserWarning)
        reducer.fit(points)
    return reducer


def _row_spearman(a: np.ndarray, closeness: np.ndarray, allowed: np.ndarray) -> np.ndarray:
    """Spearman correlation (ordinal ranks) of each row of ``a`` with ``closeness`` over the
    ``allowed`` keys; NaN for rows with fewer than 3 keys or constant values."""
    cnt = allowed.sum(1, keepdims=True).astype(np.float64)

    def ranks(x: np.ndarray) -> np.ndarray:
        r = np.argsort(np.argsort(np.where(allowed, x, np.inf), axis=1, kind="stable"), axis=1)
        return np.where(allowed, r - (cnt - 1) / 2, 0.0)

    ra, rc = ranks(a), ranks(closeness)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = (ra * rc).sum(1) / np.sqrt((ra * ra).sum(1) * (rc * rc).sum(1))
    # a row whose weights are all equal has no order to agree with
    flat = np.where(allowed, a, -np.inf).max(1) - np.where(allowed, a, np.inf).min(1) <= 0
    r[(cnt[:, 0] < 3) | flat] = np.nan
    return r


def head_faithfulness(hp: HeadPoints, coords_q: np.ndarray, coords_k: np.ndarray,
                      space_q: np.ndarray, space_k: np.ndarray) -> dict[str, float]:
    """How well distance agrees with attention for one head (see :func:`qk_faithfulness`).

    Parameters
    ----------
    hp : HeadPoints
        The head's queries, keys and items.
    coords_q, coords_k : ndarray
        ``[N, dims]`` positions of the queries and keys in the picture.
    space_q, space_k : ndarray
        ``[N, d]`` the queries and keys in the original space (normalised or not).

    Returns
    -------
    dict
        ``spearman`` (mean over rows of the rank correlation of weight and closeness in
        the picture), ``nearest_key`` (share of rows whose nearest key in the picture is the
        key they attend to most), ``nearest_key_original`` (the same in the original
        space) and ``rows`` (rows counted: those with at least 2 keys to choose from).
    """
    r, near, near_o, rows = _faith_parts(hp, coords_q, coords_k, space_q, space_k)
    r = r[np.isfinite(r)]
    return {"spearman": float(r.mean()) if len(r) else float("nan"),
            "nearest_key": near / rows if rows else float("nan"),
            "nearest_key_original": near_o / rows if rows else float("nan"), "rows": rows}


def _faith_parts(hp: HeadPoints, coords_q: np.ndarray, coords_k: np.ndarray, space_q: np.ndarray,
                 space_k: np.ndarray) -> tuple[np.ndarray, int, int, int]:
    """:func:`head_faithfulness` before averaging: every row's rank correlation, the rows
    whose nearest key is the most attended (picture, space), and the rows counted. Items of
    one length are scored together (stacked ``[B, n, n]``; each item's values as alone)."""
    off = np.asarray(hp.offsets, dtype=np.int64)
    lens = np.diff(off)
    rho, near, near_o, rows = [], 0, 0, 0
    scale = np.float32(hp.scaling)
    for n in np.unique(lens):
        n = int(n)
        if n < 2:
            continue
        at = off[:-1][lens == n]
        take = (at[:, None] + np.arange(n)[None, :]).reshape(-1)
        b = len(at)
        q = np.asarray(hp.queries[take]).reshape(b, n, -1)
        k = np.asarray(hp.keys[take]).reshape(b, n, -1)
        sc = (q @ k.transpose(0, 2, 1)) * scale
        if hp.softcap:
            sc = np.tanh(sc / hp.softcap) * hp.softcap
        allowed = np.tri(n, dtype=bool) if hp.causal else np.ones((n, n), dtype=bool)
        if hp.causal:
            sc = np.where(allowed, sc, -np.inf)
        sc = sc - sc.max(-1, keepdims=True)
        e = np.exp(sc)
        w = (e / e.sum(-1, keepdims=True)).astype(np.float32)
        cq = np.asarray(coords_q[take]).reshape(b, n, -1)
        ck = np.asarray(coords_k[take]).reshape(b, n, -1)
        d = np.linalg.norm(cq[:, :, None, :] - ck[:, None, :, :], axis=-1)
        # the nearest key in the space: |k|^2 - 2 q.k orders a row's keys as the distance
        sq = np.asarray(space_q[take], dtype=np.float64).reshape(b, n, -1)
        sk = np.asarray(space_k[take], dtype=np.float64).reshape(b, n, -1)
        do = np.einsum("bnd,bnd->bn", sk, sk)[:, None, :] - 2.0 * (sq @ sk.transpose(0, 2, 1))
        keep = np.broadcast_to(allowed.sum(1) >= 2, (b, n))
        top = np.where(allowed, w, -np.inf).argmax(-1)
        near += int((np.where(allowed, d, np.inf).argmin(-1) == top)[keep].sum())
        near_o += int((np.where(allowed, do, np.inf).argmin(-1) == top)[keep].sum())
        rows += int(keep.sum())
        flat_allowed = np.broadcast_to(allowed, (b, n, n)).reshape(b * n, n)
        rho.append(_row_spearman(w.reshape(b * n, n), -d.reshape(b * n, n), flat_allowed))
    return (np.concatenate(rho) if rho else np.zeros(0)), near, near_o, rows


def sample_size(sample: int | str | None, n_points: int, method: str) -> int | None:
    """How many of a head's ``n_points`` points (queries and keys) the projection is fitted
    on: ``None`` for all of them.

    Parameters
    ----------
    sample : int, "auto" or None
        ``None``: every point. An int: that many (at most ``n_points``, at least the
        method's :data:`MIN_POINTS`). ``"auto"``: :data:`~attnkit.analysis.qkscale.AUTO_SAMPLE`
        points above :data:`~attnkit.analysis.qkscale.AUTO_ABOVE` for UMAP and t-SNE, every
        point otherwise (PCA is fitted on every point: its cost is one ``d x d`` covariance).
    n_points : int
        The head's points.
    method : str
        The projection.

    Returns
    -------
    int or None

    Raises
    ------
    InputError
        For a sample larger than the data, below the method's minimum, or not an int,
        ``"auto"`` or None.

    Examples
    --------
    >>> from attnkit.analysis.qk import sample_size
    >>> sample_size("auto", 1_000_000, "umap"), sample_size("auto", 5_000, "umap")
    (5000, None)
    """
    if sample is None:
        return None
    if isinstance(sample, str):
        if sample != "auto":
            raise InputError(f"sample must be an int, 'auto' or None, not {sample!r}.")
        if method == "pca" or n_points <= qkscale.AUTO_ABOVE:
            return None
        return min(qkscale.AUTO_SAMPLE, n_points)
    if isinstance(sample, bool) or not isinstance(sample, (int, np.integer)):
        raise InputError(f"sample must be an int, 'auto' or None, not {sample!r}.")
    if sample > n_points:
        raise InputError(f"sample={sample} is larger than the {n_points} points of a head (queries "
                         "and keys together); pass at most that many, or sample=None to fit on "
                         "every point.")
    if sample < MIN_POINTS[method]:
        raise InputError(f"sample={sample}: method={method!r} needs at least {MIN_POINTS[method]} "
                         "points to fit on.")
    return None if sample == n_points else int(sample)


def point_strata(offsets: np.ndarray) -> np.ndarray:
    """The stratum of each of a head's ``2N`` points (queries, then keys): kind x position
    range (:func:`~attnkit.analysis.qkscale.position_bins`), points in item order inside each.

    Parameters
    ----------
    offsets : ndarray
        ``[items + 1]`` item boundaries (:class:`HeadPoints`).

    Returns
    -------
    ndarray
        Int ``[2N]``.

    Examples
    --------
    >>> import numpy as np
    >>> from attnkit.analysis.qk import point_strata
    >>> point_strata(np.array([0, 3, 5])).tolist()      # positions 0 1 2 | 0 1
    [0, 1, 1, 0, 1, 64, 65, 65, 64, 65]
    """
    off = np.asarray(offsets, dtype=np.int64)
    n = int(off[-1])
    item = np.repeat(np.arange(len(off) - 1), np.diff(off))
    pos = np.arange(n) - off[item]
    bins = qkscale.position_bins(pos)
    return np.concatenate([bins, bins + 64])


def embed_head(hp: HeadPoints, *, method: str, dims: int, normalize: bool, seed: int,
               score: bool = True, sample: int | str | None = None,
               placement: str = "knn", progress: bool = False) -> tuple[np.ndarray, dict[str, float]]:
    """One head's joint projection and its faithfulness (the unit of work on a worker).

    Parameters
    ----------
    hp : HeadPoints
        The head's queries and keys.
    method, dims, normalize, seed, sample, placement
        As in :func:`qk_embedding`.
    score : bool
        Also compute :func:`head_faithfulness` and the neighbourhood preservation.
    progress : bool
        Show the steps of this head (fit, placement chunk by chunk, scores) as progress bars.

    Returns
    -------
    tuple
        Float32 ``[2N, dims]`` coordinates (the N queries, then the N keys) and a dict: the
        faithfulness scores and ``preservation`` (without ``score``: none), ``fitted``
        (points the projection was fitted on), ``fit_seconds``, ``place_seconds`` and
        ``seconds`` in all.
    """
    t0 = time.perf_counter()
    q, k = (normalize_qk(hp.queries, hp.keys) if normalize
            else (hp.queries.astype(np.float64), hp.keys.astype(np.float64)))
    n = len(q)
    size = sample_size(sample, 2 * n, method)
    if size is None:
        y = project(np.concatenate([q, k]), method=method, dims=dims, seed=seed)
        fit_s, place_s = time.perf_counter() - t0, 0.0
    else:
        if placement not in PLACEMENTS:
            raise InputError(f"placement must be one of {sorted(PLACEMENTS)}, not {placement!r}.")
        x = np.concatenate([q, k]).astype(np.float32)
        idx = qkscale.stratified_sample(point_strata(hp.offsets), size, seed=seed)
        label = f"head {head_label(hp.layer, hp.head)}"
        steps = _bar(total=3 if score else 2, show=progress, desc=f"{label}: fitting {size:,} points",
                     unit="step")
        # the knn placement needs no transform: UMAP on the exact neighbour graph
        ys, place = _fit_projection(x[idx], method=method, dims=dims, seed=seed,
                                    exact_knn=placement == "knn")
        t1 = time.perf_counter()
        fit_s = t1 - t0
        rest = np.ones(len(x), dtype=bool)
        rest[idx] = False
        y = np.empty((len(x), dims), dtype=np.float32)
        y[idx] = ys
        steps.update(1)
        steps.set_description(f"{label}: placing {int(rest.sum()):,} points")
        if placement == "knn" and method != "pca":
            y[rest] = qkscale.place_knn(x[idx], ys, x[rest], chunk=qkscale.CHUNK,
                                              progress=progress)
        else:
            y[rest] = place(x[rest])
        place_s = time.perf_counter() - t1
        steps.update(1)
        steps.set_description(f"{label}: scoring")
        del x
    out: dict[str, float] = {}
    if score:
        out = head_faithfulness(hp, y[:n], y[n:], q, k)
        out["preservation"] = qkscale.neighbourhood_preservation(
            y, np.concatenate([q, k]), k=min(QUALITY_K, 2 * n - 1), n_eval=QUALITY_EVAL, seed=seed)
    if size is not None:
        steps.update(1 if score else 0)
        steps.close()
    return y, {**out, "fitted": 2 * n if size is None else size, "fit_seconds": fit_s,
               "place_seconds": place_s, "seconds": time.perf_counter() - t0}


# ------------------------------------------------------------------ the result
#: The ``kind`` of a point, by its code (0 query, 1 key): the table's categories, in order.
KINDS = ("query", "key")
#: The whole-number columns an embedding holds as compact arrays (its table widens them to
#: int64), and the columns read from the inputs' positions when asked (never stored per point).
_INTS = {"layer": np.int16, "head": np.int16, "item": np.int32, "position": np.int32}
_LABELS = ("token", "role")


class _Points(Result):
    """What :class:`QKEmbedding` and :class:`QKPoints` share: the table is made from the
    points' columns when first read (a million points never pass through a DataFrame unless
    asked for), and reading one column reads only that column."""

    _frame: pd.DataFrame | None = None

    @property
    def table(self) -> pd.DataFrame:
        """The points as a DataFrame (made on first use, then kept)."""
        if self._frame is None:
            self._frame = self._make_table()
        return self._frame

    @table.setter
    def table(self, value: pd.DataFrame) -> None:
        self._frame = value

    def _make_table(self) -> pd.DataFrame:
        raise NotImplementedError

    @property
    def columns(self) -> pd.Index:
        """The names of the table's columns (without making the table)."""
        return pd.Index(self._names())

    def _names(self) -> list[str]:
        raise NotImplementedError

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str) and key in self._names():
            return self._series(key)
        return self.table[key]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._names())

    def __contains__(self, key: Any) -> bool:
        return key in self._names()

    def _series(self, name: str) -> pd.Series:
        raise NotImplementedError

    def _html_rows(self) -> str:
        # the first and last 20 rows, made for themselves (not the whole table)
        n = len(self)
        shown = np.arange(n) if n <= 40 else np.r_[0:20, n - 20:n]
        more = "" if n <= 40 else f"<p>{n:,} rows; the first and last 20 shown.</p>"
        return self._rows_frame(shown).to_html() + more

    def _rows_frame(self, rows: np.ndarray) -> pd.DataFrame:
        """The table's rows at positions ``rows`` (checked), made for them alone."""
        raise NotImplementedError


class QKEmbedding(_Points):
    """Queries and keys of some heads, projected together (:func:`qk_embedding`).

    The points are held as columns of arrays (float32 ``x``, ``y`` (``z``), whole-number
    ``layer``, ``head``, ``item``, ``position``, and ``kind`` as a code); ``token`` and
    ``role`` are looked up from the inputs when asked. :attr:`table` makes the DataFrame
    the first time it is read: one row per point, ``layer``, ``head``, ``item``,
    ``position``, ``token``, ``role``, ``kind`` (``"query"`` or ``"key"``), ``x``, ``y``
    (``z`` for 3-D) and any column joined with :meth:`join`. :meth:`column`,
    :meth:`head_rows` and :meth:`take` read the points without it (what
    :class:`~attnkit.widgets.QKScatter` does). ``.faithfulness`` is a per-head
    :class:`~attnkit.core.results.HeadResult` (``spearman``, ``nearest_key``,
    ``nearest_key_original``, ``rows``, ``seconds``); ``.meta`` says how it was made.

    Parameters
    ----------
    table : DataFrame or dict of str to ndarray
        The points: a table, or its columns as arrays of one length (``layer``, ``head``,
        ``item``, ``position``, ``kind`` as 0 for a query and 1 for a key, ``x``, ``y``,
        optionally ``z``, ``token``, ``role`` and more; ``token`` and ``role`` default to
        the ``sources``' tokens and roles).
    meta : dict
        Method, dims, normalisation, seed, heads, items.
    faithfulness : HeadResult
        Per-head scores of the picture.
    sources : list, optional
        The inputs' queries and keys (for :meth:`item_map` and :meth:`tokens`).

    Raises
    ------
    InputError
        For columns of different lengths, or without the ones named above.

    Examples
    --------
    >>> import attnkit as ak
    >>> from attnkit.testing import tiny_model
    >>> att = tiny_model("gpt2").attend("The cat sat on the mat and the dog sat too.")
    >>> emb = ak.qk_embedding(att, heads=[(1, 0)], method="pca")
    >>> len(emb) == 2 * len(att), sorted(emb.table["kind"].unique())
    (True, ['key', 'query'])
    """

    def __init__(self, table: pd.DataFrame | dict[str, np.ndarray], meta: dict[str, Any], *,
                 faithfulness: HeadResult, sources: list[_Item] | None = None) -> None:
        # Result's constructor takes a DataFrame; the columns stand in for one here
        self.meta = dict(meta or {})
        self._plot, self._widget = "qk_embedding", "qk_scatter"
        self.faithfulness = faithfulness
        self._sources = list(sources or [])
        self._lookup: tuple[np.ndarray, dict[str, np.ndarray]] | None = None
        self._frame = None
        if isinstance(table, pd.DataFrame):
            self._frame = table
            self._cols: dict[str, Any] = {}
            self._n = len(table)
            return
        if not isinstance(table, dict):
            raise InputError(f"QKEmbedding takes a DataFrame or a dict of columns, not {type(table).__name__}.")
        need = ["layer", "head", "item", "position", "kind", "x", "y"]
        missing = [c for c in need if c not in table]
        if missing:
            raise InputError(f"QKEmbedding: the columns {missing} are missing; it needs {need}.")
        lengths = {len(v) for v in table.values()}
        if len(lengths) != 1:
            raise InputError(f"QKEmbedding: the columns have different lengths {sorted(lengths)}.")
        cols = {}
        for name, v in table.items():
            if name in _INTS:
                cols[name] = np.asarray(v, dtype=_INTS[name])
            elif name == "kind":
                cols[name] = np.asarray(v, dtype=np.uint8)
            elif name in ("x", "y", "z"):
                cols[name] = np.ascontiguousarray(v, dtype=np.float32)
            else:
                cols[name] = v
        if not self._sources and not all(c in cols for c in _LABELS):
            raise InputError("QKEmbedding: without sources, the columns must hold 'token' and 'role'.")
        self._cols = cols
        self._n = int(lengths.pop())

    def __repr__(self) -> str:
        m = self.meta
        return (f"QKEmbedding({len(self)} points, {len(m.get('heads', []))} heads, "
                f"{m.get('method')} {m.get('dims')}-D, normalize={m.get('normalize')})")

    def __len__(self) -> int:
        return self._n

    # ------------------------------------------------------------------ columns
    def _names(self) -> list[str]:
        if not self._cols:
            return [str(c) for c in self.table.columns]
        order = [c for c in COLUMNS if c in self._cols or (c in _LABELS and self._sources)]
        return order + [c for c in self._cols if c not in order]

    def column(self, column: str, rows: Any = None) -> np.ndarray:
        """One column's values, for every point or some, without making :attr:`table`.

        Parameters
        ----------
        column : str
            A column of :attr:`table` (``"x"``, ``"kind"``, ``"token"``, a joined one ...).
        rows : int, sequence of int, slice or boolean mask, optional
            Points (rows of :attr:`table`, 0-indexed); ``None`` for all.

        Returns
        -------
        ndarray
            ``[len(rows)]``: float32 coordinates, int64 whole numbers, the strings
            ``"query"``/``"key"`` for ``kind``, objects (strings) for ``token`` and ``role``.

        Raises
        ------
        InputError
            For a column the table does not have, or rows outside it.

        Examples
        --------
        >>> import attnkit as ak
        >>> from attnkit.testing import tiny_model
        >>> emb = ak.qk_embedding(tiny_model("bert").attend("The cat sat."), method="pca")
        >>> emb.column("token", [1, 2]).tolist(), emb.column("kind", [0]).tolist()
        (['the', 'cat'], ['query'])
        """
        names = self._names()
        if not isinstance(column, str) or column not in names:
            raise InputError(f"column must be one of {names}, not {column!r}.")
        idx = None if rows is None else validate.positions(rows, self._n, "rows")
        return self._values(column, idx)

    def _values(self, name: str, idx: np.ndarray | None) -> np.ndarray:
        """``name``'s values at ``idx`` (checked) or everywhere, as :meth:`column` gives them."""
        if not self._cols:
            s = self.table[name]
            v = s.to_numpy() if idx is None else s.to_numpy()[idx]
            if name == "kind":
                return np.asarray(v).astype(str)
            return v
        if name in self._cols:
            v = self._cols[name]
            v = v if idx is None else v[idx]
            if name in _INTS:
                return np.asarray(v, dtype=np.int64)
            if name == "kind":
                return np.asarray(KINDS)[v]
            return np.asarray(v)
        # token or role: the item's labels at the position, from the inputs
        starts, flat = self._labels()
        item = self._cols["item"] if idx is None else self._cols["item"][idx]
        pos = self._cols["position"] if idx is None else self._cols["position"][idx]
        return flat[name][starts[item] + pos]

    def _labels(self) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Where each item's positions start in the inputs' concatenated tokens and roles
        (by item number), and those (object arrays, one entry per position, made once)."""
        if self._lookup is None:
            top = max(it.item for it in self._sources) + 1
            starts = np.zeros(top, dtype=np.int64)
            at = 0
            for it in self._sources:
                starts[it.item] = at
                at += len(it.tokens)
            flat = {"token": np.concatenate([np.asarray(it.tokens, dtype=object) for it in self._sources]),
                    "role": np.concatenate([np.asarray(it.roles, dtype=object) for it in self._sources])}
            self._lookup = (starts, flat)
        return self._lookup

    def _series(self, name: str, idx: np.ndarray | None = None) -> pd.Series:
        v = self._values(name, idx)
        if name == "kind":
            return pd.Series(pd.Categorical(v, categories=list(KINDS)), name=name,
                             index=None if idx is None else idx)
        return pd.Series(v, name=name, index=None if idx is None else idx)

    def _rows_frame(self, rows: np.ndarray) -> pd.DataFrame:
        if not self._cols:
            return self.table.iloc[rows]
        return pd.DataFrame({c: self._series(c, rows) for c in self._names()}, index=rows)

    def _make_table(self) -> pd.DataFrame:
        return pd.DataFrame({c: self._series(c) for c in self._names()})

    def head_rows(self, layer: int, head: int) -> np.ndarray:
        """The points of one head: their rows in :attr:`table`, in table order.

        Parameters
        ----------
        layer, head : int
            0-indexed.

        Returns
        -------
        ndarray
            Int64 row indices.

        Raises
        ------
        InputError
            For a head the embedding does not hold.

        Examples
        --------
        >>> import attnkit as ak
        >>> from attnkit.testing import tiny_model
        >>> emb = ak.qk_embedding(tiny_model("gpt2").attend("One two three."), method="pca")
        >>> rows = emb.head_rows(0, 1)
        >>> len(rows) == len(emb) // 4, set(emb.column("head", rows).tolist())
        (True, {1})
        """
        layer, head = self._check_head(layer, head)
        lay, hd = self._ints("layer"), self._ints("head")
        return np.flatnonzero((lay == layer) & (hd == head))

    def _ints(self, name: str) -> np.ndarray:
        """A whole-number column as held (no widening copy)."""
        return self._cols[name] if name in self._cols else self.table[name].to_numpy()

    def take(self, rows: Any) -> QKPoints:
        """Some points, by row: what a lasso in :class:`~attnkit.widgets.QKScatter` selects.

        Parameters
        ----------
        rows : int, sequence of int, slice or boolean mask
            Rows of :attr:`table` (0-indexed).

        Returns
        -------
        QKPoints
            The points; their table (tokens, items, coordinates) is made when read.

        Raises
        ------
        InputError
            For rows outside the table.

        Examples
        --------
        >>> import attnkit as ak
        >>> from attnkit.testing import tiny_model
        >>> emb = ak.qk_embedding(tiny_model("bert").attend("The cat sat."), method="pca")
        >>> pts = emb.take([2, 3])
        >>> len(pts), pts.table["token"].tolist()
        (2, ['cat', 'sat'])
        """
        return QKPoints(self, rows)

    def head(self, layer: int, head: int) -> pd.DataFrame:
        """The points of one head.

        Parameters
        ----------
        layer, head : int
            0-indexed.

        Returns
        -------
        DataFrame
            Rows of :attr:`table` of that head (made for these rows only).

        Raises
        ------
        InputError
            For a head the embedding does not hold.

        Examples
        --------
        >>> import attnkit as ak
        >>> from attnkit.testing import tiny_model
        >>> emb = ak.qk_embedding(tiny_model("gpt2").attend("One two three four five six."),
        ...                       method="pca")
        >>> len(emb.head(0, 1)) == len(emb) // 4
        True
        """
        return self._rows_frame(self.head_rows(layer, head))

    def tokens(self, item: int) -> list[str]:
        """The tokens of one input (its sentence, position by position).

        Parameters
        ----------
        item : int
            The ``item`` of a point.

        Returns
        -------
        list of str

        Examples
        --------
        >>> import attnkit as ak
        >>> from attnkit.testing import tiny_model
        >>> emb = ak.qk_embedding(tiny_model("bert").attend("The cat sat on the mat."), method="pca")
        >>> emb.tokens(0)[:3]
        ['[CLS]', 'the', 'cat']
        """
        return list(self._source(item).tokens)

    def item_map(self, item: int, layer: int, head: int) -> np.ndarray:
        """Attention weights ``[n, n]`` of one input and head (rows *from*, columns *to*):
        read from the store where the embedding came from a store that keeps the maps of
        attention weights, else recomputed from the input's queries and keys (read from the
        store for a store that keeps only those).

        Parameters
        ----------
        item : int
            The ``item`` of a point.
        layer, head : int
            0-indexed.

        Returns
        -------
        ndarray
            Float32 ``[n, n]``; rows sum to 1.

        Examples
        --------
        >>> import attnkit as ak
        >>> from attnkit.testing import tiny_model
        >>> att = tiny_model("gpt2").attend("The cat sat on the mat.")
        >>> emb = ak.qk_embedding(att, method="pca")
        >>> bool(abs(emb.item_map(0, 1, 0) - att.map(1, 0)).max() < 1e-5)
        True
        """
        it = self._source(item)
        layer, head = self._check_head(layer, head)
        store = it.store
        if store is not None and store.has_maps and store.measure == "weights" and store.level == "token":
            return np.asarray(store[it.item].map(layer, head), dtype=np.float32)
        return scores(it.states, layer, head, causal=it.causal)

    def item_roles(self, item: int) -> list[str]:
        """The roles of one input's positions (``"cls"``, ``"word"``, ``"sep"`` ...).

        Parameters
        ----------
        item : int
            The ``item`` of a point.

        Returns
        -------
        list of str

        Examples
        --------
        >>> import attnkit as ak
        >>> from attnkit.testing import tiny_model
        >>> emb = ak.qk_embedding(tiny_model("bert").attend("The cat sat."), method="pca")
        >>> emb.item_roles(0)[:2]
        ['cls', 'word']
        """
        return [str(r) for r in self._source(item).roles]

    def item_causal(self, item: int) -> bool:
        """Whether one input's attention is causal (a decoder's: no later key).

        Parameters
        ----------
        item : int
            The ``item`` of a point.

        Returns
        -------
        bool

        Examples
        --------
        >>> import attnkit as ak
        >>> from attnkit.testing import tiny_model
        >>> ak.qk_embedding(tiny_model("gpt2").attend("The cat sat."), method="pca").item_causal(0)
        True
        """
        return bool(self._source(item).causal)

    def _check_head(self, layer: Any, head: Any) -> tuple[int, int]:
        heads = [(int(l), int(h)) for l, h in self.meta["heads"]]
        n_layers = self.meta.get("n_layers") or max(l for l, _ in heads) + 1
        n_heads = self.meta.get("n_heads") or max(h for _, h in heads) + 1
        layer, head = validate.head_index(layer, head, n_layers, n_heads)
        if (layer, head) not in heads:
            raise InputError(f"layer {layer}, head {head} is not in this embedding; it holds "
                             f"{heads}.")
        return layer, head

    def _source(self, item: int) -> _Item:
        i = validate.index(item, len(self._sources), "item")
        for it in self._sources:
            if it.item == i:
                return it
        raise InputError(f"item {item} is not in this embedding (items 0..{len(self._sources) - 1}).")

    def join(self, data: pd.DataFrame, *, on: Sequence[str] = ("item", "position")) -> QKEmbedding:
        """A copy with more columns per point (part of speech, relation, ...).

        Parameters
        ----------
        data : DataFrame
            Columns ``on`` and the new columns; one row per ``on`` value (e.g. per token).
        on : sequence of str
            Columns to match (default item and position).

        Returns
        -------
        QKEmbedding
            Same points, in the same order, with the new columns (missing values where
            ``data`` has no row).

        Raises
        ------
        InputError
            When ``data`` lacks a column of ``on`` or repeats a key.

        Examples
        --------
        >>> import pandas as pd, attnkit as ak
        >>> from attnkit.testing import tiny_model
        >>> emb = ak.qk_embedding(tiny_model("bert").attend("The cat sat."), method="pca")
        >>> pos = pd.DataFrame({"item": 0, "position": [2], "pos": ["NOUN"]})
        >>> emb.join(pos).table.query("position == 2")["pos"].unique().tolist()
        ['NOUN']
        """
        on = list(on)
        missing = [c for c in on if c not in data.columns]
        if missing:
            raise InputError(f"join: data has no column {missing}; it needs {on}.")
        absent = [c for c in on if c not in self._names()]
        if absent:
            raise InputError(f"join: the embedding has no column {absent}; it has {self._names()}.")
        if data.duplicated(on).any():
            raise InputError(f"join: data repeats some {on}; keep one row per {on}.")
        new = [c for c in data.columns if c not in on]
        clash = [c for c in new if c in self._names()]
        if clash:
            raise InputError(f"join: columns {clash} are already in the table.")
        # only the key columns of every point are made, not the table
        keys = pd.DataFrame({c: self._series(c).to_numpy() for c in on})
        merged = keys.merge(data, on=on, how="left", sort=False)
        if not self._cols:
            table = self.table.copy()
            for c in new:
                table[c] = merged[c].array
            return QKEmbedding(table, self.meta, faithfulness=self.faithfulness, sources=self._sources)
        return QKEmbedding({**self._cols, **{c: merged[c].array for c in new}}, self.meta,
                           faithfulness=self.faithfulness, sources=self._sources)


class QKPoints(_Points):
    """Some points of a :class:`QKEmbedding`, by row (:meth:`QKEmbedding.take`; what
    :attr:`attnkit.widgets.QKScatter.selected` gives): their rows, and their table made
    only when read (tokens and items looked up from the embedding's inputs for these
    points only), so a selection of half a million points costs its indices until asked.

    Column access and DataFrame attributes are forwarded to :attr:`table` (made then), as
    on every result; ``len()``, :meth:`column` and :attr:`rows` do not make it.

    Parameters
    ----------
    embedding : QKEmbedding
        The points' embedding.
    rows : int, sequence of int, slice or boolean mask
        Rows of the embedding's table (0-indexed), in the order kept.

    Raises
    ------
    InputError
        For rows outside the embedding's table.

    Examples
    --------
    >>> import attnkit as ak
    >>> from attnkit.analysis import QKPoints
    >>> from attnkit.testing import tiny_model
    >>> emb = ak.qk_embedding(tiny_model("bert").attend("The cat sat."), method="pca")
    >>> pts = QKPoints(emb, [0, 7])
    >>> pts.rows.tolist(), pts.column("kind").tolist()
    ([0, 7], ['query', 'key'])
    """

    def __init__(self, embedding: QKEmbedding, rows: Any) -> None:
        if not isinstance(embedding, QKEmbedding):
            raise InputError(f"QKPoints takes a QKEmbedding, not {type(embedding).__name__}.")
        self._emb = embedding
        self._rows = validate.positions(rows, len(embedding), "rows")
        self._frame = None
        width = 1 << 15
        key = embedding._ints("layer").astype(np.int64)[self._rows] * width + embedding._ints("head")[self._rows]
        here = set(np.unique(key).tolist())
        heads = [list(h) for h in embedding.meta["heads"] if h[0] * width + h[1] in here]
        self.meta = {**embedding.meta, "heads": heads, "n_points": len(self._rows)}
        self._plot, self._widget = "qk_embedding", None

    def __repr__(self) -> str:
        return f"QKPoints({len(self)} points of {self._emb!r})"

    def __len__(self) -> int:
        return len(self._rows)

    @property
    def rows(self) -> np.ndarray:
        """Int64 ``[len(self)]``: the points' rows in the embedding's table."""
        return self._rows

    def _names(self) -> list[str]:
        return self._emb._names()

    def column(self, column: str, rows: Any = None) -> np.ndarray:
        """One column's values for these points (or some of them), without making a table.

        Parameters
        ----------
        column : str
            A column of the embedding's table.
        rows : int, sequence of int, slice or boolean mask, optional
            Which of these points (0-indexed into them); ``None`` for all.

        Returns
        -------
        ndarray
            As :meth:`QKEmbedding.column`.

        Raises
        ------
        InputError
            For an unknown column or rows outside these points.

        Examples
        --------
        >>> import attnkit as ak
        >>> from attnkit.testing import tiny_model
        >>> emb = ak.qk_embedding(tiny_model("bert").attend("The cat sat."), method="pca")
        >>> emb.take([3, 2]).column("token").tolist()
        ['sat', 'cat']
        """
        idx = self._rows if rows is None else self._rows[validate.positions(rows, len(self._rows), "rows")]
        return self._emb.column(column, idx)

    def head_rows(self, layer: int, head: int) -> np.ndarray:
        """Which of these points belong to one head (0-indexed into them).

        Parameters
        ----------
        layer, head : int
            0-indexed.

        Returns
        -------
        ndarray
            Int64 indices into these points.

        Raises
        ------
        InputError
            For a head the embedding does not hold.

        Examples
        --------
        >>> import attnkit as ak
        >>> from attnkit.testing import tiny_model
        >>> emb = ak.qk_embedding(tiny_model("gpt2").attend("One two."), method="pca")
        >>> emb.take(emb.head_rows(1, 1)[:3]).head_rows(1, 1).tolist()
        [0, 1, 2]
        """
        layer, head = self._emb._check_head(layer, head)
        lay, hd = self._emb._ints("layer")[self._rows], self._emb._ints("head")[self._rows]
        return np.flatnonzero((lay == layer) & (hd == head))

    def _series(self, name: str) -> pd.Series:
        return self._emb._series(name, self._rows)

    def _rows_frame(self, rows: np.ndarray) -> pd.DataFrame:
        return self._emb._rows_frame(self._rows[rows])

    def _make_table(self) -> pd.DataFrame:
        return self._emb._rows_frame(self._rows)


# ------------------------------------------------------------------ streaming a store
def _store_items(aset: Any, progress: bool) -> list[_Item]:
    """Every item's tokens and roles (a read of the positions only)."""
    items: list[_Item | None] = [None] * len(aset)
    for b in _bar(range(aset.n_batches), show=progress, desc="reading tokens", unit="batch"):
        idx, toks, roles = aset.batch_tokens(b)
        for i, t, r in zip(idx, toks, roles):
            items[int(i)] = _Item(int(i), t, r, aset.causal, store=aset)
    return [it for it in items if it is not None]


class _StreamHead:
    """One head of a streamed embedding: what the passes over the store accumulate."""

    def __init__(self, layer: int, head: int, d: int, n: int, size: int, n_eval: int,
                 dims: int) -> None:
        self.layer, self.head, self.n = layer, head, n
        self.sum_q, self.sum_k = np.zeros(d), np.zeros(d)
        self.norm_q = self.norm_k = 0.0
        self.sample = np.empty((size, d), dtype=np.float32)  # raw, then normalised
        self.eval = np.empty((n_eval, d), dtype=np.float32)
        self.shift, self.scale = np.zeros(d), 1.0
        self.coords = np.empty((2 * n, dims), dtype=np.float32)
        self.rho_sum, self.rho_n, self.near, self.near_o, self.rows = 0.0, 0, 0, 0, 0
        self.fit_s = self.place_s = 0.0
        self.fitted: np.ndarray = np.zeros((0, dims), dtype=np.float32)
        self.place: Any = None
        self.space: qkscale.RunningNeighbours | None = None

    def normalised(self, q: np.ndarray, k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``[n, d]`` raw queries and keys in the normalised space (float64), as
        :func:`normalize_qk` of the whole head puts them."""
        return (q.astype(np.float64) * self.scale,
                (k.astype(np.float64) + self.shift) / self.scale)

    def mixed(self, rows: np.ndarray, is_key: np.ndarray) -> np.ndarray:
        """Raw rows (queries or keys, by ``is_key``) normalised: float64."""
        x = rows.astype(np.float64)
        return np.where(is_key[:, None], (x + self.shift) / self.scale, x * self.scale)


#: What the passes over a store of a streamed embedding read (``.meta["chunk"]``).
STREAM_CHUNK = "one stored batch (extract's batch_size items of similar length) at a time"


def _stream_heads(aset: Any, heads: list[tuple[int, int]], *, size: int, method: str, dims: int,
                  normalize: bool, seed: int, placement: str, progress: bool, score: bool = True,
                  want_items: bool = False) -> tuple[list[_Item], list[tuple[np.ndarray, dict[str, float]]]]:
    """The sampled embedding of some heads of a store, read in chunks (stored batches): what
    :func:`embed_head` computes, holding only the sample, the scored points and one chunk of
    raw vectors, whatever the number of points.

    Pass 1 (checked read of queries and keys): the normalisation's sums, the sample's and
    the scored points' raw vectors (which rows: from the items' lengths alone). Pass 2 (keys
    only, when normalising): the keys' mean norm after the shift. Then each head's fit on its
    sample. Pass 3 (queries and keys): every point placed, each item's faithfulness, and
    the scored points' nearest neighbours in the normalised space kept as the points go by.
    """
    qk = aset.info["qk"]
    lengths = aset.items()["n"].to_numpy(dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    n = int(offsets[-1])
    d = int(qk["dim"])
    idx = qkscale.stratified_sample(point_strata(offsets), size, seed=seed)
    n_eval = min(QUALITY_EVAL, 2 * n)
    ev = np.sort(np.random.default_rng(validate.seed(seed)).choice(2 * n, size=n_eval, replace=False))
    k_eval = min(QUALITY_K, 2 * n - 1)
    scaling = dict(zip(qk["layers"], qk["scaling"]))
    state = [_StreamHead(l, h, d, n, size, n_eval, dims) for l, h in heads]
    t0 = time.perf_counter()

    def chunks(desc: str, **read: Any) -> Iterator[tuple[np.ndarray, np.ndarray, dict]]:
        for b in _bar(range(aset.n_batches), show=progress, desc=desc, unit="batch"):
            items, lens, got, labels = aset.qk_head_rows(b, heads=heads, **read)
            if labels is not None:
                for i, t, r in zip(items, *labels):
                    found[int(i)] = _Item(int(i), t, r, aset.causal, store=aset)
            # the batch's rows in input order's numbering (queries 0..n-1, keys n..2n-1)
            starts = offsets[items]
            rows = np.repeat(starts - np.concatenate([[0], np.cumsum(lens)[:-1]]), lens) + \
                np.arange(int(lens.sum()))
            yield lens, rows, got
            del got

    def hits(ids: np.ndarray, within: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        at = np.minimum(np.searchsorted(within, ids), len(within) - 1)
        found = within[at] == ids
        return np.flatnonzero(found), at[found]

    label = ", ".join(head_label(l, h) for l, h in heads)
    found: list[_Item | None] = [None] * len(lengths)
    # pass 1: sums, the sample's and the scored points' raw vectors (and the items' tokens)
    for _, rows, got in chunks(f"heads {label}: reading (1/{3 if normalize else 2})", tokens=want_items):
        ids = np.concatenate([rows, rows + n])
        s_at, s_to = hits(ids, idx)
        e_at, e_to = hits(ids, ev)
        for st in state:
            q, k = got["queries"][(st.layer, st.head)], got["keys"][(st.layer, st.head)]
            if not (np.isfinite(q).all() and np.isfinite(k).all()):
                raise InputError(f"The queries or keys of head {(st.layer, st.head)} hold NaN or "
                                 "infinite values; there is nothing to embed (check the model's "
                                 "dtype and inputs).")
            q64, k64 = q.astype(np.float64), k.astype(np.float64)
            st.sum_q += q64.sum(0)
            st.sum_k += k64.sum(0)
            st.norm_q += float(np.linalg.norm(q64, axis=1).sum())
            both = np.concatenate([q, k])
            st.sample[s_to] = both[s_at]
            st.eval[e_to] = both[e_at]
            del q, k, q64, k64, both
        del got  # nothing of a chunk outlives its turn
    if normalize:
        for st in state:
            st.shift = st.sum_q / n - st.sum_k / n
        # pass 2: the keys' mean norm once shifted (the shift needs every key first)
        for _, _, got in chunks(f"heads {label}: reading keys (2/3)", queries=False, check_fill=False):
            for st in state:
                k64 = got["keys"][(st.layer, st.head)].astype(np.float64) + st.shift
                st.norm_k += float(np.linalg.norm(k64, axis=1).sum())
                del k64
            del got
        for st in state:
            nq, nk = st.norm_q / n, st.norm_k / n
            if not (nq > 0 and nk > 0):
                raise InputError("The queries or keys of this head are all zero: there is no "
                                 "scale to match.")
            st.scale = float(np.sqrt(nk / nq))
    # the fits
    is_key, ev_key = idx >= n, ev >= n
    for st in state:
        t1 = time.perf_counter()
        xs = st.mixed(st.sample, is_key).astype(np.float32)
        st.fitted, place = _fit_projection(xs, method=method, dims=dims, seed=seed,
                                           exact_knn=placement == "knn")
        st.place = qkscale.KnnPlacer(xs, st.fitted).place if placement == "knn" and method != "pca" \
            else place
        st.fit_s = time.perf_counter() - t1
        if score:
            st.space = qkscale.RunningNeighbours(st.mixed(st.eval, ev_key), ev, k_eval)
        del st.sample, st.eval
    # pass 3: placement, faithfulness item by item, the scored points' neighbours
    softcap = qk.get("softcap")
    for lens, rows, got in chunks(f"heads {label}: placing and scoring (3/3)" if normalize
                                  else f"heads {label}: placing and scoring (2/2)", check_fill=False):
        ids = np.concatenate([rows, rows + n])
        s_at, s_to = hits(ids, idx)
        local = np.concatenate([[0], np.cumsum(lens)])
        for st in state:
            q, k = got["queries"][(st.layer, st.head)], got["keys"][(st.layer, st.head)]
            qn, kn = st.normalised(q, k) if normalize else (q.astype(np.float64), k.astype(np.float64))
            t1 = time.perf_counter()
            y = st.place(np.concatenate([qn, kn]).astype(np.float32))
            y[s_at] = st.fitted[s_to]  # the fitted points keep their fitted pictures
            st.place_s += time.perf_counter() - t1
            st.coords[ids] = y
            if score:
                m = len(rows)
                hp = HeadPoints(st.layer, st.head, q, k, local, float(scaling[st.layer]), softcap,
                                aset.causal)
                r, near, near_o, counted = _faith_parts(hp, y[:m], y[m:], qn, kn)
                del hp
                r = r[np.isfinite(r)]
                st.rho_sum += float(r.sum())
                st.rho_n += len(r)
                st.near, st.near_o, st.rows = st.near + near, st.near_o + near_o, st.rows + counted
                assert st.space is not None
                st.space.add(np.concatenate([qn, kn]), ids)
            del q, k, qn, kn, y
        del got
    seconds = time.perf_counter() - t0
    out = []
    for st in state:
        scores_: dict[str, float] = {}
        if score:
            assert st.space is not None
            pic = qkscale.neighbours(st.coords.astype(np.float64), ev, k_eval)
            scores_ = {"spearman": st.rho_sum / st.rho_n if st.rho_n else float("nan"),
                       "nearest_key": st.near / st.rows if st.rows else float("nan"),
                       "nearest_key_original": st.near_o / st.rows if st.rows else float("nan"),
                       "rows": st.rows,
                       "preservation": qkscale.shared_share(pic, st.space.result())}
        out.append((st.coords, {**scores_, "fitted": size, "fit_seconds": st.fit_s,
                                "place_seconds": st.place_s, "seconds": seconds}))
    return [it for it in found if it is not None], out


# ------------------------------------------------------------------ streaming on Dask workers
#: Tasks per worker when a store's heads are streamed on Dask workers: each task streams a
#: group of heads (three reads of the store, one per pass, shared by the group's heads), so
#: fewer tasks read less and more tasks balance the workers better; consecutive heads go
#: together (a layer's heads in one task where the numbers allow).
TASKS_PER_WORKER = 3


def _store_key(aset: Any) -> tuple[Any, ...]:
    """What a worker checks to know it opened the same store as the client."""
    return (len(aset), aset.n_batches, aset.info.get("inputs_fingerprint"),
            aset.info.get("model_fingerprint"), aset.info.get("qk"))


def _opens_store(where: Any, key: tuple[Any, ...]) -> bool:
    """On a worker: whether it can open the store at ``where`` and finds the client's."""
    from ..storage.corpus import AttentionSet

    try:
        return _store_key(AttentionSet.open(where)) == key
    except Exception:  # any failure to open means: not readable from here
        return False


def _stream_task(where: Any, key: tuple[Any, ...], heads: list[tuple[int, int]], *, size: int,
                 **options: Any) -> list[tuple[np.ndarray, dict[str, float]]]:
    """On a worker: open the store and stream one group of heads (:func:`_stream_heads`)."""
    from ..storage.corpus import AttentionSet

    aset = AttentionSet.open(where)
    if _store_key(aset) != key:
        raise StoreError(f"The store a Dask worker opened at {where} is not the one qk_embedding "
                         "was given (other items or model); it changed during the run.")
    return _stream_heads(aset, heads, size=size, progress=False, **options)[1]


def _worker_groups(heads: list[tuple[int, int]], n_workers: int, most: int) -> list[list[tuple[int, int]]]:
    """Consecutive heads in about :data:`TASKS_PER_WORKER` groups a worker, each of at most
    ``most`` heads (the memory bound of a streamed group)."""
    per = min(most, max(1, -(-len(heads) // (TASKS_PER_WORKER * n_workers))))
    n = -(-len(heads) // per)
    return [[heads[int(j)] for j in part] for part in np.array_split(np.arange(len(heads)), n)]


def _stream_on_workers(aset: Any, todo: list[tuple[int, int]], client: Any, *, size: int,
                       per_group: int, progress: bool, saved: _Saved | None,
                       chosen: list[tuple[int, int]], **options: Any,
                       ) -> tuple[list[_Item], dict[tuple[int, int], Any]] | None:
    """Stream groups of heads on the Dask workers, each task opening the store itself; None
    when a worker cannot open it (an in-memory set, a folder the workers do not share).
    Meanwhile this process reads the items' tokens; finished heads are saved as they come."""
    from ..storage import engine

    where = aset.location
    if where is None:
        return None
    key = _store_key(aset)
    c, owned = engine.connect(client)
    try:
        engine.n_workers(c)  # at least one worker to ask
        can = c.run(_opens_store, where, key)
        if not can or not all(can.values()):
            return None
        groups = _worker_groups(todo, len(can), per_group)
        futures = [c.submit(_stream_task, where, key, g, size=size, pure=False, **options)
                   for g in groups]
        try:
            items = _store_items(aset, progress)  # the tokens, while the workers stream
            which = {f.key: g for f, g in zip(futures, groups)}
            done: dict[tuple[int, int], Any] = {}
            bar = _bar(total=len(todo), show=progress, desc="query-key space (Dask workers)",
                       unit="head")
            for fut, res in _completed(c, futures, heads=chosen, saved=saved):
                for lh, r in zip(which[fut.key], res):
                    done[lh] = r
                    if saved is not None:
                        saved.write(*lh, *r)
                bar.update(len(which[fut.key]))
            bar.close()
        except BaseException:
            engine.cancel(c, futures)
            raise
        return items, done
    finally:
        if owned:
            c.close()


def _completed(c: Any, futures: list, *, heads: list[tuple[int, int]],
               saved: _Saved | None) -> Iterator[tuple[Any, Any]]:
    """Each future with its result as it finishes. A worker that died on a task (Dask's
    ``KilledWorker``), a closed client or a lost connection becomes a :class:`ClusterError`
    that names the heads of ``heads`` saved so far and those not, and how to resume; a
    task's own error is raised as it is."""
    from distributed import as_completed

    from ..storage import engine

    fut = None
    try:
        for fut in as_completed(futures, loop=c.loop):
            res = fut.result()
            yield fut, res
            fut = None  # what follows the yield is not the cluster's doing
    except AttnkitError:
        raise
    except Exception as exc:
        if not engine.cluster_lost(exc, fut):
            raise
        raise _interrupted(exc, heads, saved) from exc


def _interrupted(exc: BaseException, heads: list[tuple[int, int]], saved: _Saved | None) -> ClusterError:
    """The error of a run the cluster lost: what is kept, what is not, how to go on."""
    def names(hs: list[tuple[int, int]]) -> str:
        return ", ".join(f"({l}, {h})" for l, h in hs) if hs else "none"

    why = (f"qk_embedding: the Dask cluster lost the work before every head was done "
           f"({type(exc).__name__}: {exc}): a worker died (killed, or out of memory), or the "
           "connection to the scheduler was lost.")
    if saved is None:
        return ClusterError(f"{why} The heads finished so far were not kept: save=folder keeps "
                            "each head of a stored corpus as it finishes, so that a rerun resumes.")
    have = [lh for lh in heads if saved.has(*lh)]
    kept = set(have)
    left = [lh for lh in heads if lh not in kept]
    return ClusterError(
        f"{why} Finished and saved in {saved.path}: {len(have)} of {len(heads)} heads "
        f"({names(have)}; (layer, head) from 0, as in heads=); not done: {names(left)}. Call "
        "qk_embedding again with the same save= (and settings) to resume: the saved heads are "
        "read back, only the others are computed.")


# ------------------------------------------------------------------ the functions
def _run(hps: list[HeadPoints], client: Any, progress: bool, saved: _Saved | None,
         chosen: list[tuple[int, int]], **options: Any) -> list[Any]:
    """Embed each head (here or on ``client``); with ``saved``, each head's result is written
    there as soon as it is done (``chosen``: every head of the call, for the message of a
    run the cluster lost)."""
    if client is None:
        bar = _bar(hps, show=progress and len(hps) > 1, desc="query-key space", unit="head")
        out = []
        for hp in bar:
            out.append(embed_head(hp, progress=progress, **options))
            if saved is not None:
                saved.write(hp.layer, hp.head, *out[-1])
        return out
    from ..storage import engine

    c, owned = engine.connect(client)
    try:
        # one scatter of every head (one round trip, spread over the workers), a task a head
        futures = [c.submit(embed_head, hp, pure=False, **options) for hp in c.scatter(hps, direct=True)]
        which = {f.key: hp for f, hp in zip(futures, hps)}
        got: dict[Any, Any] = {}
        try:
            for fut, res in _completed(c, futures, heads=chosen, saved=saved):
                got[fut.key] = res
                if saved is not None:
                    hp = which[fut.key]
                    saved.write(hp.layer, hp.head, *res)
        except BaseException:
            engine.cancel(c, futures)
            raise
        return [got[f.key] for f in futures]
    finally:
        if owned:
            c.close()


class _Saved:
    """A folder of per-head results of one :func:`qk_embedding` of a store (``save=``).

    The folder holds :data:`SAVE_MARKER`, written when attnkit created the folder (or
    found it empty), with the settings of the embedding; each head's coordinates and scores
    go to ``head-<layer>-<head>.npz`` (0-indexed) through a temporary file and a rename as
    soon as the head is done. A folder that is not empty and has no marker, or one made with
    other settings, is refused before anything is written: attnkit writes only into folders
    it can prove it made for this embedding, and never deletes anything.
    """

    def __init__(self, path: Path, settings: dict[str, Any]) -> None:
        import json

        from ..storage.store import atomic_write

        self.path = Path(path)
        self._atomic_write = atomic_write
        marker = self.path / SAVE_MARKER
        if self.path.exists() and not self.path.is_dir():
            raise InputError(f"save: {self.path} is a file, not a folder; name a new folder.")
        if marker.is_file():
            try:
                got = json.loads(marker.read_text())
            except (OSError, ValueError) as exc:
                raise InputError(f"save: cannot read {marker} ({exc}); name a new folder.") from None
            old = got.get("settings", {}) if isinstance(got, dict) else {}
            differ = sorted(k for k in set(old) | set(settings) if old.get(k) != settings.get(k))
            if got.get("format") != SAVE_FORMAT or differ:
                raise InputError(
                    f"save: {self.path} holds a query-key embedding made with other settings "
                    f"({', '.join(f'{k}: {old.get(k)!r} there, {settings.get(k)!r} now' for k in differ)}); "
                    "name a new folder, or call again with the same settings to resume.")
        elif self.path.exists() and any(self.path.iterdir()):
            raise InputError(f"save: {self.path} is not empty and was not made by qk_embedding (no "
                             f"{SAVE_MARKER}); attnkit writes only into a new or empty folder.")
        else:
            data = json.dumps({"format": SAVE_FORMAT, "settings": settings}, indent=1).encode()
            atomic_write(marker, lambda fh: fh.write(data))

    def _file(self, layer: int, head: int) -> Path:
        return self.path / f"head-{layer}-{head}.npz"

    def has(self, layer: int, head: int) -> bool:
        """Whether the head's result is in the folder."""
        return self._file(layer, head).is_file()

    def read(self, layer: int, head: int) -> tuple[np.ndarray, dict[str, float]] | None:
        """A finished head's coordinates and scores, or None."""
        import json

        f = self._file(layer, head)
        if not f.is_file():
            return None
        with np.load(f, allow_pickle=False) as z:
            return np.asarray(z["coords"]), json.loads(str(z["scores"]))

    def write(self, layer: int, head: int, coords: np.ndarray, scores_: dict[str, float]) -> None:
        """Write one head's result (a temporary file, then a rename)."""
        import io
        import json

        buf = io.BytesIO()
        np.savez(buf, coords=np.asarray(coords, dtype=np.float32),
                 scores=np.array(json.dumps({k: float(v) for k, v in scores_.items()})))
        data = buf.getvalue()
        self._atomic_write(self._file(layer, head), lambda fh: fh.write(data))


def qk_embedding(
    attentions: Any,
    *,
    heads: Sequence[tuple[int, int]] | None = None,
    method: str = "umap",
    dims: int = 2,
    normalize: bool = True,
    sample: int | str | None = "auto",
    placement: str = "knn",
    seed: int = 0,
    client: Any = None,
    progress: bool = True,
    save: str | Path | None = None,
) -> QKEmbedding:
    """Queries and keys of each head projected together (AttentionViz, Yeh et al. 2023).

    Per head, over every position of every input: AttentionViz's normalisation (keys
    translated so their mean equals the queries' mean, then queries and keys scaled so their
    mean norms match; :func:`normalize_qk`) — **it changes no attention weight**, since the
    translation adds ``q . t`` to every score of a row (removed by the row's softmax) and the
    scaling multiplies queries by ``c`` and keys by ``1 / c`` — then one projection of the
    ``2N`` points together.

    Parameters
    ----------
    attentions : Attention, LazyAttention, AttentionSet or iterable of Attention
        Token-level attention that keeps queries and keys: ``model.attend(text)``,
        ``model.attend(text, lazy=True)``, or a store extracted with ``keep="qk"``.
    heads : sequence of (layer, head), optional
        0-indexed heads to embed; ``None`` embeds every head of the kept layers.
    method : {"umap", "tsne", "pca"}
        UMAP (umap-learn), t-SNE (openTSNE) or PCA.
    dims : {2, 3}
        Dimensions of the picture.
    normalize : bool
        Apply the normalisation first (AttentionViz does).
    sample : int, "auto" or None
        Fit the projection on this many of a head's points (queries and keys together) and
        place the rest: a stratified sample (queries and keys, each position range 0, 1,
        2-3, 4-7, ... in proportion, evenly spread over the items;
        :func:`~attnkit.analysis.qkscale.stratified_sample`). ``"auto"`` fits UMAP and
        t-SNE on :data:`~attnkit.analysis.qkscale.AUTO_SAMPLE` points when a head has more
        than :data:`~attnkit.analysis.qkscale.AUTO_ABOVE`, and on every point otherwise
        (PCA always on every point); ``None`` fits on every point. A sampled embedding of a
        store streams it: the stored batches are read one at a time in three passes (the
        normalisation's sums, the sample's vectors and the scored points'; the keys' norms
        after the shift; placement and scores), one read of a batch serving a group of
        heads, so memory holds the sample, each head's coordinates and one batch of raw
        vectors, whatever the corpus' size (``.meta["streamed"]``). With ``client``, each
        Dask worker does the same for the groups of heads it is given (below).
    placement : {"knn", "transform"}
        How the points outside the sample are placed: ``"knn"``, on the picture of their
        nearest sampled point in the normalised query-key space, spread around it by the
        picture's local linear map there (:func:`~attnkit.analysis.qkscale.place_knn`;
        chosen on EWT dev, docs/benchmarks.md); ``"transform"``, by
        the fitted estimator's own ``transform`` (UMAP's, openTSNE's). PCA is always
        placed by its linear map.
    seed : int
        The only source of randomness (UMAP, t-SNE, the sample).
    client : dask.distributed.Client or str, optional
        Embed the heads in parallel on this Dask cluster; ``None`` runs here, with the
        same results. A sampled embedding of a store whose path every worker can open (a
        folder on a filesystem they share, as on a ``LocalCluster``, or a URL they can reach)
        is streamed on the workers: one task per group of consecutive heads (about
        :data:`TASKS_PER_WORKER` a worker), each opening the store and reading it in the three
        passes above, so no process holds a whole head's raw vectors; this process reads only
        the items' tokens meanwhile, and saves each head (``save``) as its group finishes.
        Otherwise (a set held in this process's memory, a store the workers cannot open or
        find different: they are asked first, with ``client.run``), the heads are read here,
        a group at a time, and sent to the workers whole (``.meta["streamed"]`` is False).
    progress : bool
        Show progress: over heads, and within a sampled head its fit, its placement chunk
        by chunk and its scores.
    save : str or Path, optional
        With a store: a folder (new or empty) that each head's coordinates and scores are
        written into as soon as the head is done. Called again with the same folder and
        settings, a stopped embedding resumes: finished heads are read back, the others
        computed. A folder not made by ``qk_embedding``, or made with other settings, is
        refused (nothing in it is touched).

    Returns
    -------
    QKEmbedding
        ``.table`` one row per point (``layer``, ``head``, ``item``, ``position``, ``token``,
        ``role``, ``kind``, ``x``, ``y``, and ``z`` for 3-D); ``.faithfulness`` per head
        (:func:`head_faithfulness`, with ``preservation``: the share of each point's 10
        nearest neighbours in the picture that are also its nearest in the query-key space,
        over 1,000 seeded points; ``fitted`` points, ``fit_seconds``, ``place_seconds``);
        ``.meta``: method, sample size, sampling and placement rule, mean quality, and
        ``streamed`` (read from a store in chunks) with ``chunk`` (what one chunk is). For a
        streamed head, ``seconds`` is the time of the passes it shared with the heads
        read with it.

    Raises
    ------
    InputError
        Attention without queries and keys, heads or layers out of range or named twice,
        an unknown or not installed method, fewer points than the method needs, a sample
        larger than a head's points, NaN in queries or keys; ``save`` without a store, or
        naming a folder attnkit did not make for this embedding.
    ClusterError
        With ``client``: a worker died on a task (Dask's ``KilledWorker``), the client was
        closed, or the connection to the scheduler was lost. The message names the heads
        finished and saved in ``save`` and those not; the same call with the same ``save``
        resumes.

    Examples
    --------
    >>> import attnkit as ak
    >>> from attnkit.testing import tiny_model
    >>> att = tiny_model("llama").attend("The cat sat on the mat.")
    >>> emb = ak.qk_embedding(att, method="pca", dims=3)
    >>> list(emb.table.columns)
    ['layer', 'head', 'item', 'position', 'token', 'role', 'kind', 'x', 'y', 'z']
    >>> emb.faithfulness.table.index.names, len(emb.faithfulness.table)
    (FrozenList(['layer', 'head']), 4)
    """
    seed = validate.seed(seed)
    _check_method(method, dims)
    if placement not in PLACEMENTS:
        raise InputError(f"placement must be one of {sorted(PLACEMENTS)}, not {placement!r}.")
    options = dict(method=method, dims=dims, normalize=normalize, seed=seed, sample=sample,
                   placement=placement)
    options_stream: dict[str, Any] = dict(method=method, dims=dims, normalize=normalize, seed=seed,
                                          placement=placement)
    streamed = False
    folder = None if save is None else validate.path(save, "save")
    store = _is_store(attentions)
    if save is not None and not store:
        raise InputError("save= keeps the per-head results of a stored corpus (an AttentionSet "
                         "extracted with keep='qk'); attention in memory is embedded in one go.")
    results: list[Any] = []
    hps: list[HeadPoints] = []
    if store:
        qk = attentions.info["qk"]
        chosen = _heads(list(qk["layers"]), int(qk["heads"]), attentions.n_layers, heads)
        n_pos = int(attentions.items()["n"].sum())
        sample_size(sample, 2 * n_pos, method)  # a bad sample fails before any reading
        saved = None if folder is None else _Saved(folder, {
            **options, "store": str(attentions.path), "model": attentions.model,
            "model_fingerprint": attentions.info.get("model_fingerprint"),
            "inputs_fingerprint": attentions.info.get("inputs_fingerprint"), "positions": n_pos})
        done = {} if saved is None else {lh: saved.read(*lh) for lh in chosen}
        todo = [lh for lh in chosen if done.get(lh) is None]
        size = sample_size(sample, 2 * n_pos, method)
        items: list[_Item] = []
        finished: dict[tuple[int, int], Any] = {lh: r for lh, r in done.items() if r is not None}
        # what a streamed head holds: its points' pictures (the raw vectors go by in chunks)
        per_group = max(1, GATHER_BYTES // max(1, 2 * n_pos * dims * 4))
        streamed = size is not None
        there = None
        if streamed and client is not None and todo:
            # each worker opens the store and streams a group of heads; None when they cannot
            # open it (then the heads are read here and sent to them, whole)
            assert size is not None
            there = _stream_on_workers(attentions, todo, client, size=size, per_group=per_group,
                                       progress=progress, saved=saved, chosen=chosen,
                                       **options_stream)
            streamed = there is not None
        if there is not None:
            items, got_there = there
            finished.update(got_there)
        elif streamed and (client is None or not todo):
            assert size is not None
            groups = [todo[g:g + per_group] for g in range(0, len(todo), per_group)]
            bar = _bar(groups, show=progress and len(groups) > 1, desc="query-key space", unit="group")
            for g, part in enumerate(bar):
                got, res = _stream_heads(attentions, part, size=size, progress=progress,
                                         want_items=g == 0, **options_stream)
                items = got if g == 0 else items
                for (l, h), r in zip(part, res):
                    finished[(l, h)] = r
                    if saved is not None:
                        saved.write(l, h, *r)
            if not todo:  # every head saved: only the tokens are read
                items = _store_items(attentions, progress)
        else:
            per_group = max(1, GATHER_BYTES // max(1, 2 * n_pos * int(qk["dim"]) * 4))
            for g in range(0, len(todo), per_group):
                got, part = _gather_store(attentions, todo[g:g + per_group], want_items=g == 0,
                                          progress=progress)
                items = got if g == 0 else items
                # the vectors go once a head is embedded; what stays is its coordinates
                for hp, r in zip(part, _run(part, client, progress, saved, chosen, **options)):
                    finished[(hp.layer, hp.head)] = r
                del part
            if not todo:  # every head saved: only the tokens are read
                items = _store_items(attentions, progress)
        scaling = dict(zip(qk["layers"], qk["scaling"]))
        empty = np.zeros((0, int(qk["dim"])), dtype=np.float32)
        for l, h in chosen:
            hps.append(HeadPoints(l, h, empty, empty, np.zeros(1, dtype=np.int64), float(scaling[l]),
                                  qk.get("softcap"), attentions.causal))
            results.append(finished[(l, h)])
    else:
        items = _sources(attentions)
        st0 = items[0].states
        chosen = _heads(st0.layers, int(st0.queries(st0.layers[0]).shape[0]) if st0.layers else 0,
                        items[0].n_layers, heads)
        by_layer: dict[int, list[int]] = {}
        for l, h in chosen:
            by_layer.setdefault(l, []).append(h)
        hps = [hp for l, hs in by_layer.items() for hp in _gather(items, l, hs)]
        sample_size(sample, 2 * len(hps[0].queries), method)
        results = _run(hps, client, progress, None, chosen, **options)
    # the points as columns of arrays, head after head (each head's queries, then its keys,
    # items in order); tokens and roles stay with the inputs until asked for
    item_col = np.concatenate([np.full(len(it.tokens), it.item, dtype=np.int32) for it in items])
    pos_col = np.concatenate([np.arange(len(it.tokens), dtype=np.int32) for it in items])
    n = len(item_col)
    rows = [{"layer": hp.layer, "head": hp.head, **faith} for hp, (_, faith) in zip(hps, results)]
    coords = np.concatenate([y for y, _ in results]) if results else np.zeros((0, dims), np.float32)
    del results
    columns: dict[str, np.ndarray] = {
        "layer": np.repeat(np.asarray([hp.layer for hp in hps], dtype=np.int16), 2 * n),
        "head": np.repeat(np.asarray([hp.head for hp in hps], dtype=np.int16), 2 * n),
        "item": np.tile(item_col, 2 * len(hps)), "position": np.tile(pos_col, 2 * len(hps)),
        "kind": np.tile(np.repeat(np.asarray([0, 1], dtype=np.uint8), n), len(hps)),
    }
    for j, a in enumerate(["x", "y", "z"][:dims]):
        columns[a] = np.ascontiguousarray(coords[:, j], dtype=np.float32)
    del coords
    faith_table = pd.DataFrame(rows).set_index(["layer", "head"])
    size = sample_size(sample, 2 * n, method)
    meta = {"method": method, "dims": dims, "normalize": normalize, "seed": seed,
            "n_layers": items[0].n_layers,
            "n_heads": int(items[0].states.queries(items[0].states.layers[0]).shape[0]),
            "heads": [list(x) for x in chosen], "n_items": len(items), "n_positions": n,
            "n_points": 2 * n, "sample": size, "streamed": streamed,
            "chunk": STREAM_CHUNK if streamed else None,
            "sampling": (None if size is None else
                         "stratified: queries and keys, position ranges 0, 1, 2-3, 4-7, ... in "
                         "proportion; evenly spaced over the items in each (seeded start)"),
            "placement": (None if size is None else
                          "the fitted PCA's linear map" if method == "pca" else PLACEMENTS[placement]),
            "quality": {"preservation": f"share of the {QUALITY_K} nearest neighbours in the picture "
                                        "that are also nearest in the normalised query-key space "
                                        f"({'normalised' if normalize else 'raw'}), over "
                                        f"{QUALITY_EVAL} seeded points",
                        "mean_preservation": float(faith_table["preservation"].mean()),
                        "mean_spearman": float(faith_table["spearman"].mean()),
                        "mean_nearest_key": float(faith_table["nearest_key"].mean())},
            "citation": "Yeh et al. 2023, AttentionViz (IEEE VIS)"}
    faith_res = HeadResult(faith_table, {**meta, "what": "faithfulness of the picture"},
                           value="spearman")
    return QKEmbedding(columns, meta, faithfulness=faith_res, sources=items)


def qk_faithfulness(
    attentions: Any,
    *,
    heads: Sequence[tuple[int, int]] | None = None,
    method: str = "umap",
    dims: int = 2,
    sample: int | str | None = "auto",
    placement: str = "knn",
    seed: int = 0,
    client: Any = None,
    progress: bool = True,
) -> HeadResult:
    """How faithful a query–key picture is, with and without AttentionViz's normalisation.

    Embeds each head twice (:func:`qk_embedding` with ``normalize=True`` and ``False``) and
    reports, per head and for each: ``spearman`` — the rank correlation, per row, between
    the attention weight of each key and the closeness of the query to it in the picture,
    averaged over rows (1: distance orders keys exactly as attention does); ``nearest_key``
    — the share of rows whose nearest key in the picture is the key they attend to most;
    ``nearest_key_original`` — the same share in the original ``d``-dimensional space.

    Parameters
    ----------
    attentions : Attention, LazyAttention, AttentionSet or iterable of Attention
        Attention that keeps queries and keys (see :func:`qk_embedding`).
    heads : sequence of (layer, head), optional
        0-indexed heads; ``None`` for every kept head.
    method : {"umap", "tsne", "pca"}
        The projection.
    dims : {2, 3}
        Dimensions of the picture.
    sample : int, "auto" or None
        Fit on a sample and place the rest (see :func:`qk_embedding`).
    placement : {"knn", "transform"}
        How the rest is placed (see :func:`qk_embedding`).
    seed : int
        The only source of randomness.
    client : dask.distributed.Client or str, optional
        Run the heads on this Dask cluster.
    progress : bool
        Show progress bars.

    Returns
    -------
    HeadResult
        Indexed by ``(layer, head)``; columns ``<score>_raw`` and ``<score>_normalized`` for
        ``spearman``, ``nearest_key``, ``nearest_key_original``, ``preservation`` (see
        :func:`qk_embedding`), and ``rows``.

    Raises
    ------
    InputError
        As :func:`qk_embedding`.

    Examples
    --------
    >>> import attnkit as ak
    >>> from attnkit.testing import tiny_model
    >>> att = tiny_model("gpt2").attend("The cat sat on the mat and the dog sat on the rug.")
    >>> r = ak.qk_faithfulness(att, method="pca")
    >>> sorted(r.table.columns)[:3]
    ['nearest_key_normalized', 'nearest_key_original_normalized', 'nearest_key_original_raw']
    """
    seed = validate.seed(seed)
    parts = {}
    for norm, name in ((False, "raw"), (True, "normalized")):
        emb = qk_embedding(attentions, heads=heads, method=method, dims=dims, normalize=norm,
                           sample=sample, placement=placement, seed=seed, client=client, progress=progress)
        f = emb.faithfulness.table
        parts[name] = f
    table = pd.DataFrame(index=parts["raw"].index)
    for col in ("spearman", "nearest_key", "nearest_key_original", "preservation"):
        for name in ("raw", "normalized"):
            table[f"{col}_{name}"] = parts[name][col]
    table["rows"] = parts["raw"]["rows"]
    return HeadResult(table, {"method": method, "dims": dims, "seed": seed,
                              "citation": "Yeh et al. 2023, AttentionViz (IEEE VIS)"},
                      value="spearman_normalized")
