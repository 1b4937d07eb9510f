"""Hand-built attention for the flow tests: every path, count and flow is worked out by hand
in the comments and asserted in tests/test_flow_*.py."""

from __future__ import annotations

import numpy as np

from attnkit import Attention

TOKENS = ["[CLS]", "a", "b", "[SEP]"]
ROLES = ["cls", "word", "word", "sep"]


def make_att(maps, tokens=None, roles=None, causal=False, model=""):
    maps = np.asarray(maps, dtype=np.float32)
    n = maps.shape[-1]
    tokens = list(tokens) if tokens is not None else [f"t{i}" for i in range(n)]
    roles = list(roles) if roles is not None else ["word"] * n
    word_ids, words = [], []
    for tok, role in zip(tokens, roles):
        if role == "word":
            word_ids.append(len(words))
            words.append(tok)
        else:
            word_ids.append(-1)
    return Attention(maps=maps, tokens=tokens, roles=roles, word_ids=word_ids, words=words,
                     causal=causal, model=model)


def two_layer_maps() -> np.ndarray:
    """2 layers x 2 heads over [CLS] a b [SEP]; at threshold 0.3, from (2, 0) = [CLS]:

    layer index 1 (level 2 -> 1), row 0 only (the source):
        head 0: [CLS] -> a (0.6);  head 1: [CLS] -> a (0.5), [CLS] -> b (0.35)
    layer index 0 (level 1 -> 0), rows of a (1) and b (2):
        a: head 0 -> b (0.7);  head 1 -> [CLS] (0.4), -> a (0.4)
        b: head 0 -> a (0.4), -> [SEP] (0.4);  head 1 -> [SEP] (0.7)
    Rows 0 and 3 of layer 0 attend strongly too, but (1, 0) and (1, 3) are not reached
    from the source, so they must not appear.
    """
    m = np.zeros((2, 2, 4, 4))
    # layer 0
    m[0, 0, 0] = [0.9, 0.05, 0.05, 0.0]
    m[0, 1, 0] = [0.8, 0.1, 0.1, 0.0]
    m[0, 0, 1] = [0.05, 0.15, 0.7, 0.1]
    m[0, 1, 1] = [0.4, 0.4, 0.1, 0.1]
    m[0, 0, 2] = [0.1, 0.4, 0.1, 0.4]
    m[0, 1, 2] = [0.1, 0.1, 0.1, 0.7]
    m[0, 0, 3] = [0.05, 0.05, 0.0, 0.9]
    m[0, 1, 3] = [0.0, 0.1, 0.0, 0.9]
    # layer 1
    m[1, 0, 0] = [0.1, 0.6, 0.2, 0.1]
    m[1, 1, 0] = [0.1, 0.5, 0.35, 0.05]
    for h in range(2):
        for q in range(1, 4):
            m[1, h, q] = [0.25, 0.25, 0.25, 0.25]
    return m


def att_a() -> Attention:
    return make_att(two_layer_maps(), TOKENS, ROLES, model="pre")


def att_b() -> Attention:
    """Like :func:`att_a` but head 1 of the top layer sends [CLS] to [SEP] instead of b:
    row [0.1, 0.5, 0.05, 0.35] (so b is no longer reached, [SEP] at level 1 is)."""
    m = two_layer_maps()
    m[1, 1, 0] = [0.1, 0.5, 0.05, 0.35]
    return make_att(m, TOKENS, ROLES, model="fine")


def dirichlet_att(n_layers, n_heads, n, conc, seed=0, causal=False) -> Attention:
    rng = np.random.default_rng(seed)
    maps = rng.dirichlet(np.full(n, conc), size=(n_layers, n_heads, n))
    if causal:
        maps = maps * np.tril(np.ones((n, n)))
        maps /= maps.sum(-1, keepdims=True)
    roles = ["cls"] + ["word"] * (n - 2) + ["sep"]
    tokens = ["[CLS]"] + [f"w{i}" for i in range(1, n - 1)] + ["[SEP]"]
    return make_att(maps, tokens, roles, causal=causal)
