"""Vision transformers (ViT, DeiT, CLIP's vision tower): attention over image patches.

:func:`attnkit.load` returns a :class:`VisionModel` for a folder whose config is one of
:data:`SUPPORTED`. ``model.attend(image)`` preprocesses the image with the model's own image
processor (``preprocessor_config.json`` in the folder) and returns an
:class:`~attnkit.Attention` whose positions are the class token ``[CLS]``, DeiT's distillation
token ``[DIST]`` (role ``"special"``) and one position per patch (role ``"word"``, labelled
``"r,c"``: row and column of the patch in the grid). ``meta`` holds the grid
(``meta["grid"] = [rows, cols]``, ``meta["first_patch"]``, ``meta["patch_size"]``) and the
preprocessed image as uint8 ``[H, W, 3]`` (``meta["image"]``) for overlays;
:func:`patch_grid` gives every position's grid cell.

Capture is the one every model uses (:mod:`attnkit.runtime.capture`): exact eager probabilities from a
fast forward; lazy capture and the measures of :mod:`attnkit.runtime.measures` apply where their
architecture is known. Rollout and flow (:mod:`attnkit.flow`) read the result like any other;
:func:`gradient_rollout` is the gradient-weighted rollout of Chefer et al. (2021).

Swin and other models with windowed attention are refused: their attention is a set of
``window x window`` maps over shifted windows, not one map over the image.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from .encoding import Encoding
from ..core import validate
from ..errors import DataNotFoundError, InputError, ModelNotFoundError, UnsupportedModelError
from .archs import arch_of, families, submodule
from .model import Model

#: Vision families attnkit reads, exact against eager attention (``model_type`` values; their
#: records in :data:`attnkit.runtime.archs.ARCHS`).
SUPPORTED = families("vision")
#: Vision families it recognises and refuses (windowed or pooled attention).
REFUSED = families("vision", refused=True)
#: Image modes converted to RGB before preprocessing; others are refused.
IMAGE_MODES = ("RGB", "RGBA", "L", "LA", "P", "CMYK", "YCbCr")


def _vision_config(config: Any) -> Any:
    return getattr(config, "vision_config", None) or config


def load_image(image: Any) -> Any:
    """An RGB ``PIL.Image`` from a path, a PIL image or a uint8/float array.

    Parameters
    ----------
    image : str, Path, PIL.Image.Image or ndarray
        A path to an image file; a PIL image of one of :data:`IMAGE_MODES`; or an array
        ``[H, W]`` or ``[H, W, 3 | 4]`` (uint8, or floats in ``[0, 1]``).

    Returns
    -------
    PIL.Image.Image
        RGB.

    Raises
    ------
    DataNotFoundError
        For a path that does not exist.
    InputError
        For a file that is not an image, an image of size zero, an unsupported mode, or
        another type.

    Examples
    --------
    >>> import numpy as np
    >>> from attnkit.runtime.vision import load_image
    >>> load_image(np.zeros((8, 6), dtype=np.uint8)).size, load_image(np.zeros((8, 6))).mode
    ((6, 8), 'RGB')
    """
    from PIL import Image, UnidentifiedImageError

    if isinstance(image, (str, Path)):
        path = Path(image).expanduser()
        if not path.is_file():
            raise DataNotFoundError(f"No image file at {str(image)!r}; give the path of a PNG "
                                    "or JPEG file, a PIL image or an array.")
        try:
            with Image.open(path) as opened:
                opened.load()
                image = opened.copy()
        except (UnidentifiedImageError, OSError) as exc:
            raise InputError(f"{path.name} is not an image PIL can read ({exc}); give a PNG "
                             "or JPEG file.") from exc
    elif isinstance(image, np.ndarray) or type(image).__module__.startswith("torch"):
        arr = np.asarray(image.detach().cpu() if hasattr(image, "detach") else image)
        if arr.ndim not in (2, 3) or (arr.ndim == 3 and arr.shape[2] not in (1, 3, 4)):
            raise InputError(f"An image array must be [H, W] or [H, W, 3 or 4]; got shape "
                             f"{arr.shape}.")
        if arr.size == 0:
            raise InputError(f"The image is empty (shape {arr.shape}).")
        if arr.dtype.kind == "f":
            if not np.isfinite(arr).all():
                raise InputError("The image array holds NaN or infinite values.")
            lo, hi = float(arr.min()), float(arr.max())
            if lo < -1e-6 or hi > 1.0 + 1e-6:  # clipping would lose the picture: never silently
                raise InputError(
                    f"A float image array must hold values in [0, 1]; this one spans "
                    f"{lo:.4g}..{hi:.4g}. For 0-255 values pass arr.astype(np.uint8) (or arr / 255)."
                )
            arr = (np.clip(arr, 0.0, 1.0) * 255).round().astype(np.uint8)
        elif arr.dtype != np.uint8:
            raise InputError(f"An image array must be uint8 or floats in [0, 1]; got {arr.dtype}.")
        if arr.ndim == 3 and arr.shape[2] == 1:
            arr = arr[..., 0]
        image = Image.fromarray(arr)
    elif not isinstance(image, Image.Image):
        raise InputError(f"Cannot read a {type(image).__name__} as an image: give a path, a PIL "
                         "image or an array [H, W, 3].")
    if image.width == 0 or image.height == 0:
        raise InputError(f"The image has size zero ({image.width} x {image.height}).")
    if image.mode not in IMAGE_MODES:
        raise InputError(f"Images of mode {image.mode!r} are not supported; give one of "
                         f"{', '.join(IMAGE_MODES)} (e.g. image.convert('RGB')).")
    return image.convert("RGB") if image.mode != "RGB" else image


class VisionModel(Model):
    """A vision transformer wrapped for attention analysis: patches are its tokens.

    :func:`attnkit.load` builds one for a folder of a :data:`SUPPORTED` family; or wrap an
    in-memory model: ``VisionModel(hf_model, image_processor)``.

    Parameters
    ----------
    hf_model : transformers.PreTrainedModel
        ViT, DeiT (with or without a head), ``CLIPVisionModel`` or ``CLIPModel`` (its vision
        tower is read).
    processor : transformers image processor
        The model's own (resizing, normalisation).
    name, path : str
        For labels and provenance.
    capture : str
        As for :class:`~attnkit.Model`.

    Raises
    ------
    UnsupportedModelError
        For a family outside :data:`SUPPORTED` (Swin's windowed attention among them).
    InputError
        When the processor is not an image processor.

    Examples
    --------
    >>> from attnkit.testing import tiny_vision
    >>> tiny_vision("deit")
    VisionModel('tiny-deit', 2 layers x 2 heads, 16 patches + [CLS] [DIST])
    """

    family = "vision"

    def __init__(self, hf_model: Any, processor: Any, *, name: str = "", path: str = "",
                 capture: str = "auto") -> None:
        config = hf_model.config
        check_family(config, name or type(hf_model).__name__)
        if not hasattr(processor, "preprocess") and not callable(processor):
            raise InputError(f"{type(processor).__name__} is not an image processor; give the "
                             "model's own (transformers.AutoImageProcessor.from_pretrained).")
        self._setup(hf_model, None, name=name, path=path, capture=capture)
        vcfg = _vision_config(config)
        self.processor = processor
        self.n_layers = int(vcfg.num_hidden_layers)
        self.n_heads = int(vcfg.num_attention_heads)
        self.causal = False
        self.sinks = False
        self.patch_size = int(vcfg.patch_size)
        self.image_size = int(vcfg.image_size)
        self.specials = list(arch_of(self).specials)
        side = self.image_size // self.patch_size
        self.max_length = side * side + len(self.specials)
        self.cls_token, self.sep_token, self.pad_id = "[CLS]", None, 0
        self._accepts_type_ids = False
        self._forward_options = {}

    def __repr__(self) -> str:
        side = self.image_size // self.patch_size
        return (f"VisionModel({self.name!r}, {self.n_layers} layers x {self.n_heads} heads, "
                f"{side * side} patches + {' '.join(self.specials)})")

    # ------------------------------------------------------------ family hooks
    @staticmethod
    def reads(config: Any) -> bool:
        """True for the configs of vision families (supported or refused, :data:`REFUSED`).

        Parameters
        ----------
        config : transformers.PretrainedConfig
            Any config.

        Returns
        -------
        bool

        Examples
        --------
        >>> from attnkit.runtime.vision import VisionModel
        >>> from attnkit.testing import tiny_vision, tiny_model
        >>> VisionModel.reads(tiny_vision("vit").config), VisionModel.reads(tiny_model().config)
        (True, False)
        """
        return getattr(config, "model_type", "") in SUPPORTED + REFUSED

    @staticmethod
    def preprocessor(path: Any, *, local_files_only: bool = True,
                     trust_remote_code: bool = False) -> Any:
        """The image processor of a model folder (``preprocessor_config.json``).

        Parameters
        ----------
        path : str or Path
            A model folder or a cached hub id.
        local_files_only, trust_remote_code : bool
            Passed to transformers.

        Returns
        -------
        transformers image processor

        Raises
        ------
        ModelNotFoundError
            When the folder has no image processor.

        Examples
        --------
        >>> import tempfile
        >>> from attnkit.runtime.vision import VisionModel
        >>> from attnkit.testing import tiny_vision
        >>> with tempfile.TemporaryDirectory() as folder:
        ...     _ = tiny_vision("vit").processor.save_pretrained(folder)
        ...     type(VisionModel.preprocessor(folder)).__name__.startswith("ViTImageProcessor")
        True
        """
        from transformers import AutoImageProcessor

        try:
            return AutoImageProcessor.from_pretrained(path, local_files_only=local_files_only,
                                                      trust_remote_code=trust_remote_code)
        except (OSError, ValueError) as exc:
            raise ModelNotFoundError(
                f"No image processor in {str(path)!r} ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__}): "
                "a vision model folder needs preprocessor_config.json beside config.json and "
                "the weights. Save it with processor.save_pretrained(folder), e.g. "
                "transformers.ViTImageProcessor().save_pretrained(folder)."
            ) from exc

    @staticmethod
    def auto_class(config: Any, task: str = "auto") -> Any:
        """The transformers auto class that loads ``config``: the image classifier where the
        config names one (``"auto"``), else the bare model.

        Parameters
        ----------
        config : transformers.PretrainedConfig
            A vision config.
        task : str
            ``"auto"`` or ``"base"``.

        Returns
        -------
        type

        Raises
        ------
        UnsupportedModelError
            For a refused family (Swin).

        Examples
        --------
        >>> from attnkit.runtime.vision import VisionModel
        >>> from attnkit.testing import tiny_vision
        >>> VisionModel.auto_class(tiny_vision("vit").config).__name__
        'AutoModel'
        """
        import transformers as tf

        check_family(config, getattr(config, "_name_or_path", "") or "This model")
        archs = " ".join(getattr(config, "architectures", None) or [])
        if task == "auto" and "ImageClassification" in archs:
            return tf.AutoModelForImageClassification
        return tf.AutoModel

    # ------------------------------------------------------------ inputs
    @property
    def base(self):
        """The vision transformer whose forward takes ``pixel_values``."""
        tower = arch_of(self).tower
        if tower:
            return submodule(self.hf, tower)
        return getattr(self.hf, "base_model", self.hf)

    def encode(self, item: Any) -> Encoding:
        """Preprocess one image with the model's processor; positions are the special tokens
        then the patches, row by row.

        Parameters
        ----------
        item : str, Path, PIL.Image.Image or ndarray
            The image (:func:`load_image`).

        Returns
        -------
        Encoding
            ``meta["pixel_values"]`` holds the ``[1, 3, H, W]`` tensor; ``meta["grid"]`` the
            patch grid.

        Raises
        ------
        InputError
            For input that is not an image.
        DataNotFoundError
            For a path that does not exist.

        Examples
        --------
        >>> import numpy as np
        >>> from attnkit.testing import tiny_vision
        >>> enc = tiny_vision("deit").encode(np.zeros((32, 32, 3), dtype=np.uint8))
        >>> enc.tokens[:3], enc.roles[:3], enc.meta["grid"]
        (['[CLS]', '[DIST]', '0,0'], ['cls', 'special', 'word'], [4, 4])
        """
        image = load_image(item)
        try:
            pixels = self.processor(images=image, return_tensors="pt")["pixel_values"]
        except (ValueError, TypeError, OSError) as exc:
            raise InputError(f"The model's image processor could not read the image: {exc}") from exc
        h, w = int(pixels.shape[-2]), int(pixels.shape[-1])
        rows, cols = h // self.patch_size, w // self.patch_size
        k = len(self.specials)
        tokens = list(self.specials) + [f"{r},{c}" for r in range(rows) for c in range(cols)]
        roles = ["cls"] + ["special"] * (k - 1) + ["word"] * (rows * cols)
        word_ids = [-1] * k + list(range(rows * cols))
        meta = {"grid": [rows, cols], "first_patch": k, "patch_size": self.patch_size,
                "image": self._display_image(pixels), "pixel_values": pixels}
        return Encoding(list(range(len(tokens))), tokens, roles, word_ids,
                        [-1] * k + [0] * (rows * cols), tokens[k:], None, False, meta)

    def _display_image(self, pixels: Any) -> np.ndarray:
        """The preprocessed image as uint8 ``[H, W, 3]`` (normalisation undone)."""
        arr = pixels[0].float().numpy().transpose(1, 2, 0)
        mean = np.asarray(getattr(self.processor, "image_mean", None) or [0.0] * 3)
        std = np.asarray(getattr(self.processor, "image_std", None) or [1.0] * 3)
        if getattr(self.processor, "do_normalize", True):
            arr = arr * std + mean
        return (np.clip(arr, 0.0, 1.0) * 255).round().astype(np.uint8)

    def encode_ids(self, ids: Any) -> Encoding:
        """Not available: a vision model reads images, not token ids.

        Parameters
        ----------
        ids : sequence of int
            Ignored.

        Returns
        -------
        Encoding
            Never.

        Raises
        ------
        InputError
            Always.

        Examples
        --------
        >>> from attnkit.testing import tiny_vision
        >>> tiny_vision("vit").encode_ids([1, 2])
        Traceback (most recent call last):
        attnkit.errors.InputError: ...
        """
        raise InputError(f"{self.name} is a vision model: give an image (a path, a PIL image "
                         "or an array), not token ids.")

    def pad(self, encodings: Any) -> dict[str, Any]:
        """The batch's ``pixel_values`` ``[B, 3, H, W]`` (images of one size need no padding).

        Parameters
        ----------
        encodings : sequence of Encoding
            Images encoded by :meth:`encode`.

        Returns
        -------
        dict
            ``{"pixel_values": tensor}``.

        Examples
        --------
        >>> import numpy as np
        >>> from attnkit.testing import tiny_vision
        >>> m = tiny_vision("vit")
        >>> tuple(m.pad([m.encode(np.zeros((9, 9, 3), dtype=np.uint8))])["pixel_values"].shape)
        (1, 3, 32, 32)
        """
        import torch

        return {"pixel_values": torch.cat([e.meta["pixel_values"] for e in encodings]).to(self.dtype)}

    def run_embeddings(self, encoding: Encoding) -> np.ndarray:
        """The float32 input embeddings ``[n, d]`` (patch projections, special tokens and
        position embeddings added) of one image.

        Parameters
        ----------
        encoding : Encoding
            One image (:meth:`encode`).

        Returns
        -------
        ndarray
            Float32 ``[n, d]``.

        Examples
        --------
        >>> import numpy as np
        >>> from attnkit.testing import tiny_vision
        >>> m = tiny_vision("vit")
        >>> m.run_embeddings(m.encode(np.zeros((9, 9, 3), dtype=np.uint8))).shape
        (17, 16)
        """
        import torch

        with torch.inference_mode():
            pixels = encoding.meta["pixel_values"].to(self.device, self.dtype)
            tower = getattr(self.base, "vision_model", self.base)
            return tower.embeddings(pixels)[0].float().cpu().numpy()

    def _alignment(self, enc: Encoding) -> dict[str, Any]:
        meta = {k: v for k, v in enc.meta.items() if k != "pixel_values"}
        return dict(tokens=enc.tokens, roles=np.array(enc.roles), word_ids=np.array(enc.word_ids),
                    words=enc.words, segments=np.array(enc.segments), meta=meta,
                    model=self.name, causal=False, input_ids=None)

    def attend(self, item: Any, *, level: str = "token", embeddings: bool = False,
               lazy: bool | None = None, measure: str = "weights") -> Any:
        """Attention of the model on one image.

        Parameters
        ----------
        item : str, Path, PIL.Image.Image or ndarray
            The image (:func:`load_image`).
        level : str
            ``"token"`` (patches and special tokens; ``"word"`` is the same for images).
        embeddings : bool
            Also keep the input embeddings ``[n, d]``.
        lazy : bool, optional
            As for :meth:`attnkit.Model.attend`.
        measure : str
            What the maps hold (:mod:`attnkit.runtime.measures`): ``"weights"``, ``"norm"``,
            ``"norm+residual"`` or ``"alti"`` (``"grad×attn"`` is refused: see
            :func:`gradient_rollout`).

        Returns
        -------
        Attention or LazyAttention
            ``[layer, head, n, n]`` over ``[CLS]`` (``[DIST]``) and the patches;
            ``meta["grid"]`` and ``meta["image"]`` as in the module docstring.

        Raises
        ------
        InputError
            For input that is not an image.
        UnsupportedModelError
            For ``measure="grad×attn"``.

        Examples
        --------
        >>> import numpy as np
        >>> from attnkit.testing import tiny_vision
        >>> att = tiny_vision("vit").attend(np.zeros((32, 32, 3), dtype=np.uint8))
        >>> att.maps.shape, att.tokens[:2], att.meta["grid"]
        ((2, 2, 17, 17), ['[CLS]', '0,0'], [4, 4])
        """
        from .measures import check_measure

        if check_measure(measure=measure) == "grad×attn":
            raise UnsupportedModelError(
                f"measure='grad×attn' explains a text objective; for {self.name} use "
                "attnkit.runtime.vision.gradient_rollout(model, image) (gradient-weighted rollout of a "
                "class logit, Chefer et al. 2021). Vision models support the measures "
                "'weights', 'norm', 'norm+residual' and 'alti'.")
        return super().attend(item, level=level, embeddings=embeddings, lazy=lazy, measure=measure)


def check_family(config: Any, name: str) -> None:
    """Raise :class:`~attnkit.errors.UnsupportedModelError` for a vision config attnkit does
    not read, naming what it reads.

    Parameters
    ----------
    config : transformers.PretrainedConfig
        The model's config.
    name : str
        For the message.

    Raises
    ------
    UnsupportedModelError
        Outside :data:`SUPPORTED`.

    Examples
    --------
    >>> import transformers
    >>> from attnkit.runtime.vision import check_family
    >>> check_family(transformers.SwinConfig(), "tiny-swin")
    Traceback (most recent call last):
    attnkit.errors.UnsupportedModelError: ...
    """
    kind = getattr(config, "model_type", "")
    if kind in SUPPORTED:
        return
    refused = arch_of(config).refused
    why = f" {refused}" if refused else ""
    raise UnsupportedModelError(
        f"{name} is a {kind or type(config).__name__} model, which attnkit.runtime.vision does not "
        f"read.{why} Supported vision families: ViT, DeiT and CLIP's vision model "
        f"(model_type {', '.join(SUPPORTED)}).")


def patch_grid(attentions: Any) -> np.ndarray:
    """Int ``[n, 2]``: the (row, column) of every position's patch, ``-1`` for the special
    tokens.

    Parameters
    ----------
    attentions : Attention
        Attention of one image (:meth:`VisionModel.attend`).

    Returns
    -------
    ndarray
        Int64 ``[n, 2]``.

    Raises
    ------
    InputError
        When the attention is not of an image.

    Examples
    --------
    >>> import numpy as np
    >>> from attnkit.testing import tiny_vision
    >>> att = tiny_vision("deit").attend(np.zeros((32, 32, 3), dtype=np.uint8))
    >>> patch_grid(att)[:3].tolist()
    [[-1, -1], [-1, -1], [0, 0]]
    """
    grid = getattr(attentions, "meta", {}).get("grid")
    if grid is None:
        raise InputError("This attention is not of an image (meta has no 'grid'); use "
                         "VisionModel.attend.")
    k = int(attentions.meta.get("first_patch", 1))
    rows, cols = int(grid[0]), int(grid[1])
    out = np.full((len(attentions), 2), -1, dtype=np.int64)
    idx = np.arange(rows * cols)
    out[k:k + rows * cols, 0] = idx // cols
    out[k:k + rows * cols, 1] = idx % cols
    return out


def gradient_rollout(model: VisionModel, item: Any, *, label: int | None = None) -> np.ndarray:
    """Gradient-weighted attention rollout (Chefer, Gur and Wolf 2021, "Generic
    Attention-model Explainability", eq. 5–6): per layer the heads' mean of the positive part
    of gradient × attention, ``Ā = E_h[(∇A ⊙ A)⁺]``, accumulated from the identity as
    ``R ← R + Ā R``.

    Parameters
    ----------
    model : VisionModel
        A model with a classification head (the gradient is that of one logit); models
        without one take the norm of the class token's output as the objective.
    item : image
        The image (:func:`load_image`).
    label : int, optional
        The class whose logit is explained; default the predicted class.

    Returns
    -------
    ndarray
        Float64 ``[n, n]``: ``R[0]`` is the relevance of every position for the class token
        (read its patches with :func:`patch_grid`).

    Raises
    ------
    InputError
        For input that is not an image, or a label outside the classes.

    Examples
    --------
    >>> import numpy as np
    >>> from attnkit.testing import tiny_vision
    >>> m = tiny_vision("vit", num_labels=3)
    >>> r = gradient_rollout(m, np.zeros((32, 32, 3), dtype=np.uint8))
    >>> r.shape, bool((r >= 0).all()), bool(np.allclose(np.diag(r) >= 1, True))
    ((17, 17), True, True)
    """
    import torch

    validate.model(model, family="vision")
    enc = model.encode(item)
    pixels = enc.meta["pixel_values"].to(model.device, model.dtype)
    net = model.base if arch_of(model).tower else model.hf
    with model.eager(), torch.enable_grad():
        out = net(pixel_values=pixels, output_attentions=True)
        atts = out.attentions
        if atts is None or any(a is None for a in atts):
            from ..errors import NoAttentionError

            raise NoAttentionError(f"{model.name} returned no attention probabilities.")
        for a in atts:
            a.retain_grad()
        logits = getattr(out, "logits", None)
        if logits is not None:
            n_classes = logits.shape[-1]
            if label is None:
                label = int(logits[0].argmax())
            if not 0 <= label < n_classes:
                raise InputError(f"label must be between 0 and {n_classes - 1}; got {label}.")
            objective = logits[0, label]
        else:
            objective = out.last_hidden_state[0, 0].norm()
        objective.backward()
    n = atts[0].shape[-1]
    rel = np.eye(n)
    for a in atts:
        cam = (a.grad[0] * a[0]).clamp(min=0).mean(0).detach().double().cpu().numpy()
        rel = rel + cam @ rel
    return rel




__all__ = [
    "VisionModel",
    "check_family",
    "gradient_rollout",
    "load_image",
    "patch_grid",
]
