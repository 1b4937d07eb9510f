"""A lazy attention map for tests: weights computed on demand from random queries and keys,
as ``LazyAttention`` does from a model's Q/K, with an attention sink on the first token and
a previous-token pattern so long maps have structure. Satisfies ``attnkit.core.types.AttentionLike``
and counts the cells each read computes (``largest_read``), so tests can check that views
never materialise a whole long map."""

from __future__ import annotations

import numpy as np

from attnkit.core.attention import pool_edges


class QKAttention:
    def __init__(self, n: int, n_layers: int = 2, n_heads: int = 2, *, d: int = 16, causal: bool = True,
                 seed: int = 0, sink: float = 5.0, previous: float = 3.0) -> None:
        rng = np.random.default_rng(seed)
        self.q = rng.standard_normal((n_layers, n_heads, n, d)).astype(np.float32)
        self.k = rng.standard_normal((n_layers, n_heads, n, d)).astype(np.float32)
        self.sink, self.previous = sink, previous
        self.tokens = ["<s>"] + [f"w{i}" for i in range(1, n)]
        self.roles = np.array(["cls"] + ["word"] * (n - 1), dtype="<U7")
        self.word_ids = np.array([-1] + list(range(n - 1)))
        self.words = self.tokens[1:]
        self.level = "token"
        self.causal = causal
        self.meta: dict = {}
        self.model = "qk-random"
        self.largest_read = 0
        self._lse: dict[tuple[int, int], np.ndarray] = {}

    @property
    def n_layers(self) -> int:
        return self.q.shape[0]

    @property
    def n_heads(self) -> int:
        return self.q.shape[1]

    def __len__(self) -> int:
        return self.q.shape[2]

    def _logits(self, layer: int, head: int, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """Scaled q.k logits of rows x cols (both ascending), sink and previous-token biases,
        -inf above the diagonal of a causal map."""
        d = self.q.shape[-1]
        z = self.q[layer, head, rows] @ self.k[layer, head, cols].T * np.float32(1 / np.sqrt(d))
        z[:, cols == 0] += self.sink
        at = np.searchsorted(cols, rows - 1)  # column index of each row's previous token
        ok = (at < cols.size) & (cols[np.minimum(at, cols.size - 1)] == rows - 1)
        z[np.flatnonzero(ok), at[ok]] += self.previous
        if self.causal:
            first_later = np.searchsorted(cols, rows, side="right")
            for i in np.flatnonzero(first_later < cols.size):
                z[i, first_later[i]:] = -np.inf
        return z

    def _row_lse(self, layer: int, head: int) -> np.ndarray:
        key = (layer, head)
        if key not in self._lse:
            n = len(self)
            out = np.empty(n, dtype=np.float32)
            cols = np.arange(n)
            step = max(1, (1 << 22) // n)
            for r0 in range(0, n, step):
                rows = np.arange(r0, min(n, r0 + step))
                z = self._logits(layer, head, rows, cols)
                m = z.max(axis=1, keepdims=True)
                out[rows] = (m + np.log(np.exp(z - m).sum(axis=1, keepdims=True)))[:, 0]
            self._lse[key] = out
        return self._lse[key]

    def block(self, layer: int, head: int, rows: slice, cols: slice) -> np.ndarray:
        n = len(self)
        r = np.arange(n)[rows]
        c = np.arange(n)[cols]
        self.largest_read = max(self.largest_read, r.size * c.size)
        z = self._logits(layer, head, r, c)
        z -= self._row_lse(layer, head)[r][:, None]
        return np.exp(z, out=z)

    def map(self, layer: int, head: int) -> np.ndarray:
        return self.block(layer, head, slice(None), slice(None))

    def pooled(self, layer: int, head: int, size: int, reduce: str = "max") -> np.ndarray:
        """One pass over row strips: logits, their row log-sum-exp, weights, bins."""
        n = len(self)
        edges = pool_edges(n, size)
        starts = edges[:-1]
        cols = np.arange(n)
        out = np.empty((len(starts), len(starts)), dtype=np.float32)
        for i, (a, b) in enumerate(zip(edges[:-1], edges[1:])):  # noqa: RUF007
            z = self._logits(layer, head, np.arange(a, b), cols)
            m = z.max(axis=1, keepdims=True)
            z -= m
            np.exp(z, out=z)
            z /= z.sum(axis=1, keepdims=True)
            self.largest_read = max(self.largest_read, z.size)
            if reduce == "max":
                out[i] = np.maximum.reduceat(z, starts, axis=1).max(axis=0)
            else:
                out[i] = np.add.reduceat(z.astype(np.float64), starts, axis=1).sum(axis=0) / (b - a) / np.diff(edges)
        return out


def causal_random_map(n: int, seed: int = 0) -> np.ndarray:
    """A dense float32 ``[n, n]`` causal attention map from random logits (rows sum to 1)."""
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((n, n)) * 2.0
    z[np.triu_indices(n, 1)] = -np.inf
    e = np.exp(z - z.max(1, keepdims=True))
    return (e / e.sum(1, keepdims=True)).astype(np.float32)
