"""attnkit: look inside the attention of transformer language models from a notebook."""

from . import errors, measures, pipeline, plot, toy
from .analysis import (
    AttentionProbe,
    attention_importance,
    coref_heads,
    embed_heads,
    faithfulness,
    head_behaviours,
    head_distances,
    head_scores,
    head_stats,
    relation_heads,
    right_branching_uas,
)
from .attention import Attention
from .corpus import AttentionSet, open_store
from .extraction import extract
from .data import Sentence, Treebank, induction_inputs, read_conllu, read_coref, read_glue
from .finetune import finetune
from .flow import (
    attention_flow,
    attention_graph,
    compare,
    compare_sets,
    flow_summary,
    influence,
    paths_between,
    rollout,
    subgraph_through,
)
from .interop import (
    from_bertviz,
    from_nnsight,
    from_transformer_lens,
    from_transformers,
    to_bertviz,
    to_circuitsvis,
)
from .lazy import LazyAttention
from .model import Model, load
from .report import write_report
from .widgets import ClusterView, FlowView, HeadGrid, HeadMap, Heatmap, MeasureSwitch

from .version import __version__

__all__ = [
    "Attention",
    "AttentionProbe",
    "AttentionSet",
    "ClusterView",
    "FlowView",
    "HeadGrid",
    "HeadMap",
    "Heatmap",
    "LazyAttention",
    "MeasureSwitch",
    "Model",
    "Sentence",
    "attention_flow",
    "attention_importance",
    "embed_heads",
    "faithfulness",
    "head_behaviours",
    "head_distances",
    "attention_graph",
    "compare",
    "compare_sets",
    "flow_summary",
    "influence",
    "paths_between",
    "rollout",
    "subgraph_through",
    "write_report",
    "Treebank",
    "coref_heads",
    "errors",
    "pipeline",
    "plot",
    "extract",
    "measures",
    "finetune",
    "from_bertviz",
    "from_nnsight",
    "from_transformer_lens",
    "from_transformers",
    "to_bertviz",
    "to_circuitsvis",
    "head_scores",
    "head_stats",
    "induction_inputs",
    "load",
    "open_store",
    "read_conllu",
    "read_coref",
    "read_glue",
    "relation_heads",
    "toy",
    "right_branching_uas",
    "__version__",
]
