"""Sentence-order data: raw text -> tokenized documents -> sentence-order (SOP) or next-sentence (NSP) instances, the
pretraining data of ALBERT (the sentences themselves: albert_hf.data.sentences).

This is the instance creation of ALBERT's `create_pretraining_data.py`, rebuilt on `datasets` so that it runs in
batches (`map`, `num_proc`, cached by fingerprint, progress bars), works on a streaming `IterableDataset` too, and
keeps memory flat: documents are read, tokenized and cut into instances a batch at a time and written to Arrow files
on disk, where the original held every document and every instance in RAM (over 1 TB for 40 GB of text).

Masking is *not* done here: `DataCollatorForSOP` masks on the fly, so every epoch sees fresh masks and `dupe_factor`
only has to vary the sentence pairs.

Pipeline and columns:

    load_text_documents(files)          -> {"sentences": list[str]}         one row per document
    documents_from_texts(dataset)       -> {"sentences": list[str]}         from a "text" column + sentence splitter
    tokenize_documents(docs, tokenizer) -> {"sentence_ids": list[list[int]]}
    create_sentence_order_instances(..) -> {"input_ids", "token_type_ids", "sentence_order_label"}

`input_ids` is `[CLS] A [SEP] B [SEP]`, `token_type_ids` is 0 over `[CLS] A [SEP]` and 1 over `B [SEP]`, and
`sentence_order_label` is 0 when A precedes B in the document and 1 when the pair was swapped (SOP) or B comes
from another document (NSP). Text without spaces (Japanese, Chinese) is tokenized with a word segmenter
(word_segmentation.py): the tokenized documents then also hold "sentence_word_starts" and the instances
"word_starts", 1 where a token starts a word, which whole-word masking reads instead of SentencePiece's "▁".

Where this differs from the original, and why:
  * The short-target draw (`short_seq_prob`) is made for every chunk, not once per document: with book-length
    documents a single draw would make all instances of one book short.
  * SOP never builds a pair from a one-sentence chunk (the original then takes B from a *random document*, which
    mixes NSP negatives into the SOP task): a chunk that reaches the target with one sentence takes the next one
    too, and a document's last sentence joins the chunk before it. Documents with a single sentence cannot give a
    sentence-order pair and yield no instance; `count_single_sentence_documents` counts them for the report.
  * NSP draws the random document from the documents of the same `map` batch (`documents_per_batch`, 100 by
    default), not from the whole corpus, which is what keeps memory flat and lets it stream. Like the original after
    ten failed draws, a batch holding a single document takes B from that same document.
"""

from __future__ import annotations

import itertools
import os
import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from datasets import Dataset, Features, IterableDataset, List, Value
from datasets.exceptions import DatasetGenerationError

from ..errors import DataError, MissingFileError, UserError
from .caching import map_fingerprint
from .sentences import SentenceSplitter, resolve_sentence_splitter, split_sentences
from .text_checks import decode_line

Objective = Literal["sop", "nsp"]
OBJECTIVES = ("sop", "nsp")

DOCUMENT_FEATURES = Features({"sentences": List(Value("string"))})
TOKENIZED_FEATURES = Features({"sentence_ids": List(List(Value("int32")))})
INSTANCE_FEATURES = Features(
    {
        "input_ids": List(Value("int32")),
        "token_type_ids": List(Value("int8")),
        "sentence_order_label": Value("int8"),
    }
)
# With a word segmenter (text without spaces: see word_segmentation.py), every token also says whether it starts a
# word: 1 or 0, aligned with the ids, from the tokenized sentences to the instances.
TOKENIZED_WORD_FEATURES = Features({**TOKENIZED_FEATURES, "sentence_word_starts": List(List(Value("int8")))})
INSTANCE_WORD_FEATURES = Features({**INSTANCE_FEATURES, "word_starts": List(Value("int8"))})

# --------------------------------------------------------------------------------------------------------------------
# Raw text -> documents of sentences
# --------------------------------------------------------------------------------------------------------------------

# Where reading stands in a list of files: (file position in the list, byte offset, number of the line at that
# offset). Reading can start again there with one seek, without reading the text before it.
ReadPosition = tuple[int, int, int]
FILES_START: ReadPosition = (0, 0, 1)


