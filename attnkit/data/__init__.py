"""Readers for the data attnkit analyses: treebanks, coreference, sentence pairs."""

from .conllu import Sentence, Treebank, read_conllu
from .coref import MENTION_TYPES, Document, Mention, mention_head, read_coref
from .pairs import LABEL_NAMES, GlueDataset, read_glue
from .paths import data_dir, find_data, sample_treebank

__all__ = [
    "MENTION_TYPES", "Document", "Mention", "mention_head", "read_coref",
    "GlueDataset", "LABEL_NAMES", "read_glue",
    "Sentence", "Treebank", "read_conllu", "data_dir", "find_data", "sample_treebank",
]
