"""A small, honest fine-tuning loop: a pre-trained encoder plus a classification head.

``finetune(model, train, evaluate_on=dev, out=folder)`` trains a *copy* of an :class:`attnkit.Model`
with a sequence-classification head (``AutoModelForSequenceClassification`` built from the
model's config, its encoder weights copied in), reports dev accuracy and F1 next to the
majority-class baseline, and saves a folder (safetensors weights, config, tokenizer and a
``finetune.json`` with the recipe and the numbers) that :func:`attnkit.load` opens as a
classifier. The pre-trained model is never modified.

The folder appears only when everything is written: files go to a hidden
``.<name>.partial-<pid>`` folder next to ``out`` that is renamed at the end, and removed if
the run is interrupted (``KeyboardInterrupt``) or fails.

Modules: :mod:`.data` (tokenized batches), :mod:`.surgery` (the classifier copy, frozen
layers), :mod:`.train` (the loop, scores, :class:`FinetuneResult`), :mod:`.save` (the atomic
folder). Run from a shell with ``attnkit finetune --help``; the recipe measured on MRPC is in
``docs/results.md`` ("Fine-tuning recipe").
"""

from .save import INFO_FILE
from .surgery import classifier_copy
from .train import FinetuneResult, finetune, predict, scores

__all__ = ["INFO_FILE", "FinetuneResult", "classifier_copy", "finetune", "predict", "scores"]
