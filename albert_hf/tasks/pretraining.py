"""Pretrain ALBERT (MLM + SOP) with Trainer: `albert-hf pretrain`, `examples/pretraining/run_pretraining.py`, and
the offline `albert-hf quickstart`.

    albert-hf pretrain --recipe laptop --train_files corpus.txt --validation_documents 20 \\
        --tokenizer_name_or_path spiece.model --output_dir out/albert-small

Text files hold one sentence per line (`--lines_are_paragraphs` splits longer lines into sentences) with a blank
line between documents. `--recipe paper` is the paper's setup (ALBERT-base, batch 4096 through gradient
accumulation, LAMB at 0.00176, 3,125 warmup steps, 125k steps, length 512); `laptop` and `tiny` are small ones.
Any argument given on the command line wins over the recipe.
"""

from __future__ import annotations

import argparse
import itertools
import logging
import math
import os
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import torch
from datasets import Dataset, IterableDataset
from transformers import set_seed
from transformers.trainer_callback import ProgressCallback

from ..configuration import AlbertConfig
from ..data.collator import DataCollatorForSOP
from ..data.embedded_corpus import DEFAULT_EMBEDDED_SOURCES, EMBEDDED_SOURCES, embedded_documents
from ..data.instance_stream import ResumableInstanceStream
from ..data.masking_stats import masking_statistics
from ..data.pretraining import (
    cjk_character_share,
    count_long_sentences,
    count_single_sentence_documents,
    create_sentence_order_instances,
    file_signatures,
    load_text_documents,
    read_documents,
    resolve_sentence_splitter,
    tokenize_documents,
)
from ..data.word_segmentation import WordSegmenter, describe_word_segmenter, resolve_word_segmenter
from ..distributed import check_lamb_engine, launched_world_size
from ..errors import MissingFileError, UserError
from ..modeling import AlbertForPreTraining
from ..training.reliability import resolve_resume_checkpoint
from ..training.sanity import check_batch, check_sequence_length, check_tokenizer_matches_config
from ..training.trainer import AlbertPretrainingTrainer, PretrainingArguments
from .common import (
    ModelArguments,
    build_config,
    build_model,
    fill_unset,
    given_options,
    load_tokenizer,
    parse_args,
    start_job,
)

logger = logging.getLogger(__name__)

# Defaults per recipe; anything given on the command line wins. Keys are fields of the argument dataclasses.
RECIPES: dict[str, dict] = {
    # Lan et al. (2020), section 4.1: ALBERT-base, 125k steps of batch 4096 at length 512, LAMB 0.00176.
    "paper": dict(
        config_preset="base-v2",
        max_seq_length=512,
        max_predictions_per_seq=20,
        global_batch_size=4096,
        per_device_train_batch_size=32,
        learning_rate=0.00176,
        warmup_steps=3125,
        max_steps=125_000,
        optimizer="lamb",
        lr_schedule="albert",
        weight_decay=0.01,
        adam_epsilon=1e-6,
        max_grad_norm=1.0,
    ),
    # A small ALBERT (6 layers of width 256, one shared group) that trains on a laptop CPU/GPU in hours.
    "laptop": dict(
        config_preset="base-v2",
        config_overrides="hidden_size=256,num_attention_heads=4,intermediate_size=1024,num_hidden_layers=6",
        max_seq_length=128,
        max_predictions_per_seq=20,
        global_batch_size=128,
        per_device_train_batch_size=32,
        learning_rate=2e-3,
        warmup_steps=500,
        max_steps=20_000,
        optimizer="lamb",
        lr_schedule="albert",
    ),
    # The quickstart's model: a few minutes on two CPU cores.
    "tiny": dict(
        config_preset="base-v2",
        config_overrides="embedding_size=64,hidden_size=128,num_attention_heads=4,intermediate_size=512,"
        "num_hidden_layers=4,max_position_embeddings=128",
        max_seq_length=128,
        max_predictions_per_seq=20,
        global_batch_size=32,
        per_device_train_batch_size=32,
        learning_rate=5e-3,
        warmup_steps=30,
        max_steps=300,
        optimizer="lamb",
        lr_schedule="albert",
    ),
}


