"""The arguments of the jobs that start from a model (dataclasses, one field per option): what every job shares
([`ModelArguments`]), the fine-tuning data ([`FineTuningArguments`]) and each task's own.

They live apart from the jobs, in a module that imports neither torch nor transformers (nor `datasets`), so that
`albert-hf <job> --help` lists them at once (`albert_hf.job_help`); the jobs parse them with transformers'
`HfArgumentParser`, together with `TrainingArguments` (`albert_hf.argument_parsing.parse_args`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from .errors import OptionError, UserError
from .options import COUNT, RANGE, DataSplits, Range, check_arguments

# The values of the data options that choose, declared here where `albert-hf <job> --help` reads them without loading
# `datasets`: the modules that act on them hold the same (tests/test_job_arguments.py holds them equal).
GLUE_TASK_NAMES = ("cola", "sst2", "mrpc", "stsb", "qqp", "mnli", "qnli", "rte", "wnli")  # `data.glue_files.GLUE_TASKS`
LABEL_KINDS = ("classification", "regression")  # `data.labels.CLASSIFICATION`, `REGRESSION`
ALIGNMENTS = ("auto", "running_text", "words")  # `data.ner.ALIGNMENTS`
# Each split's file option (`FineTuningArguments`).
SPLIT_FILES = {"train": "train_file", "validation": "validation_file", "test": "test_file"}

# The defaults of `TrainingArguments` the fine-tuning jobs change. No `logging_nan_inf_filter`: a non-finite loss stops
# the run before its optimizer step (the reliability plugin's `StopOnNonFiniteLoss`), so Trainer's filter, which
# reads each micro-batch's loss on the host twice, would have nothing to keep out of the log.
TRAINER_DEFAULTS: dict[str, Any] = {"logging_nan_inf_filter": False}


@dataclass
class ModelArguments:
    """The model and tokenizer a job starts from (a checkpoint, or a fresh config of `--config_preset` and
    `--config_overrides`): the first dataclass of every job, read by `job_setup.build_config`, `build_model` and
    `load_tokenizer`."""

    option_group: ClassVar[str] = "model and tokenizer"

    model_name_or_path: str | None = field(
        default=None,
        metadata={
            "help": "Checkpoint folder or Hub id to start from (official ALBERT or albert_hf). "
            "Leave unset to train from scratch with --config_preset / --config_overrides."
        },
    )
    tokenizer_name_or_path: str | None = field(
        default=None,
        metadata={"help": "Tokenizer folder or spiece.model file. Defaults to --model_name_or_path."},
    )
    config_preset: str = field(
        default="base-v2",
        metadata={"help": "Preset used when training from scratch: base/large/xlarge/xxlarge(-v1|-v2)."},
    )
    config_overrides: str | None = field(
        default=None,
        metadata={"help": "Comma-separated config fields, e.g. 'hidden_size=128,num_hidden_layers=2,sharing=none'."},
    )
    attn_implementation: str | None = field(
        default=None, metadata={"help": "eager, sdpa, flash_attention_2, flex_attention (default: sdpa)."}
    )
    # transformers 5 dropped TrainingArguments.overwrite_output_dir; albert_hf's jobs keep the option, with the
    # meaning of `albert_hf.training.run_folder`.
    overwrite_output_dir: bool = field(
        default=False,
        metadata={
            "help": "Use an --output_dir holding another run's model or checkpoints: remove those run files first "
            "(logged; logs under runs/ and other files stay). Never the folder of --model_name_or_path."
        },
    )


def parse_seeds(value) -> list[int]:
    """The seeds of `--seeds`: "0,1,2,3,4" (or a YAML list), each a whole number >= 0, none twice."""
    items = value if isinstance(value, (list, tuple)) else str(value).replace(" ", ",").split(",")
    texts = [str(item).strip() for item in items if str(item).strip()]
    if not texts or not all(text.isdigit() for text in texts):
        raise OptionError(f"--seeds {value!r}: expected seeds as whole numbers >= 0, comma-separated (0,1,2,3,4).")
    seeds = [int(text) for text in texts]
    repeated = sorted({seed for seed in seeds if seeds.count(seed) > 1})
    if repeated:
        raise OptionError(f"--seeds {value!r}: seed {repeated[0]} is given twice; each seed is one run.")
    return seeds


@dataclass
class ProtocolArguments:
    """How the paper fine-tuned (Lan et al., 2020, section 4.2.2 and Table 14): several seeds and their spread, and
    the small tasks started from another task's fine-tuned model. Options of every fine-tuning job."""

    option_group: ClassVar[str] = "fine-tuning protocol (seeds, starting model)"

    seeds: str | None = field(
        default=None,
        metadata={
            "help": "Run the job once per seed, e.g. 0,1,2,3,4: each in <output_dir>/seed-<N>, then "
            "seeds_summary.json and seeds_summary.md (each seed's results, their median, mean, standard deviation "
            "and range, and the median seed, whose prediction files are copied to --output_dir). The same command "
            "again skips the finished seeds and resumes the others."
        },
    )
    init_from_task_model: str | None = field(
        default=None,
        metadata={
            "help": "Start from the encoder of another task's fine-tuned model (a folder or Hub id) with a fresh head "
            "for this task, as the paper started RTE, MRPC and STS-B from its MNLI model; instead of "
            "--model_name_or_path. The tokenizer defaults to that model's."
        },
    )

    def __post_init__(self):
        if self.seeds is not None:
            parse_seeds(self.seeds)

    @property
    def seed_list(self) -> list[int]:
        """The seeds of --seeds ([] when not given)."""
        return [] if self.seeds is None else parse_seeds(self.seeds)


