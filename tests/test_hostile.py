"""The generated hostile-input contract (issue 27): every public callable, hostile values.

The walk is :mod:`test_contract`'s (``attnkit.__all__`` and the subpackages' ``__all__``:
functions, constructors and public methods). For each callable, its docstring example (which
the contract requires, and which runs on ``attnkit.testing``'s tiny models) is run once with
a tracer that records the arguments of the first call of the callable: a valid call. That
call is then replayed with one parameter at a time replaced by generated hostile values,
chosen by the parameter's name and type:

- an index (``layer``, ``head``, ``query`` ...): fractions, whole floats, booleans, strings,
  None, far out of range either way;
- a position list (``positions``, ``queries``, ``rows``, ``sources``, ``layers`` ...):
  fractions, a lone boolean, booleans mixed with ints, strings, far out of range, NaN,
  empty, duplicated, negative;
- ``(layer, head)`` or ``(query, key)`` pairs: fractional, boolean, string, out-of-range and
  one-element pairs, a bare string, empty, duplicated;
- a count (``size``, ``top``, ``batch_size``, ``seed`` ...): fractions, booleans, strings,
  negatives, zero;
- a name (``measure``, ``method``, ``reduce`` ...): an unknown name, a number, None;
- a path: a missing one, a folder, a number;
- a model: a model's name, None, a model of another family (encoder–decoder, vision);
- attention maps: NaN in them, the wrong number of dimensions.

Each value is marked MUST (it is wrong: the call has to raise an ``attnkit.errors`` error) or
MAY (it can be valid: a result is accepted). Either way an exception must be an
``attnkit.errors.AttnkitError`` whose message names the parameter (or, for a path, the path).
A new public function is covered the moment it is exported; a callable the generator cannot
call is listed in :data:`NOT_GENERATED` with the reason, and that list is checked to be small.
"""

from __future__ import annotations

import doctest
import inspect
import sys
import warnings
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pytest
from test_contract import _OBJECTS, CALLABLES, _doc

import attnkit as ak
from attnkit.errors import AttnkitError

MUST, MAY = "must raise", "may pass"
#: A model of another family with the example's input: a result, or any attnkit error (the
#: input may no longer fit the model: a text given to a vision model is no image).
OTHER = "may pass or refuse the input"

INDEX = {"layer", "head", "query", "key", "item", "batch_index", "sentence_b_start", "batch",
         "b", "start", "end", "ids", "position", "step", "early", "late"}
POSITIONS = {"positions", "queries", "keys", "rows", "cols", "sources", "layers", "qk_layers",
             "starts", "ends"}
PAIRS = {"heads", "pairs"}
COUNTS = {"size", "top", "batch_size", "dims", "steps", "n_boot", "samples", "bin_size",
          "budget", "chunk", "max_bytes", "max_distance", "max_edges", "max_items", "max_iter",
          "max_labels", "max_rounds", "min_count", "n_init", "edges", "limit", "overview",
          "embed", "candidates", "n_words", "seed", "n", "length", "dpi", "epochs", "hidden",
          "freeze_layers", "max_length", "n_heads", "n_layers", "timeout", "checkpoint_every",
          # qk_embedding's fitted sample; neighbourhood_preservation's neighbours and points
          "sample", "k", "n_eval",
          # extract(generate=True): how long each generated target may grow
          "max_new_tokens"}
CHOICES = {"measure", "method", "reduce", "level", "mode", "aggregate", "scale", "direction",
           "color_by", "overlay", "layout", "capture", "objective", "components", "keep",
           "normalize", "by", "column", "metric",
           # an encoder-decoder's stack of heads (attnkit.interventions: stack=)
           "stack"}
PATHS = {"path", "out", "notebook", "store", "name_or_path", "save_notebook"}