@dataclass
class PretrainingDataArguments:
    train_files: list[str] | None = field(
        default=None, metadata={"help": "Text files: one sentence per line, a blank line between documents."}
    )
    validation_files: list[str] | None = field(default=None, metadata={"help": "Held-out text files, same format."})
    validation_documents: int = field(
        default=0, metadata={"help": "Without --validation_files: hold out this many training documents."}
    )
    lines_are_paragraphs: bool = field(
        default=False, metadata={"help": "Split each line into sentences (files with one paragraph per line)."}
    )
    sentence_splitter: str | None = field(
        default=None,
        metadata={
            "help": "What --lines_are_paragraphs splits with: 'default' (rules for English, Japanese and Chinese "
            "punctuation) or 'package.module:function' taking a text and returning its sentences."
        },
    )
    word_segmenter: str | None = field(
        default=None,
        metadata={
            "help": "Where whole-word masking finds words: 'auto' (the default: from the text's script, fugashi/"
            "unidic-lite for Japanese, jieba for Chinese, SentencePiece's '▁' otherwise), 'pieces' (always '▁'), "
            "'fugashi', 'jieba', or 'package.module:function' taking a text and returning its words."
        },
    )
    max_seq_length: int = field(default=512, metadata={"help": "Instance length, [CLS] and [SEP]s included."})
    short_seq_prob: float = field(default=0.1, metadata={"help": "Probability of a shorter random target length."})
    dupe_factor: int = field(default=1, metadata={"help": "Passes over the corpus with fresh sentence pairs."})
    objective: Literal["sop", "nsp"] = field(
        default="sop", metadata={"help": "sop: sentence order (ALBERT); nsp: next sentence (BERT, for ablations)."}
    )
    masked_lm_prob: float = field(default=0.15, metadata={"help": "Fraction of tokens to predict."})
    max_predictions_per_seq: int = field(default=20, metadata={"help": "Cap on predictions per sequence."})
    max_ngram: int = field(default=3, metadata={"help": "Longest masked n-gram, in words."})
    pad_to_multiple_of: int | None = field(default=None, metadata={"help": "Pad batches to a multiple of this."})
    preprocessing_num_workers: int | None = field(default=None, metadata={"help": "Processes for datasets.map."})
    documents_per_batch: int = field(default=100, metadata={"help": "Documents per datasets.map batch."})
    streaming: bool = field(
        default=False,
        metadata={"help": "Read and cut the training text lazily (needs --max_steps and --validation_files)."},
    )
    shuffle_buffer_size: int = field(
        default=10_000,
        metadata={
            "help": "With --streaming: instances shuffled together. The stream is shuffled by windows of at least this "
            "many instances (whole batches of documents), each in an order drawn from the seed, the pass and the "
            "window, so that a resume starts in its window instead of reading the trained batches again."
        },
    )
    max_eval_instances: int | None = field(default=None, metadata={"help": "Evaluate on at most this many."})
    language: list[str] | None = field(
        default=None,
        metadata={
            "help": "Language codes of the training text, for the model card (default: the language the "
            "vocabulary's script names, e.g. ja for kana and kanji; else en)."
        },
    )
    cache_dir: str | None = field(default=None, metadata={"help": "datasets cache folder."})


@dataclass
class RecipeArguments:
    recipe: Literal["paper", "laptop", "tiny"] | None = field(
        default=None, metadata={"help": "Default hyperparameters: paper, laptop or tiny (see RECIPES)."}
    )
    global_batch_size: int | None = field(
        default=None,
        metadata={"help": "Sequences per optimizer step over all devices; sets --gradient_accumulation_steps."},
    )


ARGUMENT_CLASSES = (ModelArguments, PretrainingDataArguments, RecipeArguments, PretrainingArguments)


def parse_pretraining_args(argv: list[str] | None = None) -> tuple:
    """(model, data, recipe, training) arguments, parsed as every job parses them (`common.parse_args`); then the
    recipe fills the fields the user did not give, and --global_batch_size sets the gradient accumulation steps."""
    parsed = parse_args(ARGUMENT_CLASSES, argv)
    model_args, data_args, recipe_args, training_args = parsed
    if recipe_args.recipe:
        fill_unset(parsed, RECIPES[recipe_args.recipe])
    if recipe_args.global_batch_size:
        # The launcher's process count: the job joins the process group later (`start_job`), and refuses a launch
        # where this count and Trainer's world size differ.
        training_args.gradient_accumulation_steps = accumulation_steps(
            recipe_args.global_batch_size, training_args.per_device_train_batch_size, launched_world_size()
        )
    return model_args, data_args, recipe_args, training_args


def accumulation_steps(global_batch_size: int, per_device_batch_size: int, world_size: int) -> int:
    """Gradient accumulation steps that make `global_batch_size` from the per-device batches of all devices."""
    per_step = per_device_batch_size * world_size
    if global_batch_size % per_step:
        raise UserError(
            f"--global_batch_size {global_batch_size} is not a multiple of per_device_train_batch_size "
            f"({per_device_batch_size}) x devices ({world_size})."
        )
    return global_batch_size // per_step


# --------------------------------------------------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------------------------------------------------


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


