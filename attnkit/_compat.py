"""Deprecated spellings of public arguments, accepted for one release with a warning."""

from __future__ import annotations

import functools
import inspect
import warnings
from typing import Any, Callable, Sequence, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


def renamed(positional: Sequence[str] = (), **names: str) -> Callable[[F], F]:
    """Accept old keyword names and old positional options of a function, with a warning.

    ``names`` maps an old keyword to its new name (``att="attentions"``). ``positional``
    lists, in their old order, options that used to be positional after the data and are
    keyword-only now; extra positional arguments are bound to them (old names are
    translated through ``names``). Each use emits one :class:`DeprecationWarning` that gives
    the new spelling. The wrapped function keeps its signature for ``inspect``.
    """

    def decorate(fn: F) -> F:
        sig = inspect.signature(fn)
        n_positional = sum(
            p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in sig.parameters.values()
        )
        qualname = fn.__qualname__.replace(".__init__", "")
        positional_names = [
            p.name for p in sig.parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if len(args) > n_positional:
                extra = args[n_positional:]
                if len(extra) > len(positional):
                    raise TypeError(
                        f"{qualname}() takes {n_positional} positional arguments but "
                        f"{len(args)} were given; pass options by keyword."
                    )
                bound = [names.get(p, p) for p in positional[: len(extra)]]
                warnings.warn(
                    f"{qualname}(): pass {', '.join(bound)} by keyword "
                    f"({', '.join(f'{b}=...' for b in bound)}); positional options are "
                    "deprecated and will be removed in the next release.",
                    DeprecationWarning,
                    stacklevel=2,
                )
                for name, value in zip(bound, extra):
                    if name in kwargs:
                        raise TypeError(f"{qualname}() got multiple values for {name!r}.")
                    kwargs[name] = value
                args = args[:n_positional]
            given = set(positional_names[: len(args)])
            for old, new in names.items():
                if old in kwargs:
                    if new in kwargs or new in given:
                        raise TypeError(f"{qualname}() got both {old!r} and {new!r}; use {new!r}.")
                    warnings.warn(
                        f"{qualname}(): {old}= is deprecated, use {new}= (it will be removed "
                        "in the next release).",
                        DeprecationWarning,
                        stacklevel=2,
                    )
                    kwargs[new] = kwargs.pop(old)
            return fn(*args, **kwargs)

        wrapper.__attnkit_renamed__ = dict(names)  # type: ignore[attr-defined]
        return wrapper  # type: ignore[return-value]

    return decorate
