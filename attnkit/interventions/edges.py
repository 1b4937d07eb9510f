"""The edge graph of a model, and exact edge patching.

Upstream components write into the residual stream: the embeddings (``"embed"``, and
``"pos_embed"`` where the model adds learned positions), each head's output ``W_O^h z_h``
(``"L-H"``, 1-indexed as in :mod:`attnkit.core.labels`) and each MLP's output (``"L-mlp"``).
Downstream inputs read it: each head's query, key and value input (``"L-H.q"``, ``".k"``,
``".v"``), each MLP's input (``"L-mlp.in"``) and the final logits (``"logits"``). Under
grouped-query attention a key/value head serves ``r`` query heads, and its key and value
inputs are those of the key/value head, not of one query head: ``"L-kvG.k"`` and
``"L-kvG.v"`` (:func:`~attnkit.core.labels.kv_label`; key/value head ``G`` serves query heads
``(G − 1) r + 1`` to ``G r``), while each query head keeps its own ``"L-H.q"``. With one
key/value head per query head (``r = 1``) the key/value head is the head, and its inputs keep
the head's name. An edge
``(u, d)`` joins an upstream component to a downstream input that comes after it (a head's
output reaches its own layer's MLP, not its own layer's heads).

In a pre-norm decoder the stream entering a read is exactly the sum of what came before,
``x = Σ_u u + biases``, so each downstream input can be given a stream of its own,

    x_d = x − Σ_u m[u, d] (u − u′),

with ``u`` the component's value in the run being computed and ``u′`` its value on the
corrupted input: a patched edge (``m = 1``) carries the corrupted value, every other edge the
value of this run. The norm before the read (``ln_1``, ``input_layernorm``, ``ln_2``, the final
norm) is recomputed on ``x_d``, and the query, key and value projections read each head's own
normalised stream. Patching every edge gives the corrupted run, patching none the clean run
(both tested on hand-built and random models). Many edge sets run as copies of the inputs in
one forward pass (``m`` is ``[copies, upstream, downstream]``); a fractional ``m`` moves an
edge part of the way, which is how its derivative is checked.

**Post-norm encoders** (BERT, RoBERTa, DistilBERT) renormalise the stream after every block:
``h_l = LN_A(x_l + Σ_h W_O^h z_h + b_O)``, ``x_{l+1} = LN_O(h_l + MLP(h_l))``, with
``x_0 = LN_E(token + position + segment embeddings)``. A layer norm is linear once its row
statistics are fixed (:class:`~attnkit.runtime.weights.LinearNorm`, the linearisation of
:mod:`attnkit.runtime.decompose`): ``LN(u) = D_σ u + β`` with ``D_σ u = γ ⊙ (u − mean u) / σ``
and ``σ`` the row's standard deviation. In each run (clean, corrupted or a patched copy), with
*that run's own* ``σ`` at every norm, the stream at each read point is exactly

    x = Σ_u ĉ_u,   ĉ_u = D_σk … D_σs u   (u's output carried through the norms after it),

where the token embedding's term ``ĉ_embed`` also carries every bias (``b_O`` and each norm's
``β``, through the norms after them): the biases belong to no component, and they go with the
token embedding, which every run has. Each downstream input reads the stream at its point
(a head's query, key and value input the layer's input ``x_l``, which they read without a
norm; an MLP's input ``h_l``, the attention's post-norm output; the logits the final stream,
through whatever head the model has: pooler and classifier, the masked-LM head, or none) and
gets its own copy

    x_d = x − Σ_u m[u, d] (ĉ_u − ĉ′_u),

with ``ĉ′_u`` the corrupted run's term at the same point (its own statistics). Patching every
edge into ``d`` gives ``Σ_u ĉ′_u = x′``, the corrupted run's stream, exactly (the bias terms
move with the ``embed`` edge), and patching none gives ``x``; the rest of each copy's forward
runs as the model does (its residual stream unpatched, its norms recomputed on it). Where
most edges are patched, the same stream is computed as ``x′ + Σ_u (1 − m[u, d]) (ĉ_u − ĉ′_u)``
(the sum over every ``u`` being ``x − x′``), carrying only the few unpatched components.

Families: the pre-norm decoders whose queries, keys and values come from one stream read
per head — GPT-2, Llama, Qwen2, Mistral, gpt-oss, with or without grouped-query attention (a
shared key/value head reads one stream of its own, ``"L-kvG.k"``, whatever its query heads
read) — and the post-norm encoders BERT, RoBERTa, XLM-RoBERTa and DistilBERT. GPT-NeoX
(parallel attention and MLP), Gemma 2 (normalised attention output), encoder–decoders and
vision models are refused with
:class:`~attnkit.errors.UnsupportedModelError`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..core.labels import head_label, kv_label, mlp_label, parse_kv_label
from ..errors import InputError, UnsupportedModelError
from ..runtime.archs import arch_of, submodule
from . import hooks
from .metrics import Metric, check_gap


@dataclass
class EdgeGraph:
    """Every upstream component and downstream input of one model, and which edges exist.

    Parameters
    ----------
    upstream : list of str
        Upstream components in forward order (``"embed"``, ``"pos_embed"``, ``"1-1"``, ...,
        ``"1-mlp"``, ...).
    up_layer : list of int
        Their layers, 0-indexed (embeddings ``-1``).
    downstream : list of str
        Downstream inputs in forward order (``"1-1.q"``, ``"1-1.k"``, ``"1-1.v"``, ...,
        ``"1-mlp.in"``, ..., ``"logits"``).
    down_layer : list of int
        Their layers (the logits ``n_layers``).
    n_layers, n_heads : int
        The model's shape.
    n_kv_heads : int, optional
        Key/value heads per layer (grouped-query attention: fewer than ``n_heads``, each
        serving ``n_heads // n_kv_heads`` query heads); default ``n_heads``.
    """

    upstream: list[str]
    up_layer: list[int]
    downstream: list[str]
    down_layer: list[int]
    n_layers: int
    n_heads: int
    n_kv_heads: int | None = None
    valid: Any = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.n_kv_heads is None:
            self.n_kv_heads = self.n_heads
        up_is_head = np.array([self._up_kind(n) == "head" for n in self.upstream])
        down_is_mlp = np.array([d.endswith(".in") for d in self.downstream])
        ul = np.asarray(self.up_layer)[:, None]
        dl = np.asarray(self.down_layer)[None, :]
        same = (ul == dl) & up_is_head[:, None] & down_is_mlp[None, :]
        self.valid = (ul < dl) | same

    @staticmethod
    def _up_kind(name: str) -> str:
        return "mlp" if name.endswith("-mlp") else "head" if "-" in name else "embed"

    def edges(self) -> list[tuple[str, str]]:
        """Every edge ``(upstream, downstream input)``, downstream-major in forward order.

        Returns
        -------
        list of (str, str)

        Examples
        --------
        >>> from attnkit.interventions.edges import edge_graph
        >>> from attnkit.testing import tiny_model
        >>> g = edge_graph(tiny_model("gpt2", layers=1, heads=1))
        >>> g.edges()
        [('embed', '1-1.q'), ('pos_embed', '1-1.q'), ('embed', '1-1.k'), ('pos_embed', '1-1.k'), ('embed', '1-1.v'), ('pos_embed', '1-1.v'), ('embed', '1-mlp.in'), ('pos_embed', '1-mlp.in'), ('1-1', '1-mlp.in'), ('embed', 'logits'), ('pos_embed', 'logits'), ('1-1', 'logits'), ('1-mlp', 'logits')]
        """
        return [(self.upstream[u], self.downstream[d])
                for d in range(len(self.downstream)) for u in range(len(self.upstream))
                if self.valid[u, d]]

    def readers(self, downstream: str) -> list[str]:
        """The upstream components whose output reads the downstream input ``downstream``: a
        query head's own for ``"L-H.q"`` (and ``".k"``, ``".v"`` without grouped-query
        attention), every query head the key/value head serves for ``"L-kvG.k"`` and
        ``".v"``, the MLP for ``"L-mlp.in"``, none for the logits.

        Parameters
        ----------
        downstream : str
            A downstream input of :attr:`downstream`.

        Returns
        -------
        list of str

        Raises
        ------
        InputError
            For a name that is not a downstream input of this graph.

        Examples
        --------
        >>> from attnkit.interventions.edges import edge_graph
        >>> from attnkit.testing import tiny_model
        >>> g = edge_graph(tiny_model("llama", heads=4, kv_heads=2))
        >>> g.readers("2-kv2.k"), g.readers("2-3.q"), g.readers("1-mlp.in"), g.readers("logits")
        (['2-3', '2-4'], ['2-3'], ['1-mlp'], [])
        """
        if downstream not in self.downstream:
            raise InputError(f"downstream: {downstream!r} is not a downstream input of this "
                             f"model ({', '.join(self.downstream[:4])}, ..., 'logits').")
        if downstream == "logits":
            return []
        comp = downstream.rpartition(".")[0]
        kv = parse_kv_label(comp)
        if kv is None:
            return [comp]
        r = self.n_heads // int(self.n_kv_heads or self.n_heads)
        return [head_label(kv[0], h) for h in range(kv[1] * r, (kv[1] + 1) * r)]

    def index(self, edges: Any, name: str = "edges") -> list[tuple[int, int]]:
        """``(upstream index, downstream index)`` of named edges, checked.

        Parameters
        ----------
        edges : iterable of (str, str)
            ``(upstream, downstream input)`` pairs, as :meth:`edges` names them.
        name : str
            The parameter's name, for errors.

        Returns
        -------
        list of (int, int)

        Raises
        ------
        InputError
            For a name that is not a component or an input, or a pair that is not an edge.

        Examples
        --------
        >>> from attnkit.interventions.edges import edge_graph
        >>> from attnkit.testing import tiny_model
        >>> edge_graph(tiny_model("gpt2")).index([("1-2", "2-1.k")])
        [(3, 8)]
        """
        up = {n: i for i, n in enumerate(self.upstream)}
        down = {n: i for i, n in enumerate(self.downstream)}
        out = []
        if isinstance(edges, (str, bytes)):
            raise InputError(f"{name} must be (upstream, downstream) pairs; got {edges!r}.")
        for e in edges:
            try:
                u, d = e
            except (TypeError, ValueError):
                raise InputError(f"{name}: each edge is an (upstream, downstream) pair such as "
                                 f"('1-1', '2-1.k'); got {e!r}.") from None
            if u not in up:
                raise InputError(f"{name}: {u!r} is not an upstream component of this model "
                                 f"({', '.join(self.upstream[:4])}, ...).")
            if d not in down:
                raise InputError(f"{name}: {d!r} is not a downstream input of this model "
                                 f"({', '.join(self.downstream[:4])}, ..., 'logits').")
            if not self.valid[up[u], down[d]]:
                raise InputError(f"{name}: {u!r} does not reach {d!r} (an edge runs from a "
                                 "component to an input read after it).")
            out.append((up[u], down[d]))
        return out

    def mask(self, sets: Sequence[Sequence[tuple[int, int]]], dtype: Any, device: Any) -> Any:
        """Float ``[len(sets), upstream, downstream]``: 1 at each set's edges.

        Parameters
        ----------
        sets : sequence of sequences of (int, int)
            Edge sets as :meth:`index` gives them.
        dtype, device
            Of the mask.

        Returns
        -------
        torch.Tensor

        Examples
        --------
        >>> import torch
        >>> from attnkit.interventions.edges import edge_graph
        >>> from attnkit.testing import tiny_model
        >>> g = edge_graph(tiny_model("gpt2"))
        >>> g.mask([[(0, 0)], []], torch.float32, "cpu").sum((1, 2)).tolist()
        [1.0, 0.0]
        """
        import torch

        m = torch.zeros(len(sets), len(self.upstream), len(self.downstream), dtype=dtype,
                        device=device)
        for r, s in enumerate(sets):
            for u, d in s:
                m[r, u, d] = 1.0
        return m


def is_post_norm(model: Any) -> bool:
    """Whether ``model`` renormalises its stream after every block (BERT, RoBERTa,
    DistilBERT), so that edges are patched through that run's norms (module docstring).

    Parameters
    ----------
    model : Model
        The model.

    Returns
    -------
    bool

    Examples
    --------
    >>> from attnkit.interventions.edges import is_post_norm
    >>> from attnkit.testing import tiny_model
    >>> is_post_norm(tiny_model("bert")), is_post_norm(tiny_model("gpt2"))
    (True, False)
    """
    layout = arch_of(model).layout
    return layout is not None and layout.placement == "post"


def check_family(model: Any) -> None:
    """Refuse a model whose edges attnkit cannot patch exactly (see the module docstring).

    Parameters
    ----------
    model : Model
        The model.

    Raises
    ------
    UnsupportedModelError
        For any family but the pre-norm decoders and post-norm encoders listed in the
        module docstring.

    Examples
    --------
    >>> from attnkit.interventions.edges import check_family
    >>> from attnkit.testing import tiny_model
    >>> check_family(tiny_model("gpt2")), check_family(tiny_model("bert"))
    (None, None)
    >>> check_family(tiny_model("gpt_neox"))
    Traceback (most recent call last):
    ...
    attnkit.errors.UnsupportedModelError: model: edge patching needs a pre-norm decoder ...
    """
    hooks.sites(model)
    arch = arch_of(model)
    stream, layout = arch.stream, arch.layout
    text = getattr(model, "family", "text") == "text"
    pre = (layout is not None and stream is not None and layout.placement == "pre"
           and stream.qkv in ("split", "gpt2") and stream.attn_norm and stream.mlp_in_norm
           and stream.final_norm)
    post = (layout is not None and stream is not None and layout.placement == "post"
            and stream.qkv == "split" and layout.norm and stream.embed_norm and stream.mlp_norm
            and stream.mlp_in)
    if not (text and (pre or post)):
        raise UnsupportedModelError(
            f"model: edge patching needs a pre-norm decoder whose stream is the sum of its "
            f"components (GPT-2, Llama, Qwen2, Mistral, gpt-oss) or a post-norm encoder (BERT, "
            f"RoBERTa, DistilBERT); {getattr(model, 'name', '?')} "
            f"({getattr(model, 'model_type', '?')}) is not one of them (parallel attention and "
            "MLP, a normalised attention output, or no decomposition).")


def edge_graph(model: Any) -> EdgeGraph:
    """The :class:`EdgeGraph` of ``model``.

    Parameters
    ----------
    model : Model
        A pre-norm decoder or a post-norm encoder (see the module docstring).

    Returns
    -------
    EdgeGraph

    Raises
    ------
    UnsupportedModelError
        As :func:`check_family`.

    Examples
    --------
    >>> from attnkit.interventions.edges import edge_graph
    >>> from attnkit.testing import tiny_model
    >>> g = edge_graph(tiny_model("gpt2"))
    >>> g.upstream
    ['embed', 'pos_embed', '1-1', '1-2', '1-mlp', '2-1', '2-2', '2-mlp']
    >>> g.downstream[:4], g.downstream[-2:], len(g.edges())
    (['1-1.q', '1-1.k', '1-1.v', '1-2.q'], ['2-mlp.in', 'logits'], 61)

    Under grouped-query attention each key/value head has one key and one value input,
    after the queries of the heads it serves:

    >>> edge_graph(tiny_model("llama", heads=4, kv_heads=2)).downstream[:9]
    ['1-1.q', '1-2.q', '1-kv1.k', '1-kv1.v', '1-3.q', '1-4.q', '1-kv2.k', '1-kv2.v', '1-mlp.in']
    """
    check_family(model)
    stream = arch_of(model).stream
    assert stream is not None
    L, H, G = model.n_layers, model.n_heads, hooks.kv_heads(model)
    r = H // G
    up = ["embed"] + [n for n, _ in stream.embeds if n != "embed"]
    up_layer = [-1] * len(up)
    down: list[str] = []
    down_layer: list[int] = []
    for layer in range(L):
        for g in range(G):  # each key/value head after the queries of the heads it serves
            down += [head_input(layer, h, "q", H, G) for h in range(g * r, (g + 1) * r)]
            down += [head_input(layer, g, via, H, G) for via in "kv"]
            down_layer += [layer] * (r + 2)
        down.append(f"{mlp_label(layer)}.in")
        down_layer.append(layer)
        up += [head_label(layer, h) for h in range(H)] + [mlp_label(layer)]
        up_layer += [layer] * (H + 1)
    down.append("logits")
    down_layer.append(L)
    return EdgeGraph(up, up_layer, down, down_layer, L, H, G)


def head_input(layer: int, index: int, via: str, n_heads: int, n_kv_heads: int) -> str:
    """The name of an attention input: query head ``index``'s ``"L-H.q"``, or key/value head
    ``index``'s ``".k"`` / ``".v"`` (``"L-kvG.k"`` under grouped-query attention, the head's
    own ``"L-H.k"`` with one key/value head per query head).

    Parameters
    ----------
    layer, index : int
        0-indexed layer, and query head (``via="q"``) or key/value head.
    via : str
        ``"q"``, ``"k"`` or ``"v"``.
    n_heads, n_kv_heads : int
        Query and key/value heads per layer.

    Returns
    -------
    str

    Examples
    --------
    >>> from attnkit.interventions.edges import head_input
    >>> head_input(1, 3, "q", 4, 2), head_input(1, 1, "k", 4, 2), head_input(1, 1, "v", 4, 4)
    ('2-4.q', '2-kv2.k', '2-2.v')
    """
    if via == "q" or n_kv_heads == n_heads:
        return f"{head_label(layer, index)}.{via}"
    return f"{kv_label(layer, index)}.{via}"


# ------------------------------------------------------------------ the forward
@dataclass
class Pass:
    """What one forward through :func:`patching` keeps: the upstream values it computed
    (``ups``, ``[N, T, d]`` each, in :attr:`EdgeGraph.upstream` order) and, with ``grad``,
    the zero leaf tensors added to the MLP inputs and the logits' stream (``eps``:
    ``(downstream indices, [K, N, T, d])`` per read), whose gradients are the metric's
    gradients with respect to those inputs. A post-norm encoder's pass also keeps each norm's row statistics
    (``sigmas``, ``[N, T]`` each in forward order: the embeddings' norm, then each layer's
    attention and output norms) and the stream at each read point (``streams``, ``[N, T, d]``
    each: every layer's input and attention output, then the final stream).

    The attention inputs of a ``grad`` pass read the stream itself (no copy per input): the
    leaves are added to the query, key and value projections' outputs instead (``reads``:
    per layer ``(its attention inputs, via-major, [leaves], to_inputs)``). The projections are
    linear in what they read, so the gradient with respect to head ``h``'s input is
    ``W[h]ᵀ g[h]`` (``g`` the gradient at the projection's output, sliced to the head's
    columns), carried back through the norm before the read where there is one (pre-norm) at
    this run's row statistics; ``to_inputs`` maps the leaves' gradients to that ``[K, N, T,
    d]`` (:meth:`gradients`)."""

    ups: list[Any]
    eps: list[tuple[list[int], Any]] = field(default_factory=list)
    sigmas: list[Any] = field(default_factory=list)
    streams: list[Any] = field(default_factory=list)
    reads: list[tuple[list[int], list[Any], Any]] = field(default_factory=list)

    def gradients(self, value: Any) -> list[tuple[list[int], Any]]:
        """The gradient of ``value`` (a scalar of this ``grad`` pass) with respect to each
        downstream input's stream: ``(downstream indices, [K, N, T, d])`` per read (zeros
        where ``value`` does not depend on it).

        Parameters
        ----------
        value : torch.Tensor
            A scalar computed from the pass's output.

        Returns
        -------
        list of (list of int, torch.Tensor)

        Examples
        --------
        >>> from attnkit.interventions import hooks
        >>> from attnkit.interventions.edges import edge_graph, run
        >>> from attnkit.testing import tiny_model
        >>> model = tiny_model("gpt2")
        >>> out, p = run(model, hooks.batch(model, ["The cat sat."]), edge_graph(model), grad=True)
        >>> [(len(downs), tuple(g.shape)) for downs, g in p.gradients(out.sum())]
        [(1, (1, 1, 7, 16)), (1, (1, 1, 7, 16)), (1, (1, 1, 7, 16)), (6, (6, 1, 7, 16)), (6, (6, 1, 7, 16))]
        """
        import torch

        leaves = [leaf for _, leaf in self.eps] + [leaf for _, ls, _ in self.reads for leaf in ls]
        raw = torch.autograd.grad(value, leaves, allow_unused=True)
        got = [torch.zeros_like(leaf) if g is None else g.detach() for leaf, g in zip(leaves, raw)]
        out = [(downs, g) for (downs, _), g in zip(self.eps, got)]
        at = len(self.eps)
        for downs, ls, to_inputs in self.reads:
            out.append((downs, to_inputs(got[at:at + len(ls)])))
            at += len(ls)
        return out


def post_norms(model: Any) -> tuple[list[Any], list[Any], Any]:
    """A post-norm encoder's norms in forward order (the embeddings' norm, then each layer's
    attention norm and output norm), each layer's MLP input module, and its layers.

    Parameters
    ----------
    model : Model
        A post-norm encoder (:func:`check_family`).

    Returns
    -------
    tuple
        ``(norms, mlp_inputs, layers)``: lists of ``torch.nn.Module``.

    Examples
    --------
    >>> from attnkit.interventions.edges import post_norms
    >>> from attnkit.testing import tiny_model
    >>> norms, mlps, layers = post_norms(tiny_model("distilbert"))
    >>> len(norms), type(mlps[0]).__name__
    (5, 'FFN')
    """
    arch = arch_of(model)
    stream, layout = arch.stream, arch.layout
    assert stream is not None and layout is not None
    assert stream.embed_norm and layout.norm and stream.mlp_norm and stream.mlp_in
    layers = list(submodule(model.base, layout.layers))
    norms = [submodule(model.base, stream.embed_norm)]
    for mod in layers:
        norms += [submodule(mod, layout.norm), submodule(mod, stream.mlp_norm)]
    return norms, [submodule(mod, stream.mlp_in) for mod in layers], layers


class _Carry:
    """One run's upstream components carried through the post-norms it has crossed so far,
    with that run's row statistics (module docstring): ``values [K, N, T, d]`` for the kept
    upstream indices; the token embedding's entry (index 0) also holds every bias.

    Outside autograd the components live in one buffer allocated once (``[len(keep), N, T,
    d]``) and cross each norm in place: carrying every component of MiniLM's 8 x 128 tokens
    is memory-bound, and fresh copies per norm (and per joining component) cost more than
    the arithmetic."""

    def __init__(self, frozen: tuple[list[Any], list[Any]], graph: EdgeGraph,
                 keep: Sequence[int]):
        self.norms, self.out_bias = frozen
        self.join = _join_points(graph)
        self.keep = sorted(set(int(u) for u in keep))
        self.kept = set(self.keep)
        self.where: dict[int, int] = {}
        self.values: Any = None
        self.buffer: Any = None
        self.inplace: bool | None = None

    def _add(self, ups: Sequence[int], values: Sequence[Any]) -> None:
        import torch

        new = [(u, v) for u, v in zip(ups, values) if u in self.kept]
        if not new:
            return
        if self.inplace is None:
            self.inplace = not torch.is_grad_enabled()
        if not self.inplace:
            stacked = torch.stack([v for _, v in new])
            for u, _ in new:
                self.where[u] = len(self.where)
            self.values = stacked if self.values is None else torch.cat([self.values, stacked])
            return
        if self.buffer is None:
            first = new[0][1]
            self.buffer = first.new_empty((len(self.keep), *first.shape))
        for u, v in new:
            self.where[u] = len(self.where)
            self.buffer[self.where[u]].copy_(v)
        self.values = self.buffer[:len(self.where)]

    def _bias(self, b: Any) -> None:
        if b is not None and 0 in self.where:
            self.values[self.where[0]] += b

    def _cross(self, k: int, sigma: Any) -> None:
        norm = self.norms[k]
        if self.values is not None:
            self.values = (norm.apply_(self.values, sigma) if self.inplace
                           else norm.apply(self.values, sigma))
        self._bias(norm.bias)

    def cross(self, k: int, ups: Sequence[Any], sigma: Any) -> None:
        """The components that join before the ``k``-th norm (``ups`` holds every upstream
        value; a layer's heads also bring its attention output bias) join, and everything
        crosses that norm at the statistics ``sigma``."""
        joining = [u for u, j in enumerate(self.join) if j == k]
        self._add(joining, [ups[u] for u in joining])
        if k % 2:
            self._bias(self.out_bias[(k - 1) // 2])
        self._cross(k, sigma)

    def get(self, ups: Sequence[int]) -> Any:
        """``[len(ups), N, T, d]``: the kept components ``ups`` at the current point (a view
        when they are consecutive: read it before the next norm is crossed)."""
        at = [self.where[u] for u in ups]
        if at and at == list(range(at[0], at[0] + len(at))):
            return self.values[at[0]:at[0] + len(at)]
        return self.values[at]


def _bias_across(bias: Any, before: Any, norm: Any, sigma: Any, like: Any) -> Any:
    """The biases' term of one run (it belongs to the token embedding's, module docstring)
    after a post-norm: the term so far ``bias`` plus the bias ``before`` that joins just before
    the norm (each may be None), through ``norm`` (a
    :class:`~attnkit.runtime.weights.LinearNorm`) at the run's statistics ``sigma [N, T]``,
    plus the norm's own shift; ``[N, T, d]`` like ``like``, or None where no bias has joined."""
    if before is not None:
        bias = before.expand_as(like) if bias is None else bias + before
    if bias is not None:
        bias = norm.apply(bias, sigma)
    if norm.bias is not None:
        bias = norm.bias.expand_as(like) if bias is None else bias + norm.bias
    return bias