#: Callables the generator cannot call, with the reason. Checked to stay small.
NOT_GENERATED = {
    "Model.record": "a low-level step whose recorders protocol the example builds by hand",
    "Model.run": "a low-level step over encodings (covered through attend and extract)",
    "finetune": "trains a model for minutes; its options are checked in tests/test_finetune.py",
    "write_report": "its example writes into a TemporaryDirectory that is gone when the call "
                    "is replayed; tests/test_report_export.py covers its paths",
    "load": "loads from the hub or a folder; tests/test_load_errors.py covers its inputs",
}
MAX_NOT_GENERATED = 8

#: Positions of a metric built before its inputs are known: their form is checked when the
#: metric is made, their range against each input when it is applied (tests/test_interventions.py).
DEFERRED_RANGE = {("interventions.loss", "positions"), ("interventions.kl", "positions"),
                  ("interventions.logprob", "position"), ("interventions.logit_diff", "position")}

#: Integer parameters the generator does not feed, with the reason (every other parameter
#: typed ``int`` must be classified above: a new one fails
#: :func:`test_every_integer_parameter_is_generated_or_exempt`).
INT_EXEMPT = {
    ("paths_between", "a"): "a graph node: (level, position) or a position, checked as one",
    ("paths_between", "b"): "a graph node: (level, position) or a position, checked as one",
    ("subgraph_through", "nodes"): "graph nodes: (level, position) pairs or positions, checked "
                                    "against the graph (tests/test_flow_graph.py)",
}


def _kind(name: str, annotation: str) -> str | None:
    """What a parameter is, from its name and type (None: not generated)."""
    a = str(annotation)
    if name in INDEX and a.replace(" | None", "") == "int":
        return "index"
    if name in PAIRS and ("tuple" in a or "HeadId" in a):
        return "pairs"
    if (name in POSITIONS or name in PAIRS) and ("int" in a or a in ("Any", "slice", "Sources")):
        return "positions"
    if name in COUNTS and "int" in a and "Iterable" not in a:
        return "count"
    if name in CHOICES and a.startswith("str"):
        return "choice"
    if name in PATHS and ("str" in a or "Path" in a):
        return "path"
    if name == "model" and a in ("Any", "Model", "Model | str"):
        return "model"
    if name == "maps" and "ndarray" in a:
        return "maps"
    return None


def _none(annotation: str) -> list[tuple[Any, str]]:
    return [] if "None" in str(annotation) or str(annotation) == "Any" else [(None, MUST)]


def _other_models() -> list[Any]:
    from attnkit.testing import tiny_seq2seq, tiny_vision

    return [tiny_seq2seq("t5"), tiny_vision("vit")]


def hostile(kind: str, annotation: str, valid: Any, tmp: Path,
            optional: bool = False) -> list[tuple[Any, str]]:
    """The generated values for one parameter, each with what must happen."""
    if kind == "index":
        return [(0.5, MUST), (1.0, MUST), (True, MUST), (np.float64(1.0), MUST), ("0", MUST),
                (10**6, MUST), (-10**6, MUST), (-1, MAY), *_none(annotation)]
    if kind == "positions":
        out = [([1.5], MUST), (True, MUST), ([True, 0], MUST), ("0x", MUST), ([10**6], MUST),
               ([-10**6], MUST), (np.array([np.nan]), MUST), ([], MAY), ([0, 0], MAY),
               ([-1], MAY)]
        return out
    if kind == "pairs":
        return [([(0, 0.5)], MUST), ([(True, 0)], MUST), ([(10**6, 0)], MUST),
                ([("0", 0)], MUST), ([(0,)], MUST), ("heads", MUST), ([], MAY),
                ([(0, 0), (0, 0)], MAY), ([(-1, -1)], MAY)]
    if kind == "count":
        return [(2.5, MUST), (True, MUST), ("3", MUST), (-1, MUST), (0, MAY),
                *_none(annotation)]
    if kind == "choice":
        return [("no-such-choice", MUST), (3, MUST), *_none(annotation)]
    if kind == "path":
        return [(tmp / "no" / "such" / "thing", MAY), (tmp, MAY), (3, MUST)]
    if kind == "model":
        name = MAY if "str" in annotation else MUST  # a function that loads models by name
        return [("minilm", name), (None, MAY if optional else MUST),
                *[(m, OTHER) for m in _other_models()]]
    if kind == "maps":
        arr = np.asarray(valid, dtype=np.float32)
        nan = arr.copy()
        nan.flat[0] = np.nan
        return [(nan, MUST), (arr.reshape(-1), MAY)]
    raise AssertionError(kind)


