"""A small, honest fine-tuning loop: a pre-trained encoder plus a classification head.

``finetune(model, train, evaluate_on=dev, out=folder)`` trains a *copy* of an :class:`attnkit.Model`
with a sequence-classification head (``AutoModelForSequenceClassification`` built from the
model's config, its encoder weights copied in), reports dev accuracy and F1 next to the
majority-class baseline, and saves a folder (safetensors weights, config, tokenizer and a
``finetune.json`` with the recipe and the numbers) that :func:`attnkit.load` opens as a
classifier. The pre-trained model is never modified.

The folder appears only when everything is written: files go to a hidden
``.<name>.partial-<pid>`` folder next to ``out`` that is renamed at the end, and removed if
the run is interrupted (``KeyboardInterrupt``) or fails.

Run from a shell (``python -m attnkit.finetune --help``); the recipe measured on MRPC is in
``docs/results.md`` ("Fine-tuning recipe").
"""

from __future__ import annotations

import copy
import json
import math
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ._compat import renamed
from .data.pairs import GlueDataset
from .errors import InputError

#: File written into every fine-tuned folder; its presence also marks a folder that
#: ``overwrite=True`` may replace.
INFO_FILE = "finetune.json"


@dataclass
class FinetuneResult:
    """What a :func:`finetune` run produced and measured.

    ``accuracy``/``f1`` are on the evaluation set (``dev``); ``majority_rate``/``majority_f1``
    are the same scores of always answering the training set's most frequent label. F1 is
    that of label 1 for two classes (GLUE's convention: MRPC "equivalent"), macro-averaged
    otherwise. Times are wall-clock seconds; ``cpu_seconds`` is the process's CPU time
    (all threads), a measure that other jobs on a shared machine do not inflate.
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
    """One row per optimiser step: ``epoch``, ``step``, ``loss``, ``lr``."""
    epochs_eval: pd.DataFrame
    """One row per evaluated epoch: ``epoch``, ``accuracy``, ``f1`` (the last always)."""
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


# ---------------------------------------------------------------- metrics
def scores(labels: np.ndarray, predictions: np.ndarray, n_classes: int) -> tuple[float, float]:
    """(accuracy, F1): F1 of class 1 for two classes, macro F1 over classes otherwise.

    A class never predicted and never present counts F1 = 0 in the macro average only
    when it is present in ``labels``; absent classes are left out.
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


# ---------------------------------------------------------------- model copy
def classifier_copy(model: Any, label_names: tuple[str, ...], attn_implementation: str = "sdpa"):
    """A new ``AutoModelForSequenceClassification`` holding a copy of ``model``'s encoder.

    A model that already is a classifier with as many labels is deep-copied whole.
    Otherwise the head (and a pooler the encoder lacks) starts from the config's random
    initialisation; the encoder weights are copied exactly (checked).
    """
    import transformers as tf

    n = len(label_names)
    hf = model.hf
    id2label = {k: name for k, name in enumerate(label_names)}
    if "SequenceClassification" in type(hf).__name__ and hf.config.num_labels == n:
        clf = copy.deepcopy(hf)
        clf.config.id2label, clf.config.label2id = id2label, {v: k for k, v in id2label.items()}
    else:
        config = copy.deepcopy(model.config)
        config.num_labels = n
        config.id2label, config.label2id = id2label, {v: k for k, v in id2label.items()}
        config.architectures = None
        if getattr(config, "pad_token_id", None) is None:
            config.pad_token_id = model.pad_id  # decoder classifiers find the last token by it
        try:
            clf = tf.AutoModelForSequenceClassification.from_config(
                config, attn_implementation=attn_implementation)
        except (ValueError, ImportError):
            clf = tf.AutoModelForSequenceClassification.from_config(config, attn_implementation="eager")
        except KeyError as exc:
            raise InputError(
                f"transformers has no sequence-classification head for model type "
                f"{config.model_type!r}; fine-tune a model that has one (BERT, RoBERTa, GPT-2...)."
            ) from exc
        missing, unexpected = clf.base_model.load_state_dict(model.base.state_dict(), strict=False)
        # BERT-style classifiers add a pooler when the encoder has none; RoBERTa-style
        # ones have their own head and drop the encoder's pooler.
        missing = [k for k in missing if not k.startswith("pooler.")]
        unexpected = [k for k in unexpected if not k.startswith("pooler.")]
        if missing or unexpected:
            raise InputError(
                f"The encoder of {model.name} does not fit the classifier built from its config "
                f"(missing {missing[:3]}, unexpected {list(unexpected)[:3]})."
            )
    if hasattr(clf, "set_attn_implementation"):
        try:
            clf.set_attn_implementation(attn_implementation)
        except (ValueError, ImportError):
            pass
    return clf