def read_documents(
    paths: Sequence[str],
    split_lines: bool,
    sentence_splitter: SentenceSplitter = split_sentences,
    start: ReadPosition = FILES_START,
) -> Iterator[tuple[list[str], ReadPosition]]:
    """Yield (sentences, position after the document) per document of the files, from `start` on.

    One sentence per line, blank lines between documents. The position after a document is where reading resumes to
    get the next one: a resumable stream saves it instead of reading every earlier document again. A file is said to
    hold no text only when it is read from its start.
    """
    position, offset, line_number = start
    for position in range(position, len(paths)):
        path = paths[position]
        sentences: list[str] = []
        found = offset > 0  # a resumed read starts after documents of this file
        with open(path, "rb") as handle:
            handle.seek(offset)
            for raw_line in handle:
                offset += len(raw_line)
                line_number += 1
                line = decode_line(raw_line, path, line_number - 1).strip()  # UTF-8, no NUL: the reader contract
                if not line:  # a blank line ends the document
                    if sentences:
                        found = True
                        yield sentences, (position, offset, line_number)
                    sentences = []
                elif split_lines:
                    sentences.extend(sentence_splitter(line))
                else:
                    sentences.append(line)
        offset, line_number = 0, 1
        if sentences:
            found = True
            yield sentences, (position + 1, 0, 1)
        if not found:
            raise DataError(f"{path}: no text found (expected one sentence per line, blank lines between documents).")


def _generate_documents(
    files: list[tuple[str, int, int]], split_lines: bool, sentence_splitter: SentenceSplitter = split_sentences
) -> Iterator[dict]:
    """Yield {"sentences": [...]} per document of each file: one sentence per line, blank lines between documents.

    `files` holds (path, size, mtime_ns): the size and time only make `datasets`' cache fingerprint change when a
    file changes.
    """
    paths = [path for path, _, _ in files]
    for sentences, _ in read_documents(paths, split_lines, sentence_splitter):
        yield {"sentences": sentences}


def file_signatures(files: str | os.PathLike | Sequence[str | os.PathLike]) -> list[tuple[str, int, int]]:
    """(absolute path, size, mtime_ns) of each text file; an empty list or a missing file is an error."""
    paths = [files] if isinstance(files, (str, os.PathLike)) else list(files)
    if not paths:
        raise UserError("load_text_documents: no input files given.")
    signatures = []
    for path in map(os.fspath, paths):
        if not os.path.isfile(path):
            raise MissingFileError(f"pretraining text file not found: {path}")
        stat = os.stat(path)
        signatures.append((os.path.abspath(path), stat.st_size, stat.st_mtime_ns))
    return signatures


def load_text_documents(
    files: str | os.PathLike | Sequence[str | os.PathLike],
    split_lines: bool = False,
    streaming: bool = False,
    num_proc: int | None = None,
    cache_dir: str | None = None,
    sentence_splitter: str | SentenceSplitter | None = None,
) -> Dataset | IterableDataset:
    """Read text files in the original format (one sentence per line, a blank line between documents).

    Args:
        files: one path or several; documents never span two files.
        split_lines: split every line further into sentences (for files with a paragraph per line).
        streaming: return an `IterableDataset` that reads the files lazily instead of an on-disk `Dataset`.
        num_proc: processes that read files in parallel (one file per process at a time).
        cache_dir: where `datasets` keeps the Arrow files (default: its own cache).
        sentence_splitter: what `split_lines` splits with: [`split_sentences`] by default, or a function (or its
            "package.module:function" name) that takes a text and returns its sentences.

    Returns:
        One row per document: {"sentences": list[str]}.
    """
    signatures = file_signatures(files)
    gen_kwargs = {
        "files": signatures,
        "split_lines": split_lines,
        "sentence_splitter": resolve_sentence_splitter(sentence_splitter),
    }
    if streaming:
        return IterableDataset.from_generator(_generate_documents, features=DOCUMENT_FEATURES, gen_kwargs=gen_kwargs)
    try:
        return Dataset.from_generator(
            _generate_documents,
            features=DOCUMENT_FEATURES,
            gen_kwargs=gen_kwargs,
            num_proc=_workers(num_proc) if len(signatures) > 1 else None,
            cache_dir=cache_dir,
        )
    except DatasetGenerationError as error:
        # Show our message (file and line) rather than datasets' generic "error while generating the dataset".
        if isinstance(error.__cause__, ValueError):
            raise error.__cause__ from None
        raise


