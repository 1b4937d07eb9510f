"""Load a Hugging Face model on a device, in a precision, and align its tokens to words.

``load(name, device=, dtype=)`` returns a :class:`Model`; ``Model.attend(input)`` returns an
:class:`~attnkit.core.attention.Attention` at token level, or a
:class:`~attnkit.runtime.lazy.LazyAttention` for long inputs. Models whose attention goes through
transformers' attention interface run attnkit's attention function (:mod:`attnkit.runtime.capture`:
the fast kernel computes, attnkit records what was asked); the others run their eager
attention with ``output_attentions=True``.
"""

from __future__ import annotations

import contextlib
import inspect
import numbers
import warnings
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core import validate
from .._compat import renamed
from ..core.attention import Attention
from .archs import arch_of
from .encoding import Encoding
from ..errors import (
    CaptureError,
    EmptyInputError,
    InputError,
    InputTooLongError,
    NoAttentionError,
    UnsupportedModelError,
)

if TYPE_CHECKING:
    from .capture import Recorder
    from .lazy import LazyAttention

#: ``Model.attend`` returns lazy attention by itself when the dense float32 maps of the input,
#: ``layers * heads * n * n * 4`` bytes, would pass this (1 GiB). Above it, holding the maps is
#: what an analysis spends its memory on: the 8-layer x 8-head Llama-shaped model of
#: ``benchmarks/long.py`` crosses it at 2,048 tokens, where its bare forward peaks at a few
#: hundred MB and lazy capture costs about the forward itself (docs/benchmarks.md, "long");
#: a 32 x 32-head 7 B model crosses it at 512 tokens. all-MiniLM-L6-v2 never does (512
#: positions: 75 MB).
LAZY_ABOVE_BYTES = 1 << 30




def refuse_encoder_decoder(config: Any, name: str) -> None:
    """Raise :class:`~attnkit.errors.UnsupportedModelError` for an encoder-decoder config
    (T5, BART, ...) wrapped as a plain :class:`Model`: those are read by
    :class:`attnkit.runtime.seq2seq.Seq2SeqModel` (what :func:`load` returns for them)."""
    if getattr(config, "is_encoder_decoder", False):
        raise UnsupportedModelError(
            f"{name} is an encoder-decoder model ({getattr(config, 'model_type', '?')}): it has "
            "encoder self-attention, decoder self-attention and cross-attention, which "
            "attnkit.Model does not read. Load its folder with attnkit.load, or wrap it with "
            "attnkit.runtime.seq2seq.Seq2SeqModel(hf_model, tokenizer); then "
            "model.attend(source, target) returns .encoder, .decoder and .cross."
        )


def _token_ids(item: Any) -> list[int] | None:
    """``item`` as a list of token ids when it is one (ints, a 1-D integer array or tensor),
    else None. Raises InputError for arrays that are not 1-D integers."""
    if type(item).__module__.startswith("torch"):
        item = item.detach().cpu().numpy()
    if isinstance(item, np.ndarray):
        if item.dtype.kind not in "iu" or item.ndim != 1:
            raise InputError(
                f"An array of token ids must be 1-D and of integers; got shape {item.shape} "
                f"and dtype {item.dtype}."
            )
        return item.tolist()
    if isinstance(item, (list, tuple)) and item and all(
        isinstance(i, (numbers.Real, np.number)) and not isinstance(i, (bool, np.bool_)) for i in item
    ):  # numbers are token ids (floats are refused, not read as words)
        return validate.token_ids(list(item)).tolist()
    return None


