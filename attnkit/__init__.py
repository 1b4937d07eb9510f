"""attnkit: look inside the attention of transformer language models from a notebook.

The public names, grouped by task (``attnkit.__all__`` keeps this order; each group sorted):

- **models and attention**: :func:`load`, :class:`Model`, :class:`Attention`,
  :class:`LazyAttention`; the measures of what attention passes on (:mod:`attnkit.runtime.measures`);
  encoder–decoders (:mod:`attnkit.runtime.seq2seq`: encoder, decoder and cross-attention) and vision
  transformers (:mod:`attnkit.runtime.vision`: patches as tokens).
- **data**: treebanks, coreference documents, sentence pairs (:mod:`attnkit.data`).
- **corpora**: :func:`extract` into memory or a resumable Zarr store, :class:`AttentionSet`,
  :func:`open_store`.
- **results**: :class:`Result` and the per-head :class:`HeadResult` every analysis returns.
- **head analyses** (Clark et al. 2019 and beyond): :mod:`attnkit.analysis`.
- **whether heads matter**: :func:`ablate`, :func:`patch`, :func:`knockout`,
  :func:`path_patch`, :func:`attribution_patching` (:mod:`attnkit.interventions`).
- **circuits**: :func:`edge_attribution` (EAP, EAP-IG, exact edge patching), :func:`circuit`,
  :func:`circuit_faithfulness`, :func:`acdc`.
- **heads across training**: :func:`checkpoints` (a run's checkpoints, read lazily),
  :func:`checkpoint_scores`, :func:`crossing_steps` (:mod:`attnkit.training`).
- **attention flows** (DeRose et al. 2020; Abnar & Zuidema 2020): :mod:`attnkit.flow`.
- **views**: the widgets, :mod:`attnkit.plot` figures and offline reports.
- **interop**: other tools' attention in and out.
- **training and examples**: fine-tuning, the trained toy decoder, the pipelines.
"""

# ruff: noqa: F401  (every import is re-exported: __all__ is built from GROUPS below)

from . import analysis, data, errors, flow, interventions, plot, training
from .runtime import measures, seq2seq, vision
from .apps import pipeline
from .toys import induction as toy, tasks as toy_tasks
from .analysis import (
    AttentionProbe,
    alignment_error_rate,
    attention_importance,
    composition,
    coref_heads,
    embed_heads,
    faithfulness,
    head_behaviours,
    head_distances,
    head_scores,
    head_stats,
    qk_embedding,
    qk_faithfulness,
    relation_heads,
    right_branching_uas,
    score_attribution,
)
from .training import checkpoint_scores, checkpoints, crossing_steps
from .core.attention import Attention
from .interventions import (ablate, acdc, attribution_patching, circuit, circuit_faithfulness,
                            edge_attribution, knockout, patch, path_patch)
from .storage.corpus import AttentionSet, open_store
from .runtime.decompose import residual_stream
from .data import Document, Sentence, Treebank, induction_inputs, read_conllu, read_coref, read_glue
from .storage.extraction import extract
from .apps.finetune import finetune
from .flow import (
    attention_flow,
    attention_graph,
    compare,
    compare_sets,
    flow_routes,
    flow_summary,
    influence,
    paths_between,
    rollout,
    seq2seq_graph,
    seq2seq_rollout,
    subgraph_through,
)
from .runtime.interop import (
    from_bertviz,
    from_nnsight,
    from_transformer_lens,
    from_transformers,
    to_bertviz,
    to_circuitsvis,
)
from .runtime.lazy import LazyAttention
from .runtime.model import Model
from .runtime.load import load
from .apps.report import write_report
from .core.results import HeadResult, Result
from .version import __version__
from .widgets import (
    CheckpointScrubber,
    CircuitView,
    ClusterView,
    CrossView,
    FlowView,
    HeadGrid,
    HeadMap,
    Heatmap,
    ImageAttention,
    InterventionView,
    MeasureSwitch,
    QKScatter,
    RoutesView,
    ScoreView,
)

#: The public names by task (see the module docstring); sorted within each group.
GROUPS: dict[str, list[str]] = {
    "models and attention": ["Attention", "LazyAttention", "Model", "load", "measures", "seq2seq",
                             "vision"],
    "data": ["Document", "Sentence", "Treebank", "data", "induction_inputs", "read_conllu",
             "read_coref", "read_glue"],
    "corpora": ["AttentionSet", "extract", "open_store"],
    "results": ["HeadResult", "Result"],
    "head analyses": ["AttentionProbe", "alignment_error_rate", "analysis",
                      "attention_importance", "coref_heads",
                      "embed_heads", "faithfulness", "head_behaviours", "head_distances",
                      "head_scores", "head_stats", "qk_embedding", "qk_faithfulness",
                      "relation_heads", "right_branching_uas"],
    "why heads attend": ["composition", "residual_stream", "score_attribution"],
    "whether heads matter": ["ablate", "attribution_patching", "interventions", "knockout", "patch",
                             "path_patch"],
    "circuits": ["acdc", "circuit", "circuit_faithfulness", "edge_attribution"],
    "heads across training": ["checkpoint_scores", "checkpoints", "crossing_steps", "training"],
    "attention flows": ["attention_flow", "attention_graph", "compare", "compare_sets", "flow",
                        "flow_routes", "flow_summary", "influence", "paths_between", "rollout",
                        "seq2seq_graph", "seq2seq_rollout", "subgraph_through"],
    "views": ["CheckpointScrubber", "CircuitView", "ClusterView", "CrossView", "FlowView", "HeadGrid", "HeadMap", "Heatmap", "ImageAttention",
              "InterventionView", "MeasureSwitch", "QKScatter", "RoutesView", "ScoreView", "plot", "write_report"],
    "interop": ["from_bertviz", "from_nnsight", "from_transformer_lens", "from_transformers",
                "to_bertviz", "to_circuitsvis"],
    "training and examples": ["finetune", "pipeline", "toy", "toy_tasks"],
    "errors and version": ["__version__", "errors"],
}

__all__ = [name for names in GROUPS.values() for name in names]