def documents_from_texts(
    dataset: Dataset | IterableDataset,
    text_column: str = "text",
    sentence_splitter: str | SentenceSplitter | None = None,
    num_proc: int | None = None,
) -> Dataset | IterableDataset:
    """Turn a dataset with one document per row (`text_column`) into {"sentences": list[str]} rows.

    `sentence_splitter` is [`split_sentences`] by default, or a function (or its "package.module:function" name).
    """
    sentence_splitter = resolve_sentence_splitter(sentence_splitter)
    columns = dataset.column_names
    if columns is not None and text_column not in columns:
        raise ValueError(f"documents_from_texts: no column {text_column!r} in the dataset (columns: {columns}).")

    def split_batch(batch: dict) -> dict:
        return {"sentences": [sentence_splitter(text or "") for text in batch[text_column]]}

    return _map(dataset, split_batch, remove_columns=columns, num_proc=num_proc, desc="Splitting sentences")


# --------------------------------------------------------------------------------------------------------------------
# Rows (any file format, a dataset) -> documents
# --------------------------------------------------------------------------------------------------------------------


def paragraph_sentences(text: str, sentence_splitter: SentenceSplitter) -> list[str]:
    """The sentences of a text of paragraphs: each non-blank line, stripped, through the splitter, as a text file's
    lines are with `split_lines`."""
    return [sentence for line in text.splitlines() if line.strip() for sentence in sentence_splitter(line.strip())]


@dataclass(frozen=True)
class DocumentRows:
    """The rows of a table as documents: each row one (its text in `text_column`), or with `document_column` the
    consecutive rows with the same value in it. `source` names the rows in messages."""

    rows: Dataset
    source: str
    text_column: str = "text"
    document_column: str | None = None
    files: tuple[str, ...] = ()  # the data files the rows were read from, if any: messages name a row's line

    def check(self) -> None:
        """Check the columns, and every text as `sources.TextRows` checks them (a text that is not a string or holds
        a NUL byte is an error naming its file and line; empty ones add nothing and are counted in the log), before
        any document is made."""
        from .sources import TextRows, require_columns
        from .text_checks import RowPlaces

        if self.document_column is not None:
            require_columns(self.rows, {"--document_column": self.document_column}, self.source)
        places = RowPlaces(self.files, self.source)
        for _ in TextRows(self.rows, self.text_column, self.source, places=places):
            pass

    def documents(self, sentence_splitter: SentenceSplitter, start_row: int = 0) -> Iterator[tuple[list[str], int]]:
        """(sentences, index of the row after the document) of each document from row `start_row` on (checked
        rows): the sentences of each text cut as a text file's paragraphs are (`paragraph_sentences`)."""
        for _, group in itertools.groupby(self._keyed_texts(start_row), key=lambda item: item[0]):
            sentences, after = [], start_row
            for _, text, after in group:
                sentences += paragraph_sentences(text, sentence_splitter)
            if sentences:
                yield sentences, after

    def _keyed_texts(self, start_row: int) -> Iterator[tuple[object, str, int]]:
        """(document key, text, index of the next row) of each row from `start_row` on; without a document column
        the key is the row itself."""
        columns = [self.text_column, *([self.document_column] if self.document_column is not None else [])]
        rows = self.rows.select(range(start_row, len(self.rows))).select_columns(columns)
        index = start_row
        for batch in rows.iter(batch_size=1000):
            keys = batch[self.document_column] if self.document_column is not None else itertools.count(index)
            for key, text in zip(keys, batch[self.text_column]):
                index += 1
                yield key, text, index

    def signature(self) -> list:
        """What the documents depend on, for a stream's fingerprint: the rows' Arrow files (path, size, time), their
        count and the columns."""
        files = file_signatures([entry["filename"] for entry in self.rows.cache_files]) if self.rows.cache_files else []
        return [files, len(self.rows), self.text_column, self.document_column]


def documents_from_rows(
    rows: DocumentRows,
    sentence_splitter: str | SentenceSplitter | None = None,
    cache_dir: str | None = None,
) -> Dataset:
    """{"sentences": [...]} documents of a table's rows ([`DocumentRows`], checked first): the same text gives the
    same documents as a .txt file of paragraphs read with `split_lines`. `cache_dir` is where `datasets` keeps them."""
    rows.check()
    gen_kwargs = dict(rows=rows, sentence_splitter=resolve_sentence_splitter(sentence_splitter))
    return Dataset.from_generator(
        _row_documents, features=DOCUMENT_FEATURES, gen_kwargs=gen_kwargs, cache_dir=cache_dir
    )


def _row_documents(rows: DocumentRows, sentence_splitter: SentenceSplitter) -> Iterator[dict]:
    for sentences, _ in rows.documents(sentence_splitter):
        yield {"sentences": sentences}


