"""Read GLUE classification tsv files (MRPC, RTE, SST-2, QNLI, ...) into a :class:`GlueDataset`.

``read_glue(path)`` takes a tsv file; ``read_glue(folder, "dev")`` a task folder and a
split (``<folder>/<split>.tsv``); ``read_glue("MRPC", "train")`` a task name, looked up in
``glue/`` of the data folder (``$ATTNKIT_DATA``, see :mod:`attnkit.data.paths`).

The files are read the GLUE way: tab-separated, a header row naming the columns, no quote
processing (``csv.QUOTE_NONE``: MRPC sentences start with a bare ``"``), UTF-8 with or
without a byte-order mark. The columns are recognised from the header, so a file keeps
working when renamed.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .._compat import renamed
from ..core import validate
from ..errors import DataFormatError, DataNotFoundError, InputError
from ._text import text_lines

#: Recognised layouts: (text columns, label column, id columns), tried in order.
_LAYOUTS: list[tuple[tuple[str, ...], str, tuple[str, ...]]] = [
    (("#1 String", "#2 String"), "Quality", ("#1 ID", "#2 ID")),  # MRPC
    (("question", "sentence"), "label", ("index",)),  # QNLI
    (("question1", "question2"), "is_duplicate", ("id",)),  # QQP
    (("sentence1", "sentence2"), "gold_label", ("index",)),  # MNLI
    (("sentence1", "sentence2"), "label", ("index",)),  # RTE, WNLI
    (("sentence",), "label", ("index",)),  # SST-2 (train/dev have no index)
]

#: Label names per task, index = integer label (the order of the GLUE benchmark).
LABEL_NAMES: dict[str, tuple[str, ...]] = {
    "MRPC": ("not_equivalent", "equivalent"),
    "RTE": ("entailment", "not_entailment"),
    "QNLI": ("entailment", "not_entailment"),
    "WNLI": ("not_entailment", "entailment"),
    "SST-2": ("negative", "positive"),
    "QQP": ("not_duplicate", "duplicate"),
    "MNLI": ("entailment", "neutral", "contradiction"),
}


def _task_key(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


_TASK_KEYS = {_task_key(t): t for t in LABEL_NAMES}


@dataclass
class GlueDataset:
    """Labelled inputs for classification, in file order.

    Iterating yields the inputs (so ``extract(model, dataset)`` works); an integer index
    gives one input, a slice or an index array gives a new dataset (:meth:`take`).

    Parameters
    ----------
    inputs : list
        ``inputs[i]`` is a text (single-sentence tasks) or a ``(text_a, text_b)`` pair,
        ready for :meth:`attnkit.Model.encode` and :func:`attnkit.extract`.
    labels : numpy.ndarray or None
        Int ``[n]``: ``labels[i]`` is in ``range(len(label_names))``; None for an
        unlabelled file (a GLUE test split).
    label_names : tuple of str
        The name of each label.
    task, split : str
        The GLUE task (``"MRPC"``) and split (``"dev"``) it was read from, if any.
    path : Path, optional
        The file it was read from.
    ids : list of str
        One id per row (default: the row numbers).
    lines : numpy.ndarray, optional
        1-based line number of each row in ``path`` (for error messages).

    Raises
    ------
    InputError
        When labels are not one integer in ``0..len(label_names) - 1`` per input, or ids
        are not one per input.

    Examples
    --------
    >>> import numpy as np
    >>> from attnkit.data import GlueDataset
    >>> d = GlueDataset([("A cat.", "A cat sat."), ("Yes.", "No."), ("Hi.", "Hello.")],
    ...                 np.array([1, 0, 1]), ("not_equivalent", "equivalent"), task="MRPC")
    >>> len(d), d.is_pair, d.majority_label, round(d.majority_rate(), 3)
    (3, True, 1, 0.667)
    >>> d[0], d[1:].labels.tolist()
    (('A cat.', 'A cat sat.'), [0, 1])
    """

    inputs: list[Any]
    labels: np.ndarray | None
    label_names: tuple[str, ...]
    task: str = ""
    split: str = ""
    path: Path | None = None
    ids: list[str] = field(default_factory=list)
    lines: np.ndarray | None = None

    def __post_init__(self) -> None:
        self.inputs = list(self.inputs)
        self.label_names = tuple(self.label_names)
        if self.labels is not None:
            labels = np.asarray(self.labels)
            if labels.shape != (len(self.inputs),):
                raise InputError(
                    f"{len(self.inputs)} inputs but labels of shape {labels.shape}; give one "
                    "integer label per input."
                )
            if labels.size and (not np.issubdtype(labels.dtype, np.integer)
                                or labels.min() < 0 or labels.max() >= len(self.label_names)):
                raise InputError(
                    f"labels must be integers in 0..{len(self.label_names) - 1} (one per name "
                    f"in label_names={self.label_names}); found {sorted(set(labels.tolist()))[:5]}."
                )
            self.labels = labels.astype(np.int64)
        if not self.ids:
            self.ids = [str(i) for i in range(len(self.inputs))]
        if len(self.ids) != len(self.inputs):
            raise InputError(f"{len(self.inputs)} inputs but {len(self.ids)} ids.")

    # ------------------------------------------------------------ sequence
    def __len__(self) -> int:
        return len(self.inputs)

    def __iter__(self) -> Iterator[Any]:
        return iter(self.inputs)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, (int, np.integer)):
            return self.inputs[i]
        return self.take(np.arange(len(self))[i])

    def __repr__(self) -> str:
        where = f", {self.path}" if self.path else ""
        return (f"GlueDataset({self.task or 'custom'} {self.split}: {len(self)} items, "
                f"labels {list(self.label_names)}{where})")

    @property
    def is_pair(self) -> bool:
        """Whether the inputs are ``(text_a, text_b)`` pairs."""
        return bool(self.inputs) and isinstance(self.inputs[0], tuple)

    # ------------------------------------------------------------ subsets
    @renamed(index="rows")
    def take(self, rows: Sequence[int] | np.ndarray) -> GlueDataset:
        """A new dataset with the rows at ``rows`` (in that order).

        Parameters
        ----------
        rows : sequence of int
            Row numbers.

        Returns
        -------
        GlueDataset
            Those rows, with their labels, ids and file lines.

        Examples
        --------
        >>> import numpy as np
        >>> from attnkit.data import GlueDataset
        >>> d = GlueDataset(["a", "b", "c"], np.array([0, 1, 0]), ("x", "y"))
        >>> d.take([2, 0]).inputs
        ['c', 'a']
        """
        idx = validate.positions(rows, len(self), "rows")
        return GlueDataset(
            inputs=[self.inputs[i] for i in idx],
            labels=None if self.labels is None else self.labels[idx],
            label_names=self.label_names, task=self.task, split=self.split, path=self.path,
            ids=[self.ids[i] for i in idx],
            lines=None if self.lines is None else self.lines[idx],
        )

    @renamed(positional=("seed",))
    def sample(self, n: int, *, seed: int = 0) -> GlueDataset:
        """``n`` rows drawn without replacement (all rows, shuffled, if ``n >= len``).

        Parameters
        ----------
        n : int
            How many rows.
        seed : int
            Seed of the draw.

        Returns
        -------
        GlueDataset
            The rows drawn, in the order drawn.

        Examples
        --------
        >>> import numpy as np
        >>> from attnkit.data import GlueDataset
        >>> d = GlueDataset([f"text {i}" for i in range(10)], np.zeros(10, int), ("a", "b"))
        >>> len(d.sample(3, seed=1)), len(d.sample(20))
        (3, 10)
        """
        n = validate.integer(n, "n", minimum=0)
        seed = validate.seed(seed)
        rng = np.random.default_rng(seed)
        return self.take(rng.permutation(len(self))[: max(0, int(n))])

    @renamed(positional=("fraction", "seed"))
    def split_off(self, *, fraction: float, seed: int = 0) -> tuple[GlueDataset, GlueDataset]:
        """Split into (rest, held-out) with ``fraction`` of each class held out.

        For choosing hyper-parameters on a part of a training file, so that the dev file
        stays an honest evaluation.

        Parameters
        ----------
        fraction : float
            Between 0 and 1: the share of each class held out (rounded per class).
        seed : int
            Seed of the shuffle.

        Returns
        -------
        (GlueDataset, GlueDataset)
            The rest and the held-out rows.

        Raises
        ------
        InputError
            When ``fraction`` is not between 0 and 1, or the dataset has no labels.

        Examples
        --------
        >>> import numpy as np
        >>> from attnkit.data import GlueDataset
        >>> d = GlueDataset([f"text {i}" for i in range(10)], np.array([0] * 6 + [1] * 4), ("a", "b"))
        >>> rest, held = d.split_off(fraction=0.5)
        >>> len(rest), held.class_counts().tolist()
        (5, [3, 2])
        """
        seed = validate.seed(seed)
        if not 0 < fraction < 1:
            raise InputError(f"fraction must be between 0 and 1, not {fraction}.")
        self._need_labels("split_off")
        rng = np.random.default_rng(seed)
        held: list[int] = []
        for c in range(len(self.label_names)):
            rows = np.flatnonzero(self.labels == c)
            rng.shuffle(rows)
            held.extend(rows[: int(round(fraction * len(rows)))].tolist())
        mask = np.zeros(len(self), dtype=bool)
        mask[held] = True
        return self.take(np.flatnonzero(~mask)), self.take(np.flatnonzero(mask))

    # ------------------------------------------------------------ labels
    def _need_labels(self, what: str) -> np.ndarray:
        if self.labels is None:
            raise InputError(f"{what} needs labels, and {self!r} has none (a test split?).")
        return self.labels

    def class_counts(self) -> pd.Series:
        """Number of rows per label name.

        Returns
        -------
        pandas.Series
            Counts indexed by the label names.

        Raises
        ------
        InputError
            When the dataset has no labels.

        Examples
        --------
        >>> import numpy as np
        >>> from attnkit.data import GlueDataset
        >>> GlueDataset(["a", "b", "c"], np.array([0, 1, 0]), ("x", "y")).class_counts().tolist()
        [2, 1]
        """
        labels = self._need_labels("class_counts")
        counts = np.bincount(labels, minlength=len(self.label_names))
        return pd.Series(counts, index=list(self.label_names), name="count")

    @property
    def majority_label(self) -> int:
        """The most frequent label (lowest index on ties)."""
        labels = self._need_labels("majority_label")
        return int(np.argmax(np.bincount(labels, minlength=len(self.label_names))))

    def majority_rate(self) -> float:
        """Accuracy of always answering the most frequent label of this dataset.

        Returns
        -------
        float
            The share of the most frequent label (NaN when the dataset is empty).

        Raises
        ------
        InputError
            When the dataset has no labels.

        Examples
        --------
        >>> import numpy as np
        >>> from attnkit.data import GlueDataset
        >>> GlueDataset(["a", "b", "c", "d"], np.array([0, 1, 0, 0]), ("x", "y")).majority_rate()
        0.75
        """
        labels = self._need_labels("majority_rate")
        if not len(self):
            return float("nan")
        return float(np.mean(labels == self.majority_label))

    def to_frame(self) -> pd.DataFrame:
        """The dataset as a table.

        Returns
        -------
        pandas.DataFrame
            One row per item: ``id``, ``text_a`` (``text_b`` for pairs), ``label``,
            ``label_name`` and the file ``line`` (the last three where known).

        Examples
        --------
        >>> import numpy as np
        >>> from attnkit.data import GlueDataset
        >>> d = GlueDataset([("A cat.", "A cat sat.")], np.array([1]), ("no", "yes"))
        >>> d.to_frame()[["text_a", "text_b", "label_name"]].values.tolist()
        [['A cat.', 'A cat sat.', 'yes']]
        """
        if self.is_pair:
            cols: dict[str, Any] = {"text_a": [a for a, _ in self.inputs],
                                    "text_b": [b for _, b in self.inputs]}
        else:
            cols = {"text_a": list(self.inputs)}
        frame = pd.DataFrame({"id": self.ids, **cols})
        if self.labels is not None:
            frame["label"] = self.labels
            frame["label_name"] = [self.label_names[k] for k in self.labels]
        if self.lines is not None:
            frame["line"] = self.lines
        return frame


# ---------------------------------------------------------------- reading
def read_glue(path: str | Path, split: str | None = None, *, limit: int | None = None) -> GlueDataset:
    r"""Read a GLUE classification tsv file.

    Parameters
    ----------
    path : str or Path
        A ``.tsv`` file; or a task folder (``.../glue/MRPC``) together with ``split``; or a
        task name (``"MRPC"``, ``"sst2"``, ``"RTE"``, ``"QNLI"``) found under ``glue/`` in
        the data folder, together with ``split``.
    split : str, optional
        ``"train"``, ``"dev"``, ...: reads ``<folder>/<split>.tsv``. Needed (and only
        allowed) with a folder or a task name.
    limit : int, optional
        Read at most this many rows.

    Returns
    -------
    GlueDataset
        Labels use the GLUE order of :data:`LABEL_NAMES` for known tasks (MRPC:
        0 = not_equivalent, 1 = equivalent).

    Raises
    ------
    DataFormatError
        Naming the file and line of the first malformed row (wrong number of fields, empty
        text, unknown label), or of the first line that is not UTF-8 text.
    DataNotFoundError
        When the file, folder, split or task is not there.
    InputError
        When ``split`` is missing for a folder, or given with a file.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> import attnkit as ak
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "MRPC" / "dev.tsv"
    >>> path.parent.mkdir()
    >>> rows = ["Quality\t#1 ID\t#2 ID\t#1 String\t#2 String",
    ...         "1\t1\t2\tThe cat sat.\tA cat was sitting.",
    ...         "0\t3\t4\tIt rained.\tStocks fell."]
    >>> _ = path.write_text("\n".join(rows) + "\n")
    >>> d = ak.read_glue(path)
    >>> d.task, d.inputs[0], d.labels.tolist(), d.label_names
    ('MRPC', ('The cat sat.', 'A cat was sitting.'), [1, 0], ('not_equivalent', 'equivalent'))
    >>> len(ak.read_glue(path.parent, "dev", limit=1))
    1
    """
    validate.path(path)
    limit = None if limit is None else validate.size(limit, "limit")
    file = _resolve(path, split)
    task = _task_of(file)
    rows = csv.reader(text_lines(file, DataFormatError, "a GLUE tsv"), delimiter="\t",
                      quoting=csv.QUOTE_NONE)
    header = next(rows, None)
    if header is None:
        raise DataFormatError(f"{file}: the file is empty; a GLUE tsv starts with a header row.")
    text_cols, label_col, id_cols = _layout(file, header)
    col = {name: k for k, name in enumerate(header)}
    names = LABEL_NAMES.get(task)
    inputs: list[Any] = []
    raw_labels: list[tuple[int, str]] = []
    ids: list[str] = []
    lines: list[int] = []
    for lineno, row in enumerate(rows, 2):
        if limit is not None and len(inputs) >= limit:
            break
        if not row or row == [""]:
            continue
        if len(row) != len(header):
            raise DataFormatError(
                f"{file}:{lineno}: expected {len(header)} tab-separated fields "
                f"({', '.join(header)}), found {len(row)}. A tab or line break inside a "
                "sentence splits a row; fix that line."
            )
        texts = []
        for c in text_cols:
            text = row[col[c]].strip()
            if not text:
                raise DataFormatError(f"{file}:{lineno}: the {c!r} field is empty.")
            texts.append(text)
        inputs.append(texts[0] if len(texts) == 1 else tuple(texts))
        if label_col is not None:
            raw_labels.append((lineno, row[col[label_col]].strip()))
        present = [row[col[c]] for c in id_cols if c in col]
        ids.append("-".join(present) if present else str(len(ids)))
        lines.append(lineno)
    labels = None
    if label_col is not None:
        labels, names = _labels(file, label_col, raw_labels, names)
    elif names is None:
        names = ()
    return GlueDataset(inputs=inputs, labels=labels, label_names=names, task=task or file.parent.name,
                       split=file.stem, path=file, ids=ids, lines=np.array(lines, dtype=np.int64))


def _resolve(path: str | Path, split: str | None) -> Path:
    p = Path(path).expanduser()
    if p.is_file():
        if split is not None:
            raise InputError(f"{p} is a file; give split= only with a task folder or task name.")
        return p
    if not p.exists():
        if p.suffix or len(p.parts) > 1:
            raise DataNotFoundError(f"No GLUE file or folder at {p}.")
        p = _task_folder(str(path))
    if split is None:
        splits = sorted(f.stem for f in p.glob("*.tsv"))
        raise InputError(f"{p} is a task folder: say which split to read, one of {splits}, "
                         f"e.g. read_glue({str(path)!r}, {(splits or ['dev'])[0]!r}).")
    file = p / f"{split}.tsv"
    if not file.is_file():
        splits = sorted(f.stem for f in p.glob("*.tsv"))
        raise DataNotFoundError(f"No split {split!r} in {p} (it has {splits}).")
    return file


def _task_folder(name: str) -> Path:
    from .paths import find_data

    glue = find_data("glue")
    folders = {_task_key(f.name): f for f in glue.iterdir() if f.is_dir()}
    found = folders.get(_task_key(name))
    if found is None:
        raise DataNotFoundError(
            f"No GLUE task {name!r} in {glue} (tasks there: {sorted(f.name for f in folders.values())})."
        )
    return found


def _task_of(file: Path) -> str:
    return _TASK_KEYS.get(_task_key(file.parent.name), "")


def _layout(file: Path, header: list[str]) -> tuple[tuple[str, ...], str | None, tuple[str, ...]]:
    cols = set(header)
    for text_cols, label_col, id_cols in _LAYOUTS:  # labelled files first
        if set(text_cols) <= cols and label_col in cols:
            return text_cols, label_col, id_cols
    for text_cols, _, id_cols in _LAYOUTS:  # then unlabelled ones (GLUE test files)
        if set(text_cols) <= cols:
            return text_cols, None, id_cols
    raise DataFormatError(
        f"{file}:1: header {header} names no known GLUE text columns; expected one of "
        f"{[list(t) for t, _, _ in _LAYOUTS]} (headerless files such as CoLA are not supported)."
    )


def _labels(file: Path, label_col: str, raw: list[tuple[int, str]],
            names: tuple[str, ...] | None) -> tuple[np.ndarray, tuple[str, ...]]:
    """Integer labels from label strings: digits as they are, names by their GLUE index."""
    values = {v for _, v in raw}
    if names is None:
        if values and all(v.isdigit() for v in values):
            names = tuple(str(k) for k in range(max(int(v) for v in values) + 1))
        else:
            names = tuple(sorted(values))
    index = {n: k for k, n in enumerate(names)}
    out = np.empty(len(raw), dtype=np.int64)
    for k, (lineno, v) in enumerate(raw):
        if v.isdigit() and int(v) < len(names):
            out[k] = int(v)
        elif v in index:
            out[k] = index[v]
        else:
            raise DataFormatError(
                f"{file}:{lineno}: label {v!r} in column {label_col!r} is not one of "
                f"{list(names)} (or their indices 0..{len(names) - 1})."
            )
    return out, names