class _Unscaled:
    """One run's components carried through the post-norms, as :meth:`Runs.deltas` reads
    them: the same terms as :class:`_Carry` (module docstring), each kept without the scale
    ``γ`` of the last norm it crossed (``ĉ_u = γ ⊙ values[u]``) and the biases in a term of
    their own (``bias``, belonging to the token embedding's ``ĉ``). A norm crossing of a
    layer norm is then ``(γ ⊙ v − mean(γ ⊙ v)) / σ``: the mean one matrix-vector product and
    the rest one fused ``addcmul`` over the buffer, in place, instead of a centring and a
    scaling pass (three passes over the buffer instead of five: this carrying is
    memory-bound). Joining components are copied in and cross their first norm as one
    block."""

    def __init__(self, ups: Sequence[Any], sigmas: Sequence[Any]):
        self.ups, self.sigmas = ups, sigmas
        self.values: Any = None  # [upstream, N, T, d]: the first n joined
        self.n = 0
        self.scale: Any = None
        self.bias: Any = None

    def cross(self, norm: Any, k: int, joining: Sequence[int], before: Any) -> None:
        """Cross the ``k``-th norm (a :class:`~attnkit.runtime.weights.LinearNorm`), the
        components ``joining`` (the next upstream indices) and the bias ``before`` (or None)
        joining just before it."""
        import torch

        u0 = self.ups[0]
        if self.values is None:
            self.values = u0.new_empty((len(self.ups), *u0.shape))
        sigma = self.sigmas[k].to(u0.dtype)
        s = 1 / sigma[..., None]  # [N, T, 1]
        self.bias = _bias_across(self.bias, before, norm, sigma, u0)
        start = self.n
        for u in joining:  # as they are (no scale yet), then crossed as one block
            assert u == self.n, (u, self.n)  # components join in upstream order
            self.values[u].copy_(self.ups[u])
            self.n += 1
        ones = torch.ones_like(norm.scale)
        for block, scale in ((self.values[:start], self.scale), (self.values[start:self.n], ones)):
            if not len(block):
                continue
            if norm.kind == "layer":  # (γ ⊙ v − mean(γ ⊙ v)) / σ in one pass over the block
                m = block @ (scale / block.shape[-1])  # [n, N, T]
                torch.addcmul(-(m[..., None] * s), block, scale * s, out=block)
            else:
                block.mul_(scale * s)
        self.scale = norm.scale


