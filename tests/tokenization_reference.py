"""Test helpers for the tokenizer: google-research's ALBERT tokenization, and every text of the shared data by source.

The reference is google-research/albert's own `tokenization.py`, from the albert-tensorflow 1.1 wheel (a test
dependency), imported with a stand-in for tensorflow (`tensorflow_stand_in.py`). It is run as `run_classifier.py`
runs it: `preprocess_text(text, lower=do_lower_case)`, then `FullTokenizer(None, spm_model_file=...).tokenize`,
whose SentencePiece step is `encode_pieces(sp_model, text)` (EncodeAsPieces, then the re-split of "<digit>," pieces),
then `PieceToId` of each piece. It shares no code with `albert_hf.tokenization`, which reproduces the same result
with Rust `tokenizers` components. The benchmarks import this module too (`benchmarks/tokenizer_agreement.py`).

Two options have no counterpart in google-research's code, so they are applied to the text before it:
`keep_accents=True` runs its whitespace clean-up and lower-casing without the NFKD accent stripping (the same
`preprocess_text` as XLNet's and transformers' `keep_accents`), and `replace_quotes=True` turns `` and '' into "
first, as XLNet's and transformers v4's tokenizers do.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path

import sentencepiece as spm
from tensorflow_stand_in import import_google_tokenization

google = import_google_tokenization()


def preprocess_text(
    text: str, remove_space: bool = True, lower: bool = True, keep_accents: bool = False, replace_quotes: bool = False
) -> str:
    """The text google-research's code hands to SentencePiece (`preprocess_text`, plus the two options above)."""
    if replace_quotes:
        text = text.replace("``", '"').replace("''", '"')
    if not keep_accents:
        return google.preprocess_text(text, remove_space=remove_space, lower=lower)
    if remove_space:
        text = " ".join(text.strip().split())
    return text.lower() if lower else text


def reference_pieces(sp: spm.SentencePieceProcessor, texts: list[str], **preprocess) -> list[list[str]]:
    """Pieces of each text as google-research's `FullTokenizer.tokenize` produces them."""
    return [google.encode_pieces(sp, preprocess_text(text, **preprocess), return_unicode=False) for text in texts]


def reference_ids(sp: spm.SentencePieceProcessor, texts: list[str], **preprocess) -> list[list[int]]:
    """Ids of each text (no special tokens): `FullTokenizer.convert_tokens_to_ids` of its pieces."""
    return [
        [sp.PieceToId(google.printable_text(piece)) for piece in pieces]
        for pieces in reference_pieces(sp, texts, **preprocess)
    ]


# ----------------------------------------------------------------------------------------------------------------------
# All the text of the shared data folder, by source
# ----------------------------------------------------------------------------------------------------------------------

GLUE_TEXT_COLUMNS = ("sentence", "sentence1", "sentence2", "#1 String", "#2 String", "question")


def glue_texts(data_dir: Path) -> Iterator[str]:
    """Every sentence of every GLUE tsv (CoLA train/dev have no header: the sentence is the 4th column)."""
    for path in sorted((data_dir / "glue").glob("*/*.tsv")):
        with path.open(encoding="utf-8-sig", newline="") as file:
            rows = list(csv.reader(file, delimiter="\t", quoting=csv.QUOTE_NONE))
        if path.parent.name == "CoLA" and path.stem != "test":
            header, columns = None, [3]
        else:
            header = rows[0]
            columns = [index for index, name in enumerate(header) if name in GLUE_TEXT_COLUMNS]
        for line_number, row in enumerate(rows[1:] if header else rows, 2 if header else 1):
            for column in columns:
                if column >= len(row):
                    raise ValueError(f"{path}:{line_number}: {len(row)} columns, expected more than {column}")
                yield row[column]


def squad_texts(data_dir: Path) -> Iterator[str]:
    """Contexts (once each) and questions of every SQuAD file, nested or flattened layout."""
    for path in sorted((data_dir / "squad").glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))["data"]
        for item in data:
            if "paragraphs" in item:  # official layout
                for paragraph in item["paragraphs"]:
                    yield paragraph["context"]
                    for qa in paragraph["qas"]:
                        yield qa["question"]
            else:  # flattened layout: one question per record
                yield item["context"]
                yield item["question"]


def conll_texts(data_dir: Path) -> Iterator[str]:
    """CoNLL-2003 sentences, their words joined by spaces (train and valid)."""
    for path in sorted((data_dir / "conll2003").glob("*.txt")):
        words: list[str] = []
        for line in path.read_text(encoding="utf-8").splitlines():
            if not line.strip() or line.startswith("-DOCSTART-"):
                if words:
                    yield " ".join(words)
                words = []
            else:
                words.append(line.split(" ")[0])
        if words:
            yield " ".join(words)


def corpus_texts(data_dir: Path) -> Iterator[str]:
    """Every non-empty line of the pretraining corpora and of transformers' text samples."""
    paths = sorted((data_dir / "corpus").glob("*.txt")) + sorted((data_dir / "corpus" / "gutenberg").glob("*.txt"))
    paths += [data_dir / "hf-samples" / "sample_text.txt", data_dir / "hf-samples" / "wiki_text" / "wiki_00"]
    for path in paths:
        for line in _read_text(path).splitlines():
            if line.strip():
                yield line
    for path in (data_dir / "hf-samples" / "conll" / "sample.json", data_dir / "hf-samples" / "swag" / "sample.json"):
        for line in path.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            yield from (
                " ".join(value) if isinstance(value, list) else value
                for key, value in record.items()
                if key in ("words", "sent1", "sent2", "ending0", "ending1", "ending2", "ending3")
            )


def _read_text(path: Path) -> str:
    """UTF-8, or Latin-1 for the two NLTK Gutenberg files stored that way (chesterton-ball, shakespeare-caesar)."""
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return path.read_text(encoding="latin-1")


TEXT_SOURCES = {"glue": glue_texts, "squad": squad_texts, "conll2003": conll_texts, "corpus": corpus_texts}
