"""A series of training checkpoints, read lazily: one model in memory at a time.

:func:`checkpoints` reads a folder of ``checkpoint-<step>`` folders (the layout transformers'
``Trainer`` writes, and ``train_induction_model(checkpoint_every=k, out=...)``) or a list of
model folders. Each checkpoint's step comes from its ``trainer_state.json``
(``global_step``) or its name (``checkpoint-<step>``, ``step<step>``); its training loss, where
one was logged, from the ``log_history`` of ``trainer_state.json``. Everything is checked
when the series is made, from the small files only (configs and states): a folder without
checkpoints, checkpoints of different architectures, a checkpoint without a step or without
weights. The weights are read when a checkpoint is loaded (:meth:`Checkpoint.load`,
:meth:`CheckpointSeries.models`); damaged ones raise a :class:`~attnkit.errors.CheckpointError`
naming the checkpoint.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from .._progress import progress as progress_bar
from ..errors import CheckpointError, InputError, ModelLoadError, ModelNotFoundError

if TYPE_CHECKING:
    from ..runtime.model import Model

#: Names of checkpoint folders and what the step is: ``checkpoint-<step>`` (transformers'
#: Trainer) or ``step<step>`` (Pythia's revisions).
_STEP_NAME = re.compile(r"^(?:checkpoint-|step)(\d+)$")
#: Config keys that fix the architecture: checkpoints of one series agree on all of them.
ARCHITECTURE_KEYS = (
    "model_type", "architectures", "num_hidden_layers", "n_layer", "num_layers",
    "num_attention_heads", "n_head", "num_heads", "num_key_value_heads", "hidden_size",
    "n_embd", "d_model", "head_dim", "intermediate_size", "vocab_size",
    "max_position_embeddings", "n_positions", "tie_word_embeddings",
)
_WEIGHTS = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
            "pytorch_model.bin.index.json")


@dataclass(frozen=True)
class Checkpoint:
    """One checkpoint of a series (made by :func:`attnkit.checkpoints`).

    Attributes
    ----------
    step : int
        Optimisation steps taken when it was written (0: the initial weights).
    path : Path
        Its folder.
    loss : float
        The training loss logged at this step (``trainer_state.json``'s ``log_history``:
        the entry of this step, else the last one before it); NaN when none was logged.
    """

    step: int
    path: Path
    loss: float

    def load(self, *, device: Any = "auto", dtype: Any = "auto") -> Model:
        """Read this checkpoint's model (weights and tokenizer) with :func:`attnkit.load`.

        Parameters
        ----------
        device : str or torch.device
            Where the model runs (as in :func:`attnkit.load`).
        dtype : str or torch.dtype
            Precision of the weights (as in :func:`attnkit.load`).

        Returns
        -------
        Model
            Named ``"<folder name> (step <step>)"``.

        Raises
        ------
        CheckpointError
            When the weights or tokenizer cannot be read or do not match the config.

        Examples
        --------
        >>> import tempfile, attnkit as ak
        >>> from attnkit.toys.induction import train_induction_model
        >>> with tempfile.TemporaryDirectory() as d:
        ...     _ = train_induction_model(vocab_size=16, hidden=16, start_length=8,
        ...                               max_length=8, steps=2, checkpoint_every=1, out=d,
        ...                               progress=False)
        ...     ak.checkpoints(d)[1].load().name
        'checkpoint-1 (step 1)'
        """
        from ..runtime.load import load

        try:
            model = load(self.path, device=device, dtype=dtype)
        except (ModelLoadError, ModelNotFoundError) as exc:
            raise CheckpointError(
                f"The checkpoint of step {self.step} ({self.path}) could not be loaded: {exc} "
                "Write it again, or leave it out of the series (pass the list of the others)."
            ) from exc
        model.name = f"{self.path.name} (step {self.step})"
        return model


class CheckpointSeries:
    """Checkpoints of one training run in step order, read lazily (made by
    :func:`attnkit.checkpoints`).

    ``len(series)``, ``series[i]`` (a :class:`Checkpoint`, in step order) and iteration
    read the records only; :meth:`models` loads the models one at a time.
    """

    def __init__(self, items: Sequence[Checkpoint], config: dict[str, Any],
                 history: pd.DataFrame) -> None:
        self._items = tuple(items)
        self.config = config
        self.history = history

    def __len__(self) -> int:
        return len(self._items)

    def __getitem__(self, i: int) -> Checkpoint:
        return self._items[i]

    def __iter__(self) -> Iterator[Checkpoint]:
        return iter(self._items)

    def __repr__(self) -> str:
        steps = self.steps
        shown = ", ".join(map(str, steps[:4])) + (", ..., " + str(steps[-1]) if len(steps) > 5 else
                                                   "".join(f", {s}" for s in steps[4:]))
        return f"CheckpointSeries({len(self)} checkpoints, steps [{shown}])"

    @property
    def steps(self) -> list[int]:
        """The steps of the checkpoints, increasing."""
        return [c.step for c in self._items]

    @property
    def losses(self) -> np.ndarray:
        """float64 ``[checkpoint]``: the training loss logged at each checkpoint's step (NaN
        where none was)."""
        return np.array([c.loss for c in self._items], dtype=np.float64)

    @property
    def n_layers(self) -> int:
        """Layers of the architecture every checkpoint shares."""
        return int(_first(self.config, ("num_hidden_layers", "n_layer", "num_layers")))

    @property
    def n_heads(self) -> int:
        """Attention heads per layer of the architecture every checkpoint shares."""
        return int(_first(self.config, ("num_attention_heads", "n_head", "num_heads")))

    def table(self) -> pd.DataFrame:
        """The checkpoints as a table.

        Returns
        -------
        pandas.DataFrame
            Indexed by ``step``; columns ``loss`` (training loss at the step) and ``path``.

        Examples
        --------
        >>> import tempfile, attnkit as ak
        >>> from attnkit.toys.induction import train_induction_model
        >>> with tempfile.TemporaryDirectory() as d:
        ...     _ = train_induction_model(vocab_size=16, hidden=16, start_length=8,
        ...                               max_length=8, steps=2, checkpoint_every=1, out=d,
        ...                               progress=False)
        ...     t = ak.checkpoints(d).table()
        >>> t.index.tolist(), bool(t["loss"].isna().iloc[0]), bool(t["loss"].iloc[1] > 0)
        ([0, 1, 2], True, True)
        """
        return pd.DataFrame({"loss": self.losses, "path": [str(c.path) for c in self._items]},
                            index=pd.Index(self.steps, name="step"))

    def models(self, *, device: Any = "auto", dtype: Any = "auto",
               progress: bool = True) -> Iterator[tuple[Checkpoint, Model]]:
        """``(checkpoint, model)`` in step order, one model loaded at a time (the previous
        one is let go before the next is read, unless the caller keeps it).

        Parameters
        ----------
        device : str or torch.device
            Where the models run (as in :func:`attnkit.load`).
        dtype : str or torch.dtype
            Precision of the weights.
        progress : bool
            Show a progress bar over the checkpoints.

        Returns
        -------
        iterator of (Checkpoint, Model)
            Lazily: each model is read when the loop reaches it.

        Raises
        ------
        CheckpointError
            When a checkpoint's weights cannot be read, or its model's layers and heads
            are not those of the series.

        Examples
        --------
        >>> import tempfile, attnkit as ak
        >>> from attnkit.toys.induction import train_induction_model
        >>> with tempfile.TemporaryDirectory() as d:
        ...     _ = train_induction_model(vocab_size=16, hidden=16, start_length=8,
        ...                               max_length=8, steps=2, checkpoint_every=1, out=d,
        ...                               progress=False)
        ...     [(c.step, m.n_layers) for c, m in ak.checkpoints(d).models(progress=False)]
        [(0, 2), (1, 2), (2, 2)]
        """
        for item in progress_bar(self._items, show=progress, desc="checkpoints", unit="checkpoint"):
            model = item.load(device=device, dtype=dtype)
            check_shape(model, item, self.n_layers, self.n_heads)
            yield item, model
            del model


def check_shape(model: Model, item: Checkpoint, n_layers: int, n_heads: int) -> None:
    """Refuse a loaded checkpoint whose layers or heads are not the series'."""
    if (model.n_layers, model.n_heads) != (n_layers, n_heads):
        raise CheckpointError(
            f"The checkpoint of step {item.step} ({item.path}) has {model.n_layers} layers of "
            f"{model.n_heads} heads; the series has {n_layers} of {n_heads}. Heads are matched "
            "across checkpoints by (layer, head): keep checkpoints of one architecture only."
        )