class _Factored:
    """First-order scores of a post-norm encoder without carrying any component through the
    norms (what :meth:`Runs.first_order` computes; :meth:`Runs.deltas` is its definition).

    A layer norm's linear map at fixed statistics is ``D_σ v = γ ⊙ C v / σ``, and the row
    statistic ``σ`` is one number per row: it commutes with ``γ ⊙`` and the centring ``C``.
    A component ``u`` that joins before norm ``j``, read after norm ``i``, is therefore
    ``ĉ_u = ρ_{j,i} N_{j,i} u`` in every run, with ``ρ_{j,i} = Π_{k=j..i} 1/σ_k`` the run's
    per-row factor and ``N_{j,i} = Γ_i C … Γ_j C`` the same map in both runs. Unrolled,
    ``N_{j,i} u = γ̃_{i,j} ⊙ u − Σ_{k=j..i} μ_k(u) γ̃_{i,k}`` (``γ̃_{i,k} = Π_{m=k..i} γ_m``,
    ``μ_k(u) = a_{j,k} · u`` the mean norm ``k`` removes, a linear functional of ``u``).
    With cumulative products ``Q_i = Π_{k≤i} 1/σ_k`` (per row, per run) and ``G_i = Π_{k≤i}
    γ_k`` (per column), ``ρ_{j,i} γ̃_{i,j} = (Q_i / Q_{j−1}) (G_i / G_{j−1})``, so the score
    ``Σ (ĉ′_u − ĉ_u) · g_d`` of an edge into ``d`` (gradient ``g_d``) is one inner product
    of a row per component and run (``u / (Q_{j−1} G_{j−1})`` and ``−μ(u) / Q_{j−1}``, made
    once) with a row per downstream input and run (``± g_d Q_i G_i`` and ``± Q_i (γ̃_{i,k}
    · g_d)``, made at its read point), the two runs side by side in one matrix product per
    read point. Each row is scaled once instead of carried through every norm after it.

    The cumulative products are normalised (a common factor per row or per column cancels
    in every ratio); :meth:`of` returns None where they would leave float32's comfortable
    range or a scale entry is zero, and :meth:`Runs.first_order` then uses the carried
    terms."""

    #: Largest |log| of a normalised cumulative product (float32 holds e^±87).
    LIMIT = 30.0

    def __init__(self, ups: Sequence[Any], q: Any, big_g: Any, a: Any, tilde: Any,
                 join: Sequence[int]):
        self.ups, self.q, self.big_g, self.a, self.tilde, self.join = ups, q, big_g, a, tilde, join

    @classmethod
    def of(cls, norms: Sequence[Any], sigmas: Sequence[Sequence[Any]], ups: Sequence[Sequence[Any]],
           join: Sequence[int]) -> _Factored | None:
        """The factors of ``norms`` (float64 :class:`~attnkit.runtime.weights.LinearNorm`, in
        forward order), each run's statistics ``sigmas`` (corrupted, clean: ``[N, T]`` per
        norm) and upstream values ``ups`` (corrupted, clean), components joining before the
        norms ``join``; None outside float32's comfortable range."""
        import torch

        K, d = len(norms), int(norms[0].scale.shape[-1])
        gam = torch.stack([n.scale.double().cpu() for n in norms])  # [K, d]
        # G_i for i = -1 .. K-1 (row i + 1). Only G_{j-1} of a join point j is divided by:
        # those rows are normalised per column and must be in range; the later rows are
        # multiplied only (a last norm's dead dimension, γ ≈ 0, is harmless there)
        last = max(join)
        if not bool((gam[:last] != 0).all()):
            return None
        lg = torch.cat([gam.new_zeros(1, d), gam[:last].abs().log().cumsum(0)])
        lg -= (lg.amax(0) + lg.amin(0)) / 2
        if not bool(lg.abs().max() <= cls.LIMIT):
            return None
        rows = [torch.cat([gam.new_ones(1, d), gam[:last].sign().cumprod(0)]) * lg.exp()]
        for k in range(last, K):
            rows.append(rows[-1][-1:] * gam[k])
        big_g = torch.cat(rows)
        q = []
        for run in sigmas:  # Q_i = Π 1/σ_k, i = -1 .. K-1, normalised per row
            ls = torch.stack([s.detach().double().cpu().log() for s in run])  # [K, N, T], here
            lq = torch.cat([ls.new_zeros(1, *ls.shape[1:]), -ls.cumsum(0)])
            lq -= (lq.amax(0) + lq.amin(0)) / 2
            if not bool(lq.abs().max() <= cls.LIMIT):
                return None
            q.append(lq.exp())
        # γ̃_{i,k} = Π_{m=k..i} γ_m for k ≤ i: tilde[i, k]; tilde[k - 1, k] = 1
        tilde = gam.new_zeros(K + 1, K + 1, d)  # rows and columns shifted by one: i + 1, k
        for k in range(K + 1):
            tilde[k, k] = 1.0
            for i in range(k, K):
                tilde[i + 1, k] = tilde[i, k] * gam[i]
        centred = [n.kind == "layer" for n in norms]
        a = {}  # a[j]: [d, K], column k the functional μ_k (zero for k < j)
        for j in sorted(set(join)):
            aj = gam.new_zeros(d, K)
            for k in range(j, K):
                if centred[k]:
                    col = tilde[k, j] / d  # γ̃_{k-1, j}
                    for kk in range(j, k):
                        col = col - tilde[k, kk].mean() * aj[:, kk]  # γ̃_{k-1, kk}
                    aj[:, k] = col
            a[j] = aj
        big = max(float(t.abs().max()) for t in (big_g, tilde, *a.values()))
        if not big < float(np.exp(2 * cls.LIMIT)):
            return None
        return cls(ups, q, big_g, a, tilde, join)

    def scores(self, points: Sequence[tuple[list[int], list[int], Any]], bias: Sequence[Any],
               out: np.ndarray, block_bytes: int) -> None:
        """Fill ``out [U, D]`` with the scores of ``(upstream indices, downstream indices,
        gradients [D_i, N·T·d])`` per read point in forward order (its downstream list empty
        where nothing is read; each point's upstream indices a prefix of the next's), with
        ``bias`` the biases' difference ``ĉ′ − ĉ`` in the token embedding's term at each
        point (``[N, T, d]`` or None), ``block_bytes`` the size of the components' block of
        rows."""
        import torch

        like = self.ups[0][0]
        N, T, d = like.shape
        K = self.q[0].shape[0] - 1
        as_like = dict(dtype=like.dtype, device=like.device)
        U = len(self.ups[0])
        most = max(len(downs) for _, downs, _ in points)
        # the sums run over rows (input × position), a block of rows at a time: the buffers
        # stay small and are reused (fresh memory costs a page fault per 4 kB)
        rows = max(1, min(N * T, block_bytes // (like.element_size() * 2 * d * U)))
        x = like.new_empty((U, 2, rows, d))  # u / (Q_{j-1} G_{j-1}), both runs side by side
        xc = like.new_zeros((U, 2, rows, K))  # −μ(u) / Q_{j-1}
        # ± g_d Q_i G_i and ± Q_i (γ̃_{i,k} · g_d), k ≤ i, of a point and those it waits with
        y = like.new_empty((most + 3, 2, rows, d))
        yc = like.new_zeros((most + 3, 2, rows, K))
        sign = torch.tensor([1.0, -1.0], dtype=torch.float64)
        joins = {j: [u for u, jj in enumerate(self.join) if jj == j] for j in sorted(set(self.join))}
        # μ_k for k ≥ j only (the other columns of xc stay zero)
        folds = {j: (-self.big_g[j][:, None] * self.a[j][:, j:]).to(**as_like) for j in joins}
        q = [qr.reshape(K + 1, -1) for qr in self.q]  # [K + 1, N·T] per run
        small = [len(downs) <= 2 for _, downs, _ in points]
        flat = [[u.reshape(N * T, d) for u in ups] for ups in self.ups]  # (a copy if broadcast)
        flat_bias = [None if b is None else b.reshape(N * T, d) for b in bias]
        total = np.zeros(out.shape)
        extra = [np.zeros(len(downs)) for _, downs, _ in points]  # the biases' scores
        for r0 in range(0, N * T, rows):
            r1 = min(N * T, r0 + rows)
            R = r1 - r0
            xs, xcs = x[:, :, :R], xc[:, :, :R]
            for r, ups in enumerate(flat):  # corrupted, clean
                for j, at in joins.items():
                    main = torch.outer(1 / q[r][j, r0:r1], 1 / self.big_g[j]).to(**as_like)
                    for u in at:
                        torch.mul(ups[u][r0:r1], main, out=xs[u, r])
                    # μ(u) / Q_{j-1} = (u / (Q_{j-1} G_{j-1})) @ (G_{j-1} ⊙ a_j)
                    torch.matmul(xs[at[0]:at[-1] + 1, r], folds[j], out=xcs[at[0]:at[-1] + 1, r, :, j:])
            held: list[tuple[int, int]] = []  # (point, its first row of y)
            used = 0
            for i, (ups, downs, g) in enumerate(points):
                if downs:
                    D = len(downs)
                    gv = g.reshape(D, 1, N * T, d)[:, :, r0:r1]
                    qi = sign[:, None] * torch.stack([q[0][i + 1, r0:r1], q[1][i + 1, r0:r1]])
                    scale = (qi[:, :, None] * self.big_g[i + 1]).to(**as_like)  # [2, R, d]
                    torch.mul(gv, scale, out=y[used:used + D, :, :R])
                    t = self.tilde[i + 1, :i + 1].T.to(**as_like)  # γ̃_{i,k}, k ≤ i: [d, i + 1]
                    torch.mul(gv @ t, qi.to(**as_like)[:, :, None], out=yc[used:used + D, :, :R, :i + 1])
                    yc[used:used + D, :, :R, i + 1:] = 0
                    b = flat_bias[i]
                    if b is not None and ups and ups[0] == 0:  # the biases go with "embed"
                        extra[i] += (gv.reshape(D, -1) @ b[r0:r1].reshape(-1)).double().cpu().numpy()
                    held.append((i, used))
                    used += D
                # a point read by one or two inputs (an MLP's, the logits) waits for the next
                # one, which reads the same components and more, and so does the point before
                # a tail of such points: one product reads the components once for them all
                if not used or (i + 1 < len(points) and (small[i] or all(small[i + 1:]))
                                and used + len(points[i + 1][1]) <= y.shape[0]):
                    continue
                n = max(len(points[h][0]) for h, _ in held)
                sc = xs[:n].reshape(n, -1) @ y[:used, :, :R].reshape(used, -1).T
                sc += xcs[:n].reshape(n, -1) @ yc[:used, :, :R].reshape(used, -1).T
                for h, first in held:
                    ups_h, downs_h = points[h][0], points[h][1]
                    assert ups_h == list(range(len(ups_h))), "components join in upstream order"
                    total[:len(ups_h), downs_h] += sc[:len(ups_h), first:first + len(downs_h)].double().cpu().numpy()
                held, used = [], 0
        for i, (_, downs, _) in enumerate(points):
            total[0, downs] += extra[i]
        valid = np.zeros(out.shape, bool)
        for ups, downs, _ in points:
            valid[np.ix_(ups, downs)] = True
        out[valid] = total[valid]


def _delta_scores(after: Sequence[Any], before: Sequence[Any],
                  points: Sequence[tuple[list[int], list[int], Any]], out: np.ndarray,
                  block_bytes: int) -> None:
    """Fill ``out [U, D]`` with ``Σ (u′ − u) · g_d`` over rows (input × position) and width,
    from each component's values ``after`` (``u′``) and ``before`` (``u``, ``[N, T, d]``
    each) and ``(upstream indices, downstream indices, gradients [D_i, N·T·d])`` per group
    of inputs (downstream list empty where nothing is read), ``block_bytes`` of the
    differences' rows at a time (small buffers, reused: fresh memory costs a page fault per
    4 kB)."""
    import torch

    like = before[0]
    N, T, d = like.shape
    NT = N * T
    U = max((len(ups) for ups, downs, _ in points if downs), default=0)
    if not U:
        return
    rows = max(1, min(NT, block_bytes // (like.element_size() * d * U)))
    x = like.new_empty((U, rows, d))
    flat = [[u.reshape(NT, d) for u in run[:U]] for run in (after, before)]
    total = np.zeros(out.shape)
    for r0 in range(0, NT, rows):
        r1 = min(NT, r0 + rows)
        xs = x[:, :r1 - r0]
        for u in range(U):
            torch.sub(flat[0][u][r0:r1], flat[1][u][r0:r1], out=xs[u])
        for ups, downs, g in points:
            if downs:
                n = len(ups)
                left = xs[:n] if ups == list(range(n)) else xs[ups]
                grad = g.reshape(len(downs), NT, d)[:, r0:r1].reshape(len(downs), -1)
                total[np.ix_(ups, downs)] += (left.reshape(n, -1) @ grad.T).double().cpu().numpy()
    for ups, downs, _ in points:
        out[np.ix_(ups, downs)] = total[np.ix_(ups, downs)]


def _linear(model: Any, like: Any) -> tuple[list[Any], list[Any]]:
    """A post-norm encoder's norms as :class:`~attnkit.runtime.weights.LinearNorm` and its
    attention output biases ``b_O``, in the dtype and on the device of ``like``."""
    from ..runtime.weights import LinearNorm

    norms, _, _ = post_norms(model)
    out_bias = [None if p.bias is None else p.bias.detach().to(dtype=like.dtype, device=like.device)
                for p in hooks.sites(model).out_proj]
    return [LinearNorm.of(n).to(like) for n in norms], out_bias


def _head_input_grads(pairs: list[tuple[Any, Any]], norm: Any, x: Any) -> Any:
    """``[K, N, T, d]``: the gradient with respect to the stream each of ``K`` attention
    inputs reads, from ``(g [N, T, n * dh], W [n, dh, d])`` per projection (the gradient at
    its output, its weight per head: ``K = Σ n``): ``W[h]ᵀ g[h]`` per head, one batched
    product per projection, and where a norm comes before the read (``norm``, a pre-norm
    model's module, with ``x [N, T, d]`` the stream it normalised) that through the norm's
    transposed Jacobian at ``x``'s row statistics: with ``x̂`` the normalised row and ``σ``
    its statistic, ``J^T a = (C diag(γ) a) / σ − x̂ mean((C diag(γ) a) / σ ⊙ x̂)`` (``C`` the
    centring of a layer norm, the identity for an RMS norm). ``1 / σ`` is applied to ``g``
    and ``C diag(γ)`` folded into ``W`` (:meth:`~attnkit.runtime.weights.LinearNorm.matrix`),
    so the only pass over ``[K, N, T, d]`` besides the product is the ``x̂`` term."""
    import torch

    from ..runtime.weights import LinearNorm

    g0, w0 = pairs[0]
    N, T, d = g0.shape[0], g0.shape[1], w0.shape[-1]
    out = g0.new_empty((sum(int(w.shape[0]) for _, w in pairs), N * T, d))
    lin: Any = None
    sigma: Any = None
    xhat: Any = None
    means = []  # mean(out[k] ⊙ x̂) per head, from the heads' own width: (g / σ) · (W x̂)
    if norm is not None:
        lin = LinearNorm.of(norm).to(x)
        sigma = lin.sigma(x)[..., None]  # [N, T, 1]
        xhat = (lin.center(x) / sigma).reshape(N * T, d)
    with torch.no_grad():
        at = 0
        for g, w in pairs:
            n, dh = int(w.shape[0]), int(w.shape[1])
            if lin is not None:
                g, w = g / sigma, lin.matrix(w)
            w = w.to(g.dtype)
            g = g.reshape(N * T, n, dh)
            torch.bmm(g.transpose(0, 1), w, out=out[at:at + n])
            if lin is not None:
                wx = (xhat @ w.reshape(n * dh, d).T).view(N * T, n, dh)
                means.append((g * wx).sum(-1).T / d)  # [n, N·T]
            at += n
        if lin is not None:
            out.addcmul_(xhat, torch.cat(means)[..., None], value=-1)
    return out.view(-1, N, T, d)


def _join_points(graph: EdgeGraph) -> list[int]:
    """A post-norm encoder's components, each with the index of the first norm it crosses
    (:func:`post_norms` order): the embeddings 0, layer ``l``'s heads ``2l + 1`` (its
    attention norm), its MLP ``2l + 2`` (its output norm)."""
    join = [0] * sum(1 for layer in graph.up_layer if layer == -1)
    for layer in range(graph.n_layers):
        join += [2 * layer + 1] * graph.n_heads + [2 * layer + 2]
    return join


def _same_reads(graph: EdgeGraph) -> list[list[int]]:
    """The downstream inputs grouped by the upstream components they read, in forward order
    (a pre-norm layer's attention inputs, its MLP input, the logits)."""
    groups: dict[bytes, list[int]] = {}
    for d in range(len(graph.downstream)):
        groups.setdefault(graph.valid[:, d].tobytes(), []).append(d)
    return list(groups.values())


def read_points(graph: EdgeGraph) -> list[list[int]]:
    """The downstream inputs that read each point of a post-norm encoder's stream, in
    forward order: layer ``l``'s head inputs (its input ``x_l``), layer ``l``'s MLP input
    (``h_l``), ..., the logits (the final stream).

    Parameters
    ----------
    graph : EdgeGraph
        The model's edges.

    Returns
    -------
    list of list of int

    Examples
    --------
    >>> from attnkit.interventions.edges import edge_graph, read_points
    >>> from attnkit.testing import tiny_model
    >>> g = edge_graph(tiny_model("bert", layers=1, heads=1))
    >>> [[g.downstream[d] for d in p] for p in read_points(g)]
    [['1-1.q', '1-1.k', '1-1.v'], ['1-mlp.in'], ['logits']]
    """
    of = {n: i for i, n in enumerate(graph.downstream)}
    points = []
    for layer in range(graph.n_layers):
        points.append([of[f"{head_label(layer, h)}.{via}"] for via in "qkv"
                       for h in range(graph.n_heads)])
        points.append([of[f"{mlp_label(layer)}.in"]])
    points.append([of["logits"]])
    return points


@contextmanager
def patching(model: Any, graph: EdgeGraph, *, copies: int = 1, masks: Any = None,
             corrupted: Any = None, grad: bool = False, embed: Any = None) -> Iterator[Pass]:
    """Within the block, forwards of ``model`` (``copies`` copies of ``B`` inputs,
    copy-major) give every downstream input its own stream ``x − Σ_u m[r, u, d] (u − u′)``
    (see the module docstring) and record every upstream value.

    Parameters
    ----------
    model : Model
        A supported model (:func:`check_family`).
    graph : EdgeGraph
        Its :func:`edge_graph`.
    copies : int
        ``R``.
    masks : torch.Tensor, optional
        ``[R, upstream, downstream]``: how far each edge of each copy moves to the corrupted
        value (1 patches it); None patches nothing.
    corrupted : list of torch.Tensor or Pass, optional
        ``u′``: the upstream values of the corrupted run, ``[B, T, d]`` each (needed with
        ``masks``); a post-norm encoder needs that run's whole :class:`Pass`.
    grad : bool
        Keep what gives the gradient with respect to every downstream input's stream
        (:meth:`Pass.gradients`): a zero leaf tensor added to each MLP input and to the
        logits' stream (:class:`Pass` ``eps``), and to each query, key and value
        projection's output (``reads``). Only for an unpatched forward (``masks`` None).
    embed : torch.Tensor, optional
        ``[N, T, d]``: replaces the token embeddings' output (integrated gradients).

    Yields
    ------
    Pass

    Raises
    ------
    InputError
        For ``grad`` with ``masks``: the attention inputs' gradients are taken where every
        head reads the one stream of an unpatched forward.

    Examples
    --------
    >>> import torch
    >>> from attnkit.interventions import hooks
    >>> from attnkit.interventions.edges import edge_graph, patching
    >>> from attnkit.testing import tiny_model
    >>> model = tiny_model("gpt2")
    >>> b = hooks.batch(model, ["The cat sat."])
    >>> with torch.no_grad(), patching(model, edge_graph(model)) as p:
    ...     out = hooks.network(model)(**b.kwargs).logits
    >>> bool(torch.allclose(out, hooks.forward(model, b), atol=1e-5)), len(p.ups)
    (True, 8)
    """
    import torch

    arch = arch_of(model)
    stream, layout = arch.stream, arch.layout
    assert stream is not None and layout is not None
    post = layout.placement == "post"
    site = hooks.sites(model)
    H, dh = site.n_heads, site.head_dim
    G = int(graph.n_kv_heads or H)
    base = model.base
    n_up = len(graph.upstream)
    state = Pass([None] * n_up)
    up_of = {n: i for i, n in enumerate(graph.upstream)}
    down_of = {n: i for i, n in enumerate(graph.downstream)}
    embed_names = [n for n in graph.upstream if graph.up_layer[up_of[n]] == -1]
    other_embeds: dict[str, Any] = {}
    handles: list[Any] = []
    stash: dict[Any, Any] = {}
    separate = masks is not None  # every downstream input reads a stream of its own
    if grad and separate:
        raise InputError("grad: gradients with respect to the downstream inputs are taken on an "
                         "unpatched forward (masks=None), where every head reads the stream "
                         "itself; patch with grad=False.")
    keep: list[int] = []
    complement = False
    carries: list[Any] = [None, None]  # this run's and the corrupted run's (_Carry)
    frozen: Any = None
    if post and masks is not None:
        if not isinstance(corrupted, Pass):
            raise InputError("corrupted: a post-norm encoder's patched forward needs the "
                             "corrupted run's Pass (its norms' statistics), not its values alone.")
        valid = torch.as_tensor(graph.valid, device=masks.device)
        on = ((masks != 0) & valid).any(2).any(0)
        off = ((masks != 1) & valid).any(2).any(0)
        # few unpatched components: build each stream from the corrupted one (module docstring)
        complement = int(off.sum()) < int(on.sum())
        keep = torch.nonzero(off if complement else on).flatten().tolist()
    corrupted_ups = corrupted.ups if isinstance(corrupted, Pass) else corrupted

    def rows(t: Any, n: int) -> Any:
        return t.expand(n, *t.shape[1:]) if t.shape[0] == 1 and n != 1 else t

    def weights(ups: list[int], downs: list[int], x: Any, flip: bool) -> Any:
        m = masks[:, ups][:, :, downs].to(x.dtype)  # [R, U, K]
        return 1 - m if flip else m

    def split(x: Any, downs: list[int], point: int = 0) -> Any:
        """``[K, N, T, d]``: the stream of each downstream input in ``downs``."""
        xs = x.unsqueeze(0).expand(len(downs), *x.shape)
        N = x.shape[0]
        if masks is not None and not post:
            ups = [u for u in range(n_up) if graph.valid[u, downs].any()]
            D = torch.stack([(state.ups[u].reshape(copies, N // copies, *x.shape[1:])
                              - corrupted_ups[u].to(x.dtype)[None]) for u in ups])  # [U, R, B, T, d]
            delta = torch.einsum("urbtd,ruk->krbtd", D, weights(ups, downs, x, False))
            xs = xs - delta.reshape(len(downs), *x.shape)
        elif masks is not None:
            here, there = carries
            ups = [u for u in keep if graph.valid[u, downs].any()]
            if ups:
                D = (here.get(ups).reshape(len(ups), copies, N // copies, *x.shape[1:])
                     - there.get(ups)[:, None])  # [U, R, B, T, d]
                delta = torch.einsum("urbtd,ruk->krbtd", D, weights(ups, downs, x, complement))
                delta = delta.reshape(len(downs), *x.shape)
            else:
                delta = torch.zeros_like(xs)
            if complement:  # x′ + Σ_u (1 − m) (ĉ_u − ĉ′_u)
                xc = corrupted.streams[point].to(x.dtype)
                xs = rows(xc, N // copies).repeat(copies, 1, 1).unsqueeze(0) + delta
            else:
                xs = xs - delta
        if grad:
            eps = torch.zeros(len(downs), *x.shape, dtype=x.dtype, device=x.device,
                              requires_grad=True)
            state.eps.append((list(downs), eps))
            xs = xs + eps
        return xs

    def heads_downs(layer: int) -> list[int]:
        """The layer's attention inputs, via-major: H queries, G keys, G values."""
        return [down_of[head_input(layer, i, via, H, G)] for via, n in zip("qkv", (H, G, G))
                for i in range(n)]

    def embed_hook(name: str) -> Any:
        def hook(module: Any, args: Any, out: Any) -> None:
            other_embeds[name] = out
        return hook

    def token_hook(module: Any, args: Any, out: Any) -> Any:
        return embed.to(out.dtype) if embed is not None else None

    def embeds_from(x: Any) -> None:
        """Record the embeddings from the stream they sum to (``x``, ``[N, T, d]``)."""
        rest = sum((rows(other_embeds[n], x.shape[0]) for n in embed_names if n != "embed"),
                   torch.zeros_like(x))
        for n in embed_names:
            state.ups[up_of[n]] = x - rest if n == "embed" else rows(other_embeds[n], x.shape[0])

    def attn_norm_pre(layer: int) -> Any:
        def hook(module: Any, args: Any) -> None:
            x = args[0]
            if layer == 0:
                embeds_from(x)
            if not separate:  # every input reads the stream itself: the model's own forward
                if grad:  # the row statistics the heads' gradients cross the norm with
                    stash[("x", layer)] = x.detach()
                return
            xs = split(x, heads_downs(layer))  # [H + 2G, N, T, d]: via-major
            normed = module.forward(xs)
            stash[("normed", layer)] = normed.split([H, G, G])
        return hook

    def proj_hook(layer: int, via: str | None) -> Any:
        def hook(module: Any, args: Any, out: Any) -> Any:
            if not separate:
                if not grad:
                    return None
                leaf = torch.zeros_like(out, requires_grad=True)  # its gradient: g at the output
                stash.setdefault(("leaves", layer), {})[via] = (leaf, module.weight)
                return out + leaf
            normed = stash[("normed", layer)]
            w, b = module.weight, module.bias
            if via is None:  # GPT-2: one Conv1D, [d, 3 * H * dh] (never grouped)
                wv = w.view(w.shape[0], 3, H, dh)
                y = torch.einsum("vhntd,dvhc->ntvhc", torch.stack(normed), wv)
                if b is not None:
                    y = y + b.view(3, H, dh)
                return y.reshape(*y.shape[:2], 3 * H * dh)
            n = H if via == "q" else G  # a key/value projection has G heads, each its stream
            wv = w.view(n, dh, w.shape[-1])
            y = torch.einsum("hntd,hcd->nthc", normed["qkv".index(via)], wv)
            if b is not None:
                y = y + b.view(n, dh)
            return y.reshape(*y.shape[:2], n * dh)
        return hook

    def add_read(layer: int) -> None:
        """The layer's projections have run: its attention inputs' gradients (Pass.reads)."""
        got = stash.pop(("leaves", layer))
        vias = [None] if None in got else list("qkv")
        ws = []
        for via in vias:
            w = got[via][1]
            if via is None:  # GPT-2's Conv1D [d, 3 * H * dh]: [3H, dh, d]
                ws.append(w.view(w.shape[0], 3 * H, dh).permute(1, 2, 0))
            else:  # [n * dh, d]: [n, dh, d]
                ws.append(w.view(w.shape[0] // dh, dh, w.shape[1]))
        norm = None if post else submodule(site.layers[layer], stream.attn_norm or "")
        x = stash.pop(("x", layer), None)

        def to_inputs(grads: Sequence[Any]) -> Any:
            return _head_input_grads(list(zip(grads, ws)), norm, x)

        state.reads.append((heads_downs(layer), [got[via][0] for via in vias], to_inputs))

    def out_proj_pre(layer: int) -> Any:
        def hook(module: Any, args: Any) -> None:
            stash.pop(("normed", layer), None)  # the projections have read it
            if grad:
                add_read(layer)
            z = args[0]
            zs = z.reshape(*z.shape[:-1], H, dh)
            w = module.weight
            with torch.no_grad():  # values only (a gradient pass reads its leaves)
                if layout.conv1d:
                    per = torch.einsum("nthc,hcd->hntd", zs, w.view(H, dh, w.shape[-1]))
                else:
                    per = torch.einsum("nthc,dhc->hntd", zs, w.view(w.shape[0], H, dh))
            for h in range(H):
                state.ups[up_of[head_label(layer, h)]] = per[h]
        return hook

    def mlp_norm_pre(layer: int) -> Any:
        def hook(module: Any, args: Any) -> Any:
            x = args[0]
            stash[("mid", layer)] = x
            if post:
                state.streams.append(x.detach())
            if not (separate or grad):
                return None
            xs = split(x, [down_of[f"{mlp_label(layer)}.in"]], 2 * layer + 1)
            return (xs[0], *args[1:])
        return hook

    def layer_out(layer: int) -> Any:
        def hook(module: Any, args: Any, out: Any) -> None:
            h = out[0] if isinstance(out, tuple) else out
            state.ups[up_of[mlp_label(layer)]] = h - stash.pop(("mid", layer))
        return hook

    def final_pre(module: Any, args: Any) -> Any:
        if not (separate or grad):
            return None
        xs = split(args[0], [down_of["logits"]])
        return (xs[0], *args[1:])

    # ---- post-norm encoders: every norm's statistics, each run's carried components
    def norm_pre(k: int) -> Any:
        """The ``k``-th post-norm (forward order) is about to run on its input ``u``."""
        layer = (k - 1) // 2

        def hook(module: Any, args: Any) -> None:
            u = args[0]
            if k == 0:
                embeds_from(u)
            elif k % 2 == 0:  # the output norm: u = h_l + MLP(h_l)
                state.ups[up_of[mlp_label(layer)]] = u - stash.pop(("mid", layer))
            nonlocal frozen
            if frozen is None:
                frozen = _linear(model, u)
            sigma = frozen[0][k].sigma(u)
            state.sigmas.append(sigma.detach())
            if masks is None:
                return
            if carries[0] is None:
                carries[0], carries[1] = _Carry(frozen, graph, keep), _Carry(frozen, graph, keep)
            for carry, ups, s in ((carries[0], state.ups, sigma),
                                  (carries[1], corrupted.ups, corrupted.sigmas[k])):
                carry.cross(k, ups, s)
        return hook

    def layer_in(layer: int) -> Any:
        def hook(module: Any, args: Any, kwargs: Any) -> None:
            x = args[0] if args else kwargs["hidden_states"]
            state.streams.append(x.detach())
            if separate:
                xs = split(x, heads_downs(layer), 2 * layer)
                stash[("normed", layer)] = xs.reshape(3, H, *x.shape)
        return hook

    def final_out(module: Any, args: Any, out: Any) -> Any:
        state.streams.append(out.detach())
        if not (separate or grad):
            return None
        return split(out, [down_of["logits"]], 2 * graph.n_layers)[0]

    try:
        for name, path in stream.embeds:
            if name != "embed":
                handles.append(submodule(base, path).register_forward_hook(embed_hook(name)))
        if embed is not None:
            handles.append(base.get_input_embeddings().register_forward_hook(token_hook))
        if post:
            norm_mods, mlp_inputs, _ = post_norms(model)
            for k, mod in enumerate(norm_mods):
                handles.append(mod.register_forward_pre_hook(norm_pre(k)))
            handles.append(norm_mods[-1].register_forward_hook(final_out))
        for layer, mod in enumerate(site.layers):
            if post:
                handles.append(mod.register_forward_pre_hook(layer_in(layer), with_kwargs=True))
                handles.append(mlp_inputs[layer].register_forward_pre_hook(mlp_norm_pre(layer)))
            else:
                assert stream.mlp_in_norm is not None
                handles.append(submodule(mod, stream.attn_norm or "").register_forward_pre_hook(
                    attn_norm_pre(layer)))
                handles.append(submodule(mod, stream.mlp_in_norm).register_forward_pre_hook(
                    mlp_norm_pre(layer)))
                handles.append(mod.register_forward_hook(layer_out(layer)))
            if stream.qkv == "gpt2":
                handles.append(submodule(mod, stream.q).register_forward_hook(proj_hook(layer, None)))
            else:
                for via, path in zip("qkv", (stream.q, stream.k, stream.v)):
                    handles.append(submodule(mod, path).register_forward_hook(proj_hook(layer, via)))
            handles.append(site.out_proj[layer].register_forward_pre_hook(out_proj_pre(layer)))
        if not post:
            handles.append(submodule(base, stream.final_norm or "").register_forward_pre_hook(
                final_pre))
        yield state
    finally:
        for h in handles:
            h.remove()
        stash.clear()


def run(model: Any, b: hooks.Batch, graph: EdgeGraph, *, copies: int = 1, masks: Any = None,
        corrupted: Any = None, grad: bool = False, embed: Any = None) -> tuple[Any, Pass]:
    """One forward of ``copies`` copies of ``b`` through :func:`patching`; returns the
    output (:func:`~attnkit.interventions.hooks.output_of`, ``[R * B, ...]``) and the
    :class:`Pass`.

    Parameters
    ----------
    model : Model
        A supported model.
    b : Batch
        The inputs.
    graph : EdgeGraph
        Its :func:`edge_graph`.
    copies, masks, corrupted, grad, embed
        As :func:`patching`.

    Returns
    -------
    tuple
        ``(output, pass)``.

    Examples
    --------
    >>> from attnkit.interventions import hooks
    >>> from attnkit.interventions.edges import edge_graph, run
    >>> from attnkit.testing import tiny_model
    >>> model = tiny_model("llama", kv_heads=2)
    >>> out, p = run(model, hooks.batch(model, ["The cat sat."]), edge_graph(model), copies=2)
    >>> tuple(out.shape), tuple(p.ups[0].shape)
    ((2, 7, 300), (2, 7, 16))
    """
    import torch

    kwargs = b.repeated(copies)
    ctx = torch.enable_grad() if grad else torch.no_grad()
    with ctx, patching(model, graph, copies=copies, masks=masks, corrupted=corrupted, grad=grad,
                       embed=embed) as p:
        out = hooks.network(model)(**kwargs)
    return hooks.output_of(out), p


@dataclass
class Runs:
    """The clean and corrupted runs every edge method starts from.

    Parameters
    ----------
    graph : EdgeGraph
        The model's edges.
    clean, corrupted : Batch
        The inputs.
    reference : torch.Tensor
        The clean output (what metrics compare with, and the answers they read).
    ups_clean, ups_corrupted : list of torch.Tensor
        Upstream values of each run, ``[B, T, d]``.
    m_clean, m_corrupted : float
        The metric on each run.
    metric : Metric
        The metric.
    model : Model
        The model.
    """

    graph: EdgeGraph
    clean: hooks.Batch
    corrupted: hooks.Batch
    reference: Any
    ups_clean: list[Any]
    ups_corrupted: list[Any]
    m_clean: float
    m_corrupted: float
    metric: Metric
    model: Any
    #: ``(output, Pass)`` of the clean run kept with its autograd graph (``grad=True``), so
    #: EAP backpropagates through it instead of running the clean inputs a second time.
    clean_pass: Any = None
    #: Post-norm encoders: each run's :class:`Pass` (upstream values, norms' statistics,
    #: streams at the read points), detached; None for a pre-norm decoder.
    trace_clean: Pass | None = None
    trace_corrupted: Pass | None = None

    @property
    def corrupted_values(self) -> Any:
        """What :func:`patching` takes as ``corrupted``: the corrupted run's upstream values
        (pre-norm) or its whole :class:`Pass` (post-norm)."""
        return self.ups_corrupted if self.trace_corrupted is None else self.trace_corrupted

    def deltas(self) -> Iterator[tuple[list[int], list[int], Any]]:
        """``(downstream inputs, upstream components, ĉ′ − ĉ)`` for groups of downstream
        inputs that read the same stream: the corrupted minus the clean value of each
        upstream component as those inputs read it (``[U, B, T, d]``; in a post-norm encoder
        carried through each run's own norms to the read point, module docstring, and
        written into one buffer: read each before drawing the next).

        Yields
        ------
        tuple
            ``(list of int, list of int, torch.Tensor)``.

        Examples
        --------
        >>> from attnkit.interventions.edges import clean_and_corrupted
        >>> from attnkit.interventions.metrics import class_margin
        >>> from attnkit.testing import tiny_model
        >>> runs = clean_and_corrupted(tiny_model("bert-cls"), ["the cat sat"], ["the dog sat"],
        ...                            class_margin())
        >>> [(len(downs), len(ups)) for downs, ups, _ in runs.deltas()]
        [(6, 3), (1, 5), (6, 6), (1, 8), (1, 9)]
        """
        import torch

        g = self.graph
        if self.trace_clean is None or self.trace_corrupted is None:
            for downs in _same_reads(g):
                ups = np.flatnonzero(g.valid[:, downs[0]]).tolist()
                if ups:
                    yield downs, ups, torch.stack([self.ups_corrupted[u] - self.ups_clean[u]
                                                   for u in ups])
            return
        every = list(range(len(g.upstream)))
        norms, out_bias = _linear(self.model, self.ups_clean[0])
        join = _join_points(g)
        runs = [_Unscaled(self.ups_clean, self.trace_clean.sigmas),
                _Unscaled(self.ups_corrupted, self.trace_corrupted.sigmas)]
        diff = None  # one buffer for every point's differences
        for i, downs in enumerate(read_points(g)):  # point i follows norm i
            joining = [u for u in every if join[u] == i]
            with torch.no_grad():  # detached values: carried in place
                for r in runs:
                    r.cross(norms[i], i, joining, out_bias[(i - 1) // 2] if i % 2 else None)
                ups = [u for u in every if g.valid[u, downs[0]]]
                before, after = runs[0].values, runs[1].values
                if diff is None:
                    diff = after.new_empty(after.shape)
                if ups == list(range(len(ups))):  # the components joined so far, in order
                    delta = torch.sub(after[:len(ups)], before[:len(ups)], out=diff[:len(ups)])
                else:
                    delta = torch.sub(after[ups], before[ups], out=diff[:len(ups)])
                delta.mul_(norms[i].scale)  # both runs' terms: the same norm's scale
                if ups and ups[0] == 0 and runs[0].bias is not None:  # the biases go with "embed"
                    delta[0] += runs[1].bias - runs[0].bias
            yield downs, ups, delta

    def first_order(self, read: Any, *, block_bytes: int = 16 << 20) -> np.ndarray:
        """EAP's sum ``Σ (ĉ′_u − ĉ_u) · g_d`` over inputs, positions and width for every edge:
        ``[upstream, downstream]`` float64 (invalid edges 0), with ``read(downs)`` giving the
        gradients of the downstream inputs ``downs`` (one read point's) as ``(downs in the
        order of the rows, [len, N·T·d])``, or None to skip them. In a post-norm encoder the
        terms are not carried through the norms (:class:`_Factored`) unless the norms' scales
        leave float32's range; :meth:`deltas` is the definition either way.

        Parameters
        ----------
        read : callable
            ``read(list of int) -> (list of int, torch.Tensor) or None``.
        block_bytes : int
            The sums over rows (input × position) take this many bytes of the components'
            rows at a time (small buffers, reused: fresh memory costs a page fault per 4 kB).

        Returns
        -------
        numpy.ndarray

        Examples
        --------
        >>> import torch
        >>> from attnkit.interventions.edges import clean_and_corrupted
        >>> from attnkit.interventions.metrics import class_margin
        >>> from attnkit.testing import tiny_model
        >>> runs = clean_and_corrupted(tiny_model("bert-cls"), ["the cat sat"], ["the dog sat"],
        ...                            class_margin())
        >>> size = runs.ups_clean[0].numel()
        >>> runs.first_order(lambda downs: (downs, torch.ones(len(downs), size))).shape
        (9, 15)
        """
        import torch

        from ..runtime.weights import LinearNorm

        g = self.graph
        scores = np.zeros(g.valid.shape)
        post = self.trace_clean is not None and self.trace_corrupted is not None
        fac = None
        if post:
            assert self.trace_clean is not None and self.trace_corrupted is not None
            with torch.no_grad():
                fac = _Factored.of([LinearNorm.of(n) for n in post_norms(self.model)[0]],
                                   [self.trace_corrupted.sigmas, self.trace_clean.sigmas],
                                   [self.ups_corrupted, self.ups_clean], _join_points(g))
            if fac is None:  # the carried terms
                for downs, ups, delta in self.deltas():
                    got = read(downs)
                    if got is not None:
                        downs, grad = got
                        scores[np.ix_(ups, downs)] = (delta.reshape(len(ups), -1) @ grad.T).double().cpu().numpy()
                return scores
            groups = read_points(g)
        else:
            groups = _same_reads(g)
        points: list[tuple[list[int], list[int], Any]] = []
        for downs in groups:
            ups = np.flatnonzero(g.valid[:, downs[0]]).tolist()
            got = read(downs) if ups else None
            points.append((ups, [], None) if got is None else (ups, *got))
        with torch.no_grad():
            if fac is None:
                _delta_scores(self.ups_corrupted, self.ups_clean, points, scores, block_bytes)
            else:
                fac.scores(points, self._post_bias(), scores, block_bytes)
        return scores

    def _post_bias(self) -> list[Any]:
        """A post-norm encoder's biases carried through each run's norms (they belong to the
        token embedding's term, module docstring): ``ĉ′ − ĉ`` of that part at each read
        point, ``[N, T, d]`` (or None where no bias has joined)."""
        assert self.trace_clean is not None and self.trace_corrupted is not None
        like = self.ups_clean[0]
        norms, out_bias = _linear(self.model, like)
        bias: list[Any] = []
        carried: list[Any] = [None, None]
        for i in range(len(norms)):
            before = out_bias[(i - 1) // 2] if i % 2 else None
            for r, trace in enumerate((self.trace_corrupted, self.trace_clean)):
                carried[r] = _bias_across(carried[r], before, norms[i], trace.sigmas[i].to(like.dtype), like)
            bias.append(None if carried[0] is None else carried[0] - carried[1])
        return bias

    @property
    def gap(self) -> float:
        """``M(clean) − M(corrupted)``."""
        return self.m_clean - self.m_corrupted

    def measure(self, sets: Sequence[Sequence[tuple[int, int]]], *, batch_size: int = 32,
                fractional: Any = None) -> np.ndarray:
        """The metric with each edge set patched to the corrupted run (everything else
        clean): float64 ``[len(sets)]``, several sets per forward.

        Parameters
        ----------
        sets : sequence of sequences of (int, int)
            Edge sets (:meth:`EdgeGraph.index`).
        batch_size : int
            Rows (sets × inputs) per forward.
        fractional : torch.Tensor, optional
            ``[len(sets), upstream, downstream]`` masks used instead of ``sets`` (any values).

        Returns
        -------
        numpy.ndarray

        Examples
        --------
        >>> from attnkit.interventions.edges import clean_and_corrupted
        >>> from attnkit.interventions.metrics import loss
        >>> from attnkit.testing import tiny_model
        >>> runs = clean_and_corrupted(tiny_model("gpt2"), ["The cat sat."], ["A cat sat."], loss())
        >>> everything = [(u, d) for u in range(8) for d in range(15) if runs.graph.valid[u, d]]
        >>> v = runs.measure([[], everything])
        >>> bool(abs(v[0] - runs.m_clean) < 1e-4), bool(abs(v[1] - runs.m_corrupted) < 1e-4)
        (True, True)
        """
        total = len(sets) if fractional is None else int(fractional.shape[0])
        out = np.empty(total)
        per = max(1, batch_size // self.clean.size)
        dtype, dev = self.reference.dtype, self.clean.device
        for s, e in hooks.chunks(total, per):
            masks = (self.graph.mask(sets[s:e], dtype, dev) if fractional is None
                     else fractional[s:e].to(dev))
            logits, _ = run(self.model, self.clean, self.graph, copies=e - s, masks=masks,
                            corrupted=self.corrupted_values)
            ctx = hooks.context(self.model, self.clean, self.reference, e - s)
            out[s:e] = hooks.per_copy(self.metric(logits, ctx), e - s)
        return out


def pair_batches(model: Any, clean: Any, corrupted: Any) -> tuple[hooks.Batch, hooks.Batch]:
    """The clean and the corrupted inputs encoded, padded and checked pair by pair (the model
    checked first): what :func:`clean_and_corrupted` reads, whole or a chunk of pairs at a
    time (:meth:`~attnkit.interventions.hooks.Batch.rows`).

    Parameters
    ----------
    model : Model
        A supported model (:func:`check_family`).
    clean, corrupted : sequence
        Matched inputs, the same number of tokens pair by pair.

    Returns
    -------
    tuple of Batch

    Raises
    ------
    InputError
        When the inputs do not align.
    UnsupportedModelError
        As :func:`check_family`.

    Examples
    --------
    >>> from attnkit.interventions.edges import pair_batches
    >>> from attnkit.testing import tiny_model
    >>> bc, bx = pair_batches(tiny_model("gpt2"), ["The cat sat.", "We read."],
    ...                       ["A cat sat.", "We read."])
    >>> bc.lengths, bc.lengths == bx.lengths
    ([7, 3], True)
    """
    check_family(model)
    bc = hooks.batch(model, clean, "clean")
    bx = hooks.batch(model, corrupted, "corrupted")
    hooks.same_shape(bc, bx, ("clean", "corrupted"))
    return bc, bx


def clean_and_corrupted(model: Any, clean: Any, corrupted: Any, m: Metric, *,
                        grad: bool = False, check: bool = True) -> Runs:
    """Run the clean and the corrupted inputs once each and keep what edge methods need.

    Parameters
    ----------
    model : Model
        A supported model (:func:`check_family`).
    clean, corrupted : sequence or Batch
        Matched inputs, the same number of tokens pair by pair (or :func:`pair_batches`'s
        batches, or rows of them).
    m : Metric
        The metric (bound to the model).
    grad : bool
        Run the clean inputs with the leaves that give every downstream input's gradient
        (:func:`patching`'s ``grad``) and keep that run (``Runs.clean_pass``) for one backward.
    check : bool
        Refuse a metric that does not tell the two runs apart (:func:`check_gap`); callers
        that run the pairs a chunk at a time check the mean over every chunk instead.

    Returns
    -------
    Runs

    Raises
    ------
    InputError
        When the inputs do not align, or the metric does not tell them apart.
    UnsupportedModelError
        As :func:`check_family`.

    Examples
    --------
    >>> from attnkit.interventions.edges import clean_and_corrupted
    >>> from attnkit.interventions.metrics import loss
    >>> from attnkit.testing import tiny_model
    >>> runs = clean_and_corrupted(tiny_model("gpt2"), ["The cat sat."], ["A cat sat."], loss())
    >>> len(runs.ups_clean), runs.m_clean != runs.m_corrupted
    (8, True)
    """
    graph = edge_graph(model)
    if isinstance(clean, hooks.Batch) and isinstance(corrupted, hooks.Batch):
        bc, bx = clean, corrupted
        hooks.same_shape(bc, bx, ("clean", "corrupted"))
    else:
        bc, bx = pair_batches(model, clean, corrupted)
    kept, pc = run(model, bc, graph, grad=grad)
    ref = kept.detach()
    out, px = run(model, bx, graph)
    ctx = hooks.context(model, bc, ref)
    m_clean = float(hooks.per_copy(m(ref, ctx), 1)[0])
    m_corr = float(hooks.per_copy(m(out, ctx), 1)[0])
    if check:
        check_gap(m, m_clean, m_corr)
    traces: list[Pass | None] = [None, None]
    if is_post_norm(model):
        traces = [Pass([u.detach() for u in p.ups], sigmas=p.sigmas, streams=p.streams)
                  for p in (pc, px)]
    return Runs(graph, bc, bx, ref, [u.detach() for u in pc.ups], [u.detach() for u in px.ups],
                m_clean, m_corr, m, model, (kept, pc) if grad else None, *traces)
