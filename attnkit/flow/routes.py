"""Information-flow routes (Ferrando & Voita 2024): the contribution graph of one forward.

Notation (one input of ``n`` tokens, width ``d``, ``H`` heads): ``x^l_i`` is the residual
stream entering layer ``l`` at position ``i`` (``x^0`` the embeddings, ``x^L`` what leaves the
last layer). Each layer has two blocks, and each block writes its output ``z_i`` as a sum of
parts:

- the **attention block**: ``z_i = x^l_i + Σ_h Σ_j α^h_ij W_O^h v^h_j + b_O`` (pre-norm), so
  the parts are the residual ``x^l_i`` and one term per (head ``h``, key ``j``);
- the **MLP block**: ``x^{l+1}_i = z_i + MLP(z_i)``, parts the residual ``z_i`` and the MLP.

A normalisation after a block (post-norm encoders, Gemma 2's sandwich norms) is linear once
its row statistics are fixed, so each part goes through it on its own with row ``i``'s
``σ_i``, as :mod:`attnkit.runtime.measures` does for ALTI; the norm's and the projection's
biases belong to no part (they stay in ``z_i``).

The importance of a part ``p`` of ``z`` is its proximity, normalised over the block's parts
(Ferrando & Voita 2024, §2, after ALTI):

    c_p = max(0, ‖z‖₁ - ‖z - p‖₁),     e_p = c_p / Σ_q c_q

Routes are traced back from the prediction: starting at ``(L, position)``, every part with
``e_p > threshold`` becomes an edge down to the node it comes from (a head term to
``(l, j)``, the residual to ``(l, i)``), and the nodes reached are traced in their turn.
Only the rows reached are ever computed: the forward keeps each layer's queries, keys and
row log-sum-exps (lazy capture, :class:`~attnkit.runtime.lazy.LazyAttention`), values and
stream — ``O(L n d)`` — never a full ``n × n`` map.
"""

from __future__ import annotations

from typing import Any

import networkx as nx
import numpy as np

from ..core import validate
from ..core.labels import head_label, mlp_label
from ..errors import CaptureError, InputError
from ..runtime.archs import layout_of, submodule
from ..runtime.capture import LazyRecorder
from ..runtime.lazy import LazyAttention
from ..runtime.weights import LinearNorm, head_weights, layer_modules, stream_spec

#: Elements of one block of ``[rows, keys, d]`` term vectors (16 MiB in float32).
CHUNK_ELEMENTS = 1 << 22


def proximity_shares(parts: Any, whole: Any) -> Any:
    """Importance of each part of a sum (Ferrando & Voita 2024): ``max(0, ‖z‖₁ - ‖z - p‖₁)``,
    normalised over the parts.

    Parameters
    ----------
    parts : array-like
        ``[..., P, d]``: the parts of each sum.
    whole : array-like
        ``[..., d]``: the sums as computed (biases that belong to no part included).

    Returns
    -------
    numpy.ndarray
        Float64 ``[..., P]``: non-negative, summing to 1 over the parts (0 where no part lies
        closer to ``whole`` than the zero vector).

    Raises
    ------
    InputError
        When the shapes do not match.

    Examples
    --------
    ``z = (4, 1)``: ``(4, 0)`` lies at L1 distance 1 from it (proximity ``5 - 1 = 4``),
    ``(0, 1)`` at 4 (proximity 1):

    >>> from attnkit.flow.routes import proximity_shares
    >>> proximity_shares([[4.0, 0.0], [0.0, 1.0]], [4.0, 1.0]).tolist()
    [0.8, 0.2]
    """
    p = np.asarray(parts, dtype=np.float64)
    z = np.asarray(whole, dtype=np.float64)
    if p.ndim < 2 or p.shape[:-2] + p.shape[-1:] != z.shape:
        raise InputError(f"parts must be [..., P, d] with whole [..., d]; got parts {p.shape} "
                         f"and whole {z.shape}.")
    c = np.clip(np.abs(z).sum(-1)[..., None] - np.abs(z[..., None, :] - p).sum(-1), 0, None)
    total = c.sum(-1, keepdims=True)
    return np.where(total > 0, c / np.where(total > 0, total, 1.0), 0.0)