def checkpoints(path: str | Path | Sequence[str | Path], *,
                revisions: Sequence[str] | None = None) -> CheckpointSeries:
    """The checkpoints of one training run, in step order, read lazily.

    Parameters
    ----------
    path : str, Path or sequence of them
        A folder of ``checkpoint-<step>`` folders (the layout transformers' ``Trainer``
        writes, and ``train_induction_model(checkpoint_every=k, out=folder)``; other entries
        are ignored), or a list of model folders. Each checkpoint is a model folder
        (``config.json``, weights, tokenizer); its step is ``global_step`` of its
        ``trainer_state.json``, else the number in its name (``checkpoint-<step>`` or
        ``step<step>``). With ``revisions``: a Hugging Face model id whose revisions are in
        the local cache.
    revisions : sequence of str, optional
        Revisions (branches or tags) of the model ``path`` in the local Hugging Face cache,
        one checkpoint each, named for their step (``"step1000"``, as Pythia's are). Nothing
        is downloaded.

    Returns
    -------
    CheckpointSeries
        ``steps``, ``losses`` (the training loss logged at each step, NaN where none was),
        ``history`` (every logged ``step``, ``loss`` of the run, from the
        ``trainer_state.json`` files), ``config`` (the shared architecture), ``series[i]``
        and :meth:`CheckpointSeries.models`. No weights are read here.

    Raises
    ------
    CheckpointError
        When the folder holds no checkpoint; a checkpoint has no ``config.json`` (or an
        unreadable one), no weights file, or no step; two checkpoints have the same step; or
        the checkpoints differ in architecture (:data:`ARCHITECTURE_KEYS` of their configs).
        The message names the checkpoint.
        With ``revisions``: a revision that is not in the local cache, or whose name holds
        no step.
    InputError
        When ``path`` is not a folder or a list of folders (a model id with ``revisions``).

    Examples
    --------
    >>> import tempfile, attnkit as ak
    >>> from attnkit.toys.induction import train_induction_model
    >>> with tempfile.TemporaryDirectory() as d:
    ...     _ = train_induction_model(vocab_size=16, hidden=16, start_length=8, max_length=8,
    ...                               steps=4, checkpoint_every=2, out=d, progress=False)
    ...     series = ak.checkpoints(d)
    >>> series.steps, len(series), series.n_layers
    ([0, 2, 4], 3, 2)
    """
    named = _revisions(path, revisions) if revisions is not None else [(f, f.name) for f in _folders(path)]
    items: list[Checkpoint] = []
    configs: list[dict[str, Any]] = []
    logged: dict[int, float] = {}
    for folder, name in named:
        config = _read_json(folder / "config.json", folder, "config.json")
        if config is None:
            raise CheckpointError(
                f"The checkpoint {folder} has no config.json: it is not a model folder. Write "
                "checkpoints with save_pretrained (or transformers' Trainer), or leave it out."
            )
        if not any((folder / w).exists() for w in _WEIGHTS):
            raise CheckpointError(
                f"The checkpoint {folder} has no weights ({' or '.join(_WEIGHTS[::2])}): "
                "copy them again, or leave this checkpoint out of the series."
            )
        state = _read_json(folder / "trainer_state.json", folder, "trainer_state.json") or {}
        step = _step(folder, state, name)
        history = _history(state, folder)
        logged.update(history)
        before = [s for s in history if s <= step]
        loss = history[max(before)] if before else math.nan
        items.append(Checkpoint(step, folder, loss))
        configs.append(config)
    order = sorted(range(len(items)), key=lambda i: items[i].step)
    items = [items[i] for i in order]
    configs = [configs[i] for i in order]
    for a, b in zip(items, items[1:]):
        if a.step == b.step:
            raise CheckpointError(
                f"Two checkpoints have step {a.step}: {a.path} and {b.path}. A series holds one "
                "checkpoint per step: leave one out."
            )
    reference = _architecture(configs[0])
    for item, config in zip(items[1:], configs[1:]):
        arch = _architecture(config)
        if arch != reference:
            diff = sorted(k for k in set(arch) | set(reference) if arch.get(k) != reference.get(k))
            shown = ", ".join(f"{k}: {reference.get(k)!r} vs {arch.get(k)!r}" for k in diff)
            raise CheckpointError(
                f"The checkpoint of step {item.step} ({item.path}) has another architecture than "
                f"the one of step {items[0].step} ({items[0].path}): {shown}. Heads are matched "
                "across checkpoints by (layer, head): keep checkpoints of one run only."
            )
    for key in (("num_hidden_layers", "n_layer", "num_layers"),
                ("num_attention_heads", "n_head", "num_heads")):
        if _first(configs[0], key) is None:
            raise CheckpointError(
                f"The config of {items[0].path} names no number of {key[0].split('_')[-1]} "
                f"(any of {', '.join(key)}): attnkit cannot match heads across checkpoints."
            )
    history = pd.DataFrame({"loss": [logged[s] for s in sorted(logged)]},
                           index=pd.Index(sorted(logged), name="step"), dtype=np.float64)
    return CheckpointSeries(items, reference, history)


