"""A stream of pretraining instances whose position can be saved and resumed in seconds, exactly.

A streamed run used to resume by reading again every batch it had trained on in the current pass (files, tokenizer,
instances, shuffle buffer, masking): minutes at step 10,000. A running shuffle buffer is what forces that: its
content at any point depends on everything read before, and `datasets` does not save it. Here the order is resumable
by construction instead:

  * documents are read in order (the files in an order drawn per pass from the seed), in batches of
    `documents_per_batch` documents, tokenized and cut into instances exactly as [`create_sentence_order_instances`]
    does on a stream (randomness keyed by (seed, copy, document); for NSP the same batches, so the same pools of B
    segments; SOP's batches also end after `SOP_BATCH_CHARACTERS` of text, which changes no instance);
  * consecutive documents form a *window* of at least `window_size` instances (for NSP, whole batches, whose
    documents B segments are drawn from), and the instances of one window are emitted in an order drawn from (seed,
    pass, window) alone.

A window's content and order therefore depend only on where it starts: the file, the byte offset and line there, the
index of its first document, and the index of its first instance in the pass ([`StreamPosition`]). The stream keeps
these for the windows it has made in the current pass, so [`ResumableInstanceStream.position`] turns "instances
consumed in this pass" into (window start, instances already emitted from it). Resuming seeks there, makes that one
window again and drops what was already emitted: the cost is one window, whatever the step.
"""

from __future__ import annotations

import bisect
import copy
import dataclasses
import itertools
import os
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import torch
from datasets.fingerprint import Hasher

from .caching import tokenizer_fingerprint
from .sentence_order import (
    FILES_START,
    DocumentRows,
    Objective,
    ReadPosition,
    check_instance_options,
    file_signatures,
    instances_batch,
    read_documents,
    tokenize_batch,
)
from .sentences import SentenceSplitter, resolve_sentence_splitter

TOKENIZED_TYPE = pa.list_(pa.list_(pa.int32()))
WORD_STARTS_TYPE = pa.list_(pa.list_(pa.int8()))
# Text per batch of SOP documents, at most (plus the document that crosses it): about 50k tokens.
SOP_BATCH_CHARACTERS = 200_000


@dataclasses.dataclass(frozen=True)
class StreamPosition:
    """Where a window of a pass starts: all that is needed to make the window again without reading anything before.

    `file` is the position of the file in the pass's file order, `offset` the byte offset of the next line to read in
    it and `line` that line's number (for error messages); `document` and `instance` are the indices, in the pass, of
    the window's first document and first instance.
    """

    epoch: int
    window: int
    instance: int
    document: int
    file: int
    offset: int
    line: int

    @property
    def read_position(self) -> ReadPosition:
        return self.file, self.offset, self.line


@dataclasses.dataclass(frozen=True)
class _Window:
    start: StreamPosition
    size: int  # instances


def stream_position_obstacle(world_size: int, dataloader_num_workers: int) -> str | None:
    """Why a checkpoint cannot save and restore the position of a training stream read this way, or None if it can.

    The stream must be read in the training process, one batch of `train_batch_size` instances per training batch:
    with DataLoader workers the reading (and so the position) is in a worker, and with several processes accelerate
    reads the stream in the main one and splits its batches. A resume there reads the trained batches again.
    """
    if dataloader_num_workers > 0:
        return f"--dataloader_num_workers {dataloader_num_workers} reads the stream in DataLoader workers"
    if world_size > 1:
        return f"with {world_size} processes accelerate reads the stream in the main one and splits its batches"
    return None