@dataclass
class FineTuningArguments(ProtocolArguments):
    """Data files, sequence length and sample limits shared by all fine-tuning tasks."""

    option_group: ClassVar[str] = "data"

    data_dir: str | None = field(
        default=None, metadata={"help": "Folder with the task's files in their original layout (e.g. glue_data/MRPC)."}
    )
    train_file: str | None = field(default=None, metadata={"help": "Training file (task-specific layout)."})
    validation_file: str | None = field(default=None, metadata={"help": "Evaluation file (task-specific layout)."})
    test_file: str | None = field(default=None, metadata={"help": "Test file to predict (task-specific layout)."})
    max_seq_length: int = field(
        default=128,
        metadata={
            RANGE: Range(min=8),
            "help": "Longest tokenized input; longer inputs are truncated and the count is logged.",
        },
    )
    pad_to_max_length: bool = field(
        default=False,
        metadata={"help": "Pad every input to max_seq_length. Default: pad each batch to its longest input."},
    )
    max_train_samples: int | None = field(
        default=None, metadata={RANGE: COUNT, "help": "Keep only the first N training examples."}
    )
    max_eval_samples: int | None = field(
        default=None, metadata={RANGE: COUNT, "help": "Keep only the first N evaluation examples."}
    )
    max_predict_samples: int | None = field(
        default=None, metadata={RANGE: COUNT, "help": "Keep only the first N test examples."}
    )
    preset: str | None = field(
        default=None,
        metadata={
            "help": "A row of the ALBERT paper's Table 14 as defaults (lr, total batch size, steps, warmup, dropout, "
            "max length): cola, stsb, sst2, mnli, qnli, qqp, rte, mrpc, wnli, race (albert_hf/recipes/finetune/), "
            "or the path of your own .yaml file of options. The command line wins."
        },
    )
    global_batch_size: int | None = field(
        default=None,
        metadata={
            RANGE: COUNT,
            "help": "Training examples per optimizer step over all processes and accumulation steps (a preset gives "
            "the paper's): sets --per_device_train_batch_size to it / (processes x --gradient_accumulation_steps), "
            "or, when --per_device_train_batch_size is given, the accumulation steps.",
        },
    )

    def __post_init__(self):
        super().__post_init__()
        check_arguments(self)  # the declared ranges, for arguments built in Python too