def _folders(path: Any) -> list[Path]:
    if isinstance(path, (str, Path)):
        root = Path(path).expanduser()
        if not root.is_dir():
            raise CheckpointError(
                f"No folder at {str(path)!r}. Pass the folder that holds the checkpoint-<step> "
                "folders (a Trainer's output_dir), or a list of checkpoint folders."
            )
        found = [p for p in root.iterdir() if p.is_dir() and _STEP_NAME.match(p.name)]
        if not found:
            raise CheckpointError(
                f"The folder {root} holds no checkpoint-<step> folders (it is empty, or its "
                "checkpoints are named otherwise). Pass the folder a Trainer or "
                "train_induction_model(checkpoint_every=..., out=...) wrote, or a list of "
                "checkpoint folders."
            )
        return found
    if isinstance(path, Sequence) and not isinstance(path, (bytes, bytearray)):
        if not path:
            raise CheckpointError("The list of checkpoints is empty: pass at least one folder.")
        out = []
        for p in path:
            if not isinstance(p, (str, Path)):
                raise InputError(f"path must list folders (str or Path); it holds a "
                                 f"{type(p).__name__}.")
            folder = Path(p).expanduser()
            if not folder.is_dir():
                raise CheckpointError(f"The checkpoint {str(p)!r} is not a folder. Pass model "
                                      "folders (config.json, weights, tokenizer).")
            out.append(folder)
        return out
    raise InputError(f"path must be a folder or a list of folders, not {type(path).__name__}.")