class ResumableInstanceStream(torch.utils.data.IterableDataset):
    """SOP/NSP instances of text files or of a table's rows, read lazily and shuffled by windows, with a position
    that can be saved.

    Args:
        files: the text files (one sentence per line, blank lines between documents), or [`DocumentRows`] (each
            document's sentences cut as `split_lines` cuts a file's lines, whatever `split_lines` says).
        tokenizer: the tokenizer, called as [`tokenize_documents`] calls it.
        window_size: instances shuffled together (at least: a window is made of whole documents, for NSP of whole
            batches of documents).
        seed: keys the file order of each pass, the instances (as [`create_sentence_order_instances`]) and the order
            within each window.
        split_lines / sentence_splitter: as [`load_text_documents`].
        max_seq_length / short_seq_prob / dupe_factor / objective / documents_per_batch: as
            [`create_sentence_order_instances`].
        word_segmenter: a [`WordSegmenter`] for text without spaces, as [`tokenize_documents`]: rows then also
            hold "word_starts".

    Rows are {"input_ids", "token_type_ids", "sentence_order_label"}, as the instances of a `datasets` stream.
    `set_epoch(n)` selects the pass (Trainer calls it through the DataLoader), counted from `count_passes_from`'s. It
    is read in the process that iterates it (`dataloader_num_workers` 0 or 1: several workers would each read the
    whole stream); its position can be saved only when it is read in the training process
    ([`stream_position_obstacle`]).
    """

    def __init__(
        self,
        files: str | os.PathLike | Sequence[str | os.PathLike] | DocumentRows,
        tokenizer,
        window_size: int = 10_000,
        seed: int = 12345,
        split_lines: bool = False,
        sentence_splitter: str | SentenceSplitter | None = None,
        max_seq_length: int = 512,
        short_seq_prob: float = 0.1,
        dupe_factor: int = 1,
        objective: Objective = "sop",
        documents_per_batch: int = 100,
        word_segmenter=None,
    ):
        if window_size < 1:
            raise ValueError(f"window_size (--shuffle_buffer_size) must be at least 1, got {window_size}.")
        if documents_per_batch < 1:
            raise ValueError(f"documents_per_batch must be at least 1, got {documents_per_batch}.")
        check_instance_options(objective, max_seq_length, short_seq_prob, dupe_factor)
        # Rows of a table ([`DocumentRows`]) are read from a row index, files from a byte offset: both positions
        # are exact, so both resume alike.
        self.rows = files if isinstance(files, DocumentRows) else None
        if self.rows is not None:
            self.rows.check()
        self.signatures = self.rows.signature() if self.rows is not None else file_signatures(files)
        self.tokenizer = tokenizer
        self.window_size, self.seed = window_size, seed
        self.split_lines = split_lines
        self.sentence_splitter = resolve_sentence_splitter(sentence_splitter)
        self.documents_per_batch = documents_per_batch
        self.word_segmenter = word_segmenter
        self.instance_options = dict(
            max_seq_length=max_seq_length,
            short_seq_prob=short_seq_prob,
            dupe_factor=dupe_factor,
            objective=objective,
            seed=seed,
            cls_token_id=tokenizer.cls_token_id,
            sep_token_id=tokenizer.sep_token_id,
        )
        self.epoch = 0
        self.first_pass = 0  # the pass `set_epoch(0)` selects: a resumed Trainer counts its passes from 0 again
        self.documents_read = 0  # documents read since creation: what a resume costs, for tests and benchmarks
        self._resume: tuple[StreamPosition, int] | None = None
        # The pass being read: its windows so far (and their first instances, to bisect), the start of the window
        # after the last one, and whether the files ran out.
        self._windows: list[_Window] = []
        self._window_starts: list[int] = []
        self._next: StreamPosition | None = None
        self._ended = False
        self._fingerprint: str | None = None

    # ---- reading ----------------------------------------------------------------------------------------------------

    def set_epoch(self, epoch: int) -> None:
        self.epoch = self.first_pass + epoch

    def count_passes_from(self, first_pass: int) -> None:
        """Make `set_epoch(n)` select pass `first_pass + n`: a Trainer resumed with `ignore_data_skip` counts the pass
        it resumes in as its pass 0, and so on."""
        self.first_pass = first_pass

    def __iter__(self) -> Iterator[dict[str, Any]]:
        worker = torch.utils.data.get_worker_info()
        if worker is not None and worker.num_workers > 1:
            raise ValueError(
                "A resumable instance stream is read by one process: with dataloader_num_workers > 1 every worker "
                "would read all of it. Use --dataloader_num_workers 0 or 1."
            )
        start, skip = StreamPosition(self.epoch, 0, 0, 0, *FILES_START), 0
        if self._resume is not None and self._resume[0].epoch == self.epoch:  # once: the next pass starts afresh
            (start, skip), self._resume = self._resume, None
        self._windows, self._window_starts, self._next, self._ended = [], [], start, False
        for window, table, following in self._windows_from(start):
            self._windows.append(_Window(window, table.num_rows))
            self._window_starts.append(window.instance)
            self._next = following
            yield from table.slice(skip).to_pylist()
            skip = 0
        self._ended = True

    def _windows_from(self, start: StreamPosition) -> Iterator[tuple[StreamPosition, pa.Table, StreamPosition]]:
        """(start, shuffled instances, start of the next window) of each window of the pass, from `start` on."""
        documents = self._document_instances(start)
        window = start
        while True:
            tables, size, last = [], 0, None
            for document, position, table in documents:
                tables.append(table)
                size, last = size + table.num_rows, (document, position)
                if size >= self.window_size and self._may_end_window(document):
                    break
            else:
                if last is None:  # the files ran out at the window's start
                    return
            following = StreamPosition(window.epoch, window.window + 1, window.instance + size, last[0] + 1, *last[1])
            yield window, self._shuffled(pa.concat_tables(tables), window), following
            window = following

    def _may_end_window(self, document: int) -> bool:
        """Whether a window may end after `document` (an index in the pass).

        SOP cuts each document on its own, so a window ends after any document: a resume then reads at most one
        window plus the rest of its last batch of documents (`_next_batch`). NSP draws B segments from the other documents of the
        batch, so its windows end with a batch (`documents_per_batch` documents, counted from the pass's start) and
        a resumed stream forms the same batches again.
        """
        return self.instance_options["objective"] == "sop" or (document + 1) % self.documents_per_batch == 0

    def _document_instances(self, start: StreamPosition) -> Iterator[tuple[int, ReadPosition, pa.Table]]:
        """(index in the pass, read position after it, its instances) of each document from `start` on.

        Documents are tokenized and cut in batches of `documents_per_batch` (as `create_sentence_order_instances`
        does on a stream), then handed out one by one, each with its instances in the order they were made.
        """
        documents = self._documents_from(start)
        first = start.document
        while batch := self._next_batch(documents):
            self.documents_read += len(batch)
            tokenized = tokenize_batch(
                {"sentences": [sentences for sentences, _ in batch]}, self.tokenizer, self.word_segmenter
            )
            columns = {"sentence_ids": pa.array(tokenized["sentence_ids"], type=TOKENIZED_TYPE)}
            if self.word_segmenter is not None:
                columns["sentence_word_starts"] = pa.array(tokenized["sentence_word_starts"], type=WORD_STARTS_TYPE)
            table = pa.table(columns)
            indices = list(range(first, first + len(batch)))
            instances = instances_batch(table, indices, with_documents=True, **self.instance_options)
            owners = instances.column("document").to_numpy()
            # A stable sort by document: each document's instances together, in the order they were made.
            instances = instances.drop_columns(["document"]).take(np.argsort(owners, kind="stable"))
            bounds = np.searchsorted(np.sort(owners), np.arange(first, first + len(batch) + 1))
            for index, (_, position) in enumerate(batch):
                yield first + index, position, instances.slice(bounds[index], bounds[index + 1] - bounds[index])
            first += len(batch)

    def _documents_from(self, start: StreamPosition) -> Iterator[tuple[list[str], ReadPosition]]:
        """(sentences, read position after it) of each document of the pass from `start` on: of the rows (the
        position's offset is the row index), or of the files in the pass's order."""
        if self.rows is None:
            yield from read_documents(
                self.file_order(start.epoch), self.split_lines, self.sentence_splitter, start.read_position
            )
            return
        for sentences, after in self.rows.documents(self.sentence_splitter, start_row=start.offset):
            yield sentences, (0, after, 0)

    def _next_batch(self, documents: Iterator[tuple[list[str], ReadPosition]]) -> list:
        """The next batch of documents to tokenize and cut: `documents_per_batch` of them; for SOP also no more than
        what ends past `SOP_BATCH_CHARACTERS` characters of text.

        A window ends inside a batch, and a resume reads the rest of that batch beyond its window: with book-length
        documents, a hundred of them would cost more than the window. SOP cuts each document on its own, so its
        batches can be cut anywhere without changing an instance; NSP's batches are its pools and stay whole.
        """
        if self.instance_options["objective"] != "sop":
            return list(itertools.islice(documents, self.documents_per_batch))
        batch, characters = [], 0
        for document in documents:
            batch.append(document)
            characters += sum(map(len, document[0]))
            if len(batch) == self.documents_per_batch or characters >= SOP_BATCH_CHARACTERS:
                break
        return batch

    def _shuffled(self, table: pa.Table, window: StreamPosition) -> pa.Table:
        key = np.random.SeedSequence([self.seed, window.epoch, window.window])
        return table.take(np.random.default_rng(key).permutation(table.num_rows))

    def file_order(self, epoch: int) -> list[str]:
        """The files in the order pass `epoch` reads them: drawn from (seed, pass), as a stream shuffles its shards."""
        if self.rows is not None:
            return []  # one table, read in its order
        paths = [path for path, _, _ in self.signatures]
        order = np.random.default_rng(np.random.SeedSequence([self.seed, epoch])).permutation(len(paths))
        return [paths[index] for index in order]

    # ---- position ---------------------------------------------------------------------------------------------------

    def position(self, epoch: int, consumed: int) -> tuple[StreamPosition, int] | None:
        """(start of the window, instances of it already emitted) after `consumed` instances of pass `epoch`.

        None when the stream cannot tell: it is reading another pass, or has not made the window that holds that
        instance (a reader only runs ahead of what was consumed). Past the end of a pass that has ended (a last,
        partial batch counted whole), the position is the pass's end.
        """
        if self._next is None or self._next.epoch != epoch:
            return None
        index = bisect.bisect_right(self._window_starts, consumed) - 1
        if index >= 0 and consumed < self._window_starts[index] + self._windows[index].size:
            window = self._windows[index].start
            return window, consumed - window.instance
        if consumed == self._next.instance or (self._ended and consumed > self._next.instance):
            return self._next, 0
        return None

    def fingerprint(self) -> str:
        """A hash of all the stream's order depends on: files (path, size, time), reading, tokenizer, instance options
        and window size, word segmenter. A saved position is only valid for a stream with the same fingerprint."""
        if self._fingerprint is None:
            splitter = self.sentence_splitter
            self._fingerprint = Hasher.hash(
                [
                    self.signatures,
                    self.split_lines,
                    f"{splitter.__module__}:{splitter.__qualname__}",
                    tokenizer_fingerprint(self.tokenizer),
                    sorted(self.instance_options.items()),
                    self.window_size,
                    self.documents_per_batch,
                    *([] if self.word_segmenter is None else [self.word_segmenter.name]),
                ]
            )
        return self._fingerprint

    def position_state(self, epoch: int, consumed: int) -> dict[str, Any] | None:
        """What a checkpoint saves to resume after `consumed` instances of pass `epoch` (JSON), or None when the
        position is unknown ([`position`])."""
        found = self.position(epoch, consumed)
        if found is None:
            return None
        window, skip = found
        return {
            "fingerprint": self.fingerprint(),
            "epoch": epoch,
            "consumed": consumed,
            "window": dataclasses.asdict(window),
            "skip": skip,
        }

    def from_the_start(self) -> ResumableInstanceStream:
        """A copy of this stream that reads from the start of its pass, whatever resume is set on this one (which
        stays as it is): for looking at the first instances before training."""
        stream = copy.copy(self)
        stream._resume = None
        return stream

    def resume_from_state(self, state: dict[str, Any], epoch: int, consumed: int) -> str | None:
        """Make the next iteration of pass `epoch` start after `consumed` instances, from a saved [`position_state`].

        Returns why the state cannot be used (and changes nothing) or None. It must be this stream's (same
        fingerprint) and name the same position the caller counted: a mismatch means the data or its options changed.
        """
        try:
            window = StreamPosition(**state["window"])
            skip, fingerprint = int(state["skip"]), state["fingerprint"]
            saved = int(state["epoch"]), int(state["consumed"])
        except (KeyError, TypeError, ValueError) as error:
            return f"the saved stream position is malformed ({error!r})"
        if fingerprint != self.fingerprint():
            return "the training files, tokenizer or data options differ from the run that saved it"
        if saved != (epoch, consumed) or window.epoch != epoch or skip < 0:
            return f"it is the position after {saved[1]} instances of pass {saved[0]}, not {consumed} of pass {epoch}"
        self._resume = (window, skip)
        return None

    def read_again_until(self, epoch: int, consumed: int) -> None:
        """Make the next iteration of pass `epoch` start after `consumed` instances, found by reading the pass from its
        start up to the window that holds them (where no saved position can be used): exact, at the cost of reading
        the instances again; that window is made again when the pass is read."""
        window = StreamPosition(epoch, 0, 0, 0, *FILES_START)
        for start, table, following in self._windows_from(window):
            if consumed < start.instance + table.num_rows:
                self._resume = (start, consumed - start.instance)
                return
            window = following
        self._resume = (window, 0)  # the end of the pass

    def finished_resumed_pass(self) -> bool:
        """Whether the resume set by `resume_from_state` or `read_again_until` is at the end of its pass (nothing left
        to read in it); then it is dropped. A DataLoader fails on a pass without a batch, so the caller resumes at
        the next pass's start instead. Only a resume at a window's start has to look (it makes that window)."""
        if self._resume is None or self._resume[1] > 0:  # a position inside a window: some of it is left
            return False
        window = next(self._windows_from(self._resume[0]), None)
        if window is not None and window[1].num_rows > 0:
            return False
        self._resume = None
        return True
