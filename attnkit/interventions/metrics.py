"""What an intervention is measured by: one number per input, computed from the model's output.

A metric reads the output of one forward pass (``logits`` ``[N, T, V]`` of a language model,
``[N, C]`` of a sequence classifier, or the last hidden state ``[N, T, d]`` of a bare
encoder) and returns one value per input ``[N]``; interventions report the mean over the
inputs. Every metric also sees the output of the run it is compared with (the un-intervened
run for :func:`~attnkit.interventions.ablate.ablate` and
:func:`~attnkit.interventions.knockout.knockout`, the clean run for patching): that is what
:func:`kl`, :func:`class_logit` and :func:`projection` compare against.

Positions are 0-indexed token positions of each input (numpy's meaning: ints, negative from
the end, slices, boolean masks). For a causal LM, the logits at position ``p`` predict the
token at ``p + 1``: :func:`loss` names the positions of the *predicted* tokens, :func:`logprob`
and :func:`logit_diff` the position whose prediction is read.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core import validate
from ..errors import InputError

#: What ``metric=`` may name as a string (see :func:`resolve`).
NAMES = ("auto", "loss", "kl", "class_logit", "projection")


@dataclass
class Context:
    """What a metric sees besides the output, for ``N`` rows padded to ``T``: row ``i`` is
    input ``i % items`` (interventions run several copies of the inputs in one batch).

    input_ids, attention_mask : torch.Tensor
        ``[N, T]`` (1 = real token).
    lengths : list of int
        Real tokens of each row.
    reference : torch.Tensor
        The output of the run compared with (detached), one row per row of the output.
    causal : bool
        The model predicts the next token.
    items : int
        Distinct inputs (default ``N``).
    """

    input_ids: Any
    attention_mask: Any
    lengths: list[int]
    reference: Any
    causal: bool
    items: int = 0

    def __post_init__(self) -> None:
        if not self.items:
            self.items = len(self.lengths)


@dataclass
class Metric:
    """A scalar per input, read from a forward pass's output (see the module docstring).

    Build one with :func:`loss`, :func:`logprob`, :func:`logit_diff`, :func:`kl`,
    :func:`class_logit`, :func:`projection` or :func:`custom`.

    Parameters
    ----------
    name : str
        What the number is, as results' ``meta["metric"]`` names it.
    fn : callable
        ``fn(output, context) -> [N]`` tensor.
    needs : str or tuple of str
        The output it reads: ``"tokens"`` (``[N, T, V]`` logits of a language model),
        ``"classes"`` (``[N, C]`` logits of a classifier), ``"hidden"`` (a bare model's last
        hidden state), several of them, or ``"any"``.
    higher_is_better : bool
        Whether a larger value means the model does its task better (a loss: False).
    bind : callable, optional
        ``bind(model)``: reads what the metric needs from the model (token strings to ids)
        and checks it; :func:`resolve` calls it.

    Examples
    --------
    >>> from attnkit.interventions.metrics import loss
    >>> m = loss(positions=slice(1, None))
    >>> m.name, m.higher_is_better
    ('loss[1:]', False)
    """

    name: str
    fn: Callable[[Any, Context], Any]
    needs: str | tuple[str, ...] = "any"
    higher_is_better: bool = True
    bind: Callable[[Any], None] | None = None

    def __call__(self, output: Any, context: Context) -> Any:
        """Values ``[N]`` on ``output`` (float32, or float64 for a float64 model).

        Parameters
        ----------
        output : torch.Tensor
            The forward pass's output (see the module docstring), one row per input.
        context : Context
            Masks, lengths and the reference output.

        Returns
        -------
        torch.Tensor
            ``[N]`` float32 (float64 for a float64 model).

        Raises
        ------
        InputError
            When the metric does not return one number per input.

        Examples
        --------
        >>> import torch
        >>> from attnkit.interventions.metrics import Context, loss
        >>> logits = torch.zeros(1, 3, 4)   # uniform over 4 tokens
        >>> ctx = Context(torch.tensor([[0, 1, 2]]), torch.ones(1, 3), [3], logits, True)
        >>> round(float(loss()(logits, ctx)[0]), 4)   # ln 4
        1.3863
        """
        import torch

        values = self.fn(output, context)
        values = torch.as_tensor(values, device=output.device)
        if values.shape != (output.shape[0],):
            raise InputError(
                f"The metric {self.name!r} must return one number per input ({output.shape[0]}); "
                f"it returned shape {tuple(values.shape)}.")
        return _up(values)


def _up(t: Any) -> Any:
    """``t`` in float32, or float64 where it already is (metrics never lose precision)."""
    import torch

    return t if t.dtype == torch.float64 else t.float()


def pooled_dtype(t: Any) -> Any:
    """The dtype metrics compute ``t``'s values in (:func:`_up`'s)."""
    import torch

    return torch.float64 if t.dtype == torch.float64 else torch.float32


def _token_id(model: Any, token: Any, name: str) -> int:
    """One token id of ``model``'s vocabulary: an int, or a token string the tokenizer knows."""
    vocab = int(model.hf.get_output_embeddings().weight.shape[0]) if (
        getattr(model.hf, "get_output_embeddings", None) and model.hf.get_output_embeddings()
        is not None) else len(model.tokenizer)
    if isinstance(token, str):
        tid = model.tokenizer.convert_tokens_to_ids(token)
        unk = model.tokenizer.unk_token_id
        if tid is None or (unk is not None and tid == unk and token != model.tokenizer.unk_token):
            raise InputError(f"{name}: {token!r} is not a token of {model.name}'s vocabulary; "
                             "pass a token id or a token as the tokenizer writes it.")
        return int(tid)
    try:
        tid = validate.integer(token, name)
    except InputError:
        raise InputError(f"{name} must be a token id or a token string; got {token!r}.") from None
    if not 0 <= tid < vocab:
        raise InputError(f"{name} {tid} is not a token id of {model.name} (0..{vocab - 1}).")
    return tid


