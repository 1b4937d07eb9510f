"""CheckpointScrubber: scrub through training and watch heads take their roles."""

from __future__ import annotations

from typing import Any

import numpy as np
import traitlets
from matplotlib.figure import Figure

from ..errors import InputError
from ..plot import attention as plots
from ..core.labels import head_label
from ._base import SelectsHead
from ._codec import f16, wire


class CheckpointScrubber(SelectsHead):
    """A step slider over a run's checkpoints, with the loss curve and the in-context score,
    a layer × head map of one per-head score at the chosen step, and the selected head's
    attention on the first input at that step.

    The slider, the ◀ ▶ buttons, the arrow keys (on the slider) and Home/End move through
    the checkpoints; Play steps through them; the arrow keys on the head map move the
    selected head. Every step's scores travel with the widget (float32 ``[step, layer,
    head]``) and, where the result kept them, the first input's maps (float16): the view never
    asks the kernel for anything. The static PNG shows the chosen step.

    Parameters
    ----------
    data : SeriesResult
        From :func:`attnkit.checkpoint_scores` (``maps=True`` adds the heatmap).
    value : str, optional
        The per-head column the map shows (default ``data.meta["value"]``).
    step : int, optional
        The step shown first (default the last).
    title : str, optional
        Title (default "<value> across training").

    Raises
    ------
    InputError
        When ``data`` is not a result of :func:`attnkit.checkpoint_scores`, ``value`` is not
        one of its columns, or ``step`` is not one of its steps.

    Examples
    --------
    >>> import tempfile, attnkit as ak
    >>> from attnkit.toys.induction import train_induction_model
    >>> with tempfile.TemporaryDirectory() as d:
    ...     final = train_induction_model(vocab_size=16, hidden=16, start_length=8,
    ...                                   max_length=8, steps=2, checkpoint_every=1, out=d,
    ...                                   progress=False)
    ...     r = ak.checkpoint_scores(ak.checkpoints(d), ak.induction_inputs(final, 2, 8),
    ...                              early=2, late=12, maps=True, progress=False)
    >>> view = ak.CheckpointScrubber(r, step=1)
    >>> view.steps, view.step, view.grid().shape
    ([0, 1, 2], 1, (2, 2))
    """

    _bundle_name = "scrubber"

    steps = traitlets.List(traitlets.Int()).tag(sync=True)
    index = traitlets.Int(0).tag(sync=True)
    playing = traitlets.Bool(False).tag(sync=True)
    values = traitlets.Dict().tag(sync=True)
    value_name = traitlets.Unicode("").tag(sync=True)
    vmax = traitlets.Float(1.0).tag(sync=True)
    loss = traitlets.Dict().tag(sync=True)
    loss_name = traitlets.Unicode("").tag(sync=True)
    icl = traitlets.Dict().tag(sync=True)
    maps = traitlets.Dict().tag(sync=True)
    tokens = traitlets.List(traitlets.Unicode()).tag(sync=True)

    def __init__(self, data: Any, *, value: str | None = None, step: int | None = None,
                 title: str | None = None) -> None:
        table = getattr(data, "table", None)
        per_step = getattr(data, "steps", None)
        if table is None or per_step is None or list(table.index.names) != ["step", "layer", "head"]:
            raise InputError("CheckpointScrubber shows a result of attnkit.checkpoint_scores "
                             f"(a table indexed by step, layer, head); got {type(data).__name__}.")
        value = value or data.meta.get("value") or str(table.columns[0])
        if value not in table.columns:
            raise InputError(f"No column {value!r}; the columns are {list(table.columns)}.")
        steps = [int(s) for s in per_step.index]
        L, H = int(data.meta["n_layers"]), int(data.meta["n_heads"])
        cube = np.full((len(steps), L, H), np.nan, dtype=np.float64)
        s_idx = {s: i for i, s in enumerate(steps)}
        col = table[value]
        for (s, layer, head), v in col.items():
            cube[s_idx[int(s)], int(layer), int(head)] = v
        if step is None:
            index = len(steps) - 1
        elif _whole(step) and step in s_idx:
            index = s_idx[step]
        else:
            raise InputError(f"step {step!r} is not a step of the series; its steps are {steps}.")
        loss = per_step["training_loss"].to_numpy(dtype=np.float64)
        loss_name = "training loss"
        if np.isnan(loss).all():
            loss, loss_name = per_step["loss"].to_numpy(dtype=np.float64), "loss on the inputs"
        maps = getattr(data, "maps", None)
        finite = cube[np.isfinite(cube)]
        self._cube = cube
        self._loss = loss
        self._icl = per_step["icl"].to_numpy(dtype=np.float64)
        self._maps = maps
        super().__init__(
            n_layers=L, n_heads=H, steps=steps, index=index, values=wire(cube, "float32"),
            value_name=value, vmax=float(max(finite.max(), 1e-12)) if finite.size else 1.0,
            loss=wire(loss, "float32"), loss_name=loss_name, icl=wire(self._icl, "float32"),
            maps=f16(maps) if maps is not None else {},
            tokens=[str(t) for t in (getattr(data, "tokens", None) or [])] if maps is not None else [],
            title=title or f"{value} across training",
        )

    @traitlets.validate("index")
    def _check_index(self, proposal: dict) -> int:
        i = int(proposal["value"])
        if not 0 <= i < max(len(self.steps), 1):
            raise InputError(f"index {i} is outside the {len(self.steps)} checkpoints (0-indexed).")
        return i

    @property
    def step(self) -> int:
        """The step shown."""
        return int(self.steps[self.index])

    def show(self, step: int) -> None:
        """Show the checkpoint of ``step``.

        Parameters
        ----------
        step : int
            One of :attr:`steps`.

        Returns
        -------
        None

        Raises
        ------
        InputError
            When the series has no checkpoint at ``step``.

        Examples
        --------
        >>> import numpy as np, pandas as pd
        >>> from attnkit.training import SeriesResult
        >>> idx = pd.MultiIndex.from_product([[0, 5], [0], [0, 1]], names=["step", "layer", "head"])
        >>> r = SeriesResult(pd.DataFrame({"induction": [0.1, 0.0, 0.6, 0.2]}, index=idx),
        ...                  {"n_layers": 1, "n_heads": 2})
        >>> r.steps = pd.DataFrame({c: [np.nan, np.nan] for c in ("training_loss", "loss", "icl")},
        ...                        index=pd.Index([0, 5], name="step"))
        >>> view = CheckpointScrubber(r, step=0)
        >>> view.show(5); view.step, view.grid().tolist()
        (5, [[0.6, 0.2]])
        """
        if not _whole(step) or step not in self.steps:
            raise InputError(f"step {step!r} is not a step of the series; its steps are {self.steps}.")
        self.index = self.steps.index(step)

    def grid(self) -> np.ndarray:
        """The shown score at the shown step, float64 ``[layer, head]``.

        Returns
        -------
        ndarray
            NaN where a head has no value.

        Examples
        --------
        >>> import numpy as np, pandas as pd
        >>> from attnkit.training import SeriesResult
        >>> idx = pd.MultiIndex.from_product([[0], [0, 1], [0]], names=["step", "layer", "head"])
        >>> r = SeriesResult(pd.DataFrame({"previous": [0.9, 0.1]}, index=idx),
        ...                  {"n_layers": 2, "n_heads": 1})
        >>> r.steps = pd.DataFrame({c: [np.nan] for c in ("training_loss", "loss", "icl")},
        ...                        index=pd.Index([0], name="step"))
        >>> CheckpointScrubber(r).grid().tolist()
        [[0.9], [0.1]]
        """
        return self._cube[self.index]

    def figure(self, *, preview: bool = False) -> Figure:
        """The static picture: the loss curve with the shown step marked, the head map at
        that step, and the selected head's attention there (where the maps were kept).

        Parameters
        ----------
        preview : bool
            Fewer token labels on the heatmap.

        Returns
        -------
        matplotlib.figure.Figure
            Not attached to pyplot.

        Examples
        --------
        >>> import numpy as np, pandas as pd
        >>> from attnkit.training import SeriesResult
        >>> idx = pd.MultiIndex.from_product([[0, 5], [0], [0, 1]], names=["step", "layer", "head"])
        >>> r = SeriesResult(pd.DataFrame({"induction": [0.1, 0.0, 0.6, 0.2]}, index=idx),
        ...                  {"n_layers": 1, "n_heads": 2})
        >>> r.steps = pd.DataFrame({"training_loss": [np.nan, 2.0], "loss": [3.0, 2.5],
        ...                         "icl": [0.0, -1.0]}, index=pd.Index([0, 5], name="step"))
        >>> len(CheckpointScrubber(r).figure().axes) >= 2
        True
        """
        from ..plot.common import figure_axes

        has_map = self._maps is not None and bool(self.selected)
        fig, _ = figure_axes(None, (11.0 if has_map else 8.0, 3.4))
        fig.clear()
        axes = fig.subplots(1, 3 if has_map else 2, width_ratios=[1.3, 1, 1.2] if has_map else [1.3, 1])
        ax = axes[0]
        steps = np.asarray(self.steps, dtype=np.float64)
        if np.isfinite(self._loss).any():
            ax.plot(steps, self._loss, color="C0", lw=1.2, label=self.loss_name)
        if np.isfinite(self._icl).any():
            ax.plot(steps, self._icl, color="C1", lw=1.2, ls="--", label="in-context score")
        ax.axvline(self.step, color="C3", lw=1.5)
        ax.axhline(0, color="0.8", lw=0.8)
        ax.set_xlabel("training step")
        ax.set_ylabel("nats")
        ax.set_title(f"step {self.step} of {self.steps[-1]}", loc="left")
        if ax.lines and any(line.get_label() and not line.get_label().startswith("_") for line in ax.lines):
            ax.legend(fontsize="small")
        plots.plot_head_map(self.grid(), self.value_name, ax=axes[1], vmin=0.0, vmax=self.vmax,
                            title=f"{self.value_name} at step {self.step}")
        if has_map:
            layer, head = self.selected
            maps = np.asarray(self._maps, dtype=np.float32)[self.index, layer, head]
            plots.plot_heatmap(maps, self.tokens, ax=axes[2], max_labels=16 if preview else 48,
                               title=f"head {head_label(layer, head)} at step {self.step}")
        return fig

    def _alt_text(self) -> str:
        g = self.grid()
        if not np.isfinite(g).any():
            return f"{self.title}: no values at step {self.step}"
        layer, head = np.unravel_index(np.nanargmax(g), g.shape)
        return (f"{self.title}: step {self.step} of {self.steps[-1]} ({len(self.steps)} "
                f"checkpoints); highest {self.value_name} {np.nanmax(g):.3g} at head "
                f"{head_label(int(layer), int(head))}.")


def _whole(v: Any) -> bool:
    """An int (numpy's too), not a bool."""
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def scrubber_view(data: Any, **options: Any) -> CheckpointScrubber:
    """What ``SeriesResult.widget()`` shows: a :class:`CheckpointScrubber` of the result.

    Parameters
    ----------
    data : SeriesResult
        From :func:`attnkit.checkpoint_scores`.
    **options
        Passed on to :class:`CheckpointScrubber`.

    Returns
    -------
    CheckpointScrubber
        The view.

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> from attnkit.training import SeriesResult
    >>> idx = pd.MultiIndex.from_product([[0], [0], [0]], names=["step", "layer", "head"])
    >>> r = SeriesResult(pd.DataFrame({"induction": [0.5]}, index=idx),
    ...                  {"n_layers": 1, "n_heads": 1}, widget="checkpoint_scrubber")
    >>> r.steps = pd.DataFrame({c: [np.nan] for c in ("training_loss", "loss", "icl")},
    ...                        index=pd.Index([0], name="step"))
    >>> type(r.widget()).__name__
    'CheckpointScrubber'
    """
    return CheckpointScrubber(data, **options)
