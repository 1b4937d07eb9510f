"""Readers for the data attnkit analyses: treebanks, coreference, sentence pairs."""

from .conllu import Sentence, Treebank, read_conllu
from .paths import data_dir, find_data, sample_treebank

__all__ = ["Sentence", "Treebank", "read_conllu", "data_dir", "find_data", "sample_treebank"]
