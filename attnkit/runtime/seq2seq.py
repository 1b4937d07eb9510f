"""Encoder–decoder models (T5, BART, Marian, ...): encoder, decoder and cross-attention.

:func:`attnkit.load` returns a :class:`Seq2SeqModel` for a folder whose config is an
encoder–decoder. ``model.attend(source, target)`` (the target given) and
``model.attend(source, generate=True, max_new_tokens=...)`` (the model's own greedy output)
return one :class:`~attnkit.core.cross.Seq2SeqAttention` with ``.encoder`` (self-attention over
the source), ``.decoder`` (causal self-attention over the target) and ``.cross``
(``[layer, head, target, source]``, rows summing to 1 over the source).

Capture goes through transformers' attention interface like every other model
(:mod:`attnkit.runtime.capture`): one forward runs every layer with the fast kernel, and each call is
told apart by its module (the encoder's layers, the decoder's self-attention, the decoder's
cross-attention). The probabilities are the eager path's (T5's relative position bias
included). With ``lazy=True`` the encoder keeps only queries, keys and row log-sum-exps
(:class:`~attnkit.runtime.lazy.LazyAttention`) for long sources; the decoder and the cross-attention
stay dense (``target x target`` and ``target x source`` per head).

The decoder's input is the decoder start token followed by the tokenised target (with the
end-of-sequence token the tokenizer adds): the sequence the model reads when it is
teacher-forced to produce the target, and the sequence :meth:`Seq2SeqModel.generate` returns.
"""

from __future__ import annotations

import re
import warnings
from typing import Any

import numpy as np

from ..core.attention import Attention, infer_words
from .capture import AttentionCall, LazyRecorder
from ..core.cross import CrossAttention, Seq2SeqAttention
from .encoding import Encoding, PairEncoding
from ..errors import CaptureError, EmptyInputError, InputError, NoAttentionError
from .archs import families
from .model import Model

#: Module names of cross-attention layers in transformers' encoder–decoder models (BART,
#: Marian, mBART, Pegasus: ``encoder_attn``; T5, mT5: ``EncDecAttention``).
CROSS_NAMES = re.compile(r"(encoder_attn|EncDecAttention|cross_?attn|crossattention)", re.I)

#: The encoder–decoder families attnkit has been checked on, exact against eager attention
#: (their records in :data:`attnkit.runtime.archs.ARCHS`).
SUPPORTED = families("encoder-decoder")


