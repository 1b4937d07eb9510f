"""Input-token attributions read off attention measures: one score per input position.

Each function takes what one input's forward (and backward) produced and returns a float64
``[n]`` vector: how much each input token is credited with for what the ``sources`` rows
(the positions the explained output reads: [CLS] for a classifier, the last token of a
causal LM, every position for a mean-pooled embedding) compute. :data:`ATTRIBUTIONS` lists
them; :func:`~attnkit.faithfulness` scores them.

- ``"weights"``: raw attention of the last layer from the sources, averaged over heads
  (and over the sources).
- ``"rollout"``, ``"flow"``: attention rollout and attention max-flow (Abnar & Zuidema
  2020) from the sources, with ``(1 - residual) A + residual I`` (:mod:`attnkit.flow`).
- ``"norm"``: the last layer's norm maps (Kobayashi et al. 2020) from the sources, summed
  over heads.
- ``"norm+residual"``: the last layer's mixed norm+residual map (Kobayashi et al. 2021).
- ``"alti"``: ALTI rolled out over all layers (Ferrando et al. 2022): the product of the
  per-layer contribution maps, no identity added (the residual is inside them).
- ``"grad×attn"``: the last layer's ``α ⊙ ∂y/∂α`` summed over heads and over all rows
  (rows the output does not read have zero gradient), signed.
- ``"input×grad"``: ``Σ_d e_jd ∂y/∂e_jd`` over the input (word) embedding of token ``j``,
  signed.
- ``"random"``: uniform noise, the chance baseline.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..core import validate
from ..errors import InputError

#: Attribution names, in the order tables list them.
ATTRIBUTIONS = ("weights", "rollout", "flow", "norm", "norm+residual", "alti", "grad×attn",
                "input×grad", "random")

#: Which map (measure) each attribution reads; the rest read gradients or nothing.
NEEDS = {"weights": "weights", "rollout": "weights", "flow": "weights", "norm": "norm",
         "norm+residual": "norm+residual", "alti": "alti", "grad×attn": "grad×attn"}


def check_attributions(names: Sequence[str]) -> list[str]:
    """``names`` as a list, refusing unknown ones (``"grad*attn"`` spelled either way)."""
    out = []
    for name in names:
        name = {"grad*attn": "grad×attn", "input*grad": "input×grad"}.get(name, name)
        if name not in ATTRIBUTIONS:
            raise InputError(f"Unknown attribution {name!r}; choose from {ATTRIBUTIONS}.")
        if name not in out:
            out.append(name)
    if not out:
        raise InputError("measures is empty; name at least one of " + ", ".join(ATTRIBUTIONS))
    return out


def _old_order(fn: Callable[..., np.ndarray]) -> Callable[..., np.ndarray]:
    """Accept ``attribution(name, maps, sources)``, the order before the contract, with a
    warning for one release."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> np.ndarray:
        if args and isinstance(args[0], str):
            warnings.warn("attribution(name, maps, sources) is deprecated; use "
                          "attribution(maps, name=..., sources=...) (the old order will be "
                          "removed in the next release).", DeprecationWarning, stacklevel=2)
            kwargs["name"] = args[0]
            if len(args) > 2:
                kwargs["sources"] = args[2]
            args = args[1:2]
        return fn(*args, **kwargs)

    return wrapper


@_old_order
def attribution(
    maps: dict[str, Any],
    *,
    name: str,
    sources: Sequence[int] | None = None,
    residual: float = 0.5,
    input_embeds: np.ndarray | None = None,
    input_grads: np.ndarray | None = None,
    rng: np.random.Generator | None = None,
) -> np.ndarray:
    """One input's attribution ``[n]`` by ``name`` (see the module docstring).

    Parameters
    ----------
    maps : dict
        Measure name -> :class:`~attnkit.Attention` of this input (``NEEDS[name]`` must be
        there).
    name : str
        One of :data:`ATTRIBUTIONS`.
    sources : sequence of int, optional
        The positions whose rows are read; ``None`` reads [CLS] (the last token of a
        causal model).
    residual : float
        Identity weight of rollout and flow.
    input_embeds, input_grads : ndarray ``[n, d]``, optional
        For ``"input×grad"``.
    rng : numpy Generator, optional
        For ``"random"``.

    Returns
    -------
    ndarray
        float64 ``[n]``.

    Examples
    --------
    >>> import numpy as np
    >>> from attnkit import Attention
    >>> from attnkit.analysis.attribution import attribution
    >>> att = Attention.from_maps(np.array([[0.5, 0.5], [0.0, 1.0]]), ["[CLS]", "cat"])
    >>> attribution({"weights": att}, name="weights").tolist()  # from [CLS]
    [0.5, 0.5]
    >>> attribution({"weights": att}, name="rollout", sources=[0], residual=0.5).tolist()
    [0.75, 0.25]
    """
    if sources is None and maps:
        from ..flow import resolve_source

        sources = [pos for _, pos in resolve_source(next(iter(maps.values())))]
    if sources is not None and maps:
        src = validate.positions(sources, len(next(iter(maps.values()))), "sources").tolist()
    else:
        src = list(sources or [])
    if name == "input×grad":
        if input_embeds is None or input_grads is None:
            raise InputError("input×grad needs the input embeddings and their gradients.")
        return (np.asarray(input_embeds, np.float64) * np.asarray(input_grads, np.float64)).sum(-1)
    if name == "random":
        n = len(next(iter(maps.values()))) if maps else len(input_embeds)  # type: ignore[arg-type]
        return (rng or np.random.default_rng()).random(n)
    att = maps.get(NEEDS.get(name, ""))
    if att is None:
        raise InputError(f"The {name!r} attribution needs the {NEEDS.get(name)!r} maps.")
    last = np.asarray(att.maps[-1], dtype=np.float64)  # [H, n, n]
    if name == "weights":
        return last[:, src].mean(axis=(0, 1))
    if name in ("norm", "norm+residual"):
        return last[:, src].sum(0).mean(0)
    if name == "grad×attn":
        return last.sum(axis=(0, 1))
    from ..flow import attention_flow, rollout

    if name == "rollout":
        return rollout(att, residual=residual)[src].mean(0)
    if name == "alti":
        return rollout(att, residual=0.0)[src].mean(0)
    if name == "flow":
        return np.atleast_2d(attention_flow(att, sources=src, residual=residual)).mean(0)
    raise InputError(f"Unknown attribution {name!r}.")
