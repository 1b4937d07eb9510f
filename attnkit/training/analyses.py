"""Analyses over a series of checkpoints: heads matched by ``(layer, head)`` across training.

:func:`checkpoint_scores` runs fixed inputs through every checkpoint of a
:class:`~attnkit.training.series.CheckpointSeries`, one model at a time, and returns one
table indexed by ``(step, layer, head)`` of :func:`attnkit.head_scores` (and, on request,
:func:`attnkit.head_stats`), with a per-step table beside it: the training loss, the loss on
the inputs and the in-context learning score of Olsson et al. (2022), the loss of a token
late in the context minus the loss of one early in it. :func:`crossing_steps` reads off the
step at which each head's score first passes a level.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from .._progress import progress as progress_bar
from ..analysis.composition import composition as head_composition
from ..analysis.heads import HEAD_KINDS, head_scores
from ..analysis.score_attribution import GRAINS, score_attribution
from ..analysis.stats import head_stats
from ..analysis.syntax import head_accuracy
from ..core import validate
from ..core.results import HeadResult, Result
from ..data.conllu import Treebank
from ..errors import InputError
from .series import Checkpoint, CheckpointSeries, check_shape

if TYPE_CHECKING:
    from ..runtime.model import Model

#: Columns of :attr:`SeriesResult.steps`, one row per checkpoint.
STEP_COLUMNS = ("training_loss", "loss", "early_loss", "late_loss", "icl")
#: Columns of :attr:`SeriesResult.attribution`.
ATTRIBUTION_COLUMNS = ("contribution", "score", "share")


class SeriesResult(Result):
    """Per-head scores at every checkpoint of a series (made by :func:`checkpoint_scores`).

    ``table`` is indexed by ``(step, layer, head)`` (layers and heads 0-indexed); ``steps``
    is indexed by ``step`` with the columns of :data:`STEP_COLUMNS`; ``maps`` (or None) holds
    the first input's attention at every checkpoint, float16 ``[step, layer, head, query,
    key]`` (rows are *from*, columns *to*), and ``tokens`` its tokens; ``composition`` (or
    None) the Q-, K- and V-composition of every pair of heads at every step, indexed by
    ``(step, source_layer, source_head, target_layer, target_head)``; ``relations`` (or
    None) the accuracy of every head at every dependency relation at every step
    (:func:`attnkit.analysis.head_accuracy`: indexed by ``(step, layer, head)``, two rows a
    head, column ``direction``, then one column per relation); ``attribution`` (or None) the
    score attribution of the fixed pairs at every step, indexed by ``(step, layer, head,
    query_component, key_component)`` with the columns of :data:`ATTRIBUTION_COLUMNS`.
    """

    steps: pd.DataFrame
    maps: np.ndarray | None
    tokens: list[str]
    composition: pd.DataFrame | None
    relations: pd.DataFrame | None = None
    attribution: pd.DataFrame | None = None

    def at(self, step: int) -> HeadResult:
        """The per-head table at one checkpoint.

        Parameters
        ----------
        step : int
            A step of the series (``result.steps.index``).

        Returns
        -------
        HeadResult
            Indexed by ``(layer, head)``; the same columns as :attr:`table`.

        Raises
        ------
        InputError
            When the series has no checkpoint at ``step``.

        Examples
        --------
        >>> import tempfile, attnkit as ak
        >>> from attnkit.toys.induction import train_induction_model
        >>> with tempfile.TemporaryDirectory() as d:
        ...     final = train_induction_model(vocab_size=16, hidden=16, start_length=8,
        ...                                   max_length=8, steps=2, checkpoint_every=1, out=d,
        ...                                   progress=False)
        ...     inputs = ak.induction_inputs(final, 2, 8, seed=0)
        ...     r = ak.checkpoint_scores(ak.checkpoints(d), inputs, early=2, late=12,
        ...                              progress=False)
        >>> r.at(2).n_layers, list(r.at(2).columns)
        (2, ['sink', 'previous', 'induction', 'duplicate'])
        """
        known = self.table.index.get_level_values("step")
        if not _whole(step) or step not in set(known):
            raise InputError(f"The series has no checkpoint at step {step!r}; its steps are "
                             f"{sorted(set(known.tolist()))}.")
        table = self.table.xs(step, level="step")
        return HeadResult(table, {**self.meta, "step": int(step)}, value=self.meta.get("value"))


def checkpoint_scores(
    series: CheckpointSeries,
    inputs: Sequence[Any],
    gold: Treebank | None = None,
    *,
    kinds: Sequence[str] | str = HEAD_KINDS,
    stats: bool = False,
    composition: bool = False,
    attribution: str | Sequence[tuple[int, int]] | None = None,
    components: str | Sequence[str] = "layers",
    heads: Sequence[tuple[int, int]] | None = None,
    score: Callable[[Any, Sequence[Any]], HeadResult] | None = None,
    early: int = 50,
    late: int = 500,
    maps: bool = False,
    progress: bool = True,
    client: Any = None,
) -> SeriesResult:
    """Head scores of fixed inputs at every checkpoint of a series, and the in-context
    learning score per step.

    At each checkpoint (loaded one at a time, on the CPU in float32) every input is run
    through the model: :func:`attnkit.head_scores` of its attention (and
    :func:`attnkit.head_stats` with ``stats``, and :func:`attnkit.composition` of its weights
    with ``composition``) and, for a causal language model, the next-token loss at every
    position: the loss at position ``p`` is the cross-entropy of token ``p`` given tokens
    ``0 .. p-1`` (natural log). Heads are matched across checkpoints by ``(layer, head)``.

    Two more analyses of the same inputs join on request. With ``gold`` (the treebank the
    inputs are the sentences of), the relation heads of Clark et al. (2019):
    :func:`attnkit.analysis.head_accuracy` of every head at every step, the accuracy at each
    dependency relation of each word's most-attended word (word-pooled; both directions).
    With ``attribution``, :func:`attnkit.score_attribution` of fixed (query, key) pairs of
    every input, summed over the pairs and the inputs as notebook 05 sums the induction
    stripe: for each head, each (query component, key component) term's ``contribution`` to
    the summed pre-softmax ``score`` and its ``share`` of it (``contribution / score``; the
    shares of a head sum to 1, and one share can pass 1 where other terms are negative).

    Parameters
    ----------
    series : CheckpointSeries
        From :func:`attnkit.checkpoints`.
    inputs : sequence of str or of token-id arrays
        The same inputs at every checkpoint (anything ``model.attend`` reads; e.g.
        :func:`attnkit.induction_inputs` of the final model, or a :class:`attnkit.Treebank`).
    gold : Treebank, optional
        The gold trees of ``inputs`` (a treebank or a list of its sentences, item by item:
        ``inputs`` are its sentences, or the treebank itself): adds ``result.relations``.
    kinds : sequence of str or str
        Which :func:`attnkit.head_scores` to compute (:data:`attnkit.analysis.HEAD_KINDS`);
        empty (``()``) with ``score``: none, and the inputs are only handed to ``score``.
    stats : bool
        Also compute :func:`attnkit.head_stats` (its columns join the table).
    composition : bool
        Also compute :func:`attnkit.composition` of each checkpoint's weights (64 random
        samples of its baseline, seed 0) into ``result.composition``; needs 2 layers or more.
    attribution : "all" or sequence of (int, int), optional
        Attribute the pre-softmax scores of these ``(query, key)`` token positions
        (0-indexed) of every input, or of every pair the model scores (``"all"``), into
        ``result.attribution``; None: no attribution.
    components : str or sequence of str
        The components of the attribution, as in :func:`attnkit.score_attribution`:
        ``"layers"`` (each embedding, each earlier layer's heads summed, each MLP,
        ``"bias"``: a small table on any model), ``"heads"`` or ``"dims"``, or a list of names.
    heads : sequence of (int, int), optional
        The ``(layer, head)`` pairs (0-indexed) whose scores are attributed; None: every head.
        The other tables keep every head.
    score : callable, optional
        A per-head score of your own, called ``score(model, inputs)`` at every checkpoint
        and returning a :class:`~attnkit.core.results.HeadResult` indexed by ``(layer,
        head)`` (e.g. :func:`attnkit.toys.tasks.reversal_score` for an encoder-decoder's
        cross-attention, :func:`attnkit.toys.tasks.colour_score` for a ViT): its columns join
        the table. With a cluster it must be picklable (a module-level function).
    early, late : int
        Token positions (0-indexed, ``0 < early < late``) of the in-context learning score
        ``icl = late_loss - early_loss`` (Olsson et al. 2022 use tokens 50 and 500): each
        input needs more than ``late`` tokens. Negative: the model predicts later tokens
        better, it learns in context.
    maps : bool
        Keep the first input's attention at every checkpoint (float16 ``[step, layer, head,
        query, key]``, ``steps * layers * heads * n * n * 2`` bytes) for the heatmap of
        :class:`attnkit.CheckpointScrubber`.
    progress : bool
        Show a progress bar over the checkpoints.
    client : dask.distributed.Client, optional
        Score the checkpoints as tasks on this Dask cluster, one checkpoint per task (the
        workers read the checkpoint folders, so these must be where they can reach them);
        ``None``: here, in step order. The tables are the same either way (up to float32
        summation order where the workers use other thread counts).

    Returns
    -------
    SeriesResult
        ``table`` indexed by ``(step, layer, head)``, one column per kind (then the
        :data:`attnkit.analysis.STAT_COLUMNS` with ``stats``); ``steps`` indexed by ``step``:
        ``training_loss`` (logged by the training, NaN where none was), ``loss`` (mean
        next-token loss over every predicted position of the inputs), ``early_loss`` and
        ``late_loss`` (mean over the inputs of the loss at ``early`` and ``late``) and
        ``icl``; these four are NaN for a model without an LM head. ``meta``: ``n_items``,
        ``kinds``, ``early``, ``late``, ``n_layers``, ``n_heads``, ``value``
        (``"induction"`` where computed). ``plot()`` draws each head's score against the
        step; ``widget()`` is a :class:`attnkit.CheckpointScrubber`. ``maps`` and
        ``composition``: see :class:`SeriesResult` (None unless asked for); with
        ``composition``, ``meta["composition_baseline"]`` is :func:`attnkit.composition`'s
        random baseline for the architecture. ``relations`` (with ``gold``) and
        ``attribution`` (with ``attribution``): see :class:`SeriesResult`; ``meta`` then also
        holds ``relation_counts`` (words per relation) and ``attribution_error`` (the largest
        gap between a summed score's terms and the model's score, over every step and head).

    Raises
    ------
    InputError
        When there are no inputs, ``kinds`` is not a list of known kinds, ``early`` and
        ``late`` are not ``0 < early < late``, an input has ``late`` tokens or fewer, or
        ``composition`` is asked of a one-layer series, ``gold`` is not a treebank of as
        many sentences as there are inputs, ``attribution`` is not ``"all"`` or (query, key)
        pairs (or a pair is out of an input's range), ``components`` is not a grain or a
        list of names, or ``heads`` is not (layer, head) pairs of the series.
    CheckpointError
        When a checkpoint cannot be loaded (the message names it).
    ClusterError
        When ``client`` is given and the cluster cannot be reached or its workers fail.

    Examples
    --------
    >>> import tempfile, attnkit as ak
    >>> from attnkit.toys.induction import train_induction_model
    >>> with tempfile.TemporaryDirectory() as d:
    ...     final = train_induction_model(vocab_size=16, hidden=16, start_length=8,
    ...                                   max_length=8, steps=4, checkpoint_every=2, out=d,
    ...                                   progress=False)
    ...     inputs = ak.induction_inputs(final, 2, 8, seed=0)
    ...     r = ak.checkpoint_scores(ak.checkpoints(d), inputs, early=2, late=12,
    ...                              progress=False)
    >>> r.table.index.names, len(r.table), r.steps.index.tolist()
    (FrozenList(['step', 'layer', 'head']), 12, [0, 2, 4])

    The attribution of the induction stripe (query ``8 + t`` in the second copy, key
    ``1 + t`` after the first occurrence of its token), one table a step:

    >>> with tempfile.TemporaryDirectory() as d:
    ...     final = train_induction_model(vocab_size=16, hidden=16, start_length=8,
    ...                                   max_length=8, steps=2, checkpoint_every=2, out=d,
    ...                                   progress=False)
    ...     inputs = ak.induction_inputs(final, 2, 8, seed=0)
    ...     stripe = [(9 + t, 2 + t) for t in range(7)]
    ...     r = ak.checkpoint_scores(ak.checkpoints(d), inputs, attribution=stripe,
    ...                              heads=[(1, 0)], early=2, late=12, progress=False)
    >>> r.attribution.index.names
    FrozenList(['step', 'layer', 'head', 'query_component', 'key_component'])
    >>> shares = r.attribution["share"].groupby(level="step").sum()
    >>> bool(np.allclose(shares, 1.0))
    True
    """
    if not isinstance(series, CheckpointSeries):
        raise InputError(f"series must be a CheckpointSeries (attnkit.checkpoints(folder)), not "
                         f"{type(series).__name__}.")
    kinds = (kinds,) if isinstance(kinds, str) else tuple(kinds)
    unknown = [k for k in kinds if k not in HEAD_KINDS]
    if score is not None and not callable(score):
        raise InputError(f"score must be a function score(model, inputs) -> HeadResult; got "
                         f"{type(score).__name__}.")
    if (not kinds and score is None) or unknown or len(set(kinds)) != len(kinds):
        raise InputError(f"kinds must name some of {', '.join(HEAD_KINDS)}, each once (or none, "
                         f"with score=); got {list(kinds)!r}.")
    if isinstance(inputs, (str, bytes)) or not isinstance(inputs, Sequence):
        raise InputError("inputs must be a list of inputs (texts or token-id arrays), the same "
                         "at every checkpoint.")
    if not len(inputs):
        raise InputError("inputs is empty: pass the inputs to score at every checkpoint.")
    if gold is not None and (isinstance(gold, (str, bytes)) or not isinstance(gold, Sequence)
                             or len(gold) != len(inputs)
                             or not all(hasattr(s, "head_index") for s in gold)):
        raise InputError(
            f"gold must be the treebank (its sentences) the inputs are the sentences of, as "
            f"many sentences as inputs ({len(inputs)}); got {type(gold).__name__}"
            + (f" of {len(gold)} items." if isinstance(gold, Sequence) else ".")
        )
    pairs = _attribution_pairs(attribution)
    if isinstance(components, str):
        validate.choice(components, "components", GRAINS)
    elif (not isinstance(components, Sequence) or not components
          or not all(isinstance(c, str) for c in components)):
        raise InputError(f"components must be one of {', '.join(GRAINS)} or a list of component "
                         f"names; got {components!r}.")
    chosen = ([(a, b) for a in range(series.n_layers) for b in range(series.n_heads)]
              if heads is None else validate.head_pairs(heads, series.n_layers, series.n_heads))
    if composition and series.n_layers < 2:
        raise InputError(f"composition needs two layers or more (a head composes with heads of "
                         f"earlier layers); this series has {series.n_layers}.")
    if not (_whole(early) and _whole(late) and 0 < early < late):
        raise InputError(f"early and late must be token positions with 0 < early < late; got "
                         f"early={early!r}, late={late!r}.")
    known = [len(x) for x in inputs if (isinstance(x, np.ndarray) and x.ndim == 1) or (
        isinstance(x, (list, tuple)) and x and all(_whole(t) for t in x))]
    if any(n <= late for n in known):  # token ids: their lengths are known before any model runs
        raise InputError(f"late={late} is past the end of an input of {min(known)} tokens: the "
                         "in-context score needs more than late tokens. Pass longer inputs, or "
                         "a smaller late= (and early=).")
    task = functools.partial(score_checkpoint, inputs=list(inputs), kinds=kinds, stats=stats,
                             composition=composition, early=int(early), late=int(late), maps=maps,
                             shape=(series.n_layers, series.n_heads), gold=gold,
                             attribution=pairs, components=components, heads=chosen,
                             score=score)
    if client is None:
        parts = [task(item) for item in progress_bar(list(series), show=progress,
                                                     desc="checkpoints", unit="checkpoint")]
    else:
        parts = _on_cluster(client, task, list(series), progress)
    tables = [p["table"] for p in parts]
    table = pd.concat(tables, keys=series.steps, names=["step"])
    steps = pd.DataFrame([{"training_loss": item.loss, **p["losses"]}
                          for item, p in zip(series, parts)],
                         index=pd.Index(series.steps, name="step"),
                         columns=list(STEP_COLUMNS), dtype=np.float64)
    meta = {"n_items": len(inputs), "kinds": list(kinds), "early": int(early),
            "late": int(late), "n_layers": series.n_layers, "n_heads": series.n_heads,
            "n_checkpoints": len(series),
            "value": "induction" if "induction" in kinds else (kinds[0] if kinds
                                                                else str(table.columns[0]))}
    result = SeriesResult(table, meta, plot="checkpoint_scores", widget="checkpoint_scrubber")
    result.steps = steps
    result.maps = np.stack([p["maps"] for p in parts]) if maps else None
    result.tokens = parts[0]["tokens"]
    result.composition = (pd.concat([p["composition"] for p in parts], keys=series.steps,
                                    names=["step"]) if composition else None)
    if composition:  # random matrices of the architecture's shape: the same at every step
        result.meta["composition_baseline"] = parts[0]["baseline"]
    if gold is not None:
        result.relations = pd.concat([p["relations"] for p in parts], keys=series.steps,
                                     names=["step"])
        result.meta["relation_counts"] = parts[0]["relation_counts"]
    if pairs is not None:
        result.attribution = pd.concat([p["attribution"] for p in parts], keys=series.steps,
                                       names=["step"])
        result.meta["attribution_error"] = max(p["attribution_error"] for p in parts)
        result.meta["attribution_pairs"] = pairs
        result.meta["components"] = components
    return result


def _attribution_pairs(attribution: Any) -> str | list[tuple[int, int]] | None:
    """``attribution=`` checked: None, ``"all"``, or (query, key) pairs of whole numbers (their
    range is checked against each input when it is attributed)."""
    if attribution is None:
        return None
    if isinstance(attribution, str):
        validate.choice(attribution, "attribution", ("all",))
        return "all"
    if not isinstance(attribution, Sequence) or not len(attribution):
        raise InputError(f"attribution must be 'all' or a non-empty list of (query, key) token "
                         f"positions; got {attribution!r}.")
    out = []
    for pair in attribution:
        if (isinstance(pair, (str, bytes)) or not isinstance(pair, Sequence) or len(pair) != 2
                or not all(_whole(v) for v in pair)):
            raise InputError(f"attribution must list (query, key) pairs of whole numbers; it "
                             f"holds {pair!r}.")
        out.append((int(pair[0]), int(pair[1])))
    return out


def _whole(v: Any) -> bool:
    """An int (numpy's too), not a bool."""
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def score_checkpoint(item: Checkpoint, *, inputs: list[Any], kinds: tuple[str, ...],
                     stats: bool, composition: bool, early: int, late: int, maps: bool,
                     shape: tuple[int, int], gold: Treebank | None = None,
                     attribution: str | list[tuple[int, int]] | None = None,
                     components: Any = "layers",
                     heads: Sequence[tuple[int, int]] = (),
                     score: Callable[[Any, Sequence[Any]], HeadResult] | None = None
                     ) -> dict[str, Any]:
    """One checkpoint's part of :func:`checkpoint_scores` (here or as a Dask task): its model
    loaded on the CPU, its per-head table, its losses, the first input's maps, and the
    relation accuracies and score attribution where asked for."""
    model = item.load(device="cpu", dtype="float32")
    check_shape(model, item, *shape)
    attend = bool(kinds) or stats or maps or gold is not None  # else only score= reads them
    atts = [model.attend(x, lazy=False) for x in inputs] if attend else []
    parts = []
    if kinds:
        parts.append(head_scores(atts, kinds=kinds, progress=False).table)
    if stats:
        parts.append(head_stats(atts, progress=False).table)
    if score is not None:
        own = score(model, inputs)
        own_table = own.table if isinstance(own, Result) else own
        if not isinstance(own_table, pd.DataFrame) or list(own_table.index.names) != ["layer", "head"]:
            raise InputError(f"score(model, inputs) must return a HeadResult indexed by (layer, "
                             f"head); it returned {type(own).__name__}.")
        parts.append(own_table)
    table = parts[0]
    for part in parts[1:]:
        table = table.join(part)
    nan = dict.fromkeys(("loss", "early_loss", "late_loss", "icl"), float("nan"))
    losses = _losses(model, [np.asarray(a.input_ids) for a in atts], early, late,
                     item) if atts else nan
    first = atts[0] if atts else None
    comp = head_composition(model, progress=False) if composition else None
    out = {"table": table, "losses": losses, "tokens": list(first.tokens) if first else [],
           "maps": np.asarray(first.maps, dtype=np.float16) if maps and first else None,
           "composition": None if comp is None else comp.table,
           "baseline": None if comp is None else comp.meta["baseline"]}
    if gold is not None:
        acc = head_accuracy(atts, gold)
        out["relations"], out["relation_counts"] = acc.table, acc.meta["n"]
    if attribution is not None:
        out["attribution"], out["attribution_error"] = _attributed(
            model, inputs, attribution, components, heads)
    return out


def _attributed(model: Model, inputs: list[Any], pairs: str | list[tuple[int, int]],
                components: Any, heads: Sequence[tuple[int, int]]) -> tuple[pd.DataFrame, float]:
    """Per head, every (query component, key component) term summed over the pairs of every
    input, the summed score and the share; and the largest gap between terms and score."""
    frames, keys, error = [], [], 0.0
    where: dict[str, Any] = {} if pairs == "all" else {"pairs": pairs}
    for layer, head in heads:
        total, score = None, 0.0
        for x in inputs:
            r = score_attribution(model, x, layer=layer, head=head, components=components,
                                  aggregate="sum", **where)
            part = r.table.set_index(["query_component", "key_component"])["contribution"]
            part.index = part.index.set_levels(  # categorical levels -> plain names
                [lv.astype(str) for lv in part.index.levels])
            total = part if total is None else total.add(part, fill_value=0.0)
            score += float(r.meta["scores"]["score"].sum())
            error = max(error, float(r.meta["max_abs_error"]))
        assert total is not None
        frame = total.to_frame("contribution")
        frame["score"] = score
        frame["share"] = frame["contribution"] / score
        frames.append(frame)
        keys.append((layer, head))
    table = pd.concat(frames, keys=keys, names=["layer", "head"])
    return table[list(ATTRIBUTION_COLUMNS)], error


def _losses(model: Model, ids: list[np.ndarray], early: int, late: int,
            item: Checkpoint) -> dict[str, float]:
    """``loss``, ``early_loss``, ``late_loss`` and ``icl`` of the inputs (NaN without an LM
    head)."""
    import torch

    nan = dict.fromkeys(("loss", "early_loss", "late_loss", "icl"), float("nan"))
    if not model.causal or model.hf.get_output_embeddings() is None:
        return nan
    short = [len(x) for x in ids if len(x) <= late]
    if short:
        raise InputError(
            f"The in-context score compares the loss at token {late} with the loss at token "
            f"{early}, but an input has only {short[0]} tokens. Pass longer inputs, or a "
            "smaller late= (and early=)."
        )
    total, count, at_early, at_late = 0.0, 0, [], []
    with torch.inference_mode():
        for x in ids:
            t = torch.as_tensor(x, dtype=torch.long)[None]
            logits = model.hf(input_ids=t).logits[0].float()
            loss = torch.nn.functional.cross_entropy(logits[:-1], t[0, 1:], reduction="none")
            total += float(loss.double().sum())
            count += loss.numel()
            at_early.append(float(loss[early - 1]))  # the loss of token p is row p - 1
            at_late.append(float(loss[late - 1]))
    e, lt = float(np.mean(at_early)), float(np.mean(at_late))
    return {"loss": total / count, "early_loss": e, "late_loss": lt, "icl": lt - e}


def _on_cluster(client: Any, task: Any, items: list[Checkpoint], progress: bool) -> list[Any]:
    from ..storage.engine import cluster_call, connect

    client, owned = connect(client)
    try:
        def go() -> list[Any]:
            from distributed import as_completed

            futures = [client.submit(task, item, pure=False) for item in items]
            bar = progress_bar(show=progress, total=len(items), desc="checkpoints",
                               unit="checkpoint")
            try:
                for f in as_completed(futures, loop=client.loop):
                    f.result()
                    bar.update(1)
            finally:
                bar.close()
            return [f.result() for f in futures]

        return cluster_call("Scoring checkpoints on the cluster", go)
    finally:
        if owned:
            client.close()


def crossing_steps(data: SeriesResult, *, value: str = "induction",
                   above: float = 0.5) -> HeadResult:
    """The step at which each head's score first passes a level.

    Parameters
    ----------
    data : SeriesResult
        From :func:`checkpoint_scores`.
    value : str
        The column of ``data.table`` to read (a kind of :func:`attnkit.head_scores`).
    above : float
        The level: a head crosses at the first checkpoint where its score is strictly
        greater than this.

    Returns
    -------
    HeadResult
        Indexed by ``(layer, head)``: ``step`` (the first checkpoint step above the level;
        NaN for a head that never gets there), ``previous_step`` (the checkpoint before it:
        the crossing happened in ``(previous_step, step]``), ``stays`` (whether the score
        stays above the level at every later checkpoint), ``first`` and ``final`` (the score
        at the first and last checkpoint). ``meta``: ``value``, ``above``.

    Raises
    ------
    InputError
        When ``value`` is not a column of the table.

    Examples
    --------
    >>> import pandas as pd
    >>> from attnkit.training.analyses import SeriesResult, crossing_steps
    >>> idx = pd.MultiIndex.from_product([[0, 10, 20], [0], [0, 1]],
    ...                                  names=["step", "layer", "head"])
    >>> r = SeriesResult(pd.DataFrame({"induction": [0.1, 0.0, 0.6, 0.1, 0.9, 0.2]}, index=idx))
    >>> crossing_steps(r)[["step", "previous_step", "stays"]].to_dict("list")
    {'step': [10.0, nan], 'previous_step': [0.0, nan], 'stays': [True, False]}
    """
    if not isinstance(data, SeriesResult):
        raise InputError(f"data must be the result of checkpoint_scores, not {type(data).__name__}.")
    if value not in data.table.columns:
        raise InputError(f"No column {value!r}; the columns are {list(data.table.columns)}.")
    wide = data.table[value].unstack("step").sort_index(axis=1)
    steps = np.asarray(wide.columns, dtype=np.float64)
    over = wide.to_numpy(dtype=np.float64) > above
    rows = []
    for k in range(len(wide)):
        hit = np.flatnonzero(over[k])
        if len(hit):
            i = int(hit[0])
            rows.append((steps[i], steps[i - 1] if i else np.nan, bool(over[k, i:].all())))
        else:
            rows.append((np.nan, np.nan, False))
    values = wide.to_numpy(dtype=np.float64)
    table = pd.DataFrame({"step": [r[0] for r in rows], "previous_step": [r[1] for r in rows],
                          "stays": [r[2] for r in rows], "first": values[:, 0],
                          "final": values[:, -1]}, index=wide.index)
    return HeadResult(table, {"value": "step", "score": value, "above": above})


__all__ = ["ATTRIBUTION_COLUMNS", "STEP_COLUMNS", "SeriesResult", "checkpoint_scores",
           "crossing_steps"]
