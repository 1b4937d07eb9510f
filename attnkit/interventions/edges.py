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

Families: the pre-norm decoders whose queries, keys and values come from one stream read
per head — GPT-2, Llama, Qwen2, Mistral, gpt-oss, with or without grouped-query attention (a
shared key/value head reads one stream of its own, ``"L-kvG.k"``, whatever its query heads
read). Post-norm encoders
(BERT, RoBERTa, DistilBERT: the stream is renormalised after every block, so it is not a sum
of components), GPT-NeoX (parallel attention and MLP), Gemma 2 (normalised attention
output), encoder–decoders and vision models are refused with
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
from .metrics import Metric


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


def check_family(model: Any) -> None:
    """Refuse a model whose edges attnkit cannot patch exactly (see the module docstring).

    Parameters
    ----------
    model : Model
        The model.

    Raises
    ------
    UnsupportedModelError
        For any family but the pre-norm decoders listed in the module docstring.

    Examples
    --------
    >>> from attnkit.interventions.edges import check_family
    >>> from attnkit.testing import tiny_model
    >>> check_family(tiny_model("gpt2"))
    >>> check_family(tiny_model("bert"))
    Traceback (most recent call last):
    ...
    attnkit.errors.UnsupportedModelError: model: edge patching needs a pre-norm decoder ...
    """
    hooks.sites(model)
    arch = arch_of(model)
    stream, layout = arch.stream, arch.layout
    ok = (layout is not None and stream is not None and layout.placement == "pre"
          and stream.qkv in ("split", "gpt2") and stream.attn_norm and stream.mlp_in_norm
          and stream.final_norm and getattr(model, "family", "text") == "text")
    if not ok:
        raise UnsupportedModelError(
            f"model: edge patching needs a pre-norm decoder whose stream is the sum of its "
            f"components (GPT-2, Llama, Qwen2, Mistral, gpt-oss); {getattr(model, 'name', '?')} "
            f"({getattr(model, 'model_type', '?')}) "
            + ("renormalises the stream after every block (post-norm), so no edge carries a "
               "fixed part of it." if layout is not None and layout.placement == "post" else
               "is not one of them (parallel attention and MLP, a normalised attention output, "
               "or no decomposition)."))


