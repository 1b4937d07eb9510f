"""Where a head's output is replaced, and the forward passes every intervention runs.

A head's output ``z_h`` is its attention output *before* the output projection: the
``d_head`` columns ``h * d_head .. (h + 1) * d_head`` of the output projection's **input**
(``o_proj`` / ``dense`` / ``out_lin`` / ``c_proj``, as each family's record in
:data:`attnkit.runtime.archs.ARCHS` says). Replacing it there is a head ablation; zeroing a slice of the
projection's *output* is not (every head writes to every output column). Under grouped-query
attention a query head owns its own ``z_h`` even though it shares its key/value head, so
replacing ``z_h`` never touches the shared keys and values, nor the other query heads of the
group.

The residual stream entering layer ``l`` is the first input of layer ``l``'s module.

An encoder–decoder has three stacks of heads (:data:`~attnkit.runtime.archs.STACKS`):
``"encoder"`` (self-attention over the source), ``"decoder"`` (causal self-attention over the
target) and ``"cross"`` (the decoder's attention over the encoder's output). Every
intervention acts on one stack, named by ``stack=``; its layers and heads are that stack's
(0-indexed), its positions the source's (``"encoder"``) or the target's (``"decoder"``,
``"cross"``). Inputs are ``(source, target)`` pairs, as :meth:`Seq2SeqModel.attend
<attnkit.runtime.seq2seq.Seq2SeqModel.attend>` takes them, and the metric reads the
decoder's logits when teacher-forced on the target.

One forward runs ``R`` copies of a batch of ``B`` inputs (``R * B`` rows, copy-major: row
``r * B + i`` is copy ``r`` of input ``i``). An :class:`Edits` says, per site, which heads at
which positions each copy replaces, and with what (a ``[B or 1, T, H, d_head]`` source of
head outputs, or ``[B, T, d]`` of residual streams): one ``torch.where`` per site and
forward, so every head (or head and position) of a model is patched in batches.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from ..core import validate
from ..errors import InputError, UnsupportedModelError
from ..runtime.archs import ARCHS, STACKS, arch_of, families, model_type, submodule

@dataclass
class Sites:
    """The modules of one model where interventions act.

    Parameters
    ----------
    layers : list of torch.nn.Module
        The transformer layers (their first input is the residual stream).
    out_proj : list of torch.nn.Module
        Each layer's attention output projection (its input holds the head outputs).
    n_heads, head_dim : int
        Query heads per layer and each head's width in the projection's input.
    stack : str, optional
        An encoder–decoder's stack (``"encoder"``, ``"decoder"``, ``"cross"``); None for a
        one-stack model.
    calls : int
        Attention calls one forward makes (every stack's layers).
    """

    layers: list[Any]
    out_proj: list[Any]
    n_heads: int
    head_dim: int
    stack: str | None = None
    calls: int = 0

    @property
    def n_layers(self) -> int:
        """Layers of the stack."""
        return len(self.layers)


def is_seq2seq(model: Any) -> bool:
    """Whether ``model`` is an encoder–decoder (its inputs are ``(source, target)`` pairs).

    Examples
    --------
    >>> from attnkit.interventions.hooks import is_seq2seq
    >>> from attnkit.testing import tiny_model, tiny_seq2seq
    >>> is_seq2seq(tiny_seq2seq("t5")), is_seq2seq(tiny_model("gpt2"))
    (True, False)
    """
    return getattr(model, "family", "text") == "encoder-decoder"


def check_stack(model: Any, stack: Any) -> str | None:
    """``stack=`` checked against the model: one of :data:`~attnkit.runtime.archs.STACKS`
    for an encoder–decoder, None for a one-stack model.

    Parameters
    ----------
    model : Model
        The model.
    stack : str or None
        The stack named.

    Returns
    -------
    str or None

    Raises
    ------
    InputError
        For a stack missing on an encoder–decoder, given for a one-stack model, or unknown.

    Examples
    --------
    >>> from attnkit.interventions.hooks import check_stack
    >>> from attnkit.testing import tiny_seq2seq
    >>> check_stack(tiny_seq2seq("bart"), "cross")
    'cross'
    """
    if not is_seq2seq(model):
        if stack is not None:
            raise InputError(f"stack={stack!r} names a stack of an encoder-decoder; "
                             f"{getattr(model, 'name', 'this model')} has one stack of heads, "
                             "so leave stack=None.")
        return None
    if stack is None:
        raise InputError(f"stack: {model.name} is an encoder-decoder; say which heads with "
                         f"stack='encoder' (self-attention over the source), 'decoder' "
                         f"(self-attention over the target) or 'cross' (the decoder's attention "
                         f"over the source).")
    return validate.choice(stack, "stack", STACKS)


def kv_heads(model: Any) -> int:
    """Key/value heads per layer of a text model: fewer than ``model.n_heads`` under
    grouped-query attention (each serves ``n_heads // kv_heads(model)`` query heads), else
    ``model.n_heads``.

    Parameters
    ----------
    model : Model
        A model of :func:`attnkit.load`.

    Returns
    -------
    int

    Examples
    --------
    >>> from attnkit.interventions.hooks import kv_heads
    >>> from attnkit.testing import tiny_model
    >>> kv_heads(tiny_model("llama", heads=4, kv_heads=2)), kv_heads(tiny_model("gpt2"))
    (2, 2)
    """
    return int(getattr(model.config, "num_key_value_heads", None) or model.n_heads)


def sites(model: Any, stack: str | None = None) -> Sites:
    """The :class:`Sites` of ``model`` (of one stack of an encoder–decoder), or a clear
    refusal.

    Parameters
    ----------
    model : Model
        A text, vision or encoder–decoder model loaded with :func:`attnkit.load` (or
        :mod:`attnkit.testing`'s tiny models).
    stack : str, optional
        An encoder–decoder's ``"encoder"``, ``"decoder"`` or ``"cross"``; None otherwise.

    Returns
    -------
    Sites

    Raises
    ------
    UnsupportedModelError
        For families interventions do not know.
    InputError
        For a stack the model does not have (:func:`check_stack`).

    Examples
    --------
    >>> from attnkit.interventions.hooks import sites
    >>> from attnkit.testing import tiny_model, tiny_seq2seq
    >>> s = sites(tiny_model("llama", heads=4, kv_heads=2, hidden=16))
    >>> len(s.layers), s.n_heads, s.head_dim
    (2, 4, 4)
    >>> s = sites(tiny_seq2seq("t5", heads=4), "cross")
    >>> s.n_layers, s.n_heads, s.head_dim, s.calls
    (2, 4, 4, 6)
    """
    arch = arch_of(model)
    kind = model_type(model)
    family = getattr(model, "family", "text")
    readable = arch.stacks is not None if family == "encoder-decoder" else arch.layout is not None
    if family not in ("text", "vision", "encoder-decoder") or arch.reader != family or not readable:
        known = ", ".join(name for reader in ("text", "vision") for name in families(reader)
                          if ARCHS[name].layout is not None)
        known += "; encoder-decoders " + ", ".join(
            name for name in families("encoder-decoder") if ARCHS[name].stacks is not None)
        raise UnsupportedModelError(
            f"model: interventions cannot act on {getattr(model, 'name', kind)!r} "
            f"({kind or type(model).__name__}, {family if family != 'text' else arch.reader}); they "
            f"support the text encoders and decoders, the vision transformers and the "
            f"encoder-decoders whose heads attnkit locates: {known}.")
    stack = check_stack(model, stack)
    if stack is not None:
        assert arch.stacks is not None
        spec = arch.stacks.of(stack)
        n_heads = model.n_heads if stack == "encoder" else model.n_decoder_heads
        calls = model.n_layers + 2 * model.n_decoder_layers
    else:
        assert arch.layout is not None
        spec, n_heads, calls = arch.layout, model.n_heads, model.n_layers
    try:
        layers = list(submodule(model.base, spec.layers))
        projs = [submodule(layer, spec.out_proj) for layer in layers]
    except AttributeError as exc:
        raise UnsupportedModelError(
            f"model: {model.name} does not have the layout attnkit expects for {kind!r} models "
            f"({exc}).") from exc
    w = projs[0].weight
    width = int(w.shape[0] if spec.conv1d else w.shape[1])
    if width % n_heads:
        raise UnsupportedModelError(
            f"model: {model.name}'s output projection reads {width} features, not a multiple of "
            f"its {n_heads} heads.")
    return Sites(layers, projs, n_heads, width // n_heads, stack, calls)


# ------------------------------------------------------------------ inputs
@dataclass
class Batch:
    """Inputs of a model, padded on its device.

    Parameters
    ----------
    kwargs : dict
        ``input_ids``, ``attention_mask`` (``[B, T]``) and ``token_type_ids`` where the model
        takes them; ``pixel_values`` for a vision model; an encoder–decoder's also
        ``decoder_input_ids`` and ``decoder_attention_mask`` (``[B, T]``).
    lengths : list of int
        Real tokens of each input (of each target, for an encoder–decoder: what metrics
        read).
    source_lengths : list of int, optional
        An encoder–decoder's real source tokens of each input.
    """

    kwargs: dict[str, Any]
    lengths: list[int]
    source_lengths: list[int] | None = None

    @property
    def size(self) -> int:
        """Inputs ``B``."""
        return len(self.lengths)

    @property
    def width(self) -> int:
        """Padded length ``T`` (of the targets, for an encoder–decoder)."""
        return max(self.lengths)

    def lengths_of(self, stack: str | None) -> list[int]:
        """Real positions per input of a stack's heads: the sources' for ``"encoder"``, else
        :attr:`lengths`."""
        if stack == "encoder" and self.source_lengths is not None:
            return self.source_lengths
        return self.lengths

    def width_of(self, stack: str | None) -> int:
        """Padded positions of a stack's heads (:meth:`lengths_of`)."""
        return max(self.lengths_of(stack))

    def mask_of(self, stack: str | None) -> Any:
        """``[B, T]``: 1 at the real positions of a stack's heads."""
        if stack == "encoder":
            return self.kwargs["attention_mask"]
        return self.mask

    @property
    def device(self) -> Any:
        """Where the inputs are."""
        return next(v for v in self.kwargs.values() if hasattr(v, "device")).device

    @property
    def mask(self) -> Any:
        """``[B, T]``: 1 at real tokens (all ones for images; the targets' for an
        encoder–decoder)."""
        import torch

        m = self.kwargs.get("decoder_attention_mask", self.kwargs.get("attention_mask"))
        return m if m is not None else torch.ones(self.size, self.width, dtype=torch.long,
                                                  device=self.device)

    @property
    def ids(self) -> Any:
        """``[B, T]`` token ids (zeros for images, which have none; the decoder's input for
        an encoder–decoder)."""
        import torch

        ids = self.kwargs.get("decoder_input_ids", self.kwargs.get("input_ids"))
        return ids if ids is not None else torch.zeros(self.size, self.width, dtype=torch.long,
                                                       device=self.device)

    def repeated(self, copies: int) -> dict[str, Any]:
        """The model inputs of ``copies`` copies of the batch, copy-major ``[copies * B, T]``."""
        return {k: v.repeat(copies, *([1] * (v.dim() - 1))) if hasattr(v, "repeat") else v
                for k, v in self.kwargs.items()}

    def rows(self, start: int, stop: int) -> Batch:
        """Inputs ``start`` to ``stop - 1``, padded to the longest of them (inputs are padded
        on the right, so the padding cut is padding only).

        Parameters
        ----------
        start, stop : int
            The inputs kept, as a slice ``[start:stop]``.

        Returns
        -------
        Batch

        Examples
        --------
        >>> from attnkit.interventions.hooks import batch
        >>> from attnkit.testing import tiny_model
        >>> b = batch(tiny_model("gpt2"), ["The cat sat.", "We read.", "Go."])
        >>> part = b.rows(1, 3)
        >>> b.width, part.lengths, tuple(part.kwargs["input_ids"].shape)
        (7, [3, 3], (2, 3))
        """
        lengths = self.lengths[start:stop]
        sources = None if self.source_lengths is None else self.source_lengths[start:stop]
        kwargs = {}
        for k, v in self.kwargs.items():
            if hasattr(v, "dim") and v.dim() >= 1 and v.shape[0] == self.size:
                v = v[start:stop]
                if v.dim() == 2 and not v.is_floating_point():  # ids and masks [B, T]
                    v = v[:, :max(lengths if sources is None or k.startswith("decoder_")
                                  else sources)]
            kwargs[k] = v
        return Batch(kwargs, lengths, sources)


def batch(model: Any, inputs: Any, name: str = "inputs") -> Batch:
    """Encode ``inputs`` (texts, pairs, word lists or token ids, as :meth:`Model.encode`;
    ``(source, target)`` pairs for an encoder–decoder, as :meth:`Seq2SeqModel.encode_pair
    <attnkit.runtime.seq2seq.Seq2SeqModel.encode_pair>`) and pad them on the model's device.

    Parameters
    ----------
    model : Model
        The model.
    inputs : sequence
        The inputs (a single text, id array or ``(source, target)`` pair counts as one input).
    name : str
        The parameter's name, for errors.

    Returns
    -------
    Batch

    Raises
    ------
    InputError
        When there is no input, or an encoder–decoder's input is not a pair.

    Examples
    --------
    >>> from attnkit.interventions.hooks import batch
    >>> from attnkit.testing import tiny_model, tiny_seq2seq
    >>> b = batch(tiny_model("gpt2"), ["The cat sat.", "We read."])
    >>> b.size, b.lengths
    (2, [7, 3])
    >>> b = batch(tiny_seq2seq("t5"), [("The cat sat.", "A cat."), ("We read.", "Read.")])
    >>> b.source_lengths, b.lengths   # targets start with the decoder start token
    ([5, 4], [5, 4])
    """
    import numpy as np

    pairs = is_seq2seq(model)
    if isinstance(inputs, str) or (isinstance(inputs, np.ndarray) and inputs.ndim == 1) or (
            pairs and isinstance(inputs, tuple) and len(inputs) == 2
            and not isinstance(inputs[0], tuple)):
        inputs = [inputs]
    try:
        items = list(inputs)
    except TypeError:
        what = "(source, target) pairs" if pairs else "texts or token ids"
        raise InputError(f"{name} must be a sequence of inputs ({what}); "
                         f"got {type(inputs).__name__}.") from None
    if not items:
        raise InputError(f"{name} is empty; give at least one input.")
    if pairs:
        return _pair_batch(model, items, name)
    encs = [model.encode(item) for item in items]
    for i, e in enumerate(encs):
        if len(e) == 0:
            raise InputError(f"{name}[{i}] has no tokens.")
    return Batch(model.to_device(model.pad(encs)), [len(e) for e in encs])


def _pair_batch(model: Any, items: list[Any], name: str) -> Batch:
    import torch

    from ..errors import AttnkitError

    encs = []
    for i, item in enumerate(items):
        try:
            encs.append(model.encode_pair(item))
        except AttnkitError as exc:
            raise InputError(f"{name}[{i}]: {exc}") from None
    kwargs = model.pad([e.source for e in encs])
    targets = [e.target for e in encs]
    width = max(len(t) for t in targets)
    ids = torch.full((len(targets), width), int(model.pad_id), dtype=torch.long)
    mask = torch.zeros((len(targets), width), dtype=torch.long)
    for i, t in enumerate(targets):
        ids[i, : len(t)] = torch.tensor(t.input_ids)
        mask[i, : len(t)] = 1
    kwargs.update(decoder_input_ids=ids, decoder_attention_mask=mask)
    kwargs = model.to_device(kwargs)
    kwargs["use_cache"] = False
    return Batch(kwargs, [len(t) for t in targets], [len(e.source) for e in encs])


def same_shape(a: Batch, b: Batch, names: tuple[str, str]) -> None:
    """Refuse two batches that cannot be matched input by input, position by position (an
    encoder–decoder's sources and targets both)."""
    if a.size != b.size:
        raise InputError(f"{names[1]} has {b.size} inputs and {names[0]} {a.size}; give one "
                         f"{names[1]} input per {names[0]} input.")
    sides = [("", a.lengths, b.lengths)]
    if a.source_lengths is not None and b.source_lengths is not None:
        sides = [(" source", a.source_lengths, b.source_lengths), (" target", a.lengths, b.lengths)]
    for side, la, lb in sides:
        for i, (n, m) in enumerate(zip(la, lb)):
            if n != m:
                raise InputError(
                    f"{names[0]}[{i}]{side} has {n} tokens and {names[1]}[{i}]{side} {m}: "
                    "activations are matched position by position, so each pair must have the "
                    "same length (check the tokenization of the replaced words).")


# ------------------------------------------------------------------ edits
@dataclass
class Edits:
    """What the copies of one forward replace (see the module docstring).

    Parameters
    ----------
    copies : int
        ``R``.
    masks : dict
        ``(site, layer)`` -> bool ``[R, T, H]`` (``"z"``) or ``[R, T]`` (``"resid"``): True
        where copy ``r`` replaces that head (stream) at that position.
    sources : dict
        ``(site, layer)`` -> ``[B or 1, T, H, d_head]`` (``"z"``) or ``[B or 1, T, d]``
        (``"resid"``): what replaces it.
    """

    copies: int = 1
    masks: dict[tuple[str, int], Any] = field(default_factory=dict)
    sources: dict[tuple[str, int], Any] = field(default_factory=dict)


def _replace(x: Any, mask: Any, source: Any, copies: int) -> Any:
    import torch

    N = x.shape[0]
    xs = x.reshape(copies, N // copies, *x.shape[1:])
    src = source.to(x.dtype)
    if mask.dim() == 3:  # z: x [R, B, T, H * d]
        H = mask.shape[-1]
        xs = xs.reshape(*xs.shape[:3], H, -1)
        out = torch.where(mask[:, None, :, :, None], src[None], xs)
    else:
        out = torch.where(mask[:, None, :, None], src[None], xs)
    return out.reshape(x.shape)


@contextmanager
def editing(site: Sites, edits: Edits | None = None, capture: dict | None = None,
            grad: bool = False) -> Iterator[None]:
    """Within the block, forwards of the model replace what ``edits`` says and record, into
    ``capture``, the head outputs (``("z", l)`` -> ``[N, T, H, d_head]``) and residual
    streams (``("resid", l)`` -> ``[N, T, d]``) they see (after any replacement; kept in the
    autograd graph when ``grad``).

    Parameters
    ----------
    site : Sites
        The model's :func:`sites`.
    edits : Edits, optional
        What to replace.
    capture : dict, optional
        Filled during the forward.
    grad : bool
        Keep captured tensors in the graph (for gradients with respect to them).

    Yields
    ------
    None

    Examples
    --------
    >>> import torch
    >>> from attnkit.interventions.hooks import batch, editing, sites
    >>> from attnkit.testing import tiny_model
    >>> model = tiny_model("gpt2")
    >>> b, seen = batch(model, ["The cat sat."]), {}
    >>> with torch.no_grad(), editing(sites(model), capture=seen):
    ...     _ = model.hf(**b.kwargs)
    >>> tuple(seen[("z", 1)].shape), tuple(seen[("resid", 0)].shape)
    ((1, 7, 2, 8), (1, 7, 16))
    """
    edits = edits or Edits()
    handles = []

    def z_hook(layer: int) -> Any:
        def hook(module: Any, args: Any) -> Any:
            x = args[0]
            key = ("z", layer)
            if key in edits.masks:
                x = _replace(x, edits.masks[key], edits.sources[key], edits.copies)
            if capture is not None:
                if grad and not x.requires_grad:  # frozen weights: the activation is a leaf
                    x = x.detach().requires_grad_(True)
                v = x.reshape(*x.shape[:-1], site.n_heads, site.head_dim)
                capture[key] = v if grad else v.detach()
                if grad:  # the forward goes on from the captured view, so gradients reach it
                    x = v.reshape(x.shape)
            return (x, *args[1:])
        return hook

    def resid_hook(layer: int) -> Any:
        def hook(module: Any, args: Any, kwargs: Any) -> Any:
            key = ("resid", layer)
            positional = bool(args)
            x = args[0] if positional else kwargs["hidden_states"]
            if key in edits.masks:
                x = _replace(x, edits.masks[key], edits.sources[key], edits.copies)
            if capture is not None:
                if grad and not x.requires_grad:
                    x = x.detach().requires_grad_(True)
                capture[key] = x if grad else x.detach()
            if positional:
                return (x, *args[1:]), kwargs
            return args, {**kwargs, "hidden_states": x}
        return hook

    try:
        for layer, proj in enumerate(site.out_proj):
            handles.append(proj.register_forward_pre_hook(z_hook(layer)))
        wants_resid = capture is not None or any(k[0] == "resid" for k in edits.masks)
        if wants_resid:
            for layer, mod in enumerate(site.layers):
                handles.append(mod.register_forward_pre_hook(resid_hook(layer), with_kwargs=True))
        yield
    finally:
        for h in handles:
            h.remove()


def network(model: Any) -> Any:
    """The module interventions run: the model with its head (LM, classifier), or the bare
    transformer where the head is not one whose output a metric reads (a CLIP model's
    vision tower).

    Parameters
    ----------
    model : Model
        The model.

    Returns
    -------
    torch.nn.Module

    Examples
    --------
    >>> from attnkit.interventions.hooks import network
    >>> from attnkit.testing import tiny_model
    >>> type(network(tiny_model("gpt2"))).__name__
    'GPT2LMHeadModel'
    """
    from .metrics import output_kind

    return model.hf if output_kind(model) != "hidden" else model.base


def output_of(out: Any) -> Any:
    """The tensor a metric reads from a forward's output: ``logits`` where the model has a
    head, else the last hidden state."""
    logits = getattr(out, "logits", None)
    return logits if logits is not None else out.last_hidden_state


def forward(model: Any, b: Batch, *, copies: int = 1, edits: Edits | None = None,
            capture: dict | None = None, recorders: Sequence[Any] = (), grad: bool = False,
            stack: str | None = None) -> Any:
    """One forward of ``copies`` copies of ``b`` with ``edits`` (and capture ``recorders``
    attached, e.g. a knockout); returns :func:`output_of` ``[copies * B, ...]``.

    Parameters
    ----------
    model : Model
        The model.
    b : Batch
        The inputs.
    copies : int
        ``R``.
    edits : Edits, optional
        What the copies replace.
    capture : dict, optional
        Filled with the activations seen (:func:`editing`).
    recorders : sequence
        Recorders of :func:`attnkit.runtime.capture.recording` (they need the model on
        attnkit's attention function).
    grad : bool
        Build the autograd graph (else ``torch.no_grad``).
    stack : str, optional
        The stack of an encoder–decoder whose heads ``edits`` and ``capture`` concern.

    Returns
    -------
    torch.Tensor

    Examples
    --------
    >>> from attnkit.interventions.hooks import batch, forward
    >>> from attnkit.testing import tiny_model, tiny_seq2seq
    >>> model = tiny_model("gpt2")
    >>> tuple(forward(model, batch(model, ["The cat sat."]), copies=3).shape)
    (3, 7, 300)
    >>> s2s = tiny_seq2seq("t5")
    >>> tuple(forward(s2s, batch(s2s, [("The cat sat.", "A cat.")]), stack="cross").shape)
    (1, 5, 179)
    """
    import contextlib

    import torch

    from ..runtime.capture import recording

    # a plain forward of an encoder-decoder (no stack named) hooks nothing but the decoder
    site = sites(model, stack or "decoder") if is_seq2seq(model) else sites(model)
    if edits is not None and edits.copies != copies:
        raise InputError(f"edits are for {edits.copies} copies, the forward runs {copies}.")
    kwargs = b.repeated(copies)
    ctx = torch.enable_grad() if grad else torch.no_grad()
    rec: Any = recording(list(recorders)) if recorders else contextlib.nullcontext()
    with ctx, editing(site, edits, capture, grad), rec as session:
        out = network(model)(**kwargs)
    calls = getattr(session, "calls", None)
    if recorders and calls != site.calls:
        raise UnsupportedModelError(
            f"model: {model.name} ran {calls} of its {site.calls} attention layers "
            "through attnkit's attention function, so edges cannot be knocked out; load it with "
            "attnkit.load (its attention must go through transformers' attention interface).")
    return output_of(out)


def context(model: Any, b: Batch, reference: Any, copies: int = 1) -> Any:
    """The metric :class:`~attnkit.interventions.metrics.Context` of ``copies`` copies of
    ``b``, compared with ``reference`` (an output of ``b``, ``[B, ...]``). An encoder–decoder's
    metric reads the decoder: its input ids, mask and lengths, predicting the next token.

    Parameters
    ----------
    model : Model
        The model.
    b : Batch
        The inputs.
    reference : torch.Tensor
        The output compared with.
    copies : int
        ``R``.

    Returns
    -------
    Context

    Examples
    --------
    >>> from attnkit.interventions.hooks import batch, context, forward
    >>> from attnkit.testing import tiny_model
    >>> model = tiny_model("gpt2")
    >>> b = batch(model, ["The cat sat.", "We read."])
    >>> ctx = context(model, b, forward(model, b), copies=2)
    >>> ctx.lengths, ctx.items
    ([7, 3, 7, 3], 2)
    """
    from .metrics import Context

    ref = reference.detach()
    ref = ref.repeat(copies, *([1] * (ref.dim() - 1))) if copies > 1 else ref
    causal = bool(model.causal) or is_seq2seq(model)
    return Context(b.ids.repeat(copies, 1), b.mask.repeat(copies, 1), b.lengths * copies, ref,
                   causal, b.size)


def per_copy(values: Any, copies: int) -> Any:
    """Mean over the inputs of each copy: ``[R * B]`` -> ``[R]`` float64 numpy."""
    return values.detach().double().view(copies, -1).mean(1).cpu().numpy()


def chunks(total: int, per: int) -> Iterator[tuple[int, int]]:
    """``(start, stop)`` of consecutive chunks of at most ``per`` of ``total`` things."""
    per = max(1, per)
    for s in range(0, total, per):
        yield s, min(total, s + per)