# ------------------------------------------------------------------ the forward
class _Taps:
    """Hooks and a recorder that keep, during one forward, what the blocks are made of:
    per layer the stream entering it, the attention block's output (and a norm's row
    statistics), the MLP block's output, and the value states."""

    def __init__(self, model: Any, n: int):
        self.model, self.n = model, n
        self.arch = layout_of(model)
        self.spec = stream_spec(model)
        self.mods = layer_modules(model)
        self.L = len(self.mods)
        self.x: list[Any] = [None] * (self.L + 1)   # stream entering layer l; [L]: leaving
        self.mid: list[Any] = [None] * self.L       # attention block output z
        self.sig_a: list[Any] = [None] * self.L     # post: σ of x + y; sandwich: σ of y
        self.sig_m: list[Any] = [None] * self.L     # post: σ of h + mlp(h)
        self.mlp_raw: list[Any] = [None] * self.L   # post: h + mlp(h) before the norm
        self.values: list[Any] = []
        self.norm_a: list[LinearNorm | None] = [None] * self.L
        self.norm_m: list[LinearNorm | None] = [None] * self.L
        self.handles: list[Any] = []

    def _rows(self, t: Any) -> Any:
        t = t[0] if isinstance(t, tuple) else t
        t = t.detach()
        return (t[0] if t.dim() == 3 else t)[: self.n].float()

    def __call__(self, call: Any) -> None:
        self.values.append(call.value[0, :, : self.n].detach().float())

    def install(self) -> None:
        place = self.arch.placement
        for m, mod in enumerate(self.mods):
            self.handles.append(mod.register_forward_pre_hook(self._enter(m), with_kwargs=True))
            if place == "pre":
                self.handles.append(submodule(mod, self.arch.out_proj).register_forward_hook(
                    self._out_proj(m)))
            else:
                assert self.arch.norm
                norm = submodule(mod, self.arch.norm)
                self.norm_a[m] = LinearNorm.of(norm)
                self.handles.append(norm.register_forward_hook(self._norm_a(m)))
                if place == "post":
                    assert self.spec.mlp_norm
                    mnorm = submodule(mod, self.spec.mlp_norm)
                    self.norm_m[m] = LinearNorm.of(mnorm)
                    self.handles.append(mnorm.register_forward_hook(self._norm_m(m)))
        self.handles.append(self.mods[-1].register_forward_hook(self._leave))

    def remove(self) -> None:
        for h in self.handles:
            h.remove()

    def _enter(self, m: int) -> Any:
        def hook(module: Any, args: Any, kwargs: Any) -> None:
            x = args[0] if args else kwargs.get("hidden_states")
            if x is None:
                raise CaptureError("A layer was called without its hidden states.")
            self.x[m] = self._rows(x)
        return hook

    def _leave(self, module: Any, args: Any, out: Any) -> None:
        self.x[self.L] = self._rows(out)

    def _out_proj(self, m: int) -> Any:
        def hook(module: Any, args: Any, out: Any) -> None:
            self.mid[m] = self.x[m] + self._rows(out)
        return hook

    def _norm_a(self, m: int) -> Any:
        def hook(module: Any, args: Any, out: Any) -> None:
            u = self._rows(args[0])
            norm = self.norm_a[m]
            assert norm is not None
            self.sig_a[m] = norm.sigma(u.double())
            # post: the norm's output is the block's; sandwich: the stream plus it
            self.mid[m] = self._rows(out) if self.arch.placement == "post" \
                else self.x[m] + self._rows(out)
        return hook

    def _norm_m(self, m: int) -> Any:
        def hook(module: Any, args: Any, out: Any) -> None:
            raw = self._rows(args[0])
            norm = self.norm_m[m]
            assert norm is not None
            self.mlp_raw[m] = raw
            self.sig_m[m] = norm.sigma(raw.double())
        return hook


def _project(norm: LinearNorm, u: Any) -> Any:
    """``scale ⊙ centre(u)`` along the last axis (no ``1/σ``, no bias)."""
    return norm.scale.to(u.dtype).to(u.device) * norm.center(u)


# ------------------------------------------------------------------ one layer's parts
def _mlp_shares(t: _Taps, m: int, rows: Any) -> tuple[Any, Any]:
    """``(residual, mlp)`` importances ``[R]`` of layer ``m``'s MLP block at ``rows``."""
    import torch

    whole = t.x[m + 1][rows].double()
    if t.arch.placement == "post":
        norm = t.norm_m[m]
        assert norm is not None
        s = (1.0 / t.sig_m[m][rows.to(t.sig_m[m].device)]).to(whole.device)[:, None]
        h = t.mid[m][rows].double()
        parts = torch.stack([_project(norm, h) * s,
                             _project(norm, t.mlp_raw[m][rows].double() - h) * s], 1)
    else:
        mid = t.mid[m][rows].double()
        parts = torch.stack([mid, whole - mid], 1)
    e = proximity_shares(parts.cpu().numpy(), whole.cpu().numpy())
    return e[:, 0], e[:, 1]


