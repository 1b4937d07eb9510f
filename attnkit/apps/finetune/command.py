"""The ``attnkit finetune`` command (also ``python -m attnkit.apps.finetune``): fine-tune a
classifier on a GLUE task and print the result summary as JSON."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from ...errors import AttnkitError


def run(args: argparse.Namespace) -> int:
    """Fine-tune on a GLUE task; print the result summary as JSON on stdout."""
    import json
    import os

    import torch

    from ...data.pairs import read_glue
    from .save import json_default
    from .train import finetune

    if args.threads:
        torch.set_num_threads(args.threads)
    load_before = os.getloadavg()
    train = read_glue(args.task, args.train_split)
    if args.holdout:
        train, dev = train.split_off(fraction=args.holdout, seed=0)  # the same hold-out for every recipe
    else:
        dev = read_glue(args.task, args.dev_split)
    res = finetune(args.model, train, evaluate_on=dev, epochs=args.epochs, max_items=args.max_items,
                   lr=args.lr, max_length=args.max_length, batch_size=args.batch_size,
                   out=args.out, seed=args.seed, freeze_layers=args.freeze_layers,
                   weight_decay=args.weight_decay, warmup=args.warmup,
                   eval_each_epoch=args.eval_each_epoch, overwrite=args.overwrite,
                   checkpoint_every=args.checkpoint_every, checkpoint_dir=args.checkpoint_dir,
                   progress=not args.no_progress)
    summary = res.summary()
    summary["eval_split"] = (f"holdout {args.holdout} of {args.train_split}" if args.holdout
                             else args.dev_split)
    summary["load_average"] = {"before": load_before, "after": os.getloadavg(),
                               "cpus": os.cpu_count()}
    print(json.dumps(summary, indent=1, default=json_default))
    return 0


def add_parser(sub: Any) -> None:
    """Add the ``finetune`` sub-command to an argparse ``add_subparsers()`` object."""
    f = sub.add_parser(
        "finetune",
        help="fine-tune a copy of a model with a classification head on a GLUE task",
        description="Fine-tune a copy of a model with a sequence-classification head on a GLUE "
        "task, score it on dev next to the majority class, and save it as a folder attnkit.load "
        "opens. Prints the result summary as JSON.",
    )
    f.add_argument("--model", default="minilm", help="model name or folder (default: minilm)")
    f.add_argument("--task", default="MRPC", help="GLUE task folder name under glue/ (default MRPC)")
    f.add_argument("--train-split", default="train")
    f.add_argument("--dev-split", default="dev")
    f.add_argument("--holdout", type=float, default=0.0,
                   help="evaluate on this stratified fraction held out of the train split instead "
                   "of the dev split (for choosing a recipe without looking at dev)")
    f.add_argument("--epochs", type=float, default=3)
    f.add_argument("--max-items", type=int, default=None)
    f.add_argument("--lr", type=float, default=5e-5)
    f.add_argument("--max-length", type=int, default=None, help="token cap (default 128)")
    f.add_argument("--batch-size", type=int, default=16)
    f.add_argument("--freeze-layers", type=int, default=0)
    f.add_argument("--warmup", type=float, default=0.1)
    f.add_argument("--weight-decay", type=float, default=0.01)
    f.add_argument("--seed", type=int, default=0)
    f.add_argument("--eval-each-epoch", action="store_true")
    f.add_argument("--threads", type=int, default=None,
                   help="torch.set_num_threads (default: torch's)")
    f.add_argument("--out", default=None, help="folder to save the fine-tuned model into")
    f.add_argument("--overwrite", action="store_true")
    f.add_argument("--checkpoint-every", type=int, default=None,
                   help="also write a checkpoint-<step> folder every this many steps "
                   "(read them with attnkit.checkpoints); needs --checkpoint-dir")
    f.add_argument("--checkpoint-dir", default=None,
                   help="a new or empty folder for the checkpoints")
    f.add_argument("--no-progress", action="store_true")
    f.set_defaults(func=run)


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``attnkit finetune`` with ``argv`` (the arguments after ``finetune``)."""
    parser = argparse.ArgumentParser(prog="attnkit")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["finetune", *(sys.argv[1:] if argv is None else argv)])
    try:
        return args.func(args)
    except AttnkitError as exc:
        print(f"attnkit: error: {exc}", file=sys.stderr, flush=True)
        return 2