def load_documents(data_args: PretrainingDataArguments, seed: int) -> tuple[Dataset | None, Dataset | None]:
    """(training documents, held-out documents) from the text files of the arguments; with --streaming the training
    documents are None (`training_stream` reads them as it goes)."""
    if not data_args.train_files:
        raise UserError("No training text: pass --train_files (one sentence per line, blank lines between documents).")
    read = dict(
        split_lines=data_args.lines_are_paragraphs,
        sentence_splitter=data_args.sentence_splitter,
        cache_dir=data_args.cache_dir,
    )
    train = None
    if not data_args.streaming:  # a stream is read by `training_stream`
        train = load_text_documents(data_args.train_files, num_proc=data_args.preprocessing_num_workers, **read)
    if data_args.validation_files:
        return train, load_text_documents(data_args.validation_files, **read)
    if not data_args.validation_documents:
        return train, None
    if data_args.streaming:
        raise UserError("--streaming cannot hold out documents of a stream: pass --validation_files.")
    if data_args.validation_documents >= len(train):
        raise UserError(
            f"--validation_documents {data_args.validation_documents} leaves no training document "
            f"(the training files hold {len(train)})."
        )
    split = train.train_test_split(test_size=data_args.validation_documents, seed=seed)
    return split["train"], split["test"]


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
        if long_sentences:
            logger.warning(
                "%d sentences are longer than --max_seq_length %d: they are truncated.",
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


def training_stream(
    data_args: PretrainingDataArguments, tokenizer, seed: int, word_segmenter: WordSegmenter | None = None
) -> ResumableInstanceStream:
    """The --streaming training instances: read lazily, shuffled by windows of --shuffle_buffer_size instances, and
    resumable from the position each checkpoint saves (`ResumableInstanceStream`)."""
    return ResumableInstanceStream(
        data_args.train_files,
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


# What is read to tell the script of a corpus, when choosing its word segmenter: its first documents, and at most so
# many of their sentences.
SCRIPT_SAMPLE_DOCUMENTS = 200
SCRIPT_SAMPLE_SENTENCES = 2000


def choose_word_segmenter(
    data_args: PretrainingDataArguments, documents: Dataset | None, say=logger.info
) -> WordSegmenter | None:
    """The word segmenter of --word_segmenter, by default chosen from the script of the first training sentences
    (of `documents`, or of the first training file when streaming); says which in the log."""
    if documents is not None:
        first = documents.select(range(min(SCRIPT_SAMPLE_DOCUMENTS, len(documents))))
        sentences = [sentence for document in first["sentences"] for sentence in document]
    else:
        paths = [path for path, _, _ in file_signatures(data_args.train_files)]
        splitter = resolve_sentence_splitter(data_args.sentence_splitter)
        read = read_documents(paths, data_args.lines_are_paragraphs, splitter)
        sentences = [
            sentence for document, _ in itertools.islice(read, SCRIPT_SAMPLE_DOCUMENTS) for sentence in document
        ]
    segmenter = resolve_word_segmenter(data_args.word_segmenter, sentences[:SCRIPT_SAMPLE_SENTENCES])
    chosen = "" if data_args.word_segmenter not in (None, "auto") else " (chosen from the script of the text)"
    say(f"Whole-word masking: word boundaries from {describe_word_segmenter(segmenter)}{chosen}")
    return segmenter


def prepare_datasets(
    data_args: PretrainingDataArguments, tokenizer, seed: int
) -> tuple[Dataset | ResumableInstanceStream, Dataset | None, CorpusStats]:
    """Training and evaluation instances, and the counts for the report."""
    train_documents, eval_documents = load_documents(data_args, seed)
    segmenter = choose_word_segmenter(data_args, train_documents)
    stats = CorpusStats(word_boundaries=describe_word_segmenter(segmenter))
    if train_documents is None:
        train = training_stream(data_args, tokenizer, seed, segmenter)
    else:
        train, stats.skipped_single_sentence_documents = make_instances(
            train_documents, tokenizer, data_args, seed, stats, segmenter
        )
        stats.train_documents, stats.train_instances = len(train_documents), len(train)
    evaluation = None
    if eval_documents is not None:
        # A different seed from training, so that held-out pairs are not cut like any training pass.
        evaluation, _ = make_instances(eval_documents, tokenizer, data_args, seed + 1, word_segmenter=segmenter)
        if data_args.max_eval_instances is not None:
            evaluation = evaluation.select(range(min(data_args.max_eval_instances, len(evaluation))))
        stats.eval_documents, stats.eval_instances = len(eval_documents), len(evaluation)
    return train, evaluation, stats


# --------------------------------------------------------------------------------------------------------------------
# Model, Trainer, main
# --------------------------------------------------------------------------------------------------------------------


def build_pretraining_model(
    model_args: ModelArguments, tokenizer, max_seq_length: int, sanity_checks: bool = True
) -> AlbertForPreTraining:
    """A fresh ALBERT sized to the tokenizer, or the checkpoint of --model_name_or_path, which must fit the tokenizer:
    same vocabulary and special ids (`check_tokenizer_matches_config`), never silently overridden. Without
    `sanity_checks`, a checkpoint's config takes the tokenizer's special ids and nothing is compared."""
    special = dict(
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.cls_token_id,
        eos_token_id=tokenizer.sep_token_id,
        mask_token_id=tokenizer.mask_token_id,
    )
    if model_args.model_name_or_path:
        config = build_config(model_args, **({} if sanity_checks else special))
        config_source = f"the config of {model_args.model_name_or_path}"
    else:
        config = build_config(model_args, vocab_size=len(tokenizer), **special)
        config_source = f"the {model_args.config_preset} config"
    if sanity_checks:
        check_tokenizer_matches_config(tokenizer, config, config_source)
        check_sequence_length(max_seq_length, config, config_source)
    return build_model(AlbertForPreTraining, model_args, config)


def build_trainer(
    model: AlbertForPreTraining,
    tokenizer,
    data_args: PretrainingDataArguments,
    training_args: PretrainingArguments,
    train_dataset,
    eval_dataset=None,
) -> AlbertPretrainingTrainer:
    collator = DataCollatorForSOP(
        tokenizer,
        masked_lm_prob=data_args.masked_lm_prob,
        max_predictions_per_seq=data_args.max_predictions_per_seq,
        max_ngram=data_args.max_ngram,
        pad_to_multiple_of=data_args.pad_to_multiple_of,
        seed=training_args.seed,
    )
    return AlbertPretrainingTrainer(
        model=model,
        args=training_args,
        data_collator=collator,
        train_dataset=train_dataset,
        eval_dataset=eval_dataset,
        processing_class=tokenizer,
    )


def first_features(dataset, count: int) -> list[dict]:
    """The first `count` training instances, in the order of the dataset (a stream is read from a copy of it, so
    that its own position, and a resume set on it, stay as they are)."""
    if isinstance(dataset, ResumableInstanceStream):
        dataset = dataset.from_the_start()
    if isinstance(dataset, torch.utils.data.IterableDataset):
        return list(itertools.islice(iter(dataset), count))
    return [dataset[i] for i in range(min(count, len(dataset)))]


def check_first_batch(trainer: AlbertPretrainingTrainer, features: list[dict], num_sequences: int = 8) -> None:
    """Collate the first training sequences (of `features`, the first instances) as training will and check the
    batch (`check_batch`)."""
    if features:
        batch = trainer.data_collator(features[:num_sequences])
        check_batch(batch, trainer.processing_class, trainer.model.config)


# Training instances the masking statistics of the log are measured on: the first ones, read once at the start for
# the sanity check of a batch as well.
MASKING_STATISTICS_INSTANCES = 1000


def masking_log(trainer: AlbertPretrainingTrainer, features: list[dict], source: str) -> tuple[str, str | None]:
    """(the masking line of the log, a warning or None) for the first training instances (`features`): the share of
    tokens masked, the pieces per word, where words come from (`MaskingStatistics`)."""
    stats = masking_statistics(trainer.data_collator, features, source)
    return stats.describe(), stats.warning()


def main(argv: list[str] | None = None) -> int:
    """`albert-hf pretrain`: pretrain ALBERT on text files, save model + tokenizer, report MLM/SOP metrics."""
    model_args, data_args, recipe_args, training_args = parse_pretraining_args(argv)
    check_lamb_engine(training_args)  # before any data or model work
    # transformers at WARNING only: its INFO lines at every checkpoint save (config, weights, paths) would flood a run
    # that saves hundreds of times.
    start_job(training_args, transformers_level=logging.WARNING, model_args=model_args)
    if data_args.streaming and training_args.max_steps <= 0:
        raise UserError("--streaming needs --max_steps (a stream has no length to count epochs in).")
    if data_args.streaming and training_args.dataloader_num_workers > 1:
        raise UserError(
            "--streaming reads the training text in one process (its position is saved with each checkpoint): "
            "--dataloader_num_workers must be 0 or 1."
        )
    set_seed(training_args.seed)
    tokenizer = load_tokenizer(model_args)
    train_dataset, eval_dataset, stats = prepare_datasets(data_args, tokenizer, training_args.seed)
    logger.info("Pretraining data: %s", stats.describe())
    model = build_pretraining_model(model_args, tokenizer, data_args.max_seq_length, training_args.sanity_checks)
    trainer = build_trainer(model, tokenizer, data_args, training_args, train_dataset, eval_dataset)
    first = first_features(trainer.train_dataset, MASKING_STATISTICS_INSTANCES)
    if training_args.sanity_checks:
        check_first_batch(trainer, first)
    if trainer.is_world_process_zero():
        line, warning = masking_log(trainer, first, stats.word_boundaries)
        logger.info(line)
        if warning:
            logger.warning(warning)

    # --resume_from_checkpoint latest: the newest complete checkpoint of --output_dir, so one command restarts a job.
    checkpoint = resolve_resume_checkpoint(training_args.resume_from_checkpoint, training_args.output_dir)
    result = trainer.train(resume_from_checkpoint=checkpoint)
    trainer.save_model()  # model + tokenizer, loadable with from_pretrained
    trainer.log_metrics("train", result.metrics)
    trainer.save_metrics("train", result.metrics)
    if eval_dataset is not None:
        metrics = trainer.evaluate()
        trainer.log_metrics("eval", metrics)
        trainer.save_metrics("eval", metrics)
    trainer.save_state()
    if trainer.is_world_process_zero():
        write_pretraining_card(trainer, tokenizer, data_args.language)
        print(f"Pretraining data: {stats.describe()}")
        print(f"Model and tokenizer saved to {training_args.output_dir}")
    return 0


def write_pretraining_card(trainer: AlbertPretrainingTrainer, tokenizer, language: list[str] | None = None) -> None:
    """README.md beside the saved model: architecture, tokenizer normalization, language (`card_language`: given,
    else read off the vocabulary) and the training recipe. A user's own corpus has no Hub dataset id for a
    model-index, so the held-out figures stay in eval_results.json."""
    from ..hub import CardInfo, write_model_card

    write_model_card(
        trainer.args.output_dir,
        trainer.accelerator.unwrap_model(trainer.model),
        info=CardInfo(language=language),
        training_args=trainer.args,
        tokenizer=tokenizer,
    )


# --------------------------------------------------------------------------------------------------------------------
# Quickstart
# --------------------------------------------------------------------------------------------------------------------


def corpus_documents(path: str) -> Dataset:
    """Documents of a text file, or of the .txt files of a folder (one sentence or paragraph per line)."""
    source = Path(path)
    files = sorted(source.glob("*.txt")) if source.is_dir() else [source]
    if not files:
        raise MissingFileError(f"--corpus {path}: no .txt files in this folder.")
    return load_text_documents(files, split_lines=True)


# The quickstart's settings, chosen by measurement (benchmarks/quickstart_sweep.py, docs/pretraining.md); --fast swaps
# in the smoke-test column (any option given explicitly still wins).
# The tiny recipe's ALBERT with 2 (shared) layers instead of 4: per second of CPU, more steps beat more depth here.
QUICKSTART_MODEL = RECIPES["tiny"]["config_overrides"].replace("num_hidden_layers=4", "num_hidden_layers=2")
QUICKSTART_DEFAULTS = dict(
    max_steps=2000,
    vocab_size=2000,
    max_seq_length=64,
    batch_size=32,
    max_documents=None,
    model_overrides=QUICKSTART_MODEL,
    learning_rate=5e-3,
    warmup_fraction=0.1,
    dupe_factor=10,
    embedded=list(DEFAULT_EMBEDDED_SOURCES),
)
FAST_DEFAULTS = dict(
    max_steps=12,
    vocab_size=1000,
    max_seq_length=64,
    batch_size=8,
    max_documents=24,
    model_overrides="embedding_size=32,hidden_size=64,num_attention_heads=2,intermediate_size=128,"
    "num_hidden_layers=2,max_position_embeddings=64",
    learning_rate=5e-3,
    warmup_fraction=0.1,
    dupe_factor=1,
    embedded=["language-reference"],
)


def quickstart_arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="albert-hf quickstart",
        description="Train a tokenizer and pretrain a small ALBERT offline, evaluate it on held-out documents against "
        "the frequency and majority baselines, save it, and plot its learning curves.",
    )
    parser.add_argument(
        "--corpus",
        help="a text file or folder of .txt files (default: the embedded corpus, the "
        "prose of Python's language reference and of the standard library's docstrings)",
    )
    parser.add_argument("--embedded", nargs="+", choices=EMBEDDED_SOURCES, help="the embedded corpus' sources")
    parser.add_argument("--output_dir", default="quickstart-output")
    parser.add_argument(
        "--fast",
        action="store_true",
        help="a smoke run of a few seconds of training: "
        + ", ".join(f"{key}={value}" for key, value in FAST_DEFAULTS.items() if key != "model_overrides"),
    )
    parser.add_argument("--max_steps", type=int)
    parser.add_argument("--vocab_size", type=int)
    parser.add_argument("--max_seq_length", type=int)
    parser.add_argument("--batch_size", type=int)
    parser.add_argument("--learning_rate", type=float, help="LAMB's peak learning rate")
    parser.add_argument("--warmup_fraction", type=float, help="share of the steps spent warming up")
    parser.add_argument(
        "--dupe_factor",
        type=int,
        help="passes over the training documents, each cut into fresh "
        "sentence pairs (instances are drawn afresh for each pass instead of repeating)",
    )
    parser.add_argument("--max_documents", type=int, help="use only this many documents of the corpus")
    parser.add_argument("--model_overrides", help="AlbertConfig fields, as --config_overrides of `pretrain`")
    parser.add_argument(
        "--language",
        nargs="+",
        help="language codes of the corpus, for the model card (default: read off the vocabulary's script; else en)",
    )
    parser.add_argument(
        "--word_segmenter",
        help="where whole-word masking finds words, as for `albert-hf pretrain` (default: from the text's script)",
    )
    parser.add_argument("--held_out_fraction", type=float, default=0.1)
    parser.add_argument("--evaluations", type=int, default=5, help="points on the held-out learning curve")
    parser.add_argument("--seed", type=int, default=42)
    argv = list(sys.argv[1:] if argv is None else argv)
    parser.set_defaults(**QUICKSTART_DEFAULTS)
    args = parser.parse_args(argv)
    given = given_options(parser, argv)
    if args.fast:  # a preset: it fills the options the user did not give, as presets and recipes of the other jobs do
        vars(args).update({name: value for name, value in FAST_DEFAULTS.items() if name not in given})
    # A corpus of Chinese/Japanese/Korean text gets a larger vocabulary unless the user chose one.
    args.vocab_size_given = "vocab_size" in given
    for name in ("max_steps", "vocab_size", "max_seq_length", "batch_size", "dupe_factor", "evaluations"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1, got {getattr(args, name)}.")
    if not 0.0 < args.held_out_fraction < 1.0:
        parser.error(f"--held_out_fraction must be between 0 and 1, got {args.held_out_fraction}.")
    if not 0.0 <= args.warmup_fraction < 1.0:
        parser.error(f"--warmup_fraction must be in [0, 1), got {args.warmup_fraction}.")
    return args


@dataclass
class QuickstartResult:
    """What a quickstart run produced: the trainer (model, state, log history), held-out metrics and baselines."""

    trainer: AlbertPretrainingTrainer
    metrics: dict[str, float]
    baselines: HeldOutBaselines
    train_documents: int
    eval_documents: int
    train_instances: int
    eval_instances: int
    skipped_documents: int | None
    seconds: float


def quickstart_documents(args: argparse.Namespace) -> Dataset:
    documents = corpus_documents(args.corpus) if args.corpus else embedded_documents(tuple(args.embedded))
    if args.max_documents:
        documents = documents.select(range(min(args.max_documents, len(documents))))
    if len(documents) < 2:
        raise UserError("The quickstart corpus needs at least two documents (one is held out for evaluation).")
    return documents


def run_quickstart(args: argparse.Namespace, quiet: bool = False) -> QuickstartResult:
    """Tokenizer, instances, pretraining and held-out evaluation of the quickstart; saves model + tokenizer."""
    from ..vocabulary import train_tokenizer

    say = (lambda message: None) if quiet else print
    started = time.time()
    set_seed(args.seed)
    output_dir = Path(args.output_dir)
    documents = quickstart_documents(args)
    held_out = max(1, round(len(documents) * args.held_out_fraction))
    split = documents.train_test_split(test_size=held_out, seed=args.seed)

    sentences = Dataset.from_dict({"text": [s for document in split["train"]["sentences"] for s in document]})
    tokenizer_options = quickstart_tokenizer_options(sentences["text"], args.vocab_size, args.vocab_size_given, say)
    say(f"[1/4] Training a {tokenizer_options['vocab_size']}-piece SentencePiece tokenizer")
    try:
        tokenizer = train_tokenizer(sentences, output_dir, show_progress=False, **tokenizer_options)
    except ValueError as error:  # SentencePiece cannot learn more pieces than a small corpus holds
        raise UserError(f"{error}\nPass a smaller --vocab_size for this corpus.") from error

    say("[2/4] Cutting documents into sentence-order instances")
    data_args = PretrainingDataArguments(
        max_seq_length=args.max_seq_length, dupe_factor=args.dupe_factor, word_segmenter=args.word_segmenter
    )
    segmenter = choose_word_segmenter(data_args, split["train"], say=lambda line: say(f"      {line}"))
    train_dataset, skipped = make_instances(split["train"], tokenizer, data_args, args.seed, word_segmenter=segmenter)
    eval_args = PretrainingDataArguments(max_seq_length=args.max_seq_length)
    eval_dataset, _ = make_instances(split["test"], tokenizer, eval_args, args.seed + 1, word_segmenter=segmenter)

    say("[3/4] Pretraining a small ALBERT (MLM + SOP, LAMB)")
    model = build_pretraining_model(
        ModelArguments(config_preset="base-v2", config_overrides=args.model_overrides), tokenizer, args.max_seq_length
    )
    trainer = build_trainer(
        model, tokenizer, data_args, _quickstart_training_arguments(args, quiet), train_dataset, eval_dataset
    )
    first = first_features(train_dataset, MASKING_STATISTICS_INSTANCES)
    line, warning = masking_log(trainer, first, describe_word_segmenter(segmenter))
    say(f"      {line}")
    if warning:
        logger.warning(warning)
    if not quiet:
        trainer.remove_callback(ProgressCallback)
        trainer.add_callback(ProgressBarsOnly)
    trainer.train()
    metrics = trainer.evaluate()
    baselines = held_out_baselines(trainer, eval_dataset)
    trainer.save_model()
    trainer.save_state()
    write_pretraining_card(trainer, tokenizer, args.language)
    return QuickstartResult(
        trainer=trainer,
        metrics=metrics,
        baselines=baselines,
        train_documents=len(split["train"]),
        eval_documents=len(split["test"]),
        train_instances=len(train_dataset),
        eval_instances=len(eval_dataset),
        skipped_documents=skipped,
        seconds=time.time() - started,
    )


def quickstart_main(argv: list[str] | None = None) -> int:
    """`albert-hf quickstart`: tokenizer + small ALBERT from scratch on an offline corpus, in a few minutes."""
    started = time.time()
    args = quickstart_arguments(argv)
    result = run_quickstart(args)
    print("[4/4] Writing the learning curves")
    plot_path = plot_learning_curves(
        result.trainer.state.log_history, Path(args.output_dir) / "learning_curves.png", result.baselines
    )
    print(quickstart_report(args, result, plot_path, time.time() - started))
    return 0


# SentencePiece's advice for languages with a large character set (Japanese, Chinese): cover 99.95% of the characters
# rather than 99.995%, the rest becoming <unk>. Such a corpus also needs more pieces than an English one: a few
# thousand characters each take a piece before any word can.
CJK_CHARACTER_COVERAGE = 0.9995


def quickstart_tokenizer_options(texts: list[str], vocab_size: int, vocab_size_given: bool, say=print) -> dict:
    """train_tokenizer options for the corpus: the ALBERT recipe, or for mostly Chinese/Japanese/Korean text a
    character coverage of 0.9995 and (unless --vocab_size was given) 1.5 times as many pieces as the characters
    that coverage keeps. Accent stripping is chosen by train_tokenizer itself from the text."""
    from collections import Counter

    from ..vocabulary import ALBERT_CHARACTER_COVERAGE

    share = cjk_character_share(texts)
    if share < 0.3:
        return dict(vocab_size=vocab_size, character_coverage=ALBERT_CHARACTER_COVERAGE)
    counts = Counter(char for text in texts for char in text if not char.isspace())
    needed, covered = 0, 0
    for needed, (_, count) in enumerate(counts.most_common(), start=1):
        covered += count
        if covered >= CJK_CHARACTER_COVERAGE * counts.total():
            break
    if not vocab_size_given:
        vocab_size = max(vocab_size, needed * 3 // 2)
    say(
        f"      {share:.0%} of the text is Chinese/Japanese/Korean: character coverage {CJK_CHARACTER_COVERAGE} "
        f"({needed} characters), {vocab_size} pieces"
    )
    return dict(vocab_size=vocab_size, character_coverage=CJK_CHARACTER_COVERAGE)


def _quickstart_training_arguments(args: argparse.Namespace, quiet: bool = False) -> PretrainingArguments:
    return PretrainingArguments(
        output_dir=str(args.output_dir),
        max_steps=args.max_steps,
        per_device_train_batch_size=args.batch_size,
        per_device_eval_batch_size=64,
        learning_rate=args.learning_rate,
        warmup_steps=max(1, round(args.max_steps * args.warmup_fraction)),
        logging_steps=max(1, args.max_steps // 30),
        eval_strategy="steps",
        eval_steps=max(1, args.max_steps // args.evaluations),
        save_strategy="no",
        report_to=[],
        seed=args.seed,
        use_cpu=not _has_accelerator(),
        disable_tqdm=quiet,
    )


@dataclass
class HeldOutBaselines:
    """What a model that ignores its input scores on the held-out instances, with their masks as evaluated.

    mlm: the accuracy of always predicting the most frequent masked token (`mlm_token_id`) of the held-out set.
    sop: the accuracy of always predicting the more frequent sentence-order label (about 0.5: pairs are swapped
    with probability one half).
    """

    mlm: float
    mlm_token_id: int
    sop: float
    mlm_targets: int
    sop_targets: int


def frequency_baselines(batches) -> HeldOutBaselines:
    """Baselines of evaluation batches (`labels`: -100 where not masked; `sentence_order_label`)."""
    import torch

    token_counts: Counter = Counter()
    order_counts: Counter = Counter()
    for batch in batches:
        labels = batch["labels"]
        token_counts.update(labels[labels != -100].tolist())
        order = batch.get("sentence_order_label")
        if order is not None:
            order_counts.update(torch.as_tensor(order).tolist())
    if not token_counts:
        raise ValueError("The held-out instances have no masked tokens: no MLM baseline to compare with.")
    token_id, count = token_counts.most_common(1)[0]
    mlm_targets, sop_targets = sum(token_counts.values()), sum(order_counts.values())
    sop = order_counts.most_common(1)[0][1] / sop_targets if sop_targets else math.nan
    return HeldOutBaselines(
        mlm=count / mlm_targets, mlm_token_id=token_id, sop=sop, mlm_targets=mlm_targets, sop_targets=sop_targets
    )


def held_out_baselines(trainer: AlbertPretrainingTrainer, eval_dataset: Dataset) -> HeldOutBaselines:
    """The baselines of exactly what `trainer.evaluate` scored: the collator's masks depend only on its seed and
    each batch's token ids, and evaluation batches come in dataset order, so these are the evaluated targets."""
    return frequency_baselines(trainer.get_eval_dataloader(eval_dataset))


class ProgressBarsOnly(ProgressCallback):
    """Trainer's progress bars without the log dictionaries printed under them (the quickstart ends with a report)."""

    def on_log(self, args, state, control, logs=None, **kwargs):
        pass


def _has_accelerator() -> bool:
    import torch

    return torch.cuda.is_available()


def plot_learning_curves(
    log_history: list[dict], path: str | os.PathLike, baselines: HeldOutBaselines | None = None
) -> Path:
    """A PNG of MLM loss, MLM accuracy and SOP accuracy against the step, training and held-out, with the held-out
    baselines (most frequent token, majority order) drawn as dotted lines when given."""
    import matplotlib

    matplotlib.use("Agg")  # no display needed
    import matplotlib.pyplot as plt

    def series(key: str) -> tuple[list[int], list[float]]:
        points = [(entry["step"], entry[key]) for entry in log_history if key in entry]
        return [step for step, _ in points], [value for _, value in points]

    reference_lines = {"sop_accuracy": (0.5, "chance")}
    if baselines is not None:
        reference_lines = {
            "mlm_accuracy": (baselines.mlm, "most frequent token (held-out)"),
            "sop_accuracy": (baselines.sop, "majority order (held-out)"),
        }
    panels = [("MLM loss", "mlm_loss"), ("MLM accuracy", "mlm_accuracy"), ("SOP accuracy", "sop_accuracy")]
    figure, axes = plt.subplots(1, len(panels), figsize=(14, 4))
    for axis, (title, key) in zip(axes, panels):
        axis.plot(*series(key), label="training", alpha=0.7)
        axis.plot(*series(f"eval_{key}"), "o-", label="held-out documents")
        if key in reference_lines:
            value, label = reference_lines[key]
            axis.axhline(value, color="grey", linestyle=":", label=f"{label}: {value:.3f}")
        axis.set_title(title)
        axis.set_xlabel("step")
        axis.legend()
    figure.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path


def quickstart_report(args: argparse.Namespace, result: QuickstartResult, plot_path: Path, seconds: float) -> str:
    """The quickstart's closing report: corpus, model, training, and each held-out figure beside its baseline."""
    trainer, metrics, baselines = result.trainer, result.metrics, result.baselines
    model = trainer.model
    config: AlbertConfig = model.config
    train_metrics = next((e for e in reversed(trainer.state.log_history) if "train_runtime" in e), {})
    corpus = args.corpus or "embedded: " + " + ".join(args.embedded)
    mlm, sop = metrics.get("eval_mlm_accuracy", math.nan), metrics.get("eval_sop_accuracy", math.nan)
    token = trainer.processing_class.convert_ids_to_tokens(baselines.mlm_token_id)
    lines = [
        "",
        f"ALBERT quickstart finished in {seconds / 60:.1f} min",
        f"  corpus        {corpus}: {result.train_documents} training / {result.eval_documents} held-out documents, "
        f"{result.train_instances} / {result.eval_instances} instances (dupe_factor {args.dupe_factor})"
        + (f" ({result.skipped_documents} single-sentence documents skipped)" if result.skipped_documents else ""),
        f"  model         {model.num_parameters() / 1e6:.2f}M parameters: hidden {config.hidden_size}, "
        f"{config.num_hidden_layers} layers sharing {config.num_hidden_groups} group, vocabulary {config.vocab_size}",
        f"  training      {trainer.state.global_step} steps of {trainer.args.train_batch_size} sequences of up to "
        f"{args.max_seq_length} tokens, {train_metrics.get('train_steps_per_second', math.nan):.2f} steps/s",
        f"  held-out      MLM accuracy {mlm:.3f} (loss {metrics.get('eval_mlm_loss', math.nan):.2f}); baseline "
        f"{baselines.mlm:.3f} (always {token!r}, the most frequent of {baselines.mlm_targets} masked tokens): "
        f"{mlm / baselines.mlm:.1f}x",
        f"                SOP accuracy {sop:.3f}; baseline {baselines.sop:.3f} (always the more frequent order of "
        f"{baselines.sop_targets} pairs)",
        f"  saved         {trainer.args.output_dir} (model + tokenizer: "
        "`import albert_hf; AutoModelForPreTraining.from_pretrained(...)`)",
        f"  curves        {plot_path}",
    ]
    return "\n".join(lines)
