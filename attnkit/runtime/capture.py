"""Capture attention through transformers' attention interface.

attnkit registers one attention function, ``"attnkit"``, in transformers'
``AttentionInterface`` (and, for the masks models build for it, transformers' own SDPA mask
function in ``AttentionMaskInterface``). A model loaded by :func:`attnkit.load` runs with it:
every attention layer calls :func:`attention_forward`, which

1. computes the layer's output with the fast kernel: transformers' own
   ``sdpa_attention_forward``, or, when a recorder asks for each row's log-sum-exp, the
   torch fused kernel that returns it with the output (``_scaled_dot_product_flash_attention_for_cpu``
   on CPU, flash / memory-efficient attention on CUDA). Two cases compute the output from
   the eager probabilities instead, in blocks of query rows: layers whose eager definition
   SDPA cannot express (logit soft-capping, learned sink logits), and sessions with a
   recorder that wants every probability of the layer anyway (``needs_probabilities = True``,
   as :class:`DenseRecorder`: computing them once and multiplying them with the values is the
   eager arithmetic and cheaper than running the kernel beside them);
2. hands an :class:`AttentionCall` to every :class:`Recorder` of the active
   :func:`recording` session, and records nothing when no session is active.

Outside a session the function is a plain SDPA attention, so the model computes what it
computes with ``attn_implementation="sdpa"`` (the same hidden states whether or not anything is
recorded).

Eager semantics
---------------
:meth:`AttentionCall.scores` and :meth:`AttentionCall.probabilities` follow the eager
attention functions of ``transformers/models/*/modeling_*.py`` step by step: scores
``query @ key.T * scaling``; logit soft-capping ``tanh(s / cap) * cap`` (Gemma 2); then the
position bias and the mask (a boolean mask as a large negative number where it is False,
exactly what the eager mask adds; an additive float mask, e.g. a position bias passed as a
mask, added as it is); grouped-query / multi-query keys repeated over their query heads;
learned sink logits (gpt-oss) as an extra column of the softmax that is dropped afterwards.
Scores are computed in float32 (the eager path's arithmetic in float32 models; in half
precision more exact than the eager path, which rounds scores to the model's dtype).

Recorders (for other modules that need the same forward)
--------------------------------------------------------
A recorder is any callable ``recorder(call)`` taking an :class:`AttentionCall`; it reads what
it needs and keeps what it wants. The call holds, for one attention layer of one forward:

- ``layer`` (0-based, in call order), ``module`` (the attention ``nn.Module``: its output
  projection, ``o_proj`` / ``dense`` / ``out_lin`` / ``c_proj``, is there),
- ``query`` ``[B, H, q, d]`` (post-rotary), ``key`` and ``value`` ``[B, H_kv, k, d]``
  (before grouped-query repetition; :meth:`AttentionCall.repeated` repeats them),
- ``attention_mask`` (as the model passed it: ``None``, boolean ``True`` = attend, or
  additive float), ``scaling``, ``softcap``, ``sinks``, ``position_bias``, ``is_causal``,
  ``kwargs`` (everything else the layer passed),
- ``output`` ``[B, q, H, d]``: the attention output before the output projection,
- ``lse`` ``[B, H, q]`` float32: each row's log-sum-exp (sinks included), when a recorder of
  the session has ``needs_lse = True``,
- :meth:`AttentionCall.probabilities` ``(rows)``: the eager probabilities of a block of query
  rows, computed on demand (nothing is computed for a recorder that does not ask), or
  read from those the output was computed from.

attnkit's own recorders are :class:`DenseRecorder` (full maps of every layer, written into
per-item numpy arrays) and :class:`LazyRecorder` (queries, keys and row log-sum-exps for
:class:`~attnkit.runtime.lazy.LazyAttention`). Run a forward with recorders through
:meth:`attnkit.Model.record`.

Examples
--------
>>> from attnkit.testing import tiny_model
>>> from attnkit.runtime.capture import recording
>>> model = tiny_model("llama")
>>> seen = []
>>> def shapes(call):
...     seen.append((call.layer, tuple(call.query.shape), tuple(call.key.shape)))
>>> _ = model.record([model.encode("The cat sat.")], [shapes])
>>> seen[0][0], seen[0][1][1], seen[0][2][1]   # layer 0: 2 query heads share 1 key head
(0, 2, 1)
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from ..errors import CaptureError, InputError, NoAttentionError

#: The name attnkit's attention function is registered under.
IMPLEMENTATION = "attnkit"

#: Float32 elements of scores one block of query rows may hold (64 MiB): blocks of rows are
#: sized so that ``batch * heads * rows * keys`` stays below it.
BLOCK_ELEMENTS = 1 << 24


class Recorder(Protocol):
    """Anything called with each layer's :class:`AttentionCall` during a :func:`recording`.

    Optional attributes (absent means False): ``needs_lse = True`` when it reads
    ``call.lse``; ``needs_probabilities = True`` when it reads every probability of every
    layer (the layer's output is then computed from them, see the module docstring).
    One that changes the forward sets ``blocks(call)``: it returns a boolean tensor
    broadcastable to ``[B, H, q, k]`` (True = this edge is knocked out: its score is set to
    minus infinity before the softmax, Geva et al. 2023) or None, and the layer's output is
    computed with those edges masked, by the same kernels (:mod:`attnkit.interventions.knockout`).
    One that needs more of the forward pass than attention (e.g. the residual stream, for
    :mod:`attnkit.runtime.measures`) sets ``forward_options`` (a dict passed to the model's forward,
    e.g. ``{"output_hidden_states": True}``) and has a method ``finish(output)`` that
    :meth:`attnkit.Model.record` calls with the forward's output.
    """

    def __call__(self, call: AttentionCall) -> None: ...


@dataclass
class RowSpans:
    """A compact exact description of an attention mask: row ``q`` attends to the keys
    ``lo[q] <= k < hi[q]`` and to no other (int64 tensors ``[q]`` on the model's device).

    Causal masks, sliding windows, chunked attention and right padding all have this form;
    :meth:`from_mask` refuses masks that do not.

    Parameters
    ----------
    lo, hi : torch.Tensor
        Int64 ``[q]``: each row's first allowed key and one past its last.

    Examples
    --------
    >>> import torch
    >>> from attnkit.runtime.capture import RowSpans
    >>> spans = RowSpans(torch.tensor([0, 0, 1]), torch.tensor([1, 2, 3]))
    >>> spans.allowed(torch.arange(3), torch.arange(3)).int().tolist()
    [[1, 0, 0], [1, 1, 0], [0, 1, 1]]
    """

    lo: Any
    hi: Any

    @classmethod
    def full(cls, n_rows: int, n_keys: int, causal: bool, device: Any) -> RowSpans:
        """The spans of no mask: every key, or (causal) the keys up to each row's own.

        Parameters
        ----------
        n_rows, n_keys : int
            Query rows and keys (the last ``n_rows`` of the keys are the rows' own).
        causal : bool
            Rows see no later key.
        device : torch.device or str
            Where the span tensors live.

        Returns
        -------
        RowSpans

        Examples
        --------
        >>> from attnkit.runtime.capture import RowSpans
        >>> spans = RowSpans.full(3, 3, True, "cpu")
        >>> spans.lo.tolist(), spans.hi.tolist()
        ([0, 0, 0], [1, 2, 3])
        """
        import torch

        rows = torch.arange(n_rows, device=device)
        lo = torch.zeros(n_rows, dtype=torch.long, device=device)
        hi = rows + 1 + (n_keys - n_rows) if causal else torch.full_like(rows, n_keys)
        return cls(lo, hi)

    @classmethod
    def from_mask(cls, mask: Any) -> RowSpans:
        """Spans of a boolean mask ``[q, k]`` (True = attend).

        Parameters
        ----------
        mask : torch.Tensor
            Bool ``[q, k]``.

        Returns
        -------
        RowSpans

        Raises
        ------
        CaptureError
            When a row attends to no key, or its allowed keys are not one contiguous run.

        Examples
        --------
        >>> import torch
        >>> from attnkit.runtime.capture import RowSpans
        >>> window = torch.tensor([[1, 0, 0], [1, 1, 0], [0, 1, 1]], dtype=torch.bool)
        >>> spans = RowSpans.from_mask(window)  # a causal sliding window of 2
        >>> spans.lo.tolist(), spans.hi.tolist()
        ([0, 0, 1], [1, 2, 3])
        """
        import torch

        q, k = mask.shape
        lo = torch.empty(q, dtype=torch.long, device=mask.device)
        hi = torch.empty_like(lo)
        step = max(1, BLOCK_ELEMENTS // max(k, 1))
        for r0 in range(0, q, step):
            m = mask[r0 : r0 + step].to(torch.uint8)
            count = m.sum(-1, dtype=torch.long)
            first = m.argmax(-1)
            last = k - 1 - m.flip(-1).argmax(-1)
            if bool((count == 0).any()):
                raise CaptureError(
                    "A row of the attention mask attends to no key at all; lazy capture needs "
                    "every row to see at least one key (use lazy=False)."
                )
            if bool((last - first + 1 != count).any()):
                raise CaptureError(
                    "This model's attention mask lets a row attend to keys that are not one "
                    "contiguous run, which lazy capture cannot describe exactly; use lazy=False."
                )
            lo[r0 : r0 + step] = first
            hi[r0 : r0 + step] = last + 1
        return cls(lo, hi)

    def allowed(self, rows: Any, cols: Any) -> Any:
        """Which (row, key) pairs the mask lets through.

        Parameters
        ----------
        rows, cols : torch.Tensor
            Int positions of query rows and keys.

        Returns
        -------
        torch.Tensor
            Bool ``[len(rows), len(cols)]``.

        Examples
        --------
        >>> import torch
        >>> from attnkit.runtime.capture import RowSpans
        >>> spans = RowSpans.full(3, 3, True, "cpu")
        >>> spans.allowed(torch.tensor([1]), torch.arange(3)).tolist()
        [[True, True, False]]
        """
        return (cols[None, :] >= self.lo[rows][:, None]) & (cols[None, :] < self.hi[rows][:, None])


@dataclass
class AttentionCall:
    """One attention layer's call during a forward pass (see the module docstring).

    :func:`attention_forward` builds it; recorders read it.

    Parameters
    ----------
    layer : int
        0-based, in call order within the session.
    module : torch.nn.Module
        The attention module.
    query, key, value : torch.Tensor
        ``[B, H, q, d]`` and ``[B, H_kv, k, d]`` (before grouped-query repetition).
    attention_mask : torch.Tensor or None
        As the model passed it (boolean True = attend, or additive float).
    scaling : float
        Factor of the scores.
    is_causal : bool
        Causal without a mask tensor.
    softcap : float, optional
        Logit soft-capping (Gemma 2).
    sinks : torch.Tensor, optional
        Learned sink logits per head (gpt-oss).
    position_bias : torch.Tensor, optional
        Added to the scores.
    dropout : float
        Attention dropout (0 in eval mode).
    kwargs : dict
        Everything else the layer passed.
    output : torch.Tensor, optional
        ``[B, q, H, d]``: the attention output before the output projection.
    lse : torch.Tensor, optional
        Float32 ``[B, H, q]`` row log-sum-exps, when a recorder asked for them.

    Examples
    --------
    >>> from attnkit.testing import tiny_model
    >>> model = tiny_model("llama")  # 2 query heads share 1 key head
    >>> calls = []
    >>> _ = model.record([model.encode("The cat sat.")], [calls.append])
    >>> call = calls[0]
    >>> call.layer, tuple(call.query.shape), tuple(call.key.shape), call.groups
    (0, (1, 2, 7, 8), (1, 1, 7, 8), 2)
    """

    layer: int
    module: Any
    query: Any
    key: Any
    value: Any
    attention_mask: Any
    scaling: float
    is_causal: bool
    softcap: float | None = None
    sinks: Any = None
    position_bias: Any = None
    dropout: float = 0.0
    kwargs: dict[str, Any] = field(default_factory=dict)
    output: Any = None
    lse: Any = None
    _probabilities: Any = field(default=None, repr=False)

    @property
    def groups(self) -> int:
        """Query heads per key/value head (1 for multi-head, ``H`` for multi-query)."""
        return self.query.shape[1] // self.key.shape[1]

    def repeated(self, t: Any) -> Any:
        """``key`` or ``value`` repeated over the query heads of each group: ``[B, H, k, d]``.

        Parameters
        ----------
        t : torch.Tensor
            ``[B, H_kv, k, d]``.

        Returns
        -------
        torch.Tensor
            ``[B, H, k, d]``.

        Examples
        --------
        >>> from attnkit.testing import tiny_model
        >>> model = tiny_model("llama")  # 2 query heads share 1 key head
        >>> calls = []
        >>> _ = model.record([model.encode("The cat sat.")], [calls.append])
        >>> call = calls[0]
        >>> tuple(call.repeated(call.key).shape)
        (1, 2, 7, 8)
        """
        from transformers.integrations.sdpa_attention import repeat_kv

        return repeat_kv(t, self.groups)

    def row_blocks(self, limit: int = BLOCK_ELEMENTS) -> Iterator[slice]:
        """Slices of query rows whose scores hold at most ``limit`` elements each.

        Parameters
        ----------
        limit : int
            Score elements (``B * H * rows * keys``) per block; at least one row.

        Yields
        ------
        slice
            Consecutive blocks of query rows covering all of them.

        Examples
        --------
        >>> from attnkit.testing import tiny_model
        >>> model = tiny_model("llama")  # 2 query heads share 1 key head
        >>> calls = []
        >>> _ = model.record([model.encode("The cat sat.")], [calls.append])
        >>> call = calls[0]
        >>> [(b.start, b.stop) for b in call.row_blocks(limit=2 * 7 * 3)]  # 3 rows a block
        [(0, 3), (3, 6), (6, 7)]
        """
        B, H, q, _ = self.query.shape
        k = self.key.shape[2]
        step = max(1, limit // max(1, B * H * k))
        for r0 in range(0, q, step):
            yield slice(r0, min(q, r0 + step))

    def scores(self, rows: slice = slice(None)) -> Any:
        """Float32 ``[B, H, r, k]`` logits of query ``rows`` as the eager path forms them
        (scaling, soft-capping, position bias, mask), before the softmax.

        Parameters
        ----------
        rows : slice
            Query rows (default all).

        Returns
        -------
        torch.Tensor
            Float32 ``[B, H, r, k]``; masked entries hold float32's lowest value.

        Examples
        --------
        >>> from attnkit.testing import tiny_model
        >>> model = tiny_model("llama")  # 2 query heads share 1 key head
        >>> calls = []
        >>> _ = model.record([model.encode("The cat sat.")], [calls.append])
        >>> call = calls[0]
        >>> s = call.scores(slice(0, 1))  # causal: row 0 sees key 0 only
        >>> bool((s[0, 0, 0, 1:] == s.new_tensor(float("-3.4028234663852886e38"))).all())
        True
        """
        import torch

        B, H, _, d = self.query.shape
        hk, k = self.key.shape[1], self.key.shape[2]
        q = self.query[:, :, rows].float()
        r = q.shape[2]
        g = self.groups
        key = self.key.float()
        # each key head serves g query heads: one GEMM per key head over their stacked rows
        s = torch.matmul(q.reshape(B, hk, g * r, d), key.transpose(-1, -2)).view(B, H, r, k)
        s = s * self.scaling
        if self.softcap is not None:
            s = torch.tanh(s / self.softcap) * self.softcap
        if self.position_bias is not None:
            s = s + self.position_bias[..., rows, :].float()
        mask = self.attention_mask
        if mask is not None:
            m = mask[..., rows, :k]
            if m.dtype == torch.bool:
                s = s.masked_fill(~m, torch.finfo(torch.float32).min)
            else:
                s = s + m.float()
        elif self.is_causal:
            q_len = self.query.shape[2]
            rr = torch.arange(q_len, device=s.device)[rows]
            future = torch.arange(k, device=s.device)[None, :] > (rr[:, None] + (k - q_len))
            s = s.masked_fill(future, torch.finfo(torch.float32).min)
        return s

    def probabilities(self, rows: slice = slice(None)) -> Any:
        """Float32 ``[B, H, r, k]`` attention probabilities of query ``rows`` (eager softmax;
        with sinks, the softmax over keys and sink with the sink column dropped).

        Parameters
        ----------
        rows : slice
            Query rows (default all).

        Returns
        -------
        torch.Tensor
            Float32 ``[B, H, r, k]``; rows sum to 1 (to at most 1 with sinks).

        Examples
        --------
        >>> from attnkit.testing import tiny_model
        >>> model = tiny_model("llama")  # 2 query heads share 1 key head
        >>> calls = []
        >>> _ = model.record([model.encode("The cat sat.")], [calls.append])
        >>> call = calls[0]
        >>> p = call.probabilities(slice(2, 4))
        >>> tuple(p.shape), bool(((p.sum(-1) - 1).abs() < 1e-6).all())
        ((1, 2, 2, 7), True)
        """
        import torch

        if self._probabilities is not None:
            return self._probabilities[:, :, rows]
        s = self.scores(rows)
        if self.sinks is None:
            return torch.softmax(s, dim=-1)
        B, H, r, _ = s.shape
        sink = self.sinks.float().reshape(1, -1, 1, 1).expand(B, H, r, 1)
        combined = torch.cat([s, sink], dim=-1)
        combined = combined - combined.amax(dim=-1, keepdim=True)
        return torch.softmax(combined, dim=-1)[..., :-1]

    def log_sum_exp(self, rows: slice = slice(None)) -> Any:
        """Float32 ``[B, H, r]``: each row's log-sum-exp of :meth:`scores` (sinks included).

        Parameters
        ----------
        rows : slice
            Query rows (default all).

        Returns
        -------
        torch.Tensor
            Float32 ``[B, H, r]``: ``probabilities = exp(scores - lse)``.

        Examples
        --------
        >>> from attnkit.testing import tiny_model
        >>> model = tiny_model("llama")  # 2 query heads share 1 key head
        >>> calls = []
        >>> _ = model.record([model.encode("The cat sat.")], [calls.append])
        >>> call = calls[0]
        >>> import torch
        >>> p = torch.exp(call.scores() - call.log_sum_exp()[..., None])
        >>> bool(torch.allclose(p, call.probabilities(), atol=1e-6))
        True
        """
        import torch

        lse = torch.logsumexp(self.scores(rows), dim=-1)
        if self.sinks is not None:
            lse = torch.logaddexp(lse, self.sinks.float().reshape(1, -1, 1))
        return lse


# ------------------------------------------------------------------ session
@dataclass
class _Session:
    recorders: list
    needs_lse: bool
    needs_probabilities: bool
    calls: int = 0

    def wants(self, call: AttentionCall) -> tuple[bool, bool]:
        """``(log-sum-exps, probabilities)`` some recorder reads from this call: a recorder's
        ``wants(call)`` where it has one (e.g. only some layers of an encoder-decoder), else
        its ``needs_lse`` and ``needs_probabilities``."""
        if not any(hasattr(r, "wants") for r in self.recorders):
            return self.needs_lse, self.needs_probabilities
        lse = keep = False
        for r in self.recorders:
            pick = getattr(r, "wants", None)
            a, b = pick(call) if pick is not None else (
                getattr(r, "needs_lse", False), getattr(r, "needs_probabilities", False))
            lse, keep = lse or a, keep or b
        return lse, keep

    def blocked(self, call: AttentionCall) -> Any:
        """The edges some recorder knocks out of this call (bool, True = blocked), or None."""
        out = None
        for r in self.recorders:
            pick = getattr(r, "blocks", None)
            b = pick(call) if pick is not None else None
            if b is not None:
                out = b if out is None else out | b
        return out


_ACTIVE: contextvars.ContextVar[_Session | None] = contextvars.ContextVar("attnkit_capture", default=None)


@contextmanager
def recording(recorders: Sequence[Recorder]) -> Iterator[_Session]:
    """Within the block, every forward of a model on the ``"attnkit"`` implementation hands
    each layer's :class:`AttentionCall` to every recorder (layers numbered from 0 per
    session: run one forward per session). :meth:`attnkit.Model.record` runs one.

    Parameters
    ----------
    recorders : sequence of Recorder
        Callables taking each :class:`AttentionCall`.

    Yields
    ------
    object
        The session; its ``calls`` counts the attention calls seen.

    Raises
    ------
    CaptureError
        When this transformers has no attention interface.

    Examples
    --------
    >>> import torch
    >>> from attnkit.runtime.capture import recording
    >>> from attnkit.testing import tiny_model
    >>> model = tiny_model("llama")
    >>> layers = []
    >>> with torch.inference_mode(), recording([lambda call: layers.append(call.layer)]) as session:
    ...     _ = model.hf(torch.tensor([[1, 5, 6]]))
    >>> layers, session.calls
    ([0, 1], 2)
    """
    if not register():
        raise CaptureError("This version of transformers has no attention interface; attnkit "
                           "needs transformers >= 5 to attach recorders.")
    session = _Session(list(recorders),
                       any(getattr(r, "needs_lse", False) for r in recorders),
                       any(getattr(r, "needs_probabilities", False) for r in recorders))
    token = _ACTIVE.set(session)
    try:
        yield session
    finally:
        _ACTIVE.reset(token)


# ------------------------------------------------------------------ the attention function
def attention_forward(
    module: Any,
    query: Any,
    key: Any,
    value: Any,
    attention_mask: Any,
    dropout: float = 0.0,
    scaling: float | None = None,
    is_causal: bool | None = None,
    **kwargs: Any,
) -> tuple[Any, Any]:
    """The attention function registered as ``"attnkit"`` (transformers' signature).

    Parameters
    ----------
    module : torch.nn.Module
        The attention module calling it.
    query, key, value : torch.Tensor
        ``[B, H, q, d]`` and ``[B, H_kv, k, d]``.
    attention_mask : torch.Tensor or None
        Boolean (True = attend) or additive float, as the model built it.
    dropout : float
        Attention dropout (applied only in training mode).
    scaling : float, optional
        Factor of the scores (default ``d ** -0.5``).
    is_causal : bool, optional
        Causal without a mask tensor (default: the module's ``is_causal``).
    **kwargs
        What else the layer passes (``output_attentions``, ``softcap``, ``s_aux`` sinks,
        ``position_bias``, ...).

    Returns
    -------
    tuple
        ``(output [B, q, H, d], None)`` like transformers' SDPA function, or with
        ``output_attentions=True`` the eager probabilities ``[B, H, q, k]`` in place of
        ``None`` (computed beside the output: they carry no gradient into it; gradient
        analyses run the eager path, :meth:`attnkit.Model.eager`).

    Examples
    --------
    >>> import torch
    >>> from attnkit.runtime.capture import attention_forward
    >>> from attnkit.testing import tiny_model
    >>> layer = tiny_model("llama").hf.model.layers[0].self_attn
    >>> q = k = v = torch.randn(1, 2, 3, 8)
    >>> out, weights = attention_forward(layer, q, k, v, None, output_attentions=True)
    >>> tuple(out.shape), tuple(weights.shape), float(weights[0, 0, 0, 1])  # causal
    ((1, 3, 2, 8), (1, 2, 3, 3), 0.0)
    """
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    session = _ACTIVE.get()
    weights_asked = kwargs.pop("output_attentions", False)
    softcap = kwargs.pop("softcap", None)
    sinks = kwargs.pop("s_aux", None)
    position_bias = kwargs.pop("position_bias", None)
    if scaling is None:
        scaling = query.shape[-1] ** -0.5
    causal = getattr(module, "is_causal", True) if is_causal is None else is_causal
    causal = bool(causal and attention_mask is None and query.shape[2] > 1)
    call = AttentionCall(
        layer=session.calls if session is not None else -1, module=module, query=query, key=key,
        value=value, attention_mask=attention_mask, scaling=float(scaling), is_causal=causal,
        softcap=softcap, sinks=sinks, position_bias=position_bias,
        dropout=dropout if module.training else 0.0, kwargs=kwargs,
    )
    blocked = session.blocked(call) if session is not None else None
    if blocked is not None:
        attention_mask = call.attention_mask = _block_edges(call, blocked)
        call.is_causal = is_causal = False
    want_lse, keep = session.wants(call) if session is not None else (False, False)
    if softcap is not None or sinks is not None or keep:
        call.output, call.lse = _exact_attention(call, want_lse, keep)
    else:
        fused = _fused_with_lse(call) if want_lse else None
        if fused is not None:
            call.output, call.lse = fused
        else:
            call.output, _ = sdpa_attention_forward(
                module, query, key, value, attention_mask, dropout=call.dropout, scaling=scaling,
                is_causal=is_causal, position_bias=position_bias, **kwargs)
            if want_lse:
                call.lse = _chunked(call.log_sum_exp, call, dim=2)
    if session is not None:
        session.calls += 1
        for recorder in session.recorders:
            recorder(call)
    weights = None
    if weights_asked:  # output_attentions=True: the eager probabilities, as eager returns them
        weights = _chunked(call.probabilities, call, dim=2).to(query.dtype)
    return call.output, weights


def _block_edges(call: AttentionCall, blocked: Any) -> Any:
    """The call's mask with the ``blocked`` edges (bool, broadcastable to ``[B, H, q, k]``)
    masked too: boolean (True = attend) for boolean or absent masks, additive float (the
    dtype's lowest value at blocked edges) for float masks. Refuses a row left with no key."""
    import torch

    q, k = call.query.shape[2], call.key.shape[2]
    mask = call.attention_mask
    if mask is None or mask.dtype == torch.bool:
        if mask is None:
            allowed = torch.ones(q, k, dtype=torch.bool, device=call.query.device)
            if call.is_causal:
                allowed = torch.tril(allowed, diagonal=k - q)
        else:
            allowed = mask[..., :k]
        out = allowed & ~blocked
        empty = ~out.any(-1) & allowed.any(-1)  # rows emptied by the knockout, not before
    else:
        low = torch.finfo(mask.dtype).min
        m = mask[..., :k]
        out = m.masked_fill(blocked, low)
        empty = (out <= low / 2).all(-1) & ~(m <= low / 2).all(-1)
    if bool(empty.any()):
        raise InputError(
            f"Knocking out these edges leaves a query row of attention layer {call.layer} with no "
            "key to attend to (its softmax would be undefined); keep at least one edge per row.")
    return out


def _chunked(fn: Callable[[slice], Any], call: AttentionCall, dim: int) -> Any:
    import torch

    return torch.cat([fn(rows) for rows in call.row_blocks()], dim=dim)


def _exact_attention(call: AttentionCall, want_lse: bool, keep: bool = False) -> tuple[Any, Any]:
    """Output ``[B, q, H, d]`` (and row log-sum-exps) computed block of rows by block of rows
    from the eager probabilities; with ``keep`` the probabilities of all rows stay on the
    call for its recorders."""
    import torch

    value = call.repeated(call.value)
    outs, lses, kept = [], [], []
    for rows in call.row_blocks():
        p = call.probabilities(rows)
        if keep:
            kept.append(p)
        if call.dropout:
            p = torch.nn.functional.dropout(p, p=call.dropout, training=True)
        outs.append(torch.matmul(p.to(value.dtype), value))
        if want_lse:
            lses.append(call.log_sum_exp(rows))
    out = torch.cat(outs, dim=2).transpose(1, 2).contiguous()
    if keep:
        call._probabilities = kept[0] if len(kept) == 1 else torch.cat(kept, dim=2)
    return out, (torch.cat(lses, dim=2) if want_lse else None)


def _fused_with_lse(call: AttentionCall) -> tuple[Any, Any] | None:
    """Output and row log-sum-exps from one fused kernel, or None where torch has none for
    this device, dtype or mask (the caller then runs SDPA and a blocked log-sum-exp)."""
    import torch

    if call.dropout or call.position_bias is not None:
        return None
    q = call.query
    k, v = call.repeated(call.key), call.repeated(call.value)
    mask = call.attention_mask
    n_q = q.shape[2]
    device = q.device.type
    try:
        if device == "cpu":
            bias = None if mask is None else _additive(mask, q.dtype)
            out, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
                q, k, v, 0.0, call.is_causal, attn_mask=bias, scale=call.scaling)
        elif device == "cuda":
            if mask is None and q.dtype in (torch.float16, torch.bfloat16) and q.shape[-1] <= 256:
                res = torch.ops.aten._scaled_dot_product_flash_attention(
                    q, k, v, 0.0, call.is_causal, False, scale=call.scaling)
            else:
                bias = None if mask is None else _additive(mask, q.dtype).expand(
                    q.shape[0], q.shape[1], n_q, k.shape[2])
                res = torch.ops.aten._scaled_dot_product_efficient_attention(
                    q, k, v, bias, True, 0.0, call.is_causal, scale=call.scaling)
            out, lse = res[0], res[1]
        else:
            return None
    except (RuntimeError, NotImplementedError):
        return None
    return out.transpose(1, 2).contiguous(), lse[..., :n_q].float()


def _additive(mask: Any, dtype: Any) -> Any:
    import torch

    if mask.dtype != torch.bool:
        return mask.to(dtype)
    zero = torch.zeros((), dtype=dtype, device=mask.device)
    return torch.where(mask, zero, torch.tensor(float("-inf"), dtype=dtype, device=mask.device))


# ------------------------------------------------------------------ registration
_REGISTERED = False


def register() -> bool:
    """Register :func:`attention_forward` (and transformers' SDPA mask function) under
    :data:`IMPLEMENTATION`; idempotent.

    Returns
    -------
    bool
        False when this transformers has no attention or mask interface (models then keep
        their eager path).

    Examples
    --------
    >>> from transformers import AttentionInterface
    >>> from attnkit.runtime.capture import IMPLEMENTATION, register
    >>> register(), IMPLEMENTATION in AttentionInterface._global_mapping
    (True, True)
    """
    global _REGISTERED
    if _REGISTERED:
        return True
    try:
        from transformers import AttentionInterface
        from transformers.masking_utils import AttentionMaskInterface, sdpa_mask
    except ImportError:
        return False
    AttentionInterface.register(IMPLEMENTATION, attention_forward)
    AttentionMaskInterface.register(IMPLEMENTATION, sdpa_mask)
    _REGISTERED = True
    return True


def supports_interface(hf_model: Any) -> bool:
    """True when ``hf_model``'s attention layers call transformers' attention interface (so
    :func:`attention_forward` can run them); False for models on their own eager code.

    Parameters
    ----------
    hf_model : transformers.PreTrainedModel
        The model.

    Returns
    -------
    bool

    Examples
    --------
    >>> from attnkit.runtime.capture import supports_interface
    >>> from attnkit.testing import tiny_model
    >>> supports_interface(tiny_model("llama").hf)
    True
    """
    can_set = getattr(hf_model, "_can_set_attn_implementation", None)
    if can_set is None or not hasattr(hf_model, "set_attn_implementation"):
        return False
    try:
        return bool(can_set())
    except (OSError, TypeError, AttributeError):  # a class whose source cannot be read
        return False


# ------------------------------------------------------------------ recorders
class DenseRecorder:
    """Records every layer's full probabilities into per-item float32 numpy arrays
    ``[L, H, n_i, n_i]`` (padding stripped).

    Parameters
    ----------
    lengths : sequence of int
        Tokens of each item of the batch.
    n_layers, n_heads : int
        The model's.

    Examples
    --------
    >>> from attnkit.runtime.capture import DenseRecorder
    >>> from attnkit.testing import tiny_model
    >>> model = tiny_model("bert")
    >>> encs = [model.encode("The cat sat."), model.encode("We read.")]
    >>> rec = DenseRecorder([len(e) for e in encs], model.n_layers, model.n_heads)
    >>> _ = model.record(encs, [rec])
    >>> rec.layers_seen, [m.shape for m in rec.maps]
    (2, [(2, 2, 6, 6), (2, 2, 5, 5)])
    """

    needs_lse = False
    needs_probabilities = True

    def __init__(self, lengths: Sequence[int], n_layers: int, n_heads: int):
        self.lengths = list(lengths)
        self.n_layers = n_layers
        self.maps = [np.empty((n_layers, n_heads, n, n), dtype=np.float32) for n in self.lengths]
        self.layers_seen = 0

    def __call__(self, call: AttentionCall) -> None:
        if call.layer >= self.n_layers:
            raise NoAttentionError(
                f"The model called attention {call.layer + 1} times in one forward but has "
                f"{self.n_layers} layers; attnkit records self-attention of encoder-only or "
                "decoder-only models."
            )
        p = call.probabilities().cpu().numpy()
        for i, n in enumerate(self.lengths):
            self.maps[i][call.layer] = p[i, :, :n, :n]
        self.layers_seen += 1


@dataclass
class LayerQK:
    """What lazy attention keeps of one layer: ``query [H, n, d]``, ``key [H_kv, n, d]``
    (model dtype, model device), ``lse [H, n]`` float32, and how scores were formed.

    Parameters
    ----------
    query, key : torch.Tensor
        Post-rotary queries and keys of the input.
    lse : torch.Tensor
        Float32 ``[H, n]`` row log-sum-exps.
    spans : RowSpans
        The mask.
    scaling : float
        Factor of the scores.
    softcap : float or None
        Logit soft-capping.

    Examples
    --------
    >>> from attnkit.runtime.capture import LazyRecorder
    >>> from attnkit.testing import tiny_model
    >>> model = tiny_model("llama")
    >>> enc = model.encode("The cat sat.")
    >>> rec = LazyRecorder(len(enc), model.n_layers)
    >>> _ = model.record([enc], [rec])
    >>> qk = rec.layers[0]
    >>> tuple(qk.query.shape), tuple(qk.key.shape), tuple(qk.lse.shape)
    ((2, 7, 8), (1, 7, 8), (2, 7))
    """

    query: Any
    key: Any
    lse: Any
    spans: RowSpans
    scaling: float
    softcap: float | None


class LazyRecorder:
    """Keeps, for the first item of the batch, each layer's post-rotary queries and keys,
    row log-sum-exps and mask spans (:class:`LayerQK`): memory ``O(L n d)``.

    With ``n_layers`` given, queries, keys and log-sum-exps of all layers go into three
    buffers allocated at the first layer (layers are views into them): one allocation each
    instead of one per layer among the forward's temporaries, which otherwise leaves holes
    the allocator cannot return (measured: peak RSS above the kept bytes halved).

    Parameters
    ----------
    length : int
        Tokens of the (first) item.
    n_layers : int, optional
        Layers of the model, for the shared buffers.

    Examples
    --------
    >>> from attnkit.runtime.capture import LazyRecorder
    >>> from attnkit.testing import tiny_model
    >>> model = tiny_model("mistral")
    >>> enc = model.encode("The cat sat on the mat.")
    >>> rec = LazyRecorder(len(enc), model.n_layers)
    >>> _ = model.record([enc], [rec])
    >>> len(rec.layers), rec.layers[0].spans.hi.tolist() == list(range(1, len(enc) + 1))  # causal
    (2, True)
    """

    needs_lse = True

    def __init__(self, length: int, n_layers: int | None = None):
        self.length = length
        self.n_layers = n_layers
        self.layers: list[LayerQK] = []
        self._spans: dict[Any, RowSpans] = {}
        self._buffers: tuple[Any, ...] | None = None

    def _keep(self, query: Any, key: Any, lse: Any) -> tuple[Any, ...]:
        """Copies of one layer's ``query [H, n, d]``, ``key`` and ``lse`` that outlive it."""
        import torch

        layer = len(self.layers)
        if self.n_layers and self._buffers is None and layer == 0:
            self._buffers = tuple(
                torch.empty((self.n_layers, *t.shape), dtype=t.dtype, device=t.device)
                for t in (query, key, lse))
        if self._buffers is not None and layer < (self.n_layers or 0) and all(
                b.shape[1:] == t.shape and b.dtype == t.dtype
                for b, t in zip(self._buffers, (query, key, lse))):
            return tuple(b[layer].copy_(t) for b, t in zip(self._buffers, (query, key, lse)))
        return _own(query), _own(key), lse.float().contiguous()

    def __call__(self, call: AttentionCall) -> None:
        import torch

        if call.position_bias is not None:
            raise CaptureError(
                "This model adds a learned position bias to its attention scores; lazy capture "
                "cannot recompute it without keeping it (n x n per layer). Use lazy=False."
            )
        n = self.length
        query, key, lse = self._keep(call.query[0, :, :n].detach(), call.key[0, :, :n].detach(),
                                     call.lse[0, :, :n].float())
        mask = call.attention_mask
        if mask is None:
            spans = self._spans.get(("none", call.is_causal))
            if spans is None:
                spans = RowSpans.full(n, n, call.is_causal, query.device)
                self._spans[("none", call.is_causal)] = spans
        else:
            ident = (id(mask), mask.data_ptr(), tuple(mask.shape))
            spans = self._spans.get(ident)
            if spans is None:
                if mask.shape[1] != 1:
                    raise CaptureError("This model's mask differs between heads; lazy capture "
                                       "needs one mask for all heads. Use lazy=False.")
                m = mask[0, 0, :n, :n]
                if m.dtype != torch.bool:
                    m = _bool_mask(m)
                spans = RowSpans.from_mask(m)
                self._spans[ident] = spans
        self.layers.append(LayerQK(query, key, lse, spans, call.scaling, call.softcap))


def _own(t: Any) -> Any:
    """``t`` contiguous, copied when it is a view into a larger buffer (so keeping it does not
    keep that buffer alive)."""
    t = t.detach()
    if t.is_contiguous() and t.untyped_storage().nbytes() == t.numel() * t.element_size():
        return t
    return t.contiguous().clone() if t.is_contiguous() else t.contiguous()


def _bool_mask(m: Any) -> Any:
    """An additive float mask as booleans, when it is a pure mask (0 where allowed, a large
    negative number where not); a position bias inside it cannot be described lazily."""
    import torch

    low = torch.finfo(m.dtype).min / 2 if m.dtype.is_floating_point else -1e30
    blocked = m <= low
    if bool(((m != 0) & ~blocked).any()):
        raise CaptureError(
            "This model passes a position bias inside its attention mask; lazy capture "
            "cannot recompute it without keeping it (n x n per layer). Use lazy=False."
        )
    return ~blocked

