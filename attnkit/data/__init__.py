"""Readers for the data attnkit analyses: treebanks, coreference, sentence pairs."""

from .conllu import Sentence, Treebank, read_conllu
from .coref import MENTION_TYPES, Document, Mention, mention_head, read_coref
from .induction import induction_inputs
from .pairs import LABEL_NAMES, GlueDataset, read_glue
from .paths import data_dir, find_data, sample_coref, sample_treebank

__all__ = [
    "LABEL_NAMES",
    "MENTION_TYPES",
    "Document",
    "GlueDataset",
    "Mention",
    "Sentence",
    "Treebank",
    "data_dir",
    "find_data",
    "induction_inputs",
    "mention_head",
    "read_conllu",
    "read_coref",
    "read_glue",
    "sample_coref",
    "sample_treebank",
]