def _rows(where: Any, lengths: Sequence[int], width: int, device: Any, name: str,
          shift: int = 0) -> Any:
    """Float ``[N, width]`` weights: 1 at the positions ``where`` selects in each row
    (positions ``p - shift``), normalised to sum to 1 per row."""
    import torch

    w = np.zeros((len(lengths), width), dtype=np.float32)
    for i, n in enumerate(lengths):
        pos = validate.positions(where, n, name)
        pos = pos[pos - shift >= 0] - shift
        if len(pos) == 0:
            raise InputError(f"{name} selects no position of an input of {n} tokens"
                             + (" (a causal LM predicts no token at position 0)" if shift else "")
                             + ".")
        w[i, pos] = 1.0 / len(pos)
    return torch.as_tensor(w, device=device)


def _describe(where: Any) -> str:
    if where is None:
        return ""
    if isinstance(where, slice):
        parts = ["" if v is None else str(v) for v in (where.start, where.stop)]
        step = "" if where.step is None else f":{where.step}"
        return f"[{parts[0]}:{parts[1]}{step}]"
    arr = np.asarray(where)
    if arr.ndim == 0:
        return f"[{int(arr)}]"
    return f"[{', '.join(str(int(v)) for v in arr.ravel()[:4])}{', ...' if arr.size > 4 else ''}]"


def _tokens_of(output: Any) -> None:
    if output.dim() != 3:
        raise InputError("This metric reads a language model's logits [inputs, tokens, vocabulary]; "
                         f"the model's output has shape {tuple(output.shape)}. Use class_logit(), "
                         "projection() or a custom metric.")


