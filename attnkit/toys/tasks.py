"""Two more models with known answers, trained offline in minutes and shipped with attnkit.

- **Reversal** (:func:`train_reversal_model`, :func:`reversal_model`): a small T5-shaped
  encoder–decoder (transformers' own ``T5ForConditionalGeneration``, relative position bias)
  trained to write a sequence of random words backwards. To produce target word ``j`` it must
  read source word ``n - 1 - j``, so its best cross-attention head is anti-diagonal: a known
  answer for :func:`attnkit.analysis.alignment.alignment_error_rate`.
- **Colour square** (:func:`train_colour_model`, :func:`colour_model`): a small ViT
  (``ViTForImageClassification``) trained to name the colour of one square placed at random
  on a blank image (:func:`colour_images`). The class token must read the square's patch, so
  its attention rollout peaks there: a known answer for :func:`attnkit.rollout` on images
  (tests/test_toy_tasks.py).

Each ``train_*`` function is the recipe (seeded; the same seed, torch version and thread
count give the same weights); ``save`` writes a folder that :func:`attnkit.load` reads, and the
copies trained with the default recipes ship in ``attnkit/toy_models`` (``config.attnkit_toy``
holds the recipe, the training time and the accuracy measured then).
"""

from __future__ import annotations

import time
from pathlib import Path
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core.results import HeadResult, head_frame
from ..errors import InputError
from .induction import toy_words

if TYPE_CHECKING:
    from ..runtime.seq2seq import Seq2SeqModel
    from ..runtime.vision import VisionModel

#: Folder of the reversal model trained with the default recipe.
REVERSAL_MODEL = Path(__file__).parent / "toy_models" / "reversal-t5"
#: Folder of the colour-square ViT trained with the default recipe.
COLOUR_MODEL = Path(__file__).parent / "toy_models" / "colour-vit"
#: The colours of :func:`colour_images`, in label order (RGB).
COLOURS = {"red": (220, 30, 30), "green": (30, 170, 60), "blue": (40, 70, 220),
           "yellow": (230, 200, 20)}


# ------------------------------------------------------------------ reversal
def reversal_tokenizer(vocab_size: int = 32) -> Any:
    """A word-level fast tokenizer over :func:`attnkit.toys.induction.toy_words` that ends every text
    with ``</s>``; ``<pad>`` (id 0, also T5's decoder start), ``</s>`` (1), ``<unk>`` (2).

    Parameters
    ----------
    vocab_size : int
        Words besides the special tokens.

    Returns
    -------
    transformers.PreTrainedTokenizerFast

    Examples
    --------
    >>> from attnkit.toys.tasks import reversal_tokenizer
    >>> tok = reversal_tokenizer(4)
    >>> tok.convert_ids_to_tokens(tok("dat dif")["input_ids"])
    ['dat', 'dif', '</s>']
    """
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {w: i for i, w in enumerate(("<pad>", "</s>", "<unk>", *toy_words(vocab_size)))}
    tk = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tk.post_processor = processors.TemplateProcessing(single="$A </s>", pair="$A </s> $B </s>",
                                                      special_tokens=[("</s>", 1)])
    return PreTrainedTokenizerFast(tokenizer_object=tk, eos_token="</s>", pad_token="<pad>",
                                   unk_token="<unk>", model_max_length=64)


def reversal_pairs(n: int, *, vocab_size: int = 32, min_length: int = 4, max_length: int = 8,
                   seed: int = 0) -> list[tuple[str, str]]:
    """``n`` (source, target) pairs: distinct random words and the same words backwards.

    Parameters
    ----------
    n : int
        Pairs.
    vocab_size : int
        Words drawn from (:func:`attnkit.toys.induction.toy_words`).
    min_length, max_length : int
        Words per source, uniform in this range.
    seed : int
        Seed of the draw.

    Returns
    -------
    list of tuple of str

    Raises
    ------
    InputError
        When the lengths are not ``1 <= min_length <= max_length <= vocab_size``.

    Examples
    --------
    >>> from attnkit.toys.tasks import reversal_pairs
    >>> source, target = reversal_pairs(1, min_length=3, max_length=3)[0]
    >>> source.split()[::-1] == target.split()
    True
    """
    if not 1 <= min_length <= max_length <= vocab_size:
        raise InputError(f"Need 1 <= min_length <= max_length <= vocab_size; got {min_length}, "
                         f"{max_length}, {vocab_size}.")
    words = toy_words(vocab_size)
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        k = int(rng.integers(min_length, max_length + 1))
        seq = [words[i] for i in rng.choice(vocab_size, size=k, replace=False)]
        out.append((" ".join(seq), " ".join(seq[::-1])))
    return out


