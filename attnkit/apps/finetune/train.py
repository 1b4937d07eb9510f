"""The training loop: fine-tune a copy of a model with a classification head, score it
against the majority-class baseline, save it (:mod:`.save`)."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..._compat import renamed
from ..._progress import progress as progress_bar
from ...data.pairs import GlueDataset
from ...errors import InputError
from .data import check_data, collate, tokenize, train_batches
from .save import check_out, save
from .surgery import classifier_copy, freeze


@dataclass
class FinetuneResult:
    """What a :func:`finetune` run produced and measured.

    Parameters
    ----------
    model : Model
        The fine-tuned :class:`attnkit.Model` (eager attention, eval mode).
    path : Path or None
        The folder it was saved to.
    label_names : tuple of str
        The classes, in label order.
    n_train, n_dev : int
        Items trained on and evaluated on.
    accuracy, f1 : float
        On the evaluation set (``dev``; NaN without one). F1 is that of label 1 for two
        classes (GLUE's convention: MRPC "equivalent"), macro-averaged otherwise.
    majority_rate, majority_f1 : float
        The same scores of always answering the training set's most frequent label.
    train_seconds, eval_seconds, wall_seconds : float
        Wall-clock times.
    cpu_seconds : float
        The process's CPU time (all threads), a measure that other jobs on a shared machine
        do not inflate.
    predictions : numpy.ndarray or None
        Int ``[n_dev]``: the predicted label of each evaluation item.
    history : pandas.DataFrame
        One row per optimiser step: ``epoch``, ``step``, ``loss``, ``lr``.
    epochs_eval : pandas.DataFrame
        One row per evaluated epoch: ``epoch``, ``accuracy``, ``f1`` (the last always).
    params : dict
        The recipe (every argument of :func:`finetune`, the base model, the files).
    """

    model: Any
    path: Path | None
    label_names: tuple[str, ...]
    n_train: int
    n_dev: int
    accuracy: float
    f1: float
    majority_rate: float
    majority_f1: float
    train_seconds: float
    eval_seconds: float
    wall_seconds: float
    cpu_seconds: float
    predictions: np.ndarray | None
    history: pd.DataFrame
    epochs_eval: pd.DataFrame
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def gain(self) -> float:
        """Accuracy points above the majority-class rate (0.10 = ten points)."""
        return self.accuracy - self.majority_rate

    def summary(self) -> dict[str, Any]:
        """The numbers and the recipe as a JSON-ready dict."""
        keys = ["n_train", "n_dev", "accuracy", "f1", "majority_rate", "majority_f1",
                "train_seconds", "eval_seconds", "wall_seconds", "cpu_seconds"]
        out = {k: getattr(self, k) for k in keys}
        out["label_names"] = list(self.label_names)
        out["path"] = str(self.path) if self.path else None
        out["epochs_eval"] = self.epochs_eval.to_dict("records")
        out["params"] = dict(self.params)
        return out

    def __repr__(self) -> str:
        return (f"FinetuneResult(accuracy={self.accuracy:.4f}, f1={self.f1:.4f}, majority="
                f"{self.majority_rate:.4f}, n_train={self.n_train}, n_dev={self.n_dev}, "
                f"wall={self.wall_seconds:.0f}s, path={self.path})")


def scores(labels: np.ndarray, predictions: np.ndarray, n_classes: int) -> tuple[float, float]:
    """Accuracy and F1 of predicted labels.

    Parameters
    ----------
    labels, predictions : numpy.ndarray
        Int ``[n]``: gold and predicted labels.
    n_classes : int
        The number of classes.

    Returns
    -------
    (float, float)
        Accuracy, and F1 of class 1 for two classes, macro F1 over the classes present in
        ``labels`` or ``predictions`` otherwise (NaN, NaN for no items).

    Raises
    ------
    InputError
        When the two arrays differ in shape.

    Examples
    --------
    >>> import numpy as np
    >>> from attnkit.apps.finetune import scores
    >>> scores(np.array([1, 1, 0, 0]), np.array([1, 0, 0, 0]), 2)  # F1 = 2*1 / (2*1 + 0 + 1)
    (0.75, 0.6666666666666666)
    """
    labels = np.asarray(labels)
    predictions = np.asarray(predictions)
    if labels.shape != predictions.shape:
        raise InputError(f"labels {labels.shape} and predictions {predictions.shape} differ in shape.")
    if not len(labels):
        return float("nan"), float("nan")
    acc = float(np.mean(labels == predictions))

    def f1_of(c: int) -> float:
        tp = np.sum((predictions == c) & (labels == c))
        fp = np.sum((predictions == c) & (labels != c))
        fn = np.sum((predictions != c) & (labels == c))
        return float(2 * tp / (2 * tp + fp + fn)) if tp + fp + fn else 0.0

    if n_classes == 2:
        return acc, f1_of(1)
    present = [c for c in range(n_classes) if np.any(labels == c) or np.any(predictions == c)]
    return acc, float(np.mean([f1_of(c) for c in present]))


def predict(clf: Any, enc: dict[str, list[list[int]]], pad_id: int, batch_size: int = 64,
            bar: Any = None) -> np.ndarray:
    """The predicted label of every tokenized item; puts ``clf`` in eval mode.

    Parameters
    ----------
    clf : transformers model
        A sequence classifier (``.logits`` out).
    enc : dict
        Unpadded token ids (and masks) per item, as :func:`attnkit.apps.finetune.data.tokenize`
        writes them.
    pad_id : int
        The tokenizer's padding id.
    batch_size : int
        Items per forward pass (batches group items of similar length).
    bar : tqdm, optional
        A progress bar to advance.

    Returns
    -------
    numpy.ndarray
        Int ``[n]``, in item order.
    """
    import torch

    lengths = np.array([len(x) for x in enc["input_ids"]])
    order = np.argsort(lengths, kind="stable")
    preds = np.empty(len(lengths), dtype=np.int64)
    device = next(clf.parameters()).device
    clf.eval()
    with torch.inference_mode():
        for k in range(0, len(order), batch_size):
            idx = order[k : k + batch_size]
            logits = clf(**collate(enc, idx, pad_id, device)).logits
            preds[idx] = logits.argmax(-1).cpu().numpy()
            if bar is not None:
                bar.update(len(idx))
    return preds


@renamed(positional=("dev",), train="inputs", dev="evaluate_on")
def finetune(
    model: Any,
    inputs: GlueDataset,
    *,
    evaluate_on: GlueDataset | None = None,
    epochs: float = 3,
    max_items: int | None = None,
    lr: float = 5e-5,
    max_length: int | None = None,
    batch_size: int = 16,
    out: str | Path | None = None,
    seed: int = 0,
    freeze_layers: int = 0,
    weight_decay: float = 0.01,
    warmup: float = 0.1,
    eval_each_epoch: bool = False,
    overwrite: bool = False,
    checkpoint_every: int | None = None,
    checkpoint_dir: str | Path | None = None,
    progress: bool = True,
) -> FinetuneResult:
    """Fine-tune a copy of ``model`` with a classification head on ``inputs``; score on
    ``evaluate_on``.

    The copy is an ``AutoModelForSequenceClassification`` built from the model's config with
    its encoder weights copied in (:func:`classifier_copy`); the pre-trained model is never
    modified. Training is AdamW with linear warm-up then linear decay to 0, gradients
    clipped to norm 1. Set ``torch.set_num_threads`` yourself; finetune leaves it alone.

    Parameters
    ----------
    model : Model or str
        An :class:`attnkit.Model`, or a name for :func:`attnkit.load`. Not modified.
    inputs : GlueDataset
        Labelled training items (e.g. ``read_glue("MRPC", "train")``).
    evaluate_on : GlueDataset, optional
        Labelled held-out items with the same ``label_names`` (e.g. the ``"dev"`` split),
        reported on; nothing is chosen on them. None: no evaluation.
    epochs : float
        Passes over the training items; a fraction stops part-way through the last.
    max_items : int, optional
        Train on a random subset of this many training items (seeded).
    lr, weight_decay, warmup : float
        AdamW's learning rate and weight decay; ``warmup`` is the fraction of the steps of
        linear warm-up.
    max_length : int, optional
        Token cap per input (pairs truncated longest-first); default 128 or the model's
        maximum if smaller.
    batch_size : int
        Items per step; batches group items of similar length (less padding).
    out : str or Path, optional
        Folder to save into (safetensors + config + tokenizer + ``finetune.json``), written
        atomically; :func:`attnkit.load` opens it as a classifier.
    seed : int
        The only source of randomness (head initialisation, subset, batch order).
    freeze_layers : int
        0 trains everything; k > 0 freezes the embeddings and the first k - 1 layers.
    eval_each_epoch : bool
        Also score ``evaluate_on`` after every full epoch (``result.epochs_eval``).
    overwrite : bool
        Replace an existing ``out`` folder written by finetune.
    checkpoint_every : int, optional
        Also write the classifier every this many steps into ``checkpoint_dir`` in the layout
        of transformers' ``Trainer`` (``checkpoint-<step>/``: config, weights, tokenizer and
        ``trainer_state.json`` with the training loss of every step so far);
        ``checkpoint-0`` is the classifier before training and the last step is always
        written, so :func:`attnkit.checkpoints` ``(checkpoint_dir)`` reads the run.
    checkpoint_dir : str or Path, optional
        The folder of the checkpoints (created; it must not exist or be empty). Needed with
        ``checkpoint_every``.
    progress : bool
        Show progress bars over steps and evaluation.

    Returns
    -------
    FinetuneResult
        With the fine-tuned :class:`attnkit.Model` as ``result.model``, dev accuracy and F1
        next to the majority-class baseline, the loss history and the timings.

    Raises
    ------
    InputError
        When ``inputs``/``evaluate_on`` are not labelled GlueDatasets with the same labels, an
        option is out of range, ``out`` exists (and is not a finetune folder, or
        ``overwrite`` is off), or ``checkpoint_dir`` is not new or empty.

    Examples
    --------
    >>> import numpy as np
    >>> import attnkit as ak
    >>> from attnkit.data import GlueDataset
    >>> from attnkit.testing import tiny_model
    >>> texts = ["the cat sat", "yesterday the cat sat", "we read", "yesterday we read"] * 4
    >>> data = GlueDataset(texts, np.array([0, 1, 0, 1] * 4), ("plain", "yesterday"))
    >>> res = ak.finetune(tiny_model("bert"), data, evaluate_on=data, epochs=1,
    ...                  batch_size=8, progress=False)
    >>> res.n_train, len(res.history), res.majority_rate, type(res.model.hf).__name__
    (16, 2, 0.5, 'BertForSequenceClassification')
    """
    train, dev = inputs, evaluate_on
    import torch

    from ...runtime.model import Model

    from ...runtime.load import load

    t_start, cpu_start = time.perf_counter(), time.process_time()
    if isinstance(model, (str, Path)):
        model = load(model)
    check_data(train, "train")
    if dev is not None:
        check_data(dev, "dev")
        if tuple(dev.label_names) != tuple(train.label_names):
            raise InputError(f"train labels {train.label_names} and dev labels {dev.label_names} "
                             "differ; read both splits of the same task.")
    if epochs <= 0 or batch_size < 1 or lr <= 0:
        raise InputError(f"epochs ({epochs}), batch_size ({batch_size}) and lr ({lr}) must be positive.")
    if max_length is None:
        max_length = min(128, model.max_length)
    if not 1 < max_length <= model.max_length:
        raise InputError(f"max_length must be between 2 and {model.max_length} (the model's maximum), "
                         f"not {max_length}.")
    out_path = Path(out).expanduser() if out is not None else None
    if out_path is not None:
        check_out(out_path, overwrite)  # fail before training, not after
    from ...runtime.checkpoint import checkpoint_folder, write_checkpoint

    ckpt = checkpoint_folder(checkpoint_every, checkpoint_dir, name="checkpoint_dir")
    params = dict(epochs=epochs, max_items=max_items, lr=lr, max_length=max_length,
                  batch_size=batch_size, seed=seed, freeze_layers=freeze_layers,
                  weight_decay=weight_decay, warmup=warmup, base_model=model.name,
                  task=train.task, train_file=str(train.path) if train.path else None,
                  dev_file=str(dev.path) if dev is not None and dev.path else None,
                  torch_threads=torch.get_num_threads())

    rng = np.random.default_rng(seed)
    if max_items is not None and max_items < len(train):
        train = train.take(np.sort(rng.permutation(len(train))[:max_items]))
    label_names = tuple(train.label_names)
    torch.manual_seed(seed)
    device = getattr(model, "device", None)  # trains on the model's device
    clf = classifier_copy(model, label_names)
    if device is not None:
        clf = clf.to(device)
    freeze(clf, freeze_layers)
    train_labels = check_data(train, "train")  # of the subset
    enc = tokenize(model, train, max_length)
    held = None if dev is None else (check_data(dev, "dev"), tokenize(model, dev, max_length))
    labels = torch.tensor(train_labels, dtype=torch.long, device=device)
    lengths = np.array([len(x) for x in enc["input_ids"]])

    per_epoch = math.ceil(len(train) / batch_size)
    total = max(1, int(round(epochs * per_epoch)))
    trainable = [(n, p) for n, p in clf.named_parameters() if p.requires_grad]
    no_decay = ("bias", "LayerNorm.weight", "layer_norm.weight", "ln_")
    groups = [
        {"params": [p for n, p in trainable if not any(s in n for s in no_decay)],
         "weight_decay": weight_decay},
        {"params": [p for n, p in trainable if any(s in n for s in no_decay)], "weight_decay": 0.0},
    ]
    opt = torch.optim.AdamW(groups, lr=lr)
    n_warm = int(warmup * total)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: (s + 1) / (n_warm + 1) if s < n_warm else max(0.0, (total - s) / max(1, total - n_warm)))

    history: list[dict[str, Any]] = []
    evals: list[dict[str, Any]] = []
    eval_seconds = 0.0
    n_dev_evals = 0
    bar = progress_bar(show=progress, total=total, unit="step",
                       desc=f"fine-tune {model.name} on {train.task or 'data'}")
    logged: list[dict[str, Any]] = []  # trainer_state.json's log_history

    saving = [0.0]  # seconds spent writing checkpoints: not training time

    def checkpoint(at: int) -> None:
        if ckpt is not None:
            t0 = time.perf_counter()
            write_checkpoint(clf, model.tokenizer, ckpt, at, max_steps=total, log_history=logged,
                             extra={"attnkit_finetune": dict(params)})
            saving[0] += time.perf_counter() - t0

    checkpoint(0)
    t_train = time.perf_counter()
    step = 0
    try:
        epoch = 0
        while step < total:
            clf.train()
            for idx in train_batches(lengths, batch_size, rng):
                if step >= total:
                    break
                loss = clf(**collate(enc, idx, model.pad_id, device), labels=labels[idx]).loss
                loss.backward()
                torch.nn.utils.clip_grad_norm_([p for _, p in trainable], 1.0)
                opt.step()
                sched.step()
                opt.zero_grad(set_to_none=True)
                history.append({"epoch": epoch, "step": step, "loss": float(loss.detach()),
                                "lr": float(sched.get_last_lr()[0])})
                step += 1
                logged.append({"step": step, "loss": history[-1]["loss"],
                               "learning_rate": history[-1]["lr"]})
                if ckpt is not None and checkpoint_every and (step % checkpoint_every == 0 or step == total):
                    checkpoint(step)
                bar.update(1)
                bar.set_postfix(loss=f"{np.mean([h['loss'] for h in history[-20:]]):.3f}")
            epoch += 1
            if held is not None and eval_each_epoch and step < total:
                t0 = time.perf_counter()
                acc, f1 = scores(held[0], predict(clf, held[1], model.pad_id), len(label_names))
                eval_seconds += time.perf_counter() - t0
                n_dev_evals += 1
                evals.append({"epoch": epoch, "accuracy": acc, "f1": f1})
    finally:
        bar.close()
    train_seconds = time.perf_counter() - t_train - eval_seconds - saving[0]

    preds = None
    acc = f1 = maj = maj_f1 = float("nan")
    if held is not None:
        dev_labels, dev_enc = held
        t0 = time.perf_counter()
        dbar = progress_bar(show=progress, total=len(dev_labels), desc="evaluate", unit="item")
        try:
            preds = predict(clf, dev_enc, model.pad_id, bar=dbar)
        finally:
            dbar.close()
        eval_seconds += time.perf_counter() - t0
        acc, f1 = scores(dev_labels, preds, len(label_names))
        evals.append({"epoch": round(step / per_epoch, 3), "accuracy": acc, "f1": f1})
        major = np.full(len(dev_labels), train.majority_label)
        maj, maj_f1 = scores(dev_labels, major, len(label_names))
    clf.eval()
    fine = Model(clf, model.tokenizer, name=f"{model.name}-{train.task or 'finetuned'}".lower(),
                 path=str(out_path) if out_path else "")
    result = FinetuneResult(
        model=fine, path=out_path, label_names=label_names, n_train=len(train),
        n_dev=len(dev) if dev is not None else 0, accuracy=acc, f1=f1, majority_rate=maj,
        majority_f1=maj_f1, train_seconds=train_seconds, eval_seconds=eval_seconds,
        wall_seconds=0.0, cpu_seconds=0.0, predictions=preds, history=pd.DataFrame(history),
        epochs_eval=pd.DataFrame(evals, columns=["epoch", "accuracy", "f1"]),
        params={**params, "steps": step},
    )
    result.wall_seconds = time.perf_counter() - t_start
    result.cpu_seconds = time.process_time() - cpu_start
    if out_path is not None:
        save(clf, model.tokenizer, result.summary(), out_path, overwrite)
        result.wall_seconds = time.perf_counter() - t_start
        result.cpu_seconds = time.process_time() - cpu_start
    return result