def loss(*, positions: Any = None) -> Metric:
    """Mean cross-entropy of the input's own tokens (a language model's loss).

    Causal LM: the token at each position ``p`` of ``positions`` (default every position
    after the first) is predicted by the logits at ``p - 1``. Masked LM: by the logits at
    ``p`` (default every position).

    Parameters
    ----------
    positions : slice, int, ints or boolean mask, optional
        The predicted tokens' positions, per input.

    Returns
    -------
    Metric
        Lower is better.

    Examples
    --------
    >>> import attnkit as ak
    >>> from attnkit.testing import tiny_model
    >>> r = ak.ablate(tiny_model("gpt2"), ["The cat sat on the mat."], heads=[(0, 0)],
    ...               metric=ak.interventions.loss(positions=slice(2, None)), progress=False)
    >>> r.meta["metric"]
    'loss[2:]'
    """
    if positions is not None:
        validate.position_form(positions, "positions")
    def fn(output: Any, ctx: Context) -> Any:
        import torch

        _tokens_of(output)
        shift = 1 if ctx.causal else 0
        where = positions if positions is not None else slice(shift, None)
        w = _rows(where, ctx.lengths, output.shape[1], output.device, "positions", shift)
        logp = torch.log_softmax(_up(output), dim=-1)
        target = ctx.input_ids[:, shift:]
        nll = -logp[:, : output.shape[1] - shift].gather(-1, target[..., None])[..., 0]
        nll = torch.nn.functional.pad(nll, (0, shift))
        return (nll * w).sum(-1)

    return Metric(f"loss{_describe(positions)}", fn, "tokens", higher_is_better=False)


def _per_item(tokens: Any, model: Any, name: str) -> list[int] | int:
    if isinstance(tokens, (str, int, np.integer)):
        return _token_id(model, tokens, name)
    return [_token_id(model, t, name) for t in tokens]


def logprob(*, token: Any, position: int = -1, model: Any = None) -> Metric:
    """Log-probability of ``token`` in the output distribution at ``position``.

    Causal LM: the probability that ``token`` comes after position ``position``; masked LM:
    of ``token`` at ``position``.

    Parameters
    ----------
    token : int, str or sequence
        A token id or token string, or one per input.
    position : int
        0-indexed (negative from the end of each input); default the last.
    model : Model, optional
        Needed to read token strings and check ids (the interventions pass it for you when
        they first call the metric; give it to see errors early).

    Returns
    -------
    Metric

    Examples
    --------
    >>> import attnkit as ak
    >>> from attnkit.testing import tiny_model
    >>> model = tiny_model("gpt2")
    >>> r = ak.ablate(model, ["The cat sat on the"], metric=ak.interventions.logprob(token=5),
    ...               progress=False)
    >>> r.meta["metric"], r.value_column()
    ('logprob(5)[-1]', 'effect')
    """
    return _two_tokens("logprob", token, None, position, model)


def logit_diff(*, good: Any, bad: Any, position: int = -1, model: Any = None) -> Metric:
    """Logit of ``good`` minus logit of ``bad`` at ``position`` (e.g. IOI's name tokens).

    Parameters
    ----------
    good, bad : int, str or sequence
        Token ids or strings, or one per input each.
    position : int
        0-indexed (negative from the end of each input); default the last.
    model : Model, optional
        As in :func:`logprob`.

    Returns
    -------
    Metric

    Examples
    --------
    >>> import attnkit as ak
    >>> from attnkit.testing import tiny_model
    >>> r = ak.ablate(tiny_model("gpt2"), ["The cat sat on the"], heads=[(1, 1)],
    ...               metric=ak.interventions.logit_diff(good=5, bad=6), progress=False)
    >>> r.meta["metric"]
    'logit_diff(5, 6)[-1]'
    """
    return _two_tokens("logit_diff", good, bad, position, model)


