"""Small real datasets that need no network.

* ``load_digits(split)``: the 8x8 handwritten digits shipped inside scikit-learn (optional dependency,
  ``pip install 'minigrad[data]'``), with a fixed stratified train/test split.
* ``load_co2()`` / ``load_co2_windows(split)``: weekly CO2 at Mauna Loa 1958-2001, shipped inside
  statsmodels (optional dependency, ``pip install 'minigrad[data]'``), as windows for a predictor.
* ``load_text_corpus()``: a public-domain text committed in this repository (``data/``), as a
  character-level ``CharCorpus`` for a tiny GPT.
"""
from .digits import DigitsDataset, load_digits, load_digits_arrays
from .timeseries import load_co2, load_co2_windows
from .text import CharCorpus, CharWindowDataset, available_corpora, corpus_text, load_text_corpus

__all__ = ["CharCorpus", "CharWindowDataset", "DigitsDataset", "available_corpora", "corpus_text",
           "load_co2", "load_co2_windows", "load_digits", "load_digits_arrays", "load_text_corpus"]