def _freeze(clf: Any, n_layers: int) -> None:
    """Stop gradients into the embeddings and the first ``n_layers - 1`` layers
    (``n_layers = 0``: train everything; ``1``: freeze the embeddings only)."""
    if n_layers <= 0:
        return
    base = clf.base_model
    emb = base.get_input_embeddings()
    embeddings = getattr(base, "embeddings", None)
    frozen = [embeddings if embeddings is not None else emb]
    layers = _layer_list(base)
    if n_layers - 1 > len(layers):
        raise InputError(f"freeze_layers={n_layers} but the model has {len(layers)} layers "
                         f"(at most {len(layers) + 1}: the embeddings plus every layer).")
    frozen.extend(layers[: n_layers - 1])
    for module in frozen:
        for p in module.parameters():
            p.requires_grad_(False)


def _layer_list(base: Any) -> list:
    for path in ("encoder.layer", "h", "layers", "layer"):
        obj = base
        for part in path.split("."):
            obj = getattr(obj, part, None)
            if obj is None:
                break
        if obj is not None:
            return list(obj)
    raise InputError(f"Cannot find the layer list of {type(base).__name__} to freeze layers.")


# ---------------------------------------------------------------- batches
def _tokenize(model: Any, data: GlueDataset, max_length: int) -> dict[str, list[list[int]]]:
    tok = model.tokenizer
    inputs = data.inputs
    if all(isinstance(x, str) for x in inputs):
        enc = tok(list(inputs), truncation=True, max_length=max_length)
    elif all(isinstance(x, tuple) and len(x) == 2 and all(isinstance(s, str) for s in x)
             for x in inputs):
        a, b = zip(*inputs)
        enc = tok(list(a), list(b), truncation=True, max_length=max_length)
    else:
        raise InputError("finetune() needs inputs that are all texts or all (text_a, text_b) pairs.")
    keys = ["input_ids", "attention_mask"]
    if model._accepts_type_ids and "token_type_ids" in enc:
        keys.append("token_type_ids")
    return {k: list(enc[k]) for k in keys}