# --------------------------------------------------------------------------------------------------------------------
# Documents -> token ids
# --------------------------------------------------------------------------------------------------------------------


def encode_sentences(tokenizer, sentences: list[str]) -> list[list[int]]:
    """Ids of plain sentences, no special tokens.

    ALBERT's tokenizer encodes them as the original's data script does, through SentencePiece itself
    (`AlbertHFTokenizer.encode_plain_texts`: the original's ids exactly, several times faster than the Rust pipeline,
    which computes offsets that pretraining data never uses); any other tokenizer through `__call__`.
    """
    if not sentences:
        return []
    if hasattr(tokenizer, "encode_plain_texts"):
        return tokenizer.encode_plain_texts(sentences)
    options = dict(add_special_tokens=False, return_attention_mask=False, return_token_type_ids=False, verbose=False)
    return tokenizer(sentences, **options)["input_ids"]


def tokenize_batch(batch: dict, tokenizer, word_segmenter=None) -> dict:
    """Ids of the sentences of a batch of documents; with a `word_segmenter` (a [`WordSegmenter`]), also the word
    starts of each sentence's tokens."""
    # One tokenizer call for every sentence of the batch (much faster than one per sentence), then regroup.
    sentences = [sentence for document in batch["sentences"] for sentence in document]
    if word_segmenter is None:
        columns = {"sentence_ids": encode_sentences(tokenizer, sentences)}
    else:
        ids, word_starts = word_segmenter.encode(tokenizer, sentences)
        columns = {"sentence_ids": ids, "sentence_word_starts": word_starts}
    regrouped = {name: [] for name in columns}
    start = 0
    for document in batch["sentences"]:
        # Sentences that tokenize to nothing (stray markup) are dropped, as in the original.
        kept = [index for index in range(start, start + len(document)) if columns["sentence_ids"][index]]
        for name, values in columns.items():
            regrouped[name].append([values[index] for index in kept])
        start += len(document)
    return regrouped


def tokenize_documents(
    documents: Dataset | IterableDataset,
    tokenizer,
    num_proc: int | None = None,
    documents_per_batch: int = 100,
    word_segmenter=None,
) -> Dataset | IterableDataset:
    """Tokenize every sentence (no special tokens): {"sentences"} -> {"sentence_ids": list[list[int]]}.

    With a `word_segmenter` ([`WordSegmenter`], for text without spaces) the rows also hold "sentence_word_starts":
    1 where a token starts a word, aligned with "sentence_ids". None (spaced text) leaves word starts to the
    collator, which reads them off SentencePiece's "▁" as the original does.
    """
    if documents.column_names is not None and "sentences" not in documents.column_names:
        raise ValueError(f"tokenize_documents: expected a 'sentences' column, got {documents.column_names}.")
    kwargs = {}
    if isinstance(documents, Dataset):
        # An explicit fingerprint, so the cache is reused even for tokenizers that `datasets` cannot hash.
        kwargs["new_fingerprint"] = map_fingerprint(
            documents,
            tokenize_batch,
            tokenizer,
            documents_per_batch=documents_per_batch,
            word_segmenter=None if word_segmenter is None else word_segmenter.name,
        )
    return _map(
        documents,
        tokenize_batch,
        batch_size=documents_per_batch,
        remove_columns=documents.column_names or ["sentences"],
        fn_kwargs={"tokenizer": tokenizer, "word_segmenter": word_segmenter},
        features=TOKENIZED_FEATURES if word_segmenter is None else TOKENIZED_WORD_FEATURES,
        num_proc=num_proc,
        desc="Tokenizing documents",
        **kwargs,
    )


def _sentence_id_batches(tokenized: Dataset) -> Iterator[pa.Array | pa.ChunkedArray]:
    # Arrow batches (selections and shuffles applied) read straight from the memory-mapped file: counting needs only
    # the list offsets, and turning every token into a Python int to count them cost more than creating instances.
    for batch in tokenized.with_format("arrow").iter(batch_size=10_000):
        yield batch.column("sentence_ids")


def count_single_sentence_documents(tokenized: Dataset) -> int:
    """How many documents have fewer than two sentences (no sentence-order pair can be built from them).
    The count reads list offsets only (no workers, no token turned into a Python int)."""
    return sum(
        int(pc.sum(pc.less(pc.list_value_length(column), 2)).as_py() or 0) for column in _sentence_id_batches(tokenized)
    )


