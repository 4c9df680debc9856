"""The arguments of a pretraining run and its recipes.

A run is described by one [`PretrainingJob`]: the model arguments every job shares (`tasks.common.ModelArguments`),
[`PretrainingDataArguments`], [`RecipeArguments`], [`QuickstartArguments`] (the tokenizer step and the embedded corpus
of `albert-hf quickstart`) and [`PretrainingArguments`] (Trainer's). `albert-hf pretrain` and `albert-hf quickstart`
parse the same dataclasses the same way (`tasks.common.parse_args`); a recipe then fills every field the user did not
give (`fill_unset`): what the user typed always wins.

A recipe is data: each one lists its values in full, so that editing one never changes another.
"""

from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass, field
from typing import Any, Literal

from ..data.embedded_corpus import DEFAULT_EMBEDDED_SOURCES, EMBEDDED_SOURCES
from ..distributed import launched_world_size
from ..errors import OptionError, UserError
from ..options import COUNT, FRACTION, NON_NEGATIVE, PROBABILITY, RANGE, SHARE, Range
from ..tasks.common import ModelArguments, fill_unset, is_given, parse_args
from .trainer import PretrainingArguments

# Defaults per recipe; anything given on the command line wins. Keys are fields of the argument dataclasses.
RECIPES: dict[str, dict[str, Any]] = {
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
    # A model of a few minutes on two CPU cores.
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
    # `albert-hf quickstart`, chosen by measurement (benchmarks/quickstart_sweep.py, docs/pretraining.md): the tiny
    # recipe's width with 2 (shared) layers instead of 4, as per second of CPU more steps beat more depth here.
    "quickstart": dict(
        config_preset="base-v2",
        config_overrides="embedding_size=64,hidden_size=128,num_attention_heads=4,intermediate_size=512,"
        "num_hidden_layers=2,max_position_embeddings=128",
        max_seq_length=64,
        dupe_factor=10,
        per_device_train_batch_size=32,
        per_device_eval_batch_size=64,
        learning_rate=5e-3,
        max_steps=2000,
        optimizer="lamb",
        lr_schedule="albert",
        save_strategy="no",
        report_to=[],
        vocab_size=2000,
        max_documents=None,
        embedded=list(DEFAULT_EMBEDDED_SOURCES),
        warmup_fraction=0.1,
        evaluations=5,
    ),
    # A smoke run of a few seconds of training (`albert-hf quickstart --fast`).
    "smoke": dict(
        config_preset="base-v2",
        config_overrides="embedding_size=32,hidden_size=64,num_attention_heads=2,intermediate_size=128,"
        "num_hidden_layers=2,max_position_embeddings=64",
        max_seq_length=64,
        dupe_factor=1,
        per_device_train_batch_size=8,
        per_device_eval_batch_size=64,
        learning_rate=5e-3,
        max_steps=12,
        optimizer="lamb",
        lr_schedule="albert",
        save_strategy="no",
        report_to=[],
        vocab_size=1000,
        max_documents=24,
        embedded=["language-reference"],
        warmup_fraction=0.1,
        evaluations=5,
    ),
}


# The recipe fields that shape a fresh model: a checkpoint given with --model_name_or_path keeps its own.
ARCHITECTURE_FIELDS = frozenset({"config_preset", "config_overrides"})