@dataclass(kw_only=True)
class EarlyExitArguments:
    """Adaptive depth (`AlbertConfig.early_exit`): options of the sequence-classification and multiple-choice jobs,
    written into the saved config; an option not given keeps the checkpoint's (or the preset's) value."""

    option_group: ClassVar[str] = "adaptive depth (early exit)"

    early_exit: bool = field(
        default=False,
        metadata={
            "help": "Train an exit classifier after every application of the shared layer (PABEE's loss: the exits' "
            "losses weighted by depth); inference can then stop early (docs/performance.md)."
        },
    )
    early_exit_shared_classifier: bool = field(
        default=False, metadata={"help": "With --early_exit: one classifier shared by every exit."}
    )
    early_exit_patience: int | None = field(
        default=None,
        metadata={"help": "Inference: stop once the prediction stayed the same for this many further exits (0: off)."},
    )
    num_layers_at_inference: int | None = field(
        default=None, metadata={"help": "Inference: run at most this many layer applications (fixed depth)."}
    )

    def early_exit_config(self) -> dict:
        """The config fields given on the command line (the switches only when on)."""
        names = ("early_exit", "early_exit_shared_classifier", "early_exit_patience", "num_layers_at_inference")
        return {name: getattr(self, name) for name in names if getattr(self, name) not in (None, False)}

    def config_fields(self) -> dict:
        """The AlbertConfig fields these options set: checked with the model's config before any work
        (`albert_hf.argument_parsing.check_model_arguments`)."""
        return self.early_exit_config()


@dataclass
class GlueArguments(EarlyExitArguments):
    """The GLUE task and where its files are (`--data_dir` in the original tsv layout, files, or the Hub), and the
    adaptive-depth options of a sequence classifier."""

    option_group: ClassVar[str] = "GLUE"
    # Each split from its file or the GLUE folder of --data_dir (which is read instead of the files); the Hub's GLUE
    # when neither is given (`load_glue_splits` of albert_hf/scripts/glue.py).
    data_splits: ClassVar[DataSplits] = DataSplits(
        given_by={split: (option, "data_dir") for split, option in SPLIT_FILES.items()},
        fallback=("dataset_name",),
        exclusive=tuple(("data_dir", option) for option in SPLIT_FILES.values()),
    )

    task_name: str = field(metadata={"help": f"GLUE task: {', '.join(GLUE_TASK_NAMES)}."})
    dataset_name: str = field(
        default="nyu-mll/glue", metadata={"help": "Hub dataset used when neither --data_dir nor files are given."}
    )
    ax_file: str | None = field(
        default=None,
        metadata={"help": "MNLI only: glue_data/diagnostic/diagnostic.tsv; --do_predict then also writes AX.tsv."},
    )
    skip_malformed_rows: bool = field(
        default=False,
        metadata={"help": "Skip (and count) tsv rows with a wrong column count or unknown label instead of failing."},
    )


@dataclass
class ClassifyArguments(EarlyExitArguments):
    """Where the table's texts and labels are."""

    option_group: ClassVar[str] = "table"
    # Each split from its file, or every split from --dataset_name when no file is given (files and a dataset are
    # refused together by the job).
    data_splits: ClassVar[DataSplits] = DataSplits(
        given_by={split: (option,) for split, option in SPLIT_FILES.items()}, fallback=("dataset_name",)
    )

    dataset_name: str | None = field(
        default=None,
        metadata={
            "help": "Dataset whose train/validation/test splits to read when no files are given: a Hub name, a local "
            "dataset folder or a save_to_disk folder."
        },
    )
    dataset_config_name: str | None = field(default=None, metadata={"help": "Its configuration."})
    text_column: str = field(default="text", metadata={"help": "Column of the text to classify."})
    text_pair_column: str | None = field(
        default=None, metadata={"help": "Column of the second text, for sentence pairs (entailment, similarity)."}
    )
    label_column: str = field(
        default="label",
        metadata={"help": "Column of the labels: names or class ids (classification) or scores (regression)."},
    )
    label_kind: str | None = field(
        default=None,
        metadata={
            "help": "classification or regression, where the labels allow both: integer scores (a 1-5 rating) "
            "learned as a score, or numbers that name classes. Default: read off the training split."
        },
    )

    def __post_init__(self):
        if self.label_kind not in (None, *LABEL_KINDS):
            raise UserError(f"--label_kind must be {' or '.join(LABEL_KINDS)}, got {self.label_kind!r}.")


