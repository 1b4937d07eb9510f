"""The residual stream entering a layer, written exactly as a sum of components.

For one input and the positions asked for, :func:`residual_stream` writes the stream ``x_l``
entering layer ``l`` (0-indexed) as

    x_l[p] = Σ_c component_c[p]

over the components ``"embed"`` (token embeddings), ``"pos_embed"`` (learned position
embeddings, where the model adds them), ``"type_embed"`` (BERT's segment embeddings),
``"m-h"`` (the output of head ``h`` of layer ``m``, **1-indexed** as in figures:
:mod:`attnkit.core.labels`), ``"m-mlp"`` (the output of layer ``m``'s MLP, its own biases
included) and ``"bias"``
(every bias that belongs to no token: attention output projections', layer norms').

Normalisations are linear once their statistics are fixed: a layer norm of row ``p`` is
``N_p(u) = scale ⊙ (u - mean(u)) / σ_p + bias`` (RMSNorm: ``scale ⊙ u / σ_p``) with ``σ_p``
the standard deviation (root mean square) of the whole row as the forward computed it, so
``N_p(Σ_c u_c) = Σ_c scale ⊙ (u_c - mean(u_c)) / σ_p + bias``: each component goes through
the norm on its own with row ``p``'s ``σ_p``, and the norm's bias joins ``"bias"``. That is how
components cross the post-norms of BERT-like encoders and Gemma 2's norm on the attention
output; pre-norm decoders add every component to the stream unchanged.

Everything comes from one forward pass through the capture path (:meth:`attnkit.Model.record`):
the attention calls give each head's context (``call.output``), forward hooks give the
stream, the norms' inputs and the embeddings at the positions asked for, and the forward
stops after layer ``l``'s attention. Memory is ``O(components × positions × width)`` for the
positions asked for; with a reader (a linear map applied to every component as soon as it is
made, :class:`Reader`; post-norm models read through the later norms' scale and centring,
known from the weights, and multiply in their ``1/σ`` at the end) only
``O(components × positions × reader rows)``.

Where each family keeps its embeddings, norms and projections is its record in
:data:`attnkit.runtime.archs.ARCHS`; the heads' weights are read by :mod:`attnkit.runtime.weights`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from ..core import validate
from ..errors import CaptureError, InputError
from .archs import layout_of, submodule
from ..core.labels import head_label, mlp_label
from .weights import LinearNorm, component_names, head_weights, layer_modules, stream_spec, torch_matmul


# ------------------------------------------------------------------ the walk
@dataclass
class Reader:
    """What to keep of every component: positions, and a linear map applied as soon as the
    component is final.

    Parameters
    ----------
    positions : sequence of int
        Token positions (0-indexed).
    matrix : torch.Tensor, optional
        Float64 ``[m, d]``; None keeps the ``d``-dimensional vectors.
    """

    positions: Sequence[int]
    matrix: Any = None


@dataclass
class TargetCall:
    """What the walk keeps of the target layer's attention call: ``query [H, P, k]`` and
    ``key [H_kv, P, k]`` (post-rotary, float64, at the union of the readers' positions),
    ``scaling``, ``softcap``, the mask's :class:`~attnkit.runtime.capture.RowSpans` over all
    positions, and the rotary ``(cos, sin)`` the layer received (or None)."""

    query: Any
    key: Any
    scaling: float
    softcap: float | None
    spans: Any
    rotary: Any
    sinks: bool = False


@dataclass
class Walk:
    """The result of :func:`walk`: ``names`` (:func:`component_names`), ``parts`` (one float64
    tensor ``[C, P_r, m_r]`` per reader), ``positions`` (sorted union of the readers'),
    ``stream`` (float64 ``[P, d]``: the stream entering the layer as the forward computed
    it), ``call`` (:class:`TargetCall`)."""

    names: list[str]
    parts: list[Any]
    positions: Any
    stream: Any
    call: TargetCall
    meta: dict[str, Any] = field(default_factory=dict)


class _Stop(Exception):
    """Raised after the target layer's attention call: the rest of the forward is not needed."""


@dataclass
class _Pending:
    """What one layer's hooks have seen and its components are still waiting for (rows at
    the walk's positions): the heads' contexts ``ctx [P, H, k]`` (the attention call), the
    attention block's output ``y [P, d]`` (the output projection; Gemma 2: after its norm,
    with that ``norm`` and its row statistics ``sigma [P]``), and a post-norm model's stream
    after the attention's norm ``h [P, d]`` (what its MLP adds to)."""

    ctx: Any = None
    y: Any = None
    norm: LinearNorm | None = None
    sigma: Any = None
    h: Any = None

    def take(self, name: str) -> Any:
        """The value of field ``name``, which is cleared; a missing one is a hook out of order."""
        value = getattr(self, name)
        if value is None:
            raise CaptureError(f"The walk's hooks ran out of order: no {name} was recorded.")
        setattr(self, name, None)
        return value

    def take_layer(self) -> tuple[Any, Any, LinearNorm | None, Any]:
        """``(ctx, y, norm, sigma)`` of a finished pre-norm layer, cleared (norm and sigma
        only for a sandwich norm, else None)."""
        norm, sigma = self.norm, self.sigma
        self.norm = self.sigma = None
        return self.take("ctx"), self.take("y"), norm, sigma


class _Walker:
    """Hooks and a recorder that build the components during one forward."""

    def __init__(self, model: Any, layer: int, readers: Sequence[Reader], n: int):
        import torch

        self.model, self.layer, self.readers = model, layer, list(readers)
        self.spec = stream_spec(model)
        self.arch = layout_of(model)
        self.post = self.arch.placement == "post"
        self.sandwich = self.arch.placement == "sandwich"
        union = sorted({int(p) for r in self.readers for p in r.positions})
        self.pos = torch.tensor(union, dtype=torch.long)
        where = {p: i for i, p in enumerate(union)}
        # per reader, its rows among the union: a slice where they are all of it, in order
        self.local: list[Any] = []
        for r in self.readers:
            rows = [where[int(p)] for p in r.positions]
            self.local.append(slice(None) if rows == list(range(len(union)))
                              else torch.tensor(rows, dtype=torch.long))
        self.n = n
        self.mods = layer_modules(model)
        self.weights = [head_weights(model, m) for m in range(layer)]
        # post-norm: (names, per reader the components [C', P_r, m] projected through every
        # norm after them, first norm crossed); the norms' statistics as they come
        self.groups: list[tuple[list[str], list[Any], int]] = []
        self.norms: list[Any] = []
        self.linear_norms: list[LinearNorm] = []
        self.chain = self._chain() if self.post else []
        # pre-norm: per reader, [C, P_r, m], each component projected as soon as final
        self.index = {nm: c for c, nm in enumerate(component_names(model, layer))}
        self.proj: list[Any] = [None for _ in self.readers]
        self.parts: dict[str, Any] = {}
        self.pending = _Pending()
        self.x: dict[int, Any] = {}
        self.target: TargetCall | None = None
        self.rotary: Any = None
        self.handles: list[Any] = []
        self.folded = [self._fold(m) for m in range(layer)] if not self.post else []

    # -------------------------------------------------------------- helpers
    def _slot(self, i: int, name: str, like: Any) -> Any:
        """Reader ``i``'s ``[P_r, m]`` of component ``name`` (zeros until written)."""
        import torch

        if self.proj[i] is None:
            self.proj[i] = torch.zeros(len(self.index), *like.shape[-2:], dtype=torch.float64)
        return self.proj[i][self.index[name]]

    def _rows(self, t: Any) -> Any:
        """Rows of ``t [1, n, ...]`` or ``[n, ...]`` at the positions, as computed, on the CPU."""
        t = t.detach()
        if t.dim() >= 3 and t.shape[0] == 1:
            t = t[0]
        return t[self.pos.to(t.device)].cpu()

    def _at(self, t: Any) -> Any:
        """Rows of ``t [1, n, ...]`` or ``[n, ...]`` at the positions, float64 on the CPU."""
        return self._rows(t).double()

    def _chain(self) -> list[list[Any]]:
        """Post-norm: per reader, ``R D_{K-1} ... D_s`` for every norm ``s`` the stream crosses
        before the target layer (``D`` a norm's scale and centring, known from its weights;
        index ``K``: ``R`` itself), so that components are projected as soon as they are made
        and only the norms' ``1/σ`` (per position) wait for the forward."""
        import torch

        spec, arch = self.spec, self.arch
        mods = [submodule(self.model.base, spec.embed_norm)] if spec.embed_norm else []
        for mod in self.mods[: self.layer]:
            assert arch.norm and spec.mlp_norm
            mods += [submodule(mod, arch.norm), submodule(mod, spec.mlp_norm)]
        norms = self.linear_norms = [LinearNorm.of(mod) for mod in mods]
        d = self.weights[0].wo.shape[1] if self.weights else int(norms[0].scale.shape[0])
        out = []
        for r in self.readers:
            mats = [torch.eye(d, dtype=torch.float64) if r.matrix is None else r.matrix]
            for norm in reversed(norms):
                mats.append(norm.matrix(mats[-1]))
            mats.reverse()
            out.append(mats)
        return out

    def _fold(self, m: int) -> list[Any]:
        """Per reader: ``M W_O^h`` as ``[H, m, k]`` (or ``W_O^h`` itself)."""
        wo = self.weights[m].wo
        return [wo if r.matrix is None else torch_matmul(r.matrix, wo) for r in self.readers]

    def _add(self, name: str, full: Any) -> None:
        """A final component ``[P, d]`` (pre-norm): projected into every reader."""
        for i, r in enumerate(self.readers):
            v = full[self.local[i]]
            v = v if r.matrix is None else v @ r.matrix.T
            self._slot(i, name, v).add_(v)

    def _add_heads(self, m: int, ctx: Any, norm: LinearNorm | None = None,
                   sigma: Any = None) -> None:
        """Head outputs of layer ``m`` from contexts ``ctx [P, H, k]`` (pre-norm), read by each
        reader through ``W_O^h``; with a norm after the attention (sandwich), through the norm
        linearised: ``R diag(scale) C W_O^h`` and ``1/σ`` per position."""
        import torch

        wo = self.weights[m].wo  # [H, d, k]
        for i, r in enumerate(self.readers):
            c = ctx[self.local[i]]  # [P_r, H, k]
            if norm is None:
                fold = self.folded[m][i]
            else:
                mat = torch.eye(wo.shape[1], dtype=torch.float64) if r.matrix is None else r.matrix
                fold = torch_matmul(norm.matrix(mat), wo)
            out = torch.einsum("phk,hmk->hpm", c, fold)
            if sigma is not None:
                out = out / sigma[self.local[i]][None, :, None]
            for h in range(out.shape[0]):
                self._slot(i, head_label(m, h), out[h]).copy_(out[h])

    # -------------------------------------------------------------- hooks
    def _hook(self, module: Any, fn: Any, pre: bool = False) -> None:
        if pre:
            self.handles.append(module.register_forward_pre_hook(fn, with_kwargs=True))
        else:
            self.handles.append(module.register_forward_hook(fn, with_kwargs=True))

    def install(self) -> None:
        spec, base = self.spec, self.model.base
        for name, path in spec.embeds:
            self._hook(submodule(base, path), self._embed_part(name))
        if spec.embed_norm:
            self._hook(submodule(base, spec.embed_norm), self._embed_norm)
        for m, mod in enumerate(self.mods[: self.layer + 1]):
            self._hook(mod, self._layer_input(m), pre=True)
            if m == self.layer:
                self._hook(submodule(mod, self.arch.attention), self._rotary, pre=True)
                break
            if self.post:
                assert self.arch.norm and spec.mlp_norm
                self._hook(submodule(mod, self.arch.norm), self._post_attn(m))
                self._hook(submodule(mod, spec.mlp_norm), self._post_mlp(m))
            else:
                self._hook(submodule(mod, self.arch.out_proj), self._out_proj(m))
                if self.sandwich:
                    assert self.arch.norm
                    self._hook(submodule(mod, self.arch.norm), self._sandwich(m))

    def remove(self) -> None:
        for h in self.handles:
            h.remove()
        self.handles.clear()

    def _embed_part(self, name: str) -> Any:
        def hook(module: Any, args: Any, kwargs: Any, out: Any) -> None:
            t = out.detach()
            if t.dim() == 2:  # no batch dimension (positions shared by the batch)
                t = t[None]
            self.parts[name] = self._at(t.expand(1, self.n, t.shape[-1]) if t.shape[1] == 1
                                        else t)
        return hook

    def _embed_norm(self, module: Any, args: Any, kwargs: Any, out: Any) -> None:
        import torch

        u = self._at(_first(args, kwargs))
        names = ["embed"] + [n for n, _ in self.spec.embeds if n != "embed"]
        parts = [self.parts[nm] for nm in names]
        parts[0] = parts[0] + (u - sum(parts))  # exactly u
        new = torch.stack(parts)
        self._post_norm(module, u, names, lambda mat, loc: new[:, loc] @ mat.T, None)

    def _post_norm(self, module: Any, u: Any, names: list[str], project: Any, bias: Any) -> None:
        """Post-norm: components (``project(M, rows)`` gives them ``[C', P_r, m]`` read by
        ``M [m, d]``) and ``bias [d]`` enter the norm ``module``, linearised with the
        statistics of its input ``u`` (the forward's rows, in its precision). Each is projected at once through the norms after it
        (:meth:`_chain`); :meth:`result` multiplies in the norms' ``1/σ`` per position."""
        start = len(self.norms)
        norm = self.linear_norms[start]  # _chain's, in the order the forward reaches them
        for nm, s, fn in ((names, start, project),
                          (["bias"], start, None if bias is None else _const(bias)),
                          (["bias"], start + 1, None if norm.bias is None else _const(norm.bias))):
            if fn is not None:
                self.groups.append((nm, [fn(mats[s], loc) for mats, loc
                                         in zip(self.chain, self.local)], s))
        self.norms.append(norm.sigma(u).double())  # in the forward's precision, as it did

    def _post_parts(self, i: int, names: list[str]) -> Any:
        """Reader ``i``'s ``[C, P_r, m]`` of a post-norm model: each group already read
        through the norms after it, times the product of those norms' ``1/σ`` per position."""
        import torch

        loc = self.local[i]
        scale = [torch.ones(len(self.readers[i].positions), dtype=torch.float64)]
        for sigma in reversed(self.norms):
            scale.append(scale[-1] / sigma[loc])
        scale.reverse()
        out = None
        for gnames, got, start in self.groups:
            v = got[i] * scale[start][None, :, None]
            if out is None:
                out = torch.zeros(len(names), *v.shape[1:], dtype=torch.float64)
            out.index_add_(0, torch.tensor([self.index[nm] for nm in gnames]), v)
        return out

    def _layer_input(self, m: int) -> Any:
        def hook(module: Any, args: Any, kwargs: Any) -> None:
            if self.post and m < self.layer:  # post-norm: only the target's input is read
                return
            x = self._at(_first(args, kwargs))
            self.x[m] = x
            if not self.post:
                if m == 0:
                    parts = dict(self.parts)
                    parts["embed"] = x - sum(parts.values())
                    for name in ["embed"] + [n for n, _ in self.spec.embeds if n != "embed"]:
                        self._add(name, parts[name])
                else:
                    self._finish_pre(m - 1, x)
                self.x.pop(m - 1, None)
        return hook

    def _out_proj(self, m: int) -> Any:
        def hook(module: Any, args: Any, kwargs: Any, out: Any) -> None:
            self.pending.y = self._at(out)
        return hook

    def _sandwich(self, m: int) -> Any:
        def hook(module: Any, args: Any, kwargs: Any, out: Any) -> None:
            norm = LinearNorm.of(module)
            self.pending.y = self._at(out)
            self.pending.norm = norm
            self.pending.sigma = norm.sigma(self._at(_first(args, kwargs)))
        return hook

    def _finish_pre(self, m: int, x_next: Any) -> None:
        """Layer ``m`` of a pre-norm model is done (``x_next`` entered layer ``m + 1``)."""
        w = self.weights[m]
        ctx, y, norm, sigma = self.pending.take_layer()
        if norm is not None:  # sandwich: N(y) = Σ_h N-lin(head h) + N-lin(b_O) (+ N's bias)
            self._add_heads(m, ctx, norm, sigma)
            if w.bo is not None:
                self._add("bias", norm.apply(w.bo.expand(len(self.pos), -1), sigma))
            if norm.bias is not None:
                self._add("bias", norm.bias.expand(len(self.pos), -1))
        else:
            self._add_heads(m, ctx)
            if w.bo is not None:
                self._add("bias", w.bo.expand(len(self.pos), -1))
        self._add(mlp_label(m), x_next - self.x[m] - y)

    def _post_attn(self, m: int) -> Any:
        def hook(module: Any, args: Any, kwargs: Any, out: Any) -> None:
            import torch

            u = self._rows(_first(args, kwargs))  # x + y, only for the norm's statistics
            w = self.weights[m]
            ctx = self.pending.take("ctx")  # [P, H, k]

            def heads(mat: Any, loc: Any) -> Any:  # M W_O^h read from each head's context
                return torch.bmm(ctx[loc].transpose(0, 1), torch_matmul(mat, w.wo).transpose(1, 2))

            self._post_norm(module, u, [head_label(m, h) for h in range(w.wo.shape[0])], heads,
                            w.bo)
            self.pending.h = self._at(out)
        return hook

    def _post_mlp(self, m: int) -> Any:
        def hook(module: Any, args: Any, kwargs: Any, out: Any) -> None:
            raw = self._rows(_first(args, kwargs))  # h + mlp(h)
            mlp = (raw.double() - self.pending.take("h"))[None]
            self._post_norm(module, raw, [mlp_label(m)], lambda mat, loc: mlp[:, loc] @ mat.T,
                            None)
        return hook

    def _rotary(self, module: Any, args: Any, kwargs: Any) -> None:
        pe = kwargs.get("position_embeddings")
        if pe is None:
            pe = next((a for a in args[1:] if isinstance(a, tuple) and len(a) == 2), None)
        self.rotary = pe

    # -------------------------------------------------------------- the recorder
    def __call__(self, call: Any) -> None:
        from .capture import RowSpans

        if call.layer < self.layer:
            self.pending.ctx = self._at(call.output)  # [P, H, k]
            return
        if call.layer > self.layer:
            raise _Stop
        mask = call.attention_mask
        if mask is None:
            spans = RowSpans.full(self.n, self.n, call.is_causal, "cpu")
        else:
            m = mask[0, 0, : self.n, : self.n].cpu()
            if m.dtype.is_floating_point:
                m = m > _low(m)
            spans = RowSpans.from_mask(m)
        rot = None
        if self.rotary is not None:
            cos, sin = self.rotary
            rot = (cos.detach()[:1, : self.n].double().cpu(), sin.detach()[:1, : self.n].double().cpu())
        q = call.query[0].detach()[:, self.pos.to(call.query.device)].double().cpu()
        k = call.key[0].detach()[:, self.pos.to(call.key.device)].double().cpu()
        self.target = TargetCall(q, k, float(call.scaling), call.softcap, spans, rot,
                                 call.sinks is not None)
        raise _Stop

    def result(self) -> Walk:
        if self.target is None or self.layer not in self.x:
            raise CaptureError(f"The forward pass never reached layer {self.layer}'s attention.")
        names = component_names(self.model, self.layer)
        parts = [self._post_parts(i, names) if self.post else self.proj[i]
                 for i in range(len(self.readers))]
        _finite(self.x[self.layer], names, parts, self.layer, self.model)
        return Walk(names, parts, self.pos, self.x[self.layer], self.target)


def _finite(stream: Any, names: list[str], parts: list[Any], layer: int, model: Any) -> None:
    """Refuse a stream or a component holding NaN or infinite values (a table of NaN terms
    would say nothing), naming where it first appears."""
    import torch

    if bool(torch.isfinite(stream).all()) and all(bool(torch.isfinite(p).all()) for p in parts):
        return
    where = "the stream"
    for p in parts:
        bad = (~torch.isfinite(p)).reshape(p.shape[0], -1).any(-1).nonzero()
        if len(bad):
            where = f"component {names[int(bad[0])]!r}"
            break
    raise InputError(
        f"The residual stream entering layer {layer} holds NaN or infinite values (first in "
        f"{where}): {getattr(model, 'name', 'the model')}'s weights or its forward pass produced "
        "them. Check the weights (a damaged file, an overflow in float16) and run in float32 "
        "(attnkit.load(..., dtype='float32'))."
    )


def _const(bias: Any) -> Any:
    """``project`` of a bias ``[d]`` that every position receives: ``[1, 1, m]`` (broadcast
    over the positions)."""
    return lambda mat, loc: (mat @ bias)[None, None]


def _low(m: Any) -> float:
    import torch

    return float(torch.finfo(m.dtype).min) / 2


def _first(args: Any, kwargs: Any) -> Any:
    if args:
        return args[0]
    for key in ("hidden_states", "hidden_state", "x", "input"):
        if key in kwargs:
            return kwargs[key]
    raise CaptureError("A layer was called without its hidden states as the first argument.")


def walk(model: Any, item: Any, *, layer: int, readers: Sequence[Reader]) -> Walk:
    """One forward of ``item`` through the capture path, stopped after layer ``layer``'s
    attention, decomposing the stream entering that layer for every reader.

    Parameters
    ----------
    model : Model
        The model.
    item : str, Encoding or token ids
        One input.
    layer : int
        0-indexed target layer.
    readers : sequence of Reader
        Positions and linear maps (module docstring).

    Returns
    -------
    Walk

    Raises
    ------
    InputError
        For a layer or a position out of range.
    UnsupportedModelError
        For an architecture outside :data:`STREAMS`.

    Examples
    --------
    >>> from attnkit.runtime.decompose import Reader, walk
    >>> from attnkit.testing import tiny_model
    >>> w = walk(tiny_model("llama"), "The cat sat.", layer=1, readers=[Reader([0, 2])])
    >>> w.names[-3:], tuple(w.parts[0].shape)
    (['1-2', '1-mlp', 'bias'], (5, 2, 16))
    """
    from .encoding import Encoding

    stream_spec(model)
    enc = item if isinstance(item, Encoding) else model.encode(item)
    n = len(enc)
    layer = validate.index(layer, model.n_layers, "layer")
    for r in readers:
        validate.positions(r.positions, n, empty=False)
    walker = _Walker(model, layer, readers, n)
    walker.install()
    try:
        model.record([enc], [walker])
    except _Stop:
        pass
    finally:
        walker.remove()
    return walker.result()


# ------------------------------------------------------------------ the public function
@dataclass
class StreamComponents:
    """The stream entering a layer as a sum of components (:func:`residual_stream`).

    Parameters
    ----------
    names : list of str
        Component names (module docstring).
    positions : numpy.ndarray
        Int ``[P]`` token positions.
    vectors : numpy.ndarray
        Float64 ``[C, P, d]``: component ``c`` at position ``p``.
    stream : numpy.ndarray
        Float64 ``[P, d]``: the stream as the forward computed it.
    tokens : list of str
        The input's tokens.
    layer : int
        0-indexed.
    """

    names: list[str]
    positions: np.ndarray
    vectors: np.ndarray
    stream: np.ndarray
    tokens: list[str]
    layer: int

    @property
    def error(self) -> float:
        """Largest ``|Σ_c vectors[c] - stream|``."""
        return float(np.abs(self.vectors.sum(0) - self.stream).max())

    def norms(self) -> Any:
        """``‖component‖₂`` per position as a DataFrame ``[position, component]``."""
        import pandas as pd

        return pd.DataFrame(np.linalg.norm(self.vectors, axis=-1).T, index=self.positions,
                            columns=self.names)


def residual_stream(model: Any, inputs: Any, *, layer: int,
                    positions: Sequence[int] | None = None) -> StreamComponents:
    """The residual stream entering ``layer`` at ``positions``, written exactly as a sum of
    components: token, position and segment embeddings, each earlier head's output, each
    earlier MLP's output, and the biases (see :mod:`attnkit.runtime.decompose`).

    One forward through the capture path, stopped after ``layer``'s attention; memory
    ``O(components × positions × d)``.

    Parameters
    ----------
    model : Model
        The model (:func:`attnkit.load`).
    inputs : str, Encoding or token ids
        One input.
    layer : int
        0-indexed; the stream entering it (``0``: the embeddings).
    positions : sequence of int, optional
        Token positions (default all).

    Returns
    -------
    StreamComponents
        ``vectors [C, P, d]`` sum to ``stream [P, d]`` (``.error`` says how closely).

    Raises
    ------
    InputError
        For a layer or a position out of range.
    UnsupportedModelError
        For an architecture the capture path does not support.

    Examples
    --------
    >>> import attnkit as ak
    >>> from attnkit.testing import tiny_model
    >>> s = ak.residual_stream(tiny_model("bert"), "The cat sat.", layer=1)
    >>> s.names
    ['embed', 'pos_embed', 'type_embed', '1-1', '1-2', '1-mlp', 'bias']
    >>> s.error < 1e-5  # float32 forward, float64 components
    True
    """
    from .encoding import Encoding

    validate.model(model)
    stream_spec(model)
    layer = validate.index(layer, model.n_layers, "layer")
    enc = inputs if isinstance(inputs, Encoding) else model.encode(inputs)
    pos = list(range(len(enc))) if positions is None else \
        validate.positions(positions, len(enc), "positions", empty=False).tolist()
    w = walk(model, enc, layer=layer, readers=[Reader(pos)])
    where = {int(p): i for i, p in enumerate(w.positions.tolist())}
    rows = [where[p] for p in pos]
    return StreamComponents(w.names, np.asarray(pos), w.parts[0].numpy(),
                            w.stream[rows].numpy(), list(enc.tokens), layer)