# ------------------------------------------------------------------ a valid call
_SEEN: dict[str, dict | None] = {}


def _signature(name: str) -> inspect.Signature:
    return inspect.signature(inspect.unwrap(CALLABLES[name]))


def valid_call(name: str) -> dict | None:
    """The arguments of the first call of ``name`` in its docstring example (None when the
    example does not call it)."""
    if name in _SEEN:
        return _SEEN[name]
    fn = inspect.unwrap(CALLABLES[name])
    code = fn.__code__
    params = set(inspect.signature(fn).parameters)
    calls: list[dict] = []

    def tracer(frame: Any, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code is code and not calls:
            calls.append({k: v for k, v in frame.f_locals.items() if k in params})

    globs = {**fn.__globals__, "np": np, "ak": ak}  # as a module's doctest sees it
    test = doctest.DocTestParser().get_doctest(_doc(name, fn), globs, name, None, 0)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    old = sys.gettrace()
    sys.settrace(tracer)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            runner.run(test, out=lambda _s: None)
    finally:
        sys.settrace(old)
        plt.close("all")
    _SEEN[name] = calls[0] if calls else None
    return _SEEN[name]


#: Estimators check their parameters in ``fit``, not in ``__init__`` (scikit-learn's rule, kept
#: by tests/test_probe.py): a generated constructor call is followed by ``fit`` with the
#: arguments of the example's own ``fit`` call.
CHECKED_AT_FIT = {"AttentionProbe()": "AttentionProbe.fit"}


def call(name: str, args: dict) -> Any:
    """Call ``name`` with the bound arguments ``args`` (an estimator: then its ``fit``)."""
    out = _call(name, args)
    if name in CHECKED_AT_FIT:
        fit = CHECKED_AT_FIT[name]
        fit_args = {k: v for k, v in (valid_call(fit) or {}).items() if k != "self"}
        out = inspect.unwrap(CALLABLES[fit])(out, **fit_args)
    return out


def _call(name: str, args: dict) -> Any:
    sig = _signature(name)
    pos: list[Any] = []
    kw: dict[str, Any] = {}
    for p in sig.parameters.values():
        if p.name not in args:
            continue
        if p.kind is p.VAR_POSITIONAL:
            pos.extend(args[p.name])
        elif p.kind is p.VAR_KEYWORD:
            kw.update(args[p.name])
        elif p.kind is p.POSITIONAL_ONLY:
            pos.append(args[p.name])
        else:
            kw[p.name] = args[p.name]
    if name.endswith("()"):
        kw.pop("self", None)
        return _OBJECTS[name[:-2]](*pos, **kw)
    return inspect.unwrap(CALLABLES[name])(*pos, **kw)


def _targets(name: str) -> list[tuple[str, str]]:
    out = []
    for p in _signature(name).parameters.values():
        kind = None if (name, p.name) in INT_EXEMPT else _kind(p.name, p.annotation)
        if kind is not None and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            out.append((p.name, kind))
    return out


GENERATED = sorted(n for n in CALLABLES if _targets(n) and n not in NOT_GENERATED)


def _names_it(param: str, value: Any, message: str) -> bool:
    text = message.lower()
    words = {param, param.rstrip("s"), param.removesuffix("es")}
    if param in ("rows", "cols"):
        words |= {"position", "row", "column"}
    if param in PATHS:
        words |= {str(value).lower()}
    return any(w and w.lower() in text for w in words)


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) < 60 else text[:57] + "..."


