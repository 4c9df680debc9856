"""Test helpers for the tokenizer: the original ALBERT algorithm, and every text of the shared data by source.

`reference_ids` is google-research/albert's `tokenization.py` (`preprocess_text` + `encode_pieces` + `PieceToId`)
written again from its description, on top of the `sentencepiece` package: it shares no code with
`albert_hf.tokenization`, which reproduces the same algorithm with Rust `tokenizers` components. The benchmarks
import this module too (`benchmarks/tokenizer_agreement.py`).
"""

from __future__ import annotations

import csv
import json
import unicodedata
from collections.abc import Iterator
from pathlib import Path

import sentencepiece as spm

SPIECE_UNDERLINE = "▁"


def preprocess_text(text: str, remove_space: bool = True, lower: bool = True, keep_accents: bool = False) -> str:
    """The original preprocessing, before SentencePiece sees the text."""
    if remove_space:
        text = " ".join(text.strip().split())
    text = text.replace("``", '"').replace("''", '"')
    if not keep_accents:
        text = unicodedata.normalize("NFKD", text)
        text = "".join(char for char in text if not unicodedata.combining(char))
    if lower:
        text = text.lower()
    return text


def resplit_digit_comma(sp: spm.SentencePieceProcessor, pieces: list[str]) -> list[str]:
    """The original's fix-up: a piece like "▁1990," or "9," is re-encoded without its comma, then "," follows."""
    new_pieces = []
    for piece in pieces:
        if len(piece) > 1 and piece[-1] == "," and piece[-2].isdigit():
            cur_pieces = sp.encode_as_pieces(piece[:-1].replace(SPIECE_UNDERLINE, ""))
            if piece[0] != SPIECE_UNDERLINE and cur_pieces[0][0] == SPIECE_UNDERLINE:
                if len(cur_pieces[0]) == 1:
                    cur_pieces = cur_pieces[1:]
                else:
                    cur_pieces[0] = cur_pieces[0][1:]
            cur_pieces.append(piece[-1])
            new_pieces.extend(cur_pieces)
        else:
            new_pieces.append(piece)
    return new_pieces


def reference_pieces(sp: spm.SentencePieceProcessor, texts: list[str], **preprocess) -> list[list[str]]:
    """Pieces of each text as the original tokenizer produces them."""
    batch = sp.encode([preprocess_text(text, **preprocess) for text in texts], out_type=str)
    return [resplit_digit_comma(sp, pieces) for pieces in batch]


def reference_ids(sp: spm.SentencePieceProcessor, texts: list[str], **preprocess) -> list[list[int]]:
    """Ids of each text (no special tokens) as the original tokenizer produces them: PieceToId of every piece."""
    return [[sp.piece_to_id(piece) for piece in pieces] for pieces in reference_pieces(sp, texts, **preprocess)]


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