def count_long_sentences(tokenized: Dataset, max_seq_length: int) -> int:
    """How many sentences alone exceed an instance (max_seq_length - 3 tokens). `truncate_seq_pair` cuts them to
    fit, so the report counts them instead of losing their tokens silently.
    The count reads list offsets only (no workers, no token turned into a Python int)."""
    limit = max_seq_length - 3
    return sum(
        int(pc.sum(pc.greater(pc.list_value_length(pc.list_flatten(column)), limit)).as_py() or 0)
        for column in _sentence_id_batches(tokenized)
    )


# --------------------------------------------------------------------------------------------------------------------
# Token ids -> sentence-order instances (create_instances_from_document)
# --------------------------------------------------------------------------------------------------------------------


def _draw_target_length(rng: random.Random, max_num_tokens: int, short_seq_prob: float) -> int:
    """Usually fill the sequence; with probability short_seq_prob aim shorter, to match fine-tuning lengths."""
    if rng.random() < short_seq_prob:
        return rng.randint(2, max_num_tokens)
    return max_num_tokens


# A segment of an instance is always a run of consecutive tokens of one document (consecutive sentences, trimmed at
# the ends), so the algorithm below works on spans (document, first token, end token) and sentence lengths only: the
# tokens are copied once, by the caller, as array slices. That keeps the per-token work out of Python.
Span = tuple[int, int, int]


def _truncate_spans(span_a: list[int], span_b: list[int], max_num_tokens: int, rng: random.Random) -> None:
    """`truncate_seq_pair` on [document, start, end] spans (in place): the same random draws, the same result."""
    while (span_a[2] - span_a[1]) + (span_b[2] - span_b[1]) > max_num_tokens:
        longer = span_a if span_a[2] - span_a[1] > span_b[2] - span_b[1] else span_b
        if rng.random() < 0.5:
            longer[1] += 1
        else:
            longer[2] -= 1


def truncate_seq_pair(tokens_a: list[int], tokens_b: list[int], max_num_tokens: int, rng: random.Random) -> None:
    """Trim the longer segment, one token at a time from a random end, until the pair fits (in place).

    Random end, so that neither the starts nor the ends of segments are systematically lost."""
    span_a, span_b = [0, 0, len(tokens_a)], [1, 0, len(tokens_b)]
    _truncate_spans(span_a, span_b, max_num_tokens, rng)
    tokens_a[:] = tokens_a[span_a[1] : span_a[2]]
    tokens_b[:] = tokens_b[span_b[1] : span_b[2]]


def _random_segment_span(
    lengths: Sequence[Sequence[int]], document_index: int, target_length: int, rng: random.Random
) -> Span:
    """NSP's random B: consecutive sentences of another document of the pool, from a random start, up to the target."""
    for _ in range(10):  # as the original: ten tries to find another document, else use this one
        random_index = rng.randint(0, len(lengths) - 1)
        if random_index != document_index and lengths[random_index]:
            break
    # A document whose sentences all tokenized to nothing is empty: fall back to this (non-empty) one.
    if not lengths[random_index]:
        random_index = document_index
    document = lengths[random_index]
    first = rng.randint(0, len(document) - 1)
    start = sum(document[:first])
    end = start
    for length in document[first:]:
        end += length
        if end - start >= target_length:
            break
    return random_index, start, end


def sentence_pair_spans(
    lengths: Sequence[Sequence[int]],
    document_index: int,
    rng: random.Random,
    max_num_tokens: int,
    short_seq_prob: float = 0.1,
    objective: Objective = "sop",
) -> Iterator[tuple[Span, Span, int]]:
    """Yield (span_a, span_b, label) for `lengths[document_index]`, the token counts of a document's sentences.

    A span is (document index in the pool, first token, end token) within that document's concatenated sentences.
    Sentences are gathered into a chunk until it reaches a target length (max_num_tokens, or with probability
    short_seq_prob a random shorter one); the chunk is cut at a random sentence boundary into A and B. SOP swaps A
    and B with probability 0.5 (label 1); NSP replaces B with sentences of another document of the pool with
    probability 0.5 (label 1). The pair is then truncated to max_num_tokens.
    """
    document = lengths[document_index]
    if objective == "sop" and len(document) < 2:
        return
    chunk_start_sentence, chunk_start_token = 0, 0
    chunk_length = 0
    target_length = _draw_target_length(rng, max_num_tokens, short_seq_prob)
    i = 0
    while i < len(document):
        chunk_length += document[i]
        chunk_sentences = i + 1 - chunk_start_sentence
        if not _chunk_is_complete(chunk_sentences, chunk_length, target_length, i, len(document), objective):
            i += 1
            continue
        a_end = rng.randint(1, chunk_sentences - 1) if chunk_sentences >= 2 else 1
        a_end_token = chunk_start_token + sum(document[chunk_start_sentence : chunk_start_sentence + a_end])
        span_a = [document_index, chunk_start_token, a_end_token]
        chunk_end_token = chunk_start_token + chunk_length
        if objective == "sop":
            span_b = [document_index, a_end_token, chunk_end_token]
            label = int(rng.random() < 0.5)
            if label:
                span_a, span_b = span_b, span_a
        elif chunk_sentences == 1 or rng.random() < 0.5:
            label = 1
            span_b = list(
                _random_segment_span(lengths, document_index, target_length - (a_end_token - chunk_start_token), rng)
            )
            # The sentences of the chunk after A were not used: put them back for the next chunk.
            i -= chunk_sentences - a_end
            chunk_end_token = a_end_token
        else:
            label = 0
            span_b = [document_index, a_end_token, chunk_end_token]
        _truncate_spans(span_a, span_b, max_num_tokens, rng)
        yield tuple(span_a), tuple(span_b), label
        i += 1
        chunk_start_sentence, chunk_start_token, chunk_length = i, chunk_end_token, 0
        target_length = _draw_target_length(rng, max_num_tokens, short_seq_prob)


