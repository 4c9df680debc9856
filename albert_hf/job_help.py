"""`albert-hf <job> --help`: what the job does and its own options, at once; `--help-all` adds Trainer's.

A job's parser is `albert_hf.options.job_parser`: its own dataclasses' options, then transformers' `TrainingArguments`
through `HfArgumentParser`. `--help` prints that same parser without Trainer's options, made from the job's dataclasses
(`albert_hf.arguments`, `albert_hf.pretraining.recipes`, which import neither torch nor transformers), so it
answers at once; the defaults it shows are the job's own (the recipe's value where the job applies a recipe of its own,
the Trainer options it sets). `--help-all` then loads transformers and prints `TrainingArguments`' options with the
defaults this job gives them. The commands that parse with argparse (train-tokenizer, export, import) print their own
parser's help. tests/test_cli_help.py compares the options listed with those of the parser the job runs with.
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
import textwrap
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .arguments import (
    TRAINER_DEFAULTS,
    ClassifyArguments,
    FineTuningArguments,
    GlueArguments,
    ModelArguments,
    MultipleChoiceArguments,
    NerArguments,
    SquadArguments,
)
from .folder_commands import export_command_parser, import_command_parser, train_tokenizer_command_parser
from .options import HELP_ALL, job_parser, shown
from .pretraining.recipes import (
    QUICKSTART_ALIASES,
    RECIPES,
    PretrainingDataArguments,
    PretrainingOptions,
    QuickstartArguments,
    RecipeArguments,
)
from .pretraining.recipes import TRAINER_DEFAULTS as PRETRAINING_DEFAULTS


@dataclass(frozen=True)
class JobHelp:
    """What `albert-hf <job> --help` says of a job that parses dataclasses with Trainer's arguments."""

    description: str
    argument_types: tuple[type, ...]  # the job's own option dataclasses, as its parser reads them
    recipe: str | None = None  # the recipe the job applies when no --recipe is given
    trainer_defaults: Mapping[str, Any] = field(default_factory=dict)  # Trainer options the job gives other defaults
    notes: tuple[str, ...] = ()


FINE_TUNING_NOTE = (
    "--preset <row> fills, from the ALBERT paper's Table 14, the learning rate, batch size, steps, warm-up, dropout "
    "and --max_seq_length that are not given."
)
PRETRAINING = (ModelArguments, PretrainingDataArguments, RecipeArguments, PretrainingOptions)

JOBS: dict[str, JobHelp] = {
    "pretrain": JobHelp(
        "Pretrain ALBERT from scratch, or continue a checkpoint (--model_name_or_path), on text files or a dataset: "
        "sentence pairs cut from the documents, n-gram masked-LM and sentence-order prediction, LAMB with ALBERT's "
        "schedule, on Trainer. A --recipe (paper, laptop, tiny, quickstart, smoke) fills every option not given; "
        "saves the model and tokenizer to --output_dir.",
        PRETRAINING,
        trainer_defaults=PRETRAINING_DEFAULTS,
    ),
    "quickstart": JobHelp(
        "Train a SentencePiece tokenizer and a small ALBERT from scratch on an offline corpus (the prose shipped "
        "with Python, or --corpus) in minutes on a CPU, then report the held-out MLM and SOP figures beside "
        "baselines and plot the learning curves. The pretraining job with the quickstart recipe (--fast: smoke); "
        "warm-up, logging and evaluation steps follow --max_steps.",
        (*PRETRAINING, QuickstartArguments),
        recipe="quickstart",
        trainer_defaults={**PRETRAINING_DEFAULTS, "output_dir": "quickstart-output"},
        notes=("Also: " + ", ".join(f"{old} is {new}" for old, new in QUICKSTART_ALIASES.items()) + ".",),
    ),
    "glue": JobHelp(
        "Fine-tune ALBERT on a GLUE task (--task_name) from --data_dir (the original tsv layout), from "
        "--train_file/--validation_file/--test_file, or from the Hub; evaluate with the task's metrics, and with "
        "--do_predict write the leaderboard file.",
        (ModelArguments, FineTuningArguments, GlueArguments),
        trainer_defaults=TRAINER_DEFAULTS,
        notes=(FINE_TUNING_NOTE,),
    ),
    "classify": JobHelp(
        "Fine-tune ALBERT to classify or score the texts of any labelled table (csv, tsv, json/jsonl, parquet, or "
        "--dataset_name): the training split's labels decide between a classification (accuracy, macro-F1) and a "
        "regression (Pearson, Spearman); --do_predict writes predictions_test.tsv.",
        (ModelArguments, FineTuningArguments, ClassifyArguments),
        trainer_defaults=TRAINER_DEFAULTS,
        notes=(FINE_TUNING_NOTE,),
    ),
    "ner": JobHelp(
        "Fine-tune ALBERT for named-entity recognition on CoNLL column files (--data_dir or --train_file ...), json "
        "lines in the Hub layout, a Hub dataset or tables read by column; entity-level evaluation (seqeval), and "
        "with --do_predict predictions_test.txt.",
        (ModelArguments, FineTuningArguments, NerArguments),
        trainer_defaults=TRAINER_DEFAULTS,
        notes=(FINE_TUNING_NOTE,),
    ),
    "squad": JobHelp(
        "Fine-tune ALBERT on SQuAD v1.1 or v2.0 (--version_2_with_negative) from the official json or the Hub's "
        "layout; evaluation answers every question from all its windows, writes predictions.json and reports the "
        "official exact match and F1.",
        (ModelArguments, SquadArguments),
        trainer_defaults=TRAINER_DEFAULTS,
        notes=("--preset squad1.1 or squad2.0 fills the paper's Table 14 row for the options not given.",),
    ),
    "multiple-choice": JobHelp(
        "Fine-tune ALBERT on multiple choice (SWAG or RACE json, a RACE folder, or tables read by column with "
        "--context_column and --choice_columns); the metric is accuracy, and --do_predict writes "
        "predictions_test.jsonl.",
        (ModelArguments, FineTuningArguments, MultipleChoiceArguments),
        trainer_defaults=TRAINER_DEFAULTS,
        notes=(FINE_TUNING_NOTE,),
    ),
}
# The commands that parse with argparse alone: their parser is their help.
ARGPARSE_COMMANDS: dict[str, Callable[[], argparse.ArgumentParser]] = {
    "train-tokenizer": train_tokenizer_command_parser,
    "export": export_command_parser,
    "import": import_command_parser,
}


