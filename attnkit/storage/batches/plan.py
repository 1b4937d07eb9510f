"""Planning: which items go in which batch, and what a store records about the run.

The first of the three steps of extraction (:mod:`attnkit.storage.batches`): plan the batches
(:func:`plan_batches`), run one on the model (:mod:`~attnkit.storage.batches.run`), write it
(:mod:`~attnkit.storage.batches.write`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import torch

from ...core.attention import word_pooling
from ...runtime.encoding import Encoding, PairEncoding
from ...errors import AttnkitError, StoreError
from ...runtime.seq2seq import Seq2SeqModel
from ..store import FORMAT, Index, Layout


def plan_batches(lengths: Sequence[int], batch_size: int) -> list[list[int]]:
    """Batches of item indices: items sorted by length (stable), cut every ``batch_size``.

    Parameters
    ----------
    lengths : sequence of int
        Each item's length (tokens), in input order.
    batch_size : int
        Items per batch.

    Returns
    -------
    list of list of int
        Item indices per batch; batch ``b`` holds the ``b``-th ``batch_size`` shortest items.

    Examples
    --------
    >>> plan_batches([5, 2, 9, 2], 2)
    [[1, 3], [0, 2]]
    """
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    return [order[k : k + batch_size] for k in range(0, len(order), batch_size)]


def level_positions(enc: Encoding, level: str) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray, Any]:
    """Tokens, roles, word ids and segments of an encoding at ``level`` (and the word
    pooling that gets there, None at token level)."""
    roles = np.array(enc.roles)
    word_ids = np.array(enc.word_ids)
    segments = np.array(enc.segments)
    if level == "token":
        return list(enc.tokens), roles, word_ids, segments, None
    pool = word_pooling(word_ids, roles)
    keep = pool.first
    tokens = [enc.words[word_ids[p]] if roles[p] == "word" else enc.tokens[p] for p in keep]
    return tokens, roles[keep], word_ids[keep], segments[keep], pool


#: Config keys that do not determine the maps (bookkeeping that ``save_pretrained`` adds or
#: changes), left out of :func:`model_fingerprint`.
NOT_FINGERPRINTED = ("_name_or_path", "transformers_version", "_attn_implementation_autoset",
                     "architectures", "dtype", "torch_dtype", "_commit_hash", "use_cache",
                     "return_dict", "output_attentions", "output_hidden_states")
#: What format-2 stores written before attnkit left ``architectures`` and ``dtype`` out hashed.
_LEGACY_NOT_FINGERPRINTED = NOT_FINGERPRINTED[:3]


def model_fingerprint(model: Any, *, legacy: bool = False) -> str:
    """A hash of what determines the model's maps (its configuration, less
    :data:`NOT_FINGERPRINTED`, and a sample of every weight tensor): two different models
    (or a model and its fine-tuned version) never share it; a model saved with
    ``save_pretrained`` and loaded again keeps it. ``legacy``: the hash stores of earlier
    attnkit versions recorded (configuration bookkeeping included)."""
    h = hashlib.sha256()
    skip = _LEGACY_NOT_FINGERPRINTED if legacy else NOT_FINGERPRINTED
    cfg = {k: v for k, v in model.config.to_dict().items() if k not in skip}
    h.update(json.dumps(cfg, sort_keys=True, default=str).encode())
    with torch.no_grad():
        for name, p in sorted(model.hf.named_parameters()):
            h.update(name.encode())
            h.update(str(tuple(p.shape)).encode())
            h.update(p.detach().reshape(-1)[:1024].float().cpu().numpy().tobytes())
    return h.hexdigest()


def model_info(model: Any) -> dict[str, Any]:
    """What a store records about the model (computed where the model lives); an
    encoder–decoder adds ``decoder``, its decoder's layers and heads."""
    pairs = isinstance(model, Seq2SeqModel)
    info = {
        "model": model.name,
        "n_layers": model.n_layers,
        "n_heads": model.n_heads,
        "causal": model.causal,
        "max_length": model.max_length,
        "embedding_dim": int(model.hf.get_input_embeddings().embedding_dim),
        "model_fingerprint": model_fingerprint(model),
        "qk": None if pairs else qk_geometry(model),
        "model_fingerprint_legacy": model_fingerprint(model, legacy=True),
    }
    if pairs:
        info["decoder"] = {"layers": model.n_decoder_layers, "heads": model.n_decoder_heads}
    return info


