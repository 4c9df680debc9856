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
import logging
import math
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from datasets import Dataset, IterableDataset
from transformers import HfArgumentParser, set_seed
from transformers.trainer_callback import ProgressCallback

from ..configuration import AlbertConfig
from ..data.collator import DataCollatorForSOP
from ..data.pretraining import (
    cjk_character_share,
    count_long_sentences,
    count_single_sentence_documents,
    create_sentence_order_instances,
    documents_from_texts,
    load_text_documents,
    tokenize_documents,
)
from ..distributed import init_distributed
from ..modeling import AlbertForPreTraining
from ..training.reliability import resolve_resume_checkpoint
from ..training.sanity import check_batch, check_sequence_length, check_tokenizer_matches_config
from ..training.trainer import AlbertPretrainingTrainer, PretrainingArguments
from .common import ModelArguments, build_config, build_model, load_tokenizer

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
    shuffle_buffer_size: int = field(default=10_000, metadata={"help": "Shuffle buffer of the streamed instances."})
    max_eval_instances: int | None = field(default=None, metadata={"help": "Evaluate on at most this many."})
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
    """(model, data, recipe, training) arguments: the recipe's values as defaults, the command line on top; then joins
    the launcher's process group (`albert_hf.distributed.init_distributed`)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    recipe_parser = argparse.ArgumentParser(add_help=False)
    recipe_parser.add_argument("--recipe", choices=sorted(RECIPES))
    recipe_name = recipe_parser.parse_known_args(argv)[0].recipe
    parser = HfArgumentParser(ARGUMENT_CLASSES)
    if recipe_name:
        parser.set_defaults(**RECIPES[recipe_name])
    model_args, data_args, recipe_args, training_args = parser.parse_args_into_dataclasses(args=argv)
    # As `common.parse_args` does for the other jobs (this one has its own parser for the recipes): join the
    # launcher's group before anything counts devices or builds the model. Without it, under DeepSpeed with --use_cpu
    # zero.Init (from_pretrained / _from_config under ZeRO-3) takes a world size of 1 and fails, and a launch whose
    # processes would each train alone is not refused.
    init_distributed(training_args)
    if recipe_args.global_batch_size:
        training_args.gradient_accumulation_steps = accumulation_steps(
            recipe_args.global_batch_size, training_args.per_device_train_batch_size, training_args.world_size
        )
    return model_args, data_args, recipe_args, training_args


def accumulation_steps(global_batch_size: int, per_device_batch_size: int, world_size: int) -> int:
    """Gradient accumulation steps that make `global_batch_size` from the per-device batches of all devices."""
    per_step = per_device_batch_size * world_size
    if global_batch_size % per_step:
        raise ValueError(
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

    def describe(self) -> str:
        parts = [f"{name.replace('_', ' ')}: {value}" for name, value in vars(self).items() if value is not None]
        return ", ".join(parts)


def load_documents(data_args: PretrainingDataArguments, seed: int) -> tuple[Dataset | IterableDataset, Dataset | None]:
    """(training documents, held-out documents) from the text files of the arguments."""
    if not data_args.train_files:
        raise ValueError("No training text: pass --train_files (one sentence per line, blank lines between documents).")
    read = dict(
        split_lines=data_args.lines_are_paragraphs,
        sentence_splitter=data_args.sentence_splitter,
        cache_dir=data_args.cache_dir,
    )
    train = load_text_documents(
        data_args.train_files, streaming=data_args.streaming, num_proc=data_args.preprocessing_num_workers, **read
    )
    if data_args.validation_files:
        return train, load_text_documents(data_args.validation_files, **read)
    if not data_args.validation_documents:
        return train, None
    if data_args.streaming:
        raise ValueError("--streaming cannot hold out documents of a stream: pass --validation_files.")
    if data_args.validation_documents >= len(train):
        raise ValueError(
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
) -> tuple[Dataset | IterableDataset, int | None]:
    """Instances of the documents, and the number of single-sentence documents SOP skipped (None if streaming).

    Sentences longer than an instance are truncated: their number is logged and, with `stats`, recorded there.
    """
    num_proc, per_batch = data_args.preprocessing_num_workers, data_args.documents_per_batch
    tokenized = tokenize_documents(documents, tokenizer, num_proc=num_proc, documents_per_batch=per_batch)
    if isinstance(tokenized, Dataset):  # never truncate silently: the report counts what was cut
        long_sentences = count_long_sentences(tokenized, data_args.max_seq_length, num_proc=num_proc)
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
        skipped = count_single_sentence_documents(tokenized, num_proc=num_proc)
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


def prepare_datasets(
    data_args: PretrainingDataArguments, tokenizer, seed: int
) -> tuple[Dataset | IterableDataset, Dataset | None, CorpusStats]:
    """Training and evaluation instances, and the counts for the report."""
    train_documents, eval_documents = load_documents(data_args, seed)
    stats = CorpusStats()
    train, stats.skipped_single_sentence_documents = make_instances(train_documents, tokenizer, data_args, seed, stats)
    if isinstance(train, IterableDataset):
        train = train.shuffle(seed=seed, buffer_size=data_args.shuffle_buffer_size)
    else:
        stats.train_documents, stats.train_instances = len(train_documents), len(train)
    evaluation = None
    if eval_documents is not None:
        # A different seed from training, so that held-out pairs are not cut like any training pass.
        evaluation, _ = make_instances(eval_documents, tokenizer, data_args, seed + 1)
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


def check_first_batch(trainer: AlbertPretrainingTrainer, num_sequences: int = 8) -> None:
    """Collate the first training sequences as training will and check the batch (`check_batch`)."""
    dataset = trainer.train_dataset
    features = (
        list(dataset.take(num_sequences))
        if isinstance(dataset, IterableDataset)
        else [dataset[i] for i in range(min(num_sequences, len(dataset)))]
    )
    if features:
        check_batch(trainer.data_collator(features), trainer.processing_class, trainer.model.config)


def main(argv: list[str] | None = None) -> int:
    """`albert-hf pretrain`: pretrain ALBERT on text files, save model + tokenizer, report MLM/SOP metrics."""
    model_args, data_args, recipe_args, training_args = parse_pretraining_args(argv)
    _setup_logging(training_args)
    if data_args.streaming and training_args.max_steps <= 0:
        raise ValueError("--streaming needs --max_steps (a stream has no length to count epochs in).")
    set_seed(training_args.seed)
    tokenizer = load_tokenizer(model_args)
    train_dataset, eval_dataset, stats = prepare_datasets(data_args, tokenizer, training_args.seed)
    logger.info("Pretraining data: %s", stats.describe())
    model = build_pretraining_model(model_args, tokenizer, data_args.max_seq_length, training_args.sanity_checks)
    trainer = build_trainer(model, tokenizer, data_args, training_args, train_dataset, eval_dataset)
    if training_args.sanity_checks:
        check_first_batch(trainer)

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
        print(f"Pretraining data: {stats.describe()}")
        print(f"Model and tokenizer saved to {training_args.output_dir}")
    return 0


def _setup_logging(training_args: PretrainingArguments) -> None:
    import transformers

    level = logging.INFO if training_args.should_log else logging.WARNING
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=level)
    logging.getLogger("albert_hf").setLevel(level)
    transformers.utils.logging.set_verbosity_warning()


# --------------------------------------------------------------------------------------------------------------------
# Quickstart
# --------------------------------------------------------------------------------------------------------------------


def python_reference_documents() -> Dataset:
    """CPython's language reference (`pydoc_data.topics`, shipped with Python): one document per topic."""
    from pydoc_data.topics import topics

    texts = [topics[name] for name in sorted(topics)]
    return documents_from_texts(Dataset.from_dict({"text": texts}))


