"""Attention-based dependency probes (Clark et al. 2019, §5).

Modules: :mod:`.features` (the features of each sentence, read once), :mod:`.scorers` (one
torch scorer per kind), :mod:`.estimator` (:class:`AttentionProbe`: fit, predict, score).

The probe gives every word ``j`` a distribution over its possible heads: ROOT or another
word ``i``. Its features are the ``K = layers × heads`` word-level maps read both ways,
``α_k(j→i)`` (the dependent attends to the candidate) and ``α_k(i→j)`` (the candidate
attends to the dependent): ``2K`` numbers per pair. ROOT is scored from the [CLS] and [SEP]
columns of the maps and of their transposes (the attention of ``j`` to [CLS] and to [SEP],
and from them to ``j``: ``4K`` numbers), with weights of its own.

* ``kind="attn"`` (Attn-Only): ``score(i | j) = Σ_f w_f x_f(i, j)``: one weight per map and
  direction.
* ``kind="attn+emb"`` (Attn + embeddings): the weights are a linear function of the pair's
  word embeddings, ``w(i, j) = W_h v_i + W_d v_j + b``. The paper uses fixed GloVe
  vectors; offline we use the model's own input (static) embeddings pooled per word, which
  the stores keep (``attnkit.extract(..., embeddings=True)``).
* ``kind="dist+emb"``: the paper's "Distances + GloVe" baseline, no attention at all: a
  one-hidden-layer MLP on ``[v_i, v_j]`` and the clipped signed distance ``i − j``.

Training minimises the cross-entropy of the gold head of every word (punctuation
included) with AdamW, on padded batches of length-sorted sentences, with dropout on the
embeddings; with a ``dev`` split it keeps the epoch with the best dev UAS. The attention
values enter raw, as in the paper (rescaling each feature by its RMS trained faster but
generalised worse: 74 vs 76.5 dev UAS for Attn+emb). Decoding is independent argmax or the maximum
spanning tree (:func:`attnkit.analysis.tree.max_spanning_tree`). UAS leaves out
punctuation (UPOS ``PUNCT``).
"""

from .estimator import DECODERS, AttentionProbe
from .features import ProbeData, probe_data
from .scorers import KINDS

__all__ = ["DECODERS", "KINDS", "AttentionProbe", "ProbeData", "probe_data"]
