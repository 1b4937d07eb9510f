"""ClusterView widget: heads as points of a 2-D embedding."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import traitlets
from matplotlib.figure import Figure

from .._compat import renamed
from ..core import validate
from ..errors import InputError
from ..plot import attention as plots
from ..core.results import HeadResult
from ._base import SelectsHead
from ._codec import wire


class ClusterView(SelectsHead):
    """A 2-D embedding of heads (e.g. from the head-clustering analysis), one dot per head.

    Hover names the head; a click sets ``selected`` to ``[layer, head]`` (0-indexed).

    Parameters
    ----------
    embedding : HeadResult, ndarray or DataFrame
        An array ``[L*H, 2]`` with rows in layer-major order (row ``l*H + h`` is head
        (l, h); pass ``n_heads``), or a result/DataFrame indexed by ``(layer, head)`` with
        two numeric columns (``x`` and ``y`` when it has more; any subset of heads).
    labels : sequence, Series, dict or str, optional
        None or ``"layer"`` colours by layer; otherwise one behaviour label per head: a
        sequence aligned with the rows, or a Series/dict keyed by ``(layer, head)``.
    n_heads : int, optional
        Heads per layer (needed for an array embedding).
    label_name : str, optional
        Legend title (default "layer" or "label").
    title : str, optional
        Title above the plot.

    Raises
    ------
    InputError
        When the embedding is not two numeric columns per head, or labels do not match it.

    Examples
    --------
    >>> import numpy as np, attnkit as ak
    >>> points = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])  # 2 x 2 heads
    >>> view = ak.ClusterView(points, n_heads=2, labels=["a", "b", "a", "b"])
    >>> view.layers, view.heads, view.categories
    ([0, 0, 1, 1], [0, 1, 0, 1], ['a', 'b'])
    """

    _bundle_name = "cluster"

    points = traitlets.Dict().tag(sync=True)
    layers = traitlets.List(traitlets.Int()).tag(sync=True)
    heads = traitlets.List(traitlets.Int()).tag(sync=True)
    codes = traitlets.List(traitlets.Int()).tag(sync=True)
    categories = traitlets.List(traitlets.Unicode()).tag(sync=True)
    label_name = traitlets.Unicode("layer").tag(sync=True)

    @renamed(positional=("labels",))
    def __init__(
        self,
        embedding: HeadResult | np.ndarray | pd.DataFrame,
        *,
        labels: Sequence | pd.Series | dict | str | None = None,
        n_heads: int | None = None,
        label_name: str | None = None,
        title: str | None = None,
    ) -> None:
        n_heads = None if n_heads is None else validate.size(n_heads, "n_heads")
        if isinstance(embedding, HeadResult):
            embedding = embedding.table[["x", "y"]] if {"x", "y"} <= set(embedding.columns) else embedding.table
        if isinstance(embedding, pd.DataFrame):
            idx = embedding.index
            if not isinstance(idx, pd.MultiIndex) or idx.nlevels != 2:
                raise InputError("an embedding DataFrame must be indexed by (layer, head).")
            numeric = [c for c in embedding.columns if pd.api.types.is_numeric_dtype(embedding[c])]
            if len(numeric) != 2:
                raise InputError(
                    f"an embedding DataFrame needs exactly two numeric columns (x, y); got {numeric}."
                )
            pts = embedding[numeric].to_numpy(dtype=np.float64)
            layers = np.asarray(idx.get_level_values(0), dtype=np.int64)
            heads = np.asarray(idx.get_level_values(1), dtype=np.int64)
        else:
            pts = np.asarray(embedding, dtype=np.float64)
            if pts.ndim != 2 or pts.shape[1] != 2:
                raise InputError(f"the embedding must be [L*H, 2]; got shape {pts.shape}.")
            if not n_heads or pts.shape[0] % n_heads:
                raise InputError(
                    f"pass n_heads= (heads per layer) for an array embedding; {pts.shape[0]} rows "
                    f"must be a whole number of layers × n_heads (rows in layer-major order)."
                )
            layers = np.arange(pts.shape[0]) // n_heads
            heads = np.arange(pts.shape[0]) % n_heads
        if not np.isfinite(pts).all():
            raise InputError("the embedding has NaN or infinite coordinates; drop those heads first.")
        if len(pts) == 0:
            raise InputError("the embedding is empty.")
        L = int(layers.max()) + 1
        H = int(heads.max()) + 1
        keys = list(zip(layers.tolist(), heads.tolist()))
        if len(set(keys)) != len(keys):
            raise InputError("a head appears twice in the embedding.")

        cats: list[str] = []
        codes: list[int] = layers.tolist()
        names: list[str | None] | None = None
        if labels is not None and not (isinstance(labels, str) and labels == "layer"):
            if isinstance(labels, str):
                raise InputError(f"labels must be 'layer' or one label per head, not {labels!r}.")
            if isinstance(labels, (pd.Series, dict)):
                lookup = dict(labels.items())
                names = [None if k not in lookup or pd.isna(lookup[k]) else str(lookup[k]) for k in keys]
            else:
                labels = list(labels)
                if len(labels) != len(keys):
                    raise InputError(f"{len(labels)} labels for {len(keys)} heads; give one per head.")
                names = [None if x is None or (isinstance(x, float) and np.isnan(x)) else str(x) for x in labels]
            cats = sorted({x for x in names if x is not None})
            where = {c: i for i, c in enumerate(cats)}
            codes = [where[x] if x is not None else -1 for x in names]
            label_name = label_name or (labels.name if isinstance(labels, pd.Series) and labels.name else "label")
        self._points = pts
        self._names = names
        super().__init__(
            n_layers=L, n_heads=H, points=wire(pts, "float32"), layers=layers.tolist(),
            heads=heads.tolist(), codes=codes, categories=cats,
            label_name=str(label_name or "layer"), title=title or "Heads in 2-D",
        )

    @traitlets.validate("selected")
    def _check_selected(self, proposal: dict) -> list[int]:
        value = super()._check_selected(proposal)
        if value and (value[0], value[1]) not in set(zip(self.layers, self.heads)):
            raise InputError(f"head {value[0]}-{value[1]} (0-indexed) is not in this embedding.")
        return value

    def figure(self, *, preview: bool = False) -> Figure:
        """The matplotlib figure of the scatter of heads (what reports and saved files show).

        Parameters
        ----------
        preview : bool
            Accepted for every widget; the scatter has no detail to trade.

        Returns
        -------
        matplotlib.figure.Figure
            Not attached to pyplot (nothing is shown or kept open).

        Examples
        --------
        >>> import numpy as np, attnkit as ak
        >>> view = ak.ClusterView(np.eye(4)[:, :2], n_heads=2)
        >>> len(view.figure().axes[0].collections) > 0
        True
        """
        labels = None
        if self._names is not None:
            labels = [x if x is not None else "(none)" for x in self._names]
        return plots.plot_cluster_scatter(
            self._points, heads=list(zip(self.layers, self.heads)), labels=labels,
            label_name=self.label_name, n_layers=self.n_layers, title=self.title,
        )

    def _alt_text(self) -> str:
        by = f"coloured by {self.label_name}" + (f" ({', '.join(self.categories)})" if self.categories else "")
        return f"{self.title}: {len(self.layers)} heads in 2-D, {by}."