def corpus_documents(path: str) -> Dataset:
    """Documents of a text file, or of the .txt files of a folder (one sentence or paragraph per line)."""
    source = Path(path)
    files = sorted(source.glob("*.txt")) if source.is_dir() else [source]
    if not files:
        raise FileNotFoundError(f"--corpus {path}: no .txt files in this folder.")
    return load_text_documents(files, split_lines=True)


# The quickstart's settings; --fast swaps in the smoke-test column (any option given explicitly still wins).
QUICKSTART_DEFAULTS = dict(
    max_steps=300,
    vocab_size=2000,
    max_seq_length=128,
    batch_size=32,
    max_documents=None,
    model_overrides=RECIPES["tiny"]["config_overrides"],
)
FAST_DEFAULTS = dict(
    max_steps=12,
    vocab_size=1000,
    max_seq_length=64,
    batch_size=8,
    max_documents=24,
    model_overrides="embedding_size=32,hidden_size=64,num_attention_heads=2,intermediate_size=128,"
    "num_hidden_layers=2,max_position_embeddings=64",
)


def quickstart_arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="albert-hf quickstart",
        description="Train a tokenizer and pretrain a small ALBERT offline, evaluate it on held-out documents, save "
        "it, and plot its learning curves.",
    )
    parser.add_argument("--corpus", help="a text file or folder of .txt files (default: Python's language reference)")
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
    parser.add_argument("--max_documents", type=int, help="use only this many documents of the corpus")
    parser.add_argument("--model_overrides", help="AlbertConfig fields, as --config_overrides of `pretrain`")
    parser.add_argument("--held_out_fraction", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=42)
    argv = list(sys.argv[1:] if argv is None else argv)
    parser.set_defaults(**(FAST_DEFAULTS if "--fast" in argv else QUICKSTART_DEFAULTS))
    return parser.parse_args(argv)


