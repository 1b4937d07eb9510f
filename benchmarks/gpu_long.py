"""Lazy capture at LLM scale on a GPU: Llama-3.2-1B's shape at 32k tokens, bfloat16.

    .venv/bin/python benchmarks/gpu_long.py            # on a machine with a CUDA GPU
    .venv/bin/python benchmarks/gpu_long.py --tiny     # CPU smoke test (CI), seconds

A random-init decoder with Llama-3.2-1B's shape (16 layers, 32 heads, 8 key/value heads,
hidden 2048, MLP 8192, vocabulary 128,256), in bfloat16, reads one input of 32,768 random
tokens. Side by side in one process (interleaved, medians of ``--reps``): the bare SDPA
forward of the transformer, and ``attnkit`` lazy capture of the same input (queries, keys and
row log-sum-exps of every layer kept on the GPU). Checks, printed as one JSON object (exit
status 1 when one fails):

- lazy capture fits in GPU memory and its time is at most ``--max-ratio`` (2.0) times the bare
  forward's;
- the capture does not change the forward: last hidden states equal the bare forward's;
- maps are exact: the last 64 rows of three heads sum to 1 (bfloat16 tolerance), and a
  256 x 256 block of the last layer equals the softmax of the recorded queries and keys
  recomputed directly in float32 (full rows, causal mask) — the row log-sum-exps the fused
  kernel returned are the right ones.

``--tiny`` runs the same code on the CPU at a toy size (2 layers, 4 heads, 256 tokens,
float32), which is what CI runs.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

FULL = {"layers": 16, "heads": 32, "kv_heads": 8, "hidden": 2048, "mlp": 8192, "vocab": 128256, "n": 32768,
            "dtype": "bfloat16", "device": "cuda"}
TINY = {"layers": 2, "heads": 4, "kv_heads": 2, "hidden": 64, "mlp": 128, "vocab": 512, "n": 256,
            "dtype": "float32", "device": "cpu"}


def build(shape: dict):
    import torch
    import transformers as tf

    from attnkit.runtime.model import Model
    from attnkit.testing import gpt2_tokenizer

    torch.manual_seed(0)
    cfg = tf.LlamaConfig(vocab_size=shape["vocab"], hidden_size=shape["hidden"],
                         intermediate_size=shape["mlp"], num_hidden_layers=shape["layers"],
                         num_attention_heads=shape["heads"], num_key_value_heads=shape["kv_heads"],
                         max_position_embeddings=shape["n"] + 8, attn_implementation="eager")
    dtype = getattr(torch, shape["dtype"])
    with torch.device(shape["device"]):
        hf = tf.LlamaModel(cfg).to(dtype)
    tok = gpt2_tokenizer()
    tok.model_max_length = shape["n"] + 8
    return Model(hf, tok, name="llama-3.2-1b-shaped")


def encoding(model, n: int, vocab: int):
    """One input of ``n`` random token ids (seed 0), as an attnkit Encoding."""
    import numpy as np

    from attnkit.runtime.model import Encoding

    ids = np.random.default_rng(0).integers(0, vocab, size=n).tolist()
    return Encoding(input_ids=ids, tokens=[f"t{i}" for i in ids], roles=["word"] * n,
                    word_ids=list(range(n)), segments=[0] * n, words=[f"t{i}" for i in ids])


def main(argv: list[str] | None = None) -> dict:
    import torch

    from attnkit.runtime.capture import LazyRecorder, recording
    from attnkit.runtime.lazy import LazyAttention

    ap = argparse.ArgumentParser()
    ap.add_argument("--tiny", action="store_true", help="CPU smoke test at a toy size")
    ap.add_argument("--n", type=int, default=None, help="tokens (default 32768; tiny 256)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--max-ratio", type=float, default=2.0)
    args = ap.parse_args(argv)
    shape = dict(TINY if args.tiny else FULL)
    if args.n:
        shape["n"] = args.n
    if shape["device"] == "cuda" and not torch.cuda.is_available():
        raise SystemExit("no CUDA GPU here; run with --tiny for the CPU smoke test")
    cuda = shape["device"] == "cuda"
    if not cuda:
        torch.set_num_threads(1)  # a shared CPU: threads waiting on each other only add noise

    def sync():
        if cuda:
            torch.cuda.synchronize()

    def peak_reset():
        if cuda:
            torch.cuda.reset_peak_memory_stats()

    def peak_gb():
        return torch.cuda.max_memory_allocated() / 2**30 if cuda else float("nan")

    model = build(shape)
    enc = encoding(model, shape["n"], shape["vocab"])
    batch = model.to_device(model.pad([enc]))
    weights_gb = torch.cuda.memory_allocated() / 2**30 if cuda else float("nan")

    def bare():
        model.hf.set_attn_implementation("sdpa")
        with torch.inference_mode():
            h = model.base(**batch, use_cache=False).last_hidden_state
        sync()
        model.hf.set_attn_implementation("attnkit")
        return h

    def lazy():
        rec = LazyRecorder(len(enc), shape["layers"])
        with torch.inference_mode(), recording([rec]):
            h = model.base(**batch, use_cache=False).last_hidden_state
        sync()
        return h, LazyAttention(rec.layers, tokens=enc.tokens, roles=enc.roles,
                                word_ids=enc.word_ids, words=enc.words, causal=True)

    bare()  # warm-up (kernels, allocator)
    t_bare, t_lazy, peak_bare, peak_lazy = [], [], 0.0, 0.0
    h_bare = h_lazy = att = None
    for _ in range(args.reps):
        del h_bare, h_lazy, att
        h_bare = h_lazy = att = None
        peak_reset()
        t = time.perf_counter()
        h_bare = bare()
        t_bare.append(time.perf_counter() - t)
        peak_bare = max(peak_bare, peak_gb())
        peak_reset()
        t = time.perf_counter()
        h_lazy, att = lazy()
        t_lazy.append(time.perf_counter() - t)
        peak_lazy = max(peak_lazy, peak_gb())
    same_forward = float((h_bare.float() - h_lazy.float()).abs().max())

    # exactness: rows of whole maps, a block against a float32 recomputation, eager layer 0
    n = len(att)
    row_err = max(float(abs(att.block(layer, head, slice(n - 64, n), slice(None)).sum(-1) - 1).max())
                  for layer, head in [(0, 0), (shape["layers"] // 2, 5 % shape["heads"]),
                                      (shape["layers"] - 1, shape["heads"] - 1)])
    qk = att._layers[shape["layers"] - 1]
    r0 = n // 2
    rows, cols = slice(r0, r0 + 256), slice(r0 - 128, r0 + 128)
    head = 3 % shape["heads"]
    kv = head // (shape["heads"] // shape["kv_heads"])
    with torch.inference_mode():
        q = qk.query[head, : r0 + 256].float()
        k = qk.key[kv, : r0 + 256].float()
        s = (q[rows] @ k.T) * qk.scaling
        s = s.masked_fill(torch.ones_like(s, dtype=torch.bool).triu(r0 + 1), float("-inf"))
        want = torch.softmax(s, -1)[:, cols].cpu().numpy()
    block_err = float(abs(att.block(shape["layers"] - 1, head, rows, cols) - want).max())
    t = time.perf_counter()
    att.block(shape["layers"] - 1, head, rows, cols)
    block_ms = 1000 * (time.perf_counter() - t)

    result = {
        "shape": shape, "torch": torch.__version__,
        "device": torch.cuda.get_device_name() if cuda else "cpu",
        "weights_gb": weights_gb, "bare_s": statistics.median(t_bare),
        "lazy_s": statistics.median(t_lazy), "bare_times": t_bare, "lazy_times": t_lazy,
        "peak_bare_gb": peak_bare, "peak_lazy_gb": peak_lazy, "kept_gb": att.nbytes / 2**30,
        "same_forward_max_diff": same_forward, "row_sum_max_err": row_err,
        "block_max_err_vs_float32": block_err, "block_ms": block_ms,
    }
    result["ratio"] = result["lazy_s"] / result["bare_s"]
    tol = 2e-2 if shape["dtype"] != "float32" else 1e-4
    result["checks"] = {
        "time_ratio": result["ratio"] <= args.max_ratio,
        "same_forward": same_forward <= (1e-2 if shape["dtype"] != "float32" else 1e-5),
        "rows_sum_to_one": row_err <= tol,
        "block_exact": block_err <= tol,
    }
    print(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    res = main()
    sys.exit(0 if all(res["checks"].values()) else 1)