def _two_tokens(kind: str, good: Any, bad: Any, position: int, model: Any) -> Metric:
    pos = validate.integer(position, "position")
    if model is not None:
        validate.model(model, family=("text", "encoder-decoder"))
    state: dict[str, Any] = {}

    def bind(m: Any) -> None:
        if state.get("model") is not m:
            state["good"] = _per_item(good, m, "token" if bad is None else "good")
            state["bad"] = None if bad is None else _per_item(bad, m, "bad")
            state["model"] = m

    if model is not None:
        bind(model)

    def ids(which: str, n: int, device: Any) -> Any:
        import torch

        v = state[which]
        if isinstance(v, list):
            if len(v) not in (n, 1):
                shown = "token" if which == "good" and bad is None else which
                raise InputError(f"{shown}: {len(v)} tokens given for {n} inputs; give one per "
                                 "input or one for all.")
            if len(v) == 1:
                v = v * n
            return torch.as_tensor(v, device=device)
        return torch.full((n,), int(v), device=device)

    def fn(output: Any, ctx: Context) -> Any:
        import torch

        _tokens_of(output)
        n = output.shape[0]
        lengths = torch.as_tensor(ctx.lengths, device=output.device)
        if not all(-L <= pos < L for L in ctx.lengths):
            raise InputError(f"position {pos} is outside an input of {min(ctx.lengths)} tokens.")
        at = torch.where(lengths.new_tensor(pos) < 0, lengths + pos, lengths.new_tensor(pos))
        rows = output[torch.arange(n, device=output.device), at]
        rows = _up(rows)
        # the same tokens for every copy of the inputs: ids repeat with the rows
        reps = n // ctx.items
        good_ids = ids("good", ctx.items, output.device).repeat(reps)
        if kind == "logprob":
            return torch.log_softmax(rows, -1).gather(-1, good_ids[:, None])[:, 0]
        bad_ids = ids("bad", ctx.items, output.device).repeat(reps)
        return rows.gather(-1, good_ids[:, None])[:, 0] - rows.gather(-1, bad_ids[:, None])[:, 0]

    label = f"{_show(good)}" if bad is None else f"{_show(good)}, {_show(bad)}"
    return Metric(f"{kind}({label})[{pos}]", fn, "tokens", bind=bind)


def _show(tokens: Any) -> str:
    if isinstance(tokens, (str, int, np.integer)):
        return str(tokens)
    return "per input"


def kl(*, positions: Any = None) -> Metric:
    """KL divergence from the reference run's output distribution to this run's,
    ``KL(p_ref ‖ p)``, averaged over ``positions`` (language models; default all) or of the
    classifier's class distribution.

    Parameters
    ----------
    positions : slice, int, ints or boolean mask, optional
        Positions whose output distributions count (language models).

    Returns
    -------
    Metric
        Lower is better; 0 on the reference run itself.

    Examples
    --------
    >>> import attnkit as ak
    >>> from attnkit.testing import tiny_model
    >>> r = ak.ablate(tiny_model("bert-cls"), ["The cat sat."], metric=ak.interventions.kl(),
    ...               progress=False)
    >>> r.meta["metric"], r.meta["baseline"]
    ('kl', 0.0)
    """
    if positions is not None:
        validate.position_form(positions, "positions")
    def fn(output: Any, ctx: Context) -> Any:
        import torch

        ref = _up(ctx.reference)
        logp, logq = torch.log_softmax(ref, -1), torch.log_softmax(_up(output), -1)
        d = (logp.exp() * (logp - logq)).sum(-1)
        if d.dim() == 1:
            return d
        w = _rows(positions if positions is not None else slice(None), ctx.lengths,
                  output.shape[1], output.device, "positions")
        return (d * w).sum(-1)

    return Metric(f"kl{_describe(positions)}", fn, ("tokens", "classes"), higher_is_better=False)


def class_logit(*, label: Any = None) -> Metric:
    """A sequence classifier's logit of ``label`` (default: the class the reference run
    predicts for each input).

    Parameters
    ----------
    label : int, optional
        A class index.

    Returns
    -------
    Metric

    Examples
    --------
    >>> import attnkit as ak
    >>> from attnkit.testing import tiny_model
    >>> r = ak.ablate(tiny_model("bert-cls"), ["The cat sat."], metric=ak.interventions.class_logit(label=1),
    ...               progress=False)
    >>> r.meta["metric"]
    'class_logit(1)'
    """
    lab = None if label is None else validate.integer(label, "label", minimum=0)

    def fn(output: Any, ctx: Context) -> Any:
        import torch

        if output.dim() != 2:
            raise InputError("class_logit() reads a sequence classifier's logits [inputs, classes]; "
                             f"the model's output has shape {tuple(output.shape)}.")
        if lab is not None:
            if lab >= output.shape[1]:
                raise InputError(f"label {lab} is not a class of this classifier "
                                 f"(0..{output.shape[1] - 1}).")
            idx = torch.full((output.shape[0],), lab, device=output.device)
        else:
            idx = ctx.reference.argmax(-1)
        return _up(output).gather(-1, idx[:, None])[:, 0]

    return Metric("class_logit" + ("" if lab is None else f"({lab})"), fn, "classes")