def quickstart_main(argv: list[str] | None = None) -> int:
    """`albert-hf quickstart`: tokenizer + small ALBERT from scratch on an offline corpus, in a few minutes."""
    from ..tokenization import train_tokenizer

    args = quickstart_arguments(argv)
    argv_given = {item.split("=", 1)[0] for item in (sys.argv[1:] if argv is None else argv)}
    started = time.time()
    set_seed(args.seed)
    output_dir = Path(args.output_dir)
    documents = corpus_documents(args.corpus) if args.corpus else python_reference_documents()
    if args.max_documents:
        documents = documents.select(range(min(args.max_documents, len(documents))))
    if len(documents) < 2:
        raise ValueError("The quickstart corpus needs at least two documents (one is held out for evaluation).")
    held_out = max(1, round(len(documents) * args.held_out_fraction))
    split = documents.train_test_split(test_size=held_out, seed=args.seed)

    sentences = Dataset.from_dict({"text": [s for document in split["train"]["sentences"] for s in document]})
    tokenizer_options = quickstart_tokenizer_options(sentences["text"], args.vocab_size, "--vocab_size" in argv_given)
    print(f"[1/4] Training a {tokenizer_options['vocab_size']}-piece SentencePiece tokenizer")
    try:
        tokenizer = train_tokenizer(sentences, output_dir, show_progress=False, **tokenizer_options)
    except ValueError as error:  # SentencePiece cannot learn more pieces than a small corpus holds
        raise ValueError(f"{error}\nPass a smaller --vocab_size for this corpus.") from error

    print("[2/4] Cutting documents into sentence-order instances")
    data_args = PretrainingDataArguments(max_seq_length=args.max_seq_length)
    train_dataset, skipped = make_instances(split["train"], tokenizer, data_args, args.seed)
    eval_dataset, _ = make_instances(split["test"], tokenizer, data_args, args.seed + 1)

    print("[3/4] Pretraining a small ALBERT (MLM + SOP, LAMB)")
    model = build_pretraining_model(
        ModelArguments(config_preset="base-v2", config_overrides=args.model_overrides), tokenizer, args.max_seq_length
    )
    trainer = build_trainer(
        model, tokenizer, data_args, _quickstart_training_arguments(args), train_dataset, eval_dataset
    )
    trainer.remove_callback(ProgressCallback)
    trainer.add_callback(ProgressBarsOnly)
    trainer.train()
    metrics = trainer.evaluate()
    trainer.save_model()
    trainer.save_state()

    print("[4/4] Writing the learning curves")
    plot_path = plot_learning_curves(trainer.state.log_history, output_dir / "learning_curves.png")
    print(
        _quickstart_report(
            args, trainer, metrics, split, train_dataset, eval_dataset, skipped, plot_path, time.time() - started
        )
    )
    return 0


# SentencePiece's advice for languages with a large character set (Japanese, Chinese): cover 99.95% of the characters
# rather than 99.995%, the rest becoming <unk>. Such a corpus also needs more pieces than an English one: a few
# thousand characters each take a piece before any word can.
CJK_CHARACTER_COVERAGE = 0.9995