def _train_batches(lengths: np.ndarray, batch_size: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Shuffled batches of similar-length items: shuffle, sort within pools of 50 batches,
    cut, shuffle the batches (less padding, still random)."""
    order = rng.permutation(len(lengths))
    pool = batch_size * 50
    batches = []
    for s in range(0, len(order), pool):
        chunk = order[s : s + pool]
        chunk = chunk[np.argsort(lengths[chunk], kind="stable")]
        batches.extend(chunk[k : k + batch_size] for k in range(0, len(chunk), batch_size))
    return [batches[i] for i in rng.permutation(len(batches))]


def _device_of(module: Any) -> Any:
    import torch

    try:
        return next(module.parameters()).device
    except StopIteration:
        return torch.device("cpu")


def _collate(enc: dict[str, list[list[int]]], idx: np.ndarray, pad_id: int, device: Any = None):
    """Padded long tensors of the items ``idx``, on ``device`` (default: the CPU)."""
    import torch

    width = max(len(enc["input_ids"][i]) for i in idx)
    out = {}
    for key, values in enc.items():
        fill = pad_id if key == "input_ids" else 0
        t = torch.full((len(idx), width), fill, dtype=torch.long)
        for r, i in enumerate(idx):
            row = values[i]
            t[r, : len(row)] = torch.tensor(row, dtype=torch.long)
        out[key] = t if device is None else t.to(device)
    return out


def predict(clf: Any, enc: dict[str, list[list[int]]], pad_id: int, batch_size: int = 64,
            bar: Any = None) -> np.ndarray:
    """Predicted label of every item (batches sorted by length); puts ``clf`` in eval mode."""
    import torch

    lengths = np.array([len(x) for x in enc["input_ids"]])
    order = np.argsort(lengths, kind="stable")
    preds = np.empty(len(lengths), dtype=np.int64)
    device = _device_of(clf)
    clf.eval()
    with torch.inference_mode():
        for k in range(0, len(order), batch_size):
            idx = order[k : k + batch_size]
            logits = clf(**_collate(enc, idx, pad_id, device)).logits
            preds[idx] = logits.argmax(-1).cpu().numpy()
            if bar is not None:
                bar.update(len(idx))
    return preds


# ---------------------------------------------------------------- saving
def _partial_dir(out: Path) -> Path:
    return out.parent / f".{out.name}.partial-{os.getpid()}"


def _clear_stale_partials(out: Path) -> None:
    """Remove partial folders left by killed runs (their process is gone)."""
    for p in out.parent.glob(f".{out.name}.partial-*"):
        try:
            pid = int(p.name.rsplit("-", 1)[1])
            os.kill(pid, 0)
            if pid != os.getpid():
                continue
        except (ValueError, ProcessLookupError):
            pass
        except PermissionError:
            continue
        shutil.rmtree(p, ignore_errors=True)


def _check_out(out: Path, overwrite: bool) -> None:
    if not out.exists():
        return
    if not overwrite:
        raise InputError(f"{out} already exists; pass overwrite=True to replace it, or another out.")
    if not (out / INFO_FILE).is_file():
        raise InputError(f"{out} exists and was not written by attnkit.finetune (no {INFO_FILE}); "
                         "refusing to replace it. Choose another out folder.")


def _save(clf: Any, tokenizer: Any, info: dict[str, Any], out: Path, overwrite: bool) -> None:
    """Write the folder under a temporary name, then rename it into place."""
    _check_out(out, overwrite)
    out.parent.mkdir(parents=True, exist_ok=True)
    _clear_stale_partials(out)
    tmp = _partial_dir(out)
    old = out.parent / f".{out.name}.old-{os.getpid()}"
    try:
        shutil.rmtree(tmp, ignore_errors=True)
        _quietly(clf.save_pretrained, tmp)
        tokenizer.save_pretrained(tmp)
        if not (tmp / "model.safetensors").is_file() and not list(tmp.glob("*.safetensors")):
            raise InputError(f"transformers wrote no safetensors weights into {tmp}.")
        (tmp / INFO_FILE).write_text(json.dumps(info, indent=1, default=_json_default))
        if out.exists():
            os.replace(out, old)
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        if old.exists() and not out.exists():
            os.replace(old, out)  # put the previous folder back
        raise
    shutil.rmtree(old, ignore_errors=True)


def _quietly(fn, *args):
    """Call ``fn`` without transformers' own progress bars (library code stays quiet)."""
    from transformers.utils import logging as hf_logging

    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        return fn(*args)
    finally:
        if bars:
            hf_logging.enable_progress_bar()


def _json_default(o: Any):
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return float(o)
    if isinstance(o, Path):
        return str(o)
    raise TypeError(type(o).__name__)


# ---------------------------------------------------------------- finetune
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
    progress: bool = True,
) -> FinetuneResult:
    """Fine-tune a copy of ``model`` with a classification head on ``inputs``; score on
    ``evaluate_on``.

    Parameters
    ----------
    model : an :class:`attnkit.Model` (or a name for :func:`attnkit.load`). Not modified.
    inputs, evaluate_on : :class:`~attnkit.data.pairs.GlueDataset` with labels and the same
        ``label_names`` (e.g. ``read_glue("MRPC", "train")`` and ``"dev"``): the training
        data and the held-out split reported on (``None``: no evaluation; nothing is chosen
        on it).
    epochs : passes over the training items; a fraction stops part-way through the last.
    max_items : train on a random subset of this many training items (seeded).
    lr, weight_decay, warmup : AdamW with linear warm-up over ``warmup`` of the steps, then
        linear decay to 0; gradients clipped to norm 1.
    max_length : token cap per input (pairs truncated longest-first); default 128 or the
        model's maximum if smaller.
    batch_size : items per step; batches group items of similar length (less padding).
    out : folder to save into (safetensors + config + tokenizer + ``finetune.json``);
        written atomically. An existing folder is an error unless ``overwrite=True`` and it
        was written by finetune.
    freeze_layers : 0 trains everything; k > 0 freezes the embeddings and the first k - 1
        layers.
    eval_each_epoch : also score ``dev`` after every full epoch (``result.epochs_eval``).

    Returns a :class:`FinetuneResult` with the fine-tuned :class:`attnkit.Model` (trained
    on the model's device, in eval mode) as ``result.model``. Shows tqdm progress bars unless
    ``progress=False``. Set ``torch.set_num_threads`` yourself; finetune leaves it alone.
    """
    train, dev = inputs, evaluate_on
    import torch
    from tqdm.auto import tqdm

    from .model import Model, load

    t_start, cpu_start = time.perf_counter(), time.process_time()
    if isinstance(model, (str, Path)):
        model = load(model)
    _check_data(train, "train")
    if dev is not None:
        _check_data(dev, "dev")
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
        _check_out(out_path, overwrite)  # fail before training, not after
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
    clf = classifier_copy(model, label_names).to(model.device)  # trains on the model's device
    _freeze(clf, freeze_layers)
    enc = _tokenize(model, train, max_length)
    dev_enc = _tokenize(model, dev, max_length) if dev is not None else None
    labels = torch.tensor(train.labels, dtype=torch.long, device=model.device)
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
    bar = tqdm(total=total, desc=f"fine-tune {model.name} on {train.task or 'data'}", unit="step",
               disable=not progress, dynamic_ncols=True)
    t_train = time.perf_counter()
    step = 0
    try:
        epoch = 0
        while step < total:
            clf.train()
            for idx in _train_batches(lengths, batch_size, rng):
                if step >= total:
                    break
                loss = clf(**_collate(enc, idx, model.pad_id, model.device), labels=labels[idx]).loss
                loss.backward()
                torch.nn.utils.clip_grad_norm_([p for _, p in trainable], 1.0)
                opt.step()
                sched.step()
                opt.zero_grad(set_to_none=True)
                history.append({"epoch": epoch, "step": step, "loss": float(loss.detach()),
                                "lr": float(sched.get_last_lr()[0])})
                step += 1
                bar.update(1)
                bar.set_postfix(loss=f"{np.mean([h['loss'] for h in history[-20:]]):.3f}")
            epoch += 1
            if dev is not None and eval_each_epoch and step < total:
                t0 = time.perf_counter()
                acc, f1 = scores(dev.labels, predict(clf, dev_enc, model.pad_id), len(label_names))
                eval_seconds += time.perf_counter() - t0
                n_dev_evals += 1
                evals.append({"epoch": epoch, "accuracy": acc, "f1": f1})
    finally:
        bar.close()
    train_seconds = time.perf_counter() - t_train - eval_seconds

    preds = None
    acc = f1 = maj = maj_f1 = float("nan")
    if dev is not None:
        t0 = time.perf_counter()
        dbar = tqdm(total=len(dev), desc="evaluate", unit="item", disable=not progress,
                    dynamic_ncols=True)
        try:
            preds = predict(clf, dev_enc, model.pad_id, bar=dbar)
        finally:
            dbar.close()
        eval_seconds += time.perf_counter() - t0
        acc, f1 = scores(dev.labels, preds, len(label_names))
        evals.append({"epoch": round(step / per_epoch, 3), "accuracy": acc, "f1": f1})
        major = np.full(len(dev), train.majority_label)
        maj, maj_f1 = scores(dev.labels, major, len(label_names))
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
        _save(clf, model.tokenizer, result.summary(), out_path, overwrite)
        result.wall_seconds = time.perf_counter() - t_start
        result.cpu_seconds = time.process_time() - cpu_start
    return result


