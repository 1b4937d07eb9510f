"""CrossView: cross-attention of an encoder–decoder as links between two columns of tokens.

The target (decoder) tokens stand in the left column, the source (encoder) tokens in the
right one, and each head's attention from a target token to a source token is a line whose
opacity is the weight (the picture bertviz draws for one layer). Hovering a token keeps only
its links; clicking one sets ``clicked`` (``[side, position]``) for Python to follow.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import traitlets
from matplotlib.figure import Figure

from ..core.cross import CrossAttention, Seq2SeqAttention
from ..core import validate
from ..errors import InputError
from ._base import AttnkitWidget, PicksLayerHead
from ._codec import f16

class CrossView(PicksLayerHead, AttnkitWidget):
    """One layer of cross-attention as links from target tokens (left) to source tokens
    (right), a colour per head.

    Parameters
    ----------
    attentions : CrossAttention or Seq2SeqAttention
        The cross-attention of one pair (``.cross`` is taken from a Seq2SeqAttention).
    layer : int
        0-indexed decoder layer shown first (a stepper changes it).
    head : int, optional
        0-indexed head to show alone; ``None`` shows every head of the layer.
    min_weight : float
        Links of weight at most this are not drawn (the full weights still travel).

    Raises
    ------
    InputError
        For attention that is not cross-attention, a layer or head outside it, or a
        ``min_weight`` outside [0, 1).

    Notes
    -----
    The weights of the shown layer travel as float16 ``[head, target, source]`` bytes; tokens
    as text. Keyboard: Up/Down move along a column, Left/Right switch columns, Enter clicks.
    ``clicked`` is ``[side, position]`` (side 0: target, 1: source) or ``[]``; :meth:`links`
    lists a token's links.

    Examples
    --------
    >>> import attnkit as ak
    >>> from attnkit.testing import tiny_seq2seq
    >>> s2s = tiny_seq2seq("bart").attend("The cat sat.", "A cat.")
    >>> view = ak.CrossView(s2s, layer=1)
    >>> view.weights["dtype"], view.weights["shape"] == [2, len(s2s.decoder), len(s2s.encoder)]
    ('float16', True)
    >>> view.clicked = [0, 1]  # what a click on the second target token sends
    >>> len(view.links()) == 2 * len(s2s.encoder)  # 2 heads x every source token
    True
    """

    _bundle_name = "crossview"

    target_tokens = traitlets.List(traitlets.Unicode()).tag(sync=True)
    source_tokens = traitlets.List(traitlets.Unicode()).tag(sync=True)
    min_weight = traitlets.Float(0.0).tag(sync=True)
    weights = traitlets.Dict().tag(sync=True)
    clicked = traitlets.List(traitlets.Int(), default_value=[], maxlen=2).tag(sync=True)

    def __init__(self, attentions: Any, *, layer: int = 0, head: int | None = None,
                 min_weight: float = 0.0) -> None:
        cross = attentions.cross if isinstance(attentions, Seq2SeqAttention) else attentions
        if not isinstance(cross, CrossAttention):
            raise InputError(f"CrossView takes cross-attention (Seq2SeqModel.attend(source, "
                             f"target) or its .cross); got {type(attentions).__name__}.")
        if not 0.0 <= float(min_weight) < 1.0:
            raise InputError(f"min_weight must lie in [0, 1); got {min_weight}.")
        L, H = cross.n_layers, cross.n_heads
        layer = validate.index(layer, L, "layer")
        h = None if head is None else validate.index(head, H, "head")
        self._cross = cross
        super().__init__(target_tokens=list(cross.row_tokens), source_tokens=list(cross.col_tokens),
                         n_layers=L, n_heads=H, min_weight=float(min_weight),
                         title=f"{cross.model + ': ' if cross.model else ''}cross-attention")
        self.head = -1 if h is None else h
        self.layer = layer
        self._refresh()
        self.observe(lambda _change: self._refresh(), names=["layer"])

    def links(self) -> Any:
        """The links of the clicked token in the shown layer, one row per (head, token) of
        the other column, strongest first.

        Returns
        -------
        pandas.DataFrame
            Columns ``head``, ``target``, ``source``, ``weight`` (empty when nothing is clicked).

        Examples
        --------
        >>> import attnkit as ak
        >>> from attnkit.testing import tiny_seq2seq
        >>> view = ak.CrossView(tiny_seq2seq("t5").attend("The cat sat.", "A cat."), head=0)
        >>> view.clicked = [1, 0]
        >>> sorted(view.links().columns), len(view.links()) == len(view.target_tokens)
        (['head', 'source', 'target', 'weight'], True)
        """
        import pandas as pd

        columns = ["head", "target", "source", "weight"]
        if not self.clicked:
            return pd.DataFrame(columns=columns)
        side, pos = self.clicked
        maps = self._cross.maps[self.layer]
        heads = range(self.n_heads) if self.head < 0 else [self.head]
        rows = []
        for h in heads:
            if side == 0:
                rows += [(h, self.target_tokens[pos], self.source_tokens[s], float(maps[h, pos, s]))
                         for s in range(maps.shape[2])]
            else:
                rows += [(h, self.target_tokens[t], self.source_tokens[pos], float(maps[h, t, pos]))
                         for t in range(maps.shape[1])]
        table = pd.DataFrame(rows, columns=columns)
        return table.sort_values("weight", ascending=False, kind="stable").reset_index(drop=True)

    def figure(self, *, preview: bool = False) -> Figure:
        """Both columns of tokens and the shown heads' links drawn with matplotlib, for
        reports, notebooks without a kernel and :meth:`save`.

        Parameters
        ----------
        preview : bool
            Narrower, for the PNG a notebook embeds.

        Returns
        -------
        matplotlib.figure.Figure
            A figure pyplot does not hold.

        Examples
        --------
        >>> import attnkit as ak
        >>> from attnkit.testing import tiny_seq2seq
        >>> view = ak.CrossView(tiny_seq2seq("t5").attend("The cat sat.", "A cat."))
        >>> len(view.figure().axes[0].texts) == len(view.target_tokens) + len(view.source_tokens)
        True
        """
        import matplotlib as mpl

        from ..plot.common import display_token

        t, s = len(self.target_tokens), len(self.source_tokens)
        rows = max(t, s)
        fig = Figure(figsize=(4.0 if preview else 5.0, max(2.0, 0.22 * rows + 0.8)))
        ax = fig.add_subplot(1, 1, 1)
        maps = self._cross.maps[self.layer]
        heads = range(self.n_heads) if self.head < 0 else [self.head]
        colours = mpl.colormaps["tab10"]
        for h in heads:
            for i, j in zip(*np.nonzero(maps[h] > max(self.min_weight, 0.02))):
                ax.plot([0.3, 0.7], [i, j], color=colours(h % 10), alpha=float(min(1.0, maps[h, i, j])),
                        linewidth=1.5)
        for i, tok in enumerate(self.target_tokens):
            ax.text(0.28, i, display_token(tok), ha="right", va="center", fontsize=8)
        for j, tok in enumerate(self.source_tokens):
            ax.text(0.72, j, display_token(tok), ha="left", va="center", fontsize=8)
        ax.set_xlim(0, 1)
        ax.set_ylim(rows - 0.5, -0.5)
        ax.axis("off")
        which = "all heads" if self.head < 0 else f"head {self.head + 1}"
        ax.set_title(f"{self.title}, layer {self.layer + 1}, {which}", loc="left", fontsize=9)
        return fig

    def _alt_text(self) -> str:
        return (f"{self.title}, layer {self.layer + 1}: from {' '.join(self.target_tokens[:30])} "
                f"to {' '.join(self.source_tokens[:30])}")

    @traitlets.validate("clicked")
    def _check_clicked(self, proposal: dict[str, Any]) -> list[int]:
        value = [int(v) for v in proposal["value"]]
        if value:
            n = (len(self.target_tokens), len(self.source_tokens))
            if len(value) != 2 or value[0] not in (0, 1) or not 0 <= value[1] < n[value[0]]:
                raise InputError(f"clicked must be [side (0 target, 1 source), position] or []; "
                                 f"got {value!r}.")
        return value

    def _refresh(self) -> None:
        self.weights = f16(self._cross.maps[self.layer])
        self._invalidate_static()