def sentence_pairs_from_document(
    pool: Sequence[Sequence[Sequence[int]]],
    document_index: int,
    rng: random.Random,
    max_num_tokens: int,
    short_seq_prob: float = 0.1,
    objective: Objective = "sop",
) -> Iterator[tuple[list[int], list[int], int]]:
    """Yield (tokens_a, tokens_b, label) from `pool[document_index]`, a list of tokenized sentences: the token lists
    of [`sentence_pair_spans`] (same draws, same pairs)."""
    lengths = _LazyLengths(pool)
    flat: dict[int, list[int]] = {}
    for span_a, span_b, label in sentence_pair_spans(
        lengths, document_index, rng, max_num_tokens, short_seq_prob, objective
    ):
        tokens = []
        for document, start, end in (span_a, span_b):
            if document not in flat:
                flat[document] = [token for sentence in pool[document] for token in sentence]
            tokens.append(flat[document][start:end])
        yield tokens[0], tokens[1], label


class _LazyLengths:
    """Sentence lengths of the documents of a pool of token lists, computed when a document is first looked at."""

    def __init__(self, pool: Sequence[Sequence[Sequence[int]]]):
        self.pool, self.cache = pool, {}

    def __len__(self) -> int:
        return len(self.pool)

    def __getitem__(self, index: int) -> list[int]:
        if index not in self.cache:
            self.cache[index] = [len(sentence) for sentence in self.pool[index]]
        return self.cache[index]


def _chunk_is_complete(
    chunk_sentences: int,
    chunk_length: int,
    target_length: int,
    position: int,
    document_length: int,
    objective: Objective,
) -> bool:
    is_last_sentence = position == document_length - 1
    if objective == "nsp":
        return is_last_sentence or chunk_length >= target_length
    # SOP needs two sentences per chunk, and must not leave the document's last sentence alone for the next chunk.
    if is_last_sentence:
        return True
    return chunk_length >= target_length and chunk_sentences >= 2 and position != document_length - 2


def _document_rng(seed: int, dupe: int, document_index: int) -> random.Random:
    # Randomness keyed by (seed, pass, document) rather than drawn from one stream: the result does not depend on
    # num_proc, batch boundaries or the order in which workers finish.
    state = np.random.SeedSequence([seed, dupe, document_index]).generate_state(2, dtype=np.uint64)
    return random.Random(int(state[0]) << 64 | int(state[1]))


class _ArrowPool:
    """A batch's `sentence_ids` column (Arrow list<list<int32>>) as numpy offsets over one flat token array, without
    turning every token into a Python int: documents -> sentences -> tokens."""

    def __init__(self, column: pa.Array | pa.ChunkedArray):
        if isinstance(column, pa.ChunkedArray):
            column = column.combine_chunks()
        sentences = column.values  # ListArray offsets index the child array as stored (slice offsets included)
        self.document_offsets = column.offsets.to_numpy()
        self.token_offsets = sentences.offsets.to_numpy()
        self.tokens = sentences.values.to_numpy(zero_copy_only=False)
        self.lengths = _ArrowLengths(self)

    def document_start(self, document: int) -> int:
        return int(self.token_offsets[self.document_offsets[document]])


