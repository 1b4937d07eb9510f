"""Lines of a UTF-8 text data file; a binary or otherwise undecodable file is a clear error."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path


def text_lines(path: str | Path, error: type[Exception], what: str) -> Iterator[str]:
    """Yield the lines of ``path`` (UTF-8, a leading BOM dropped, line ends kept).

    Parameters
    ----------
    path : str or Path
        The file.
    error : type
        The :mod:`attnkit.errors` class to raise (``ConllError``, ``DataFormatError``).
    what : str
        What the file should be, for the message (``"a CoNLL-U treebank"``).

    Yields
    ------
    str
        Each line, ``\\n`` included.

    Raises
    ------
    error
        Naming the file and line when a byte is not UTF-8 or a line holds NUL bytes (a
        binary file: a model, an archive, a spreadsheet).
    """
    with open(path, "rb") as fh:
        for lineno, raw in enumerate(fh, 1):
            if lineno == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
            if b"\x00" in raw:
                raise error(_binary(path, lineno, "holds NUL bytes", what))
            try:
                yield raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise error(_binary(path, lineno, f"is not UTF-8 text (byte {exc.start + 1} of "
                                                  "the line)", what)) from None


def _binary(path: str | Path, lineno: int, problem: str, what: str) -> str:
    return (f"{path}:{lineno}: the file {problem}: it looks like a binary file, not {what}. "
            "Pass the plain-text file (decompress an archive first; save text as UTF-8).")