def _check_data(data: Any, what: str) -> None:
    if not isinstance(data, GlueDataset):
        raise InputError(f"{what} must be a GlueDataset (attnkit.read_glue(...) or "
                         f"GlueDataset(inputs, labels, label_names)), not {type(data).__name__}.")
    if data.labels is None:
        raise InputError(f"{what} ({data!r}) has no labels; fine-tuning needs labelled data.")
    if not len(data):
        raise InputError(f"{what} is empty.")


# ---------------------------------------------------------------- command line
def main(argv: list[str] | None = None) -> dict[str, Any]:
    """``python -m attnkit.finetune --task MRPC --out runs/minilm-mrpc ...``; prints the
    result summary as JSON (and returns it)."""
    import argparse

    import torch

    from .data.pairs import read_glue

    ap = argparse.ArgumentParser(prog="python -m attnkit.finetune", description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="minilm", help="model name or folder (default: minilm)")
    ap.add_argument("--task", default="MRPC", help="GLUE task folder name under glue/ (default MRPC)")
    ap.add_argument("--train-split", default="train")
    ap.add_argument("--dev-split", default="dev")
    ap.add_argument("--holdout", type=float, default=0.0,
                    help="evaluate on this stratified fraction held out of the train split instead "
                         "of the dev split (for choosing a recipe without looking at dev)")
    ap.add_argument("--epochs", type=float, default=3)
    ap.add_argument("--max-items", type=int, default=None)
    ap.add_argument("--lr", type=float, default=5e-5)
    ap.add_argument("--max-length", type=int, default=None, help="token cap (default 128)")
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--freeze-layers", type=int, default=0)
    ap.add_argument("--warmup", type=float, default=0.1)
    ap.add_argument("--weight-decay", type=float, default=0.01)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--eval-each-epoch", action="store_true")
    ap.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's)")
    ap.add_argument("--out", default=None, help="folder to save the fine-tuned model into")
    ap.add_argument("--overwrite", action="store_true")
    ap.add_argument("--no-progress", action="store_true")
    a = ap.parse_args(argv)
    if a.threads:
        torch.set_num_threads(a.threads)
    load_before = os.getloadavg()
    train = read_glue(a.task, a.train_split)
    if a.holdout:
        train, dev = train.split_off(a.holdout, seed=0)  # the same hold-out for every recipe
    else:
        dev = read_glue(a.task, a.dev_split)
    res = finetune(a.model, train, evaluate_on=dev, epochs=a.epochs, max_items=a.max_items, lr=a.lr,
                   max_length=a.max_length, batch_size=a.batch_size, out=a.out, seed=a.seed,
                   freeze_layers=a.freeze_layers, weight_decay=a.weight_decay, warmup=a.warmup,
                   eval_each_epoch=a.eval_each_epoch, overwrite=a.overwrite,
                   progress=not a.no_progress)
    summary = res.summary()
    summary["eval_split"] = f"holdout {a.holdout} of {a.train_split}" if a.holdout else a.dev_split
    summary["load_average"] = {"before": load_before, "after": os.getloadavg(), "cpus": os.cpu_count()}
    print(json.dumps(summary, indent=1, default=_json_default))
    return summary


if __name__ == "__main__":
    main()
