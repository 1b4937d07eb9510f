"""Tiny random models for tests and examples: built from a config, no download, milliseconds.

``tiny_model(kind)`` returns a :class:`~attnkit.runtime.model.Model` with a real fast tokenizer
trained on a few sentences, for every kind in :data:`KINDS`: encoders (BERT with or without a
head, RoBERTa, DistilBERT) and decoders (GPT-2, GPT-NeoX, Llama with grouped-query attention,
Qwen2, Mistral with a sliding window, Gemma 2 with logit soft-capping and alternating sliding
windows, gpt-oss with learned attention sinks).
"""

from __future__ import annotations

CORPUS = [
    "The cat sat on the mat.",
    "A student reads the new book in the library.",
    "She has written three letters to her brother, unbelievably.",
    "We did n't see the movie, but we read the review.",
    "Mary gave John a red apple yesterday!",
    "Teachers and students discussed the results of the experiment?",
]

_BERT_VOCAB = (
    "[PAD] [UNK] [CLS] [SEP] [MASK] . , ! ? ' the a cat sat on mat student reads new book in "
    "library she has written three letters to her brother un ##believ ##ably we did n ##'t "
    "see movie but read review mary gave john red apple yesterday teachers and students "
    "discussed results of experiment ##s ##ed ##ing ##er ##ly"
).split()


def bert_tokenizer():
    from transformers import BertTokenizerFast

    vocab = {w: i for i, w in enumerate(dict.fromkeys(_BERT_VOCAB))}
    return BertTokenizerFast(vocab=vocab, do_lower_case=True)


def _bpe(specials: list[str]):
    from tokenizers import ByteLevelBPETokenizer

    tok = ByteLevelBPETokenizer()
    tok.train_from_iterator(CORPUS * 3, vocab_size=300, min_frequency=1, special_tokens=specials)
    return tok


def gpt2_tokenizer():
    from transformers import GPT2TokenizerFast

    tok = _bpe(["<|endoftext|>"])
    return GPT2TokenizerFast(tokenizer_object=tok._tokenizer, bos_token="<|endoftext|>",
                             eos_token="<|endoftext|>", unk_token="<|endoftext|>")


