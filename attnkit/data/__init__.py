"""Readers for the data attnkit analyses: treebanks, coreference, sentence pairs."""

from .conllu import Sentence, Treebank, read_conllu
from .pairs import LABEL_NAMES, GlueDataset, read_glue
from .paths import data_dir, find_data, sample_treebank

__all__ = [
    "GlueDataset", "LABEL_NAMES", "Sentence", "Treebank", "data_dir", "find_data", "read_conllu",
    "read_glue", "sample_treebank",
]
