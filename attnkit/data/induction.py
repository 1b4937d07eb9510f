"""Repeated random tokens: the standard inputs for finding induction heads (Olsson et al. 2022)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..core import validate
from ..errors import InputError

if TYPE_CHECKING:
    from ..runtime.model import Model


def induction_inputs(
    model: Model,
    n: int,
    length: int,
    *,
    bos: bool | None = None,
    replace: bool | None = None,
    seed: int = 0,
) -> list[np.ndarray]:
    """Inputs made of a random token sequence repeated twice, optionally after a BOS.

    In the second copy every token has occurred once before, so an induction head attends
    from it to the token that followed that occurrence (``length - 1`` positions back) and
    the model can predict the rest of the copy; in the first copy nothing can be predicted.

    Parameters
    ----------
    model : Model
        The model whose vocabulary the tokens are drawn from. Special tokens and tokens
        added on top of the vocabulary are never drawn.
    n : int
        Number of inputs.
    length : int
        Tokens of the random sequence; each input has ``2 * length`` tokens (plus the BOS).
    bos : bool, optional
        Start each input with the model's BOS/[CLS] token. ``None`` (default) does so when
        the model has one.
    replace : bool, optional
        Draw a sequence's tokens with replacement. ``None`` (default) draws without
        replacement (no token repeats inside one copy) when the vocabulary has at least
        ``length`` tokens, with replacement otherwise.
    seed : int
        Seed of the random tokens.

    Returns
    -------
    list of numpy.ndarray
        ``n`` int64 arrays of token ids, each ``[bos] + tokens + tokens``; anything that
        takes inputs accepts them (:meth:`Model.encode`, ``model.attend``,
        :func:`attnkit.extract`).

    Raises
    ------
    InputError
        When ``n`` or ``length`` is below 1, when an input would be longer than the model's
        maximum length, or when ``replace=False`` and the vocabulary is too small.

    Examples
    --------
    >>> import attnkit as ak
    >>> from attnkit.testing import tiny_model
    >>> model = tiny_model("gpt2")
    >>> [ids] = ak.induction_inputs(model, 1, 5, seed=0)
    >>> len(ids), bool((ids[1:6] == ids[6:]).all())
    (11, True)
    >>> att = model.attend(ids)
    >>> str(att.roles[0]), len(att)
    ('cls', 11)
    """
    validate.model(model, family="text")
    seed = validate.seed(seed)
    n = validate.size(n, "n")
    length = validate.size(length, "length")
    if n < 1 or length < 1:
        raise InputError(f"n and length must be at least 1; got n={n}, length={length}.")
    tok = model.tokenizer
    bos_id = None
    if bos is None or bos:
        name = model.cls_token
        bos_id = tok.convert_tokens_to_ids(name) if name else None
        if bos and bos_id is None:
            raise InputError(f"{model.name} has no BOS or [CLS] token; call with bos=False.")
    total = 2 * length + (bos_id is not None)
    if total > model.max_length:
        raise InputError(
            f"Inputs of {total} tokens are longer than {model.name}'s maximum of "
            f"{model.max_length}; use length <= {(model.max_length - (bos_id is not None)) // 2}."
        )
    size = min(len(tok), int(model.hf.get_input_embeddings().num_embeddings))
    excluded = set(tok.all_special_ids) | set(getattr(tok, "added_tokens_decoder", {}) or {})
    vocab = np.array([i for i in range(size) if i not in excluded], dtype=np.int64)
    if replace is None:
        replace = length > len(vocab)
    elif not replace and length > len(vocab):
        raise InputError(
            f"{model.name} has {len(vocab)} ordinary tokens, fewer than length={length}; "
            "use replace=True or a shorter length."
        )
    rng = np.random.default_rng(seed)
    head = [bos_id] if bos_id is not None else []
    out = []
    for _ in range(n):
        seq = rng.choice(vocab, size=length, replace=replace)
        out.append(np.concatenate([np.array(head, dtype=np.int64), seq, seq]).astype(np.int64))
    return out