def class_margin() -> Metric:
    """A sequence classifier's decision margin: the logit of the class the reference run
    predicts for each input minus the largest logit of the other classes.

    Positive while the input keeps its reference decision; ablating a head the decision
    depends on lowers it whichever class was predicted (a fixed logit difference would let
    the effects on the two classes cancel in the mean).

    Returns
    -------
    Metric

    Examples
    --------
    >>> import torch
    >>> from attnkit.interventions.metrics import Context, class_margin
    >>> ref = torch.tensor([[0.0, 2.0, 1.0], [3.0, 0.0, 0.0]])   # predicts classes 1 and 0
    >>> ctx = Context(torch.zeros(2, 1), torch.ones(2, 1), [1, 1], ref, False)
    >>> class_margin()(torch.tensor([[0.0, 1.0, 1.5], [2.0, 0.5, -1.0]]), ctx).tolist()
    [-0.5, 1.5]
    """
    def fn(output: Any, ctx: Context) -> Any:
        if output.dim() != 2 or output.shape[1] < 2:
            raise InputError("class_margin() reads a sequence classifier's logits [inputs, classes] "
                             f"with at least two classes; the model's output has shape "
                             f"{tuple(output.shape)}.")
        x = _up(output)
        idx = ctx.reference.argmax(-1)[:, None]
        own = x.gather(-1, idx)[:, 0]
        return own - x.scatter(-1, idx, float("-inf")).amax(-1)

    return Metric("class_margin", fn, "classes")


def pair_similarity() -> Metric:
    """For a bare sentence encoder given sentences two by two (inputs ``2i`` and ``2i + 1``
    form pair ``i``): the cosine similarity of the pair's mean-pooled embeddings, the score a
    sentence encoder such as all-MiniLM-L6-v2 is trained to make high for paraphrases. Both
    inputs of a pair get the pair's value.

    Returns
    -------
    Metric

    Raises
    ------
    InputError
        (When computed) for an odd number of inputs.

    Examples
    --------
    >>> import attnkit as ak
    >>> from attnkit.testing import tiny_model
    >>> r = ak.ablate(tiny_model("bert"), ["The cat sat.", "A cat sat."],
    ...               metric=ak.interventions.pair_similarity(), progress=False)
    >>> r.meta["metric"], -1.0 <= r.meta["baseline"] <= 1.0
    ('pair_similarity', True)
    """
    def fn(output: Any, ctx: Context) -> Any:
        import torch

        if output.dim() != 3:
            raise InputError("pair_similarity() reads a bare encoder's hidden states [inputs, tokens, "
                             f"d]; the model's output has shape {tuple(output.shape)}.")
        if ctx.items % 2:
            raise InputError(f"inputs: pair_similarity() compares inputs two by two (2i with 2i + 1); "
                             f"give an even number of inputs, not {ctx.items}.")
        mask = ctx.attention_mask[..., None].to(pooled_dtype(output))
        pooled = (_up(output) * mask).sum(1) / mask.sum(1).clamp(min=1.0)
        pairs = pooled.reshape(-1, 2, pooled.shape[-1])
        cos = torch.nn.functional.cosine_similarity(pairs[:, 0], pairs[:, 1], dim=-1, eps=1e-12)
        return cos.repeat_interleave(2)

    return Metric("pair_similarity", fn, "hidden")


