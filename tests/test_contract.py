"""The API contract (CONTRIBUTING.md), checked on every public callable of ``attnkit.__all__``."""

from __future__ import annotations

import inspect

import pytest

import attnkit as ak

#: Data arguments: the only parameters that may be passed positionally (CONTRIBUTING.md §1).
DATA = {
    "attentions", "gold", "other", "model", "inputs", "item", "graph", "a", "b", "nodes",
    "maps", "tokens", "roles", "data", "embedding", "distances", "stats", "path", "split",
    "name_or_path", "notebook", "out", "n", "length", "hf_model", "tokenizer", "kind",
    # the checkpoints of one training run (attnkit.checkpoints), and one step of them
    "series", "step",
    # what a reader or a model's low-level step works on: one head, one block, one batch
    "layer", "head", "rows", "cols", "size", "reduce", "layers", "encodings", "encoding",
    "ids", "batch", "recorders", "word_ids", "words",
    # raw query and key vectors of one head (attnkit.analysis.qk.normalize_qk)
    "queries", "keys",
    # the reader of one column of a result's points (QKEmbedding.column(column, rows))
    "column",
    # another tool's objects, named as that tool names them (attnkit.runtime.interop)
    "cache", "saved", "attention",
    # a result's own table and metadata, the column it shows, the axes it draws into
    "table", "meta", "value", "ax",
    # how much of a record to keep (Document.cut)
    "n_words",
    # what a model's forward returned, handed to a recorder after it (Model.record's
    # recorder protocol: MeasureRecorder.finish(output))
    "output",
    # what interventions compare and change (attnkit.interventions: patch, knockout)
    "clean", "corrupted", "edges",
    # a circuit and the edge scores it is kept from (ak.circuit, ak.circuit_faithfulness)
    "scores", "circuit",
}
#: Spellings that the contract replaced; they live on only through attnkit._compat.renamed.
RETIRED = {"att", "atts", "att_a", "att_b", "attention_set", "set_a", "set_b", "X", "y", "df",
           "dev", "source", "report_on", "treebank", "g"}
#: Shared options and their one default.
DEFAULTS = {"select_on": None, "threshold": 0.3, "heads": None, "sources": None, "alpha": 0.5,
            "residual": 0.5, "progress": True, "client": None, "seed": 0, "measure": "weights"}
#: Classes that attnkit builds for the user (records, stores, lazy maps): their constructors
#: are internal, their public methods are checked.
BUILT_BY_ATTNKIT = {
    "AttentionSet", "LazyAttention", "Treebank", "Sentence", "Document",
    # records of readers: read_coref's mentions, read_glue's datasets
    "Mention", "GlueDataset",
    # records of analyses: attention_gradients, coref_predictions, compare, compare_sets,
    # flow_summary, paths_between
    "AttentionGradients", "CorefEvaluation", "Comparison", "SetComparison", "FlowSummary",
    "PathQuery",
    # the recorder measure_maps hands to Model.record
    "MeasureRecorder",
    # what interventions measure, built by attnkit.interventions.loss(), kl(), ...
    "Metric",
    # a run's checkpoints (attnkit.checkpoints) and the scores over them (checkpoint_scores)
    "Checkpoint", "CheckpointSeries", "SeriesResult",
}


#: Subpackages that docs and notebooks reach as ``ak.<sub>.``: exported with the package, and
#: their public names (``__all__``) follow the contract like the package's own.
SUBPACKAGES = ("analysis", "data", "flow", "interventions", "measures", "plot", "training")


def _public():
    """``(qualified name, object)`` for ``attnkit.__all__`` and each subpackage's ``__all__``;
    an object re-exported at the top level is checked once, under its top-level name."""
    seen = set()
    for name in ak.__all__:
        obj = getattr(ak, name)
        seen.add(id(obj))
        yield name, name, obj
    for sub in SUBPACKAGES:
        module = getattr(ak, sub)
        for name in module.__all__:
            obj = getattr(module, name)
            if id(obj) in seen:
                continue
            seen.add(id(obj))
            yield f"{sub}.{name}", name, obj


def _callables():
    for qualified, name, obj in _public():
        if inspect.ismodule(obj) or not callable(obj):
            continue
        if inspect.isclass(obj):
            if name not in BUILT_BY_ATTNKIT:
                yield f"{qualified}()", obj.__init__
            for meth, fn in vars(obj).items():
                if meth.startswith("_"):
                    continue
                fn = fn.__func__ if isinstance(fn, (classmethod, staticmethod)) else fn
                if inspect.isfunction(fn):
                    yield f"{qualified}.{meth}", fn
        else:
            yield qualified, obj


CALLABLES = dict(_callables())
_OBJECTS = {qualified: obj for qualified, _, obj in _public()}


def _params(fn):
    sig = inspect.signature(fn)
    params = list(sig.parameters.values())
    if params and params[0].name in ("self", "cls"):
        params = params[1:]
    return sig, params


