"""`LazyAttention`: exact attention maps of long inputs, computed on demand.

Dense attention of one input is ``[layer, head, n, n]`` float32: ``4 L H n^2`` bytes, 275 GB
for a 7 B model at 8k tokens. Lazy attention keeps, per layer, what the maps are made of:
the post-rotary queries ``[H, n, d]`` and keys ``[H_kv, n, d]`` (in the model's dtype, on the
model's device), each row's log-sum-exp ``[H, n]`` (float32, from the same fused kernel that
computed the layer's output) and the mask as one contiguous span of keys per row — memory
``O(L n d)``. Any block of any head is then exact::

    A[q, k] = exp(s(q, k) - lse[q])   for lo[q] <= k < hi[q], else 0
    s(q, k) = query[q] . key[k] * scaling   (soft-capped where the model caps logits)

the same probabilities the eager path computes (sinks included in ``lse``), computed on the
model's device, a block of rows at a time, and handed back as numpy on the CPU.

:meth:`Model.attend <attnkit.Model.attend>` returns one for ``lazy=True``, and by itself when
the dense maps would pass :data:`attnkit.runtime.model.LAZY_ABOVE_BYTES` (1 GiB).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core import validate
from ..core.attention import Attention, Positions, QKReader, word_groups
from ..core.blocks import BAND_ELEMENTS, EdgePool, summarize
from .capture import LayerQK
from ..errors import EmptyInputError, InputError
from ..core.qkstates import QKStates

Index = Any  # a slice, or a sequence of ints


class LazyAttention(Positions, QKReader):
    """Attention of one model on one long input, computed exactly on demand.

    It has :class:`~attnkit.Attention`'s alignment (``tokens``, ``roles``, ``word_ids``,
    ``words``, ``segments``, ``input_ids``, ``level``, ``causal``, ``meta``) and its readers
    (``map``, ``block``, ``pooled``), and satisfies :class:`attnkit.core.types.AttentionLike`, so
    it goes wherever an Attention goes. Each reader says what it materialises; ``maps`` and
    :meth:`to_dense` materialise everything, explicitly.

    Parameters
    ----------
    layers : sequence of LayerQK
        Per layer: queries, keys, row log-sum-exps and mask spans (:mod:`attnkit.runtime.capture`).
    tokens, roles, word_ids, words, segments, input_ids, embeddings, meta, model, causal
        The alignment, as on :class:`~attnkit.Attention` (token level).

    Raises
    ------
    InputError
        When the per-position lists do not have one entry per position.

    Examples
    --------
    >>> from attnkit.testing import tiny_model
    >>> model = tiny_model("mistral")
    >>> att = model.attend("The cat sat on the mat.", lazy=True)
    >>> att.n_layers, att.n_heads, len(att) == len(att.tokens)
    (2, 2, True)
    >>> bool(abs(att.map(1, 0).sum(-1) - 1).max() < 1e-5)
    True
    >>> att.block(0, 0, slice(0, 3), slice(0, 3)).shape
    (3, 3)
    """

    measure = "weights"
    truncated = False

    def __init__(
        self,
        layers: Sequence[LayerQK],
        *,
        tokens: Sequence[str],
        roles: Any,
        word_ids: Any,
        words: Sequence[str],
        segments: Any = None,
        input_ids: Any = None,
        embeddings: np.ndarray | None = None,
        meta: dict[str, Any] | None = None,
        model: str = "",
        causal: bool = False,
    ):
        if not layers:
            raise InputError("LazyAttention needs at least one layer.")
        self._layers = list(layers)
        self._groups: Any = None  # word level: token -> word-level position (torch, device)
        self._group_sizes: Any = None  # word level: tokens per word-level position
        self._n_tokens = int(self._layers[0].query.shape[1])
        if self._n_tokens == 0:
            raise EmptyInputError("Attention with 0 positions: give at least one token.")
        self.tokens = [str(t) for t in tokens]
        self.roles = validate.roles(roles)
        self.words = list(words)
        self.word_ids = validate.word_ids(word_ids, len(self.words), len(np.asarray(word_ids)))
        self.segments = (np.where(self.roles == "word", 0, -1) if segments is None
                         else np.asarray(segments, dtype=np.int64))
        self.input_ids = None if input_ids is None else np.asarray(input_ids, dtype=np.int64)
        self.embeddings = embeddings
        self.meta = dict(meta or {})
        self.model = model
        self.causal = bool(causal)
        self.level = "token"
        for name in ("tokens", "roles", "word_ids", "segments") + (
                ("input_ids",) if self.input_ids is not None else ()):
            if len(getattr(self, name)) != self._n_tokens:
                raise InputError(f"LazyAttention.{name} has {len(getattr(self, name))} entries "
                                 f"but the queries have {self._n_tokens} positions.")

    def __repr__(self) -> str:
        return (f"LazyAttention({self.n_layers} layers x {self.n_heads} heads, {len(self)} "
                f"{self.level} positions, on {self.device})")

    # ------------------------------------------------------------------ shape
    @property
    def n_layers(self) -> int:
        return len(self._layers)

    @property
    def n_heads(self) -> int:
        return int(self._layers[0].query.shape[0])

    def __len__(self) -> int:
        return len(self.tokens)

    @property
    def device(self) -> Any:
        """The ``torch.device`` the queries and keys live on (where maps are computed)."""
        return self._layers[0].query.device

    @property
    def nbytes(self) -> int:
        """Bytes held: queries, keys, log-sum-exps and spans of every layer."""
        seen, total = set(), 0
        for layer in self._layers:
            for t in (layer.query, layer.key, layer.lse, layer.spans.lo, layer.spans.hi):
                if id(t) not in seen:
                    seen.add(id(t))
                    total += t.numel() * t.element_size()
        return total

    # ------------------------------------------------------------------ readers
    def map(self, layer: int, head: int) -> np.ndarray:
        """The float32 ``[n, n]`` map of one head (materialises ``n * n`` floats: that map).

        Parameters
        ----------
        layer, head : int
            0-indexed layer and head.

        Returns
        -------
        ndarray
            Float32 ``[n, n]``: row ``q`` is attention from position ``q``.

        Raises
        ------
        InputError
            For a head outside the model.

        Examples
        --------
        >>> from attnkit.testing import tiny_model
        >>> att = tiny_model("llama").attend("The cat sat.", lazy=True)
        >>> att.map(0, 0).shape == (len(att), len(att))
        True
        """
        return self.block(layer, head, slice(None), slice(None))

    def head(self, layer: int, head: int) -> np.ndarray:
        """Same as :meth:`map`.

        Parameters
        ----------
        layer, head : int
            0-indexed layer and head.

        Returns
        -------
        ndarray
            Float32 ``[n, n]``.

        Examples
        --------
        >>> from attnkit.testing import tiny_model
        >>> att = tiny_model("llama").attend("The cat sat.", lazy=True)
        >>> bool((att.head(1, 1) == att.map(1, 1)).all())
        True
        """
        return self.map(layer, head)

    def block(self, layer: int, head: int, rows: Index, cols: Index) -> np.ndarray:
        """The float32 block ``map(layer, head)[rows, cols]`` (materialises only the block).

        ``rows`` and ``cols`` are slices or sequences of positions (an outer product, like
        ``map[np.ix_(rows, cols)]``). Computed on the model's device, a band of rows at a
        time.

        Parameters
        ----------
        layer, head : int
            0-indexed layer and head.
        rows, cols : slice or sequence of int
            The query (from) and key (to) positions.

        Returns
        -------
        ndarray
            Float32 ``[len(rows), len(cols)]``.

        Raises
        ------
        InputError
            For a head outside the model or positions outside the input.

        Examples
        --------
        >>> from attnkit.testing import tiny_model
        >>> att = tiny_model("gpt2").attend("The cat sat on the mat.", lazy=True)
        >>> bool((att.block(1, 0, slice(0, 4), slice(4, 8)) == 0).all())   # causal
        True
        """
        import torch

        layer, head = self._check_head(layer, head)
        r = validate.positions(rows, len(self), "rows")
        c = validate.positions(cols, len(self), "cols")
        out = np.empty((len(r), len(c)), dtype=np.float32)
        step = max(1, BAND_ELEMENTS // max(1, len(c)))
        here = self._groups is None and self.device.type == "cpu"  # computed straight into out
        for a in range(0, len(r), step):
            if here:
                self._token_probs(layer, [head], r[a : a + step], c,
                                  out=torch.from_numpy(out[a : a + step])[None])
            else:
                out[a : a + step] = self._probs(layer, [head], r[a : a + step], c)[0].cpu().numpy()
        return out

    def pooled(self, layer: int, head: int, size: int, reduce: str = "max") -> np.ndarray:
        """A ``[m, m]`` overview of one head, ``m = min(size, n)``: rows and columns cut into
        ``m`` bins (:func:`~attnkit.core.attention.pool_edges`), each cell the max or the mean of
        its bin — the same numbers :meth:`Attention.pooled` gives.

        Read in one pass of bands (:func:`attnkit.core.blocks.summarize`; about ``BAND_ELEMENTS``
        floats at a time), and kept for the next caller.

        Parameters
        ----------
        layer, head : int
            0-indexed layer and head.
        size : int
            The most bins per side.
        reduce : {"max", "mean"}
            How the cells of a bin are reduced.

        Returns
        -------
        ndarray
            Float32 ``[m, m]``.

        Raises
        ------
        InputError
            For an unknown ``reduce`` or a head outside the model.

        Examples
        --------
        >>> from attnkit.testing import tiny_model
        >>> att = tiny_model("llama").attend("The cat sat on the mat.", lazy=True)
        >>> att.pooled(0, 1, 4, reduce="mean").shape
        (4, 4)
        """
        validate.choice(reduce, "reduce", ("max", "mean"))
        layer, head = self._check_head(layer, head)
        pool = EdgePool(validate.size(size), reduce)
        return summarize(self, layer, [head], [pool])[0][pool.key]

    def support(self, rows: slice) -> slice:
        """The columns outside which ``rows`` have no attention (all zero): the span of keys
        the mask lets these rows see (computes nothing).

        Parameters
        ----------
        rows : slice
            Query positions.

        Returns
        -------
        slice
            The key positions any of these rows can attend to, in any layer.

        Examples
        --------
        >>> from attnkit.testing import tiny_model
        >>> att = tiny_model("gpt2").attend("The cat sat on the mat.", lazy=True)
        >>> att.support(slice(2, 4))  # causal: rows 2 and 3 see keys 0 to 3
        slice(0, 4, None)
        """
        start, stop, _ = validate.span(rows, "rows").indices(len(self))
        if stop <= start:
            return slice(0, 0)
        if self._groups is not None:
            return slice(0, stop) if self.causal else slice(0, len(self))
        spans = {id(layer.spans): layer.spans for layer in self._layers}.values()
        lo = min(int(s.lo[start:stop].min()) for s in spans)
        hi = max(int(s.hi[start:stop].max()) for s in spans)
        return slice(lo, hi)

    @property
    def maps(self) -> np.ndarray:
        """All maps, float32 ``[layer, head, n, n]`` (materialises ``4 L H n^2`` bytes)."""
        n = len(self)
        out = np.empty((self.n_layers, self.n_heads, n, n), dtype=np.float32)
        for layer in range(self.n_layers):
            for head in range(self.n_heads):
                out[layer, head] = self.map(layer, head)
        return out

    def to_dense(self) -> Attention:
        """An :class:`~attnkit.Attention` with every map (materialises ``4 L H n^2`` bytes).

        Returns
        -------
        Attention
            The same alignment and metadata, with :attr:`maps` computed.

        Examples
        --------
        >>> from attnkit.testing import tiny_model
        >>> att = tiny_model("qwen2").attend("The cat sat.", lazy=True)
        >>> att.to_dense().maps.shape == (att.n_layers, att.n_heads, len(att), len(att))
        True
        """
        return Attention(
            maps=self.maps, tokens=list(self.tokens), roles=self.roles, word_ids=self.word_ids,
            words=list(self.words), level=self.level, segments=self.segments,
            embeddings=self.embeddings, meta=dict(self.meta), model=self.model,
            causal=self.causal, input_ids=self.input_ids,
        )

    def to_words(self) -> LazyAttention:
        """Pool word pieces into words (Clark et al. 2019), lazily: attention *to* a word is
        the sum over its pieces, *from* a word the mean of its pieces' rows, as
        :meth:`Attention.to_words`. Materialises nothing; the readers of the result compute
        token blocks and pool them.

        Returns
        -------
        LazyAttention
            With ``level="word"`` (this one when it already is).

        Examples
        --------
        >>> from attnkit.testing import tiny_model
        >>> att = tiny_model("llama").attend("She has written unbelievably.", lazy=True)
        >>> words = att.to_words()
        >>> words.level, len(words) <= len(att)
        ('word', True)
        """
        import torch

        if self.level == "word":
            return self
        group = word_groups(self.word_ids, self.roles)
        keep = np.unique(group, return_index=True)[1]  # first token of each word-level position
        out = LazyAttention.__new__(LazyAttention)
        out.__dict__.update(self.__dict__)
        out._groups = torch.as_tensor(group, device=self.device)
        out._group_sizes = torch.bincount(out._groups).to(torch.float32)
        out.tokens = [self.words[self.word_ids[p]] if self.roles[p] == "word" else self.tokens[p]
                      for p in keep]
        out.roles = self.roles[keep]
        out.word_ids = self.word_ids[keep]
        out.segments = self.segments[keep]
        out.input_ids = None
        out.meta = dict(self.meta)
        if self.embeddings is not None:
            sums = np.zeros((len(keep), self.embeddings.shape[1]), dtype=np.float64)
            np.add.at(sums, group, self.embeddings)
            out.embeddings = (sums / np.bincount(group)[:, None]).astype(self.embeddings.dtype)
        out.level = "word"
        return out

    # ------------------------------------------------------------------ queries, keys
    def qk_states(self) -> QKStates:
        """The kept queries and keys of every layer as :class:`~attnkit.core.qkstates.QKStates`
        (converted to float32 numpy on first read of a layer).

        Returns
        -------
        QKStates

        Raises
        ------
        InputError
            At word level (queries and keys are per token).

        Examples
        --------
        >>> from attnkit.testing import tiny_model
        >>> att = tiny_model("llama").attend("The cat sat.", lazy=True)
        >>> att.qk_states().layers
        [0, 1]
        """
        if self._groups is not None:
            raise InputError("Queries and keys are per token; this LazyAttention is pooled to "
                             "words. Read them from the token-level attention (level='token').")
        if getattr(self, "_qk", None) is None:
            self._qk = QKStates({i: x.query for i, x in enumerate(self._layers)},
                                {i: x.key for i, x in enumerate(self._layers)},
                                {i: x.scaling for i, x in enumerate(self._layers)},
                                self._layers[0].softcap, causal=bool(self.causal))
        return self._qk

    # ------------------------------------------------------------------ compute
    def _check_head(self, layer: int, head: int) -> tuple[int, int]:
        return validate.head_index(layer, head, self.n_layers, self.n_heads)

    def _probs(self, layer: int, heads: Sequence[int], rows: np.ndarray, cols: np.ndarray) -> Any:
        """Float32 tensor ``[h, r, c]`` on the device: probabilities of ``heads`` at level
        positions ``rows`` x ``cols``."""
        if self._groups is None:
            return self._token_probs(layer, heads, rows, cols)
        import torch

        g = self._groups
        lut_r = torch.full((len(self),), -1, dtype=torch.long, device=g.device)
        lut_r[torch.as_tensor(rows, device=g.device)] = torch.arange(len(rows), device=g.device)
        lut_c = torch.full((len(self),), -1, dtype=torch.long, device=g.device)
        lut_c[torch.as_tensor(cols, device=g.device)] = torch.arange(len(cols), device=g.device)
        tr = torch.nonzero(lut_r[g] >= 0).flatten()
        tc = torch.nonzero(lut_c[g] >= 0).flatten()
        p = self._token_probs(layer, heads, tr.cpu().numpy(), tc.cpu().numpy())
        h = p.shape[0]
        by_rows = torch.zeros((h, len(rows), p.shape[2]), dtype=p.dtype, device=p.device)
        by_rows.index_add_(1, lut_r[g[tr]], p)
        by_rows /= self._group_sizes[torch.as_tensor(rows, device=g.device)][None, :, None]
        out = torch.zeros((h, len(rows), len(cols)), dtype=p.dtype, device=p.device)
        out.index_add_(2, lut_c[g[tc]], by_rows)
        return out

    def _token_probs(self, layer: int, heads: Sequence[int], rows: np.ndarray,
                     cols: np.ndarray, out: Any = None) -> Any:
        """Float32 tensor ``[h, r, c]``: probabilities of ``heads`` at token positions
        ``rows`` x ``cols``, computed into ``out`` when given (a CPU tensor of that shape)."""
        import torch

        qk = self._layers[layer]
        dev = qk.query.device
        groups = qk.query.shape[0] // qk.key.shape[0]
        r = _index(rows, dev)
        c = _index(cols, dev)
        with torch.inference_mode():
            if len(heads) == 1:  # views, no copy of the head's queries and keys
                h: Any = slice(heads[0], heads[0] + 1)
                q = qk.query[h][:, r].float()
                k = qk.key[heads[0] // groups][None][:, c].float()
            else:
                h = torch.as_tensor(list(heads), device=dev)
                q = qk.query[h][:, r].float()
                k = qk.key[h // groups][:, c].float()
            lse = qk.lse[h][:, r][..., None]
            if qk.softcap is None:  # scaling * q.k - lse, in one product
                p = torch.baddbmm(lse, q, k.transpose(1, 2), beta=-1.0, alpha=qk.scaling, out=out)
            else:
                p = torch.bmm(q, k.transpose(1, 2), out=out)
                p.mul_(qk.scaling / qk.softcap).tanh_().mul_(qk.softcap).sub_(lse)
            p.exp_()
            _mask(p, qk.spans, r, c)
        return p


def _mask(p: Any, spans: Any, r: Any, c: Any) -> None:
    """Zero the entries of ``p [h, rows, cols]`` the mask does not let through. With a run of
    columns only the parts outside the columns every row may see are tested (for a causal
    band: the square at its diagonal), not the whole block."""
    import torch

    dev = p.device
    r_idx = r if isinstance(r, torch.Tensor) else torch.arange(r.start, r.stop, device=dev)
    if isinstance(c, torch.Tensor):
        p.masked_fill_(~spans.allowed(r_idx, c)[None], 0.0)
        return
    lo, hi = spans.lo[r_idx], spans.hi[r_idx]
    open_lo, open_hi = int(lo.max()), int(hi.min())  # columns every row sees
    if open_lo >= open_hi:
        cols = torch.arange(c.start, c.stop, device=dev)
        p.masked_fill_(~spans.allowed(r_idx, cols)[None], 0.0)
        return
    a, b = c.start, min(open_lo, c.stop)  # left of every row's first key: test lo only
    if a < b:
        _cut(p[:, :, : b - a], r_idx, lo, a, keep="above")
    a, b = max(open_hi, c.start), c.stop  # right of some row's last key: test hi only
    if a < b:
        _cut(p[:, :, a - c.start :], r_idx, hi, a, keep="below")


def _cut(part: Any, r_idx: Any, bound: Any, first_col: int, keep: str) -> None:
    """Zero ``part [h, rows, cols]`` (its columns start at ``first_col``) left of ``bound``
    (``keep="above"``: keep cols >= bound) or from ``bound`` on (``keep="below"``: keep
    cols < bound). Bounds at a fixed distance from the row (causal masks, sliding windows)
    are a triangle: ``tril_``/``triu_``, no boolean mask built."""
    import torch

    shift = bound - r_idx
    contiguous = len(r_idx) < 2 or int(r_idx[-1] - r_idx[0]) == len(r_idx) - 1
    if contiguous and bool((shift == shift[0]).all()):
        # local row i is row r0 + i, local col j is col first_col + j; bound at r0 + i + k
        diagonal = int(r_idx[0]) + int(shift[0]) - first_col
        if keep == "below":
            part.tril_(diagonal - 1)
        else:
            part.triu_(diagonal)
        return
    cols = torch.arange(first_col, first_col + part.shape[-1], device=part.device)
    drop = cols[None, :] >= bound[:, None] if keep == "below" else cols[None, :] < bound[:, None]
    part.masked_fill_(drop[None], 0.0)


def _index(pos: np.ndarray, device: Any) -> Any:
    """A contiguous run as a slice (cheap views), anything else as an index tensor."""
    import torch

    if len(pos) and pos[-1] - pos[0] == len(pos) - 1 and (len(pos) == 1 or (np.diff(pos) == 1).all()):
        return slice(int(pos[0]), int(pos[-1]) + 1)
    return torch.as_tensor(pos, dtype=torch.long, device=device)
