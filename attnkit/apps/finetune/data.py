"""Training data for fine-tuning: tokenized GLUE datasets, length-grouped shuffled batches
and padded tensors."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...data.pairs import GlueDataset
from ...errors import InputError


def check_data(data: Any, what: str) -> np.ndarray:
    """The labels of ``data``, a non-empty labelled :class:`GlueDataset` (else InputError)."""
    if not isinstance(data, GlueDataset):
        raise InputError(f"{what} must be a GlueDataset (attnkit.read_glue(...) or "
                         f"GlueDataset(inputs, labels, label_names)), not {type(data).__name__}.")
    if data.labels is None:
        raise InputError(f"{what} ({data!r}) has no labels; fine-tuning needs labelled data.")
    if not len(data):
        raise InputError(f"{what} is empty.")
    return data.labels


def tokenize(model: Any, data: GlueDataset, max_length: int) -> dict[str, list[list[int]]]:
    """Token ids (and masks, type ids where the model takes them) of every input, cut to
    ``max_length`` tokens (pairs longest-first), unpadded."""
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


def train_batches(lengths: np.ndarray, batch_size: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Shuffled batches of similar-length items: shuffle, sort within pools of 50 batches,
    cut, shuffle the batches (less padding, still random)."""
    order = rng.permutation(len(lengths))
    pool = batch_size * 50
    batches: list[np.ndarray] = []
    for s in range(0, len(order), pool):
        chunk = order[s : s + pool]
        chunk = chunk[np.argsort(lengths[chunk], kind="stable")]
        batches.extend(chunk[k : k + batch_size] for k in range(0, len(chunk), batch_size))
    return [batches[i] for i in rng.permutation(len(batches))]


def collate(enc: dict[str, list[list[int]]], idx: np.ndarray, pad_id: int,
            device: Any = None) -> dict[str, Any]:
    """Right-padded long tensors ``[len(idx), width]`` of the items ``idx``, on ``device``
    (default: the CPU)."""
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
