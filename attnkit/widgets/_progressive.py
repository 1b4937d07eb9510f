"""Views that fill in: the work runs in a worker thread (the kernel stays free for other cells),
each step's result is pushed to the views as it is done (a ``{"type": "push", ...}`` custom
message), and the whole state is synced every ``SYNC_SECONDS`` and at the end, so a copy saved
half-way stays consistent. A cancelled or failed computation leaves what was done, and
``computing`` says why the rest is missing. HeadGrid (head by head) and Heatmap (its overview
band by band) fill in through it."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import Any

import traitlets

from ._codec import message

#: cells (heads × n²) from which a view in a kernel fills in progressively by default
PROGRESSIVE_CELLS = 1 << 28
#: ``ATTNKIT_PROGRESSIVE=0`` builds every view before it shows (``attnkit report`` sets it)
PROGRESSIVE_ENV = "ATTNKIT_PROGRESSIVE"
#: seconds between the full state updates of a view that fills in (steps also arrive one by one)
SYNC_SECONDS = 2.0

#: the work of a view: called with ``step``, which it calls after each step (it syncs the
#: state now and then, and returns False once cancelled: the work then returns False too)
Work = Callable[[Callable[[], bool]], bool]


def in_kernel() -> bool:
    """True inside a Jupyter kernel (a front end can show a view that fills in)."""
    import sys

    if "IPython" not in sys.modules:
        return False
    from IPython import get_ipython

    return getattr(get_ipython(), "kernel", None) is not None


def fills_in(progressive: bool | None, cells: int, threshold: int = PROGRESSIVE_CELLS) -> bool:
    """``progressive`` if given; else True inside a kernel for at least ``threshold`` cells,
    unless ``$ATTNKIT_PROGRESSIVE`` is ``0``."""
    if progressive is not None:
        return bool(progressive)
    return cells >= threshold and in_kernel() and os.environ.get(PROGRESSIVE_ENV, "1") != "0"


class Progressive(traitlets.HasTraits):
    """Mixin of a widget that fills in: ``computing`` is ``"running"``, ``"done"`` or
    ``"stopped: <why>"``; subclasses give ``_state(computing)`` (the trait values of what is
    done, one consistent snapshot) and ``_complete()``."""

    computing = traitlets.Unicode("done").tag(sync=True)

    _worker: threading.Thread | None = None
    _stop: threading.Event | None = None

    def _state(self, computing: str) -> dict[str, Any]:
        raise NotImplementedError

    def _complete(self) -> bool:
        raise NotImplementedError

    def _sync(self, computing: str) -> None:
        state = self._state(computing)
        with self.hold_sync():  # type: ignore[attr-defined]
            for k, v in state.items():
                setattr(self, k, v)
        invalidate = getattr(self, "_invalidate_static", None)
        if invalidate is not None:
            invalidate()

    def _push(self, what: str, **fields: Any) -> None:
        """Send one step's result to the views (binary arrays as ``wire`` dicts)."""
        content, buffers = message({"type": "push", "what": what, **fields})
        self.send(content, buffers)  # type: ignore[attr-defined]

    def _start(self, work: Work, name: str) -> None:
        """Stop the computation under way (waiting for it to end) and run ``work`` in a
        worker thread; its end (done, cancelled or failed) is synced to the views."""
        self._halt()
        stop = threading.Event()
        self._stop = stop
        last = [time.monotonic()]

        def step() -> bool:
            if stop.is_set():
                return False
            if time.monotonic() - last[0] > SYNC_SECONDS:
                self._sync("running")
                last[0] = time.monotonic()
            return True

        def run() -> None:
            try:
                finished = work(step)
                self._sync("done" if finished else "stopped: cancelled")
            except Exception as err:  # noqa: BLE001 - a worker's error must reach the view, not vanish
                try:
                    self._sync(f"stopped: {type(err).__name__}: {err}")
                except Exception:  # noqa: BLE001 - the widget was closed: nobody to tell
                    pass

        self._worker = threading.Thread(target=run, daemon=True, name=name)
        self._worker.start()

    def _halt(self) -> None:
        """Stop the worker and wait until it has ended (its last state synced)."""
        if self._stop is not None:
            self._stop.set()
        if self._worker is not None and self._worker is not threading.current_thread():
            self._worker.join()

    def wait(self, *, timeout: float | None = None) -> bool:
        """Block until the view is complete (a view that fills in; others are at once).

        Parameters
        ----------
        timeout : float, optional
            Seconds to wait at most (default: as long as it takes).

        Returns
        -------
        bool
            True when everything is computed.

        Examples
        --------
        >>> from attnkit.testing import tiny_model
        >>> from attnkit.widgets import HeadGrid
        >>> grid = HeadGrid(tiny_model("bert").attend("The cat sat."), progressive=True)
        >>> grid.wait(), grid.computing
        (True, 'done')
        """
        if self._worker is not None:
            self._worker.join(timeout)
        return self._complete()

    def cancel(self) -> None:
        """Stop filling in: what is computed stays, the view says the rest is missing.

        Returns
        -------
        None

        Examples
        --------
        >>> from attnkit.testing import tiny_model
        >>> from attnkit.widgets import HeadGrid
        >>> grid = HeadGrid(tiny_model("bert").attend("The cat sat."), progressive=True)
        >>> grid.cancel(); _ = grid.wait()
        >>> grid.computing in ("done", "stopped: cancelled")
        True
        """
        if self._stop is not None:
            self._stop.set()

    def close(self) -> None:
        """Close the widget, and stop a computation still filling it in.

        Returns
        -------
        None

        Examples
        --------
        >>> from attnkit.testing import tiny_model
        >>> from attnkit.widgets import HeadGrid
        >>> HeadGrid(tiny_model("bert").attend("The cat sat."), progress=False).close()
        """
        if self._stop is not None:
            self._stop.set()
        super().close()  # type: ignore[misc]
