"""Where the shared data lives: ``$ATTNKIT_DATA``, else ``../shared/data`` beside the checkout."""

from __future__ import annotations

import os
from pathlib import Path

from .._compat import renamed
from ..core import validate
from ..errors import DataNotFoundError

_HINT = (
    "Set ATTNKIT_DATA to a folder holding ud-english-ewt/, ud-english-gum/ and glue/, or put "
    "it at ../shared/data beside the attnkit checkout. UD treebanks: "
    "https://universaldependencies.org (UD_English-EWT, UD_English-GUM); GLUE: "
    "https://gluebenchmark.com."
)


def data_dir() -> Path | None:
    """The data folder: ``$ATTNKIT_DATA``, else ``shared/data`` beside the checkout or the
    current folder.

    Returns
    -------
    Path or None
        The folder (``$ATTNKIT_DATA`` is returned as given, even if it does not exist), or
        None when there is none.

    Examples
    --------
    >>> from attnkit.data import data_dir
    >>> d = data_dir()
    >>> d is None or d.name == "data" or d.is_dir() or "ATTNKIT_DATA" in __import__("os").environ
    True
    """
    env = os.environ.get("ATTNKIT_DATA")
    if env:
        return Path(env)
    here = Path(__file__).resolve()
    for root in (here.parents[2], Path.cwd()):
        cand = root.parent / "shared" / "data"
        if cand.is_dir():
            return cand
    return None


@renamed(relative="path")
def find_data(path: str) -> Path:
    """The path of ``path`` inside the data folder (:func:`data_dir`).

    Parameters
    ----------
    path : str
        A path inside the data folder, e.g. ``"ud-english-ewt/en_ewt-ud-dev.conllu"``.

    Returns
    -------
    Path
        The existing file or folder.

    Raises
    ------
    DataNotFoundError
        When there is no data folder or nothing at ``path`` in it; the message says
        where to get the data and how to point attnkit at it.

    Examples
    --------
    >>> from attnkit.data import find_data
    >>> find_data("no-such-corpus/x.conllu")
    Traceback (most recent call last):
    ...
    attnkit.errors.DataNotFoundError: no-such-corpus/x.conllu was not found ...
    """
    validate.path(path)
    relative = path
    base = data_dir()
    if base is None or not (base / relative).exists():
        where = f"in {base}" if base else "(no data folder found)"
        raise DataNotFoundError(f"{relative} was not found {where}. {_HINT}")
    return base / relative


def sample_treebank() -> Path:
    """The small hand-annotated CoNLL-U sample shipped with attnkit (12 sentences, CC0), for
    demos and tests without the real treebanks.

    Returns
    -------
    Path
        The ``sample.conllu`` file inside the installed package.

    Examples
    --------
    >>> import attnkit as ak
    >>> len(ak.read_conllu(ak.data.sample_treebank()))
    12
    """
    return Path(__file__).with_name("sample.conllu")


def sample_coref() -> Path:
    """Two hand-annotated documents with GUM-style ``Entity=`` coreference, shipped with
    attnkit (for examples and tests).

    Returns
    -------
    Path
        The ``coref_sample.conllu`` file inside the installed package.

    Examples
    --------
    >>> import attnkit as ak
    >>> [doc.id for doc in ak.read_coref(ak.data.sample_coref())]
    ['doc_a', 'doc_b']
    """
    return Path(__file__).with_name("coref_sample.conllu")