def roberta_tokenizer():
    from tokenizers.processors import RobertaProcessing
    from transformers import RobertaTokenizerFast

    tok = _bpe(["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
    tok._tokenizer.post_processor = RobertaProcessing(("</s>", 2), ("<s>", 0))
    return RobertaTokenizerFast(tokenizer_object=tok._tokenizer, bos_token="<s>", eos_token="</s>",
                                sep_token="</s>", cls_token="<s>", pad_token="<pad>",
                                unk_token="<unk>", mask_token="<mask>")


#: Every kind :func:`tiny_model` builds.
KINDS = ("bert", "bert-mlm", "bert-cls", "roberta", "distilbert", "gpt2", "gpt_neox", "llama",
         "qwen2", "mistral", "gemma2", "gpt_oss")

#: Sliding window of the tiny Mistral, Gemma 2 and gpt-oss (shorter than most test inputs).
TINY_WINDOW = 4


def tiny_model(kind: str = "bert", layers: int = 2, heads: int = 2, hidden: int = 16,
               seed: int = 0, max_positions: int = 64, num_labels: int = 2,
               kv_heads: int | None = None):
    """A randomly initialised :class:`~attnkit.runtime.model.Model` of the given architecture.

    Parameters
    ----------
    kind : str
        One of :data:`KINDS`: ``"bert"`` (bare encoder), ``"bert-mlm"`` (masked-LM head),
        ``"bert-cls"`` (sequence classifier), ``"roberta"``, ``"distilbert"``; the causal LMs
        ``"gpt2"``, ``"gpt_neox"``, ``"llama"``, ``"qwen2"``, ``"mistral"`` (sliding window
        :data:`TINY_WINDOW`), ``"gemma2"`` (soft-capping 2.0, sliding window on every other
        layer), ``"gpt_oss"`` (learned sink logits, two experts).
    layers, heads, hidden : int
        Shape of the model (``hidden`` divisible by ``heads``).
    seed : int
        Seed of the random weights.
    max_positions : int
        The model's positions (and the tokenizer's maximum length).
    num_labels : int
        Labels of ``"bert-cls"``.
    kv_heads : int, optional
        Key/value heads of the grouped-query decoders (Llama, Qwen2, Mistral, Gemma 2,
        gpt-oss); default ``max(1, heads // 2)``.

    Returns
    -------
    Model

    Raises
    ------
    InputError
        For an unknown kind.

    Examples
    --------
    >>> from attnkit.testing import tiny_model
    >>> tiny_model("llama", heads=4, kv_heads=2)
    Model('tiny-llama', 2 layers x 4 heads, max 64 tokens, causal)
    """
    import torch
    import transformers as tf

    from .errors import InputError
    from .runtime.model import Model

    if kind not in KINDS:
        raise InputError(f"Unknown tiny model kind {kind!r}; choose one of {', '.join(KINDS)}.")
    torch.manual_seed(seed)
    common = dict(num_hidden_layers=layers, num_attention_heads=heads, hidden_size=hidden,
                  intermediate_size=2 * hidden, attn_implementation="eager",
                  initializer_range=0.5)
    if kind.startswith("bert"):
        tok = bert_tokenizer()
        cfg = tf.BertConfig(vocab_size=len(tok), max_position_embeddings=max_positions,
                            num_labels=num_labels, **common)
        cls = {"bert": tf.BertModel, "bert-mlm": tf.BertForMaskedLM,
               "bert-cls": tf.BertForSequenceClassification}[kind]
        hf = cls(cfg)
    elif kind == "roberta":
        tok = roberta_tokenizer()
        cfg = tf.RobertaConfig(vocab_size=len(tok), max_position_embeddings=max_positions + 2,
                               pad_token_id=1, bos_token_id=0, eos_token_id=2, **common)
        hf = tf.RobertaModel(cfg)
    elif kind == "gpt2":
        tok = gpt2_tokenizer()
        cfg = tf.GPT2Config(vocab_size=len(tok), n_positions=max_positions, n_layer=layers,
                            n_head=heads, n_embd=hidden, attn_implementation="eager",
                            initializer_range=0.5, bos_token_id=0, eos_token_id=0)
        hf = tf.GPT2LMHeadModel(cfg)
    elif kind == "distilbert":
        tok = bert_tokenizer()
        cfg = tf.DistilBertConfig(vocab_size=len(tok), max_position_embeddings=max_positions,
                                  n_layers=layers, n_heads=heads, dim=hidden, hidden_dim=2 * hidden,
                                  initializer_range=0.5, attn_implementation="eager")
        hf = tf.DistilBertModel(cfg)
    else:
        tok = gpt2_tokenizer()
        hf = _tiny_decoder(kind, len(tok), layers, heads, hidden, max_positions, kv_heads)
    tok.model_max_length = max_positions
    return Model(hf, tok, name=f"tiny-{kind}")


def _tiny_decoder(kind: str, vocab: int, layers: int, heads: int, hidden: int,
                  max_positions: int, kv_heads: int | None):
    """The causal LM of a rotary-embedding decoder kind, randomly initialised."""
    import torch
    import transformers as tf

    kv = kv_heads if kv_heads is not None else max(1, heads // 2)
    common = dict(vocab_size=vocab, hidden_size=hidden, intermediate_size=2 * hidden,
                  num_hidden_layers=layers, num_attention_heads=heads,
                  max_position_embeddings=max_positions, initializer_range=0.5,
                  bos_token_id=0, eos_token_id=0, pad_token_id=0, attn_implementation="eager")
    if kind == "gpt_neox":
        common.pop("pad_token_id")
        return tf.GPTNeoXForCausalLM(tf.GPTNeoXConfig(**common))
    common["num_key_value_heads"] = kv
    if kind == "llama":
        return tf.LlamaForCausalLM(tf.LlamaConfig(**common))
    if kind == "qwen2":
        return tf.Qwen2ForCausalLM(tf.Qwen2Config(**common))
    if kind == "mistral":
        return tf.MistralForCausalLM(tf.MistralConfig(sliding_window=TINY_WINDOW, **common))
    if kind == "gemma2":
        cfg = tf.Gemma2Config(head_dim=hidden // heads, query_pre_attn_scalar=hidden // heads,
                              attn_logit_softcapping=2.0, sliding_window=TINY_WINDOW, **common)
        return tf.Gemma2ForCausalLM(cfg)
    cfg = tf.GptOssConfig(head_dim=hidden // heads, num_local_experts=2, num_experts_per_tok=1,
                          sliding_window=TINY_WINDOW,
                          rope_parameters={"rope_type": "default", "rope_theta": 10000.0}, **common)
    hf = tf.GptOssForCausalLM(cfg)
    with torch.no_grad():
        for name, p in hf.named_parameters():
            if name.endswith("sinks"):
                p.normal_(0.0, 1.0)
    return hf


def sentencepiece_tokenizer(specials: tuple[str, ...] = ("<pad>", "</s>", "<unk>")):
    """A fast SentencePiece-style (``▁`` word starts) BPE tokenizer trained on :data:`CORPUS`,
    lowercasing, that ends every text with ``</s>`` (T5 and Marian style)."""
    from tokenizers import SentencePieceBPETokenizer, normalizers
    from tokenizers.processors import TemplateProcessing
    from transformers import PreTrainedTokenizerFast

    tok = SentencePieceBPETokenizer()
    tok.normalizer = normalizers.Lowercase()
    tok.train_from_iterator([s.replace(".", " .").replace(",", " ,") for s in CORPUS] * 3,
                            vocab_size=200, min_frequency=1, special_tokens=list(specials),
                            show_progress=False)
    eos = tok.token_to_id("</s>")
    tok._tokenizer.post_processor = TemplateProcessing(single="$A </s>", pair="$A </s> $B </s>",
                                                       special_tokens=[("</s>", eos)])
    return PreTrainedTokenizerFast(tokenizer_object=tok._tokenizer, eos_token="</s>",
                                   pad_token="<pad>", unk_token="<unk>")


#: Every kind :func:`tiny_seq2seq` builds.
SEQ2SEQ_KINDS = ("t5", "bart", "marian")


def tiny_seq2seq(kind: str = "t5", layers: int = 2, heads: int = 2, hidden: int = 16,
                 seed: int = 0, max_positions: int = 64):
    """A randomly initialised encoder–decoder :class:`~attnkit.runtime.seq2seq.Seq2SeqModel`.

    Parameters
    ----------
    kind : str
        One of :data:`SEQ2SEQ_KINDS`: ``"t5"`` (relative position bias), ``"bart"``,
        ``"marian"`` (sinusoidal positions).
    layers, heads, hidden : int
        Shape of both stacks.
    seed : int
        Seed of the random weights.
    max_positions : int
        Positions (BART, Marian) and the tokenizer's maximum length.

    Returns
    -------
    Seq2SeqModel

    Raises
    ------
    InputError
        For an unknown kind.

    Examples
    --------
    >>> from attnkit.testing import tiny_seq2seq
    >>> tiny_seq2seq("bart", heads=4)
    Seq2SeqModel('tiny-bart', encoder 2 layers x 4 heads, decoder 2 layers x 4 heads)
    """
    import torch
    import transformers as tf

    from .errors import InputError
    from .runtime.seq2seq import Seq2SeqModel

    if kind not in SEQ2SEQ_KINDS:
        raise InputError(f"Unknown tiny encoder-decoder kind {kind!r}; choose one of "
                         f"{', '.join(SEQ2SEQ_KINDS)}.")
    torch.manual_seed(seed)
    if kind == "t5":
        tok = sentencepiece_tokenizer()
        cfg = tf.T5Config(vocab_size=len(tok), d_model=hidden, d_kv=hidden // heads,
                          d_ff=2 * hidden, num_layers=layers, num_heads=heads,
                          relative_attention_num_buckets=8, relative_attention_max_distance=16,
                          pad_token_id=0, eos_token_id=1, decoder_start_token_id=0,
                          initializer_factor=4.0, attn_implementation="eager")
        hf = tf.T5ForConditionalGeneration(cfg)
    else:
        common = dict(d_model=hidden, encoder_layers=layers, decoder_layers=layers,
                      encoder_attention_heads=heads, decoder_attention_heads=heads,
                      encoder_ffn_dim=2 * hidden, decoder_ffn_dim=2 * hidden,
                      max_position_embeddings=max_positions, init_std=0.5,
                      attn_implementation="eager")
        if kind == "bart":
            tok = roberta_tokenizer()
            cfg = tf.BartConfig(vocab_size=len(tok), pad_token_id=1, bos_token_id=0,
                                eos_token_id=2, decoder_start_token_id=2, forced_eos_token_id=2,
                                **common)
            hf = tf.BartForConditionalGeneration(cfg)
        else:
            tok = sentencepiece_tokenizer(("</s>", "<unk>", "<pad>"))
            pad = tok.pad_token_id
            cfg = tf.MarianConfig(vocab_size=len(tok), pad_token_id=pad, eos_token_id=0,
                                  decoder_start_token_id=pad, **common)
            hf = tf.MarianMTModel(cfg)
    tok.model_max_length = max_positions
    return Seq2SeqModel(hf, tok, name=f"tiny-{kind}")


#: Every kind :func:`tiny_vision` builds.
VISION_KINDS = ("vit", "deit", "clip")


def tiny_vision(kind: str = "vit", layers: int = 2, heads: int = 2, hidden: int = 16,
                seed: int = 0, image_size: int = 32, patch_size: int = 8,
                num_labels: int | None = None):
    """A randomly initialised :class:`~attnkit.runtime.vision.VisionModel` with its image processor.

    Parameters
    ----------
    kind : str
        One of :data:`VISION_KINDS`: ``"vit"``, ``"deit"`` (class and distillation tokens),
        ``"clip"`` (``CLIPVisionModel``).
    layers, heads, hidden : int
        Shape of the model.
    seed : int
        Seed of the random weights.
    image_size, patch_size : int
        Images are resized to ``image_size`` squared and cut into ``patch_size`` squares.
    num_labels : int, optional
        ViT and DeiT: an image-classification head with this many classes.

    Returns
    -------
    VisionModel

    Raises
    ------
    InputError
        For an unknown kind.

    Examples
    --------
    >>> from attnkit.testing import tiny_vision
    >>> tiny_vision("clip", image_size=48, patch_size=16)
    VisionModel('tiny-clip', 2 layers x 2 heads, 9 patches + [CLS])
    """
    import torch
    import transformers as tf

    from .errors import InputError
    from .runtime.vision import VisionModel

    if kind not in VISION_KINDS:
        raise InputError(f"Unknown tiny vision kind {kind!r}; choose one of "
                         f"{', '.join(VISION_KINDS)}.")
    torch.manual_seed(seed)
    square = {"height": image_size, "width": image_size}
    common = dict(image_size=image_size, patch_size=patch_size, hidden_size=hidden,
                  num_hidden_layers=layers, num_attention_heads=heads,
                  intermediate_size=2 * hidden, attn_implementation="eager")
    if kind == "clip":
        cfg = tf.CLIPVisionConfig(initializer_factor=4.0, **common)
        hf = tf.CLIPVisionModel(cfg)
        proc = _processor("CLIPImageProcessor")(size={"shortest_edge": image_size},
                                                crop_size=square)
    else:
        config_cls = tf.ViTConfig if kind == "vit" else tf.DeiTConfig
        cfg = config_cls(initializer_range=0.5, num_labels=num_labels or 2, **common)
        if kind == "vit":
            hf = tf.ViTForImageClassification(cfg) if num_labels else tf.ViTModel(cfg)
            proc = vit_processor(image_size)
        else:
            hf = tf.DeiTForImageClassification(cfg) if num_labels else tf.DeiTModel(cfg)
            proc = _processor("DeiTImageProcessor")(size=square, crop_size=square)
    return VisionModel(hf, proc, name=f"tiny-{kind}")


def _processor(name: str):
    """transformers' image processor class ``name``: its PIL version where torchvision (the
    default backend) is not installed."""
    import importlib.util

    import transformers as tf

    if importlib.util.find_spec("torchvision") is None and hasattr(tf, name + "Pil"):
        return getattr(tf, name + "Pil")
    return getattr(tf, name)


def vit_processor(size: int = 32):
    """A ViT image processor resizing to ``size`` squared (ImageNet-style mean 0.5, std 0.5).

    Parameters
    ----------
    size : int
        Side of the processed image.

    Returns
    -------
    transformers image processor

    Examples
    --------
    >>> from attnkit.testing import vit_processor
    >>> vit_processor(16).size["height"]
    16
    """
    return _processor("ViTImageProcessor")(size={"height": size, "width": size})


__all__ = [
    "CORPUS",
    "bert_tokenizer",
    "gpt2_tokenizer",
    "roberta_tokenizer",
    "sentencepiece_tokenizer",
    "tiny_model",
    "tiny_seq2seq",
    "tiny_vision",
    "vit_processor",
]