class Seq2SeqModel(Model):
    """An encoder–decoder model wrapped for attention analysis.

    :func:`attnkit.load` builds one for an encoder–decoder folder; or wrap an in-memory model:
    ``Seq2SeqModel(hf_model, tokenizer)``. Slow (SentencePiece) tokenizers are accepted:
    Marian ships only those.

    Parameters
    ----------
    hf_model : transformers.PreTrainedModel
        An encoder–decoder (``config.is_encoder_decoder``), e.g. ``T5ForConditionalGeneration``.
    tokenizer : transformers.PreTrainedTokenizerBase
        Its tokenizer.
    name, path : str
        For labels and provenance.
    capture : str
        As for :class:`~attnkit.Model`.

    Raises
    ------
    UnsupportedModelError
        When the model is not an encoder–decoder.

    Examples
    --------
    >>> from attnkit.testing import tiny_seq2seq
    >>> tiny_seq2seq("t5")
    Seq2SeqModel('tiny-t5', encoder 2 layers x 2 heads, decoder 2 layers x 2 heads)
    """

    family = "encoder-decoder"

    def __init__(self, hf_model: Any, tokenizer: Any, *, name: str = "", path: str = "",
                 capture: str = "auto") -> None:
        from ..errors import UnsupportedModelError

        if not getattr(hf_model.config, "is_encoder_decoder", False):
            raise UnsupportedModelError(
                f"{name or type(hf_model).__name__} is not an encoder-decoder model; load it "
                "with attnkit.load (or wrap it with attnkit.Model).")
        super().__init__(hf_model, tokenizer, name=name, path=path, capture=capture)
        config = hf_model.config
        self.causal = False
        self.n_decoder_layers = int(getattr(config, "decoder_layers", None)
                                    or getattr(config, "num_decoder_layers", None)
                                    or self.n_layers)
        self.n_decoder_heads = int(getattr(config, "decoder_attention_heads", None)
                                   or self.n_heads)
        start = getattr(config, "decoder_start_token_id", None)
        if start is None:
            start = getattr(config, "pad_token_id", None)
        if start is None:
            raise UnsupportedModelError(
                f"{self.name} has no decoder_start_token_id (nor pad_token_id) in its config; "
                "set model.hf.config.decoder_start_token_id.")
        self.decoder_start_id = int(start)
        encoder = hf_model.get_encoder()
        self._encoder_modules = {id(m) for m in encoder.modules()}
        self._cross_modules = {id(m) for n, m in hf_model.named_modules()
                               if CROSS_NAMES.search(n) and id(m) not in self._encoder_modules}

    @staticmethod
    def preprocessor(path: Any, *, local_files_only: bool = True,
                     trust_remote_code: bool = False) -> Any:
        """The tokenizer of a model folder: the fast one where there is one, else the slow
        (SentencePiece) one.

        Parameters
        ----------
        path : str or Path
            A model folder or a cached hub id.
        local_files_only, trust_remote_code : bool
            Passed to transformers.

        Returns
        -------
        transformers.PreTrainedTokenizerBase

        Examples
        --------
        >>> import tempfile
        >>> from attnkit.runtime.seq2seq import Seq2SeqModel
        >>> from attnkit.testing import tiny_seq2seq
        >>> with tempfile.TemporaryDirectory() as folder:
        ...     _ = tiny_seq2seq("t5").tokenizer.save_pretrained(folder)
        ...     Seq2SeqModel.preprocessor(folder).is_fast
        True
        """
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(path, local_files_only=local_files_only,
                                             trust_remote_code=trust_remote_code)

    @staticmethod
    def auto_class(config: Any, task: str = "auto") -> Any:
        """The transformers auto class that loads ``config``: the sequence-to-sequence LM
        (``"auto"``), or the bare model (``"base"``).

        Parameters
        ----------
        config : transformers.PretrainedConfig
            An encoder–decoder config.
        task : str
            ``"auto"`` or ``"base"``.

        Returns
        -------
        type

        Raises
        ------
        InputError
            For another task.

        Examples
        --------
        >>> from attnkit.runtime.seq2seq import Seq2SeqModel
        >>> from attnkit.testing import tiny_seq2seq
        >>> Seq2SeqModel.auto_class(tiny_seq2seq("t5").config).__name__
        'AutoModelForSeq2SeqLM'
        """
        import transformers as tf

        if task == "base":
            return tf.AutoModel
        if task != "auto":
            raise InputError(f"task must be 'auto' or 'base', not {task!r}.")
        archs = " ".join(getattr(config, "architectures", None) or [])
        return tf.AutoModel if archs.endswith("Model") and "MT" not in archs and (
            "Generation" not in archs) and archs else tf.AutoModelForSeq2SeqLM

    def __repr__(self) -> str:
        return (f"Seq2SeqModel({self.name!r}, encoder {self.n_layers} layers x {self.n_heads} "
                f"heads, decoder {self.n_decoder_layers} layers x {self.n_decoder_heads} heads)")

    @property
    def base(self):
        """The model whose forward takes ``input_ids`` and ``decoder_input_ids``."""
        return getattr(self.hf, "base_model", self.hf)

    # ------------------------------------------------------------ tokenizing
    def encode(self, item: Any) -> Encoding:
        """Tokenize a source text (or word list, or token ids) and align it to words.

        Fast tokenizers align through their offsets (:meth:`attnkit.Model.encode`); slow
        (SentencePiece) ones through their word-start markers (``▁``).

        Parameters
        ----------
        item : str, list of str or token ids
            The source.

        Returns
        -------
        Encoding

        Raises
        ------
        EmptyInputError
            For an empty text.
        InputError
            For an input of another kind.

        Examples
        --------
        >>> from attnkit.testing import tiny_seq2seq
        >>> tiny_seq2seq("t5").encode("The cat sat.").tokens
        ['▁the', '▁cat', '▁sat', '.', '</s>']
        """
        if getattr(self.tokenizer, "is_fast", False) or not isinstance(item, (str, list)):
            return super().encode(item)
        text = " ".join(item) if isinstance(item, list) else item
        if not text.strip():
            raise EmptyInputError("The input text is empty; give at least one word.")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ids = list(self.tokenizer(text, truncation=False)["input_ids"])
        return self._from_ids(ids, start=False, truncate=True)

    def encode_target(self, target: Any) -> Encoding:
        """The decoder's input for a target: the decoder start token, then the tokenised
        target (with the end-of-sequence token the tokenizer adds). Token ids are taken as
        the whole decoder input, start token included (what :meth:`generate` returns).

        Parameters
        ----------
        target : str or token ids
            The target text, or decoder input ids.

        Returns
        -------
        Encoding
            The start token has role ``"cls"``.

        Raises
        ------
        EmptyInputError
            When the target is empty or tokenises to nothing but special tokens.
        InputError
            When the target is not a text or token ids, or an id is out of the vocabulary.

        Examples
        --------
        >>> from attnkit.testing import tiny_seq2seq
        >>> tiny_seq2seq("t5").encode_target("A cat.").tokens
        ['<pad>', '▁a', '▁cat', '.', '</s>']
        """
        if not isinstance(target, str):
            if isinstance(target, list) and target and all(isinstance(t, str) for t in target):
                raise InputError("A target must be a text or token ids, not a word list: "
                                 "join the words with spaces.")
            try:  # token ids, checked (else InputError)
                ids = Model.encode(self, target).input_ids
            except EmptyInputError as exc:
                raise EmptyInputError(f"The target does not tokenise into any word: {exc}") from exc
            return self._from_ids(list(ids), start=True, truncate=False)
        if not target.strip():
            raise EmptyInputError("The target text is empty; give at least one word, or "
                                  "generate=True to read the model's own output.")
        if getattr(self.tokenizer, "is_fast", False):
            enc = Model.encode(self, target)
            return Encoding(
                [self.decoder_start_id, *enc.input_ids],
                [str(self.tokenizer.convert_ids_to_tokens(self.decoder_start_id)), *enc.tokens],
                ["cls", *enc.roles], [-1, *enc.word_ids], [-1, *enc.segments], enc.words,
                None, enc.truncated, full_length=(enc.full_length or len(enc)) + 1)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ids = list(self.tokenizer(text_target=target, truncation=False)["input_ids"])
        return self._from_ids([self.decoder_start_id, *ids], start=True, truncate=False)

    def _from_ids(self, ids: list[int], *, start: bool, truncate: bool) -> Encoding:
        """An Encoding of ids, words grouped by the tokens' word-start markers."""
        size = len(self.tokenizer)
        bad = [i for i in ids if not 0 <= int(i) < max(size, self.config.vocab_size)]
        if bad:
            raise InputError(f"Token id {bad[0]} is outside the vocabulary (0 to {size - 1}).")
        full = len(ids)
        truncated = truncate and full > self.max_length
        ids = [int(i) for i in (ids[: self.max_length] if truncate else ids)]
        tokens = [str(t) for t in self.tokenizer.convert_ids_to_tokens(ids)]
        special = set(self.tokenizer.all_special_ids)
        roles = []
        for pos, tid in enumerate(ids):
            if start and pos == 0:
                roles.append("cls")
            elif tid in special:
                roles.append("sep" if tid == self.tokenizer.eos_token_id else "special")
            else:
                roles.append("word")
        if "word" not in roles:
            raise EmptyInputError("The input has no tokens besides special tokens: it does not "
                                  "tokenise into any word of this model's vocabulary.")
        word_ids, words = infer_words(tokens, roles)
        segments = [0 if r == "word" else -1 for r in roles]
        return Encoding(ids, tokens, roles, word_ids, segments, words, None, truncated,
                        full_length=full)

    # ------------------------------------------------------------ running
    def generate(self, item: Any, *, max_new_tokens: int = 32, seed: int = 0) -> list[int]:
        """The model's own greedy output for a source: decoder ids, start token first.

        Parameters
        ----------
        item : str, list of str or token ids
            The source.
        max_new_tokens : int
            The most tokens generated.
        seed : int
            Seeds torch before generating (greedy decoding is deterministic; the seed covers
            models whose generation config samples, which attnkit switches off).

        Returns
        -------
        list of int
            The decoder ids (the start token, the generated tokens, end of sequence if
            produced).

        Examples
        --------
        >>> from attnkit.testing import tiny_seq2seq
        >>> m = tiny_seq2seq("bart")
        >>> ids = m.generate("The cat sat.", max_new_tokens=4)
        >>> ids[0] == m.decoder_start_id, 2 <= len(ids) <= 5
        (True, True)
        """
        import torch

        if max_new_tokens < 1:
            raise InputError(f"max_new_tokens must be at least 1; got {max_new_tokens}.")
        enc = self.encode(item)
        torch.manual_seed(seed)
        self._ensure_implementation()
        ids = torch.tensor([enc.input_ids], device=self.device)
        with torch.inference_mode(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = self.hf.generate(input_ids=ids, attention_mask=torch.ones_like(ids),
                                   max_new_tokens=max_new_tokens, do_sample=False, num_beams=1,
                                   decoder_start_token_id=self.decoder_start_id)
        return [int(i) for i in out[0].tolist()]

    def attend(self, item: Any, target: Any = None, *, generate: bool = False,  # type: ignore[override]
               max_new_tokens: int = 32, seed: int = 0, level: str = "token",
               lazy: bool | None = None) -> Seq2SeqAttention:
        """Encoder, decoder and cross-attention of the model on a (source, target) pair.

        Parameters
        ----------
        item : str, list of str or token ids
            The source.
        target : str or token ids, optional
            The target (teacher-forced); token ids are the whole decoder input. Leave it out
            with ``generate=True``.
        generate : bool
            Read the model's own greedy output as the target (:meth:`generate`).
        max_new_tokens : int
            The most tokens generated.
        seed : int
            Seeds the generation.
        level : str
            ``"token"``, or ``"word"`` (pooled on both sides, Clark et al. 2019).
        lazy : bool, optional
            ``True``: the encoder's self-attention is a :class:`~attnkit.runtime.lazy.LazyAttention`
            (for long sources); ``None``: lazy when its dense maps would pass
            :data:`attnkit.runtime.model.LAZY_ABOVE_BYTES`.

        Returns
        -------
        Seq2SeqAttention
            ``.encoder`` ``[L_enc, H, source, source]``, ``.decoder``
            ``[L_dec, H, target, target]`` (causal), ``.cross`` ``[L_dec, H, target, source]``;
            rows are *from*, columns *to*, rows sum to 1.

        Raises
        ------
        InputError
            When both or neither of ``target`` and ``generate=True`` are given.
        EmptyInputError
            When the source or the target has no words.
        CaptureError
            For ``lazy=True`` on a model with a learned position bias (T5) or on the eager
            path.

        Examples
        --------
        >>> from attnkit.testing import tiny_seq2seq
        >>> model = tiny_seq2seq("t5")
        >>> s2s = model.attend("The cat sat on the mat.", "A cat sat.")
        >>> s2s.cross.shape, s2s.encoder.maps.shape, s2s.decoder.causal
        ((2, 2, 6, 8), (2, 2, 8, 8), True)
        >>> bool(abs(s2s.cross.maps.sum(-1) - 1).max() < 1e-5)
        True
        """
        from .model import LAZY_ABOVE_BYTES

        if (target is None) == (not generate):
            raise InputError("Give a target (model.attend(source, target)) or generate=True "
                             "(model.attend(source, generate=True)), not both or neither.")
        src = self.encode(item)
        if generate:
            target = self.generate(src.input_ids, max_new_tokens=max_new_tokens, seed=seed)
        tgt = self.encode_target(target)
        if lazy is None:
            lazy = (self.capture == "interface"
                    and self.dense_bytes(len(src)) > LAZY_ABOVE_BYTES)
        if lazy and self.capture != "interface":
            raise CaptureError(f"lazy=True needs attention through transformers' attention "
                               f"interface; {self.name} keeps its eager path. Use lazy=False.")
        from ..errors import TruncationWarning

        for side, enc in (("source", src), ("target", tgt)):  # never silently, either side
            if enc.truncated:
                warnings.warn(f"The {side} has more than {self.max_length} tokens "
                              f"({enc.full_length}) and was truncated to {len(enc)}.",
                              TruncationWarning, stacklevel=2)
        out = self.attend_encoded(src, tgt, lazy=bool(lazy))
        out.meta["generated"] = bool(generate)
        return out.to_words() if level == "word" else out

    def attend_encoded(self, source: Encoding, target: Encoding, *,
                       lazy: bool = False) -> Seq2SeqAttention:
        """Encoder, decoder and cross-attention of one encoded pair, at token level (what
        :meth:`attend` and :func:`attnkit.extract` over pairs run).

        Parameters
        ----------
        source, target : Encoding
            The encoder's and the decoder's inputs (:meth:`encode`, :meth:`encode_target`).
        lazy : bool
            Keep the encoder's self-attention lazily (:meth:`attend`).

        Returns
        -------
        Seq2SeqAttention

        Examples
        --------
        >>> from attnkit.testing import tiny_seq2seq
        >>> m = tiny_seq2seq("bart")
        >>> s2s = m.attend_encoded(m.encode("The cat sat."), m.encode_target("A cat."))
        >>> s2s.cross.shape == m.attend("The cat sat.", "A cat.").cross.shape
        True
        """
        if self.capture == "interface":
            enc_att, dec_maps, cross_maps = self._record_pair(source, target, lazy)
        else:
            enc_maps, dec_maps, cross_maps = self._eager_pair(source, target)
            enc_att = self.to_attention(source, enc_maps)
        return self.wrap(source, target, enc_att, dec_maps, cross_maps)

    def encode_pair(self, item: Any) -> PairEncoding:
        """Tokenize a ``(source, target)`` pair: the source as :meth:`encode`, the target as
        :meth:`encode_target` (what :func:`attnkit.extract` reads of every input).

        Parameters
        ----------
        item : tuple
            ``(source, target)``: the source a text, word list or token ids, the target a
            text or decoder ids.

        Returns
        -------
        PairEncoding

        Raises
        ------
        InputError
            When ``item`` is not a pair (a plain text, say), or either side is not an input.
        EmptyInputError
            When the source or the target has no words (does not tokenise).

        Examples
        --------
        >>> from attnkit.testing import tiny_seq2seq
        >>> pair = tiny_seq2seq("t5").encode_pair(("The cat sat.", "A cat."))
        >>> pair.source.tokens, pair.target.tokens
        (['▁the', '▁cat', '▁sat', '.', '</s>'], ['<pad>', '▁a', '▁cat', '.', '</s>'])
        """
        is_pair = isinstance(item, tuple) or (
            isinstance(item, list) and not all(isinstance(x, str) for x in item))
        if not is_pair or len(item) != 2:
            shown = repr(item) if len(repr(item)) <= 60 else repr(item)[:57] + "..."
            raise InputError(
                f"{self.name} is an encoder-decoder model: every input is a (source, target) "
                f"pair, e.g. ('The cat sat.', 'Le chat.'); got {type(item).__name__} {shown}. "
                "For one source, call model.attend(source, generate=True).")
        source, target = item
        return PairEncoding(self.encode(source), self.encode_target(target))

    def wrap(self, source: Encoding, target: Encoding, encoder: Any, decoder: np.ndarray,
             cross: np.ndarray) -> Seq2SeqAttention:
        """Wrap one pair's maps with both encodings' alignment.

        Parameters
        ----------
        source, target : Encoding
            The encoder's and the decoder's inputs (:meth:`encode`, :meth:`encode_target`).
        encoder : Attention or LazyAttention
            The encoder's self-attention.
        decoder, cross : ndarray
            ``[L_dec, H, target, target]`` and ``[L_dec, H, target, source]``.

        Returns
        -------
        Seq2SeqAttention

        Examples
        --------
        >>> from attnkit.testing import tiny_seq2seq
        >>> m = tiny_seq2seq("bart")
        >>> src, tgt = m.encode("The cat sat."), m.encode_target("A cat.")
        >>> full = m.attend("The cat sat.", "A cat.")
        >>> s2s = m.wrap(src, tgt, full.encoder, full.decoder.maps, full.cross.maps)
        >>> s2s.cross.shape[2:] == (len(tgt), len(src))
        True
        """
        dec = Attention(maps=decoder, tokens=target.tokens, roles=np.array(target.roles),
                        word_ids=np.array(target.word_ids), words=target.words, causal=True,
                        model=self.name, input_ids=np.asarray(target.input_ids))
        cross_att = CrossAttention(
            cross, target.tokens, np.array(target.roles), np.array(target.word_ids),
            target.words, source.tokens, np.array(source.roles), np.array(source.word_ids),
            source.words, model=self.name)
        return Seq2SeqAttention(encoder, dec, cross_att, model=self.name)

    def pair_inputs(self, source: Encoding, target: Encoding) -> dict[str, Any]:
        """The forward's keyword arguments for one pair, on the model's device.

        Parameters
        ----------
        source, target : Encoding
            The encoder's and the decoder's inputs (:meth:`encode`, :meth:`encode_target`).

        Returns
        -------
        dict
            ``input_ids``, ``attention_mask``, ``decoder_input_ids`` (``[1, n]`` tensors) and
            ``use_cache=False``.

        Examples
        --------
        >>> from attnkit.testing import tiny_seq2seq
        >>> m = tiny_seq2seq("t5")
        >>> sorted(m.pair_inputs(m.encode("The cat."), m.encode_target("A cat.")))
        ['attention_mask', 'decoder_input_ids', 'input_ids', 'use_cache']
        """
        import torch

        src, tgt = source, target

        ids = torch.tensor([src.input_ids], device=self.device)
        return dict(input_ids=ids, attention_mask=torch.ones_like(ids),
                    decoder_input_ids=torch.tensor([tgt.input_ids], device=self.device),
                    use_cache=False)

    def _record_pair(self, src: Encoding, tgt: Encoding, lazy: bool) -> tuple[Any, np.ndarray,
                                                                              np.ndarray]:
        import torch

        from .capture import recording
        from .lazy import LazyAttention

        rec = PairRecorder(self, len(src), len(tgt), lazy=lazy)
        self._ensure_implementation()
        with torch.inference_mode(), recording([rec]):
            self.base(**self.pair_inputs(src, tgt))
        rec.check()
        if lazy:
            assert rec.lazy is not None
            return (LazyAttention(rec.lazy.layers, **self._alignment(src)), rec.decoder,
                    rec.cross)
        assert rec.encoder is not None
        return self.to_attention(src, rec.encoder), rec.decoder, rec.cross

    def _eager_pair(self, src: Encoding, tgt: Encoding) -> tuple[np.ndarray, ...]:
        """The three kinds of maps from the eager path (``output_attentions=True``)."""
        import torch

        with self.eager(), torch.inference_mode():
            out = self.base(**self.pair_inputs(src, tgt), output_attentions=True)
        parts = (out.encoder_attentions, out.decoder_attentions, out.cross_attentions)
        if any(not p or any(a is None for a in p) for p in parts):
            raise NoAttentionError(f"{self.name} returned no attention probabilities on its "
                                   "eager path.")
        return tuple(torch.stack([a[0] for a in p]).float().cpu().numpy() for p in parts)

    def kind_of(self, call: AttentionCall) -> str:
        """Which attention a call is: ``"encoder"``, ``"decoder"`` (self) or ``"cross"``.

        Parameters
        ----------
        call : AttentionCall
            One attention layer's call.

        Returns
        -------
        str

        Examples
        --------
        >>> from attnkit.runtime.capture import recording
        >>> from attnkit.testing import tiny_seq2seq
        >>> m = tiny_seq2seq("bart")
        >>> calls = []
        >>> import torch
        >>> with torch.inference_mode(), recording([calls.append]):
        ...     _ = m.base(**m.pair_inputs(m.encode("The cat."), m.encode_target("A cat.")))
        >>> [m.kind_of(c) for c in calls]
        ['encoder', 'encoder', 'decoder', 'cross', 'decoder', 'cross']
        """
        if id(call.module) in self._encoder_modules:
            return "encoder"
        return "cross" if id(call.module) in self._cross_modules else "decoder"


class PairRecorder:
    """Sorts the calls of one encoder–decoder forward into encoder self-attention, decoder
    self-attention and cross-attention, and keeps each dense (or the encoder lazily).

    Parameters
    ----------
    model : Seq2SeqModel
        The model (it tells the calls apart, :meth:`Seq2SeqModel.kind_of`).
    n_source, n_target : int
        Tokens of the source and of the decoder input.
    lazy : bool
        Keep the encoder's queries, keys and log-sum-exps instead of its maps.

    Examples
    --------
    >>> import torch
    >>> from attnkit.runtime.capture import recording
    >>> from attnkit.runtime.seq2seq import PairRecorder
    >>> from attnkit.testing import tiny_seq2seq
    >>> m = tiny_seq2seq("marian")
    >>> src, tgt = m.encode("The cat."), m.encode_target("A cat.")
    >>> rec = PairRecorder(m, len(src), len(tgt), lazy=False)
    >>> with torch.inference_mode(), recording([rec]):
    ...     _ = m.base(**m.pair_inputs(src, tgt))
    >>> rec.cross.shape == (m.n_decoder_layers, m.n_decoder_heads, len(tgt), len(src))
    True
    """

    needs_lse = False
    needs_probabilities = True

    def __init__(self, model: Seq2SeqModel, n_source: int, n_target: int, *, lazy: bool):
        self.model = model
        self.n_source, self.n_target = n_source, n_target
        L, H = model.n_layers, model.n_heads
        Ld, Hd = model.n_decoder_layers, model.n_decoder_heads
        self.encoder = None if lazy else np.empty((L, H, n_source, n_source), dtype=np.float32)
        self.decoder = np.empty((Ld, Hd, n_target, n_target), dtype=np.float32)
        self.cross = np.empty((Ld, Hd, n_target, n_source), dtype=np.float32)
        self.lazy = LazyRecorder(n_source, L) if lazy else None
        self.seen = {"encoder": 0, "decoder": 0, "cross": 0}
        self.needs_lse = bool(lazy)

    def wants(self, call: AttentionCall) -> tuple[bool, bool]:
        """``(log-sum-exps, probabilities)`` this recorder reads from ``call``: the lazy
        encoder needs log-sum-exps only, everything else its probabilities.

        Parameters
        ----------
        call : AttentionCall
            One attention layer's call.

        Returns
        -------
        tuple of bool

        Examples
        --------
        >>> from attnkit.runtime.seq2seq import PairRecorder
        >>> from attnkit.testing import tiny_seq2seq
        >>> PairRecorder(tiny_seq2seq("bart"), 3, 2, lazy=True).needs_lse
        True
        """
        if self.lazy is not None and self.model.kind_of(call) == "encoder":
            return True, False
        return False, True

    def __call__(self, call: AttentionCall) -> None:
        kind = self.model.kind_of(call)
        layer = self.seen[kind]
        self.seen[kind] += 1
        if kind == "encoder" and self.lazy is not None:
            self.lazy(call)
            return
        target = {"encoder": self.encoder, "decoder": self.decoder, "cross": self.cross}[kind]
        assert target is not None
        if layer >= target.shape[0]:
            raise NoAttentionError(f"The model called {kind} attention more often than it has "
                                   f"layers ({target.shape[0]}).")
        p = call.probabilities()[0].cpu().numpy()
        target[layer] = p[:, : target.shape[2], : target.shape[3]]

    def check(self) -> None:
        """Raise when a layer was not seen.

        Raises
        ------
        NoAttentionError
            When fewer calls of a kind came than the model has layers.

        Examples
        --------
        >>> from attnkit.runtime.seq2seq import PairRecorder
        >>> from attnkit.testing import tiny_seq2seq
        >>> PairRecorder(tiny_seq2seq("bart"), 3, 2, lazy=False).check()
        Traceback (most recent call last):
        attnkit.errors.NoAttentionError: ...
        """
        m = self.model
        expect = {"encoder": m.n_layers, "decoder": m.n_decoder_layers,
                  "cross": m.n_decoder_layers}
        for kind, n in expect.items():
            if self.seen[kind] != n:
                raise NoAttentionError(
                    f"{m.name} ran {self.seen[kind]} {kind} attention layers through attnkit's "
                    f"function but has {n}; load it with capture='eager'.")


