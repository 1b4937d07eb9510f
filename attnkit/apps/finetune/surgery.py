"""Model surgery for fine-tuning: a classifier holding a copy of a model's encoder, and
freezing its lowest layers. The pre-trained model is never modified."""

from __future__ import annotations

import copy
from typing import Any

from ...errors import InputError


def classifier_copy(model: Any, label_names: tuple[str, ...], attn_implementation: str = "sdpa") -> Any:
    """A new ``AutoModelForSequenceClassification`` holding a copy of ``model``'s encoder.

    A model that already is a classifier with as many labels is deep-copied whole.
    Otherwise the head (and a pooler the encoder lacks) starts from the config's random
    initialisation; the encoder weights are copied exactly (checked).

    Parameters
    ----------
    model : Model
        The :class:`attnkit.Model` whose encoder is copied (not modified).
    label_names : tuple of str
        The classes; their number sizes the head.
    attn_implementation : str
        The attention kernel to train with (falls back to ``"eager"`` where the model has
        no other).

    Returns
    -------
    transformers.PreTrainedModel
        The classifier, in training mode.

    Raises
    ------
    InputError
        When transformers has no classification head for the model type, or the encoder
        does not fit the classifier built from its config.

    Examples
    --------
    >>> from attnkit.apps.finetune import classifier_copy
    >>> from attnkit.testing import tiny_model
    >>> clf = classifier_copy(tiny_model("bert"), ("no", "yes"))
    >>> type(clf).__name__, clf.config.id2label
    ('BertForSequenceClassification', {0: 'no', 1: 'yes'})
    """
    import transformers as tf

    n = len(label_names)
    hf = model.hf
    id2label = {k: name for k, name in enumerate(label_names)}
    if "SequenceClassification" in type(hf).__name__ and hf.config.num_labels == n:
        clf = copy.deepcopy(hf)
        clf.config.id2label, clf.config.label2id = id2label, {v: k for k, v in id2label.items()}
    else:
        config = copy.deepcopy(model.config)
        config.num_labels = n
        config.id2label, config.label2id = id2label, {v: k for k, v in id2label.items()}
        config.architectures = None
        if getattr(config, "pad_token_id", None) is None:
            config.pad_token_id = model.pad_id  # decoder classifiers find the last token by it
        try:
            clf = tf.AutoModelForSequenceClassification.from_config(
                config, attn_implementation=attn_implementation)
        except (ValueError, ImportError):
            clf = tf.AutoModelForSequenceClassification.from_config(config, attn_implementation="eager")
        except KeyError as exc:
            raise InputError(
                f"transformers has no sequence-classification head for model type "
                f"{config.model_type!r}; fine-tune a model that has one (BERT, RoBERTa, GPT-2...)."
            ) from exc
        missing, unexpected = clf.base_model.load_state_dict(model.base.state_dict(), strict=False)
        # BERT-style classifiers add a pooler when the encoder has none; RoBERTa-style
        # ones have their own head and drop the encoder's pooler.
        missing = [k for k in missing if not k.startswith("pooler.")]
        unexpected = [k for k in unexpected if not k.startswith("pooler.")]
        if missing or unexpected:
            raise InputError(
                f"The encoder of {model.name} does not fit the classifier built from its config "
                f"(missing {missing[:3]}, unexpected {list(unexpected)[:3]})."
            )
    if hasattr(clf, "set_attn_implementation"):
        try:
            clf.set_attn_implementation(attn_implementation)
        except (ValueError, ImportError):
            pass
    return clf


def freeze(clf: Any, n_layers: int) -> None:
    """Stop gradients into the embeddings and the first ``n_layers - 1`` layers.

    Parameters
    ----------
    clf : transformers model
        The classifier (changed in place).
    n_layers : int
        0 trains everything; 1 freezes the embeddings only; k freezes the embeddings and
        the first k - 1 layers.

    Raises
    ------
    InputError
        When the model has fewer layers, or its layer list cannot be found.

    Examples
    --------
    >>> from attnkit.apps.finetune.surgery import classifier_copy, freeze
    >>> from attnkit.testing import tiny_model
    >>> clf = classifier_copy(tiny_model("bert"), ("no", "yes"))
    >>> freeze(clf, 2)  # the embeddings and layer 0
    >>> frozen = [n for n, p in clf.named_parameters() if not p.requires_grad]
    >>> sorted({".".join(n.split(".")[1:4]) for n in frozen if "layer" in n})
    ['encoder.layer.0']
    >>> any("embeddings" in n for n in frozen), any("layer.1" in n for n in frozen)
    (True, False)
    """
    if n_layers <= 0:
        return
    base = clf.base_model
    emb = base.get_input_embeddings()
    embeddings = getattr(base, "embeddings", None)
    frozen = [embeddings if embeddings is not None else emb]
    layers = layer_list(base)
    if n_layers - 1 > len(layers):
        raise InputError(f"freeze_layers={n_layers} but the model has {len(layers)} layers "
                         f"(at most {len(layers) + 1}: the embeddings plus every layer).")
    frozen.extend(layers[: n_layers - 1])
    for module in frozen:
        for p in module.parameters():
            p.requires_grad_(False)


def layer_list(base: Any) -> list:
    """The transformer layers of a bare model (BERT, GPT-2, Llama-style layouts).

    Parameters
    ----------
    base : transformers model
        The bare model (``model.base_model``).

    Returns
    -------
    list
        Its layer modules, bottom first.

    Raises
    ------
    InputError
        When no layer list is found.

    Examples
    --------
    >>> from attnkit.apps.finetune.surgery import layer_list
    >>> from attnkit.testing import tiny_model
    >>> len(layer_list(tiny_model("gpt2").base))
    2
    """
    for path in ("encoder.layer", "h", "layers", "layer"):
        obj = base
        for part in path.split("."):
            obj = getattr(obj, part, None)
            if obj is None:
                break
        if obj is not None:
            return list(obj)
    raise InputError(f"Cannot find the layer list of {type(base).__name__} to freeze layers.")
