"""Errors raised by attnkit. Every message says what was wrong and what to do.

Every error attnkit raises on purpose is an :class:`AttnkitError`; those about bad input are
also ``ValueError`` (or ``FileNotFoundError``) subclasses, so code written against the
built-in exceptions keeps working.

Examples
--------
>>> import numpy as np
>>> import attnkit as ak
>>> from attnkit.errors import AttnkitError, InputError
>>> try:
...     ak.Attention.from_maps(np.full((1, 1, 2, 2), 0.9), ["[CLS]", "[SEP]"])
... except InputError as exc:
...     print(type(exc).__name__, isinstance(exc, (AttnkitError, ValueError)))
InputError True
"""

from __future__ import annotations


class AttnkitError(Exception):
    """Base class of every error attnkit raises on purpose."""


class ModelNotFoundError(AttnkitError):
    """A model name or path could not be resolved without network access, or a model
    folder lacks its weights (:func:`attnkit.load`)."""


class ModelLoadError(AttnkitError):
    """A model's files were found but could not be read (damaged or mismatched weights)."""


class UnsupportedModelError(AttnkitError, ValueError):
    """A model of a kind attnkit does not analyse (an encoder-decoder such as T5 or BART:
    read its encoder or decoder self-attention with :func:`attnkit.from_transformers`), or
    whose architecture does not offer what a computation needs (e.g. an attention measure
    on a model whose output projection attnkit cannot find); the message names what is
    supported."""


class NoAttentionError(AttnkitError):
    """A forward pass returned no attention probabilities."""


class EmptyInputError(AttnkitError, ValueError):
    """An input text, pair or word list was empty."""


class InputError(AttnkitError, ValueError):
    """An input had a type, shape or value attnkit cannot use (including attention maps with
    NaN/inf values or rows that do not sum to 1)."""


class ConllError(AttnkitError, ValueError):
    """A CoNLL-U file was malformed or not text; the message names the file and line."""


class DataNotFoundError(AttnkitError, FileNotFoundError):
    """A data file or folder (treebank, GLUE tsv) was not where it was looked for."""


class StoreError(AttnkitError):
    """An on-disk AttentionSet store is inconsistent with the run that opened it."""


class ClusterError(AttnkitError):
    """A Dask cluster could not be reached, or its workers kept failing on a task; the
    message says which and what to do (work already committed to a store is kept)."""


class TokenizationMismatchError(AttnkitError, ValueError):
    """Two attentions that must share a tokenization do not."""


class TruncationWarning(UserWarning):
    """Some inputs were longer than the model's maximum and were truncated."""


class ReportError(AttnkitError):
    """A notebook could not be read, executed or exported as a report; the message names the
    cell or file and says what to do."""


class DataFormatError(AttnkitError, ValueError):
    """A data file other than CoNLL-U (e.g. a GLUE tsv) was malformed or not text; the
    message names the file and line."""


class DeviceError(AttnkitError, ValueError):
    """A device or dtype was asked for that this machine cannot run (no such GPU, a dtype
    the device does not support); the message says what is available."""


class CaptureError(AttnkitError):
    """Attention could not be captured the way that was asked (e.g. lazy capture on a model
    whose attention does not go through transformers' attention interface)."""


class InputTooLongError(InputError):
    """An input has more tokens than the model has positions, where attnkit refuses to
    truncate it silently (lazy and long-context capture)."""


class CheckpointError(AttnkitError):
    """A series of training checkpoints could not be read (:func:`attnkit.checkpoints`): an
    empty folder, checkpoints of different architectures, a checkpoint without a step, or
    weights that cannot be read; the message names the checkpoint and says what to do."""
