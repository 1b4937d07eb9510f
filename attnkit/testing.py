"""Tiny random models for tests and examples: built from a config, no download, milliseconds.

``tiny_model("bert" | "roberta" | "gpt2" | "bert-mlm" | "bert-cls")`` returns a
:class:`~attnkit.model.Model` with a real fast tokenizer trained on a few sentences.
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


def tiny_model(kind: str = "bert", layers: int = 2, heads: int = 2, hidden: int = 16,
               seed: int = 0, max_positions: int = 64, num_labels: int = 2):
    """A randomly initialised :class:`~attnkit.model.Model` of the given architecture.

    kind : ``"bert"`` (bare encoder), ``"bert-mlm"`` (masked-LM head), ``"bert-cls"``
        (sequence classifier), ``"roberta"`` or ``"gpt2"`` (causal LM).
    """
    import torch
    import transformers as tf

    from .model import Model

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
    else:
        raise ValueError(f"unknown tiny model kind {kind!r}")
    tok.model_max_length = max_positions
    return Model(hf, tok, name=f"tiny-{kind}")