def reversal_gold(pairs: list[tuple[str, str]]) -> list[set[tuple[int, int]]]:
    """Gold word alignments ``{(source word, target word)}`` of reversal pairs:
    target word ``j`` is source word ``n - 1 - j``.

    Parameters
    ----------
    pairs : list of (str, str)
        From :func:`reversal_pairs`.

    Returns
    -------
    list of set of (int, int)

    Examples
    --------
    >>> from attnkit.toys.tasks import reversal_gold
    >>> sorted(reversal_gold([("a b c", "c b a")])[0])
    [(0, 2), (1, 1), (2, 0)]
    """
    gold = []
    for source, _ in pairs:
        n = len(source.split())
        gold.append({(n - 1 - j, j) for j in range(n)})
    return gold


def train_reversal_model(*, vocab_size: int = 32, d_model: int = 64, heads: int = 4,
                         layers: int = 2, steps: int = 1500, batch_size: int = 64,
                         lr: float = 2e-3, min_length: int = 4, max_length: int = 8,
                         seed: int = 0, checkpoint_every: int | None = None,
                         out: str | Path | None = None, progress: bool = True) -> Seq2SeqModel:
    """Train a small T5 to reverse sequences of random words (teacher-forced cross-entropy,
    AdamW, constant learning rate; fresh random pairs every step).

    Parameters
    ----------
    vocab_size : int
        Words (:func:`reversal_tokenizer`).
    d_model, heads, layers : int
        Shape of both stacks (``d_kv = d_model / heads``, ``d_ff = 4 d_model``).
    steps, batch_size : int
        Optimiser steps and pairs per step.
    lr : float
        Learning rate.
    min_length, max_length : int
        Words per sequence.
    seed : int
        Seeds weights and data.
    checkpoint_every : int, optional
        Also write the model every this many steps into ``out`` in the layout of
        transformers' ``Trainer`` (``out/checkpoint-<step>/``: config, weights, the tokenizer and
        ``trainer_state.json`` with the training loss of every step so far), as
        :func:`attnkit.toys.induction.train_induction_model` does: ``checkpoint-0`` holds the
        initial weights and the last step is always written; :func:`attnkit.checkpoints`
        ``(out)`` reads the run. Checkpointing changes nothing in the training.
    out : str or Path, optional
        The folder for the checkpoints (created; it must not exist or be empty). Needed with
        ``checkpoint_every``.
    progress : bool
        Show a progress bar.

    Returns
    -------
    Seq2SeqModel
        ``config.attnkit_toy`` holds the recipe, the seconds it took and its held-out
        sequence accuracy.

    Examples
    --------
    >>> from attnkit.toys.tasks import train_reversal_model
    >>> model = train_reversal_model(steps=2, batch_size=4, d_model=16, heads=2, progress=False)
    >>> model.n_layers, model.config.attnkit_toy["recipe"]["steps"]
    (2, 2)

    With checkpoints every 2 steps (read back with :func:`attnkit.checkpoints`):

    >>> import tempfile, attnkit as ak
    >>> with tempfile.TemporaryDirectory() as d:
    ...     _ = train_reversal_model(steps=3, batch_size=4, d_model=16, heads=2,
    ...                              checkpoint_every=2, out=d, progress=False)
    ...     ak.checkpoints(d).steps
    [0, 2, 3]
    """
    import torch
    import transformers as tf

    from .._progress import progress as bar
    from ..runtime.seq2seq import Seq2SeqModel

    from ..runtime.checkpoint import checkpoint_folder

    recipe = dict(vocab_size=vocab_size, d_model=d_model, heads=heads, layers=layers, steps=steps,
                  batch_size=batch_size, lr=lr, min_length=min_length, max_length=max_length,
                  seed=seed)
    folder = checkpoint_folder(checkpoint_every, out)
    torch.manual_seed(seed)
    tok = reversal_tokenizer(vocab_size)
    cfg = tf.T5Config(vocab_size=len(tok), d_model=d_model, d_kv=d_model // heads,
                      d_ff=4 * d_model, num_layers=layers, num_heads=heads,
                      relative_attention_num_buckets=16, relative_attention_max_distance=32,
                      dropout_rate=0.0, pad_token_id=0, eos_token_id=1,
                      decoder_start_token_id=0, tie_word_embeddings=False,
                      attn_implementation="eager")
    hf = tf.T5ForConditionalGeneration(cfg)
    opt = torch.optim.AdamW(hf.parameters(), lr=lr, weight_decay=0.01)
    saver = _Checkpoints(folder, checkpoint_every, hf, tok, steps, recipe)
    hf.train()
    start = time.perf_counter()
    for step in bar(range(steps), total=steps, desc="reversal", show=progress):
        pairs = reversal_pairs(batch_size, vocab_size=vocab_size, min_length=min_length,
                               max_length=max_length, seed=seed * 1_000_003 + step + 1)
        enc = tok([s for s, _ in pairs], padding=True, return_tensors="pt")
        labels = tok([t for _, t in pairs], padding=True, return_tensors="pt")["input_ids"]
        labels[labels == 0] = -100
        loss = hf(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"],
                  labels=labels).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        saver.after(step + 1, loss.item())
    hf.eval()
    model = Seq2SeqModel(hf, tok, name="toy-reversal-t5")
    held = reversal_pairs(64, vocab_size=vocab_size, min_length=min_length,
                          max_length=max_length, seed=seed + 10_000)
    hf.config.attnkit_toy = {"recipe": recipe,
                             "seconds": round(time.perf_counter() - start - saver.seconds, 1),
                             "sequence_accuracy": reversal_accuracy(model, held)}
    return model