class _ArrowLengths:
    def __init__(self, pool: _ArrowPool):
        self.pool, self.cache = pool, {}

    def __len__(self) -> int:
        return len(self.pool.document_offsets) - 1

    def __getitem__(self, index: int) -> list[int]:
        if index not in self.cache:
            first, last = self.pool.document_offsets[index], self.pool.document_offsets[index + 1]
            self.cache[index] = np.diff(self.pool.token_offsets[first : last + 1]).tolist()
        return self.cache[index]


def instances_batch(
    batch: pa.Table,
    indices: list[int],
    *,
    max_seq_length: int,
    short_seq_prob: float,
    dupe_factor: int,
    objective: Objective,
    seed: int,
    cls_token_id: int,
    sep_token_id: int,
    with_documents: bool = False,
) -> pa.Table:
    """The instances of a batch of tokenized documents (`indices`: their indices in the corpus); `with_documents`
    adds a "document" column, the index of the document each instance was cut from. Word starts, where the batch
    has them, are cut with the ids they belong to ([CLS] and [SEP] start words of their own)."""
    pool = _ArrowPool(batch.column("sentence_ids"))
    word_pool = (
        _ArrowPool(batch.column("sentence_word_starts")) if "sentence_word_starts" in batch.column_names else None
    )
    cls, sep = np.array([cls_token_id], dtype=np.int32), np.array([sep_token_id], dtype=np.int32)
    special_start = np.ones(1, dtype=np.int8)
    pieces, word_starts, offsets, types, labels, documents = [], [], [0], [], [], []
    for dupe in range(dupe_factor):
        for position, document_index in enumerate(indices):
            rng = _document_rng(seed, dupe, document_index)
            for span_a, span_b, label in sentence_pair_spans(
                pool.lengths, position, rng, max_seq_length - 3, short_seq_prob, objective
            ):
                (doc_a, start_a, end_a), (doc_b, start_b, end_b) = span_a, span_b
                base_a, base_b = pool.document_start(doc_a), pool.document_start(doc_b)
                pieces += [
                    cls,
                    pool.tokens[base_a + start_a : base_a + end_a],
                    sep,
                    pool.tokens[base_b + start_b : base_b + end_b],
                    sep,
                ]
                if word_pool is not None:  # the same offsets: one flag per token
                    word_starts += [
                        special_start,
                        word_pool.tokens[base_a + start_a : base_a + end_a],
                        special_start,
                        word_pool.tokens[base_b + start_b : base_b + end_b],
                        special_start,
                    ]
                length_a, length_b = end_a - start_a, end_b - start_b
                offsets.append(offsets[-1] + length_a + length_b + 3)
                types.append((length_a + 2, length_b + 1))
                labels.append(label)
                documents.append(document_index)
    tokens = np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.int32)
    segment_lengths = np.array(types, dtype=np.int64).reshape(-1)
    token_types = np.repeat(np.tile(np.array([0, 1], dtype=np.int8), len(types)), segment_lengths)
    offsets = pa.array(np.array(offsets, dtype=np.int32))
    columns = {
        "input_ids": pa.ListArray.from_arrays(offsets, pa.array(tokens, type=pa.int32())),
        "token_type_ids": pa.ListArray.from_arrays(offsets, pa.array(token_types, type=pa.int8())),
        "sentence_order_label": pa.array(np.array(labels, dtype=np.int8), type=pa.int8()),
    }
    if word_pool is not None:
        flags = np.concatenate(word_starts) if word_starts else np.zeros(0, dtype=np.int8)
        columns["word_starts"] = pa.ListArray.from_arrays(offsets, pa.array(flags, type=pa.int8()))
    if with_documents:
        columns["document"] = pa.array(np.array(documents, dtype=np.int64), type=pa.int64())
    return pa.Table.from_arrays(list(columns.values()), names=list(columns))


def check_instance_options(objective: str, max_seq_length: int, short_seq_prob: float, dupe_factor: int) -> None:
    """Refuse instance options the SOP/NSP algorithm cannot run with, naming the option."""
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {OBJECTIVES}, got {objective!r}.")
    if max_seq_length < 5:
        raise ValueError(f"max_seq_length must be at least 5 ([CLS] A [SEP] B [SEP]), got {max_seq_length}.")
    if not 0.0 <= short_seq_prob <= 1.0:
        raise ValueError(f"short_seq_prob must be in [0, 1], got {short_seq_prob}.")
    if dupe_factor < 1:
        raise ValueError(f"dupe_factor must be at least 1, got {dupe_factor}.")