@pytest.mark.parametrize("name", sorted(CALLABLES))
def test_signature_follows_the_contract(name):
    fn = CALLABLES[name]
    sig, params = _params(fn)
    deprecated = set(getattr(fn, "__attnkit_deprecated__", ()))
    for p in params:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        assert p.annotation is not p.empty, f"{name}: parameter {p.name!r} has no type"
        if p.name in deprecated:
            continue
        assert p.name not in RETIRED, f"{name}: {p.name!r} is a retired spelling (see CONTRIBUTING.md)"
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            assert p.name in DATA, (f"{name}: option {p.name!r} must be keyword-only (after *); "
                                    f"only data arguments {sorted(DATA)} come first")
        if p.name in DEFAULTS:
            assert p.default == DEFAULTS[p.name], (
                f"{name}: {p.name}= defaults to {p.default!r}, the contract's default is "
                f"{DEFAULTS[p.name]!r}")
    if not name.endswith("()"):
        assert sig.return_annotation is not sig.empty, f"{name}: no return type"


def test_every_name_in_all_exists_and_all_is_sorted_by_kind():
    missing = [n for n in ak.__all__ if not hasattr(ak, n)]
    assert not missing
    assert len(set(ak.__all__)) == len(ak.__all__)
    # grouped by task (attnkit.GROUPS, in the module docstring's order), sorted within groups
    assert ak.__all__ == [n for names in ak.GROUPS.values() for n in names]
    for group, names in ak.GROUPS.items():
        assert names == sorted(names), group  # classes (capitalised) first, then functions
    # the result types and every subpackage that docs reach through ``ak.<sub>.`` are exported
    assert {"Result", "HeadResult", "Document", "Sentence"} <= set(ak.__all__)
    assert set(SUBPACKAGES) <= set(ak.__all__)


def test_old_spellings_still_work_for_one_release():
    import numpy as np

    att = ak.Attention.from_maps(np.array([[[[1, 0], [0.5, 0.5]]]]), ["a", "b"])
    with pytest.warns(DeprecationWarning, match="sources="):
        old = ak.attention_graph(att, 0.3, None, [1])
    assert sorted(old.edges) == sorted(ak.attention_graph(att, sources=[1]).edges)
    with pytest.warns(DeprecationWarning, match="attentions="):
        ak.rollout(att=att)
    with pytest.raises(TypeError, match="both"):
        ak.rollout(att, att=att)
    # the subpackages' old spellings too: plot functions' g=, inf= and positional options
    import matplotlib.pyplot as plt

    graph = ak.attention_graph(att)
    with pytest.warns(DeprecationWarning, match="graph="):
        ak.plot.plot_flow_graph(g=graph)
    with pytest.warns(DeprecationWarning, match="title="):
        fig = ak.plot.plot_influence(ak.influence(graph), None, "old")
    assert fig.axes[0].get_title() == "old"
    plt.close("all")
    with pytest.warns(DeprecationWarning, match="sources="):
        assert ak.flow.resolve_source(att, 1) == [(1, 1)]
    with pytest.warns(DeprecationWarning, match="use attribution\\(maps"):
        old_attr = ak.analysis.attribution("weights", {"weights": att}, [1])
    np.testing.assert_array_equal(old_attr, ak.analysis.attribution({"weights": att}, name="weights",
                                                                    sources=[1]))


def _doc(name: str, fn) -> str:
    """The docstring that documents ``name``: a class's own for its constructor ("X()")."""
    if name.endswith("()"):
        return inspect.getdoc(_OBJECTS[name[:-2]]) or ""
    return inspect.getdoc(fn) or ""


@pytest.mark.parametrize("name", sorted(CALLABLES))
def test_docstring_is_numpydoc_with_examples(name):
    """CONTRIBUTING.md: numpydoc docstrings with Parameters (every parameter), Returns (not
    for constructors) and an Examples section that runs as a doctest."""
    from numpydoc.docscrape import NumpyDocString

    fn = CALLABLES[name]
    text = _doc(name, fn)
    assert text, f"{name}: no docstring"
    doc = NumpyDocString(text)
    _, params = _params(fn)
    deprecated = set(getattr(fn, "__attnkit_deprecated__", ()))
    names = [p.name for p in params
             if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) and p.name not in deprecated]
    documented = {part.strip().lstrip("*") for entry in doc["Parameters"]
                  for part in entry.name.split(",")}
    if names:
        assert doc["Parameters"], f"{name}: no Parameters section"
        missing = [n for n in names if n not in documented]
        assert not missing, f"{name}: parameters {missing} are not in its Parameters section"
    if not name.endswith("()"):
        assert doc["Returns"] or doc["Yields"], f"{name}: no Returns section"
    examples = "\n".join(doc["Examples"])
    assert ">>>" in examples, f"{name}: no Examples section with a doctest"