def projection() -> Metric:
    """For a bare encoder: the length of the mean-pooled embedding along the reference run's
    embedding direction, ``⟨e(x), e_ref / ‖e_ref‖⟩`` (as
    :mod:`attnkit.runtime.objectives`' ``"projection"``).

    Returns
    -------
    Metric

    Examples
    --------
    >>> import attnkit as ak
    >>> from attnkit.testing import tiny_model
    >>> r = ak.ablate(tiny_model("bert"), ["The cat sat."], metric=ak.interventions.projection(),
    ...               progress=False)
    >>> r.meta["metric"]
    'projection'
    """
    def fn(output: Any, ctx: Context) -> Any:
        if output.dim() != 3:
            raise InputError("projection() reads a bare encoder's hidden states [inputs, tokens, d]; "
                             f"the model's output has shape {tuple(output.shape)}.")
        mask = ctx.attention_mask[..., None].to(pooled_dtype(output))
        pooled = (_up(output) * mask).sum(1) / mask.sum(1).clamp(min=1.0)
        ref = (_up(ctx.reference) * mask).sum(1) / mask.sum(1).clamp(min=1.0)
        ref = ref / ref.norm(dim=-1, keepdim=True).clamp(min=1e-12)
        return (pooled * ref).sum(-1)

    return Metric("projection", fn, "hidden")


def custom(*, fn: Callable[[Any], Any], name: str | None = None,
           higher_is_better: bool = True) -> Metric:
    """Any function of one input's output: ``fn(output_i)`` returns a scalar (a 0-d tensor,
    differentiable for attribution patching, or a float).

    ``output_i`` is the input's rows without padding: logits ``[n, V]`` of a language model,
    ``[C]`` of a classifier, the hidden states ``[n, d]`` of a bare model.

    Parameters
    ----------
    fn : callable
        ``fn(output_i) -> scalar``.
    name : str, optional
        For ``meta["metric"]`` (default the function's name).
    higher_is_better : bool
        Whether larger means better.

    Returns
    -------
    Metric

    Examples
    --------
    >>> import attnkit as ak
    >>> from attnkit.testing import tiny_model
    >>> top = ak.interventions.custom(fn=lambda logits: logits[-1].max(), name="top logit")
    >>> ak.ablate(tiny_model("gpt2"), ["The cat sat."], metric=top, progress=False).meta["metric"]
    'top logit'
    """
    if not callable(fn):
        raise InputError(f"metric must be a callable or one of {NAMES}; got {fn!r}.")
    label = str(name or getattr(fn, "__name__", "custom"))

    def per_item(output: Any, ctx: Context) -> Any:
        import torch

        values = []
        for i in range(output.shape[0]):
            n = ctx.lengths[i]
            row = output[i, :n] if output.dim() == 3 else output[i]
            v = fn(row)
            v = torch.as_tensor(v, device=output.device)
            if v.numel() != 1:
                raise InputError(f"The metric {label!r} must return one number per input; it "
                                 f"returned shape {tuple(v.shape)}.")
            values.append(_up(v.reshape(())))
        return torch.stack(values)

    return Metric(label, per_item, "any", higher_is_better=higher_is_better)