def quickstart_tokenizer_options(texts: list[str], vocab_size: int, vocab_size_given: bool) -> dict:
    """train_tokenizer options for the corpus: the ALBERT recipe, or for mostly Chinese/Japanese/Korean text a
    character coverage of 0.9995 and (unless --vocab_size was given) 1.5 times as many pieces as the characters
    that coverage keeps. Accent stripping is chosen by train_tokenizer itself from the text."""
    from collections import Counter

    from ..tokenization import ALBERT_CHARACTER_COVERAGE

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
    print(
        f"      {share:.0%} of the text is Chinese/Japanese/Korean: character coverage {CJK_CHARACTER_COVERAGE} "
        f"({needed} characters), {vocab_size} pieces"
    )
    return dict(vocab_size=vocab_size, character_coverage=CJK_CHARACTER_COVERAGE)


def _quickstart_training_arguments(args: argparse.Namespace) -> PretrainingArguments:
    recipe = RECIPES["tiny"]
    evaluations = 5  # points on the held-out curve
    return PretrainingArguments(
        output_dir=str(args.output_dir),
        max_steps=args.max_steps,
        per_device_train_batch_size=args.batch_size,
        per_device_eval_batch_size=64,
        learning_rate=recipe["learning_rate"],
        warmup_steps=max(1, round(args.max_steps * 0.1)),
        logging_steps=max(1, args.max_steps // 30),
        eval_strategy="steps",
        eval_steps=max(1, args.max_steps // evaluations),
        save_strategy="no",
        report_to=[],
        seed=args.seed,
        use_cpu=not _has_accelerator(),
    )


class ProgressBarsOnly(ProgressCallback):
    """Trainer's progress bars without the log dictionaries printed under them (the quickstart ends with a report)."""

    def on_log(self, args, state, control, logs=None, **kwargs):
        pass


def _has_accelerator() -> bool:
    import torch

    return torch.cuda.is_available()


def plot_learning_curves(log_history: list[dict], path: str | os.PathLike) -> Path:
    """A PNG of MLM loss, MLM accuracy and SOP accuracy against the step, training and held-out."""
    import matplotlib

    matplotlib.use("Agg")  # no display needed
    import matplotlib.pyplot as plt

    def series(key: str) -> tuple[list[int], list[float]]:
        points = [(entry["step"], entry[key]) for entry in log_history if key in entry]
        return [step for step, _ in points], [value for _, value in points]

    panels = [("MLM loss", "mlm_loss"), ("MLM accuracy", "mlm_accuracy"), ("SOP accuracy", "sop_accuracy")]
    figure, axes = plt.subplots(1, len(panels), figsize=(14, 4))
    for axis, (title, key) in zip(axes, panels):
        axis.plot(*series(key), label="training", alpha=0.7)
        axis.plot(*series(f"eval_{key}"), "o-", label="held-out documents")
        if key == "sop_accuracy":
            axis.axhline(0.5, color="grey", linestyle=":", label="chance")
        axis.set_title(title)
        axis.set_xlabel("step")
        axis.legend()
    figure.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path


def _quickstart_report(
    args, trainer, metrics, split, train_dataset, eval_dataset, skipped, plot_path, seconds: float
) -> str:
    model = trainer.model
    config: AlbertConfig = model.config
    train_metrics = next((e for e in reversed(trainer.state.log_history) if "train_runtime" in e), {})
    corpus = args.corpus or "Python language reference (pydoc_data.topics)"
    lines = [
        "",
        f"ALBERT quickstart finished in {seconds / 60:.1f} min",
        f"  corpus        {corpus}: {len(split['train'])} training / {len(split['test'])} held-out documents, "
        f"{len(train_dataset)} / {len(eval_dataset)} instances"
        + (f" ({skipped} single-sentence documents skipped)" if skipped else ""),
        f"  model         {model.num_parameters() / 1e6:.2f}M parameters: hidden {config.hidden_size}, "
        f"{config.num_hidden_layers} layers sharing {config.num_hidden_groups} group, vocabulary {config.vocab_size}",
        f"  training      {trainer.state.global_step} steps of {trainer.args.train_batch_size} sequences, "
        f"{train_metrics.get('train_steps_per_second', math.nan):.2f} steps/s",
        f"  held-out      MLM accuracy {metrics.get('eval_mlm_accuracy', math.nan):.3f} "
        f"(loss {metrics.get('eval_mlm_loss', math.nan):.2f}), "
        f"SOP accuracy {metrics.get('eval_sop_accuracy', math.nan):.3f} (chance 0.5)",
        f"  saved         {trainer.args.output_dir} (model + tokenizer: "
        "`import albert_hf; AutoModelForPreTraining.from_pretrained(...)`)",
        f"  curves        {plot_path}",
    ]
    return "\n".join(lines)
