"""Errors raised by attnkit. Every message says what was wrong and what to do."""

from __future__ import annotations


class AttnkitError(Exception):
    """Base class of every error attnkit raises on purpose."""


class ModelNotFoundError(AttnkitError):
    """A model name or path could not be resolved without network access."""


class NoAttentionError(AttnkitError):
    """A forward pass returned no attention probabilities."""


class EmptyInputError(AttnkitError, ValueError):
    """An input text, pair or word list was empty."""


class InputError(AttnkitError, ValueError):
    """An input had a type or shape attnkit cannot use."""


class ConllError(AttnkitError, ValueError):
    """A CoNLL-U file was malformed; the message names the file and line."""


class DataNotFoundError(AttnkitError, FileNotFoundError):
    """A data file or folder (treebank, GLUE tsv) was not where it was looked for."""


class StoreError(AttnkitError):
    """An on-disk AttentionSet store is inconsistent with the run that opened it."""


class TokenizationMismatchError(AttnkitError, ValueError):
    """Two attentions that must share a tokenization do not."""


class NotSupportedError(AttnkitError, NotImplementedError):
    """An option attnkit does not support (yet) for this function or model; the message says
    what to use instead."""


class TruncationWarning(UserWarning):
    """Some inputs were longer than the model's maximum and were truncated."""


class ReportError(AttnkitError):
    """A notebook could not be read, executed or exported as a report; the message names the
    cell or file and says what to do."""


class DataFormatError(AttnkitError, ValueError):
    """A data file other than CoNLL-U (e.g. a GLUE tsv) was malformed; the message names
    the file and line."""


class DeviceError(AttnkitError, ValueError):
    """A device or dtype was asked for that this machine cannot run (no such GPU, a dtype
    the device does not support); the message says what is available."""


class CaptureError(AttnkitError):
    """Attention could not be captured the way that was asked (e.g. lazy capture on a model
    whose attention does not go through transformers' attention interface)."""


class InputTooLongError(InputError):
    """An input has more tokens than the model has positions, where attnkit refuses to
    truncate it silently (lazy and long-context capture)."""
