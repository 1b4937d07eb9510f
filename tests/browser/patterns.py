"""Hand-built attention with the head behaviours BERT is known for (Clark et al. 2019):
previous/next token, [CLS], [SEP], punctuation, broad, and self attention. Rows sum to 1."""

from __future__ import annotations

import numpy as np

import attnkit

WORDS = (
    "the", "quick", "brown", "fox", "jumps", "over", "the", "lazy", "dog", ",", "and", "then",
    "it", "sleeps", "in", "the", "warm", "sun", ".", "a", "small", "bird", "sings", "on", "the",
    "old", "fence", "while", "children", "play", "near", "the", "river", ";",
)


def tokens_for(n: int) -> list[str]:
    body = [WORDS[i % len(WORDS)] for i in range(n - 2)]
    return ["[CLS]", *body, "[SEP]"]


def structured(n_layers: int, n_heads: int, n: int, tokens: list[str] | None = None,
               seed: int = 0, noise: float = 0.15) -> attnkit.Attention:
    """An Attention ``[L, H, n, n]``; head (l, h) gets behaviour ``(l * 7 + h * 3) % 7``."""
    rng = np.random.default_rng(seed)
    tokens = list(tokens) if tokens is not None else tokens_for(n)
    assert len(tokens) == n
    roles = ["cls"] + ["word"] * (n - 2) + ["sep"]
    punct = np.array([t in {",", ".", ";"} for t in tokens])
    idx = np.arange(n)
    maps = np.empty((n_layers, n_heads, n, n), dtype=np.float32)
    for l in range(n_layers):
        for h in range(n_heads):
            kind = (l * 7 + h * 3) % 7
            base = np.zeros((n, n))
            if kind == 0:
                base[idx, np.maximum(idx - 1, 0)] = 1.0
            elif kind == 1:
                base[idx, np.minimum(idx + 1, n - 1)] = 1.0
            elif kind == 2:
                base[:, 0] = 1.0
            elif kind == 3:
                base[:, n - 1] = 1.0
            elif kind == 4:
                base[:, punct] = 1.0 if punct.any() else 0.0
                base[:, n - 1] += 0.5
            elif kind == 5:
                base[:] = 0.2
            else:
                base[idx, idx] = 1.0
            logits = 4.0 * base + noise * rng.standard_normal((n, n)) * 4.0
            e = np.exp(logits - logits.max(axis=1, keepdims=True))
            maps[l, h] = e / e.sum(axis=1, keepdims=True)
    return attnkit.Attention(
        maps, tokens=tokens, roles=roles,
        word_ids=[-1] + list(range(n - 2)) + [-1], words=tokens[1:-1], model="hand-built",
    )
