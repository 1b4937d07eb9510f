"""A real decoder with known heads, trained offline in seconds: the induction toy model.

A 2-layer, attention-only Llama (transformers' own ``LlamaForCausalLM``; each MLP's output
projection is zero and frozen, so every layer adds only attention) trained to continue
repeated random token sequences. Such a model forms a previous-token head in layer 1 and
induction heads in layer 2 (Olsson et al. 2022, §"Induction heads in small attention-only
models"), which makes it a known answer for :func:`attnkit.head_scores`.

``train_induction_model()`` is the recipe, ``save(model, folder)`` writes a folder that
``attnkit.load(folder)`` reads, and ``induction_model()`` loads the copy trained with the
default recipe that ships with attnkit (``INDUCTION_MODEL``).
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..errors import InputError

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerFast

    from ..runtime.model import Model

#: Folder of the induction model trained with the default recipe (``train_induction_model()``).
INDUCTION_MODEL = Path(__file__).parent / "toy_models" / "induction-2l"
#: The special tokens of the toy tokenizer, ids 0, 1, 2; words start at id 3.
SPECIALS = ("<bos>", "<pad>", "<unk>")

_CONSONANTS = "bdfgklmnprstvz"
_VOWELS = "aeiou"
_MAX_WORDS = len(_CONSONANTS) ** 2 * len(_VOWELS)


def toy_words(vocab_size: int) -> list[str]:
    """``vocab_size`` distinct pronounceable three-letter words (``"kot"``, ``"miv"``, ...), in a
    fixed order: the vocabulary of the toy tokenizer.

    Parameters
    ----------
    vocab_size : int
        How many words.

    Returns
    -------
    list of str
        The first ``vocab_size`` words of one fixed (seeded) order.

    Raises
    ------
    InputError
        When ``vocab_size`` is below 1 or above the number of three-letter words.

    Examples
    --------
    >>> from attnkit.toys.induction import toy_words
    >>> toy_words(3)
    ['dat', 'dif', 'zem']
    """
    if not 1 <= vocab_size <= _MAX_WORDS:
        raise InputError(f"vocab_size must be between 1 and {_MAX_WORDS}; got {vocab_size}.")
    words = [a + v + b for a in _CONSONANTS for v in _VOWELS for b in _CONSONANTS]
    order = np.random.default_rng(0).permutation(len(words))
    return [words[i] for i in order[:vocab_size]]


def toy_tokenizer(vocab_size: int = 256, *, max_positions: int = 2048) -> PreTrainedTokenizerFast:
    """A fast word-level tokenizer over :func:`toy_words`: one token per space-separated word,
    unknown words become ``<unk>``, and every text starts with ``<bos>``.

    Parameters
    ----------
    vocab_size : int
        Words in the vocabulary (:func:`toy_words`), besides the special tokens.
    max_positions : int
        The tokenizer's ``model_max_length``.

    Returns
    -------
    transformers.PreTrainedTokenizerFast
        With ``<bos>``, ``<pad>`` and ``<unk>`` special tokens.

    Examples
    --------
    >>> from attnkit.toys.induction import toy_tokenizer
    >>> tok = toy_tokenizer(8)
    >>> tok.convert_ids_to_tokens(tok("dat dif")["input_ids"])
    ['<bos>', 'dat', 'dif']
    """
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {w: i for i, w in enumerate(SPECIALS + tuple(toy_words(vocab_size)))}
    tk = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tk.post_processor = processors.TemplateProcessing(
        single="<bos> $A", pair="<bos> $A $B", special_tokens=[("<bos>", 0)]
    )
    return PreTrainedTokenizerFast(tokenizer_object=tk, bos_token="<bos>", pad_token="<pad>",
                                   unk_token="<unk>", model_max_length=max_positions)


def train_induction_model(
    *,
    vocab_size: int = 512,
    hidden: int = 64,
    heads: int = 2,
    min_length: int = 4,
    start_length: int = 32,
    max_length: int = 256,
    ramp_steps: int = 480,
    tokens_per_step: int = 2048,
    steps: int = 800,
    lr: float = 3e-3,
    max_positions: int = 2048,
    seed: int = 0,
    layers: int = 2,
    checkpoint_every: int | None = None,
    out: str | Path | None = None,
    progress: bool = True,
) -> Model:
    """Train a 2-layer attention-only decoder on repeated random tokens.

    Every training sequence is ``<bos> r r``: ``r`` holds ``m`` distinct random words, ``m``
    drawn log-uniformly from ``[min_length, top]`` for each step, with as many sequences per
    step as fit in ``tokens_per_step``. ``top`` grows geometrically from ``start_length`` to
    ``max_length`` over the first ``ramp_steps`` steps (short sequences first: the heads form
    sooner and more reliably), then stays. The loss is the cross-entropy of the tokens of the
    second copy that can be predicted (all but its first), so the only way to lower it is to
    look back at the first copy: the model forms previous-token heads in layer 1 and
    induction heads in layer 2 (``layers=1`` trains the one-layer variant, which cannot form
    induction heads: a control, Olsson et al. 2022). AdamW (weight decay 0.01) at a constant ``lr``, so a shorter
    run is the start of a longer one.

    The model is transformers' ``LlamaForCausalLM`` (rotary positions, RMSNorm, untied
    embeddings) with ``intermediate_size=1`` and each MLP's ``down_proj`` zero and frozen,
    so the MLPs add exactly nothing. The same seed, torch version and thread count give the
    same weights.

    Parameters
    ----------
    vocab_size : int
        Words of the vocabulary (:func:`toy_words`); the tokenizer adds 3 special tokens.
    hidden : int
        Model width; each head has ``hidden // heads`` dimensions.
    heads : int
        Attention heads per layer.
    min_length, start_length, max_length : int
        The random sequence length ``m`` is at least ``min_length`` and at most
        ``start_length`` at the first step, ``max_length`` from step ``ramp_steps`` on (a
        training input has ``2 m + 1`` tokens); ``max_length <= vocab_size``.
    ramp_steps : int
        Steps over which the longest length grows from ``start_length`` to ``max_length``.
    tokens_per_step : int
        Tokens per optimisation step (batch size ``tokens_per_step // (2 m + 1)``).
    steps : int
        Optimisation steps.
    lr : float
        Learning rate.
    max_positions : int
        Longest input the model accepts (rotary positions: nothing is learned per position,
        but the model was trained on at most ``2 * max_length + 1`` tokens).
    seed : int
        Seed of the initial weights and of the training data (the global torch RNG is left
        as it was).
    layers : int
        Attention layers (``1`` or more; the default 2 is the smallest model with induction
        heads).
    checkpoint_every : int, optional
        Also write the model every this many steps into ``out``, in the layout of
        transformers' ``Trainer``: ``out/checkpoint-<step>/`` with ``config.json``, the
        weights (``model.safetensors``), the tokenizer and ``trainer_state.json``
        (``global_step`` and the training loss of every step so far in ``log_history``).
        ``checkpoint-0`` holds the initial weights and the last step is always written, so
        :func:`attnkit.checkpoints` ``(out)`` reads the run. Checkpointing changes nothing
        in the training (the same weights with or without it).
    out : str or Path, optional
        The folder for the checkpoints (created; it must not exist or be empty, so nothing
        is overwritten). Needed with ``checkpoint_every``.
    progress : bool
        Show a progress bar over the steps.

    Returns
    -------
    Model
        The trained model, ready for ``model.attend``. ``model.config.attnkit_toy`` records
        the recipe, the training time (wall and CPU seconds, torch threads; writing
        checkpoints is counted apart, ``checkpoint_seconds``), the loss and accuracy of the
        training batches every 50 steps (``history``: ``[step, loss, accuracy]``), and the
        accuracy of :func:`induction_accuracy` on fresh inputs of several lengths.

    Raises
    ------
    InputError
        When an option is out of range, ``checkpoint_every`` comes without ``out`` (or
        ``out`` without it), or ``out`` is a file or a folder that is not empty.

    Examples
    --------
    A few steps only (the default 800 take about a minute on one CPU core):

    >>> from attnkit.toys.induction import train_induction_model
    >>> model = train_induction_model(vocab_size=16, hidden=16, start_length=8, max_length=8,
    ...                               steps=2, progress=False)
    >>> model.n_layers, model.n_heads, model.causal
    (2, 2, True)
    >>> model.attend("dat dif dat dif").tokens
    ['<bos>', 'dat', 'dif', 'dat', 'dif']

    With checkpoints every 2 steps (read back with :func:`attnkit.checkpoints`):

    >>> import tempfile, attnkit as ak
    >>> with tempfile.TemporaryDirectory() as d:
    ...     _ = train_induction_model(vocab_size=16, hidden=16, start_length=8, max_length=8,
    ...                               steps=3, checkpoint_every=2, out=d, progress=False)
    ...     ak.checkpoints(d).steps
    [0, 2, 3]
    """
    import torch
    import transformers as tf

    from .._progress import progress as progress_bar
    from ..runtime.checkpoint import checkpoint_folder, write_checkpoint
    from ..runtime.model import Model

    if not 2 <= min_length <= start_length <= max_length <= vocab_size:
        raise InputError(
            "Need 2 <= min_length <= start_length <= max_length <= vocab_size; got "
            f"min_length={min_length}, start_length={start_length}, max_length={max_length}, "
            f"vocab_size={vocab_size}."
        )
    if hidden < 1 or heads < 1 or hidden % heads or (hidden // heads) % 2:
        raise InputError(
            f"hidden must split into {heads} heads of an even size; got hidden={hidden}."
        )
    if steps < 0 or ramp_steps < 0 or tokens_per_step < 2 * max_length + 1 or max_positions < 2 * max_length + 1:
        raise InputError(
            "steps and ramp_steps must be >= 0, and tokens_per_step and max_positions at least "
            f"2 * max_length + 1 = {2 * max_length + 1}."
        )
    if not isinstance(layers, int) or layers < 1:
        raise InputError(f"layers must be a whole number >= 1; got {layers!r}.")
    folder = checkpoint_folder(checkpoint_every, out)
    tokenizer = toy_tokenizer(vocab_size, max_positions=max_positions)
    n_special = len(SPECIALS)
    config = tf.LlamaConfig(
        vocab_size=vocab_size + n_special, hidden_size=hidden, intermediate_size=1,
        num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=heads,
        max_position_embeddings=max_positions, bos_token_id=0, pad_token_id=1,
        eos_token_id=None, tie_word_embeddings=False,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        hf = tf.LlamaForCausalLM(config)
    hf.set_attn_implementation("sdpa")  # the fast kernel for training; Model() sets its own
    for layer in hf.model.layers:
        torch.nn.init.zeros_(layer.mlp.down_proj.weight)
        for p in layer.mlp.parameters():
            p.requires_grad_(False)
    params = [p for p in hf.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.01)
    gen = torch.Generator().manual_seed(seed)
    lo, first, last = math.log(min_length), math.log(start_length), math.log(max_length)
    hf.train()
    history: list[list[float]] = []
    loss_value = float("nan")
    recipe = {"vocab_size": vocab_size, "hidden": hidden, "heads": heads, "layers": layers,
              "min_length": min_length, "start_length": start_length,
              "max_length": max_length, "ramp_steps": ramp_steps,
              "tokens_per_step": tokens_per_step, "steps": steps, "lr": lr,
              "max_positions": max_positions, "seed": seed}
    losses: list[dict[str, float]] = []  # trainer_state.json's log_history: one entry a step
    saving = 0.0  # seconds spent writing checkpoints: not training time
    if folder is not None:
        write_checkpoint(hf, tokenizer, folder, 0, max_steps=steps, log_history=losses,
                         extra={"attnkit_toy": {"recipe": recipe}})
    start, cpu = time.perf_counter(), time.process_time()
    bar = progress_bar(show=progress, total=steps, desc="training induction model", unit="step")
    try:
        for step in range(steps):
            top = first + min(1.0, step / ramp_steps if ramp_steps else 1.0) * (last - first)
            m = round(math.exp(lo + float(torch.rand((), generator=gen)) * (top - lo)))
            batch = max(1, tokens_per_step // (2 * m + 1))
            r = torch.argsort(torch.rand(batch, vocab_size, generator=gen), dim=1)[:, :m] + n_special
            x = torch.cat([torch.zeros(batch, 1, dtype=torch.long), r, r], dim=1)
            logits = hf(input_ids=x).logits[:, m + 1 : 2 * m]
            target = x[:, m + 2 :]
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                                     target.reshape(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            loss_value = loss.item()
            losses.append({"step": step + 1, "loss": loss_value})
            if folder is not None and checkpoint_every and (
                    (step + 1) % checkpoint_every == 0 or step + 1 == steps):
                saved = time.perf_counter()
                write_checkpoint(hf, tokenizer, folder, step + 1, max_steps=steps,
                                 log_history=losses, extra={"attnkit_toy": {"recipe": recipe}})
                saving += time.perf_counter() - saved
            bar.update(1)
            if step % 50 == 0 or step == steps - 1:
                acc = float((logits.detach().argmax(-1) == target).float().mean())
                history.append([step, round(loss_value, 4), round(acc, 4)])
                bar.set_postfix(loss=f"{loss_value:.3f}", acc=f"{acc:.2f}", refresh=False)
    finally:
        bar.close()
    seconds, cpu = time.perf_counter() - start - saving, time.process_time() - cpu - saving
    model = Model(hf, tokenizer, name=f"toy-induction-{layers}l")
    lengths = sorted({min(max_length, 16), max_length // 4, max_length, min(vocab_size, 2 * max_length)})
    accuracy = {str(k): round(induction_accuracy(model, length=k, n=8, seed=seed + 1), 4)
                for k in lengths if k >= 2}
    hf.config.attnkit_toy = {
        "recipe": recipe,
        "train_seconds": round(seconds, 2),
        "train_cpu_seconds": round(cpu, 2),
        "checkpoint_seconds": round(saving, 2),
        "torch_threads": torch.get_num_threads(),
        "torch_version": torch.__version__,
        "final_loss": loss_value,
        "history": history,
        "accuracy": accuracy,
    }
    return model


def induction_accuracy(model: Model, *, length: int = 64, n: int = 16, seed: int = 0) -> float:
    """Share of the predictable tokens of repeated random sequences the model predicts.

    On :func:`attnkit.induction_inputs` ``(model, n, length, seed=seed)``, the tokens of the
    second copy after its first one are determined by the first copy; this is the share of
    them that are the model's most likely next token (chance is about ``1 / vocabulary``).

    Parameters
    ----------
    model : Model
        A causal language model (with its LM head).
    length : int
        Length of the random sequence (at least 2).
    n : int
        Number of inputs.
    seed : int
        Seed of the random tokens.

    Returns
    -------
    float
        Accuracy in ``[0, 1]``.

    Raises
    ------
    InputError
        When the model has no LM head or ``length < 2``.

    Examples
    --------
    >>> from attnkit.testing import tiny_model
    >>> from attnkit.toys.induction import induction_accuracy
    >>> 0.0 <= induction_accuracy(tiny_model("gpt2"), length=4, n=2) <= 1.0
    True
    """
    import torch

    from ..data.induction import induction_inputs

    if length < 2:
        raise InputError(f"length must be at least 2 (one predictable token); got {length}.")
    if not model.causal or model.hf.get_output_embeddings() is None:
        raise InputError(f"{model.name} is not a causal language model with an LM head.")
    inputs = induction_inputs(model, n, length, seed=seed)
    offset = len(inputs[0]) - 2 * length  # 1 with a BOS
    x = torch.as_tensor(np.stack(inputs))
    device = next(model.hf.parameters()).device
    with torch.inference_mode():
        logits = model.hf(input_ids=x.to(device)).logits
    first = offset + length + 1  # the second copy's second token
    pred = logits[:, first - 1 : offset + 2 * length - 1].argmax(-1).cpu()
    return float((pred == x[:, first:]).float().mean())


def save(model: Model, folder: str | Path) -> Path:
    """Write a model and its tokenizer to ``folder`` (created if needed; its config, weight and
    tokenizer files are replaced) so that ``attnkit.load(folder)`` reads it back.

    Parameters
    ----------
    model : Model
        Any attnkit model (e.g. from :func:`train_induction_model`).
    folder : str or Path
        Where to write.

    Returns
    -------
    Path
        The folder.

    Examples
    --------
    >>> import tempfile, attnkit as ak
    >>> from attnkit.toys.induction import save, train_induction_model
    >>> model = train_induction_model(vocab_size=16, hidden=16, start_length=8, max_length=8,
    ...                               steps=0, progress=False)
    >>> with tempfile.TemporaryDirectory() as d:
    ...     ak.load(save(model, d)).n_heads
    2
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    model.hf.save_pretrained(folder)
    model.tokenizer.save_pretrained(folder)
    return folder


def induction_model() -> Model:
    """The induction model trained with the default recipe, shipped with attnkit.

    ``train_induction_model()`` (seed 0) made it; ``model.config.attnkit_toy`` holds the
    recipe, the training time and the accuracies measured then.

    Returns
    -------
    Model
        Loaded from :data:`INDUCTION_MODEL` with :func:`attnkit.load`.

    Examples
    --------
    >>> from attnkit.toys.induction import induction_model
    >>> model = induction_model()
    >>> model.n_layers, model.n_heads, model.config.attnkit_toy["recipe"]["seed"]
    (2, 2, 0)
    """
    from ..runtime.load import load

    model = load(INDUCTION_MODEL)
    model.name = "toy-induction-2l"
    return model

