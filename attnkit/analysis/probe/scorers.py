"""The probe's scorers: torch modules giving each word's logits over ROOT and every candidate
head, one per kind (:data:`KINDS`)."""

from __future__ import annotations

from typing import Any

#: The probes: Attn-Only, Attn + embeddings, and the distances + embeddings baseline.
KINDS = ("attn", "attn+emb", "dist+emb")


def scorer(kind: str, n_maps: int, dim: int, hidden: int, max_distance: int,
           dropout: float = 0.0) -> Any:
    """A fresh scorer of ``kind`` over ``n_maps`` attention maps and ``dim``-dimensional word
    embeddings (``hidden``, ``max_distance``: the ``"dist+emb"`` MLP and its distance clip;
    ``dropout`` on the embeddings while training)."""
    import torch
    from torch import nn

    class Scorer(nn.Module):
        """Logits ``[B, M (dependent), 1 + M (ROOT, candidates)]`` from maps ``A [B, M, M, K]``
        (float16, ``A[b, j, i]`` = attention from j to i), ``R [B, M, 4K]`` and embeddings
        ``V [B, M, d]``."""

        def __init__(self):
            super().__init__()
            F = 2 * n_maps
            if kind == "attn":
                self.w = nn.Parameter(torch.zeros(F))
                self.w_root = nn.Parameter(torch.zeros(2 * F))
            elif kind == "attn+emb":
                self.head_w = nn.Linear(dim, F)
                self.dep_w = nn.Linear(dim, F, bias=False)
                self.root_w = nn.Linear(dim, 2 * F)
                for lin in (self.head_w, self.dep_w, self.root_w):
                    nn.init.normal_(lin.weight, std=0.01)
                    if lin.bias is not None:
                        nn.init.zeros_(lin.bias)
            else:
                self.head_h = nn.Linear(dim, hidden)
                self.dep_h = nn.Linear(dim, hidden, bias=False)
                self.dist = nn.Embedding(2 * max_distance + 1, hidden)
                self.root_h = nn.Linear(dim, hidden)
                self.out = nn.Linear(hidden, 1)
                self.root_out = nn.Linear(hidden, 1)
            self.root_bias = nn.Parameter(torch.zeros(1))
            self.drop = nn.Dropout(dropout)

        def forward(self, A, R, V):
            V = self.drop(V.float()) if V is not None else None
            if kind == "dist+emb":
                M = V.shape[1]
                idx = torch.arange(M)
                d = (idx[None, :] - idx[:, None]).clamp(-max_distance, max_distance) + max_distance
                h = torch.relu(self.head_h(V)[:, None, :, :] + self.dep_h(V)[:, :, None, :]
                               + self.dist(d)[None])  # [B, j, i, hidden]
                pair = self.out(h).squeeze(-1)
                root = self.root_out(torch.relu(self.root_h(V))).squeeze(-1)
            else:
                B, M = A.shape[:2]
                At = A.transpose(1, 2)
                # x[b, j, i, f]: first K features α(j→i), last K α(i→j)
                x = torch.cat([A, At], dim=-1).float()
                if kind == "attn":
                    pair = x @ self.w
                    root = R @ self.w_root
                else:
                    # Σ_f x[b,j,i,f] (P[b,i,f] + Q[b,j,f]) as two batched mat-vec products:
                    # the dependent's term batches over (b, j) on x, the candidate's over
                    # (b, i) on xs[b, i, j] = x[b, j, i] (the two halves swapped).
                    F = x.shape[-1]
                    P = self.head_w(V)
                    Q = self.dep_w(V)
                    dep = torch.bmm(x.reshape(B * M, M, F), Q.reshape(B * M, F, 1))
                    xs = torch.cat([At, A], dim=-1).float()
                    cand = torch.bmm(xs.reshape(B * M, M, F), P.reshape(B * M, F, 1))
                    pair = dep.view(B, M, M) + cand.view(B, M, M).transpose(1, 2)
                    root = (R * self.root_w(V)).sum(-1)
            return torch.cat([(root + self.root_bias)[..., None], pair], dim=-1)

    return Scorer()


def masked_logits(logits: Any, valid: Any) -> Any:
    """``logits`` with padding candidates and each word itself made impossible (-1e9)."""
    import torch

    B, M, _ = logits.shape
    bad = ~valid[:, None, :] | torch.eye(M, dtype=torch.bool)[None]
    bad = torch.cat([torch.zeros(B, M, 1, dtype=torch.bool), bad], dim=-1)
    return logits.masked_fill(bad, -1e9)
