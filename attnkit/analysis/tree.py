"""Maximum spanning tree decoding of dependency scores (Chu–Liu–Edmonds).

networkx's ``maximum_spanning_arborescence`` is exact but takes ~20 s on one 120-word
sentence (complete graph), so the probes use this numpy version, checked against networkx
in the tests.
"""

from __future__ import annotations

import numpy as np

from ..errors import InputError


def _find_cycle(head: np.ndarray) -> list[int] | None:
    """A cycle in the head pointers (``head[0] = -1`` is the root), or None."""
    n = len(head)
    state = np.zeros(n, np.int8)  # 0 unvisited, 1 on the current path, 2 done
    state[0] = 2
    for start in range(1, n):
        path = []
        v = start
        while state[v] == 0:
            state[v] = 1
            path.append(v)
            v = head[v]
        if state[v] == 1:  # came back onto the current path: a cycle
            return path[path.index(v):]
        for u in path:
            state[u] = 2
    return None


def _cle(S: np.ndarray) -> np.ndarray:
    head = S.argmax(0)
    head[0] = -1
    cycle = _find_cycle(head)
    if cycle is None:
        return head
    cyc = np.array(cycle)
    in_c = np.zeros(len(S), bool)
    in_c[cyc] = True
    rest = np.flatnonzero(~in_c)  # contains the root 0, first
    m = len(rest) + 1  # the contracted cycle becomes node m - 1
    T = np.full((m, m), -np.inf)
    T[: m - 1, : m - 1] = S[np.ix_(rest, rest)]
    into = S[np.ix_(rest, cyc)] - S[head[cyc], cyc][None, :]
    T[: m - 1, m - 1] = into.max(1)
    outof = S[np.ix_(cyc, rest)]
    T[m - 1, : m - 1] = outof.max(0)
    T[:, 0] = -np.inf
    sub = _cle(T)
    out = head.copy()
    best_out = outof.argmax(0)
    for idx in range(1, m - 1):
        h = sub[idx]
        out[rest[idx]] = cyc[best_out[idx]] if h == m - 1 else rest[h]
    h = sub[m - 1]
    out[cyc[into[h].argmax()]] = rest[h]
    return out


def max_spanning_tree(scores: np.ndarray, *, single_root: bool = True) -> np.ndarray:
    """Highest-scoring dependency tree.

    Parameters
    ----------
    scores : float ``[m, m + 1]``: ``scores[j, 0]`` scores ROOT as the head of word ``j``,
        ``scores[j, 1 + i]`` scores word ``i`` as its head (e.g. log-probabilities);
        ``scores[j, 1 + j]`` is ignored.
    single_root : exactly one word attaches to ROOT (a well-formed UD tree).

    Returns
    -------
    int ``[m]``: the head of each word, 0 for ROOT and ``1 + i`` for word ``i`` (the
    CoNLL-U convention).
    """
    scores = np.asarray(scores, dtype=np.float64)
    if scores.ndim != 2 or scores.shape[1] != scores.shape[0] + 1:
        raise InputError(f"scores must have shape [m, m + 1]; got {scores.shape}.")
    if not np.isfinite(scores).all():
        raise InputError("scores must be finite (use large negative numbers, not -inf).")
    m = scores.shape[0]
    S = np.full((m + 1, m + 1), -np.inf)  # S[h, d] over nodes 0 = ROOT, 1 + i = word i
    S[:, 1:] = scores.T
    S[np.arange(1, m + 1), np.arange(1, m + 1)] = -np.inf
    if single_root and m > 1:
        # A penalty larger than any score difference makes one root edge always optimal.
        span = (scores.max(1) - scores.min(1)).sum()
        S[0, 1:] -= 1.0 + 2.0 * span
    return _cle(S)[1:]