def wants_help(argv: list[str]) -> bool:
    return any(item in ("-h", "--help", HELP_ALL) for item in argv)


def job_help(command: str, everything: bool = False) -> str:
    """The help text of `albert-hf <command>`; with `everything`, Trainer's options too (loads transformers)."""
    if command in ARGPARSE_COMMANDS:
        return ARGPARSE_COMMANDS[command]().format_help()
    job = JOBS[command]
    text = help_parser(command, job).format_help()
    return text + trainer_help(command, job) if everything else text


def help_parser(command: str, job: JobHelp) -> argparse.ArgumentParser:
    """The job's parser without Trainer's options (`job_parser`), with the job's description and defaults."""
    recipe = RECIPES[job.recipe] if job.recipe else {}
    return job_parser(
        job.argument_types,
        with_trainer=False,
        prog=f"albert-hf {command}",
        description=_paragraphs(job.description),
        epilog=_paragraphs(*job.notes, *_trainer_lines(command, job, recipe)),
        shown_defaults={**recipe, **({"recipe": job.recipe} if job.recipe else {})},
        recipe=job.recipe,
    )


def _trainer_lines(command: str, job: JobHelp, recipe: Mapping[str, Any]) -> list[str]:
    """The lines on Trainer's options: the values the job gives some of them, and where the others are listed."""
    own = {item.name for dataclass_type in job.argument_types for item in dataclasses.fields(dataclass_type)}
    values = {**job.trainer_defaults, **{name: value for name, value in recipe.items() if name not in own}}
    lines = []
    if values:
        source = f" (with the {job.recipe} recipe)" if job.recipe else ""
        listed = ", ".join(f"--{name} {shown(value)}" for name, value in values.items())
        lines.append(f"Trainer options this job sets{source}, unless given: {listed}.")
    lines.append(
        "Each option may also be written with hyphens (--output-dir). Trainer's options (transformers' "
        f"TrainingArguments: --output_dir, --do_train, --max_steps, --learning_rate, ...) are listed by "
        f"`albert-hf {command} {HELP_ALL}`."
    )
    return lines


def trainer_help(command: str, job: JobHelp) -> str:
    """Trainer's options (`TrainingArguments`), with the defaults this job gives them, as the job's parser prints
    them; imports transformers."""
    from transformers import HfArgumentParser, TrainingArguments

    recipe = RECIPES[job.recipe] if job.recipe else {}
    parser = HfArgumentParser(TrainingArguments, prog=f"albert-hf {command}", usage=argparse.SUPPRESS, add_help=False)
    trainer_fields = {item.name for item in dataclasses.fields(TrainingArguments)}
    parser.set_defaults(**{k: v for k, v in {**job.trainer_defaults, **recipe}.items() if k in trainer_fields})
    text = parser.format_help().strip("\n")
    _heading, _, options = text.partition("\n")  # argparse's "options:" heading
    return f"\nTrainer options (transformers.TrainingArguments, with this job's defaults):\n{options}\n"


def _paragraphs(*texts: str) -> str:
    width = shutil.get_terminal_size().columns - 2  # argparse's width for the options
    return "\n\n".join(textwrap.fill(text, width, break_on_hyphens=False) for text in texts)