def _revisions(path: Any, revisions: Sequence[str]) -> list[tuple[Path, str]]:
    """``(snapshot folder, revision)`` of each revision of model ``path`` in the local cache."""
    if not isinstance(path, str):
        raise InputError(f"With revisions, path is a Hugging Face model id (str), not "
                         f"{type(path).__name__}.")
    if isinstance(revisions, str) or not revisions:
        raise CheckpointError("revisions must be a non-empty list of revision names "
                              "(['step1000', 'step2000']).")
    from huggingface_hub import snapshot_download

    out = []
    for rev in revisions:
        if not _STEP_NAME.match(str(rev)):
            raise CheckpointError(
                f"The revision {rev!r} of {path} names no step: revisions read as a series are "
                "named step<step> or checkpoint-<step> (Pythia's 'step1000')."
            )
        try:
            folder = snapshot_download(path, revision=str(rev), local_files_only=True)
        except Exception as exc:  # huggingface_hub raises several types for a missing revision
            raise CheckpointError(
                f"The revision {rev!r} of {path} is not in the local Hugging Face cache "
                f"({type(exc).__name__}). attnkit never downloads: fetch it where there is "
                f"network (`huggingface-cli download {path} --revision {rev}`)."
            ) from exc
        out.append((Path(folder), str(rev)))
    return out


def _read_json(file: Path, folder: Path, what: str) -> dict[str, Any] | None:
    if not file.exists():
        return None
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CheckpointError(
            f"The {what} of the checkpoint {folder} cannot be read ({type(exc).__name__}: {exc}): "
            "the file is damaged. Write the checkpoint again, or leave it out of the series."
        ) from exc
    if not isinstance(data, dict):
        raise CheckpointError(f"The {what} of the checkpoint {folder} is not a JSON object: the "
                              "file is damaged. Write the checkpoint again, or leave it out.")
    return data


def _step(folder: Path, state: dict[str, Any], name: str) -> int:
    named = _STEP_NAME.match(name)
    saved = state.get("global_step")
    if saved is not None and not (isinstance(saved, int) and saved >= 0):
        raise CheckpointError(f"The trainer_state.json of the checkpoint {folder} has global_step "
                              f"{saved!r}, not a step. Write the checkpoint again.")
    if named and saved is not None and int(named.group(1)) != saved:
        raise CheckpointError(
            f"The checkpoint {folder} is named for step {named.group(1)} but its "
            f"trainer_state.json says global_step {saved}. Rename the folder to match, or "
            "remove the stale trainer_state.json."
        )
    if saved is not None:
        return int(saved)
    if named:
        return int(named.group(1))
    raise CheckpointError(
        f"The checkpoint {folder} has no step: no trainer_state.json with global_step, and its "
        "name is not checkpoint-<step> or step<step>. Rename it so (checkpoint-1000)."
    )


def _history(state: dict[str, Any], folder: Path) -> dict[int, float]:
    """``step -> loss`` of the training-loss entries of ``log_history``."""
    out: dict[int, float] = {}
    entries = state.get("log_history") or []
    if not isinstance(entries, list):
        raise CheckpointError(f"The trainer_state.json of the checkpoint {folder} has a "
                              "log_history that is not a list. Write the checkpoint again.")
    for entry in entries:
        if isinstance(entry, dict) and "loss" in entry and "step" in entry:
            try:
                out[int(entry["step"])] = float(entry["loss"])
            except (TypeError, ValueError) as exc:
                raise CheckpointError(
                    f"The trainer_state.json of the checkpoint {folder} logs a loss that is not "
                    f"a number ({entry!r}). Write the checkpoint again."
                ) from exc
    return out


def _architecture(config: dict[str, Any]) -> dict[str, Any]:
    return {k: config[k] for k in ARCHITECTURE_KEYS if k in config}


def _first(config: dict[str, Any], keys: Sequence[str]) -> Any:
    for k in keys:
        if config.get(k) is not None:
            return config[k]
    return None
