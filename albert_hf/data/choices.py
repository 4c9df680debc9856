"""The values some data options choose from, as plain constants in a module that imports nothing: the jobs' argument
dataclasses (`albert_hf.arguments`, `albert_hf.pretraining.recipes`) name them in their checks and help without
loading `datasets`, which `albert-hf <job> --help` must not wait for. The modules that act on each value import them
from here."""

# `albert_hf.data.labels`: what a label column holds.
CLASSIFICATION = "classification"
REGRESSION = "regression"

# `albert_hf.data.ner`: how the words of a sentence become the model's input.
ALIGN_AUTO, ALIGN_RUNNING_TEXT, ALIGN_WORDS = "auto", "running_text", "words"
ALIGNMENTS = (ALIGN_AUTO, ALIGN_RUNNING_TEXT, ALIGN_WORDS)

# `albert_hf.data.embedded_corpus`: the sources of the quickstart's offline corpus.
EMBEDDED_SOURCES = ("language-reference", "stdlib-docstrings", "stdlib-modules")
DEFAULT_EMBEDDED_SOURCES = ("language-reference", "stdlib-docstrings")
