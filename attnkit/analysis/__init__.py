"""Analyses of attention: pure functions returning DataFrames or arrays."""

from .alignment import alignment_error_rate, word_alignment
from .attribution import ATTRIBUTIONS, attribution
from .cluster import (
    BEHAVIOURS,
    classical_mds,
    embed_heads,
    head_behaviours,
    head_distances,
    uniform_entropy,
)
from .composition import composition
from .coref import (
    CorefEvaluation,
    coref_heads,
    coref_predictions,
    coref_rows,
    coref_summary,
    split_documents,
)
from .faithfulness import faithfulness
from .heads import HEAD_KINDS, earlier_occurrences, head_scores, token_identity
from ..runtime.gradients import AttentionGradients, attention_gradients
from .importance import TARGETS, attention_importance
from .probe import AttentionProbe, probe_data
from .score_attribution import GRAINS, score_attribution
from .qk import QKEmbedding, QKPoints, normalize_qk, qk_embedding, qk_faithfulness
from .qkscale import neighbourhood_preservation
from .stats import STAT_COLUMNS, head_stats, item_stats, uniform_row_entropy
from .syntax import head_accuracy, offset_accuracy, relation_heads, right_branching_uas, word_hits

__all__ = [
    "ATTRIBUTIONS",
    "BEHAVIOURS",
    "GRAINS",
    "HEAD_KINDS",
    "STAT_COLUMNS",
    "TARGETS",
    "AttentionGradients",
    "AttentionProbe",
    "QKEmbedding",
    "QKPoints",
    "CorefEvaluation",
    "alignment_error_rate",
    "attention_gradients",
    "attention_importance",
    "attribution",
    "classical_mds",
    "composition",
    "coref_heads",
    "coref_predictions",
    "coref_rows",
    "coref_summary",
    "earlier_occurrences",
    "embed_heads",
    "faithfulness",
    "normalize_qk",
    "neighbourhood_preservation",
    "head_behaviours",
    "head_accuracy",
    "head_distances",
    "head_scores",
    "head_stats",
    "item_stats",
    "offset_accuracy",
    "probe_data",
    "qk_embedding",
    "qk_faithfulness",
    "relation_heads",
    "right_branching_uas",
    "score_attribution",
    "split_documents",
    "token_identity",
    "uniform_entropy",
    "word_alignment",
    "uniform_row_entropy",
    "word_hits",
]