class Model:
    """A Hugging Face model wrapped for attention analysis (fast tokenizer, word alignment).

    Build one with :func:`load`, or wrap an in-memory model: ``Model(hf_model, tokenizer)``.
    The model stays on the device and in the dtype it is on.

    Parameters
    ----------
    hf_model : transformers.PreTrainedModel
        The model (any head); attention is read from its bare transformer (:attr:`base`).
    tokenizer : transformers.PreTrainedTokenizerFast
        Its fast tokenizer.
    name, path : str
        For labels and provenance.
    capture : str
        ``"auto"``: attnkit's attention function (:mod:`attnkit.runtime.capture`) when the model's
        attention goes through transformers' attention interface, else the eager path;
        ``"interface"``: require the former; ``"eager"``: always the eager path
        (``output_attentions=True``; no lazy capture).

    Raises
    ------
    InputError
        For a slow tokenizer or an unknown ``capture``.
    CaptureError
        For ``capture="interface"`` on a model outside the interface.

    Examples
    --------
    >>> from attnkit.testing import tiny_model
    >>> model = tiny_model("llama")
    >>> model.device, model.dtype, model.capture
    (device(type='cpu'), torch.float32, 'interface')
    """

    #: What the class reads (:data:`FAMILIES`): ``"text"`` for :class:`Model` itself.
    family = "text"

    @renamed(positional=("name", "path"))
    def __init__(self, hf_model: Any, tokenizer: Any, *, name: str = "", path: str = "",
                 capture: str = "auto") -> None:
        if self.family == "text" and not getattr(tokenizer, "is_fast", False):
            raise InputError(
                "attnkit needs a fast (Rust) tokenizer to align tokens to words; "
                f"{type(tokenizer).__name__} is a slow one."
            )
        if self.family == "text":
            refuse_encoder_decoder(hf_model.config, name or type(hf_model).__name__)
        self._setup(hf_model, tokenizer, name=name, path=path, capture=capture)
        config = hf_model.config
        self.n_layers = int(config.num_hidden_layers)
        self.n_heads = int(config.num_attention_heads)
        archs = " ".join(getattr(config, "architectures", None) or [type(hf_model).__name__])
        arch = arch_of(config)
        self.causal = bool(
            arch.causal
            or "CausalLM" in archs
            or "LMHead" in archs
            or (getattr(config, "is_decoder", False) and not getattr(config, "add_cross_attention", False))
        )
        max_pos = getattr(config, "max_position_embeddings", None) or 512
        if arch.offset_positions:
            max_pos -= 2
        tok_max = getattr(tokenizer, "model_max_length", None) or max_pos
        self.max_length = int(min(max_pos, tok_max if tok_max < 1e6 else max_pos))
        self.cls_token = tokenizer.cls_token or (tokenizer.bos_token if not self.causal else None)
        self.sep_token = tokenizer.sep_token or tokenizer.eos_token
        if self.causal and tokenizer.bos_token:
            self.cls_token = tokenizer.bos_token
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        self._accepts_type_ids = getattr(config, "type_vocab_size", 0) and arch.type_ids
        params: Any
        try:
            params = inspect.signature(self.base.forward).parameters
        except (TypeError, ValueError, AttributeError):
            params = {}
        self._forward_options = {"use_cache": False} if "use_cache" in params else {}
        try:
            names = [n for n, _ in hf_model.named_parameters()]
        except (AttributeError, TypeError):
            names = []
        #: True for models with learned sink logits (gpt-oss): their attention rows sum to
        #: at most 1, the rest going to the sink (``meta["sinks"]`` of their attention).
        self.sinks = any(n.rsplit(".", 1)[-1] == "sinks" for n in names)

    def _setup(self, hf_model: Any, tokenizer: Any, *, name: str, path: str, capture: str) -> None:
        """What every Model class sets up the same way: the capture path (attnkit's attention
        function or the eager one), the model in eval mode, and the names."""
        from .capture import IMPLEMENTATION, register, supports_interface

        if capture not in ("auto", "interface", "eager"):
            raise InputError(f"capture must be 'auto', 'interface' or 'eager', not {capture!r}.")
        interface = capture != "eager" and supports_interface(hf_model) and register()
        if capture == "interface" and not interface:
            raise CaptureError(
                f"{type(hf_model).__name__} does not run its attention through transformers' "
                "attention interface; use capture='auto' (its eager path)."
            )
        #: ``"interface"`` (attnkit's attention function) or ``"eager"``.
        self.capture = "interface" if interface else "eager"
        self._implementation = IMPLEMENTATION if interface else "eager"
        if hasattr(hf_model, "set_attn_implementation"):
            hf_model.set_attn_implementation(self._implementation)
        hf_model.eval()
        self._prefix_tok = None
        self.hf = hf_model
        self.tokenizer = tokenizer
        self.config = hf_model.config
        self.name = name or getattr(self.config, "_name_or_path", "") or type(hf_model).__name__
        self.path = "" if path == "" else str(validate.path(path))
        self.model_type = getattr(self.config, "model_type", "")

    def __repr__(self) -> str:
        where = ""
        if self.device.type != "cpu" or self.dtype != _float32():
            where = f", {self.device} {str(self.dtype).replace('torch.', '')}"
        return (
            f"Model({self.name!r}, {self.n_layers} layers x {self.n_heads} heads, "
            f"max {self.max_length} tokens{', causal' if self.causal else ''}{where})"
        )

    # ------------------------------------------------------------ device
    @property
    def device(self) -> Any:
        """The ``torch.device`` inputs go to (where the input embeddings are)."""
        import torch

        try:
            return self.hf.get_input_embeddings().weight.device
        except (AttributeError, NotImplementedError):
            pass
        try:
            return next(self.hf.parameters()).device
        except (AttributeError, StopIteration, TypeError):
            return torch.device("cpu")

    @property
    def dtype(self) -> Any:
        """The ``torch.dtype`` of the model's floating-point weights."""
        try:
            for p in self.hf.parameters():
                if p.is_floating_point():
                    return p.dtype
        except (AttributeError, TypeError):
            pass
        return _float32()

    def to_device(self, batch: dict[str, Any]) -> dict[str, Any]:
        """``batch`` with every tensor moved to :attr:`device` (other values as they are).

        Parameters
        ----------
        batch : dict
            Model inputs, e.g. from :meth:`pad`.

        Returns
        -------
        dict
            A new dict; tensors on :attr:`device`.

        Examples
        --------
        >>> import torch
        >>> from attnkit.testing import tiny_model
        >>> m = tiny_model("bert")
        >>> moved = m.to_device({"input_ids": torch.tensor([[2, 5, 3]]), "note": "kept"})
        >>> moved["input_ids"].device == m.device, moved["note"]
        (True, 'kept')
        """
        import torch

        dev = self.device
        return {k: v.to(dev) if isinstance(v, torch.Tensor) else v for k, v in batch.items()}

    def _ensure_implementation(self) -> None:
        """Put the model back on this wrapper's attention implementation when something else
        (another Model around the same weights, user code) switched it."""
        config = getattr(self.hf, "config", None)
        current = getattr(config, "_attn_implementation", self._implementation)
        if current != self._implementation and hasattr(self.hf, "set_attn_implementation"):
            self.hf.set_attn_implementation(self._implementation)

    @contextlib.contextmanager
    def eager(self) -> Iterator[Model]:
        """Within the block the model runs its eager attention, whose probabilities are part
        of the autograd graph (gradient analyses need them); back to :attr:`capture` after.

        Also what to use to run ``model.hf`` yourself with ``output_attentions=True``
        (attnkit's attention function does not return the maps to the caller).

        Returns
        -------
        contextlib.AbstractContextManager
            Yields this model.

        Examples
        --------
        >>> from attnkit.testing import tiny_model
        >>> m = tiny_model("bert")
        >>> with m.eager():
        ...     print(m.hf.config._attn_implementation)
        eager
        >>> m.hf.config._attn_implementation
        'attnkit'
        """
        hf = self.hf
        if self._implementation == "eager" or not hasattr(hf, "set_attn_implementation"):
            yield self
            return
        hf.set_attn_implementation("eager")
        try:
            yield self
        finally:
            hf.set_attn_implementation(self._implementation)

    # ------------------------------------------------------------ tokenizing
    def encode(self, item: Any) -> Encoding:
        """Tokenize one input and align its tokens to words.

        ``item`` is a text, a pair ``(text_a, text_b)``, a list of words, a pair of word
        lists, or any object with a ``words`` attribute (a treebank ``Sentence``); or token
        ids (a list of ints, a 1-D integer array or tensor), encoded as given
        (:meth:`encode_ids`). Longer inputs are truncated to :attr:`max_length`
        (``Encoding.truncated``).

        Parameters
        ----------
        item : str, tuple, list, Sentence or token ids
            The input.

        Returns
        -------
        Encoding
            Token ids, tokens, roles, word ids, segments and words of the input.

        Raises
        ------
        EmptyInputError
            For an empty text or word list, or an input with no word tokens.
        InputError
            For an input of another kind, or a pair of a text and a word list.

        Examples
        --------
        >>> from attnkit.testing import tiny_model
        >>> enc = tiny_model("bert").encode("The cat sat.")
        >>> enc.tokens, enc.words, enc.word_ids
        (['[CLS]', 'the', 'cat', 'sat', '.', '[SEP]'], ['The', 'cat', 'sat', '.'], [-1, 0, 1, 2, 3, -1])
        """
        if hasattr(item, "tokens") and hasattr(item, "n_layers") and hasattr(item, "word_ids"):
            return self._encode_attention(item)
        ids = _token_ids(item)
        if ids is not None:
            return self.encode_ids(ids)
        meta: dict[str, Any] = {}
        if hasattr(item, "words") and not isinstance(item, (str, list, tuple)):
            meta = {"sent_id": getattr(item, "id", None)}
            item = list(item.words)
        if isinstance(item, str):
            parts: tuple = (item,)
        elif isinstance(item, tuple) and len(item) == 2:
            parts = item
        elif isinstance(item, list):
            parts = (item,)
        else:
            raise InputError(
                f"Cannot attend to a {type(item).__name__}: give a text, a (text_a, text_b) "
                "pair, a list of words or a Sentence."
            )
        for p in parts:
            if isinstance(p, str):
                if not validate.text(p).strip():
                    raise EmptyInputError("The input text is empty; give at least one word.")
            elif isinstance(p, list):
                if not p or not all(isinstance(w, str) and validate.text(w, "word").strip() for w in p):
                    raise EmptyInputError(
                        "The word list is empty or holds empty words; give non-empty strings."
                    )
            else:
                raise InputError(f"A pair must hold two texts or two word lists, got {type(p).__name__}.")
        split = isinstance(parts[0], list)
        if split != isinstance(parts[-1], list):
            raise InputError("A pair must hold two texts or two word lists, not one of each.")
        kwargs: dict[str, Any] = dict(is_split_into_words=split, return_offsets_mapping=not split)
        tok = self._tokenizer_for(split)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            full = tok(*parts, truncation=False, verbose=False, **kwargs)
        truncated = len(full["input_ids"]) > self.max_length
        enc = full
        if truncated:
            enc = tok(*parts, truncation=True, max_length=self.max_length, **kwargs)
        words, word_offset = self._words(parts, full, split)
        ids = list(enc["input_ids"])
        tokens = tok.convert_ids_to_tokens(ids)
        seq_ids = enc.sequence_ids()
        wids = enc.word_ids()
        roles, word_ids, segments = [], [], []
        for pos, (tid, w, s) in enumerate(zip(tokens, wids, seq_ids)):
            if w is None or s is None:
                roles.append(self._special_role(tid, pos))
                word_ids.append(-1)
                segments.append(-1)
            else:
                roles.append("word")
                word_ids.append(int(w) + word_offset[s])
                segments.append(int(s))
        if "word" not in roles:
            raise EmptyInputError("The input has no tokens besides special tokens.")
        type_ids = enc.get("token_type_ids") if self._accepts_type_ids else None
        return Encoding(ids, tokens, roles, word_ids, segments, words,
                        list(type_ids) if type_ids is not None else None, truncated, meta,
                        full_length=len(full["input_ids"]))

    def _encode_attention(self, att: Any) -> Encoding:
        """The input an ``Attention``/``LazyAttention`` of this model was computed on: its
        own token ids, tokens, roles and words (never its text tokenised again)."""
        ids = getattr(att, "input_ids", None)
        if ids is None or getattr(att, "level", "token") != "token":
            raise InputError(
                f"This {type(att).__name__} keeps no token ids (word level, or built from maps); "
                "pass the text it was computed from, or attention from model.attend(text)."
            )
        if getattr(att, "model", "") and att.model != self.name:
            raise InputError(f"This attention was computed by {att.model!r}, not {self.name!r}; "
                             "pass its text, or attention of this model.")
        ids = validate.token_ids(ids, len(self.tokenizer)).tolist()
        if len(ids) > self.max_length:
            raise InputError(f"This attention has {len(ids)} tokens, more than the model's "
                             f"{self.max_length} positions.")
        roles = [str(r) for r in att.roles]
        segs = getattr(att, "segments", None)
        segments = [0 if r == "word" else -1 for r in roles] if segs is None else \
            [int(s) for s in segs]
        type_ids = [max(s, 0) for s in segments] if self._accepts_type_ids else None
        return Encoding(ids, list(att.tokens), roles, [int(w) for w in att.word_ids], segments,
                        list(att.words), type_ids, False, full_length=len(ids))

    def encode_ids(self, ids: Sequence[int]) -> Encoding:
        """Token ids as one input, exactly as given (no special tokens added or removed).

        Tokens come from ``convert_ids_to_tokens``; the tokenizer's special ids get the roles
        "cls"/"sep"/"special", every other id is a word of its own (its decoded text).

        Parameters
        ----------
        ids : sequence of int
            Token ids of this model's tokenizer.

        Returns
        -------
        Encoding
            Truncated to :attr:`max_length` (``Encoding.truncated``).

        Raises
        ------
        InputError
            When an id is outside the tokenizer's vocabulary.
        EmptyInputError
            When there are no ids, or only special ones.

        Examples
        --------
        >>> from attnkit.testing import tiny_model
        >>> m = tiny_model("bert")
        >>> enc = m.encode_ids([m.tokenizer.cls_token_id, 5, 6, m.tokenizer.sep_token_id])
        >>> enc.roles, enc.word_ids
        (['cls', 'word', 'word', 'sep'], [-1, 0, 1, -1])
        """
        if isinstance(ids, (str, bytes)) or not hasattr(ids, "__iter__"):
            raise InputError(f"ids must be a sequence of token ids (ints); got {ids!r}.")
        ids = [validate.integer(i, "ids") for i in ids]
        if not ids:
            raise EmptyInputError("The token id list is empty; give at least one id.")
        size = len(self.tokenizer)
        bad = [i for i in ids if not 0 <= i < size]
        if bad:
            raise InputError(
                f"Token id {bad[0]} is outside the tokenizer's vocabulary (0 to {size - 1}); "
                "give ids of this model's tokenizer."
            )
        full_length = len(ids)
        truncated = full_length > self.max_length
        ids = ids[: self.max_length]
        tokens = self.tokenizer.convert_ids_to_tokens(ids)
        special = set(self.tokenizer.all_special_ids)
        roles: list[str] = []
        word_ids: list[int] = []
        words: list[str] = []
        for pos, (tid, tok) in enumerate(zip(ids, tokens)):
            if tid in special:
                roles.append(self._special_role(tok, pos))
                word_ids.append(-1)
            else:
                roles.append("word")
                word_ids.append(len(words))
                words.append(self.tokenizer.decode([tid]).strip() or tok)
        if not words:
            raise EmptyInputError("The input has no tokens besides special tokens.")
        segments = [0 if r == "word" else -1 for r in roles]
        type_ids = [0] * len(ids) if self._accepts_type_ids else None
        return Encoding(ids, tokens, roles, word_ids, segments, words, type_ids, truncated,
                        full_length=full_length)

    def _tokenizer_for(self, split: bool):
        """The tokenizer for pre-split words: byte-level BPE tokenizers (GPT-2, RoBERTa)
        take them only with a prefix space, so a variant with one is built once."""
        from tokenizers import pre_tokenizers

        pre = self.tokenizer.backend_tokenizer.pre_tokenizer
        if not split or not isinstance(pre, pre_tokenizers.ByteLevel) or pre.add_prefix_space:
            return self.tokenizer
        if self._prefix_tok is None:
            import copy

            tok = copy.deepcopy(self.tokenizer)
            tok.backend_tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(
                add_prefix_space=True, use_regex=pre.use_regex
            )
            tok.add_prefix_space = True
            self._prefix_tok = tok
        return self._prefix_tok

    def _special_role(self, token: str, pos: int) -> str:
        if token == self.cls_token and (pos == 0 or self.cls_token != self.sep_token):
            return "cls"
        if token == self.sep_token:
            return "sep"
        return "special"

    @staticmethod
    def _words(parts: tuple, full: Any, split: bool) -> tuple[list[str], dict[int, int]]:
        """Words of every part (from the untruncated encoding) and each part's offset."""
        if split:
            words = [w for p in parts for w in p]
            return words, {0: 0, 1: len(parts[0])}
        spans: dict[tuple[int, int], list[int]] = {}
        for w, s, (a, b) in zip(full.word_ids(), full.sequence_ids(), full["offset_mapping"]):
            if w is None or s is None:
                continue
            span = spans.setdefault((s, w), [a, b])
            span[0], span[1] = min(span[0], a), max(span[1], b)
        words, offset = [], {0: 0, 1: 0}
        for s, text in enumerate(parts):
            keys = sorted(k for k in spans if k[0] == s)
            offset[s] = len(words)
            words.extend(text[spans[k][0]:spans[k][1]].strip() for k in keys)
        return words, offset

    # ------------------------------------------------------------ forward
    def pad(self, encodings: Sequence[Encoding]) -> dict[str, Any]:
        """Right-padded model inputs of a batch.

        Parameters
        ----------
        encodings : sequence of Encoding
            The batch (:meth:`encode`).

        Returns
        -------
        dict
            ``input_ids``, ``attention_mask`` (long CPU tensors ``[batch, width]``;
            :meth:`to_device` moves them) and ``token_type_ids`` where the model takes them.

        Examples
        --------
        >>> from attnkit.testing import tiny_model
        >>> m = tiny_model("bert")
        >>> batch = m.pad([m.encode("The cat sat."), m.encode("We read it now.")])
        >>> sorted(batch), batch["attention_mask"].tolist()
        (['attention_mask', 'input_ids', 'token_type_ids'], [[1, 1, 1, 1, 1, 1, 0], [1, 1, 1, 1, 1, 1, 1]])
        """
        import torch

        width = max(len(e) for e in encodings)
        ids = torch.full((len(encodings), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(encodings), width), dtype=torch.long)
        types = torch.zeros((len(encodings), width), dtype=torch.long)
        for i, e in enumerate(encodings):
            ids[i, : len(e)] = torch.tensor(e.input_ids)
            mask[i, : len(e)] = 1
            if e.type_ids is not None:
                types[i, : len(e)] = torch.tensor(e.type_ids)
        batch = {"input_ids": ids, "attention_mask": mask}
        if self._accepts_type_ids:
            batch["token_type_ids"] = types
        return batch

    def record(self, encodings: Sequence[Encoding], recorders: Sequence[Recorder]) -> int:
        """One forward pass of a batch on :attr:`device` with ``recorders`` attached to every
        attention layer (:mod:`attnkit.runtime.capture`); returns the number of attention calls.

        Parameters
        ----------
        encodings : sequence of Encoding
            The batch (:meth:`encode`), right-padded by :meth:`pad`.
        recorders : sequence of Recorder
            Callables taking each layer's :class:`~attnkit.runtime.capture.AttentionCall`; a
            recorder's ``forward_options`` go to the forward, and its ``finish(output)`` is
            called with the forward's output.

        Returns
        -------
        int
            Attention calls seen (one per layer for encoder-only and decoder-only models).

        Raises
        ------
        CaptureError
            When the model keeps the eager path (:attr:`capture` is ``"eager"``).
        NoAttentionError
            When no attention layer called attnkit's function.

        Examples
        --------
        >>> from attnkit.runtime.capture import DenseRecorder
        >>> from attnkit.testing import tiny_model
        >>> m = tiny_model("llama")
        >>> encs = [m.encode("The cat sat."), m.encode("We read.")]
        >>> rec = DenseRecorder([len(e) for e in encs], m.n_layers, m.n_heads)
        >>> m.record(encs, [rec])  # one call per layer
        2
        >>> rec.maps[1].shape == (m.n_layers, m.n_heads, len(encs[1]), len(encs[1]))
        True
        """
        import torch

        from .capture import recording

        if self.capture != "interface":
            raise CaptureError(
                f"{self.name} keeps its eager attention path (its attention does not go through "
                "transformers' attention interface), so recorders cannot be attached to it."
            )
        self._ensure_implementation()
        kwargs = self.to_device(self.pad(encodings))
        for r in recorders:
            kwargs.update(getattr(r, "forward_options", {}))
        with torch.inference_mode(), recording(recorders) as session:
            out = self.base(**kwargs, **self._forward_options)
        for r in recorders:
            if hasattr(r, "finish"):
                r.finish(out)
        if session.calls == 0:
            raise NoAttentionError(
                f"{self.name} ran no attention layer through attnkit's attention function; "
                "load it with attnkit.load, or wrap it with capture='eager'."
            )
        return session.calls

    def run(
        self, encodings: Sequence[Encoding], *, embeddings: bool = False, measure: str = "weights",
        recorders: Sequence[Recorder] = (),
    ) -> tuple[list[np.ndarray], list[np.ndarray] | None]:
        """Forward a batch on the model's device; returns per-item float32 maps
        ``[L, H, n_i, n_i]`` (padding stripped, numpy on the CPU) and, with
        ``embeddings=True``, per-item input embeddings ``[n_i, d]``.

        Parameters
        ----------
        encodings : sequence of Encoding
            The batch (:meth:`encode`).
        embeddings : bool
            Also return each item's input (static) embeddings.
        measure : str
            What the maps hold (:mod:`attnkit.runtime.measures`): ``"weights"``, ``"norm"``,
            ``"norm+residual"``, ``"alti"`` (one forward) or ``"grad×attn"`` (one forward and
            one backward, default objective). The mixed measures have ``H = 1``.
        recorders : sequence of Recorder
            More recorders of :mod:`attnkit.runtime.capture` (e.g.
            :class:`~attnkit.core.qkstates.QKRecorder`): they run in the same forward as the
            weights, or in a forward of their own for other measures; models that keep
            their eager path do not run them.

        Returns
        -------
        tuple
            ``(maps, embeddings or None)``, lists with one array per item.

        Raises
        ------
        NoAttentionError
            When the model returned no attention probabilities.

        Examples
        --------
        >>> from attnkit.testing import tiny_model
        >>> m = tiny_model("bert")
        >>> encs = [m.encode("The cat sat."), m.encode("We read it now.")]
        >>> maps, embs = m.run(encs, embeddings=True)
        >>> [x.shape for x in maps], embs[0].shape
        ([(2, 2, 6, 6), (2, 2, 7, 7)], (6, 16))
        """

        lengths = [len(e) for e in encodings]
        if measure != "weights":
            from .measures import measure_maps

            maps = measure_maps(self, encodings, measure=measure)
            if recorders and self.capture == "interface":
                self.record(encodings, list(recorders))
        elif self.capture == "interface":
            from .capture import DenseRecorder

            rec = DenseRecorder(lengths, self.n_layers, self.n_heads)
            self.record(encodings, [rec, *recorders])
            if rec.layers_seen != self.n_layers:
                raise NoAttentionError(
                    f"{self.name} ran {rec.layers_seen} attention layers through attnkit's "
                    f"function but has {self.n_layers}; load it with capture='eager'."
                )
            maps = rec.maps
        else:
            maps = self._run_eager(encodings)
        embs = [self.run_embeddings(e) for e in encodings] if embeddings else None
        return maps, embs

    def _run_eager(self, encodings: Sequence[Encoding]) -> list[np.ndarray]:
        """Per-item maps from the eager path (``output_attentions=True``)."""
        import torch

        lengths = [len(e) for e in encodings]
        self._ensure_implementation()
        kwargs = self.to_device(self.pad(encodings))
        with torch.inference_mode():
            out = self.base(**kwargs, output_attentions=True)
        atts = getattr(out, "attentions", None)
        if not atts or any(a is None for a in atts):
            raise NoAttentionError(
                f"{self.name} returned no attention probabilities. attnkit needs "
                "attn_implementation='eager' (SDPA and flash attention return none); load the "
                "model with attnkit.load or call hf_model.set_attn_implementation('eager')."
            )
        # per item [L, H, n, n]: one copy of the unpadded block, no padded [B, L, H, T, T] stack
        return [torch.stack([a[i, :, :n, :n] for a in atts]).float().cpu().numpy()
                for i, n in enumerate(lengths)]

    @property
    def base(self):
        """The bare transformer (no task head): what attention extraction runs."""
        return getattr(self.hf, "base_model", self.hf)

    def dense_bytes(self, n: int) -> int:
        """Bytes of the float32 maps ``[L, H, n, n]`` of an ``n``-token input.

        Parameters
        ----------
        n : int
            Tokens of the input.

        Returns
        -------
        int
            ``4 * L * H * n * n``; :meth:`attend` goes lazy above
            :data:`LAZY_ABOVE_BYTES`.

        Examples
        --------
        >>> from attnkit.testing import tiny_model
        >>> tiny_model("bert").dense_bytes(10)  # 4 bytes x 2 layers x 2 heads x 10 x 10
        1600
        """
        n = validate.integer(n, "n", minimum=0)
        return 4 * self.n_layers * self.n_heads * n * n

    def attend(self, item: Any, *, level: str = "token", embeddings: bool = False,
               lazy: bool | None = None, measure: str = "weights") -> Attention | LazyAttention:
        """Attention of the model on one input (see :meth:`encode` for accepted inputs).

        Parameters
        ----------
        item : text, pair, word list or Sentence
            The input.
        level : str
            ``"token"`` maps, or ``"word"`` pooled to words (:meth:`Attention.to_words`).
        embeddings : bool
            Also keep the input embeddings ``[n, d]``.
        lazy : bool, optional
            ``True``: a :class:`~attnkit.runtime.lazy.LazyAttention` (queries, keys and row
            log-sum-exps per layer; maps computed on demand); ``False``: dense maps
            ``[layer, head, n, n]``; ``None``: lazy when the dense maps would pass
            :data:`LAZY_ABOVE_BYTES` (1 GiB) and the model's attention goes through the
            attention interface.
        measure : str
            What the maps hold (:mod:`attnkit.runtime.measures`): ``"weights"`` (attention
            probabilities), ``"norm"`` (Kobayashi et al. 2020), ``"norm+residual"``
            (Kobayashi et al. 2021; one mixed head per layer), ``"alti"`` (Ferrando et al.
            2022; one mixed head per layer) or ``"grad×attn"`` (its default objective;
            :func:`attnkit.runtime.measures.grad_attn` takes others). Lazy capture holds weights
            only.

        Returns
        -------
        Attention or LazyAttention
            Rows are *from*, columns *to*; rows of weights sum to 1 (other measures:
            see :mod:`attnkit.runtime.measures`); ``measure`` says which.

        Raises
        ------
        CaptureError
            For ``lazy=True`` on a model that keeps the eager path.
        InputTooLongError
            When lazy capture gets an input longer than the model's positions (it is never
            truncated silently). Dense capture truncates it with a
            :class:`~attnkit.errors.TruncationWarning`.
        InputError
            For an unknown measure, or ``lazy=True`` with a measure other than weights.
        UnsupportedModelError
            When a measure cannot be computed for this architecture.

        Examples
        --------
        >>> from attnkit.testing import tiny_model
        >>> model = tiny_model("llama")
        >>> att = model.attend("The cat sat on the mat.", lazy=True)
        >>> type(att).__name__, att.map(0, 1).shape == (len(att), len(att))
        ('LazyAttention', True)
        >>> alti = model.attend("The cat sat on the mat.", measure="alti")
        >>> alti.measure, alti.n_heads, bool(abs(alti.maps.sum(-1) - 1).max() < 1e-5)
        ('alti', 1, True)
        """
        from .measures import check_measure

        level = validate.level(level)
        measure = check_measure(measure=measure)
        enc = self.encode(item)
        if measure != "weights":
            if lazy:
                raise InputError(f"Lazy capture holds attention weights only; measure={measure!r} "
                                 "needs lazy=False.")
            lazy = False
        if lazy is None:
            lazy = self.capture == "interface" and self.dense_bytes(len(enc)) > LAZY_ABOVE_BYTES
        if lazy:
            if self.capture != "interface":
                raise CaptureError(
                    f"lazy=True needs a model whose attention goes through transformers' "
                    f"attention interface; {self.name} ({type(self.hf).__name__}) keeps its "
                    "eager path. Use lazy=False (dense maps)."
                )
            if enc.truncated:
                raise InputTooLongError(
                    f"The input has {enc.full_length} tokens but {self.name} has "
                    f"{self.max_length} positions; lazy capture never truncates. Shorten the "
                    "input, or pass lazy=False to truncate it with a warning."
                )
            att: Attention | LazyAttention = self._attend_lazy(enc, embeddings)
        else:
            if enc.truncated:
                from ..errors import TruncationWarning

                warnings.warn(
                    f"The input has more than {self.max_length} tokens and was truncated.",
                    TruncationWarning,
                    stacklevel=2,
                )
            from ..core.qkstates import QKRecorder

            qk = QKRecorder([len(enc)])
            maps, embs = self.run([enc], embeddings=embeddings, measure=measure, recorders=[qk])
            att = self.to_attention(enc, maps[0], embeddings=embs[0] if embs else None,
                                    measure=measure)
            att.qk = qk.states()[0] if qk.queries else None
        return att.to_words() if level == "word" else att

    def _attend_lazy(self, enc: Encoding, embeddings: bool) -> LazyAttention:
        from .capture import LazyRecorder
        from .lazy import LazyAttention

        rec = LazyRecorder(len(enc), self.n_layers)
        self.record([enc], [rec])
        emb = self.run_embeddings(enc) if embeddings else None
        return LazyAttention(rec.layers, embeddings=emb, **self._alignment(enc))

    def run_embeddings(self, encoding: Encoding) -> np.ndarray:
        """The float32 input embeddings ``[n, d]`` of one encoding (numpy, CPU).

        Parameters
        ----------
        encoding : Encoding
            One input (:meth:`encode`).

        Returns
        -------
        ndarray
            Float32 ``[n, d]``: the rows of the input embedding matrix.

        Examples
        --------
        >>> from attnkit.testing import tiny_model
        >>> m = tiny_model("bert")
        >>> m.run_embeddings(m.encode("The cat sat.")).shape
        (6, 16)
        """
        import torch

        ids = torch.tensor([encoding.input_ids], device=self.device)
        with torch.inference_mode():
            return self.hf.get_input_embeddings()(ids)[0].float().cpu().numpy()

    def _alignment(self, enc: Encoding) -> dict[str, Any]:
        """What dense and lazy attention take from an encoding (and from the model)."""
        meta = {**enc.meta, "sinks": True} if self.sinks else dict(enc.meta)
        return dict(tokens=enc.tokens, roles=np.array(enc.roles), word_ids=np.array(enc.word_ids),
                    words=enc.words, segments=np.array(enc.segments), meta=meta,
                    model=self.name, causal=self.causal, input_ids=np.asarray(enc.input_ids))

    @renamed(positional=("emb",), enc="encoding", emb="embeddings")
    def to_attention(self, encoding: Encoding, maps: np.ndarray, *,
                     embeddings: np.ndarray | None = None,
                     measure: str = "weights") -> Attention:
        """Wrap one item's maps ``[L, H, n, n]`` (of ``measure``) with its encoding's
        alignment.

        Parameters
        ----------
        encoding : Encoding
            The input the maps were computed on.
        maps : ndarray
            Its ``[L, H, n, n]`` maps (from :meth:`run`).
        embeddings : ndarray, optional
            Its ``[n, d]`` input embeddings.
        measure : str
            What the maps hold (:mod:`attnkit.runtime.measures`); ``"weights"`` by default.

        Returns
        -------
        Attention
            Token level, labelled with this model's name.

        Raises
        ------
        InputError
            When the maps do not fit the encoding or are not attention weights.

        Examples
        --------
        >>> from attnkit.testing import tiny_model
        >>> m = tiny_model("bert")
        >>> enc = m.encode("The cat sat.")
        >>> att = m.to_attention(enc, m.run([enc])[0][0])
        >>> att.tokens == enc.tokens, att.model == m.name
        (True, True)
        """
        return Attention(maps=maps, embeddings=embeddings, truncated=encoding.truncated,
                         measure=measure, **self._alignment(encoding))


def _float32() -> Any:
    import torch

    return torch.float32