def create_sentence_order_instances(
    tokenized: Dataset | IterableDataset,
    cls_token_id: int,
    sep_token_id: int,
    max_seq_length: int = 512,
    short_seq_prob: float = 0.1,
    dupe_factor: int = 1,
    objective: Objective = "sop",
    seed: int = 12345,
    num_proc: int | None = None,
    documents_per_batch: int = 100,
) -> Dataset | IterableDataset:
    """Cut tokenized documents into `[CLS] A [SEP] B [SEP]` instances with a sentence-order (or NSP) label.

    Args:
        tokenized: {"sentence_ids": list[list[int]]} per document, from [`tokenize_documents`] (with
            "sentence_word_starts" too, the instances get a "word_starts" column).
        cls_token_id / sep_token_id: the tokenizer's [CLS] and [SEP] ids.
        max_seq_length: longest instance, special tokens included (512 in the paper).
        short_seq_prob: probability of a shorter random target length for a chunk (0.1).
        dupe_factor: passes over the corpus, each with fresh randomness (targets, split points, swaps).
        objective: "sop" (ALBERT: swap with probability 0.5) or "nsp" (BERT: random-document B with p 0.5).
        seed: makes the instances a function of (seed, pass, document index) only.
        num_proc / documents_per_batch: parallelism and batch size of the `map` (NSP's pool of random documents).
    """
    check_instance_options(objective, max_seq_length, short_seq_prob, dupe_factor)
    columns = tokenized.column_names
    if columns is not None and "sentence_ids" not in columns:
        raise ValueError(f"expected a 'sentence_ids' column (tokenize_documents), got {columns}.")
    with_words = columns is not None and "sentence_word_starts" in columns
    options = dict(
        max_seq_length=max_seq_length,
        short_seq_prob=short_seq_prob,
        dupe_factor=dupe_factor,
        objective=objective,
        seed=seed,
        cls_token_id=cls_token_id,
        sep_token_id=sep_token_id,
    )
    # Batches as Arrow tables: the tokens are sliced as arrays and never become Python ints (see _ArrowPool).
    instances = _map(
        tokenized.with_format("arrow"),
        instances_batch,
        with_indices=True,
        batch_size=documents_per_batch,
        remove_columns=columns or ["sentence_ids"],
        fn_kwargs=options,
        features=INSTANCE_WORD_FEATURES if with_words else INSTANCE_FEATURES,
        num_proc=num_proc,
        desc=f"Creating {objective.upper()} instances",
    )
    return instances.with_format(None)


def build_pretraining_dataset(
    documents: Dataset | IterableDataset,
    tokenizer,
    max_seq_length: int = 512,
    short_seq_prob: float = 0.1,
    dupe_factor: int = 1,
    objective: Objective = "sop",
    seed: int = 12345,
    num_proc: int | None = None,
    documents_per_batch: int = 100,
    word_segmenter=None,
) -> Dataset | IterableDataset:
    """Documents of sentences -> tokenized -> SOP/NSP instances, ready for [`DataCollatorForSOP`]. A
    `word_segmenter` ([`WordSegmenter`]) adds the word starts of text without spaces ([`tokenize_documents`])."""
    tokenized = tokenize_documents(
        documents, tokenizer, num_proc=num_proc, documents_per_batch=documents_per_batch, word_segmenter=word_segmenter
    )
    return create_sentence_order_instances(
        tokenized,
        cls_token_id=tokenizer.cls_token_id,
        sep_token_id=tokenizer.sep_token_id,
        max_seq_length=max_seq_length,
        short_seq_prob=short_seq_prob,
        dupe_factor=dupe_factor,
        objective=objective,
        seed=seed,
        num_proc=num_proc,
        documents_per_batch=documents_per_batch,
    )


def _workers(num_proc: int | None) -> int | None:
    """`num_proc` for `datasets`: None (work in this process) unless more than one process is asked for. `datasets`
    starts a pool even for num_proc=1, which pickles the tokenizer into a second process and doubles the memory for
    no parallelism."""
    return num_proc if num_proc is not None and num_proc > 1 else None


def _map(
    dataset: Dataset | IterableDataset, function: Callable, num_proc: int | None = None, desc: str = "", **kwargs
) -> Dataset | IterableDataset:
    """`dataset.map(batched=True)` for both kinds: an IterableDataset maps lazily and takes no num_proc/desc."""
    if isinstance(dataset, IterableDataset):
        return dataset.map(function, batched=True, **kwargs)
    return dataset.map(function, batched=True, num_proc=_workers(num_proc), desc=desc, **kwargs)