def edge_graph(model: Any) -> EdgeGraph:
    """The :class:`EdgeGraph` of ``model``.

    Parameters
    ----------
    model : Model
        A pre-norm decoder (see the module docstring).

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
    the zero leaf tensors added to the downstream inputs (``eps``: ``(downstream indices,
    [K, N, T, d])`` per read), whose gradients are the metric's gradients with respect to
    those inputs."""

    ups: list[Any]
    eps: list[tuple[list[int], Any]] = field(default_factory=list)


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
    corrupted : list of torch.Tensor, optional
        ``u′``: the upstream values of the corrupted run, ``[B, T, d]`` each (needed with
        ``masks``).
    grad : bool
        Add a zero leaf tensor to every downstream input (:class:`Pass` ``eps``).
    embed : torch.Tensor, optional
        ``[N, T, d]``: replaces the token embeddings' output (integrated gradients).

    Yields
    ------
    Pass

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
    separate = masks is not None or grad

    def rows(t: Any, n: int) -> Any:
        return t.expand(n, *t.shape[1:]) if t.shape[0] == 1 and n != 1 else t

    def split(x: Any, downs: list[int]) -> Any:
        """``[K, N, T, d]``: the stream of each downstream input in ``downs``."""
        xs = x.unsqueeze(0).expand(len(downs), *x.shape)
        if masks is not None:
            ups = [u for u in range(n_up) if graph.valid[u, downs].any()]
            N = x.shape[0]
            D = torch.stack([(state.ups[u].reshape(copies, N // copies, *x.shape[1:])
                              - corrupted[u].to(x.dtype)[None]) for u in ups])  # [U, R, B, T, d]
            m = masks[:, ups][:, :, downs].to(x.dtype)  # [R, U, K]
            delta = torch.einsum("urbtd,ruk->krbtd", D, m).reshape(len(downs), *x.shape)
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

    def attn_norm_pre(layer: int) -> Any:
        def hook(module: Any, args: Any) -> None:
            x = args[0]
            if layer == 0:
                rest = sum((rows(other_embeds[n], x.shape[0]) for n in embed_names if n != "embed"),
                           torch.zeros_like(x))
                for n in embed_names:
                    state.ups[up_of[n]] = x - rest if n == "embed" else rows(other_embeds[n], x.shape[0])
            if not separate:  # every input reads the stream itself: the model's own forward
                return
            xs = split(x, heads_downs(layer))  # [H + 2G, N, T, d]: via-major
            normed = module.forward(xs)
            stash[("normed", layer)] = normed.split([H, G, G])
        return hook

    def proj_hook(layer: int, via: str | None) -> Any:
        def hook(module: Any, args: Any, out: Any) -> Any:
            if not separate:
                return None
            normed = stash.pop(("normed", layer)) if via in (None, "v") else stash[("normed", layer)]
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

    def out_proj_pre(layer: int) -> Any:
        def hook(module: Any, args: Any) -> None:
            z = args[0]
            zs = z.reshape(*z.shape[:-1], H, dh)
            w = module.weight
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
            if not separate:
                return None
            xs = split(x, [down_of[f"{mlp_label(layer)}.in"]])
            return (xs[0], *args[1:])
        return hook

    def layer_out(layer: int) -> Any:
        def hook(module: Any, args: Any, out: Any) -> None:
            h = out[0] if isinstance(out, tuple) else out
            state.ups[up_of[mlp_label(layer)]] = h - stash.pop(("mid", layer))
        return hook

    def final_pre(module: Any, args: Any) -> Any:
        if not separate:
            return None
        xs = split(args[0], [down_of["logits"]])
        return (xs[0], *args[1:])

    try:
        for name, path in stream.embeds:
            if name != "embed":
                handles.append(submodule(base, path).register_forward_hook(embed_hook(name)))
        if embed is not None:
            handles.append(base.get_input_embeddings().register_forward_hook(token_hook))
        for layer, mod in enumerate(site.layers):
            assert stream.mlp_in_norm is not None
            handles.append(submodule(mod, stream.attn_norm or "").register_forward_pre_hook(
                attn_norm_pre(layer)))
            if stream.qkv == "gpt2":
                handles.append(submodule(mod, stream.q).register_forward_hook(proj_hook(layer, None)))
            else:
                for via, path in zip("qkv", (stream.q, stream.k, stream.v)):
                    handles.append(submodule(mod, path).register_forward_hook(proj_hook(layer, via)))
            handles.append(site.out_proj[layer].register_forward_pre_hook(out_proj_pre(layer)))
            handles.append(submodule(mod, stream.mlp_in_norm).register_forward_pre_hook(
                mlp_norm_pre(layer)))
            handles.append(mod.register_forward_hook(layer_out(layer)))
        handles.append(submodule(base, stream.final_norm or "").register_forward_pre_hook(final_pre))
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
                            corrupted=self.ups_corrupted)
            ctx = hooks.context(self.model, self.clean, self.reference, e - s)
            out[s:e] = hooks.per_copy(self.metric(logits, ctx), e - s)
        return out


def clean_and_corrupted(model: Any, clean: Any, corrupted: Any, m: Metric, *,
                        grad: bool = False) -> Runs:
    """Run the clean and the corrupted inputs once each and keep what edge methods need.

    Parameters
    ----------
    model : Model
        A supported model (:func:`check_family`).
    clean, corrupted : sequence
        Matched inputs, the same number of tokens pair by pair.
    m : Metric
        The metric (bound to the model).
    grad : bool
        Run the clean inputs with every downstream input's gradient leaf and keep that run
        (``Runs.clean_pass``) for one backward.

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
    bc = hooks.batch(model, clean, "clean")
    bx = hooks.batch(model, corrupted, "corrupted")
    hooks.same_shape(bc, bx, ("clean", "corrupted"))
    kept, pc = run(model, bc, graph, grad=grad)
    ref = kept.detach()
    out, px = run(model, bx, graph)
    ctx = hooks.context(model, bc, ref)
    m_clean = float(hooks.per_copy(m(ref, ctx), 1)[0])
    m_corr = float(hooks.per_copy(m(out, ctx), 1)[0])
    gap = m_clean - m_corr
    if not np.isfinite(gap) or abs(gap) <= 1e-6 * max(abs(m_clean), abs(m_corr), 1e-12):
        raise InputError(
            f"corrupted: the metric {m.name!r} is the same on the clean and corrupted inputs "
            f"({m_clean:.6g} and {m_corr:.6g}), so no edge can change it; corrupt what the "
            "metric depends on, or choose another metric.")
    return Runs(graph, bc, bx, ref, [u.detach() for u in pc.ups], [u.detach() for u in px.ups],
                m_clean, m_corr, m, model, (kept, pc) if grad else None)