def encode_inputs(model: Any, items: Sequence[Any], start: int = 0) -> list[Any]:
    """Every input tokenized for extraction: an :class:`~attnkit.runtime.encoding.Encoding` each
    (:meth:`Model.encode <attnkit.Model.encode>`), or for an encoder–decoder a
    :class:`~attnkit.runtime.encoding.PairEncoding` of each ``(source, target)`` pair; an input that
    fails names its position (``start`` is the first item's).

    Parameters
    ----------
    model : Model
        The model.
    items : sequence
        The inputs.
    start : int
        Position of ``items[0]`` among all inputs (for messages).

    Returns
    -------
    list

    Raises
    ------
    InputError
        For an input the model cannot read (a plain text for an encoder–decoder).

    Examples
    --------
    >>> from attnkit.testing import tiny_seq2seq
    >>> [pair] = encode_inputs(tiny_seq2seq("t5"), [("The cat.", "A cat.")])
    >>> pair.source.tokens, len(pair)
    (['▁the', '▁cat', '.', '</s>'], 9)
    """
    if not isinstance(model, Seq2SeqModel):
        return [model.encode(x) for x in items]
    out = []
    for k, item in enumerate(items):
        try:
            out.append(model.encode_pair(item))
        except AttnkitError as exc:
            raise type(exc)(f"Input {start + k}: {exc}") from exc
    return out


def qk_geometry(model: Any) -> dict[str, Any] | None:
    """Query heads, key heads, head size, score scaling (per layer) and soft-capping of the
    model, read from one forward of a two-token input; None for a model that keeps its
    eager path (its queries and keys cannot be captured)."""
    if getattr(model, "capture", None) != "interface":
        return None
    from ...core.qkstates import QKRecorder

    rec = QKRecorder([2])
    try:
        enc = model.encode("a b")
        rec = QKRecorder([len(enc)])
        model.record([enc], [rec])
    except (AttnkitError, RuntimeError):  # a model this probe cannot run: no geometry
        return None
    if len(rec.queries) != model.n_layers:
        return None
    q, k = rec.queries[0][0], rec.keys[0][0]
    return {"heads": int(q.shape[0]), "kv_heads": int(k.shape[0]), "dim": int(q.shape[-1]),
            "scaling": [rec.scaling[l] for l in range(model.n_layers)], "softcap": rec.softcap}


def inputs_fingerprint(encodings: list, level: str, batch_size: int, embeddings: bool,
                        keep: list[str]) -> str:
    h = hashlib.sha256()
    h.update(json.dumps([level, batch_size, embeddings, keep, FORMAT]).encode())
    for e in encodings:
        if isinstance(e, PairEncoding):  # the split between the two sides counts
            key = [e.target.input_ids, e.source.input_ids, e.target.words, e.source.words, e.meta]
        else:
            key = [e.input_ids, e.words, e.meta, e.type_ids]
        h.update(json.dumps(key, default=str).encode())
    return h.hexdigest()


def v1_fingerprint(name: str, n_layers: int, n_heads: int, encodings: list, level: str,
                   batch_size: int, embeddings: bool) -> str:
    """The fingerprint a format-1 store of these inputs recorded (to reuse migrated stores)."""
    h = hashlib.sha256()
    h.update(json.dumps([name, n_layers, n_heads, level, batch_size, embeddings, 1]).encode())
    for e in encodings:
        h.update(json.dumps([e.input_ids, e.words, e.meta], default=str).encode())
    return h.hexdigest()


def pair_positions(e: PairEncoding, level: str) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray, int]:
    """Tokens, roles, word ids and segments of a pair at ``level``, the target's positions
    first, then the source's (word ids count within each side), and the source's positions."""
    t = level_positions(e.target, level)
    s = level_positions(e.source, level)
    return ([*t[0], *s[0]], *(np.concatenate([a, b]) for a, b in zip(t[1:4], s[1:4])),
            len(s[0]))  # type: ignore[return-value]


def build_index(encodings: list, level: str) -> tuple[Index, list[int]]:
    """The store index of every item (what the tokenizer knows) and each item's length (a
    pair's: both sides, :func:`pair_positions`)."""
    tokens, roles, word_ids, segments, n = [], [], [], [], []
    n_source: list[int] = []
    for e in encodings:
        if isinstance(e, PairEncoding):
            t, r, w, s, k = pair_positions(e, level)
            n_source.append(k)
        else:
            t, r, w, s, _ = level_positions(e, level)
        tokens.append(t)
        roles.append(r)
        word_ids.append(w)
        segments.append(s)
        n.append(len(t))
    index = Index(tokens, roles, word_ids, segments,
                     [np.asarray(e.input_ids) for e in encodings],
                     [list(e.words) for e in encodings], [dict(e.meta) for e in encodings])
    if n_source:
        index.n_source = n_source
        index.n_source_words = [len(e.source.words) for e in encodings]
    return index, n


def slice_index(index: dict[str, np.ndarray], lay: Layout, b: int, names: Iterable[str],
                computed: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The arrays ``names`` of batch ``b``: from ``computed`` (what the batch computed) or,
    for positions, words and ids, the batch's slice of the store ``index``."""
    out = {}
    for name in names:
        if name in computed:
            out[name] = computed[name]
        elif name.startswith("positions/"):
            out[name] = index[name][slice(*lay.range(b, "pos_offset", "n"))]
        elif name == "words/words":
            out[name] = index[name][slice(*lay.range(b, "word_offset", "n_words"))]
        elif name == "ids/input_ids":
            out[name] = index[name][slice(*lay.range(b, "ids_offset", "n_tokens"))]
        else:
            raise StoreError(f"Batch {b} holds no {name!r}.")
    return out