class _Checkpoints:
    """The checkpoints of a toy recipe: ``checkpoint-0`` now, then every ``every`` steps and
    the last (nothing without a folder); the seconds spent writing are kept apart."""

    def __init__(self, folder: Path | None, every: int | None, hf: Any, processor: Any,
                 steps: int, recipe: dict[str, Any]) -> None:
        self.folder, self.every, self.hf, self.processor = folder, every, hf, processor
        self.steps, self.extra = steps, {"attnkit_toy": {"recipe": recipe}}
        self.log: list[dict[str, float]] = []  # trainer_state.json's log_history
        self.seconds = 0.0
        self._write(0)

    def after(self, step: int, loss: float) -> None:
        if self.folder is None:
            return
        self.log.append({"step": step, "loss": loss})
        if self.every and (step % self.every == 0 or step == self.steps):
            self._write(step)

    def _write(self, step: int) -> None:
        from ..runtime.checkpoint import write_checkpoint

        if self.folder is None:
            return
        began = time.perf_counter()
        write_checkpoint(self.hf, self.processor, self.folder, step, max_steps=self.steps,
                         log_history=self.log, extra=self.extra)
        self.seconds += time.perf_counter() - began


def reversal_accuracy(model: Seq2SeqModel, pairs: list[tuple[str, str]]) -> float:
    """Share of pairs whose greedy output is exactly the target.

    Parameters
    ----------
    model : Seq2SeqModel
        A reversal model.
    pairs : list of (str, str)
        From :func:`reversal_pairs`.

    Returns
    -------
    float

    Examples
    --------
    >>> from attnkit.toys.tasks import reversal_accuracy, reversal_model, reversal_pairs
    >>> reversal_accuracy(reversal_model(), reversal_pairs(8, seed=5)) >= 0.9
    True
    """
    hits = 0
    for source, target in pairs:
        ids = model.generate(source, max_new_tokens=len(source.split()) + 2)
        text = model.tokenizer.decode(ids, skip_special_tokens=True)
        hits += text.split() == target.split()
    return hits / max(1, len(pairs))


