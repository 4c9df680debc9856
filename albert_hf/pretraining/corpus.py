"""Documents -> instances -> the datasets (or the resumable stream) of a pretraining run.

Text files hold one sentence per line (`--lines_are_paragraphs` splits longer lines into sentences) with a blank line
between documents. The quickstart's corpus (the embedded one, or a file or folder of .txt files with one paragraph
per line) gives documents of the same form.
"""

from __future__ import annotations

import copy
import itertools
import logging
from dataclasses import dataclass
from pathlib import Path

import torch
from datasets import Dataset, IterableDataset

from ..argument_parsing import is_given
from ..data.embedded_corpus import embedded_documents
from ..data.instance_stream import ResumableInstanceStream
from ..data.sentence_order import (
    DocumentRows,
    count_long_sentences,
    count_single_sentence_documents,
    create_sentence_order_instances,
    documents_from_rows,
    load_text_documents,
    read_documents,
    tokenize_documents,
)
from ..data.sentences import resolve_sentence_splitter
from ..data.sources import data_format, expand_data_files, is_saved_dataset, load_rows, source_name
from ..data.word_segmentation import WordSegmenter, describe_word_segmenter, resolve_word_segmenter
from ..errors import UserError
from .arguments import PretrainingDataArguments, QuickstartArguments

logger = logging.getLogger(__name__)


@dataclass
class CorpusStats:
    """What the data pipeline kept and skipped, for the final report."""

    train_documents: int | None = None
    eval_documents: int | None = None
    skipped_single_sentence_documents: int | None = None
    sentences_longer_than_max_seq_length: int | None = None  # truncated to fit, and counted
    train_instances: int | None = None
    eval_instances: int | None = None
    word_boundaries: str | None = None  # where whole-word masking finds words (`describe_word_segmenter`)

    def describe(self) -> str:
        parts = [f"{name.replace('_', ' ')}: {value}" for name, value in vars(self).items() if value is not None]
        return ", ".join(parts)


# --------------------------------------------------------------------------------------------------------------------
# Documents
# --------------------------------------------------------------------------------------------------------------------


def load_documents(data_args: PretrainingDataArguments, seed: int) -> tuple[Dataset | None, Dataset | None]:
    """(training documents, held-out documents) of the sources of the arguments (`source_documents`); with
    --streaming the training documents are None (`training_stream` reads them as it goes)."""
    if not data_args.train_files and not data_args.dataset_name:
        raise UserError(
            "No training text: pass --train_files (text files of one sentence per line with blank lines between "
            "documents, or .jsonl/.json/.csv/.tsv/.parquet files with --text_column) or --dataset_name."
        )
    if data_args.train_files and data_args.dataset_name:
        raise UserError("Pass either --train_files or --dataset_name, not both.")
    train = None
    if not data_args.streaming:  # a stream is read by `training_stream`
        train = source_documents(data_args, data_args.train_files, split="train")
    if data_args.validation_files:
        return train, source_documents(data_args, data_args.validation_files, split="validation")
    if data_args.validation_split_name:
        if not data_args.dataset_name:
            raise UserError("--validation_split_name names a split of --dataset_name: pass --validation_files instead.")
        return train, source_documents(data_args, None, split=data_args.validation_split_name)
    if not data_args.validation_documents:
        return train, None
    if data_args.streaming:
        raise UserError("--streaming cannot hold out documents of a stream: pass --validation_files.")
    return hold_out(train, data_args.validation_documents, seed, "--validation_documents")


def source_documents(data_args: PretrainingDataArguments, files: list[str] | None, split: str) -> Dataset:
    """The documents of `files` (else of --dataset_name, its `split`): text files in the original format (one
    sentence per line, a blank line between documents), or rows of any other source (`documents_from_rows`: each
    row a document, or --document_column's groups, its sentences from the sentence splitter)."""
    source = text_files_or_rows(data_args, files, split)
    if isinstance(source, DocumentRows):
        return documents_from_rows(source, sentence_splitter=data_args.sentence_splitter, cache_dir=data_args.cache_dir)
    return load_text_documents(
        source,
        split_lines=data_args.lines_are_paragraphs,
        sentence_splitter=data_args.sentence_splitter,
        cache_dir=data_args.cache_dir,
        num_proc=data_args.preprocessing_num_workers,
    )


def text_files_or_rows(data_args: PretrainingDataArguments, files: list[str] | None, split: str) -> list | DocumentRows:
    """What `files` (else --dataset_name, its `split`) hold: text files (folders and globs expanded), or the rows
    of any other source (`sources.load_rows`) with the columns that make their documents."""
    if files is not None and not (len(files) == 1 and is_saved_dataset(files[0])):
        expanded = expand_data_files(files)
        if data_format(expanded) == "text":
            return expanded
    rows = load_rows(
        data_files=files,
        dataset_name=None if files is not None else data_args.dataset_name,
        dataset_config_name=None if files is not None else data_args.dataset_config_name,
        split=split,
    )
    read_from: tuple[str, ...] = ()
    if files is not None:
        source = source_name(data_files=files)
        read_from = () if is_saved_dataset(files[0]) else tuple(expand_data_files(files))
    else:
        source = source_name(dataset_name=data_args.dataset_name, dataset_config_name=data_args.dataset_config_name)
        source = f"{source}, split {split!r}"
    return DocumentRows(rows, source, data_args.text_column, data_args.document_column, files=read_from)


