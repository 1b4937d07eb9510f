"""ScoreView: why one head attends from one query token, key by key.

For one query row of a :func:`~attnkit.score_attribution` result, each key's pre-softmax score
is a stacked bar of its largest (query component, key component) terms plus one ``rest``
segment; a toggle groups components by layer (a layer's heads summed); clicking (or Enter on)
a segment whose component is a head sets ``clicked`` to that head, which a linked
:class:`~attnkit.Heatmap` shows; ``d`` (or the button) switches to the per-dimension terms
``scaling · q_x k_x`` of the selected (query, key) pair.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import traitlets
from matplotlib.figure import Figure

from ..core.labels import head_label
from ..core import validate
from ..errors import InputError
from ..core.results import Result
from ._base import AttnkitWidget, ShowsHead, WholeNumber
from ._codec import wire

class ScoreView(AttnkitWidget):
    """Each key's score for one head and one query token as a stacked bar of its largest
    (query component, key component) contributions.

    Segments are coloured by pair, the ``rest`` segment grey; the bar's tick marks the score
    (the segments add up to it). Keyboard: Up/Down pick a key, Left/Right a segment, Enter
    follows a head segment (``clicked``), ``g`` groups by layer, ``d`` shows the selected pair
    per dimension. Numbers travel as float32 bytes; tokens and names as text.

    Parameters
    ----------
    data : Result
        A :func:`~attnkit.score_attribution` result (not aggregated).
    query : int, optional
        Which query row (a token position) to show; default the last one in ``data``.
    top : int
        Segments per bar besides ``rest``.
    title : str, optional
        Title (default "Why L-H attends from <token>").

    Raises
    ------
    InputError
        When ``data`` is not a per-pair score attribution, or ``query`` is not in it.

    Examples
    --------
    >>> import attnkit as ak
    >>> from attnkit.testing import tiny_model
    >>> r = ak.score_attribution(tiny_model("llama"), "The cat sat.", layer=1, head=0, queries=[4])
    >>> view = ak.ScoreView(r)
    >>> view.query, len(view.key_positions), view.n_segments
    (4, 5, 7)
    """

    _bundle_name = "score"

    query = WholeNumber(0).tag(sync=True)
    layer = WholeNumber(0).tag(sync=True)
    head = WholeNumber(0).tag(sync=True)
    tokens = traitlets.List(traitlets.Unicode()).tag(sync=True)
    components = traitlets.List(traitlets.Unicode()).tag(sync=True)
    key_positions = traitlets.List(traitlets.Int()).tag(sync=True)
    n_segments = traitlets.Int(0).tag(sync=True)
    scores = traitlets.Dict().tag(sync=True)
    seg_query = traitlets.Dict().tag(sync=True)
    seg_key = traitlets.Dict().tag(sync=True)
    seg_value = traitlets.Dict().tag(sync=True)
    dims = traitlets.Dict().tag(sync=True)
    note = traitlets.Unicode("").tag(sync=True)
    selected_key = traitlets.Int(-1).tag(sync=True)
    clicked = traitlets.List(traitlets.Int(), default_value=[], maxlen=2).tag(sync=True)

    def __init__(self, data: Result, *, query: int | None = None, top: int = 6,
                 title: str | None = None) -> None:
        super().__init__(**self._read(data, query, top, title))

    def update(self, data: Result, *, query: int | None = None, top: int = 6,
               title: str | None = None) -> None:
        """Show another result in this view (what a linked view calls when its selection
        changes), as a new ``ScoreView(data, ...)`` would; the key selection is cleared.

        Parameters
        ----------
        data : Result
            A per-pair result of :func:`attnkit.score_attribution` (not aggregated).
        query : int, optional
            The query position shown (default: the result's last).
        top : int
            Pairs shown per key; the rest are summed into ``rest``.
        title : str, optional
            The title (default: the head and the query token).

        Returns
        -------
        None

        Raises
        ------
        InputError
            As the constructor.

        Examples
        --------
        >>> import attnkit as ak
        >>> from attnkit.testing import tiny_model
        >>> model = tiny_model("llama")
        >>> view = ak.ScoreView(ak.score_attribution(model, "The cat sat.", layer=1, head=0, queries=[4]))
        >>> view.update(ak.score_attribution(model, "The cat sat.", layer=0, head=1, queries=[3]))
        >>> view.layer, view.head, view.query
        (0, 1, 3)
        """
        traits = self._read(data, query, top, title)
        with self.hold_sync():
            for name, value in traits.items():
                setattr(self, name, value)
            self.selected_key = -1

    def _read(self, data: Result, query: int | None, top: int, title: str | None) -> dict:
        """The synced traits showing ``data`` (and the frame and segments kept for figures)."""
        top = validate.size(top, "top")
        query = None if query is None else validate.integer(query, "query")
        meta = getattr(data, "meta", {})
        if not isinstance(data, Result) or "scores" not in meta or meta.get("aggregate"):
            raise InputError("ScoreView takes a per-pair result of ak.score_attribution "
                             "(not aggregated).")
        if meta.get("components") == "dims":
            raise InputError("ScoreView shows component pairs; pass a result with "
                             "components='heads' or 'layers' (it shows dimensions itself).")
        t = data.table
        queries = sorted(set(t["query"].tolist()))
        q = queries[-1] if query is None else int(query)
        if q not in queries:
            raise InputError(f"query {q} is not in this result; its queries: {queries[:20]}.")
        names = list(dict.fromkeys(list(meta["query_components"]) + list(meta["key_components"])
                                   + ["rest"]))
        rows = t[t["query"] == q]
        keys = sorted(set(rows["key"].tolist()))
        kidx = {k: i for i, k in enumerate(keys)}
        n_seg = top + 1
        sq = np.full((len(keys), n_seg), -1, dtype=np.int32)
        sk = np.full((len(keys), n_seg), -1, dtype=np.int32)
        sv = np.zeros((len(keys), n_seg), dtype=np.float32)
        where = {n: i for i, n in enumerate(names)}
        for key, g in rows.groupby("key", sort=True):
            a = g["query_component"].astype(str).to_numpy()
            b = g["key_component"].astype(str).to_numpy()
            v = g["contribution"].to_numpy(dtype=np.float64)
            is_rest = (a == "rest") | (b == "rest")
            ranked = np.argsort(-np.abs(np.where(is_rest, 0, v)), kind="stable")
            order = [int(i) for i in ranked if not is_rest[i]]
            keep, drop = order[:top], order[top:]
            rest = float(v[is_rest].sum() + v[drop].sum())
            i = kidx[int(key)]
            for s, j in enumerate(keep):
                sq[i, s], sk[i, s], sv[i, s] = where[a[j]], where[b[j]], v[j]
            sq[i, top], sk[i, top], sv[i, top] = where["rest"], where["rest"], rest
        sc = meta["scores"]
        mine = sc[sc["query"] == q].set_index("key")["score"]
        score = np.array([mine[k] for k in keys], dtype=np.float32)
        dims = meta.get("dims")
        dim_rows = np.zeros((0, 0), dtype=np.float32)
        if dims is not None:
            pos = {(int(a), int(b)): i for i, (a, b) in enumerate(zip(sc["query"], sc["key"]))}
            dim_rows = np.stack([dims[pos[(q, k)]] for k in keys]).astype(np.float32)
        tokens = list(meta.get("tokens", []))
        self._frame = pd.DataFrame({"key": keys, "score": score})
        self._segments = (sq, sk, sv)
        self._names = names
        layer, head = int(meta["layer"]), int(meta["head"])
        label = tokens[q] if q < len(tokens) else str(q)
        return dict(
            query=q, layer=layer, head=head, tokens=tokens, components=names, key_positions=keys,
            n_segments=n_seg, scores=wire(score, "float32"), seg_query=wire(sq, "int32"),
            seg_key=wire(sk, "int32"), seg_value=wire(sv, "float32"),
            dims=wire(dim_rows, "float32"), note=str(meta.get("attributed", "")),
            title=title or f"Why head {head_label(layer, head)} attends from {label!r} ({q})",
        )

    def link(self, other: ShowsHead) -> ShowsHead:
        """Make ``other`` (a Heatmap) show the head of each head component clicked here.

        Parameters
        ----------
        other : Heatmap
            A view of the same model's attention.

        Returns
        -------
        Heatmap
            ``other``, so ``view.link(ak.Heatmap(att))`` can be displayed directly.

        Raises
        ------
        InputError
            For something that cannot show a head.

        Examples
        --------
        >>> import attnkit as ak
        >>> from attnkit.testing import tiny_model
        >>> model = tiny_model("llama")
        >>> r = ak.score_attribution(model, "The cat sat.", layer=1, head=0, queries=[4])
        >>> hm = ak.ScoreView(r).link(ak.Heatmap(model.attend("The cat sat.")))
        >>> type(hm).__name__
        'Heatmap'
        """
        if not isinstance(other, ShowsHead):
            raise InputError(f"link() takes a Heatmap; got {type(other).__name__}.")

        def follow(change: dict) -> None:
            if change["new"]:
                other.show(*change["new"])

        self.observe(follow, names="clicked")
        return other

    def figure(self, *, preview: bool = False) -> Figure:
        """Stacked horizontal bars, one per key (what reports and saved files show).

        Parameters
        ----------
        preview : bool
            At most 40 keys (the largest scores) instead of all.

        Returns
        -------
        matplotlib.figure.Figure

        Examples
        --------
        >>> import attnkit as ak
        >>> from attnkit.testing import tiny_model
        >>> r = ak.score_attribution(tiny_model("llama"), "The cat sat.", layer=1, head=0, queries=[4])
        >>> len(ak.ScoreView(r).figure().axes)
        1
        """
        sq, sk, sv = self._segments
        rows = np.arange(len(self.key_positions))
        if preview and len(rows) > 40:
            rows = np.sort(np.argsort(-self._frame["score"].to_numpy())[:40])
        fig = Figure(figsize=(8, 1.2 + 0.28 * len(rows)))
        ax = fig.add_subplot(1, 1, 1)
        pairs: dict[tuple[int, int], int] = {}
        cmap = _palette()
        handles: dict[str, Any] = {}
        for y, i in enumerate(rows):
            pos = neg = 0.0
            for s in range(sv.shape[1]):
                v = float(sv[i, s])
                if v == 0:
                    continue
                pair = (int(sq[i, s]), int(sk[i, s]))
                rest = self._names[pair[0]] == "rest"
                color = "#bbbbbb" if rest else cmap[pairs.setdefault(pair, len(pairs)) % len(cmap)]
                left = pos if v > 0 else neg + v
                bar = ax.barh(y, abs(v), left=left, color=color, height=0.7)
                label = "rest" if rest else f"{self._names[pair[0]]} × {self._names[pair[1]]}"
                handles.setdefault(label, bar)
                if v > 0:
                    pos += v
                else:
                    neg += v
            ax.plot([self._frame["score"].iloc[i]] * 2, [y - 0.4, y + 0.4], color="black", lw=1)
        labels = [f"{self.tokens[k] if k < len(self.tokens) else k} ({k})"
                  for k in np.asarray(self.key_positions)[rows]]
        ax.set_yticks(range(len(rows)), labels, fontsize=8)
        ax.invert_yaxis()
        ax.axvline(0, color="#888888", lw=0.5)
        ax.set_xlabel("contribution to the pre-softmax score (query component × key component)")
        ax.set_title(self.title, loc="left", fontsize=10)
        top = list(handles.items())[:10]
        ax.legend([h for _, h in top], [n for n, _ in top], fontsize=7, loc="lower right")
        fig.tight_layout()
        return fig

    def _alt_text(self) -> str:
        sq, sk, sv = self._segments
        i = int(np.argmax(self._frame["score"].to_numpy()))
        s = int(np.argmax(np.abs(sv[i, :-1]))) if sv.shape[1] > 1 else 0
        return (f"{self.title}: {len(self.key_positions)} keys; highest score at key {self.key_positions[i]}, "
                f"largest term {self._names[sq[i, s]]} × {self._names[sk[i, s]]}.")


def _palette() -> list[str]:
    return ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1",
            "#ff9da7", "#9c755f", "#86bcb6", "#d37295", "#a0cbe8"]