def reversal_score(model: Seq2SeqModel, inputs: Sequence[tuple[str, str]]) -> HeadResult:
    """How anti-diagonal each cross-attention head is: the attention that the decoder row
    predicting target word ``j`` pays to source word ``n - 1 - j`` (the word it copies),
    averaged over the target words of every pair.

    Rows and columns are pooled to words (:meth:`CrossAttention.to_words`: attention *to* a
    source word sums its pieces); the row of target position ``p`` predicts the word at
    ``p + 1`` (as :func:`attnkit.analysis.alignment.word_alignment` reads it by default). 1:
    every predicting row attends only to the word it must copy; a head spread evenly over
    the source scores about ``1 / (n + 1)``. A per-step score for
    :func:`attnkit.checkpoint_scores` (``score=reversal_score``) over the checkpoints of
    :func:`train_reversal_model`.

    Parameters
    ----------
    model : Seq2SeqModel
        A reversal model (or a checkpoint of one).
    inputs : sequence of (str, str)
        ``(source, target)`` pairs from :func:`reversal_pairs`.

    Returns
    -------
    HeadResult
        Indexed by the decoder's ``(layer, head)`` (0-indexed); column ``reversal`` in [0, 1].

    Raises
    ------
    InputError
        When there are no pairs, or a target is not its source reversed.

    Examples
    --------
    >>> from attnkit.toys.tasks import reversal_model, reversal_pairs, reversal_score
    >>> r = reversal_score(reversal_model(), reversal_pairs(4, seed=7))
    >>> r.table.index.names, bool(r["reversal"].max() > 0.8)
    (FrozenList(['layer', 'head']), True)
    """
    pairs = list(inputs) if isinstance(inputs, Sequence) and not isinstance(inputs, str) else []
    if not pairs:
        raise InputError("inputs must be a non-empty list of (source, target) pairs "
                         "(reversal_pairs(n)).")
    total, count = None, 0
    for pair in pairs:
        if (not isinstance(pair, (tuple, list)) or len(pair) != 2
                or str(pair[1]).split() != str(pair[0]).split()[::-1]):
            raise InputError(f"Each input is a (source, target) pair whose target is the source "
                             f"reversed (reversal_pairs); got {pair!r}.")
        cross = model.attend(pair[0], pair[1]).cross.to_words()
        n = len(cross.source_words)
        reading = np.arange(len(cross.roles) - 1)  # the row predicting the word at p + 1
        word = np.asarray(cross.word_ids)[reading + 1]
        keep = (np.asarray(cross.roles)[reading + 1] == "word") & (word >= 0)
        reading, word = reading[keep], word[keep]
        cols = {int(w): c for c, w in enumerate(cross.source_word_ids)
                if cross.source_roles[c] == "word"}
        copied = np.array([cols[n - 1 - int(j)] for j in word])
        mass = cross.maps[:, :, reading, copied].sum(-1)  # [L, H]
        total = mass if total is None else total + mass
        count += len(reading)
    assert total is not None
    return HeadResult(head_frame({"reversal": total / max(count, 1)}),
                      {"n_items": len(pairs), "n_words": count}, value="reversal")


def reversal_model() -> Seq2SeqModel:
    """The reversal model trained with the default recipe, shipped with attnkit.

    Returns
    -------
    Seq2SeqModel
        Loaded from :data:`REVERSAL_MODEL` with :func:`attnkit.load`.

    Examples
    --------
    >>> from attnkit.toys.tasks import reversal_model
    >>> model = reversal_model()
    >>> model.n_layers, model.config.attnkit_toy["recipe"]["seed"]
    (2, 0)
    """
    from ..runtime.load import load

    model = load(REVERSAL_MODEL)
    model.name = "toy-reversal-t5"
    return model  # type: ignore[return-value]


