"""The reader contract: the checks every data reader of albert_hf applies to the texts it reads, and one message form.

Each reader (pretraining text and tables, tokenizer training, GLUE, SQuAD, CoNLL and tables of NER, multiple choice,
the labelled tables of `classify`) passes every text field it reads through [`check_text`], and every line of a text
file it decodes itself through [`decode_line`]. A field is refused when it

  * is not a string (None, a number, a list);
  * holds a NUL byte: binary data, or a file in UTF-16, which tokenizers would read as a character;
  * is empty or blank (ASCII spaces, tabs and line breaks only), where the task needs it (a question, a context, a
    sentence to classify, a choice): a model would train on nothing there. Where a text may be absent (an empty row
    of a corpus, SWAG's second sentence) it is left to the reader (counted and skipped, or read as no text). A field
    of other Unicode spaces (U+3000, U+00A0) is text: Japanese and Chinese data keep such fields as tokens.

Bytes that are not UTF-8 are refused where they are decoded, naming the line (`decode_line`,
`textfiles.read_utf8`). Every message has one form, `<where>: <field>: <problem>`:

    train.csv:7: column 'text': holds a NUL byte (character 12), not text
    train.csv:9: column 'text': empty (None)
    dev.tsv:3: column 2 (sentence2): empty
    squad.json: data[0].paragraphs[2].qas[1]: field 'question': empty
    corpus.txt:4: not valid UTF-8 (invalid continuation byte at byte 3)

`<where>` is the file and the line the row starts on ([`RowPlaces`] finds it for the rows of a table read by
`datasets`: a csv's header is line 1, so its first row is line 2), the record's place in a file without lines (a
JSON document, parquet: its index, from 0), or a dataset's row index.
"""

from __future__ import annotations

import bz2
import csv
import gzip
import io
import json
import lzma
import os
from collections.abc import Sequence
from pathlib import Path

from ..errors import DataError

NUL = "\x00"
# What a blank field is made of. Other Unicode spaces are text: a field that is only an ideographic space (U+3000) or
# a no-break space is a token Japanese and Chinese data keep (tests/test_cjk_readers.py).
ASCII_WHITESPACE = " \t\n\r\f\v"
# How the message names a value that is not text, cut to this many characters.
SHOWN_CHARACTERS = 60


def text_problem(value, required: bool = True) -> str | None:
    """Why `value` cannot be a text field (None when it can): not a string, a NUL byte, or (`required`) empty."""
    if value is None:
        return "empty (None)"
    if not isinstance(value, str):
        shown = repr(value)
        shown = shown if len(shown) <= SHOWN_CHARACTERS else shown[: SHOWN_CHARACTERS - 3] + "..."
        return f"not a text but {type(value).__name__} {shown}"
    position = value.find(NUL)
    if position >= 0:
        return f"holds a NUL byte (character {position + 1}), not text"
    if required and not value.strip(ASCII_WHITESPACE):
        return "empty" if not value else "blank (whitespace only)"
    return None


def check_text(value, where: str, field: str, required: bool = True) -> str:
    """`value`, once [`text_problem`] finds nothing; else a `DataError` `<where>: <field>: <problem>`."""
    problem = text_problem(value, required)
    if problem is not None:
        raise DataError(f"{where}: {field}: {problem}")
    return value


def utf8_problem(error: UnicodeDecodeError) -> str:
    """The problem part of a message for bytes that are not UTF-8."""
    return f"not valid UTF-8 ({error.reason} at byte {error.start}: {error.object[error.start : error.start + 1]!r})"


def decode_line(raw: bytes, path: str | os.PathLike, line_number: int) -> str:
    """Line `line_number` (from 1) of the text file `path` as read (`raw` bytes), decoded: bytes that are not
    UTF-8 and NUL bytes are a `DataError` naming the file and line."""
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise DataError(f"{os.fspath(path)}:{line_number}: {utf8_problem(error)}; text files must be UTF-8.") from None
    position = line.find(NUL)
    if position >= 0:
        raise DataError(f"{os.fspath(path)}:{line_number}: holds a NUL byte (character {position + 1}), not text")
    return line