@dataclass
class NerArguments:
    """How NER's words and tags become token labels (which sub-tokens are trained on, how words join into running
    text) and where they are read (a CoNLL file's tag column, a table's or Hub dataset's word and tag columns)."""

    option_group: ClassVar[str] = "NER"
    # Each split from its file, else from --data_dir's CoNLL files, else from --dataset_name.
    data_splits: ClassVar[DataSplits] = DataSplits(
        given_by={split: (option, "data_dir", "dataset_name") for split, option in SPLIT_FILES.items()}
    )

    label_all_tokens: bool = field(
        default=False,
        metadata={
            "help": "Train on every sub-token of a word (B-X becomes I-X after the first), not only the first. "
            "Evaluation always reads the first sub-token."
        },
    )
    tag_column: int = field(default=-1, metadata={"help": "Column of the NER tag in CoNLL files (default: last)."})
    dataset_name: str | None = field(
        default=None, metadata={"help": "Hub dataset (e.g. eriktks/conll2003) when no local files are given."}
    )
    tokens_column: str | None = field(
        default=None,
        metadata={
            "help": "Read the files (json, jsonl, parquet) or --dataset_name as a table: the column holding each "
            "sentence's list of words (default with --tags_column: tokens)."
        },
    )
    tags_column: str | None = field(
        default=None,
        metadata={
            "help": "With tables: the column holding each sentence's list of tags, as names (B-PER) or as ids "
            "(named by the column's ClassLabel feature or by --tag_names; default with --tokens_column: ner_tags)."
        },
    )
    tag_names: str | None = field(
        default=None, metadata={"help": "With tables whose tags are ids: the tag names in id order, comma-separated."}
    )
    alignment: str = field(
        default=ALIGNMENTS[0],
        metadata={
            "help": "How words become the model's input: 'running_text' joins them as a language without spaces "
            "writes them (Japanese, Chinese) and tokenizes the text once, 'words' encodes each word as if a space "
            "preceded it (one '▁' per word, as English is written), 'auto' chooses from the script of the data.",
            "choices": list(ALIGNMENTS),
        },
    )

    def reads_tables(self) -> bool:
        """Whether the data are tables read by column (`albert_hf.data.sources`) rather than CoNLL/Hub-layout files."""
        return bool(self.tokens_column or self.tags_column or self.tag_names)


# Options of FineTuningArguments that SQuAD has no use for: evaluation is its prediction (predictions.json).
UNREAD_OPTIONS = ("data_dir", "test_file", "max_predict_samples")