@pytest.mark.parametrize("name", GENERATED)
def test_hostile_values_get_a_result_or_an_attnkit_error_naming_the_parameter(name, tmp_path,
                                                                               monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = valid_call(name)
    assert args is not None, (f"{name}: its docstring example does not call it, so no hostile "
                              "input can be generated; call it in the example, or list it in "
                              "NOT_GENERATED with the reason")
    problems = []
    for param, kind in _targets(name):
        if param not in args:
            continue
        sig_param = _signature(name).parameters[param]
        values = hostile(kind, str(sig_param.annotation), args[param], tmp_path,
                         optional=sig_param.default is None)
        if (name, param) in DEFERRED_RANGE:  # far out of range is refused when applied
            far = [10**6, -(10**6), [10**6], [-(10**6)]]
            values = [(v, MAY if any(v is f or (type(v) is type(f) and v == f) for f in far) else e)
                      for v, e in values]
        for value, expect in values:
            case = f"{name}({param}={_show(value)})"
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    call(name, {**args, param: value})
            except AttnkitError as exc:
                # a value that may be valid can make two arguments disagree (batch_index=-1
                # with the first item's tokens): the message may name the other one
                others = [p for p in args if p != param] if expect == MAY else []
                if expect != OTHER and not any(_names_it(p, value, str(exc))
                                               for p in [param, *others]):
                    problems.append(f"{case}: the message does not name {param!r}: {exc}")
            except Exception as exc:  # noqa: BLE001 - any other class is the finding
                problems.append(f"{case}: {type(exc).__name__} (not an attnkit error): {exc}")
            else:
                if expect == MUST:
                    problems.append(f"{case}: accepted silently")
            finally:
                plt.close("all")
    assert not problems, "\n".join(problems)


def test_every_callable_the_generator_skips_is_listed_with_a_reason():
    assert len(NOT_GENERATED) <= MAX_NOT_GENERATED
    assert set(NOT_GENERATED) <= set(CALLABLES), set(NOT_GENERATED) - set(CALLABLES)
    assert all(len(reason) > 20 for reason in NOT_GENERATED.values())
    # the generator reaches the parameters the issue names, across the API
    kinds = {kind for n in GENERATED for _, kind in _targets(n)}
    assert kinds == {"index", "positions", "pairs", "count", "choice", "path", "model", "maps"}
    assert len(GENERATED) >= 60


def test_every_integer_parameter_is_generated_or_exempt():
    """Validation from the signature: each parameter typed ``int`` of every public callable
    is fed hostile values, or listed in INT_EXEMPT with the reason."""
    missing = []
    for name in CALLABLES:
        for p in _signature(name).parameters.values():
            a = str(p.annotation)
            is_int = a == "int" or a.startswith("int ") or "| int" in a or "int |" in a
            if is_int and _kind(p.name, a) is None and (name, p.name) not in INT_EXEMPT:
                missing.append(f"{name}({p.name}: {a})")
    assert not missing, missing
    assert set(INT_EXEMPT) <= {(n, p) for n in CALLABLES for p in _signature(n).parameters}


def test_the_generator_finds_a_planted_truncation(monkeypatch):
    """The contract can fail: a callable that truncates ``layer=1.5`` to 1 is caught."""
    att = ak.Attention.from_maps(np.full((2, 1, 2, 2), 0.5), ["a", "b"])
    args = {"self": att, "layer": 1, "head": 0}
    monkeypatch.setattr(ak.Attention, "map", lambda self, layer, head: self.maps[int(layer), int(head)])
    silently = []
    for value, expect in hostile("index", "int", 1, Path(".")):
        try:
            ak.Attention.map(args["self"], value, 0)
        except (AttnkitError, IndexError, ValueError, TypeError):
            continue
        if expect == MUST:
            silently.append(value)
    assert 0.5 in silently and True in silently
