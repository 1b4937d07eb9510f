"""Cross-attention capture at a long source vs the model's own SDPA forward, on CPU.

    .venv/bin/python benchmarks/seq2seq.py [--source 2048] [--target 256] [--reps 3]

A random-init BART-shaped encoder–decoder (6 + 6 layers, 8 heads, d_model 512, FFN 2048,
seed 0), one torch thread, on the CPU; the source and the target are random token ids.
Side by side in one process, alternating in ``--reps`` rounds after one untimed warm-up of
each:

- ``sdpa``: the bare model's forward with transformers' SDPA attention
  (``attn_implementation="sdpa"``), nothing recorded (the reference);
- ``cross``: ``model.attend(source, target, lazy=True)``: the encoder keeps queries, keys and
  row log-sum-exps (lazy), the decoder self-attention and the cross-attention
  ``[layer, head, target, source]`` are recorded dense;
- ``dense``: ``model.attend(source, target, lazy=False)``: all three dense
  (the encoder's maps alone are ``6 x 8 x source^2`` float32).

Times are medians of wall-clock seconds; the ratio is to ``sdpa``. Writes
``docs/benchmarks/seq2seq.json`` with ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", type=int, default=2048)
    ap.add_argument("--target", type=int, default=256)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()

    import numpy as np
    import torch
    import transformers as tf

    torch.set_num_threads(1)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from attnkit.runtime.seq2seq import Seq2SeqModel
    from attnkit.testing import roberta_tokenizer

    torch.manual_seed(0)
    tok = roberta_tokenizer()
    n_pos = max(args.source, args.target) + 2
    tok.model_max_length = n_pos
    cfg = tf.BartConfig(vocab_size=len(tok), d_model=512, encoder_layers=6, decoder_layers=6,
                        encoder_attention_heads=8, decoder_attention_heads=8,
                        encoder_ffn_dim=2048, decoder_ffn_dim=2048,
                        max_position_embeddings=n_pos, pad_token_id=1, bos_token_id=0,
                        eos_token_id=2, decoder_start_token_id=2, attn_implementation="sdpa")
    hf = tf.BartForConditionalGeneration(cfg).eval()
    rng = np.random.default_rng(0)
    src = [0, *rng.integers(5, len(tok), args.source - 2).tolist(), 2]
    tgt = [2, 0, *rng.integers(5, len(tok), args.target - 2).tolist()]
    sdpa = tf.BartModel(cfg).eval()
    sdpa.load_state_dict(hf.model.state_dict())
    sdpa.set_attn_implementation("sdpa")
    model = Seq2SeqModel(hf, tok, name="bart-6x6")

    def run_sdpa():
        with torch.inference_mode():
            sdpa(input_ids=torch.tensor([src]), decoder_input_ids=torch.tensor([tgt]),
                 use_cache=False)

    def run_cross():
        out = model.attend(src, tgt, lazy=True)
        assert out.cross.shape == (6, 8, args.target, args.source)

    def run_dense():
        model.attend(src, tgt, lazy=False)

    runs = {"sdpa": run_sdpa, "cross": run_cross, "dense": run_dense}
    times: dict[str, list[float]] = {k: [] for k in runs}
    for fn in runs.values():
        fn()  # warm-up
    for _ in range(args.reps):
        for name, fn in runs.items():
            t = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t)
    med = {k: statistics.median(v) for k, v in times.items()}
    result = {"source": args.source, "target": args.target, "reps": args.reps,
              "threads": 1, "machine": platform.machine(), "cpus": os.cpu_count(),
              "seconds": med, "ratio_to_sdpa": {k: med[k] / med["sdpa"] for k in med}}
    print(json.dumps(result, indent=2))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