# ------------------------------------------------------------------ colour square
def colour_images(n: int, *, size: int = 32, patch: int = 8, square: int = 5,
                  seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``n`` white images, each with one square of a colour of :data:`COLOURS`, placed at
    random inside one patch of the grid.

    Parameters
    ----------
    n : int
        Images.
    size, patch : int
        Image side and patch side in pixels (``size`` divisible by ``patch``).
    square : int
        Side of the square (at most ``patch``).
    seed : int
        Seed of the draw.

    Returns
    -------
    tuple
        ``(images uint8 [n, size, size, 3], labels int [n], cells int [n, 2])``: the colour's
        index and the (row, column) of the patch holding the square.

    Raises
    ------
    InputError
        For a square larger than a patch or a size the patch does not divide.

    Examples
    --------
    >>> from attnkit.toys.tasks import colour_images
    >>> images, labels, cells = colour_images(2)
    >>> images.shape, labels.shape, cells.shape
    ((2, 32, 32, 3), (2,), (2, 2))
    """
    if square > patch or size % patch:
        raise InputError(f"Need square <= patch and size divisible by patch; got size {size}, "
                         f"patch {patch}, square {square}.")
    rng = np.random.default_rng(seed)
    colours = np.array(list(COLOURS.values()), dtype=np.uint8)
    side = size // patch
    images = np.full((n, size, size, 3), 255, dtype=np.uint8)
    labels = rng.integers(0, len(colours), size=n)
    cells = rng.integers(0, side, size=(n, 2))
    offsets = rng.integers(0, patch - square + 1, size=(n, 2))
    for i in range(n):
        y = cells[i, 0] * patch + offsets[i, 0]
        x = cells[i, 1] * patch + offsets[i, 1]
        images[i, y:y + square, x:x + square] = colours[labels[i]]
    return images, labels, cells


def train_colour_model(*, hidden: int = 32, heads: int = 2, layers: int = 2,
                       steps: int = 600, batch_size: int = 64, lr: float = 2e-3,
                       seed: int = 0, checkpoint_every: int | None = None,
                       out: str | Path | None = None, progress: bool = True) -> VisionModel:
    """Train a small ViT (32 x 32 images, 8 x 8 patches) to name the colour of the square
    (:func:`colour_images`; cross-entropy, AdamW, fresh images every step).

    Parameters
    ----------
    hidden, heads, layers : int
        Shape of the model.
    steps, batch_size : int
        Optimiser steps and images per step.
    lr : float
        Learning rate.
    seed : int
        Seeds weights and data.
    checkpoint_every : int, optional
        Also write the model every this many steps into ``out`` in the layout of
        transformers' ``Trainer`` (``out/checkpoint-<step>/``: config, weights, the image processor and
        ``trainer_state.json`` with the training loss of every step so far), as
        :func:`attnkit.toys.induction.train_induction_model` does: ``checkpoint-0`` holds the
        initial weights and the last step is always written; :func:`attnkit.checkpoints`
        ``(out)`` reads the run. Checkpointing changes nothing in the training.
    out : str or Path, optional
        The folder for the checkpoints (created; it must not exist or be empty). Needed with
        ``checkpoint_every``.
    progress : bool
        Show a progress bar.

    Returns
    -------
    VisionModel
        ``config.attnkit_toy`` holds the recipe, the seconds and the held-out accuracy.

    Examples
    --------
    >>> from attnkit.toys.tasks import train_colour_model
    >>> model = train_colour_model(steps=2, batch_size=4, progress=False)
    >>> model.config.id2label[0], model.config.attnkit_toy["recipe"]["steps"]
    ('red', 2)

    With checkpoints every 2 steps (read back with :func:`attnkit.checkpoints`):

    >>> import tempfile, attnkit as ak
    >>> with tempfile.TemporaryDirectory() as d:
    ...     _ = train_colour_model(steps=3, batch_size=4, checkpoint_every=2, out=d,
    ...                            progress=False)
    ...     ak.checkpoints(d).steps
    [0, 2, 3]
    """
    import torch
    import transformers as tf

    from .._progress import progress as bar
    from ..testing import vit_processor
    from ..runtime.vision import VisionModel

    from ..runtime.checkpoint import checkpoint_folder

    recipe = dict(hidden=hidden, heads=heads, layers=layers, steps=steps,
                  batch_size=batch_size, lr=lr, seed=seed)
    folder = checkpoint_folder(checkpoint_every, out)
    torch.manual_seed(seed)
    names = list(COLOURS)
    cfg = tf.ViTConfig(image_size=32, patch_size=8, hidden_size=hidden, num_hidden_layers=layers,
                       num_attention_heads=heads, intermediate_size=4 * hidden,
                       hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                       num_labels=len(names), id2label=dict(enumerate(names)),
                       label2id={n: i for i, n in enumerate(names)},
                       attn_implementation="eager")
    hf = tf.ViTForImageClassification(cfg)
    proc = vit_processor(32)
    mean = torch.tensor(proc.image_mean).view(1, 3, 1, 1)
    std = torch.tensor(proc.image_std).view(1, 3, 1, 1)
    opt = torch.optim.AdamW(hf.parameters(), lr=lr, weight_decay=0.01)
    saver = _Checkpoints(folder, checkpoint_every, hf, proc, steps, recipe)
    hf.train()
    start = time.perf_counter()
    for step in bar(range(steps), total=steps, desc="colour", show=progress):
        images, labels, _ = colour_images(batch_size, seed=seed * 1_000_003 + step + 1)
        x = (torch.from_numpy(images).permute(0, 3, 1, 2).float() / 255 - mean) / std
        loss = hf(pixel_values=x, labels=torch.from_numpy(labels)).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        saver.after(step + 1, loss.item())
    hf.eval()
    model = VisionModel(hf, proc, name="toy-colour-vit")
    images, labels, _ = colour_images(256, seed=seed + 10_000)
    x = (torch.from_numpy(images).permute(0, 3, 1, 2).float() / 255 - mean) / std
    with torch.inference_mode():
        pred = hf(pixel_values=x).logits.argmax(-1).numpy()
    hf.config.attnkit_toy = {"recipe": recipe,
                             "seconds": round(time.perf_counter() - start - saver.seconds, 1),
                             "accuracy": float((pred == labels).mean())}
    return model


def colour_score(model: VisionModel, inputs: Sequence[np.ndarray]) -> HeadResult:
    """How much the class token attends to the coloured square: the attention of ``[CLS]``
    to the patch that holds the square's pixels, averaged over the images.

    The patch is found from each image itself (the one patch with pixels that are not
    white), so any image of :func:`colour_images` can be scored. A head spread evenly over
    the 16 patches and ``[CLS]`` gives about 1/17. A per-step score for
    :func:`attnkit.checkpoint_scores` (``score=colour_score``) over the checkpoints of
    :func:`train_colour_model`.

    Parameters
    ----------
    model : VisionModel
        A colour-square ViT (or a checkpoint of one).
    inputs : sequence of ndarray
        Images uint8 ``[size, size, 3]`` from :func:`colour_images`.

    Returns
    -------
    HeadResult
        Indexed by ``(layer, head)`` (0-indexed); column ``square`` in [0, 1].

    Raises
    ------
    InputError
        When there are no images, or an image has no coloured patch or more than one.

    Examples
    --------
    >>> from attnkit.toys.tasks import colour_images, colour_model, colour_score
    >>> images, _, _ = colour_images(4, seed=7)
    >>> r = colour_score(colour_model(), list(images))
    >>> r.table.index.names, list(r.table.columns)
    (FrozenList(['layer', 'head']), ['square'])
    """
    from ..runtime.vision import patch_grid

    images = list(inputs) if isinstance(inputs, (Sequence, np.ndarray)) else []
    if not len(images):
        raise InputError("inputs must be a non-empty list of images (colour_images(n)[0]).")
    total = None
    for k, image in enumerate(images):
        a = np.asarray(image)
        if a.ndim != 3:
            raise InputError(f"Image {k} is not [size, size, 3]; got shape {a.shape}.")
        att = model.attend(image)
        grid = patch_grid(att)
        rows, cols = att.meta["grid"]
        py, px = a.shape[0] // rows, a.shape[1] // cols
        coloured: np.ndarray = np.asarray((a < 250).any(-1))
        inked = coloured[: rows * py, : cols * px].reshape(rows, py, cols, px).any((1, 3))
        where = np.argwhere(inked)
        if len(where) != 1:
            raise InputError(f"Image {k} has {len(where)} patches with colour; colour_score "
                             "reads images of one square inside one patch (colour_images).")
        pos = int(np.flatnonzero((grid == where[0]).all(1))[0])
        mass = np.asarray(att.maps)[:, :, 0, pos]  # [L, H]: [CLS]'s row
        total = mass if total is None else total + mass
    assert total is not None
    return HeadResult(head_frame({"square": total / len(images)}), {"n_items": len(images)},
                      value="square")


def colour_model() -> VisionModel:
    """The colour-square ViT trained with the default recipe, shipped with attnkit.

    Returns
    -------
    VisionModel
        Loaded from :data:`COLOUR_MODEL` with :func:`attnkit.load`.

    Examples
    --------
    >>> from attnkit.toys.tasks import colour_model
    >>> colour_model().config.id2label[3]
    'yellow'
    """
    from ..runtime.load import load

    model = load(COLOUR_MODEL)
    model.name = "toy-colour-vit"
    return model  # type: ignore[return-value]


def save(model: Any, folder: str | Path) -> Path:
    """Write a toy model and its tokenizer or image processor to ``folder`` so that
    :func:`attnkit.load` reads it back.

    Parameters
    ----------
    model : Seq2SeqModel or VisionModel
        A model from :func:`train_reversal_model` or :func:`train_colour_model`.
    folder : str or Path
        Where to write.

    Returns
    -------
    Path

    Examples
    --------
    >>> import tempfile, attnkit as ak
    >>> from attnkit.toys.tasks import save, train_colour_model
    >>> model = train_colour_model(steps=0, progress=False)
    >>> with tempfile.TemporaryDirectory() as d:
    ...     type(ak.load(save(model, d))).__name__
    'VisionModel'
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    model.hf.save_pretrained(folder)
    pre = getattr(model, "processor", None) or model.tokenizer
    pre.save_pretrained(folder)
    return folder


__all__ = [
    "colour_images",
    "colour_model",
    "colour_score",
    "reversal_accuracy",
    "reversal_gold",
    "reversal_model",
    "reversal_pairs",
    "reversal_score",
    "reversal_tokenizer",
    "save",
    "train_colour_model",
    "train_reversal_model",
]