def hold_out(documents: Dataset, count: int, seed: int, option: str) -> tuple[Dataset, Dataset]:
    """(training documents, `count` held-out documents drawn with `seed`); `option` names the count in errors."""
    if count >= len(documents):
        raise UserError(f"{option} {count} leaves no training document (the training text holds {len(documents)}).")
    split = documents.train_test_split(test_size=count, seed=seed)
    return split["train"], split["test"]


def quickstart_documents(arguments: QuickstartArguments) -> Dataset:
    """The quickstart's documents: of --corpus (a text file, or the .txt files of a folder, one sentence or
    paragraph per line), else of the embedded sources; the first --max_documents of them."""
    if arguments.corpus:
        source = Path(arguments.corpus)
        files = sorted(source.glob("*.txt")) if source.is_dir() else [source]
        if not files:
            raise UserError(f"--corpus {arguments.corpus}: no .txt files in this folder.")
        documents = load_text_documents(files, split_lines=True)
    else:
        documents = embedded_documents(tuple(arguments.embedded))
    if arguments.max_documents:
        documents = documents.select(range(min(arguments.max_documents, len(documents))))
    if len(documents) < 2:
        raise UserError("The quickstart corpus needs at least two documents (one is held out for evaluation).")
    return documents


def quickstart_held_out_count(documents: Dataset, arguments: QuickstartArguments) -> int:
    """Documents the quickstart holds out: --held_out_fraction of them, at least one."""
    return max(1, round(len(documents) * arguments.held_out_fraction))


# --------------------------------------------------------------------------------------------------------------------
# Instances
# --------------------------------------------------------------------------------------------------------------------


def make_instances(
    documents: Dataset | IterableDataset,
    tokenizer,
    data_args: PretrainingDataArguments,
    seed: int,
    stats: CorpusStats | None = None,
    word_segmenter: WordSegmenter | None = None,
) -> tuple[Dataset | IterableDataset, int | None]:
    """Instances of the documents, and the number of single-sentence documents SOP skipped (None if streaming).

    Sentences longer than an instance are truncated: their number is logged and, with `stats`, recorded there.
    A `word_segmenter` stores the word starts of text without spaces with the instances ([`choose_word_segmenter`]).
    """
    num_proc, per_batch = data_args.preprocessing_num_workers, data_args.documents_per_batch
    tokenized = tokenize_documents(
        documents, tokenizer, num_proc=num_proc, documents_per_batch=per_batch, word_segmenter=word_segmenter
    )
    if isinstance(tokenized, Dataset):  # never truncate silently: the report counts what was cut
        long_sentences = count_long_sentences(tokenized, data_args.max_seq_length)
        if long_sentences and is_given(data_args, "max_seq_length"):
            logger.warning(
                "%d sentences are longer than --max_seq_length %d: they are truncated.",
                long_sentences,
                data_args.max_seq_length,
            )
        elif long_sentences:  # the recipe's length, not the user's: counted (and reported), not a warning
            logger.info(
                "%d sentences are longer than the recipe's sequences of %d tokens: they are truncated.",
                long_sentences,
                data_args.max_seq_length,
            )
        if stats is not None:
            stats.sentences_longer_than_max_seq_length = long_sentences
    skipped = None
    if isinstance(tokenized, Dataset) and data_args.objective == "sop":
        skipped = count_single_sentence_documents(tokenized)
    instances = create_sentence_order_instances(
        tokenized,
        cls_token_id=tokenizer.cls_token_id,
        sep_token_id=tokenizer.sep_token_id,
        max_seq_length=data_args.max_seq_length,
        short_seq_prob=data_args.short_seq_prob,
        dupe_factor=data_args.dupe_factor,
        objective=data_args.objective,
        seed=seed,
        num_proc=num_proc,
        documents_per_batch=per_batch,
    )
    return instances, skipped


def check_instances_made(instances: Dataset, documents: Dataset, skipped: int | None, what: str) -> None:
    """Refuse, before training, a set of documents that gave no instance, with what was read and why it gave none
    (instead of the sampler's "num_samples should be a positive integer" once training starts)."""
    if len(instances):
        return
    reasons = [f"{len(documents)} documents read"]
    if skipped is not None:
        reasons.append(f"{skipped} of them with fewer than two sentences, which sentence-order prediction skips")
    raise UserError(
        f"The {what} text gave no pretraining instance ({'; '.join(reasons)}). Each instance is cut from one document "
        "of at least two sentences: put one sentence per line with a blank line between documents, or pass "
        "--lines_are_paragraphs for text with one paragraph per line."
    )