def _attention_shares(t: _Taps, att: LazyAttention, m: int, rows: np.ndarray,
                      cols: slice) -> tuple[np.ndarray, np.ndarray]:
    """``(residual [R], heads [R, H, K])`` importances of layer ``m``'s attention block at
    ``rows``, over keys ``cols``."""
    import torch

    dev = t.x[m].device
    r_idx = torch.as_tensor(rows, device=dev)
    w = head_weights(t.model, m)
    wo = w.wo.float().to(dev)  # [H, d, k]
    H = wo.shape[0]
    norm = t.norm_a[m]
    if norm is not None:  # post / sandwich: the norm's scale and centring folded into W_O
        c = norm.center(w.wo.transpose(1, 2)).transpose(1, 2) if norm.kind == "layer" \
            else w.wo
        wo = (norm.scale[None, :, None] * c).float().to(dev)
    v = t.values[m]  # [H_kv, n, k]
    v = v.repeat_interleave(H // v.shape[0], dim=0)[:, cols]
    g = torch.bmm(v, wo.transpose(1, 2))  # [H, K, d]: what key j hands on through head h
    z = t.mid[m][r_idx]  # [R, d]
    resid = t.x[m][r_idx]
    s = torch.ones(len(rows), device=dev)
    if norm is not None:
        s = (1.0 / t.sig_a[m][r_idx.to(t.sig_a[m].device)]).float().to(dev)
        if t.arch.placement == "post":
            resid = _project(norm, resid) * s[:, None]
    size = z.abs().sum(-1)  # ‖z‖₁
    c_res = (size - (z - resid).abs().sum(-1)).clamp(min=0)
    K = g.shape[1]
    c_heads = torch.zeros((len(rows), H, K), device=dev)
    step = max(1, CHUNK_ELEMENTS // max(1, K * z.shape[1]))
    for h in range(H):
        a = torch.as_tensor(att.block(m, h, rows, cols), device=dev) * s[:, None]  # [R, K]
        for r0 in range(0, len(rows), step):
            sl = slice(r0, r0 + step)
            terms = a[sl, :, None] * g[h][None]  # [r, K, d]
            dist = (z[sl, None] - terms).abs().sum(-1)
            c = (size[sl, None] - dist).clamp(min=0)
            c_heads[sl, h] = torch.where(a[sl] > 0, c, 0.0)
    total = c_res + c_heads.sum((1, 2))
    safe = torch.where(total > 0, total, 1.0)
    e_res = torch.where(total > 0, c_res / safe, 0.0)
    e_heads = torch.where(total[:, None, None] > 0, c_heads / safe[:, None, None], 0.0)
    return e_res.double().cpu().numpy(), e_heads.double().cpu().numpy()


# ------------------------------------------------------------------ the public function
def flow_routes(model: Any, inputs: Any, *, position: int = -1,
                threshold: float = 0.3) -> nx.DiGraph:
    """Information-flow routes of one prediction (Ferrando & Voita 2024), in one forward.

    For every layer, the importance of each (head, key token) term and of the residual to
    the attention block's output at a position, and of the MLP and the residual to the MLP
    block's output, by their normalised proximity (:func:`proximity_shares`; module
    docstring); parts above ``threshold`` are kept and traced back from ``position`` after
    the last layer. Only the rows reached are computed, from queries, keys, row log-sum-exps
    and values kept by one forward (``O(L n d)``, no ``n × n`` map), so long inputs run as
    lazy attention does.

    Parameters
    ----------
    model : Model
        A model of :func:`attnkit.load` (pre-norm decoders, post-norm encoders, sandwich
        norms).
    inputs : str, Encoding or token ids
        One input.
    position : int
        The prediction's position (0-indexed; negative counts from the end): the route ends
        at node ``(L, position)``.
    threshold : float
        A part's importance must be strictly greater than this to make an edge (the
        contract's 0.3; Ferrando & Voita's figures keep far smaller shares, e.g. 0.04).

    Returns
    -------
    networkx.DiGraph
        Nodes ``(level, position)`` as in :func:`attnkit.attention_graph` (level 0: the
        embeddings; level ``l``: the stream leaving layer ``l``, 1-indexed), with attributes
        ``level``, ``position``, ``token``, and for levels ≥ 1 ``mlp`` (the importance of
        layer ``level``'s MLP in its block there) and ``mlp_kept`` (``mlp > threshold``).
        Edges run *down*, ``(l, i) -> (l - 1, j)``: position ``i`` of level ``l`` reads
        ``j`` of the level below. Attributes: ``heads`` (0-indexed heads of layer ``l - 1``
        whose ``(head, j)`` term is kept, ascending), ``weights`` (their importances),
        ``labels`` (``"L-H"``, 1-indexed), ``residual`` (the residual's importance where
        ``j = i`` and it is kept, else 0), ``weight`` (the sum of the kept importances) and
        ``kind`` (``"head"``, ``"residual"`` or ``"head+residual"``). Graph attributes:
        ``tokens``, ``n_layers``, ``n_heads``, ``position``, ``threshold``, ``source`` (the
        node the routes end at), ``method`` (``"flow_routes"``) and ``mlp_labels``.

    Raises
    ------
    InputError
        For a position outside the input or a threshold outside [0, 1).
    UnsupportedModelError
        For a model whose layout attnkit does not know.

    Examples
    --------
    >>> import attnkit as ak
    >>> from attnkit.testing import tiny_model
    >>> g = ak.flow_routes(tiny_model("llama"), "The cat sat on the mat.", threshold=0.1)
    >>> g.graph["source"] == (2, len(g.graph["tokens"]) - 1), g.graph["method"]
    (True, 'flow_routes')
    >>> all(d["kind"] in ("head", "residual", "head+residual") for *_, d in g.edges(data=True))
    True
    """
    import torch

    from ..runtime.encoding import Encoding

    validate.model(model)
    threshold = validate.number(threshold, "threshold")
    if not 0.0 <= threshold < 1.0:
        raise InputError(f"threshold must lie in [0, 1); got {threshold}. Importances are "
                         "shares of a block's output, at most 1.")
    enc = inputs if isinstance(inputs, Encoding) else model.encode(inputs)
    n = len(enc)
    position = validate.index(position, n, "position")
    taps = _Taps(model, n)
    lazy = LazyRecorder(n, model.n_layers)
    taps.install()
    try:
        model.record([enc], [lazy, taps])
    finally:
        taps.remove()
    L = taps.L
    if len(lazy.layers) != L or any(x is None for x in taps.x) or any(
            z is None for z in taps.mid):
        raise CaptureError(f"The forward ran {len(lazy.layers)} of {L} attention layers through "
                           "attnkit's function; flow routes need all of them.")
    att = LazyAttention(lazy.layers, tokens=enc.tokens, roles=np.array(enc.roles),
                        word_ids=np.array(enc.word_ids), words=enc.words,
                        causal=model.causal)
    H = model.n_heads
    g = nx.DiGraph(tokens=list(enc.tokens), n_layers=L, n_heads=H, position=position,
                   threshold=threshold, source=(L, position), method="flow_routes",
                   mlp_labels=[mlp_label(m) for m in range(L)])
    g.add_node((L, position), level=L, position=position, token=enc.tokens[position])
    active = [position]
    with torch.inference_mode():
        for m in range(L - 1, -1, -1):
            rows = np.array(sorted(active), dtype=np.int64)
            dev_rows = torch.as_tensor(rows, device=taps.x[m].device)
            _, e_mlp = _mlp_shares(taps, m, dev_rows)
            cols = slice(0, int(rows.max()) + 1) if model.causal else slice(0, n)
            e_res, e_heads = _attention_shares(taps, att, m, rows, cols)
            reached: set[int] = set()
            for r, i in enumerate(rows.tolist()):
                node = (m + 1, i)
                g.nodes[node]["mlp"] = float(e_mlp[r])
                g.nodes[node]["mlp_kept"] = bool(e_mlp[r] > threshold)
                keep = e_heads[r] > threshold  # [H, K]
                targets = set(np.nonzero(keep.any(0))[0].tolist())
                if e_res[r] > threshold:
                    targets.add(i)
                for j in sorted(targets):
                    hs = np.nonzero(keep[:, j])[0].tolist() if j < keep.shape[1] else []
                    ws = [float(e_heads[r, h, j]) for h in hs]
                    res = float(e_res[r]) if j == i and e_res[r] > threshold else 0.0
                    kind = "head+residual" if hs and res else ("head" if hs else "residual")
                    below = (m, j)
                    if below not in g:
                        g.add_node(below, level=m, position=j, token=enc.tokens[j])
                    g.add_edge(node, below, heads=hs, weights=ws,
                               labels=[head_label(m, h) for h in hs], residual=res,
                               weight=float(sum(ws) + res), kind=kind)
                    reached.add(j)
            active = sorted(reached)
            if not active:
                break
    return g