@dataclass
class PretrainingDataArguments:
    train_files: list[str] | None = field(
        default=None,
        metadata={
            "aliases": ["--train_file"],
            "help": "Text files (one sentence per line, a blank line between documents), or .jsonl/.json/.csv/.tsv/"
            ".parquet files of rows (each row a document, its text in --text_column), or a save_to_disk folder; "
            "folders and globs of shards too.",
        },
    )
    validation_files: list[str] | None = field(
        default=None, metadata={"aliases": ["--validation_file"], "help": "Held-out files, as --train_files."}
    )
    dataset_name: str | None = field(
        default=None,
        metadata={
            "help": "Pretrain on a dataset instead of --train_files: a Hub name, a local dataset folder (read by "
            "datasets.load_dataset) or a save_to_disk folder; its 'train' split, each row a document."
        },
    )
    dataset_config_name: str | None = field(default=None, metadata={"help": "The configuration of --dataset_name."})
    text_column: str = field(
        default="text",
        metadata={
            "help": "The column of the rows that holds the text; its sentences come from the sentence splitter, "
            "line by line (as --lines_are_paragraphs does for text files)."
        },
    )
    document_column: str | None = field(
        default=None,
        metadata={
            "help": "Rows that follow each other with the same value in this column (a sentence or a paragraph "
            "each) form one document (default: each row is a document)."
        },
    )
    validation_split_name: str | None = field(
        default=None, metadata={"help": "The held-out split of --dataset_name (e.g. 'validation')."}
    )
    validation_documents: int = field(
        default=0,
        metadata={RANGE: NON_NEGATIVE, "help": "Without --validation_files: hold out this many training documents."},
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
    max_seq_length: int = field(
        default=512, metadata={RANGE: Range(min=8), "help": "Instance length, [CLS] and [SEP]s included."}
    )
    short_seq_prob: float = field(
        default=0.1, metadata={RANGE: PROBABILITY, "help": "Probability of a shorter random target length."}
    )
    dupe_factor: int = field(
        default=1,
        metadata={
            RANGE: COUNT,
            "help": "Passes over the corpus, each cut into fresh sentence pairs (instances are drawn afresh for "
            "each pass instead of repeating).",
        },
    )
    objective: Literal["sop", "nsp"] = field(
        default="sop", metadata={"help": "sop: sentence order (ALBERT); nsp: next sentence (BERT, for ablations)."}
    )
    masked_lm_prob: float = field(
        default=0.15, metadata={RANGE: Range(above=0, max=1), "help": "Fraction of tokens to predict."}
    )
    max_predictions_per_seq: int = field(
        default=20, metadata={RANGE: COUNT, "help": "Cap on predictions per sequence."}
    )
    max_ngram: int = field(default=3, metadata={RANGE: COUNT, "help": "Longest masked n-gram, in words."})
    pad_to_multiple_of: int | None = field(
        default=None, metadata={RANGE: COUNT, "help": "Pad batches to a multiple of this."}
    )
    preprocessing_num_workers: int | None = field(
        default=None, metadata={RANGE: COUNT, "help": "Processes for datasets.map."}
    )
    documents_per_batch: int = field(default=100, metadata={RANGE: COUNT, "help": "Documents per datasets.map batch."})
    streaming: bool = field(
        default=False,
        metadata={"help": "Read and cut the training text lazily (needs --max_steps and --validation_files)."},
    )
    shuffle_buffer_size: int = field(
        default=10_000,
        metadata={
            RANGE: COUNT,
            "help": "With --streaming: instances shuffled together. The stream is shuffled by windows of at least this "
            "many instances (whole batches of documents), each in an order drawn from the seed, the pass and the "
            "window, so that a resume starts in its window instead of reading the trained batches again.",
        },
    )
    max_eval_instances: int | None = field(
        default=None, metadata={RANGE: COUNT, "help": "Evaluate on at most this many."}
    )
    max_unknown_share: float = field(
        default=0.2,
        metadata={
            RANGE: PROBABILITY,
            "help": "Refuse to start when more than this share of the first training instances' tokens is <unk> (the "
            "vocabulary does not cover the text: another language or script); a share above 0.01 is warned about. "
            "1 allows any share.",
        },
    )
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
    recipe: Literal["paper", "laptop", "tiny", "quickstart", "smoke"] | None = field(
        default=None,
        metadata={"help": "Default hyperparameters: paper, laptop, tiny, quickstart or smoke (see RECIPES)."},
    )
    global_batch_size: int | None = field(
        default=None,
        metadata={
            RANGE: COUNT,
            "help": "Sequences per optimizer step over all devices; sets --gradient_accumulation_steps.",
        },
    )


@dataclass
class QuickstartArguments:
    """What `albert-hf quickstart` adds to a pretraining run: its corpus, the tokenizer it trains when none is given,
    and a schedule in proportion to --max_steps."""

    corpus: str | None = field(
        default=None,
        metadata={
            "help": "A text file or folder of .txt files, one sentence or paragraph per line (default: the embedded "
            "corpus, the prose of Python's language reference and of the standard library's docstrings)."
        },
    )
    embedded: list[str] = field(
        default_factory=lambda: list(DEFAULT_EMBEDDED_SOURCES),
        metadata={"choices": EMBEDDED_SOURCES, "help": "The embedded corpus' sources."},
    )
    max_documents: int | None = field(
        default=None, metadata={RANGE: COUNT, "help": "Use only this many documents of the corpus."}
    )
    held_out_fraction: float = field(
        default=0.1, metadata={RANGE: SHARE, "help": "Share of the documents held out for evaluation."}
    )
    vocab_size: int = field(
        default=2000,
        metadata={
            RANGE: COUNT,
            "help": "Pieces of the SentencePiece tokenizer trained when no --tokenizer_name_or_path is given.",
        },
    )
    warmup_fraction: float = field(
        default=0.1,
        metadata={RANGE: FRACTION, "help": "Share of the steps spent warming up (unless --warmup_steps is given)."},
    )
    evaluations: int = field(
        default=5,
        metadata={RANGE: COUNT, "help": "Points on the held-out learning curve (unless --eval_steps is given)."},
    )


ARGUMENT_CLASSES = (ModelArguments, PretrainingDataArguments, RecipeArguments, PretrainingArguments)
QUICKSTART_ARGUMENT_CLASSES = (*ARGUMENT_CLASSES, QuickstartArguments)


@dataclass
class PretrainingJob:
    """Everything a pretraining run is built from. Fields of the parts read as fields of the job too (`job.max_steps`
    is `job.training.max_steps`): their names are unique across the parts, as one command line holds them all."""

    model: ModelArguments
    data: PretrainingDataArguments
    recipe: RecipeArguments
    training: PretrainingArguments
    quickstart: QuickstartArguments | None = None

    def parts(self) -> tuple:
        parts = (self.model, self.data, self.recipe, self.training, self.quickstart)
        return tuple(part for part in parts if part is not None)

    # A job reads as the tuple of its parts too: `model, data, recipe, training = job`, `job[-1]`.
    def __iter__(self):
        return iter(self.parts())

    def __getitem__(self, index: int):
        return self.parts()[index]

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in {f.name for f in dataclasses.fields(PretrainingJob)}:
            raise AttributeError(name)
        for part in self.parts():
            if any(f.name == name for f in dataclasses.fields(part)):
                return getattr(part, name)
        raise AttributeError(f"No pretraining argument is called {name!r}.")


def parse_pretraining_args(argv: list[str] | None = None) -> PretrainingJob:
    """The arguments of `albert-hf pretrain`, parsed as every job parses them, the recipe applied
    ([`apply_recipe`])."""
    model, data, recipe, training = parse_args(ARGUMENT_CLASSES, argv)
    job = PretrainingJob(model=model, data=data, recipe=recipe, training=training)
    apply_recipe(job)
    return job


def apply_recipe(job: PretrainingJob) -> None:
    """Fill the fields the user did not give from --recipe (but for a model from --model_name_or_path, its
    architecture), then set the gradient accumulation steps from --global_batch_size. A recipe may hold values of
    the quickstart's arguments: a job without them skips those."""
    if job.recipe.recipe:
        known = {f.name for part in job.parts() for f in dataclasses.fields(part)}
        if job.model.model_name_or_path:  # continued pretraining: the checkpoint's architecture, not the recipe's
            known -= ARCHITECTURE_FIELDS
        recipe = {k: v for k, v in RECIPES[job.recipe.recipe].items() if k in known}
        fill_unset(job.parts(), recipe, source=f"--recipe {job.recipe.recipe}")
    if job.recipe.global_batch_size:
        # The launcher's process count: the job joins the process group later (`start_job`), and refuses a launch
        # where this count and Trainer's world size differ.
        steps = accumulation_steps(
            job.recipe.global_batch_size, job.training.per_device_train_batch_size, launched_world_size()
        )
        given = job.training.gradient_accumulation_steps
        if is_given(job.training, "gradient_accumulation_steps") and given != steps:
            raise OptionError(
                f"--gradient_accumulation_steps {given} and --global_batch_size {job.recipe.global_batch_size} "
                f"(which means {steps} accumulation steps of {job.training.per_device_train_batch_size} sequences on "
                f"{launched_world_size()} devices) disagree; give one of them."
            )
        job.training.gradient_accumulation_steps = steps


def accumulation_steps(global_batch_size: int, per_device_batch_size: int, world_size: int) -> int:
    """Gradient accumulation steps that make `global_batch_size` from the per-device batches of all devices."""
    per_step = per_device_batch_size * world_size
    if global_batch_size % per_step:
        raise UserError(
            f"--global_batch_size {global_batch_size} is not a multiple of per_device_train_batch_size "
            f"({per_device_batch_size}) x devices ({world_size})."
        )
    return global_batch_size // per_step


# The quickstart's options that are other names of the pretraining options they set.
QUICKSTART_ALIASES = {
    "--batch_size": "--per_device_train_batch_size",
    "--model_overrides": "--config_overrides",
    "--fast": "--recipe=smoke",
}


def parse_quickstart_args(argv: list[str] | None = None) -> PretrainingJob:
    """The arguments of `albert-hf quickstart`: those of `albert-hf pretrain` with --recipe quickstart as default
    (--fast: the smoke recipe), the quickstart's own ([`QuickstartArguments`]) and a schedule in proportion to
    --max_steps. Values out of their declared ranges are `OptionError`s (`tasks.common.parse_args`)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    recipes = [item for item in argv if item == "--fast" or item == "--recipe" or item.startswith("--recipe=")]
    if "--fast" in recipes and len(recipes) > 1:
        raise OptionError("--fast is --recipe smoke: give --fast or --recipe, not both.")
    argv = [_unalias(item) for item in argv]
    if not any(item == "--recipe" or item.startswith("--recipe=") for item in argv):
        argv = ["--recipe", "quickstart", *argv]
    if not any(item == "--output_dir" or item.startswith("--output_dir=") for item in argv):
        argv += ["--output_dir", "quickstart-output"]
    # argparse lists the options under their pretraining names only: the help ends with the quickstart's spellings.
    aliases = "Also: " + ", ".join(f"{old} is {new}" for old, new in QUICKSTART_ALIASES.items()) + "."
    model, data, recipe, training, quickstart = parse_args(QUICKSTART_ARGUMENT_CLASSES, argv, epilog=aliases)
    job = PretrainingJob(model=model, data=data, recipe=recipe, training=training, quickstart=quickstart)
    apply_recipe(job)
    if job.max_steps < 1:  # -1, "no limit", is Trainer's; the quickstart's schedule needs a number of steps
        raise OptionError(f"--max_steps must be at least 1 for the quickstart (its schedule), got {job.max_steps}.")
    schedule = dict(
        warmup_steps=max(1, round(job.max_steps * job.warmup_fraction)),
        logging_steps=max(1, job.max_steps // 30),
        eval_strategy="steps",
        eval_steps=max(1, job.max_steps // job.evaluations),
    )
    fill_unset(job.parts(), schedule, source="the schedule derived from --max_steps")
    return job


def _unalias(item: str) -> str:
    name, equals, value = item.partition("=")
    if name not in QUICKSTART_ALIASES:
        return item
    return QUICKSTART_ALIASES[name] + (equals + value if equals else "")


def vocab_size_given(job: PretrainingJob) -> bool:
    """Whether the user chose the quickstart's vocabulary size (a Chinese/Japanese corpus otherwise gets more)."""
    return is_given(job.quickstart, "vocab_size")