def training_stream(
    data_args: PretrainingDataArguments, tokenizer, seed: int, word_segmenter: WordSegmenter | None = None
) -> ResumableInstanceStream:
    """The --streaming training instances: read lazily, shuffled by windows of --shuffle_buffer_size instances, and
    resumable from the position each checkpoint saves (`ResumableInstanceStream`)."""
    return ResumableInstanceStream(
        stream_source(data_args),
        tokenizer,
        window_size=data_args.shuffle_buffer_size,
        seed=seed,
        split_lines=data_args.lines_are_paragraphs,
        sentence_splitter=data_args.sentence_splitter,
        max_seq_length=data_args.max_seq_length,
        short_seq_prob=data_args.short_seq_prob,
        dupe_factor=data_args.dupe_factor,
        objective=data_args.objective,
        documents_per_batch=data_args.documents_per_batch,
        word_segmenter=word_segmenter,
    )


def stream_source(data_args: PretrainingDataArguments) -> list | DocumentRows:
    """What --streaming reads: the training text files, or the rows of a table (downloaded or read into Arrow
    first, then cut into instances as training goes, from a row index a checkpoint saves)."""
    return text_files_or_rows(data_args, data_args.train_files, split="train")


# What is read to tell the script of a corpus, when choosing its word segmenter: its first documents, and at most so
# many of their sentences.
SCRIPT_SAMPLE_DOCUMENTS = 200
SCRIPT_SAMPLE_SENTENCES = 2000


def choose_word_segmenter(
    data_args: PretrainingDataArguments, documents: Dataset | None, say=logger.info, tokenizer=None
) -> WordSegmenter | None:
    """The word segmenter of --word_segmenter, by default the one a word-bounded `tokenizer` carries, else chosen
    from the script of the first training sentences (of `documents`, or of the first training file or rows when
    streaming); says which in the log (without one, the rule of `tokenizer`'s vocabulary)."""
    if documents is not None:
        first = documents.select(range(min(SCRIPT_SAMPLE_DOCUMENTS, len(documents))))
        sentences = [sentence for document in first["sentences"] for sentence in document]
    else:
        source, splitter = stream_source(data_args), resolve_sentence_splitter(data_args.sentence_splitter)
        if isinstance(source, DocumentRows):
            source.check()
            read = source.documents(splitter)
        else:
            read = read_documents(source, data_args.lines_are_paragraphs, splitter)
        sentences = [
            sentence for document, _ in itertools.islice(read, SCRIPT_SAMPLE_DOCUMENTS) for sentence in document
        ]
    segmenter = resolve_word_segmenter(data_args.word_segmenter, sentences[:SCRIPT_SAMPLE_SENTENCES], tokenizer)
    chosen = ""
    if data_args.word_segmenter in (None, "auto"):
        carried = getattr(tokenizer, "word_segmenter", None)
        chosen = " (the tokenizer's: its pieces stop at them)" if carried else " (chosen from the script of the text)"
    say(f"Whole-word masking: word boundaries from {describe_word_segmenter(segmenter, tokenizer)}{chosen}")
    return segmenter


def prepare_datasets(
    data_args: PretrainingDataArguments,
    tokenizer,
    seed: int,
    documents: tuple[Dataset, Dataset | None] | None = None,
    say=logger.info,
) -> tuple[Dataset | ResumableInstanceStream, Dataset | None, CorpusStats]:
    """Training and evaluation instances, and the counts for the report; of the files of `data_args`, or of
    `documents` (training, held-out) when given."""
    train_documents, eval_documents = load_documents(data_args, seed) if documents is None else documents
    segmenter = choose_word_segmenter(data_args, train_documents, say=say, tokenizer=tokenizer)
    stats = CorpusStats(word_boundaries=describe_word_segmenter(segmenter, tokenizer))
    if train_documents is None:
        train = training_stream(data_args, tokenizer, seed, segmenter)
    else:
        train, stats.skipped_single_sentence_documents = make_instances(
            train_documents, tokenizer, data_args, seed, stats, segmenter
        )
        check_instances_made(train, train_documents, stats.skipped_single_sentence_documents, "training")
        stats.train_documents, stats.train_instances = len(train_documents), len(train)
    evaluation = None
    if eval_documents is not None:
        # Cut once (more passes would only pair the same held-out sentences again), with a different seed from
        # training, so that held-out pairs are not cut like any training pass.
        once = copy.copy(data_args)  # a copy keeps the record of which options the user gave (`is_given`)
        once.dupe_factor = 1
        evaluation, skipped = make_instances(eval_documents, tokenizer, once, seed + 1, word_segmenter=segmenter)
        check_instances_made(evaluation, eval_documents, skipped, "held-out")
        if data_args.max_eval_instances is not None:
            evaluation = evaluation.select(range(min(data_args.max_eval_instances, len(evaluation))))
        stats.eval_documents, stats.eval_instances = len(eval_documents), len(evaluation)
    return train, evaluation, stats


def first_features(dataset, count: int) -> list[dict]:
    """The first `count` training instances, in the order of the dataset (a stream is read from a copy of it, so
    that its own position, and a resume set on it, stay as they are)."""
    if isinstance(dataset, ResumableInstanceStream):
        dataset = dataset.from_the_start()
    if isinstance(dataset, torch.utils.data.IterableDataset):
        return list(itertools.islice(iter(dataset), count))
    return [dataset[i] for i in range(min(count, len(dataset)))]