# --------------------------------------------------------------------------------------------------------------------
# Where a row of a table is
# --------------------------------------------------------------------------------------------------------------------

_OPENERS = {".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open}


class RowPlaces:
    """Where each row of a table read by `datasets` from `files` (in their order, as `load_rows` reads them) is in
    its file, for messages: `train.csv:7` (the line the row starts on: csv and tsv as their reader reads them, a
    header first and blank lines skipped; JSON lines; text, a row a line), `data.json: record 3` (a JSON document)
    or `data.parquet: row index 3`. Without files (a dataset), `<source>: row index 3`. Worked out only when a
    message asks, by reading the files again."""

    def __init__(self, files: Sequence[str | os.PathLike] | None, source: str):
        self.files = [os.fspath(file) for file in files or []]
        self.source = source
        self._starts: list[tuple[str, list[int] | None, int]] | None = None  # (file, lines of its rows or None, rows)

    def where(self, index: int) -> str:
        """The place of row `index` (from 0) of the table."""
        if not self.files:
            return f"{self.source}: row index {index}"
        if self._starts is None:
            self._starts = [_row_lines(file) for file in self.files]
        before = 0
        for file, lines, rows in self._starts:
            if rows < 0:  # a file whose rows cannot be counted here: the rows from it on are named by index
                break
            if index < before + rows:
                local = index - before
                if lines is None:
                    kind = "record" if _extension(file) == ".json" else "row index"
                    return f"{file}: {kind} {local}"
                return f"{file}:{lines[local]}"
            before += rows
        return f"{self.source}: row index {index}"


def _extension(path: str) -> str:
    suffixes = [suffix.lower() for suffix in Path(path).suffixes]
    if suffixes and suffixes[-1] in _OPENERS:
        suffixes.pop()
    return suffixes[-1] if suffixes else ""


def _row_lines(path: str) -> tuple[str, list[int] | None, int]:
    """(path, the line each row of the file starts on, or None where rows have no lines, the number of rows, -1
    when it cannot be counted here: a compression Python cannot read, a file that cannot be read again)."""
    compression = Path(path).suffix.lower()
    if compression in (".zst", ".lz4"):  # read by `datasets` through fsspec; not counted here
        return path, None, -1
    opener = _OPENERS.get(compression, open)
    extension = _extension(path)
    if extension == ".parquet":
        import pyarrow.parquet

        try:
            return path, None, pyarrow.parquet.ParquetFile(path).metadata.num_rows
        except (OSError, pyarrow.ArrowException):
            return path, None, -1
    try:
        with opener(path, "rt", encoding="utf-8", errors="replace", newline="") as handle:
            text = handle.read()
    except OSError:
        return path, None, -1
    if extension in (".csv", ".tsv"):
        reader = csv.reader(io.StringIO(text), delimiter="\t" if extension == ".tsv" else ",")
        starts, previous = [], 0
        for record in reader:
            if record:  # a blank line is no row (pandas skips them), and the first row is the header
                starts.append(previous + 1)
            previous = reader.line_num
        return path, starts[1:], max(len(starts) - 1, 0)
    lines = text.splitlines()
    if extension in (".json", ".jsonl"):
        if text.lstrip().startswith(("[", "{")) and extension == ".json" and not _is_json_lines(lines):
            try:
                document = json.loads(text)
            except json.JSONDecodeError:
                return path, None, -1
            return path, None, len(document) if isinstance(document, list) else 1
        starts = [number for number, line in enumerate(lines, start=1) if line.strip()]
        return path, starts, len(starts)
    if extension in (".txt", ".text"):
        return path, list(range(1, len(lines) + 1)), len(lines)
    return path, None, -1  # a format whose rows are not counted here


def _is_json_lines(lines: list[str]) -> bool:
    """Whether a .json file holds one JSON value per line (`datasets` reads both layouts from .json)."""
    filled = [line for line in lines if line.strip()]
    if len(filled) < 2:
        return False
    try:
        json.loads(filled[0])
    except json.JSONDecodeError:
        return False
    return True


__all__ = ["RowPlaces", "check_text", "decode_line", "text_problem", "utf8_problem"]
