"""The arguments of a pretraining run (dataclasses, one field per option) and its recipes.

They live apart from the parsing (`albert_hf.pretraining.arguments`) and the Trainer (`albert_hf.pretraining.trainer`),
in a module that imports neither torch nor transformers (nor `datasets`), so that `albert-hf pretrain --help` and
`albert-hf quickstart --help` list them, with the defaults of the quickstart's recipe, at once (`albert_hf.job_help`).
`option_group` names each one's group of options in the help.

A recipe is data: each one lists its values in full, so that editing one never changes another.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

from ..options import COUNT, FRACTION, NON_NEGATIVE, POSITIVE, PROBABILITY, RANGE, SHARE, DataSplits, Range

# The sources of the quickstart's embedded corpus (`albert_hf.data.embedded_corpus.EMBEDDED_SOURCES`, which this light
# module, read by `--help`, does not import; tests/test_job_arguments.py holds the two equal), and its default ones.
EMBEDDED_SOURCES = ("language-reference", "stdlib-docstrings", "stdlib-modules")
DEFAULT_EMBEDDED_SOURCES = ("language-reference", "stdlib-docstrings")

# The recipes shipped with the package: albert_hf/recipes/pretrain/<name>.yaml, each a file of options (names without
# --) read as the parser's defaults, so that anything given on the command line wins. Each lists its values in full,
# so that editing one never changes another; `--recipe` also takes the path of a user's own file.
RECIPE_FOLDER = Path(__file__).resolve().parents[1] / "recipes" / "pretrain"


def read_recipes() -> dict[str, dict[str, Any]]:
    """Every shipped recipe's options, by name."""
    import yaml

    return {
        path.stem: yaml.safe_load(path.read_text(encoding="utf-8")) for path in sorted(RECIPE_FOLDER.glob("*.yaml"))
    }


RECIPES: dict[str, dict[str, Any]] = read_recipes()


# The recipe fields that shape a fresh model: a checkpoint given with --model_name_or_path keeps its own.
ARCHITECTURE_FIELDS = frozenset({"config_preset", "config_overrides"})


@dataclass
class PretrainingDataArguments:
    option_group: ClassVar[str] = "pretraining data"
    # The training text from files or a dataset (not both: the job names what it misses when it reads them);
    # held-out text from files, from documents held out of the training text, or from a split of the dataset. The job
    # always trains, whatever --do_train says.
    data_splits: ClassVar[DataSplits] = DataSplits(
        given_by={
            "train": ("train_files", "dataset_name"),
            "validation": ("validation_files", "validation_documents", ("dataset_name", "validation_split_name")),
        },
        exclusive=(("train_files", "dataset_name"),),
        asks_steps=False,
    )

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
    option_group: ClassVar[str] = "recipe"

    recipe: str | None = field(
        default=None,
        metadata={
            "help": "Default hyperparameters, a file of options the command line overrides: paper, laptop, tiny, "
            "quickstart or smoke (albert_hf/recipes/pretrain/), or the path of your own .yaml file."
        },
    )
    global_batch_size: int | None = field(
        default=None,
        metadata={
            RANGE: COUNT,
            "help": "Sequences per optimizer step over all processes and accumulation steps: sets "
            "--gradient_accumulation_steps (or, when that is given, --per_device_train_batch_size).",
        },
    )


@dataclass
class QuickstartArguments:
    """What `albert-hf quickstart` adds to a pretraining run: its corpus, the tokenizer it trains when none is given,
    and a schedule in proportion to --max_steps."""

    option_group: ClassVar[str] = "quickstart"
    # Its corpus (--corpus, else the embedded one), a share of whose documents is held out.
    data_splits: ClassVar[DataSplits] = DataSplits(
        given_by={"train": ("corpus", "embedded"), "validation": ("held_out_fraction",)}, asks_steps=False
    )

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


# The quickstart's options that are other names of the pretraining options they set.
QUICKSTART_ALIASES = {
    "--batch_size": "--per_device_train_batch_size",
    "--model_overrides": "--config_overrides",
    "--fast": "--recipe=smoke",
}


# The defaults `PretrainingArguments` gives fields of transformers' `TrainingArguments`: ALBERT's optimizer settings,
# and every column of the instances kept for the collator. And no `logging_nan_inf_filter`, which reads each
# micro-batch's loss on the host twice: a non-finite loss stops the run before its optimizer step, or is rolled back
# by the divergence guard, which gives Trainer's log a 0 in its place (`TrainingLosses`) and corrects the log.
TRAINER_DEFAULTS: dict[str, Any] = {
    "weight_decay": 0.01,
    "adam_epsilon": 1e-6,
    "remove_unused_columns": False,
    "logging_nan_inf_filter": False,
}


@dataclass
class PretrainingOptions:
    """The options `PretrainingArguments` adds to `TrainingArguments`: ALBERT's optimizer and schedule, the checks
    before training and the divergence guard."""

    option_group: ClassVar[str] = "optimizer, schedule, checks and divergence guard"

    optimizer: Literal["lamb", "adamw"] = field(
        default="lamb",
        metadata={
            "help": "lamb: ALBERT's LAMB (betas from --adam_beta1/2, eps --adam_epsilon, --weight_decay); "
            "adamw: Trainer's optimizer chosen by --optim."
        },
    )
    lr_schedule: Literal["albert", "trainer"] = field(
        default="albert",
        metadata={
            "help": "albert: linear warmup then (1 - step/max_steps)^power from step 0, as the original; "
            "trainer: --lr_scheduler_type."
        },
    )
    lr_decay_power: float = field(
        default=1.0, metadata={RANGE: POSITIVE, "help": "Power of the albert schedule's decay."}
    )
    mlm_masked_positions_only: bool = field(
        default=True,
        metadata={
            "help": "Compute MLM logits only at the ~15%% masked positions, as the original ALBERT does: the "
            "same loss and gradients for much less work (the model must support it)."
        },
    )
    sanity_checks: bool = field(
        default=True,
        metadata={
            "help": "Before training, check that tokenizer, model config and a first batch fit together "
            "(vocabulary, special ids, lengths, no padding as a target); --no_sanity_checks skips it."
        },
    )
    divergence_guard: bool = field(
        default=True,
        metadata={
            "help": "Roll back to the last good in-memory state on a non-finite loss or a loss spike, skip the "
            "batches read since and go on, under DDP, DeepSpeed ZeRO-1/2/3 and FSDP2 (--no_divergence_guard: stop "
            "on a non-finite loss instead)."
        },
    )
    divergence_spike_factor: float = field(
        default=3.0,
        metadata={RANGE: Range(above=1), "help": "A step's loss above this multiple of the running median is a spike."},
    )
    divergence_window: int = field(
        default=100, metadata={RANGE: COUNT, "help": "Steps in the running median of the loss."}
    )
    divergence_min_history: int = field(
        default=10,
        metadata={RANGE: COUNT, "help": "Steps of history needed before a spike can be called (non-finite: always)."},
    )
    divergence_snapshot_steps: int = field(
        default=50, metadata={RANGE: COUNT, "help": "Refresh the in-memory good state every this many steps."}
    )
    divergence_max_rollbacks: int = field(
        default=5,
        metadata={
            RANGE: NON_NEGATIVE,
            "help": "Stop with an error after this many rollbacks (the run keeps diverging).",
        },
    )
    divergence_lr_factor: float = field(
        default=1.0,
        metadata={
            RANGE: Range(above=0, max=1),
            "help": "Multiply the learning rate by this at each rollback (1: keep it).",
        },
    )