def resolve(metric: Any, model: Any) -> Metric:
    """The :class:`Metric` that ``metric=`` names for ``model``.

    ``"auto"``: :func:`loss` for a causal or masked LM, :func:`class_logit` for a
    classifier, :func:`projection` for a bare model. A string of :data:`NAMES`, a
    :class:`Metric`, or any callable (:func:`custom`).

    Parameters
    ----------
    metric : str, Metric or callable
        What to measure.
    model : Model
        The model.

    Returns
    -------
    Metric

    Raises
    ------
    InputError
        For an unknown name, or a metric the model's output cannot give.

    Examples
    --------
    >>> from attnkit.interventions.metrics import resolve
    >>> from attnkit.testing import tiny_model
    >>> resolve("auto", tiny_model("bert-cls")).name, resolve("auto", tiny_model("llama")).name
    ('class_logit', 'loss')
    """
    kind = output_kind(model)
    if isinstance(metric, Metric):
        m = metric
    elif isinstance(metric, str):
        if metric not in NAMES:
            raise InputError(f"metric must be one of {NAMES}, a Metric "
                             f"(attnkit.interventions.loss(), ...) or a callable; got {metric!r}.")
        if metric == "auto":
            metric = {"tokens": "loss", "classes": "class_logit"}.get(kind, "projection")
        m = {"loss": loss, "kl": kl, "class_logit": class_logit, "projection": projection}[metric]()
    elif callable(metric):
        m = custom(fn=metric)
    else:
        raise InputError(f"metric must be one of {NAMES}, a Metric or a callable; got {metric!r}.")
    needs = (m.needs,) if isinstance(m.needs, str) else tuple(m.needs)
    if "any" not in needs and kind not in needs:
        raise InputError(f"The metric {m.name!r} needs a model whose output is "
                         f"{' or '.join(_NEEDS[n] for n in needs)}; {model.name} outputs "
                         f"{_NEEDS[kind]}.")
    if m.bind is not None:
        m.bind(model)
    return m


def output_kind(model: Any) -> str:
    """What a metric reads from ``model``'s output: ``"tokens"`` (a causal or masked LM's
    logits, an encoder–decoder's decoder logits), ``"classes"`` (a sequence or image classifier's logits) or ``"hidden"`` (the
    last hidden state of a model without such a head).

    Parameters
    ----------
    model : Model
        The model.

    Returns
    -------
    str

    Examples
    --------
    >>> from attnkit.interventions.metrics import output_kind
    >>> from attnkit.testing import tiny_model
    >>> output_kind(tiny_model("bert-cls")), output_kind(tiny_model("gpt2")), output_kind(tiny_model("bert"))
    ('classes', 'tokens', 'hidden')
    >>> from attnkit.testing import tiny_seq2seq
    >>> output_kind(tiny_seq2seq("t5"))
    'tokens'
    """
    from ..runtime.objectives import head_kind

    if getattr(model, "family", "text") == "encoder-decoder":  # the decoder's logits
        emb = getattr(model.hf, "get_output_embeddings", None)
        return "tokens" if emb is not None and emb() is not None else "hidden"
    kind = head_kind(model)
    if kind in ("causal-lm", "masked-lm"):
        return "tokens"
    if kind == "classifier" or type(model.hf).__name__.endswith("ForImageClassification"):
        return "classes"
    return "hidden"


_NEEDS = {"tokens": "token logits (a causal or masked LM)", "classes": "class logits (a classifier)",
          "hidden": "hidden states (a model without a head)"}


def check_gap(m: Metric, m_clean: float, m_corrupted: float, *,
              so: str = "no edge can change it") -> None:
    """Refuse a metric that is the same on the clean and the corrupted inputs (mean over
    the inputs): there is nothing for a patch or an edge to change.

    Parameters
    ----------
    m : Metric
        The metric.
    m_clean, m_corrupted : float
        Its mean on each run.
    so : str
        What follows for the caller, in the message.

    Raises
    ------
    InputError
        When the gap is not finite, or zero to float precision.

    Examples
    --------
    >>> from attnkit.interventions.metrics import check_gap, loss
    >>> check_gap(loss(), 2.0, 3.0)
    >>> check_gap(loss(), 2.0, 2.0)
    Traceback (most recent call last):
    ...
    attnkit.errors.InputError: corrupted: the metric 'loss' is the same on the clean and corrupted inputs ...
    """
    gap = m_clean - m_corrupted
    if not np.isfinite(gap) or abs(gap) <= 1e-6 * max(abs(m_clean), abs(m_corrupted), 1e-12):
        raise InputError(
            f"corrupted: the metric {m.name!r} is the same on the clean and corrupted inputs "
            f"({m_clean:.6g} and {m_corrupted:.6g}), so {so}; corrupt what the metric depends "
            "on, or choose another metric.")
