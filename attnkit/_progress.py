"""The one progress bar of attnkit: tqdm, notebook-aware, off with ``progress=False``."""

from __future__ import annotations

from typing import Any, Iterable


def progress(
    items: Iterable[Any] | None = None,
    *,
    show: bool = True,
    desc: str = "",
    total: int | None = None,
    initial: int = 0,
    unit: str = "item",
) -> Any:
    """A tqdm bar over ``items`` (or a manual one with ``update`` when ``items`` is None)."""
    from tqdm.auto import tqdm

    return tqdm(items, total=total, initial=initial, desc=desc, unit=unit, disable=not show,
                dynamic_ncols=True)