@dataclass
class SquadArguments(FineTuningArguments):
    """Data, windowing and answer-extraction options of the SQuAD job: the fine-tuning data arguments, with SQuAD's
    window length and preset rows, and its own options."""

    option_group: ClassVar[str] = "SQuAD"
    # Training and evaluation questions from their file, else from --dataset_name; no test split.
    data_splits: ClassVar[DataSplits] = DataSplits(
        given_by={split: (SPLIT_FILES[split], "dataset_name") for split in ("train", "validation")}
    )

    train_file: str | None = field(
        default=None, metadata={"help": "Training file: official SQuAD json, or the flattened layout (json/jsonl)."}
    )
    validation_file: str | None = field(default=None, metadata={"help": "Evaluation file, same layouts."})
    max_seq_length: int = field(
        default=384, metadata={RANGE: Range(min=8), "help": "Window length in tokens, question included."}
    )
    max_train_samples: int | None = field(
        default=None, metadata={RANGE: COUNT, "help": "Keep only the first N training questions."}
    )
    max_eval_samples: int | None = field(
        default=None, metadata={RANGE: COUNT, "help": "Keep only the first N evaluation questions."}
    )
    preset: str | None = field(
        default=None,
        metadata={
            "help": "The paper's Table 14 row as defaults: squad1.1 or squad2.0 (lr, total batch 48, steps, warmup, "
            "dropout, max length; squad2.0 also sets --version_2_with_negative; albert_hf/recipes/squad/), or the "
            "path of your own .yaml file of options. The command line wins."
        },
    )
    dataset_name: str | None = field(
        default=None,
        metadata={"help": "Hub dataset (e.g. rajpurkar/squad_v2) used when no file is given; needs a network."},
    )
    version_2_with_negative: bool = field(
        default=False, metadata={"help": "SQuAD v2.0: some questions have no answer (null answer at [CLS])."}
    )
    doc_stride: int = field(
        default=128,
        metadata={
            RANGE: COUNT,
            "help": "Context tokens shared by consecutive windows (the tokenizer's stride; the original scripts' "
            "doc_stride was the step between windows instead).",
        },
    )
    max_query_length: int = field(
        default=64,
        metadata={RANGE: COUNT, "help": "Questions longer than this many tokens are cut (the count is logged)."},
    )
    n_best_size: int = field(
        default=20, metadata={RANGE: COUNT, "help": "Starts and ends tried per window, and answers kept per question."}
    )
    max_answer_length: int = field(default=30, metadata={RANGE: COUNT, "help": "Longest answer, in tokens."})
    null_score_diff_threshold: float = field(
        default=0.0,
        metadata={RANGE: Range(), "help": "v2.0: answer '' when null score - best span score exceeds this."},
    )

    def __post_init__(self):
        super().__post_init__()
        unread = [f"--{name}" for name in UNREAD_OPTIONS if getattr(self, name) is not None]
        if unread:
            raise UserError(
                f"SQuAD does not read {unread}: it answers the questions of --validation_file (--do_eval), and writes "
                "predictions.json for them."
            )

    def check_window_room(self) -> None:
        """A window holds [CLS] question [SEP] context [SEP]; the stride must leave context tokens to advance by."""
        context_room = self.max_seq_length - self.max_query_length - 3
        if self.doc_stride >= context_room:
            raise UserError(
                f"--doc_stride {self.doc_stride} must be smaller than the context room of a window, max_seq_length "
                f"({self.max_seq_length}) - max_query_length ({self.max_query_length}) - 3 = {context_room}."
            )


@dataclass
class MultipleChoiceArguments(EarlyExitArguments):
    """Where the questions and their choices are (SWAG or RACE files, a table's columns, or the Hub), and the
    adaptive-depth options of a multiple-choice model."""

    option_group: ClassVar[str] = "multiple choice"
    # Each split from its file, else from --dataset_name; no GLUE-like folder.
    data_splits: ClassVar[DataSplits] = DataSplits(
        given_by={split: (option, "dataset_name") for split, option in SPLIT_FILES.items()}, unread=("data_dir",)
    )

    dataset_name: str | None = field(
        default=None, metadata={"help": "Hub dataset (e.g. allenai/swag) used for splits without a local file."}
    )
    dataset_config_name: str | None = field(default=None, metadata={"help": "Its configuration (e.g. regular, all)."})
    context_column: str | None = field(
        default=None,
        metadata={
            "help": "Read the files (csv, tsv, json, jsonl, parquet) or --dataset_name as a table: the column of "
            "each question's context (the first segment of every pair)."
        },
    )
    choice_columns: list[str] = field(
        default_factory=list,
        metadata={"help": "With --context_column: one column per choice, or one column holding the list of choices."},
    )
    question_column: str | None = field(
        default=None,
        metadata={"help": "With --context_column: a question column put before each choice (RACE-like tables)."},
    )
    label_column: str = field(
        default="label",
        metadata={"help": "With --context_column: the column of the right choice (index, digit or letter)."},
    )
